// convert_fp16_to_fp32: a float16 model becomes a float32 one (vai_q_onnx's fp16_fp32_convert).
#include <optional>
#include <set>
#include <string>

#include "ir/float16.h"
#include "onnxptq/error.h"
#include "passes/model_format.h"
#include "passes/onnx_bridge.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {
namespace {

constexpr int64_t kFloat16 = static_cast<int64_t>(ir::DataType::Float16);
constexpr int64_t kFloat = static_cast<int64_t>(ir::DataType::Float);

struct Counts {
  size_t tensors = 0, values = 0, casts = 0, dtypes = 0, removed = 0;
};

// Exact: every float16 value (subnormals, infinities, NaN) has a float32 equal.
bool widen_tensor(ir::Tensor& t) {
  if (t.dtype() != ir::DataType::Float16) return false;
  ir::Tensor wide = ir::Tensor::uninitialized(ir::DataType::Float, t.dims());
  ir::half_to_float(t.values<uint16_t>().data(), wide.mutable_values<float>().data(), static_cast<size_t>(t.size()));
  wide.name = t.name;
  wide.doc_string = t.doc_string;
  t = std::move(wide);
  return true;
}

bool widen_type(ir::ValueType& type) {
  if (!type.is_tensor() || type.elem_type != ir::DataType::Float16) return false;
  type.elem_type = ir::DataType::Float;
  return true;
}

// Ops whose `dtype` attribute chooses the output's element type.
bool has_dtype_attribute(const ir::Node& node) {
  static const std::set<std::string> ops = {"RandomNormal",      "RandomUniform", "RandomNormalLike",
                                            "RandomUniformLike", "EyeLike",       "Bernoulli"};
  return node.domain.empty() && ops.count(node.op_type);
}

void convert_graph(ir::Graph& graph, Counts& counts) {
  if (!graph.sparse_initializers.empty())
    throw Error("convert_fp16_to_fp32: graph '" + graph.name +
                "' has sparse initializers, which onnxptq keeps as they are and cannot widen");
  std::set<ir::Value*> seen;
  auto widen_value = [&](ir::Value* v) {
    if (!v || !seen.insert(v).second) return;
    if (v->has_initializer()) counts.tensors += widen_tensor(v->mutable_initializer());
    counts.values += widen_type(v->type);
  };
  for (ir::Value* v : graph.inputs()) widen_value(v);
  for (ir::Value* v : graph.outputs()) widen_value(v);
  for (ir::Value* v : graph.initializers()) widen_value(v);
  for (ir::Value* v : graph.value_info()) widen_value(v);
  for (const auto& node : graph.nodes()) {
    for (ir::Value* v : node->outputs()) widen_value(v);
    for (ir::Attribute& a : node->attributes) {
      if (a.type == ir::AttrType::Tensor) counts.tensors += widen_tensor(a.t);
      for (ir::Tensor& t : a.tensors) counts.tensors += widen_tensor(t);
      if (a.g) convert_graph(*a.g, counts);
      for (auto& g : a.graphs) convert_graph(*g, counts);
      if (a.type != ir::AttrType::Int || a.i != kFloat16 || !node->domain.empty()) continue;
      if (node->op_type == "Cast" && a.name == "to") {
        a.i = kFloat;
        ++counts.casts;
      } else if (a.name == "dtype" && has_dtype_attribute(*node)) {
        a.i = kFloat;
        ++counts.dtypes;
      }
    }
  }
}

// The element type of `v`: its declared type, its initializer, the `to` of the Cast making it, or
// what libonnx infers (computed once, when first needed).
ir::DataType elem_type_of(const ir::Value* v, const ir::Model& model, std::optional<ir::Model>& inferred) {
  if (v->type.is_tensor() && v->type.elem_type != ir::DataType::Undefined) return v->type.elem_type;
  if (v->has_initializer()) return v->initializer().dtype();
  if (const ir::Node* p = v->producer(); p && is_op(p, "Cast")) return static_cast<ir::DataType>(p->attr_int("to", 0));
  if (!inferred) {
    try {
      inferred = onnx_infer_shapes(model);
    } catch (const Error&) {
      inferred = ir::Model();  // nothing known: the Casts stay
    }
  }
  const ir::Value* t = inferred->graph->find_value(v->name());
  return t && t->type.is_tensor() ? t->type.elem_type : ir::DataType::Undefined;
}

// Casts of the main graph from float to float (those that narrowed to float16 and back).
size_t remove_float_casts(ir::Model& model) {
  std::optional<ir::Model> inferred;
  size_t removed = 0;
  for (ir::Node* node : nodes_in_order(*model.graph)) {
    if (!is_op(node, "Cast") || node->attr_int("to", 0) != kFloat || !node->input(0)) continue;
    if (elem_type_of(node->input(0), model, inferred) != ir::DataType::Float) continue;
    removed += bypass_node(*model.graph, node, node->input(0));
  }
  return removed;
}

}  // namespace

bool convert_fp16_to_fp32(ir::Model& model, PassContext& context) {
  Counts counts;
  convert_graph(*model.graph, counts);
  if (counts.tensors + counts.values + counts.casts + counts.dtypes == 0) {
    context.log.push_back("convert_fp16_to_fp32: the model has no float16 tensors, values or casts");
    return false;
  }
  counts.removed = remove_float_casts(model);
  context.log.push_back("convert_fp16_to_fp32: " + std::to_string(counts.tensors) + " float16 tensors and " +
                        std::to_string(counts.values) + " float16 values made float, " + std::to_string(counts.casts) +
                        " Casts to float16 now cast to float" +
                        (counts.dtypes ? ", " + std::to_string(counts.dtypes) + " dtype attributes" : "") + "; " +
                        std::to_string(counts.removed) + " Casts from float to float removed");
  return true;
}

}  // namespace onnxptq::passes
