// The Conv and ConvTranspose layers of fast finetune: the forward pass against direct loops
// written here from the ONNX operator specification's definitions (accumulated in double), with
// the output dims and pads worked out by hand from its formulas; the weight and bias gradients
// against central differences; and the inputs they refuse.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>

#include "finetune/layer_op.h"
#include "ir/graph.h"
#include "ir/tensor.h"
#include "onnxptq/error.h"
#include "support/finetune_support.h"
#include "support/one_node.h"

namespace onnxptq::finetune {
namespace {

using Dims = std::vector<int64_t>;
using testing::error_of;
using testing::random_values;
using testing::unravel;

struct ConvCase {
  std::string name{}, op = "Conv";
  Dims x{}, w{};
  bool bias = true;
  int64_t group = 1;
  Dims strides{}, dilations{}, pads{}, output_padding{}, output_shape{};  // empty: absent
  std::string auto_pad{};                                                 // empty: absent
  // Worked out by hand from the specification's formulas.
  Dims y{}, pads_begin{};
};

// A graph holding the case's node, named "layer", with inputs x, w (and b).
struct ConvCaseNode {
  explicit ConvCaseNode(const ConvCase& c) {
    std::vector<ir::Value*> in = {graph.add_value("x"), graph.add_value("w")};
    if (c.bias) in.push_back(graph.add_value("b"));
    node = graph.add_node(c.op, in, {graph.add_value("y")}, "layer");
    if (c.group != 1) node->set_attribute(ir::Attribute::of_int("group", c.group));
    const std::pair<const char*, const Dims*> lists[] = {{"strides", &c.strides},
                                                         {"dilations", &c.dilations},
                                                         {"pads", &c.pads},
                                                         {"output_padding", &c.output_padding},
                                                         {"output_shape", &c.output_shape}};
    for (const auto& [name, values] : lists)
      if (!values->empty()) node->set_attribute(ir::Attribute::of_ints(name, *values));
    if (!c.auto_pad.empty()) node->set_attribute(ir::Attribute::of_string("auto_pad", c.auto_pad));
  }
  ir::Graph graph;
  ir::Node* node = nullptr;
};

std::unique_ptr<LayerOp> make_op(const ConvCase& c, int threads = 2) {
  ConvCaseNode one(c);
  const int64_t out_channels = c.op == "Conv" ? c.w[0] : c.w[1] * c.group;
  return make_layer_op(*one.node, c.w, c.bias ? static_cast<size_t>(out_channels) : 0, threads);
}

// The specification's sums, one product at a time. A window of the "from" positions (Conv: the
// output, ConvTranspose: the input) at kernel offset k reaches "to" position
// from * stride - pads_begin + k * dilation, skipped outside [0, to). y holds the sums, and
// magnitude the sums of their terms' absolute values (the scale of float rounding).
struct Reference {
  std::vector<double> y, magnitude;
};

Reference reference(const ConvCase& c, const Dims& x_dims, const Dims& y_dims, const std::vector<float>& x,
                    const std::vector<float>& w, const std::vector<float>& b) {
  const bool transpose = c.op == "ConvTranspose";
  const size_t rank = x_dims.size() - 2;
  const Dims in(x_dims.begin() + 2, x_dims.end()), out(y_dims.begin() + 2, y_dims.end());
  const Dims kernel(c.w.begin() + 2, c.w.end());
  const Dims strides = c.strides.empty() ? Dims(rank, 1) : c.strides;
  const Dims dilations = c.dilations.empty() ? Dims(rank, 1) : c.dilations;
  const Dims& from = transpose ? in : out;
  const Dims& to = transpose ? out : in;
  const int64_t batch = x_dims[0], in_channels = x_dims[1], out_channels = y_dims[1];
  const int64_t in_group = in_channels / c.group, out_group = out_channels / c.group;
  const int64_t in_size = ir::element_count(in), out_size = ir::element_count(out), kernel_size = ir::element_count(kernel);
  Reference r;
  r.y.assign(static_cast<size_t>(batch * out_channels * out_size), 0.0);
  r.magnitude = r.y;
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t m = 0; m < out_channels; ++m)
      for (int64_t o = 0; o < out_size; ++o) {
        const size_t at = static_cast<size_t>((n * out_channels + m) * out_size + o);
        r.y[at] = c.bias ? b[static_cast<size_t>(m)] : 0.0;
        r.magnitude[at] = std::abs(r.y[at]);
      }
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t ci = 0; ci < in_channels; ++ci)
      for (int64_t mg = 0; mg < out_group; ++mg) {
        const int64_t g = ci / in_group, m = g * out_group + mg;
        // Conv: W[m, ci within the group, k]; ConvTranspose: W[ci, m within the group, k].
        const int64_t w_row = transpose ? ci * out_group + mg : m * in_group + ci % in_group;
        for (int64_t p = 0; p < ir::element_count(from); ++p) {
          const Dims p_idx = unravel(p, from);
          for (int64_t k = 0; k < kernel_size; ++k) {
            const Dims k_idx = unravel(k, kernel);
            int64_t q = 0;
            bool inside = true;
            for (size_t d = 0; d < rank; ++d) {
              const int64_t i = p_idx[d] * strides[d] - c.pads_begin[d] + k_idx[d] * dilations[d];
              inside = inside && i >= 0 && i < to[d];
              q = q * to[d] + i;
            }
            if (!inside) continue;
            const int64_t x_at = (n * in_channels + ci) * in_size + (transpose ? p : q);
            const int64_t y_at = (n * out_channels + m) * out_size + (transpose ? q : p);
            const double term =
                static_cast<double>(x[static_cast<size_t>(x_at)]) * w[static_cast<size_t>(w_row * kernel_size + k)];
            r.y[static_cast<size_t>(y_at)] += term;
            r.magnitude[static_cast<size_t>(y_at)] += std::abs(term);
          }
        }
      }
  return r;
}

std::vector<ConvCase> cases() {
  std::vector<ConvCase> all;
  // Conv: out = floor((in + pads - ((k - 1) * dilation + 1)) / stride) + 1.
  all.push_back({.name = "plain", .x = {2, 3, 7, 6}, .w = {4, 3, 3, 3}, .y = {2, 4, 5, 4}, .pads_begin = {0, 0}});
  all.push_back({.name = "strides, dilations, asymmetric pads",
                 .x = {2, 3, 9, 8},
                 .w = {5, 3, 3, 2},
                 .bias = false,
                 .strides = {2, 3},
                 .dilations = {2, 1},
                 .pads = {1, 0, 2, 1},
                 .y = {2, 5, 4, 3},
                 .pads_begin = {1, 0}});
  all.push_back({.name = "two groups",
                 .x = {2, 4, 6, 5},
                 .w = {6, 2, 3, 3},
                 .group = 2,
                 .pads = {1, 1, 1, 1},
                 .y = {2, 6, 6, 5},
                 .pads_begin = {1, 1}});
  all.push_back({.name = "depthwise",
                 .x = {2, 4, 6, 6},
                 .w = {4, 1, 3, 3},
                 .group = 4,
                 .pads = {1, 1, 1, 1},
                 .y = {2, 4, 6, 6},
                 .pads_begin = {1, 1}});
  all.push_back({.name = "depthwise, two outputs per channel, strided",
                 .x = {2, 4, 6, 6},
                 .w = {8, 1, 3, 3},
                 .group = 4,
                 .strides = {2, 2},
                 .pads = {1, 1, 1, 1},
                 .y = {2, 8, 3, 3},
                 .pads_begin = {1, 1}});
  // SAME_*: out = ceil(in / stride), total pad (out - 1) * stride + extent - in, its odd unit at
  // the end (SAME_UPPER) or the beginning (SAME_LOWER). Here totals 1 and 1, then 3 and 1.
  all.push_back({.name = "SAME_UPPER",
                 .x = {2, 3, 6, 7},
                 .w = {4, 3, 3, 2},
                 .strides = {2, 2},
                 .auto_pad = "SAME_UPPER",
                 .y = {2, 4, 3, 4},
                 .pads_begin = {0, 0}});
  all.push_back({.name = "SAME_LOWER, dilated",
                 .x = {2, 3, 6, 7},
                 .w = {4, 3, 3, 2},
                 .strides = {2, 2},
                 .dilations = {2, 1},
                 .auto_pad = "SAME_LOWER",
                 .y = {2, 4, 3, 4},
                 .pads_begin = {2, 1}});
  all.push_back({.name = "VALID",
                 .x = {2, 3, 7, 7},
                 .w = {2, 3, 3, 3},
                 .bias = false,
                 .strides = {2, 2},
                 .auto_pad = "VALID",
                 .y = {2, 2, 3, 3},
                 .pads_begin = {0, 0}});
  all.push_back({.name = "pads wider than the kernel",
                 .x = {2, 2, 4, 4},
                 .w = {3, 2, 2, 2},
                 .strides = {1, 2},
                 .pads = {3, 0, 1, 3},
                 .y = {2, 3, 7, 3},
                 .pads_begin = {3, 0}});
  all.push_back({.name = "1-D",
                 .x = {3, 3, 10},
                 .w = {4, 3, 3},
                 .strides = {2},
                 .dilations = {2},
                 .pads = {2, 1},
                 .y = {3, 4, 5},
                 .pads_begin = {2}});
  all.push_back({.name = "3-D, two groups",
                 .x = {2, 4, 5, 4, 6},
                 .w = {4, 2, 2, 3, 3},
                 .group = 2,
                 .strides = {1, 1, 2},
                 .pads = {1, 0, 1, 0, 1, 1},
                 .y = {2, 4, 5, 3, 3},
                 .pads_begin = {1, 0, 1}});
  // ConvTranspose: out = stride * (in - 1) + output_padding + (k - 1) * dilation + 1 - pads; with
  // output_shape (or SAME_*: in * stride) the total pad is that sum minus the wanted size,
  // beginning with total - total / 2 (total / 2 for SAME_UPPER), in floor division.
  all.push_back({.name = "transposed, strides and pads",
                 .op = "ConvTranspose",
                 .x = {2, 3, 4, 5},
                 .w = {3, 2, 3, 3},
                 .strides = {2, 2},
                 .pads = {1, 0, 0, 1},
                 .y = {2, 2, 8, 10},
                 .pads_begin = {1, 0}});
  all.push_back({.name = "transposed, output_padding, groups, dilations",
                 .op = "ConvTranspose",
                 .x = {2, 4, 3, 3},
                 .w = {4, 3, 3, 3},
                 .group = 2,
                 .strides = {2, 2},
                 .dilations = {1, 2},
                 .pads = {1, 1, 1, 1},
                 .output_padding = {1, 1},
                 .y = {2, 6, 6, 8},
                 .pads_begin = {1, 1}});
  all.push_back({.name = "transposed, output_shape",
                 .op = "ConvTranspose",
                 .x = {2, 3, 4, 4},
                 .w = {3, 2, 3, 3},
                 .bias = false,
                 .strides = {2, 2},
                 .output_shape = {8, 9},
                 .y = {2, 2, 8, 9},
                 .pads_begin = {1, 0}});
  all.push_back({.name = "transposed, output_shape with the batch and channels",
                 .op = "ConvTranspose",
                 .x = {2, 3, 4, 4},
                 .w = {3, 2, 3, 3},
                 .strides = {2, 2},
                 .output_shape = {2, 2, 8, 9},
                 .y = {2, 2, 8, 9},
                 .pads_begin = {1, 0}});
  all.push_back({.name = "transposed, output_shape past the result",  // totals -1 and -2
                 .op = "ConvTranspose",
                 .x = {2, 2, 3, 3},
                 .w = {2, 2, 2, 2},
                 .strides = {2, 2},
                 .output_shape = {7, 8},
                 .y = {2, 2, 7, 8},
                 .pads_begin = {0, -1}});
  all.push_back({.name = "transposed, depthwise",
                 .op = "ConvTranspose",
                 .x = {2, 3, 4, 4},
                 .w = {3, 1, 3, 3},
                 .group = 3,
                 .strides = {2, 2},
                 .pads = {1, 1, 1, 1},
                 .output_padding = {1, 1},
                 .y = {2, 3, 8, 8},
                 .pads_begin = {1, 1}});
  all.push_back({.name = "transposed, SAME_UPPER",
                 .op = "ConvTranspose",
                 .x = {2, 2, 3, 4},
                 .w = {2, 3, 3, 3},
                 .strides = {2, 2},
                 .auto_pad = "SAME_UPPER",
                 .y = {2, 3, 6, 8},
                 .pads_begin = {0, 0}});
  all.push_back({.name = "transposed, SAME_LOWER",
                 .op = "ConvTranspose",
                 .x = {2, 2, 3, 4},
                 .w = {2, 3, 3, 3},
                 .strides = {2, 2},
                 .auto_pad = "SAME_LOWER",
                 .y = {2, 3, 6, 8},
                 .pads_begin = {1, 1}});
  all.push_back({.name = "transposed, strides wider than the kernel",
                 .op = "ConvTranspose",
                 .x = {2, 2, 3, 3},
                 .w = {2, 2, 2, 2},
                 .strides = {3, 3},
                 .y = {2, 2, 8, 8},
                 .pads_begin = {0, 0}});
  all.push_back({.name = "transposed 1-D, dilated, output_padding",
                 .op = "ConvTranspose",
                 .x = {2, 2, 5},
                 .w = {2, 3, 2},
                 .strides = {3},
                 .dilations = {2},
                 .output_padding = {2},
                 .y = {2, 3, 17},
                 .pads_begin = {0}});
  all.push_back({.name = "transposed 3-D",
                 .op = "ConvTranspose",
                 .x = {2, 2, 3, 3, 2},
                 .w = {2, 2, 2, 2, 3},
                 .strides = {2, 1, 2},
                 .pads = {0, 1, 0, 0, 0, 1},
                 .y = {2, 2, 6, 3, 4},
                 .pads_begin = {0, 1, 0}});
  return all;
}

const ConvCase& named(const std::string& name) {
  static const std::vector<ConvCase> all = cases();
  for (const ConvCase& c : all)
    if (c.name == name) return c;
  throw std::logic_error("no case " + name);
}

void expect_forward_matches(const LayerOp& op, const ConvCase& c, const Dims& x_dims, const Dims& y_dims,
                            uint32_t seed) {
  ASSERT_EQ(op.output_dims(x_dims), y_dims);
  const std::vector<float> x = random_values(ir::element_count(x_dims), seed), w = random_values(ir::element_count(c.w), seed + 1);
  const std::vector<float> b = random_values(c.bias ? y_dims[1] : 0, seed + 2);
  std::vector<float> y(static_cast<size_t>(ir::element_count(y_dims)), NAN);
  op.forward(x.data(), x_dims, w.data(), c.bias ? b.data() : nullptr, y.data());
  const Reference r = reference(c, x_dims, y_dims, x, w, b);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], r.y[i], 1e-5 * r.magnitude[i] + 1e-30) << "y[" << i << "]";
}

TEST(ConvOp, ForwardMatchesTheSpecificationsLoops) {
  for (const ConvCase& c : cases()) {
    SCOPED_TRACE(c.name);
    expect_forward_matches(*make_op(c), c, c.x, c.y, 10);
  }
}

TEST(ConvOp, EachInputShapeGetsItsOwnPlan) {
  const ConvCase& c = named("strides, dilations, asymmetric pads");
  auto op = make_op(c, 1);
  expect_forward_matches(*op, c, c.x, c.y, 20);
  expect_forward_matches(*op, c, {3, 3, 11, 5}, {3, 5, 5, 2}, 21);
  expect_forward_matches(*op, c, c.x, c.y, 22);
  const ConvCase& t = named("transposed, output_padding, groups, dilations");
  auto top = make_op(t, 1);
  expect_forward_matches(*top, t, {1, 4, 2, 5}, {1, 6, 4, 12}, 23);
  expect_forward_matches(*top, t, t.x, t.y, 24);
}

// L = sum(dy * y) is linear in w and b: central differences are exact up to rounding, L being
// summed in double. Every bias value, a sample of the weights.
TEST(ConvOp, GradientsMatchCentralDifferences) {
  for (const ConvCase& c : cases()) {
    SCOPED_TRACE(c.name);
    // The gradients on 2 threads; the many forward passes of the differences on 1, which a
    // machine shared with other jobs runs much faster (no waiting at OpenMP barriers).
    auto op = make_op(c, 2), probe = make_op(c, 1);
    const std::vector<float> x = random_values(ir::element_count(c.x), 30), w = random_values(ir::element_count(c.w), 31);
    const std::vector<float> b = random_values(c.bias ? c.y[1] : 0, 32), dy = random_values(ir::element_count(c.y), 33);
    std::vector<float> y(dy.size());
    auto loss = [&](const std::vector<float>& wv, const std::vector<float>& bv) {
      probe->forward(x.data(), c.x, wv.data(), c.bias ? bv.data() : nullptr, y.data());
      double l = 0;
      for (size_t i = 0; i < y.size(); ++i) l += static_cast<double>(dy[i]) * y[i];
      return l;
    };
    std::vector<float> dw(w.size(), NAN), db(b.size(), NAN);
    op->backward(x.data(), c.x, w.data(), dy.data(), dw.data(), c.bias ? db.data() : nullptr);
    double scale = 0;
    for (float g : dw) scale = std::max(scale, std::abs(static_cast<double>(g)));
    for (float g : db) scale = std::max(scale, std::abs(static_cast<double>(g)));
    ASSERT_GT(scale, 0.1);
    const float h = 0.5f;
    // A sample of the weights, spread over all of them, the last included.
    std::vector<size_t> sample;
    for (size_t i = 0; i < w.size(); i += std::max<size_t>(1, w.size() / 24)) sample.push_back(i);
    sample.push_back(w.size() - 1);
    for (size_t i : sample) {
      std::vector<float> up = w, down = w;
      up[i] += h;
      down[i] -= h;
      const double numeric = (loss(up, b) - loss(down, b)) / (static_cast<double>(up[i]) - down[i]);
      ASSERT_NEAR(dw[i], numeric, 1e-3 * scale) << "w[" << i << "]";
    }
    for (size_t i = 0; i < b.size(); ++i) {
      std::vector<float> up = b, down = b;
      up[i] += h;
      down[i] -= h;
      const double numeric = (loss(w, up) - loss(w, down)) / (static_cast<double>(up[i]) - down[i]);
      ASSERT_NEAR(db[i], numeric, 1e-3 * scale) << "b[" << i << "]";
    }
    // Either gradient alone is the same.
    std::vector<float> dw_alone(w.size(), NAN), db_alone(b.size(), NAN);
    op->backward(x.data(), c.x, w.data(), dy.data(), dw_alone.data(), nullptr);
    EXPECT_EQ(dw_alone, dw);
    if (c.bias) {
      op->backward(x.data(), c.x, w.data(), dy.data(), nullptr, db_alone.data());
      EXPECT_EQ(db_alone, db);
    }
  }
}

TEST(ConvOp, RefusesWhatDoesNotFit) {
  auto made = [](ConvCase c, Dims w, size_t bias_size) {
    return error_of([&] {
      ConvCaseNode one(c);
      make_layer_op(*one.node, w, bias_size, 1);
    });
  };
  const ConvCase& conv = named("plain");  // x [2, 3, 7, 6], w [4, 3, 3, 3]
  EXPECT_EQ(made(conv, {4, 3, 3, 3}, 4), "");
  EXPECT_NE(made(conv, {4, 3}, 4).find("'layer'"), std::string::npos);  // 2 dims
  EXPECT_NE(made(conv, {4, 3, 3, 3, 3, 3}, 4), "");                     // 4-D
  EXPECT_NE(made(conv, {4, 3, 0, 3}, 4), "");
  EXPECT_NE(made(conv, {4, 3, 3, 3}, 3), "");  // a bias of 3 for 4 output channels
  ConvCase grouped = conv;
  grouped.group = 3;  // 4 output channels
  EXPECT_NE(made(grouped, {4, 1, 3, 3}, 4), "");
  ConvCase transposed = named("transposed, strides and pads");  // w [3, 2, 3, 3]
  transposed.group = 2;                                         // 3 input channels
  EXPECT_NE(made(transposed, {3, 2, 3, 3}, 4), "");
  ConvCase bad = conv;
  bad.strides = {1, 1, 1};
  EXPECT_NE(made(bad, conv.w, 4), "");
  bad = conv;
  bad.pads = {1, 1};
  EXPECT_NE(made(bad, conv.w, 4), "");
  bad = conv;
  bad.dilations = {0, 1};
  EXPECT_NE(made(bad, conv.w, 4), "");
  bad = conv;
  bad.auto_pad = "SAME";
  EXPECT_NE(made(bad, conv.w, 4), "");
  bad = conv;
  bad.output_padding = {1, 1};  // ConvTranspose's
  EXPECT_NE(made(bad, conv.w, 4), "");
  {
    ConvCaseNode one(conv);
    one.node->set_attribute(ir::Attribute::of_ints("kernel_shape", {5, 5}));
    EXPECT_THROW(make_layer_op(*one.node, conv.w, 4, 1), Error);
  }

  auto op = make_op(conv, 1);
  std::vector<float> buffer(4096), w(ir::element_count(conv.w)), b(4);
  const std::string rank = error_of([&] { op->output_dims({2, 3, 7}); });
  EXPECT_NE(rank.find("'layer'"), std::string::npos) << rank;
  EXPECT_THROW(op->output_dims({2, 3, 7, 6, 5}), Error);
  EXPECT_THROW(op->forward(buffer.data(), {2, 3, 7}, w.data(), b.data(), buffer.data()), Error);
  EXPECT_THROW(op->backward(buffer.data(), {2, 3, 7}, w.data(), buffer.data(), w.data(), b.data()), Error);
  EXPECT_THROW(op->output_dims({2, 5, 7, 6}), Error);  // 5 channels for a weight taking 3
  EXPECT_THROW(op->output_dims({2, 3, 2, 6}), Error);  // smaller than the kernel
  ConvCase cut = named("transposed, strides and pads");
  cut.pads = {4, 5, 4, 6};  // removes the whole output: 2 * 3 + 3 - 8 = 1, 2 * 4 + 3 - 11 = 0 columns
  auto cut_op = make_op(cut, 1);
  EXPECT_THROW(cut_op->output_dims(cut.x), Error);
}

}  // namespace
}  // namespace onnxptq::finetune
