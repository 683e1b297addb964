// convert_u16u8_to_u8u8 (Quark's tool): uint16 activations made uint8 without calibration. Each
// uint16 QuantizeLinear -> DequantizeLinear pair on an activation keeps its range: the scale grows
// by 65535 / 255 = 257 and the zero point becomes round(zp / 257). Constants quantized like
// activations are quantized again with the new parameters, and every int32 bias of a Conv,
// ConvTranspose or Gemm whose input changed is quantized again in units of the new s_x * s_w, so
// that it keeps its value (Quark's tool rescales the bias's scale only, which multiplies the
// bias by 257; and it truncates the requantized constants, where this rounds half to even).
#include <cmath>
#include <map>
#include <set>

#include "onnxptq/error.h"
#include "passes/rewrite.h"
#include "quant/qdq_nodes.h"
#include "quant/tensor_quant.h"
#include "tools/convert.h"

namespace onnxptq::tools {

namespace {

class U16ToU8 {
 public:
  explicit U16ToU8(const ir::Model& model) : m_(ir::clone_model(model)), g_(*m_.graph) {}

  ir::Model run(ConvertResult& result) {
    // Activation pairs: a quantize of a computed value (or graph input) read by a dequantize node.
    std::set<ir::Node*> pair_nodes;
    std::map<ir::Node*, QdqParams> original;  // before any shared initializer changes
    for (const auto& node : g_.nodes())
      if (is_dequantize_node(*node))
        if (std::optional<QdqParams> p = qdq_params(*node)) original[node.get()] = *p;
    for (const auto& node : g_.nodes()) {
      ir::Node* dq = node.get();
      if (!is_dequantize_node(*dq)) continue;
      ir::Node* q = dq->input(0)->producer();
      if (!q || !is_quantize_node(*q) || q->input(0)->has_initializer()) continue;
      std::optional<QdqParams> p = qdq_params(*dq);
      if (!p || p->type != ir::DataType::UInt16) continue;
      pair_nodes.insert(q);
      pair_nodes.insert(dq);
    }
    if (pair_nodes.empty())
      throw Error(
          "the model has no uint16 activation (QuantizeLinear -> DequantizeLinear with a uint16 zero "
          "point): nothing to convert");
    for (ir::Node* n : pair_nodes) convert_parameters(*n);
    size_t constants = 0;
    for (const auto& node : g_.nodes()) {  // constants quantized like activations
      ir::Node* dq = node.get();
      if (!is_dequantize_node(*dq) || !dq->input(0)->has_initializer()) continue;
      if (dq->input(0)->initializer().dtype() != ir::DataType::UInt16) continue;
      auto old = original.find(dq);
      if (old == original.end()) continue;
      convert_parameters(*dq);
      std::optional<QdqParams> now = qdq_params(*dq);
      ir::Tensor values = quant::dequantize_tensor(dq->input(0)->initializer(), old->second.params, old->second.axis);
      passes::set_constant_input(m_, dq, 0,
                                 quant::quantize_tensor(values, ir::DataType::UInt8, now->params, now->axis));
      ++constants;
    }
    size_t biases = 0, clipped = 0;
    for (ir::Node* n : passes::nodes_in_order(g_)) {
      if (n->op_type != "Conv" && n->op_type != "ConvTranspose" && n->op_type != "Gemm") continue;
      if (n->inputs().size() < 3) continue;
      ir::Node* x_dq = dequantize_producer(n->input(0));
      ir::Node* w_dq = dequantize_producer(n->input(1));
      ir::Node* b_dq = dequantize_producer(n->input(2));
      if (!x_dq || !w_dq || !b_dq || !pair_nodes.count(x_dq)) continue;
      std::optional<QdqParams> px = qdq_params(*x_dq), pw = qdq_params(*w_dq), pb = qdq_params(*b_dq);
      const ir::Tensor* b = constant_tensor(b_dq->input(0));
      if (!px || !pw || !pb || !b || pb->type != ir::DataType::Int32 || b->rank() != 1) continue;
      if (px->params.size() != 1 || (pw->params.size() != 1 && pw->params.size() != static_cast<size_t>(b->size())))
        continue;
      std::optional<int64_t> b_axis = pb->params.size() > 1 ? std::optional<int64_t>(0) : std::nullopt;
      ir::Tensor bias = quant::dequantize_tensor(*b, pb->params, b_axis);
      quant::BiasOptions o = quant::bias_options_of(quant::Tool::quark);
      o.beta = 1;  // the dequantized bias is the value the node adds (a Gemm's beta applies to both alike)
      quant::QuantizedBias q = quant::quantize_bias(bias, px->params[0].scale, pw->params, o);
      clipped += q.clipped;
      std::vector<float> scales(q.scales.begin(), q.scales.end());
      const ir::Tensor* old_scale = constant_tensor(b_dq->input(1));
      std::vector<int64_t> dims = old_scale->dims();
      if (static_cast<int64_t>(scales.size()) != old_scale->size()) continue;
      // Its own initializers: a bias DequantizeLinear another node shares keeps the old ones.
      ir::Node* dq = b_dq;
      if (b_dq->output(0)->uses().size() > 1 || g_.is_output(b_dq->output(0))) {
        ir::Value* out = g_.add_unique_value(b_dq->output(0)->name() + "_u8");
        dq = g_.insert_node_before(n, b_dq->op_type, b_dq->inputs(), {out}, g_.fresh_name(b_dq->name + "_u8"),
                                   b_dq->domain);
        for (const ir::Attribute& a : b_dq->attributes) dq->set_attribute(ir::clone_attribute(a, g_));
        g_.set_node_input(n, 2, out);
      }
      passes::set_constant_input(m_, dq, 0, std::move(q.data));
      passes::set_constant_input(m_, dq, 1, ir::Tensor::from_values<float>(dims, scales));
      ++biases;
    }
    remove_unused_initializers(g_);
    g_.sort_nodes();
    result.changed = pair_nodes.size() / 2;
    result.log.push_back(std::to_string(result.changed) + " uint16 activations made uint8 (" +
                         std::to_string(constants) + " constants and " + std::to_string(biases) +
                         " int32 biases quantized again)");
    if (clipped)
      result.log.push_back("warning: " + std::to_string(clipped) + " biases had values beyond int32, clipped");
    return std::move(m_);
  }

 private:
  // The uint16 scale and zero point of a quantize or dequantize node, in place (once per initializer).
  void convert_parameters(ir::Node& n) {
    ir::Value* zv = n.input(2);
    ir::Value* sv = n.input(1);
    if (!zv || !zv->has_initializer() || !sv->has_initializer()) return;
    if (zv->initializer().dtype() != ir::DataType::UInt16 && !converted_.count(zv)) return;
    if (converted_.insert(zv).second) {
      const ir::Tensor& z = zv->initializer();
      std::vector<uint8_t> out;
      for (uint16_t v : z.values<uint16_t>()) out.push_back(static_cast<uint8_t>(std::lround(v / 257.0)));
      std::vector<int64_t> dims = z.dims();
      g_.set_initializer(zv, ir::Tensor::from_values<uint8_t>(dims, out));
      zv->type = ir::ValueType::tensor(ir::DataType::UInt8, dims);
    }
    if (sv->initializer().dtype() == ir::DataType::Float && converted_.insert(sv).second) {
      const ir::Tensor& s = sv->initializer();
      std::vector<float> scales;
      for (float v : s.values<float>()) scales.push_back(static_cast<float>(static_cast<double>(v) * 257.0));
      std::vector<int64_t> dims = s.dims();
      g_.set_initializer(sv, ir::Tensor::from_values<float>(dims, scales));
    }
    if (is_quantize_node(n)) {  // the quantized value's declared type
      ir::Value* q = n.output(0);
      if (q->type.is_tensor() && q->type.elem_type == ir::DataType::UInt16) q->type.elem_type = ir::DataType::UInt8;
    }
  }

  ir::Model m_;
  ir::Graph& g_;
  std::set<ir::Value*> converted_;
};

}  // namespace

ir::Model u16u8_to_u8u8(const ir::Model& model, ConvertResult& result) { return U16ToU8(model).run(result); }

}  // namespace onnxptq::tools
