#include "passes/channel_affine.h"

#include <algorithm>

#include "passes/rewrite.h"

namespace onnxptq::passes {

ir::Node* weighted_producer(const ir::Graph& graph, const ir::Value* x) {
  ir::Node* producer = x ? x->producer() : nullptr;
  if (!producer || producer->graph() != &graph || !has_single_use(x) || x->producer_output() != 0) return nullptr;
  if (!is_op(producer, "Conv") && !is_op(producer, "ConvTranspose") && !is_op(producer, "Gemm")) return nullptr;
  return producer;
}

std::optional<ChannelLayout> channel_layout(const ir::Node& producer) {
  const ir::Tensor* w = float_constant_of(producer.input(1));
  if (!w) return std::nullopt;
  if (producer.op_type == "Gemm") {
    if (w->rank() != 2) return std::nullopt;
    return ChannelLayout{w->dims()[producer.attr_int("transB", 0) != 0 ? 0 : 1], 2};
  }
  if (w->rank() < 3) return std::nullopt;
  if (producer.op_type == "Conv") return ChannelLayout{w->dims()[0], w->rank()};
  const int64_t group = producer.attr_int("group", 1);  // ConvTranspose: [C, M/g, k...]
  if (group <= 0) return std::nullopt;
  return ChannelLayout{w->dims()[1] * group, w->rank()};
}

std::optional<std::vector<float>> per_channel(const ir::Tensor& k, ChannelLayout layout) {
  if (k.rank() > layout.rank) return std::nullopt;  // would add dimensions
  // k's dimensions line up with the output's last ones (broadcasting).
  int64_t k_channels = 1;
  for (size_t i = 0; i < k.rank(); ++i) {
    size_t axis = layout.rank - k.rank() + i;
    int64_t d = k.dims()[i];
    if (axis == 1) {
      if (d != 1 && d != layout.channels) return std::nullopt;
      k_channels = d;
    } else if (d != 1) {
      return std::nullopt;
    }
  }
  auto values = k.values<float>();
  std::vector<float> out(layout.channels);
  for (int64_t c = 0; c < layout.channels; ++c) out[c] = values[k_channels == 1 ? 0 : c];
  return out;
}

namespace {

// The output channel of each weight element's row for Conv ([M, C/g, k...]: axis 0) and
// ConvTranspose ([C, M/g, k...]: channel group(c) * M/g + axis-1 index).
bool scale_conv_weight(const ir::Node& node, ir::Tensor& w, const std::vector<double>& scale) {
  if (w.rank() < 3) return false;
  int64_t inner = 1;
  for (size_t d = 2; d < w.rank(); ++d) inner *= w.dims()[d];
  auto values = w.mutable_values<float>();
  int64_t d0 = w.dims()[0], d1 = w.dims()[1];
  if (node.op_type == "Conv") {
    if (d0 != static_cast<int64_t>(scale.size())) return false;
    for (int64_t m = 0; m < d0; ++m)
      for (int64_t j = 0; j < d1 * inner; ++j)
        values[m * d1 * inner + j] = static_cast<float>(values[m * d1 * inner + j] * scale[m]);
    return true;
  }
  int64_t group = node.attr_int("group", 1);
  if (group <= 0 || d0 % group != 0 || d1 * group != static_cast<int64_t>(scale.size())) return false;
  int64_t in_per_group = d0 / group;
  for (int64_t c = 0; c < d0; ++c)
    for (int64_t j = 0; j < d1; ++j)
      for (int64_t k = 0; k < inner; ++k) {
        float& v = values[(c * d1 + j) * inner + k];
        v = static_cast<float>(v * scale[(c / in_per_group) * d1 + j]);
      }
  return true;
}

}  // namespace

bool fold_channel_affine(ir::Model& model, ir::Node& producer, const ChannelAffine& a) {
  const ir::Tensor* w = float_constant_of(producer.input(1));
  if (!w) return false;
  size_t channels = a.scale.size();
  ir::Tensor new_w(ir::DataType::Float, w->dims());
  std::copy(w->values<float>().begin(), w->values<float>().end(), new_w.mutable_values<float>().begin());
  std::vector<double> bias(channels, 0.0);
  if (producer.op_type == "Gemm") {
    // Y = alpha * A' * B' + beta * C over [M, N]: the channel is N, B's column (row when transB).
    if (w->rank() != 2) return false;
    bool trans_b = producer.attr_int("transB", 0) != 0;
    int64_t k = w->dims()[trans_b ? 1 : 0], n = w->dims()[trans_b ? 0 : 1];
    if (n != static_cast<int64_t>(channels)) return false;
    auto values = new_w.mutable_values<float>();
    for (int64_t r = 0; r < k; ++r)
      for (int64_t c = 0; c < n; ++c) {
        float& v = values[trans_b ? c * k + r : r * n + c];
        v = static_cast<float>(v * a.scale[c]);
      }
    if (const ir::Value* c_in = producer.input(2)) {
      const ir::Tensor* c = float_constant_of(c_in);
      // A C broadcast along M only: scalar, [N] or [1, N].
      if (!c || !(c->size() == 1 || (c->size() == n && c->dims().back() == n && c->rank() <= 2))) return false;
      double beta = producer.attr_float("beta", 1.0f);
      for (size_t i = 0; i < channels; ++i) bias[i] = beta * c->values<float>()[c->size() == 1 ? 0 : i];
    }
    producer.set_attribute(ir::Attribute::of_float("beta", 1.0f));
  } else {
    if (!scale_conv_weight(producer, new_w, a.scale)) return false;
    if (const ir::Value* b_in = producer.input(2)) {
      const ir::Tensor* b = float_constant_of(b_in);
      if (!b || b->size() != static_cast<int64_t>(channels)) return false;
      std::copy(b->values<float>().begin(), b->values<float>().end(), bias.begin());
    }
  }
  std::vector<float> new_b(channels);
  for (size_t i = 0; i < channels; ++i) new_b[i] = static_cast<float>(bias[i] * a.scale[i] + a.shift[i]);
  set_constant_input(model, &producer, 1, std::move(new_w));
  const bool no_shift = std::all_of(a.shift.begin(), a.shift.end(), [](double s) { return s == 0; });
  if (producer.input(2) || !no_shift)
    set_constant_input(model, &producer, 2, ir::Tensor::from_values<float>({static_cast<int64_t>(channels)}, new_b));
  return true;
}

}  // namespace onnxptq::passes
