// convert_fp32_to_fp16 (Quark's tool, onnxconverter-common's float16 converter): float32 tensors
// and values made float16, blocked nodes kept float32 between Casts, the graph's inputs and
// outputs float32 with keep_io_types.
#include <algorithm>
#include <cmath>
#include <set>

#include "ir/float16.h"
#include "onnxptq/error.h"
#include "passes/pipeline.h"
#include "tools/convert.h"

namespace onnxptq::tools {

namespace {

constexpr int64_t kFloat = static_cast<int64_t>(ir::DataType::Float);
constexpr int64_t kFloat16 = static_cast<int64_t>(ir::DataType::Float16);

// Quark's DEFAULT_OP_BLOCK_LIST_FP16 (float16.py): ops without float16 kernels or whose float
// inputs must stay float32 (Resize's scales, Range's bounds).
const std::vector<std::string>& default_block_list() {
  static const std::vector<std::string> ops = {"ArrayFeatureExtractor",
                                               "Binarizer",
                                               "CastMap",
                                               "CategoryMapper",
                                               "DictVectorizer",
                                               "FeatureVectorizer",
                                               "Imputer",
                                               "LabelEncoder",
                                               "LinearClassifier",
                                               "LinearRegressor",
                                               "Normalizer",
                                               "OneHotEncoder",
                                               "RandomUniformLike",
                                               "SVMClassifier",
                                               "SVMRegressor",
                                               "Scaler",
                                               "TreeEnsembleClassifier",
                                               "TreeEnsembleRegressor",
                                               "ZipMap",
                                               "NonMaxSuppression",
                                               "TopK",
                                               "RoiAlign",
                                               "Resize",
                                               "Range",
                                               "CumSum",
                                               "Min",
                                               "Max",
                                               "Upsample"};
  return ops;
}

// Ops whose float inputs or outputs are fixed float32 by an attribute or by their parameters.
bool must_stay_float32(const ir::Node& n) {
  static const std::set<std::string> ops = {
      "RandomNormal", "RandomUniform",  "RandomNormalLike", "EyeLike",
      "Bernoulli",    "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"};
  return ops.count(n.op_type) > 0;
}

// onnxconverter-common's max_finite_val: a constant with a finite magnitude beyond it keeps its
// readers float32. The converter clamps such values to it instead, which changed
// BatchNormalization variances of PP-OCRv4 det (up to 2e5) and broke its output.
constexpr float kMaxFinite = 1e4f;

bool beyond_float16(const ir::Tensor* t) {
  if (!t || t->dtype() != ir::DataType::Float) return false;
  for (float x : t->values<float>())
    if (std::isfinite(x) && std::fabs(x) > kMaxFinite) return true;
  return false;
}

const ir::Tensor* float_constant(const ir::Value* v) {
  if (!v || v->name().empty()) return nullptr;
  if (v->has_initializer()) return &v->initializer();
  if (const ir::Node* p = v->producer(); p && p->op_type == "Constant")
    if (const ir::Attribute* a = p->find_attribute("value")) return &a->t;
  return nullptr;
}

// Rounded to nearest even; tiny values become float16 subnormals or 0 as they round
// (onnxconverter-common raises nonzero magnitudes below 1e-7 to 1e-7 instead).
ir::Tensor to_half(const ir::Tensor& t) {
  std::vector<uint16_t> out;
  out.reserve(static_cast<size_t>(t.size()));
  for (float x : t.values<float>()) out.push_back(ir::float_to_half(x));
  ir::Tensor h(ir::DataType::Float16, t.dims(), Bytes::copy_of(out.data(), out.size() * sizeof(uint16_t)));
  return h;
}

bool is_float(const ir::Value* v) { return v && v->type.is_tensor() && v->type.elem_type == ir::DataType::Float; }

}  // namespace

ir::Model fp32_to_fp16(const ir::Model& model, const Fp16Options& options, ConvertResult& result) {
  ir::Model m = ir::clone_model(model);
  ir::Graph& g = *m.graph;
  for (ir::Value* v : g.initializers())  // initializers know their type
    if (!v->type.is_tensor()) v->type = ir::ValueType::tensor(v->initializer().dtype(), v->initializer().dims());
  passes::PassContext context;
  passes::infer_shapes(m, context);  // every value's element type
  for (const auto& node : g.nodes())
    for (const ir::Value* v : node->outputs())
      if (v && !v->name().empty() && (!v->type.is_tensor() || v->type.elem_type == ir::DataType::Undefined) &&
          v->type.kind != ir::ValueType::Kind::Other)
        throw Error("fp32_to_fp16: the element type of '" + v->name() + "' (" + node->op_type + " '" + node->name +
                    "') is not known; run `onnxptq preprocess` first or check the model");

  const std::vector<std::string>& op_list =
      options.op_block_list.empty() ? default_block_list() : options.op_block_list;
  std::set<std::string> block_ops(op_list.begin(), op_list.end());
  std::set<std::string> block_nodes(options.node_block_list.begin(), options.node_block_list.end());
  std::set<const ir::Node*> wide;  // nodes reading (or Constant nodes holding) values float16 cannot hold
  for (const auto& node : g.nodes()) {
    bool beyond = node->op_type == "Constant" && beyond_float16(float_constant(node->output(0)));
    for (const ir::Value* v : node->inputs()) beyond = beyond || beyond_float16(float_constant(v));
    if (beyond) wide.insert(node.get());
  }
  auto blocked = [&](const ir::Node* n) {
    return block_ops.count(n->op_type) || block_nodes.count(n->name) || must_stay_float32(*n) || wide.count(n) ||
           !n->subgraphs().empty() || !(n->domain.empty() || n->domain == "ai.onnx");
  };
  if (!wide.empty())
    result.log.push_back(std::to_string(wide.size()) + " nodes kept float32: they read constants beyond +-1e4");
  // Which float values become float16.
  std::set<const ir::Value*> half;
  for (ir::Value* v : g.inputs())
    if (is_float(v) && !v->has_initializer() && !options.keep_io_types) half.insert(v);
  for (ir::Value* v : g.initializers()) {
    if (!is_float(v) || g.is_input(v)) continue;
    bool any = false;
    for (const ir::Use& u : v->uses()) any = any || !blocked(u.node);
    if (any) half.insert(v);
  }
  for (const auto& node : g.nodes()) {
    if (blocked(node.get())) continue;
    for (const ir::Value* v : node->outputs())
      if (is_float(v)) half.insert(v);
  }

  // Casts where a reader wants the other precision, one per value and direction.
  std::map<std::pair<const ir::Value*, bool>, ir::Value*> casts;
  size_t cast_count = 0;
  auto cast_of = [&](ir::Value* v, bool to_half) {
    auto key = std::make_pair(static_cast<const ir::Value*>(v), to_half);
    auto it = casts.find(key);
    if (it != casts.end()) return it->second;
    ir::Value* out = g.add_unique_value(v->name() + (to_half ? "_fp16" : "_fp32"));
    out->type = v->type;
    out->type.elem_type = to_half ? ir::DataType::Float16 : ir::DataType::Float;
    ir::Node* c = g.add_node("Cast", {v}, {out}, g.fresh_name(v->name() + (to_half ? "_cast_fp16" : "_cast_fp32")));
    c->set_attribute(ir::Attribute::of_int("to", to_half ? kFloat16 : kFloat));
    ++cast_count;
    return casts[key] = out;
  };
  std::vector<ir::Node*> order = g.topological_order();
  for (ir::Node* n : order) {
    bool wants_half = !blocked(n);
    for (size_t i = 0; i < n->inputs().size(); ++i) {
      ir::Value* v = n->input(i);
      if (!is_float(v)) continue;
      bool is_half = half.count(v) > 0;
      if (is_half != wants_half) g.set_node_input(n, i, cast_of(v, wants_half));
    }
  }
  // Graph outputs of float16 values: float32 again with keep_io_types, through a Cast writing the name.
  if (options.keep_io_types) {
    for (size_t i = 0; i < g.outputs().size(); ++i) {
      ir::Value* v = g.outputs()[i];
      if (!half.count(v) || !v->producer()) continue;
      ir::Value* h = g.add_unique_value(v->name() + "_fp16");
      h->type = v->type;
      g.replace_uses(v, h);
      g.set_node_output(v->producer(), v->producer_output(), h);
      ir::Node* c = g.add_node("Cast", {h}, {v}, g.fresh_name(v->name() + "_cast_fp32"));
      c->set_attribute(ir::Attribute::of_int("to", kFloat));
      half.erase(v);
      half.insert(h);
      ++cast_count;
    }
  }
  // Retype: tensors, value types, Casts to float, float constants of converted nodes.
  size_t tensors = 0;
  for (const ir::Value* cv : half) {
    ir::Value* v = const_cast<ir::Value*>(cv);
    if (v->has_initializer()) {
      g.set_initializer(v, to_half(v->initializer()));
      ++tensors;
    }
    v->type.elem_type = ir::DataType::Float16;
  }
  for (ir::Node* n : order) {
    if (blocked(n)) continue;
    if (n->op_type == "Cast" && n->attr_int("to", 0) == kFloat) n->set_attribute(ir::Attribute::of_int("to", kFloat16));
    for (ir::Attribute& a : n->attributes)
      if (a.type == ir::AttrType::Tensor && a.t.dtype() == ir::DataType::Float && half.count(n->output(0))) {
        std::string name = a.t.name;
        a.t = to_half(a.t);
        a.t.name = name;
        ++tensors;
      }
  }
  g.sort_nodes();
  result.changed = half.size();
  result.log.insert(result.log.begin(), std::to_string(half.size()) + " values made float16 (" +
                                            std::to_string(tensors) + " tensors), " + std::to_string(cast_count) +
                                            " Casts");
  return m;
}

}  // namespace onnxptq::tools
