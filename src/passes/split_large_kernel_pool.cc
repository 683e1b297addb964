// Splits a GlobalAveragePool over more than 512 elements into an AveragePool then a smaller GAP (vai_q_onnx).
#include <cmath>

#include "passes/dpu.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {
namespace {

// vai_q_onnx's factor(n): (f, n / f) with f the largest divisor of n not above floor(sqrt(n));
// (1, n) if none.
std::pair<int64_t, int64_t> split_factor(int64_t n) {
  int64_t f = static_cast<int64_t>(std::floor(std::sqrt(static_cast<double>(n))));
  while (f > 1 && n % f != 0) --f;
  if (f < 1) f = 1;
  return {f, n / f};
}

}  // namespace

// As vai_q_onnx 1.16's SplitLargeKernelPool: a GAP whose input has a known rank-4 shape with
// H * W > 512 gets AveragePool(kernel_shape = strides = [kh1, kw1]) in front, named and writing
// "<gap input>_Split", so the GAP pools the remaining kh2 x kw2; skipped when either part is still
// over 512 (one split only). The blocks tile the plane exactly, so the mean of block means is the mean.
bool split_large_kernel_pool(ir::Model& model, PassContext& context) {
  ir::Graph& graph = *model.graph;
  size_t split = 0;
  for (ir::Node* gap : nodes_in_order(graph)) {
    if (!is_op(gap, "GlobalAveragePool") || !gap->input(0) || !context.should_quantize(*gap)) continue;
    const ir::ValueType& type = gap->input(0)->type;
    if (!type.is_tensor() || !type.has_shape || type.shape.size() != 4) continue;
    const ir::Dim &h_dim = type.shape[2], &w_dim = type.shape[3];
    if (!h_dim.has_value || !w_dim.has_value) continue;
    int64_t h = h_dim.value, w = w_dim.value;
    if (h * w <= 512) continue;
    auto [kh1, kh2] = split_factor(h);
    auto [kw1, kw2] = split_factor(w);
    if (kh1 * kw1 > 512 || kh2 * kw2 > 512) continue;
    ir::Value* x = gap->input(0);
    if (gap->name.empty()) gap->name = gap->output(0)->name();
    ir::Value* pooled = graph.add_unique_value(x->name() + "_Split");
    pooled->type = type;
    pooled->type.shape[2] = ir::Dim::of(kh2);
    pooled->type.shape[3] = ir::Dim::of(kw2);
    ir::Node* pool = graph.insert_node_before(gap, "AveragePool", {x}, {pooled}, pooled->name());
    pool->set_attribute(ir::Attribute::of_ints("kernel_shape", {kh1, kw1}));
    pool->set_attribute(ir::Attribute::of_ints("strides", {kh1, kw1}));
    graph.set_node_input(gap, 0, pooled);
    ++split;
  }
  if (split)
    context.log.push_back("split_large_kernel_pool: " + std::to_string(split) + " GlobalAveragePool nodes split");
  return split > 0;
}

}  // namespace onnxptq::passes
