// UseMatMulNBits: MatMuls to com.microsoft MatMulNBits, as ONNX Runtime's matmul_nbits_quantizer.py
// (DefaultWeightOnlyQuantizer, QOperator format) writes them; its blocks are quantized by MLAS's
// BlockwiseQuantizer (range2scale / range2scalezp), whose arithmetic quantize_nbits_weight follows.
#include "quant/matmul_nbits.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <set>

#include "onnxptq/error.h"
#include "quant/hqq.h"
#include "quant/node_selection.h"
#include "quant/qdq_nodes.h"

namespace onnxptq::quant {

namespace {

void check_nbits_weight(const ir::Tensor& w, int64_t bits) {
  if (w.dtype() != ir::DataType::Float || w.rank() != 2)
    throw Error("MatMulNBits weights are float32 [K, N], got " + std::string(ir::data_type_name(w.dtype())) + " " +
                ir::dims_to_string(w.dims()));
  if (bits != 4 && bits != 8) throw Error("MatMulNBits bits must be 4 or 8, got " + std::to_string(bits));
}

void put_code(uint8_t* bytes, int64_t index, int code, int64_t bits) {
  const int64_t per_byte = 8 / bits;
  bytes[index / per_byte] |= static_cast<uint8_t>(code << ((index % per_byte) * bits));
}

}  // namespace

NBitsGrid nbits_grid(const ir::Tensor& w, int64_t bits, int64_t block_size, bool symmetric) {
  check_nbits_weight(w, bits);
  const int64_t k_rows = w.dims()[0], n_cols = w.dims()[1];
  const int64_t k_blocks = (k_rows + block_size - 1) / block_size;
  const int mid = 1 << (bits - 1), max_code = (1 << bits) - 1;
  std::span<const float> x = w.values<float>();
  NBitsGrid g;
  g.scales.resize(static_cast<size_t>(n_cols * k_blocks));
  g.zero_codes.assign(static_cast<size_t>(n_cols * k_blocks), static_cast<uint8_t>(mid));
  for (int64_t n = 0; n < n_cols; ++n) {
    for (int64_t j = 0; j < k_blocks; ++j) {
      const int64_t begin = j * block_size, end = std::min(k_rows, begin + block_size);
      float lo = FLT_MAX, hi = -FLT_MAX;
      for (int64_t k = begin; k < end; ++k) {
        lo = std::min(lo, x[k * n_cols + n]);
        hi = std::max(hi, x[k * n_cols + n]);
      }
      float scale = 0;
      int zp = mid;
      if (symmetric) {  // range2scale: the end of larger magnitude maps to code 0
        const float m = std::fabs(hi) > std::fabs(lo) ? hi : lo;
        scale = m / static_cast<float>(-mid);
      } else {  // range2scalezp
        lo = std::min(lo, 0.0f);
        hi = std::max(hi, 0.0f);
        scale = (hi - lo) / static_cast<float>(max_code);
        const float zp_float = scale != 0.0f ? 0.0f - lo / scale : lo;
        zp = zp_float < 0.0f                           ? 0
             : zp_float > static_cast<float>(max_code) ? max_code
                                                       : static_cast<int>(std::roundf(zp_float));
      }
      const size_t p = static_cast<size_t>(n * k_blocks + j);
      g.scales[p] = scale;
      g.zero_codes[p] = static_cast<uint8_t>(zp);
    }
  }
  return g;
}

std::vector<uint8_t> nbits_nearest_codes(const ir::Tensor& w, const NBitsGrid& grid, int64_t bits, int64_t block_size) {
  const int64_t k_rows = w.dims()[0], n_cols = w.dims()[1];
  const int64_t k_blocks = (k_rows + block_size - 1) / block_size;
  const float max_code = static_cast<float>((1 << bits) - 1);
  std::span<const float> x = w.values<float>();
  std::vector<uint8_t> codes(static_cast<size_t>(k_rows * n_cols));
  for (int64_t k = 0; k < k_rows; ++k)
    for (int64_t n = 0; n < n_cols; ++n) {
      const size_t p = static_cast<size_t>(n * k_blocks + k / block_size);
      const float scale = grid.scales[p];
      const float reciprocal = scale != 0.0f ? 1.0f / scale : 0.0f;
      codes[static_cast<size_t>(k * n_cols + n)] = static_cast<uint8_t>(std::clamp(
          std::roundf(x[k * n_cols + n] * reciprocal + static_cast<float>(grid.zero_codes[p])), 0.0f, max_code));
    }
  return codes;
}

NBitsWeight pack_nbits_weight(std::span<const uint8_t> codes, int64_t k_rows, int64_t n_cols, const NBitsGrid& grid,
                              int64_t bits, int64_t block_size, bool symmetric) {
  const int64_t k_blocks = (k_rows + block_size - 1) / block_size;
  const int64_t blob = block_size * bits / 8;
  const int mid = 1 << (bits - 1);
  const int64_t zp_per_column = (k_blocks * bits + 7) / 8;
  NBitsWeight out;
  out.b = ir::Tensor(ir::DataType::UInt8, {n_cols, k_blocks, blob});
  out.scales = ir::Tensor::from_values<float>({n_cols * k_blocks}, grid.scales);
  std::span<uint8_t> b = out.b.mutable_values<uint8_t>();
  for (int64_t n = 0; n < n_cols; ++n)
    for (int64_t j = 0; j < k_blocks; ++j) {
      const size_t p = static_cast<size_t>(n * k_blocks + j);
      uint8_t* blob_bytes = &b[static_cast<size_t>(p * blob)];
      const int64_t begin = j * block_size;
      for (int64_t k = begin; k < begin + block_size; ++k)  // past K: the zero point's code
        put_code(blob_bytes, k - begin, k < k_rows ? codes[static_cast<size_t>(k * n_cols + n)] : grid.zero_codes[p],
                 bits);
    }
  if (!symmetric) {
    ir::Tensor z(ir::DataType::UInt8, {n_cols * zp_per_column});
    std::span<uint8_t> zb = z.mutable_values<uint8_t>();
    const int64_t zp_per_byte = 8 / bits;
    for (int64_t n = 0; n < n_cols; ++n) {
      // A column's last byte keeps the midpoint in a nibble past its blocks (MLAS fills with it).
      for (int64_t j = k_blocks; j < zp_per_column * zp_per_byte; ++j)
        put_code(&zb[static_cast<size_t>(n * zp_per_column)], j, mid, bits);
      for (int64_t j = 0; j < k_blocks; ++j)
        put_code(&zb[static_cast<size_t>(n * zp_per_column)], j, grid.zero_codes[static_cast<size_t>(n * k_blocks + j)],
                 bits);
    }
    out.zero_points = std::move(z);
  }
  return out;
}

NBitsWeight quantize_nbits_weight(const ir::Tensor& w, int64_t bits, int64_t block_size, bool symmetric) {
  const NBitsGrid grid = nbits_grid(w, bits, block_size, symmetric);
  const std::vector<uint8_t> codes = nbits_nearest_codes(w, grid, bits, block_size);
  return pack_nbits_weight(codes, w.dims()[0], w.dims()[1], grid, bits, block_size, symmetric);
}

std::vector<ir::Node*> matmul_nbits_targets(ir::Graph& g, const QuantConfig& config) {
  // Names and patterns as the Q/DQ path resolves them (Quark passes nodes_to_exclude to ORT's quantizer).
  const std::set<std::string> excluded = named_exclusions(g, config);
  const std::set<std::string> included(config.nodes_to_quantize.begin(), config.nodes_to_quantize.end());
  for (const std::string& name : included) {
    bool found = false;
    for (const auto& node : g.nodes()) found = found || node->name == name;
    if (!found) throw Error("the model has no node named '" + name + "' (in nodes_to_quantize)");
  }
  std::vector<ir::Node*> targets;
  for (const auto& node : g.nodes()) {
    if (node->op_type != "MatMul" || !(node->domain.empty() || node->domain == "ai.onnx")) continue;
    if (excluded.count(node->name) || (!included.empty() && !included.count(node->name))) continue;
    const ir::Value* b = node->input(1);
    // As ONNX Runtime: only constant 2-D weights (initializers); float32 only here.
    if (!b || !b->has_initializer() || g.is_input(b)) continue;
    const ir::Tensor& w = b->initializer();
    if (w.dtype() != ir::DataType::Float || w.rank() != 2 || w.size() == 0) continue;
    targets.push_back(node.get());
  }
  return targets;
}

Plan matmul_nbits_plan(const ir::Model& model, const QuantConfig& config) {
  const MatMulNBitsParams& p = config.matmul_nbits;
  Plan plan;
  for (ir::Node* node : matmul_nbits_targets(*model.graph, config)) {
    plan.quantized_nodes.push_back(node->name);
    const ir::Value* b = node->input(1);
    if (plan.find(b->name())) continue;
    const ir::Tensor& w = b->initializer();
    const NBitsGrid grid = nbits_grid(w, p.bits, p.group_size, p.symmetric);
    TensorPlan t;
    t.name = b->name();
    t.role = Role::Weight;
    t.type = p.bits == 4 ? ir::DataType::UInt4 : ir::DataType::UInt8;
    t.symmetric = p.symmetric;
    t.group_size = p.group_size;
    for (size_t i = 0; i < grid.scales.size(); ++i) t.params.push_back({grid.scales[i], grid.zero_codes[i]});
    t.data = ir::Tensor::from_values<uint8_t>(w.dims(), nbits_nearest_codes(w, grid, p.bits, p.group_size));
    plan.index[t.name] = plan.tensors.size();
    plan.tensors.push_back(std::move(t));
  }
  return plan;
}

MatMulNBitsResult write_matmul_nbits(const ir::Model& model, const QuantConfig& config, const Plan* plan) {
  const MatMulNBitsParams& p = config.matmul_nbits;
  MatMulNBitsResult r{ir::clone_model(model), {}};
  ir::Graph& g = *r.model.graph;
  const std::vector<ir::Node*> targets = matmul_nbits_targets(g, config);
  const std::string q_suffix = "_Q" + std::to_string(p.bits);
  for (ir::Node* node : targets) {
    ir::Value* a = node->input(0);
    ir::Value* b = node->input(1);
    ir::Value* y = node->output(0);
    const ir::Tensor& w = b->initializer();
    const int64_t k = w.dims()[0], n = w.dims()[1];
    const TensorPlan* planned = plan ? plan->find(b->name()) : nullptr;
    NBitsWeight q;
    if (planned && planned->data && planned->group_size == p.group_size) {  // GPTQ's codes
      NBitsGrid grid;
      for (const qmath::ScaleZeroPoint& s : planned->params) {
        grid.scales.push_back(static_cast<float>(s.scale));
        grid.zero_codes.push_back(static_cast<uint8_t>(s.zero_point));
      }
      q = pack_nbits_weight(planned->data->values<uint8_t>(), k, n, grid, p.bits, p.group_size, p.symmetric);
    } else if (p.algorithm == "HQQ") {
      HqqOptions hqq;
      hqq.threads = config.calib.threads;
      q = hqq_nbits_weight(w, p.bits, p.group_size, hqq);
    } else {
      q = quantize_nbits_weight(w, p.bits, p.group_size, p.symmetric);
    }
    ir::Value* qb = g.add_unique_value(b->name() + q_suffix);
    g.set_initializer(qb, std::move(q.b));
    ir::Value* scales = g.add_unique_value(b->name() + "_scales");
    g.set_initializer(scales, std::move(q.scales));
    std::vector<ir::Value*> inputs = {a, qb, scales};
    if (q.zero_points) {
      ir::Value* zp = g.add_unique_value(b->name() + "_zero_points");
      g.set_initializer(zp, std::move(*q.zero_points));
      inputs.push_back(zp);
    }
    const std::string name = node->name.empty() ? "" : node->name + q_suffix;
    r.quantized_nodes.push_back(node->name);
    g.remove_node(node);
    ir::Node* m = g.add_node("MatMulNBits", inputs, {y}, name, "com.microsoft");
    m->set_attribute(ir::Attribute::of_int("K", k));
    m->set_attribute(ir::Attribute::of_int("N", n));
    m->set_attribute(ir::Attribute::of_int("bits", p.bits));
    m->set_attribute(ir::Attribute::of_int("block_size", p.group_size));
    // ONNX Runtime leaves the optional attribute out when it is 0.
    if (p.accuracy_level != 0) m->set_attribute(ir::Attribute::of_int("accuracy_level", p.accuracy_level));
  }
  if (!targets.empty()) {
    remove_unused_initializers(g);
    g.sort_nodes();
    if (r.model.opset("com.microsoft") < 1) r.model.set_opset("com.microsoft", 1);
  }
  r.model.producer_name = "onnxptq";
  return r;
}

}  // namespace onnxptq::quant
