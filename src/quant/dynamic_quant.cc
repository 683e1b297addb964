// quantize_dynamic: ONNX Runtime's ONNXQuantizer in IntegerOps mode with static=False
// (onnxruntime/python/tools/quantization: quantize.py quantize_dynamic, operators/matmul.py
// MatMulInteger, operators/conv.py ConvInteger, onnx_model.py replace_gemm_with_matmul).
#include "quant/dynamic_quant.h"

#include <algorithm>
#include <map>
#include <set>

#include "onnxptq/error.h"
#include "quant/export.h"
#include "quant/node_selection.h"
#include "quant/qdq_nodes.h"

namespace onnxptq::quant {
namespace {

const std::set<std::string> kOpTypes = {"MatMul", "Gemm", "Conv"};

bool is_onnx(const ir::Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

// An initializer also listed as a graph input (older IR versions) is a weight too, as ONNX Runtime's
// quantizer reads it (is_valid_quantize_weight looks at the initializers only).
bool is_float_initializer(const ir::Value* v) {
  return v && v->has_initializer() && v->initializer().dtype() == ir::DataType::Float && v->initializer().size() > 0;
}

ir::Tensor scale_tensor(const std::vector<qmath::ScaleZeroPoint>& params, bool vector) {
  std::vector<int64_t> dims;
  if (vector) dims = {static_cast<int64_t>(params.size())};
  ir::Tensor t(ir::DataType::Float, dims);
  std::span<float> s = t.mutable_values<float>();
  for (size_t i = 0; i < params.size(); ++i) s[i] = static_cast<float>(params[i].scale);
  return t;
}

ir::Tensor transposed_2d(const ir::Tensor& w) {
  const int64_t rows = w.dims()[0], cols = w.dims()[1];
  ir::Tensor t(ir::DataType::Float, {cols, rows});
  std::span<const float> x = w.values<float>();
  std::span<float> y = t.mutable_values<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) y[static_cast<size_t>(c * rows + r)] = x[static_cast<size_t>(r * cols + c)];
  return t;
}

struct QuantizedInput {
  ir::Value* q = nullptr;
  ir::Value* scale = nullptr;
  ir::Value* zero_point = nullptr;
};

class DynamicWriter {
 public:
  DynamicWriter(ir::Graph& g, const QuantConfig& c) : g_(g), c_(c) {}

  // One DynamicQuantizeLinear per float value, shared by its quantized consumers (ORT's
  // quantized_value_map), named <x>_QuantizeLinear with outputs <x>_quantized, _scale, _zero_point.
  QuantizedInput activation(ir::Value* x) {
    auto found = activations_.find(x);
    if (found != activations_.end()) return found->second;
    QuantizedInput q{g_.add_unique_value(x->name() + "_quantized"), g_.add_unique_value(x->name() + "_scale"),
                     g_.add_unique_value(x->name() + "_zero_point")};
    g_.add_node("DynamicQuantizeLinear", {x}, {q.q, q.scale, q.zero_point}, x->name() + "_QuantizeLinear");
    activations_[x] = q;
    return q;
  }

  // Initializers <W>_quantized, <W>_scale, <W>_zero_point, once per weight and layout.
  QuantizedInput weight(ir::Value* w, std::optional<int64_t> axis, bool reduce_range) {
    const std::string key = w->name() + (axis ? "/" + std::to_string(*axis) : "") + (reduce_range ? "/r" : "");
    auto found = weights_.find(key);
    if (found != weights_.end()) return found->second;
    QuantizedTensor qt = quantize_dynamic_weight(w->initializer(), c_, axis, reduce_range);
    QuantizedInput q{g_.add_unique_value(w->name() + "_quantized"), g_.add_unique_value(w->name() + "_scale"),
                     g_.add_unique_value(w->name() + "_zero_point")};
    std::vector<int64_t> param_dims;
    if (axis) param_dims = {static_cast<int64_t>(qt.params.size())};
    g_.set_initializer(q.scale, scale_tensor(qt.params, axis.has_value()));
    g_.set_initializer(q.zero_point, zero_point_tensor(c_.weight_type, param_dims, qt.params));
    g_.set_initializer(q.q, std::move(qt.data));
    weights_[key] = q;
    return q;
  }

  // Cast(int32 -> float) then Mul by x_scale * w_scale; the last Mul writes `out`.
  void rescale(const std::string& base, ir::Value* integer_out, const QuantizedInput& x, const QuantizedInput& w,
               ir::Value* out) {
    ir::Value* cast_out = g_.add_unique_value(integer_out->name() + "_cast_output");
    ir::Node* cast = g_.add_node("Cast", {integer_out}, {cast_out}, integer_out->name() + "_cast");
    cast->set_attribute(ir::Attribute::of_int("to", static_cast<int64_t>(ir::DataType::Float)));
    const std::string scales_name = base.empty() ? x.scale->name() + "_" + w.scale->name() + "_mul" : base + "_scales_mul";
    ir::Value* scales = g_.add_unique_value(scales_name + ":0");
    g_.add_node("Mul", {x.scale, w.scale}, {scales}, scales_name);
    g_.add_node("Mul", {cast_out, scales}, {out}, base.empty() ? "" : base + "_output_scale_mul");
  }

 private:
  ir::Graph& g_;
  const QuantConfig& c_;
  std::map<ir::Value*, QuantizedInput> activations_;
  std::map<std::string, QuantizedInput> weights_;
};

// replace_gemm_with_matmul on one Gemm: MatMul(A, B or B transposed) (+ Add(C)); returns the MatMul.
ir::Node* gemm_to_matmul(ir::Graph& g, ir::Node* gemm) {
  ir::Value* a = gemm->input(0);
  ir::Value* b = gemm->input(1);
  ir::Value* c = gemm->input(2);
  ir::Value* y = gemm->output(0);
  const std::string name = gemm->name;
  if (gemm->attr_int("transB", 0) != 0) {
    ir::Tensor t = transposed_2d(b->initializer());
    if (b->uses().size() == 1) {
      g.set_initializer(b, std::move(t));
    } else {  // ORT transposes in place, assuming one user; a shared B gets a copy here
      ir::Value* bt = g.add_unique_value(b->name() + "_transposed");
      g.set_initializer(bt, std::move(t));
      b = bt;
    }
  }
  g.remove_node(gemm);
  if (!c) return g.add_node("MatMul", {a, b}, {y}, name.empty() ? "" : name + "_MatMul");
  ir::Value* mm = g.add_unique_value(y->name() + "_MatMul");
  ir::Node* m = g.add_node("MatMul", {a, b}, {mm}, name.empty() ? "" : name + "_MatMul");
  g.add_node("Add", {mm, c}, {y}, name.empty() ? "" : name + "_Add");
  return m;
}

}  // namespace

QuantizedTensor quantize_dynamic_weight(const ir::Tensor& w, const QuantConfig& config, std::optional<int64_t> axis,
                                        bool reduce_range) {
  if (config.weight_type != ir::DataType::Int8 && config.weight_type != ir::DataType::UInt8)
    throw Error(std::string("use_dynamic_quant: weight_type ") + quant_type_name(config.weight_type) +
                ": MatMulInteger and ConvInteger take 8-bit weights (QInt8, QUInt8)");
  WeightOptions o = weight_options_of(Tool::ort);
  // WeightSymmetric's default in ORT: true for signed weight types.
  o.scale.symmetric = config.weight_symmetric.value_or(config.weight_type == ir::DataType::Int8);
  o.scale.reduce_range = reduce_range;
  o.axis = axis;
  return quantize_weight(w, config.weight_type, o);
}

void check_dynamic_quant_config(const QuantConfig& c) {
  if (!c.use_dynamic_quant) return;
  if (c.weight_type != ir::DataType::Int8 && c.weight_type != ir::DataType::UInt8)
    throw Error(std::string("use_dynamic_quant with weight_type ") + quant_type_name(c.weight_type) +
                ": MatMulInteger and ConvInteger take 8-bit weights (QInt8, QUInt8)");
  // DynamicQuantizeLinear quantizes to uint8 whatever the 8-bit type asked (ORT's quantize_dynamic).
  if (c.activation_type != ir::DataType::Int8 && c.activation_type != ir::DataType::UInt8)
    throw Error(std::string("use_dynamic_quant with activation_type ") + quant_type_name(c.activation_type) +
                ": DynamicQuantizeLinear quantizes activations to uint8 (QUInt8, or Quark's default QInt8)");
  for (const std::string& t : c.op_types_to_quantize)
    if (!kOpTypes.count(t))
      throw unsupported("use_dynamic_quant: op type " + t +
                        " in op_types_to_quantize is not built for dynamic quantization (MatMul, Gemm and Conv are)");
  if (!c.extra_op_types_to_quantize.empty())
    throw unsupported("use_dynamic_quant with extra_op_types_to_quantize: only MatMul, Gemm and Conv are built");
  const char* other = c.use_matmul_nbits      ? "UseMatMulNBits"
                      : c.include_fast_ft     ? "include_fast_ft"
                      : c.bias_correction     ? "BiasCorrection"
                      : c.use_gptq            ? "UseGPTQ"
                      : c.include_auto_mp     ? "include_auto_mp"
                      : c.enable_dpu          ? "enable_dpu"
                      : c.convert_nchw_to_nhwc ? "convert_nchw_to_nhwc"
                                              : nullptr;
  if (other)
    throw Error(std::string("use_dynamic_quant (quantize_dynamic, no calibration, no Q/DQ) with ") + other +
                ": that works on the static path; choose one");
}

DynamicQuantResult write_dynamic_quant(const ir::Model& model, const QuantConfig& config) {
  check_dynamic_quant_config(config);
  DynamicQuantResult r{ir::clone_model(model), {}, {}};
  ir::Graph& g = *r.model.graph;
  if (r.model.opset("") < 11)
    throw Error("use_dynamic_quant: the model's opset " + std::to_string(r.model.opset("")) +
                " is below 11, where DynamicQuantizeLinear begins (quantize_static converts it first)");
  const std::set<std::string> excluded = named_exclusions(g, config, &r.warnings);
  const std::set<std::string> included(config.nodes_to_quantize.begin(), config.nodes_to_quantize.end());
  for (const std::string& name : included) {
    bool found = false;
    for (const auto& node : g.nodes()) found = found || node->name == name;
    if (!found) throw Error("the model has no node named '" + name + "' (in nodes_to_quantize)");
  }
  const std::vector<std::string>& types = config.op_types_to_quantize;
  // ORT's default set has MatMul and Conv; Gemms become MatMuls first whenever MatMuls are quantized.
  auto type_on = [&](const std::string& t) {
    if (types.empty()) return true;
    return std::find(types.begin(), types.end(), t) != types.end() ||
           (t == "Gemm" && std::find(types.begin(), types.end(), "MatMul") != types.end());
  };
  auto chosen = [&](const std::string& name) {
    return !excluded.count(name) && (included.empty() || included.count(name));
  };
  const bool const_b_only = config.matmul_const_b_only.value_or(true);  // quantize_dynamic's default

  struct Target {
    ir::Node* node;
    std::string source_name;
  };
  std::vector<Target> targets;
  std::vector<ir::Node*> gemms;
  for (const auto& node : g.nodes()) {
    if (!is_onnx(*node) || !chosen(node->name) || !node->input(0) || !node->input(1) || !node->output(0)) continue;
    if (node->op_type == "Gemm" && type_on("Gemm")) {
      const bool plain = node->attr_float("alpha", 1.0f) == 1.0f && node->attr_float("beta", 1.0f) == 1.0f &&
                         node->attr_int("transA", 0) == 0;
      const ir::Value* b = node->input(1);
      if (plain && is_float_initializer(b) && b->initializer().rank() == 2) gemms.push_back(node.get());
    } else if (node->op_type == "MatMul" && type_on("MatMul")) {
      if (const_b_only && !is_float_initializer(node->input(1))) continue;
      targets.push_back({node.get(), node->name});
    } else if (node->op_type == "Conv" && type_on("Conv")) {
      if (!is_float_initializer(node->input(1)) || node->input(1)->initializer().rank() < 3) continue;
      targets.push_back({node.get(), node->name});
    }
  }
  for (ir::Node* gemm : gemms) {
    const std::string name = gemm->name;
    targets.push_back({gemm_to_matmul(g, gemm), name});
  }

  DynamicWriter writer(g, config);
  std::set<std::string> weights_quantized;
  bool warned_nd = false;
  for (const Target& t : targets) {
    ir::Node* node = t.node;
    const bool conv = node->op_type == "Conv";
    ir::Value* x = node->input(0);
    ir::Value* w = node->input(1);
    ir::Value* bias = conv ? node->input(2) : nullptr;
    ir::Value* y = node->output(0);
    const std::string name = node->name;
    std::vector<ir::Attribute> attributes = std::move(node->attributes);  // move-only (subgraphs)
    if (w->has_initializer()) weights_quantized.insert(w->name());
    QuantizedInput qx = writer.activation(x);
    QuantizedInput qw;
    if (!w->has_initializer()) {
      qw = writer.activation(w);  // MatMulConstBOnly false: B quantized at run time too
    } else if (conv) {
      // ConvInteger's weight is per tensor in ORT's IntegerOps path, per_channel or not.
      qw = writer.weight(w, std::nullopt, config.reduce_range);
    } else {
      std::optional<int64_t> axis;
      if (config.per_channel) {
        if (w->initializer().rank() == 2) {
          axis = 1;  // B's last axis: one scale per output column
        } else if (!warned_nd) {
          r.warnings.push_back("use_dynamic_quant: per_channel applies to 2-D MatMul weights; weights of other ranks "
                               "are quantized per tensor (MatMulInteger's b_zero_point)");
          warned_nd = true;
        }
      }
      qw = writer.weight(w, axis, config.reduce_range);
    }
    g.remove_node(node);
    const std::string base = name.empty() ? "" : name + "_quant";
    ir::Value* integer_out = g.add_unique_value(y->name() + "_output_quantized");
    ir::Node* n = g.add_node(conv ? "ConvInteger" : "MatMulInteger", {qx.q, qw.q, qx.zero_point, qw.zero_point},
                             {integer_out}, base);
    if (conv)
      for (ir::Attribute& a : attributes) n->set_attribute(std::move(a));
    if (!bias) {
      writer.rescale(base, integer_out, qx, qw, y);
    } else {  // ConvInteger.add_bias: Reshape(bias, [1, -1, 1, ...]) and Add after the scales
      ir::Value* scaled = g.add_unique_value(y->name() + "_scaled_output");
      writer.rescale(base, integer_out, qx, qw, scaled);
      std::vector<int64_t> shape(static_cast<size_t>(w->initializer().rank()), 1);
      shape[1] = -1;
      ir::Value* shape_value = g.add_unique_value(y->name() + "_bias_reshape_shape");
      g.set_initializer(shape_value,
                        ir::Tensor::from_values<int64_t>({static_cast<int64_t>(shape.size())}, std::move(shape)));
      ir::Value* reshaped = g.add_unique_value(y->name() + "_bias_reshape_output");
      g.add_node("Reshape", {bias, shape_value}, {reshaped}, y->name() + "_bias_reshape");
      g.add_node("Add", {scaled, reshaped}, {y}, y->name() + "_bias_add");
    }
    r.quantized_nodes.push_back(t.source_name);
  }
  if (!targets.empty()) {
    // Float weights nothing reads any more leave the graph inputs too (ORT's remove_initializer).
    std::vector<ir::Value*> inputs = g.inputs();
    for (ir::Value* v : inputs)
      if (v->has_initializer() && v->uses().empty() && !g.is_output(v) && weights_quantized.count(v->name()))
        g.remove_input(v);
    remove_unused_initializers(g);
    g.sort_nodes();
  }
  r.model.producer_name = "onnxptq";
  return r;
}

}  // namespace onnxptq::quant
