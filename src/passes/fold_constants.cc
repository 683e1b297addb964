// Turns Constant nodes into initializers and computes, with the engine, nodes whose inputs are all
// constants, replacing them by initializers.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "engine/session.h"
#include "onnxptq/error.h"
#include "passes/optimize.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {
namespace {

// A folded tensor may be at most this many times the bytes of the constants it was computed from
// (int8 to float is 4x), or this absolute size: generators (ConstantOfShape, Expand, Tile, Range)
// make large tensors from a few numbers, and storing them would swell the model for nothing.
constexpr size_t kMaxGrowth = 4;
constexpr size_t kSmallBytes = 64 * 1024;

// The tensor a Constant node holds, whichever attribute it uses; nullopt for sparse values.
std::optional<ir::Tensor> constant_node_value(const ir::Node& n) {
  if (n.attributes.size() != 1) return std::nullopt;
  const ir::Attribute& a = n.attributes[0];
  auto count = [](size_t n) { return std::vector<int64_t>{static_cast<int64_t>(n)}; };
  if (a.name == "value" && a.type == ir::AttrType::Tensor) return a.t;
  if (a.name == "value_float") return ir::Tensor::from_values<float>({}, std::vector<float>{a.f});
  if (a.name == "value_floats") return ir::Tensor::from_values<float>(count(a.floats.size()), a.floats);
  if (a.name == "value_int") return ir::Tensor::from_values<int64_t>({}, std::vector<int64_t>{a.i});
  if (a.name == "value_ints") return ir::Tensor::from_values<int64_t>(count(a.ints.size()), a.ints);
  if (a.name == "value_string") return ir::Tensor::from_strings({}, {a.s});
  if (a.name == "value_strings") return ir::Tensor::from_strings(count(a.strings.size()), a.strings);
  return std::nullopt;
}

// Ops never folded: quantize/dequantize carry the model's quantization format, which folding
// would turn back into float weights.
bool never_folded(const ir::Node& n) {
  static const std::unordered_set<std::string> ops = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"};
  return !(n.domain.empty() || n.domain == "ai.onnx") || ops.count(n.op_type) || !n.subgraphs().empty() ||
         engine::is_nondeterministic(n);
}

// Runs `node` alone on its constant inputs; nullopt when the engine cannot (no kernel, bad data).
std::optional<std::vector<ir::Tensor>> run_alone(const ir::Model& model, const ir::Node& node) {
  ir::Model m;
  m.ir_version = std::max<int64_t>(model.ir_version, 4);
  m.opset_import = model.opset_import;
  ir::Graph& g = *m.graph;
  std::vector<ir::Value*> inputs;
  for (const ir::Value* in : node.inputs()) {
    if (!in) {
      inputs.push_back(nullptr);
      continue;
    }
    ir::Value* v = g.find_value(in->name());
    if (!v) {
      v = g.add_value(in->name());
      g.set_initializer(v, *constant_of(in));
    }
    inputs.push_back(v);
  }
  std::vector<ir::Value*> outputs;
  for (const ir::Value* out : node.outputs()) outputs.push_back(out ? g.add_value(out->name()) : nullptr);
  ir::Node* copy = g.add_node(node.op_type, inputs, outputs, node.name, node.domain);
  for (const ir::Attribute& a : node.attributes) copy->attributes.push_back(ir::clone_attribute(a, g));
  for (ir::Value* out : outputs)
    if (out) g.add_output(out);
  try {
    engine::SessionOptions options;
    options.threads = 1;
    options.optimize = false;
    engine::Session session(m, options);
    return session.run({});
  } catch (const Error&) {
    return std::nullopt;  // left for the engine to report when the model runs
  }
}

size_t total_bytes(const ir::Tensor& t) {
  if (t.dtype() != ir::DataType::String) return t.byte_size();
  size_t n = 0;
  for (const std::string& s : t.string_values()) n += s.size();
  return n;
}

}  // namespace

bool fold_constants(ir::Model& model, PassContext& context) {
  ir::Graph& graph = *model.graph;
  size_t constants = 0, folded = 0, too_large = 0;
  // Bytes of the original constants each folded value was computed from.
  std::unordered_map<const ir::Value*, size_t> source_bytes;
  for (ir::Node* node : nodes_in_order(graph)) {
    bool interface = false;
    for (const ir::Value* out : node->outputs()) interface |= out && graph.is_output(out);
    if (interface) continue;  // a graph output stays computed by its node
    if (is_op(node, "Constant")) {
      std::optional<ir::Tensor> value = constant_node_value(*node);
      if (!value || !node->output(0)) continue;
      ir::Value* out = node->output(0);
      graph.remove_node(node);
      out->type = ir::ValueType::tensor(value->dtype(), value->dims());
      graph.set_initializer(out, std::move(*value));
      if (model.ir_version < 4) model.ir_version = 4;
      ++constants;
      continue;
    }
    if (node->inputs().empty() || never_folded(*node)) continue;
    // Only nodes all of whose inputs are constants: a Shape of a run-time value is never folded,
    // since its value depends on the input fed (dynamic dimensions).
    size_t in_bytes = 0;
    bool all_constant = true;
    for (const ir::Value* in : node->inputs()) {
      if (!in) continue;
      const ir::Tensor* t = constant_of(in);
      if (!t) {
        all_constant = false;
        break;
      }
      auto it = source_bytes.find(in);
      in_bytes += it != source_bytes.end() ? it->second : total_bytes(*t);
    }
    if (!all_constant) continue;
    std::optional<std::vector<ir::Tensor>> results = run_alone(model, *node);
    if (!results) continue;
    size_t out_bytes = 0;
    for (const ir::Tensor& t : *results) out_bytes += total_bytes(t);
    if (out_bytes > kSmallBytes && out_bytes > kMaxGrowth * in_bytes) {
      ++too_large;
      continue;
    }
    std::vector<ir::Value*> outputs = node->outputs();
    graph.remove_node(node);
    for (size_t i = 0; i < outputs.size(); ++i) {
      ir::Value* out = outputs[i];
      if (!out) continue;
      ir::Tensor& t = (*results)[i];
      out->type = ir::ValueType::tensor(t.dtype(), t.dims());
      graph.set_initializer(out, std::move(t));
      source_bytes[out] = in_bytes;
    }
    if (model.ir_version < 4) model.ir_version = 4;
    ++folded;
  }
  if (constants || folded)
    context.log.push_back("fold_constants: " + std::to_string(constants) + " Constant nodes to initializers, " +
                          std::to_string(folded) + " nodes folded" +
                          (too_large ? ", " + std::to_string(too_large) + " left (output too large)" : ""));
  return constants + folded > 0;
}

}  // namespace onnxptq::passes
