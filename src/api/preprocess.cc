// quant_pre_process (`onnxptq preprocess`): the model format conversions, then the preparation
// pipeline of passes/pipeline.h, on a copy of the model.
#include "onnxptq/preprocess.h"

#include "ir/model.h"
#include "passes/model_format.h"
#include "passes/pipeline.h"

namespace onnxptq {

void check_preprocess_options(const PreprocessOptions& options) {
  for (const std::string& name : options.passes) passes::find_pass(name);
}

Model preprocess(const Model& model, const PreprocessOptions& options) {
  check_preprocess_options(options);
  passes::PrepareOptions prepare;
  prepare.skip_optimization = options.skip_optimization;
  prepare.skip_onnx_shape = options.skip_onnx_shape;
  prepare.skip_symbolic_shape = options.skip_symbolic_shape;
  prepare.guess_output_rank = options.guess_output_rank;
  prepare.target_opset = options.target_opset;
  prepare.input_shapes = options.input_shapes;
  prepare.passes = options.passes;

  ir::Model m = ir::clone_model(model.ir());  // shares the tensors' bytes until a pass changes one
  // The format conversions first, as quantize_static runs them.
  passes::PassContext converting;
  if (options.convert_fp16_to_fp32) passes::convert_fp16_to_fp32(m, converting);
  if (options.convert_nchw_to_nhwc) passes::convert_nchw_to_nhwc(m, converting);
  if (options.conversion_log)
    for (const std::string& line : converting.log) options.conversion_log(line);
  passes::PrepareResult result = passes::prepare(m, prepare);
  if (options.pass_log)
    for (const std::string& line : result.log) options.pass_log(line);
  // As quant_pre_process does, so ONNX Runtime's quantizer knows the model was pre-processed.
  bool marked = false;
  for (auto& [key, value] : m.metadata_props)
    if (key == "onnx.quant.pre_process") {
      value = "onnxruntime.quant";
      marked = true;
    }
  if (!marked) m.metadata_props.emplace_back("onnx.quant.pre_process", "onnxruntime.quant");
  return Model(std::make_shared<const ir::Model>(std::move(m)));
}

}  // namespace onnxptq
