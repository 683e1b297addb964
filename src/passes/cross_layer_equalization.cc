// Cross-layer equalization (vai_q_onnx 1.16's equalization.py, Quark's CLE): scales each output
// channel of a Conv/ConvTranspose/Gemm and the matching input channel of the next one inversely,
// through positively homogeneous nodes, so both have the same per-channel weight range.
#include <algorithm>
#include <cmath>
#include <optional>

#include "onnxptq/error.h"
#include "passes/cle.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {
namespace {

// Adaptive mode (CLESteps -1) normally stops within tens of sweeps; this bounds it whatever the
// weights do (the reference has no bound: an oscillating change would sweep forever).
constexpr size_t kMaxAdaptiveSweeps = 1000;

bool is_linear(const ir::Node* node) {
  return is_op(node, "Conv") || is_op(node, "ConvTranspose") || is_op(node, "Gemm");
}

// The constant float tensor behind `value`, through Identity nodes (torchvision exports give
// shared biases that way).
const ir::Tensor* float_constant_through_identity(const ir::Value* value) {
  for (int depth = 0; value && depth < 64; ++depth) {
    if (const ir::Tensor* t = float_constant_of(value)) return t;
    const ir::Node* identity = producer_of(value, "Identity");
    if (!identity) return nullptr;
    value = identity->input(0);
  }
  return nullptr;
}

enum class Role { Head, Tail };

// Which channel each element of a node's weight belongs to: the output channel for a head, the
// input channel for a tail. Empty when the node or its weight is not one CLE handles.
struct ChannelMap {
  std::vector<int32_t> channel_of;  // per weight element
  int64_t channels = 0;
};

ChannelMap channel_map(const ir::Node& node, const ir::Tensor& w, Role role) {
  ChannelMap map;
  const std::vector<int64_t>& d = w.dims();
  if (is_op(&node, "Gemm")) {
    // Y = A' B' + C, A' = [M, K], B' = [K, N]: the head's channel is N, the tail's K.
    if (w.rank() != 2) return map;
    if (role == Role::Tail && node.attr_int("transA", 0) != 0) return map;  // K is not A's axis 1
    bool trans_b = node.attr_int("transB", 0) != 0;
    bool by_row = (role == Role::Head) == trans_b;  // B = [N, K] when transB
    map.channels = by_row ? d[0] : d[1];
    map.channel_of.resize(static_cast<size_t>(w.size()));
    for (int64_t r = 0; r < d[0]; ++r)
      for (int64_t c = 0; c < d[1]; ++c) map.channel_of[r * d[1] + c] = static_cast<int32_t>(by_row ? r : c);
    return map;
  }
  // Conv W = [M, C/g, k...]; ConvTranspose W = [C, M/g, k...] (C in, M out, g groups).
  int64_t group = node.attr_int("group", 1);
  if (w.rank() < 3 || group <= 0 || d[0] % group != 0) return map;
  int64_t inner = 1;
  for (size_t i = 2; i < d.size(); ++i) inner *= d[i];
  bool conv = is_op(&node, "Conv");
  // Conv head and ConvTranspose tail: axis 0 is the channel. Otherwise the channel of (i, j)
  // is j within the group of i.
  bool axis0 = conv == (role == Role::Head);
  map.channels = axis0 ? d[0] : d[1] * group;
  int64_t per_group = d[0] / group;
  map.channel_of.resize(static_cast<size_t>(w.size()));
  for (int64_t i = 0; i < d[0]; ++i)
    for (int64_t j = 0; j < d[1]; ++j) {
      auto c = static_cast<int32_t>(axis0 ? i : (i / per_group) * d[1] + j);
      std::fill_n(map.channel_of.begin() + (i * d[1] + j) * inner, inner, c);
    }
  return map;
}

// The head's bias per output channel: Conv's B, or Gemm's C when it is per column ([N], [1, N])
// or a scalar. nullopt: the bias exists but is not one CLE can scale per channel.
std::optional<std::vector<double>> head_bias(const ir::Node& head, int64_t channels, bool* has_bias) {
  *has_bias = false;
  const ir::Value* b = head.input(2);
  if (!b) return std::vector<double>{};
  const ir::Tensor* t = float_constant_through_identity(b);
  if (!t) return std::nullopt;
  bool per_channel = t->size() == channels && (t->rank() == 1 || (t->rank() == 2 && t->dims()[0] == 1));
  bool gemm_scalar = is_op(&head, "Gemm") && t->size() == 1 && t->rank() <= 2;
  if (!per_channel && !gemm_scalar) return std::nullopt;
  *has_bias = true;
  auto v = t->values<float>();
  std::vector<double> out(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) out[c] = v[per_channel ? c : 0];
  return out;
}

bool supported(const ir::Node& node, Role role, const CleOptions& options) {
  if (options.quantizable && !options.quantizable(node)) return false;
  const ir::Tensor* w = float_constant_through_identity(node.input(1));
  if (!w) return false;
  int64_t channels = channel_map(node, *w, role).channels;
  if (channels == 0) return false;
  bool has_bias = false;
  return role == Role::Tail || head_bias(node, channels, &has_bias).has_value();
}

// A constant int64 list input, or nullopt.
std::optional<std::vector<int64_t>> int_list(const ir::Value* value) {
  const ir::Tensor* t = constant_of(value);
  if (!t || t->dtype() != ir::DataType::Int64) return std::nullopt;
  return std::vector<int64_t>(t->values<int64_t>().begin(), t->values<int64_t>().end());
}

// Pad keeps channel c at c and scales with its input: no padding on axis 1, and zeros (or
// copies of the input: reflect, edge, wrap) for the new elements.
bool pad_keeps_channels(const ir::Node& pad, int64_t opset) {
  std::string mode = pad.attr_string("mode", "constant");
  std::optional<std::vector<int64_t>> pads;
  double value = 0;
  if (opset < 11) {
    pads = pad.attr_ints("pads", {});
    value = pad.attr_float("value", 0.0f);
  } else {
    if (pad.input(3)) return false;  // axes (opset 18): not needed by the models CLE meets
    pads = int_list(pad.input(1));
    if (const ir::Value* v = pad.input(2)) {
      const ir::Tensor* t = constant_of(v);
      if (!t || t->size() != 1 || t->dtype() != ir::DataType::Float) return false;
      value = t->values<float>()[0];
    }
  }
  if (!pads || pads->size() < 4 || pads->size() % 2 != 0) return false;
  size_t rank = pads->size() / 2;
  if ((*pads)[1] != 0 || (*pads)[rank + 1] != 0) return false;
  return mode != "constant" || value == 0;
}

// ReduceMean over spatial axes only: each channel stays where it was and the mean of scaled
// values is the scaled mean.
bool reduce_keeps_channels(const ir::Node& reduce, const ir::Value& input, int64_t opset) {
  std::optional<std::vector<int64_t>> axes =
      opset < 18 ? std::optional(reduce.attr_ints("axes", {})) : int_list(reduce.input(1));
  if (!axes || axes->empty()) return false;  // all axes, or not known
  int64_t rank = input.type.has_shape ? static_cast<int64_t>(input.type.shape.size()) : -1;
  for (int64_t a : *axes) {
    if (a < 0 && rank < 0) return false;
    if ((a < 0 ? a + rank : a) < 2) return false;
  }
  return true;
}

std::optional<ClePair> pair_from(ir::Node* head, const ir::Model& model, const CleOptions& options) {
  if (!supported(*head, Role::Head, options)) return std::nullopt;
  int64_t opset = model.opset("");
  ClePair pair{head, nullptr, {}};
  const ir::Value* v = head->output(0);
  while (has_single_use(v)) {
    const ir::Use& use = v->uses()[0];
    ir::Node* user = use.node;
    if (user->graph() != head->graph() || use.input != 0) break;
    if (is_linear(user)) {
      pair.tail = user;
      break;
    }
    bool passes = is_op(user, "Relu") || is_op(user, "LeakyRelu") ||
                  (is_op(user, "Pad") && pad_keeps_channels(*user, opset)) ||
                  (is_op(user, "ReduceMean") && reduce_keeps_channels(*user, *v, opset));
    if (!passes) break;
    pair.between.push_back(user);
    v = user->output(0);
  }
  if (!pair.tail || !supported(*pair.tail, Role::Tail, options)) return std::nullopt;
  const ir::Tensor& wh = *float_constant_through_identity(head->input(1));
  const ir::Tensor& wt = *float_constant_through_identity(pair.tail->input(1));
  if (channel_map(*head, wh, Role::Head).channels != channel_map(*pair.tail, wt, Role::Tail).channels)
    return std::nullopt;
  return pair;
}

// The divisor of the bias column appended to the head's weights (vai_q_onnx's
// _combine_weight_and_bias): chosen from how large the bias is against the weights. Zeroes `bias`
// in channels whose weights are all zero.
double bias_shrink(const ir::Tensor& w, const ChannelMap& map, std::vector<double>& bias) {
  auto values = w.values<float>();
  size_t channels = static_cast<size_t>(map.channels);
  // Per row: the smallest nonzero |w| (zeros take it), or 0 for a row of zeros.
  std::vector<float> min_nonzero(channels, 0.0f);
  for (size_t i = 0; i < values.size(); ++i) {
    float a = std::fabs(values[i]);
    float& m = min_nonzero[map.channel_of[i]];
    if (a != 0 && (m == 0 || a < m)) m = a;
  }
  double max_bias = 0;
  for (double b : bias) max_bias = std::max(max_bias, std::fabs(b));
  for (size_t c = 0; c < channels; ++c)
    if (min_nonzero[c] == 0) bias[c] = 0;
  std::vector<float> factor(values.size());
  float max_clamped = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    int32_t c = map.channel_of[i];
    float a = min_nonzero[c] == 0 ? 1e-7f : values[i] != 0 ? std::fabs(values[i]) : min_nonzero[c];
    a = std::max(a, 1e-7f);
    max_clamped = std::max(max_clamped, a);
    factor[i] = std::fabs(static_cast<float>(bias[c])) / a;
  }
  double mean = 0;
  for (float f : factor) mean += f;
  mean /= static_cast<double>(factor.size());
  // numpy's median: the middle element, or the mean of the two middle ones.
  size_t half = factor.size() / 2;
  std::nth_element(factor.begin(), factor.begin() + half, factor.end());
  double median = factor[half];
  if (factor.size() % 2 == 0) median = (median + *std::max_element(factor.begin(), factor.begin() + half)) / 2;
  if (max_bias < 10 && max_bias / max_clamped < 20) return median > 100 || mean > 1000 ? 5 : 2;
  if (median > 30 || mean > 500) return 20;
  if (median > 15 || mean > 100) return 10;
  return 5;
}

// Per channel: max |element| of the weight's elements in it.
std::vector<double> channel_ranges(const ir::Tensor& w, const ChannelMap& map) {
  std::vector<double> r(static_cast<size_t>(map.channels), 0.0);
  auto values = w.values<float>();
  for (size_t i = 0; i < values.size(); ++i)
    r[map.channel_of[i]] = std::max(r[map.channel_of[i]], static_cast<double>(std::fabs(values[i])));
  return r;
}

// Removes what a replaced input left behind: an Identity or Constant node nothing reads, and
// the initializer it read when that is unused too.
void remove_unused(ir::Graph& graph, ir::Value* value) {
  while (value && value->graph() == &graph && value->uses().empty() && !graph.is_output(value) &&
         !graph.is_input(value)) {
    ir::Node* p = value->producer();
    ir::Value* next = nullptr;
    if (p) {
      if (!is_op(p, "Identity") && !is_op(p, "Constant")) return;
      next = p->input(0);
      graph.remove_node(p);
    } else if (!value->has_initializer()) {
      return;
    }
    graph.remove_value(value);
    value = next;
  }
}

// Input `index` of `node` becomes `tensor` (in place when only this node reads it).
void replace_constant(ir::Model& model, ir::Node& node, size_t index, ir::Tensor tensor) {
  ir::Value* old = node.input(index);
  set_constant_input(model, &node, index, std::move(tensor));
  if (node.input(index) != old) remove_unused(*model.graph, old);
}

// One pair (vai_q_onnx's _cross_layer_equalize): s_c = sqrt(r_tail / r_head), head channel c times
// s_c, tail channel c divided by it. False when every scale is 1.
bool equalize_pair(ir::Model& model, const ClePair& pair, const CleOptions& options) {
  ir::Node &head = *pair.head, &tail = *pair.tail;
  ir::Tensor wh = *float_constant_through_identity(head.input(1));
  ir::Tensor wt = *float_constant_through_identity(tail.input(1));
  ChannelMap hmap = channel_map(head, wh, Role::Head), tmap = channel_map(tail, wt, Role::Tail);
  bool has_bias = false;
  std::vector<double> bias = *head_bias(head, hmap.channels, &has_bias);
  std::vector<double> rh = channel_ranges(wh, hmap), rt = channel_ranges(wt, tmap);
  if (options.scale_append_bias && has_bias) {
    std::vector<double> column = bias;
    double shrink = bias_shrink(wh, hmap, column);
    for (size_t c = 0; c < rh.size(); ++c) rh[c] = std::max(rh[c], std::fabs(column[c]) / shrink);
  }
  std::vector<double> s(rh.size(), 1.0);
  bool any = false;
  for (size_t c = 0; c < s.size(); ++c) {
    double product = rh[c] * rt[c];
    if (product != 0) s[c] = rt[c] / std::sqrt(product);
    if (options.scale_use_threshold && rh[c] + rt[c] < options.weight_threshold) s[c] = 1;
    any = any || s[c] != 1;
  }
  if (!any) return false;
  auto hv = wh.mutable_values<float>();
  for (size_t i = 0; i < hv.size(); ++i) hv[i] = static_cast<float>(hv[i] * s[hmap.channel_of[i]]);
  auto tv = wt.mutable_values<float>();
  for (size_t i = 0; i < tv.size(); ++i) tv[i] = static_cast<float>(tv[i] / s[tmap.channel_of[i]]);
  replace_constant(model, head, 1, std::move(wh));
  replace_constant(model, tail, 1, std::move(wt));
  if (has_bias) {
    const ir::Tensor& old = *float_constant_through_identity(head.input(2));
    std::vector<float> scaled(bias.size());
    for (size_t c = 0; c < bias.size(); ++c) scaled[c] = static_cast<float>(bias[c] * s[c]);
    // A scalar Gemm C becomes one value per column.
    std::vector<int64_t> dims =
        old.size() == static_cast<int64_t>(bias.size()) ? old.dims() : std::vector<int64_t>{hmap.channels};
    if (!std::equal(scaled.begin(), scaled.end(), old.values<float>().begin(), old.values<float>().end()))
      replace_constant(model, head, 2, ir::Tensor::from_values<float>(dims, scaled));
  }
  return true;
}

// The weights of the equalized nodes, for the sweep's change measure.
std::vector<std::vector<float>> snapshot(const std::vector<ir::Node*>& nodes) {
  std::vector<std::vector<float>> out;
  for (const ir::Node* n : nodes) {
    auto v = float_constant_through_identity(n->input(1))->values<float>();
    out.emplace_back(v.begin(), v.end());
  }
  return out;
}

// Σ over nodes of mean |before - after| in float64 (vai_q_onnx's process_cle_transforms).
double total_change(const std::vector<std::vector<float>>& before, const std::vector<ir::Node*>& nodes) {
  double total = 0;
  for (size_t n = 0; n < nodes.size(); ++n) {
    auto after = float_constant_through_identity(nodes[n]->input(1))->values<float>();
    double sum = 0;
    for (size_t i = 0; i < after.size(); ++i)
      sum += std::fabs(static_cast<double>(before[n][i]) - static_cast<double>(after[i]));
    if (!after.empty()) total += sum / static_cast<double>(after.size());
  }
  return total;
}

void check_options(const CleOptions& options) {
  if (options.steps < -1)
    throw Error("CLESteps must be -1 (adaptive) or a number of sweeps >= 0, got " + std::to_string(options.steps));
  if (options.balance_method != "max")
    throw unsupported("CLEBalanceMethod '" + options.balance_method + "' is not supported: the only method is 'max'");
  if (!(options.total_layer_diff_threshold >= 0))
    throw Error("CLETotalLayerDiffThreshold must be >= 0, got " + std::to_string(options.total_layer_diff_threshold));
  if (!(options.weight_threshold >= 0))
    throw Error("CLEWeightThreshold must be >= 0, got " + std::to_string(options.weight_threshold));
}

}  // namespace

std::vector<ClePair> cle_find_pairs(const ir::Model& model, const CleOptions& options) {
  std::vector<ClePair> pairs;
  for (ir::Node* node : nodes_in_order(*model.graph))
    if (is_linear(node))
      if (std::optional<ClePair> pair = pair_from(node, model, options)) pairs.push_back(std::move(*pair));
  return pairs;
}

CleResult equalize_cross_layers(ir::Model& model, const CleOptions& options, PassContext& context) {
  check_options(options);
  CleResult result;
  if (options.replace_clip6_relu) result.changed = replace_clip6_relu(model, context);
  result.pairs = cle_find_pairs(model, options);
  std::vector<ir::Node*> nodes;
  for (const ClePair& p : result.pairs)
    for (ir::Node* n : {p.head, p.tail})
      if (std::find(nodes.begin(), nodes.end(), n) == nodes.end()) nodes.push_back(n);
  // The schedule of process_cle_transforms: fixed sweeps, or until the change stops moving.
  double diff = 10;
  size_t unchanged = 0;
  for (int64_t step = 0; diff > options.total_layer_diff_threshold && unchanged < 20 && !result.pairs.empty(); ++step) {
    if (options.steps >= 0 && step >= options.steps) break;
    if (options.steps < 0 && static_cast<size_t>(step) >= kMaxAdaptiveSweeps) {
      context.log.push_back("cross_layer_equalization: stopped adaptive CLE after " +
                            std::to_string(kMaxAdaptiveSweeps) + " sweeps without converging");
      break;
    }
    std::vector<std::vector<float>> before = snapshot(nodes);
    for (const ClePair& pair : result.pairs) result.changed = equalize_pair(model, pair, options) || result.changed;
    double d = total_change(before, nodes);
    result.sweep_changes.push_back(d);
    if (std::fabs(diff - d) > 1e-9) {
      unchanged = 0;
      diff = d;
    } else {
      ++unchanged;
    }
  }
  if (!result.pairs.empty()) {
    std::string line = "cross_layer_equalization: " + std::to_string(result.pairs.size()) + " pairs, " +
                       std::to_string(result.sweep_changes.size()) + " sweeps";
    if (!result.sweep_changes.empty()) line += ", last weight change " + std::to_string(result.sweep_changes.back());
    context.log.push_back(line);
  }
  return result;
}

bool cross_layer_equalization(ir::Model& model, PassContext& context) {
  return equalize_cross_layers(model, CleOptions{}, context).changed;
}

const PassInfo& cross_layer_equalization_pass() {
  static const PassInfo info{"cross_layer_equalization",
                             "equalizes per-channel weight ranges of consecutive Conv/Gemm layers (include_cle)",
                             cross_layer_equalization};
  return info;
}

}  // namespace onnxptq::passes
