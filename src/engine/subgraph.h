// A part of a model as a model of its own, to run some values from others: the nodes that compute
// `outputs` from `inputs` (values of the model, which become the part's graph inputs) and the
// model's constants. The same cut as onnx.utils.extract_model (onnx/utils.py, Extractor), kept
// in memory: a Session on the part runs only those nodes, fed intermediate values.
#pragma once

#include <string>
#include <vector>

#include "ir/model.h"

namespace onnxptq::engine {

// The nodes of `model`'s main graph needed to compute `outputs` when the values named in
// `inputs` are given: walking back from each output, a value in `inputs` stops the walk, an
// initializer is kept as one (a graph input with an initializer: the value it has when not fed),
// and any other value brings its producer (and the values its subgraphs read). Nodes in
// topological order; the types and value_info of the values kept; tensors share storage with
// `model`. Error for a name the graph does not have, for a value needed that is a graph input
// without initializer not in `inputs` (naming it), and for an input that a kept node would also
// compute (the inputs do not cut the model there).
ir::Model extract_model(const ir::Model& model, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs);

}  // namespace onnxptq::engine
