// The one signature every graph pass has (docs/ARCHITECTURE.md): it rewrites the model in place and
// says whether it changed anything. Passes that need options take them from PassContext.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/model.h"

namespace onnxptq::passes {

// What a pipeline hands to its passes: options shared by several passes, and where they say
// what they did (one line each; the CLI prints them under --verbose).
struct PassContext {
  int64_t target_opset = 13;  // opset_upgrade: models below this opset are converted to it
  // infer_shapes: libonnx's inference (skip_onnx_shape turns it off), a run of the engine on one
  // random sample for what static inference cannot give (skip_symbolic_shape turns it off), and
  // guess_output_rank for nodes neither could type (output rank and type of input 0, as ORT).
  bool onnx_shape = true;
  bool engine_shape = true;
  bool guess_output_rank = false;
  // Shapes of graph inputs for that sample run; a dynamic dim not given here is 1 in front
  // (batch) and 64 elsewhere.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  bool verbose = false;
  std::vector<std::string> log;

  // vai_q_onnx's should_quantize_node, for the enable_dpu rewrites (dpu.h): a node is rewritten
  // only when its op type is in op_types_to_quantize (empty: any), its name in nodes_to_quantize
  // (empty: any) and not in nodes_to_exclude.
  std::set<std::string> op_types_to_quantize, nodes_to_quantize, nodes_to_exclude;
  bool should_quantize(const ir::Node& node) const {
    return (op_types_to_quantize.empty() || op_types_to_quantize.count(node.op_type)) &&
           (nodes_to_quantize.empty() || nodes_to_quantize.count(node.name)) && !nodes_to_exclude.count(node.name);
  }
  // The name filters only (vai_q_onnx's ConvertHardSigmoidToDPUVersion looks at no op type).
  bool name_selected(const ir::Node& node) const {
    return (nodes_to_quantize.empty() || nodes_to_quantize.count(node.name)) && !nodes_to_exclude.count(node.name);
  }
};

using PassFunction = bool (*)(ir::Model& model, PassContext& context);

struct PassInfo {
  const char* name;     // as on the command line and in pipelines: "fold_batch_norm"
  const char* purpose;  // one line
  PassFunction run;
};

}  // namespace onnxptq::passes
