// The seeds' model tools (tools/convert.h, passes/model_format.h for fix_shapes) over the public types.
#include "onnxptq/convert.h"

#include "ir/model.h"
#include "onnxptq/error.h"
#include "passes/model_format.h"
#include "tools/convert.h"

namespace onnxptq {

namespace {

template <class Fn>
Converted converted(Fn fn) {
  ConvertResult result;
  ir::Model m = fn(result);
  return {Model(std::make_shared<const ir::Model>(std::move(m))), std::move(result)};
}

}  // namespace

Converted remove_qdq(const Model& model) {
  return converted([&](ConvertResult& r) { return tools::remove_qdq(model.ir(), r); });
}

Converted block_to_standard_ops(const Model& model) {
  return converted([&](ConvertResult& r) { return tools::block_to_standard_ops(model.ir(), r); });
}

Converted qdq_to_qop(const Model& model) {
  return converted([&](ConvertResult& r) { return tools::qdq_to_qop(model.ir(), r); });
}

std::map<std::string, std::vector<int64_t>> parse_fix_shapes(const std::string& text) {
  return passes::parse_fix_shapes(text, "fix_shapes");
}

Converted fix_shapes(const Model& model, const std::map<std::string, std::vector<int64_t>>& shapes) {
  return converted([&](ConvertResult& r) {
    ir::Model m = ir::clone_model(model.ir());
    passes::PassContext context;
    passes::fix_shapes(m, shapes, context);
    r.log = context.log;
    for (const auto& node : m.graph->nodes()) r.changed += node->outputs().size();
    return m;
  });
}

Converted a8w8_npu_to_cpu(const Model& model) {
  return converted([&](ConvertResult& r) { return tools::a8w8_npu_to_cpu(model.ir(), r); });
}

Converted u16u8_to_u8u8(const Model& model) {
  return converted([&](ConvertResult& r) { return tools::u16u8_to_u8u8(model.ir(), r); });
}

Converted bias_int32_to_int16(const Model& model) {
  return converted([&](ConvertResult& r) { return tools::bias_int32_to_int16(model.ir(), r); });
}

Converted lstm_to_customlstm(const Model& model) {
  return converted([&](ConvertResult& r) { return tools::lstm_to_customlstm(model.ir(), r); });
}

Converted fp32_to_fp16(const Model& model, const Fp16Options& options) {
  return converted([&](ConvertResult& r) { return tools::fp32_to_fp16(model.ir(), options, r); });
}

Bf16Format parse_bf16_format(const std::string& name) {
  if (name == "with_cast") return Bf16Format::WithCast;
  if (name == "customqdq") return Bf16Format::CustomQdq;
  if (name == "simulate_bf16") return Bf16Format::SimulateBf16;
  if (name == "bf16")
    throw unsupported(
        "format 'bf16' (every tensor retyped bfloat16) is not built: ONNX Runtime's CPU kernels and onnxptq's "
        "engine do not run bfloat16 convolutions; use with_cast, customqdq or simulate_bf16");
  throw Error("format '" + name + "' is not one of with_cast, customqdq, simulate_bf16, bf16");
}

Converted fp32_to_bf16(const Model& model, Bf16Format format) {
  return converted([&](ConvertResult& r) { return tools::to_bfloat16(model.ir(), format, false, r); });
}

Converted fp16_to_bf16(const Model& model, Bf16Format format) {
  return converted([&](ConvertResult& r) { return tools::to_bfloat16(model.ir(), format, true, r); });
}

}  // namespace onnxptq
