// convert_fp32_to_bf16 and convert_fp16_to_bf16 (Quark's tools): the model quantized with the BF16
// preset on its random sample (UseRandomData), in the format asked for; a float16 model is made
// float32 first and gets Casts at its float16 inputs and outputs afterwards
// (Quark's add_fp16_input_output_cast).
#include <nlohmann/json.hpp>

#include "onnxptq/error.h"
#include "passes/model_format.h"
#include "quant/config_keys.h"
#include "quant/presets.h"
#include "quant/quantize.h"
#include "tools/convert.h"

namespace onnxptq::tools {

namespace {

constexpr int64_t kFloat = static_cast<int64_t>(ir::DataType::Float);
constexpr int64_t kFloat16 = static_cast<int64_t>(ir::DataType::Float16);

// The float16 interface back: each input named in `inputs` is declared float16 and cast to float
// for its readers; each output in `outputs` is cast to float16 under its name.
void float16_edges(ir::Model& m, const std::set<std::string>& inputs, const std::set<std::string>& outputs) {
  ir::Graph& g = *m.graph;
  for (ir::Value* v : std::vector<ir::Value*>(g.inputs())) {
    if (!inputs.count(v->name())) continue;
    ir::Value* f = g.add_unique_value(v->name() + "_cast");
    f->type = v->type;
    g.replace_uses(v, f);
    v->type.elem_type = ir::DataType::Float16;
    ir::Node* c = g.add_node("Cast", {v}, {f}, g.fresh_name(v->name() + "_Cast"));
    c->set_attribute(ir::Attribute::of_int("to", kFloat));
  }
  for (ir::Value* v : std::vector<ir::Value*>(g.outputs())) {
    if (!outputs.count(v->name()) || !v->producer()) continue;
    ir::Value* f = g.add_unique_value(v->name() + "_cast");
    f->type = v->type;
    g.replace_uses(v, f);
    g.set_node_output(v->producer(), v->producer_output(), f);
    v->type.elem_type = ir::DataType::Float16;
    ir::Node* c = g.add_node("Cast", {f}, {v}, g.fresh_name(v->name() + "_Cast"));
    c->set_attribute(ir::Attribute::of_int("to", kFloat16));
  }
  g.sort_nodes();
}

std::set<std::string> float16_names(const std::vector<ir::Value*>& values) {
  std::set<std::string> out;
  for (const ir::Value* v : values)
    if (v->type.is_tensor() && v->type.elem_type == ir::DataType::Float16 && !v->has_initializer())
      out.insert(v->name());
  return out;
}

}  // namespace

ir::Model to_bfloat16(const ir::Model& model, Bf16Format format, bool from_float16, ConvertResult& result) {
  std::set<std::string> fp16_inputs = float16_names(model.graph->inputs());
  std::set<std::string> fp16_outputs = float16_names(model.graph->outputs());
  if (from_float16 && fp16_inputs.empty() && fp16_outputs.empty()) {
    bool any = false;
    for (const ir::Value* v : model.graph->initializers())
      any = any || v->initializer().dtype() == ir::DataType::Float16;
    if (!any) throw Error("fp16_to_bf16: the model has no float16 input, output or initializer: use fp32_to_bf16");
  }
  std::optional<ir::Model> widened;
  if (from_float16) {
    widened = ir::clone_model(model);
    passes::PassContext context;
    passes::convert_fp16_to_fp32(*widened, context);
  }
  const ir::Model& source = widened ? *widened : model;

  quant::QuantConfig config;
  quant::apply_preset(config, "BF16");
  quant::apply_extra_option(config, "UseRandomData", true);
  switch (format) {
    case Bf16Format::WithCast:
      quant::apply_extra_option(config, "BF16QDQToCast", true);
      break;
    case Bf16Format::CustomQdq:
      quant::apply_extra_option(config, "FloatQDQAsCustomOps", true);
      quant::apply_extra_option(config, "BF16QDQToCast", false);
      break;
    case Bf16Format::SimulateBf16:
      quant::apply_extra_option(config, "EnableVaimlBF16", true);
      break;
  }
  std::unique_ptr<calib::DataReader> reader = quant::random_data_reader(source, config);
  auto log = [&](const std::string& line) {
    if (line.rfind("warning: ", 0) == 0) result.log.push_back(line);
  };
  quant::QuantizeResult q = quant::quantize_static(source, *reader, config, log);
  if (from_float16) float16_edges(q.model, fp16_inputs, fp16_outputs);
  result.changed = q.plan.tensors.size();
  result.log.push_back(std::to_string(q.plan.quantized_nodes.size()) + " nodes in bfloat16, " +
                       std::to_string(q.plan.tensors.size()) + " bfloat16 tensors");
  return std::move(q.model);
}

}  // namespace onnxptq::tools
