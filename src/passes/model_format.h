// The model format conversions the seeds run before anything else (vai_q_onnx 1.16's
// quantize_static): float16 models to float32, NCHW image inputs to NHWC. Each is a pass of the
// usual signature.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace onnxptq::passes {

// convert_fp16_to_fp32 (vai_q_onnx 1.16's): every float16 tensor (initializers, Constant and other
// tensor attributes, in subgraphs too) widened exactly to float; every float16 value type (graph
// inputs, outputs, value_info) becomes float; Cast(to=FLOAT16) becomes Cast(to=FLOAT), as do the
// dtype attributes of the random and EyeLike ops; Casts of the main graph that are then float to
// float are removed. Error for sparse initializers (kept serialized by the IR, they cannot be
// widened).
bool convert_fp16_to_fp32(ir::Model& model, PassContext& context);

// convert_nchw_to_nhwc (vai_q_onnx 1.16's): initializer-named graph inputs stop being inputs; every
// graph input of rank 4 with fixed C, H, W and H > C, W > C is declared [N, H, W, C] and gets one
// Transpose(perm=[0,3,1,2]) back to what its users read; an input that does not qualify (not 4-D,
// dynamic C/H/W, already NHWC) is left as it is, with a line in context.log saying why. When every
// input was converted, rank-4 outputs that qualify the same way get a Transpose(perm=[0,2,3,1]) and
// the name `<output>_transpose`. A new Transpose meeting another Transpose is composed with it
// (removed when the two cancel), so a model that transposes its input first keeps no transpose.
bool convert_nchw_to_nhwc(ir::Model& model, PassContext& context);

// FixShapes (Quark's fix_shapes and convert_dynamic_to_fixed): "in:[1,224,224,3];out:[1,1000]", a
// shape per graph input or output name, as a map. Error naming the entry that is not NAME:[d,...]
// with positive whole dims; `what` names the option in messages.
std::map<std::string, std::vector<int64_t>> parse_fix_shapes(const std::string& text, const std::string& what);

// The named inputs and outputs take the given shapes (Error naming one that the model does not
// have, whose rank or a fixed dim contradicts the model, or an input left dynamic), then one run of
// the engine on a seeded random sample gives every node output of the main graph its element type
// and static shape, stored as value_info (Error naming an output whose given shape the run
// contradicts). Shapes after data-dependent ops (NonMaxSuppression, NonZero) are those of that
// sample: context.log warns of them, as Quark does.
void fix_shapes(ir::Model& model, const std::map<std::string, std::vector<int64_t>>& shapes, PassContext& context);

// The two, as passes that `--passes` can name.
const std::vector<PassInfo>& model_format_passes();

}  // namespace onnxptq::passes
