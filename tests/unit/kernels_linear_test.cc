// Conv, ConvTranspose, Gemm, MatMul and Einsum beyond the backend tests: awkward sizes, every
// padding mode, groups, constant and fed weights, broadcasting corners, other element types,
// empty tensors, errors. Expected values come from naive loops written here (straight from the
// ONNX definitions, computed in double) or from hand computations.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <thread>

#include "engine/kernels/linear.h"
#include "engine/session.h"
#include "ir/float16.h"
#include "ir/model.h"
#include "onnxptq/error.h"
#include "support/one_node.h"

namespace onnxptq {
namespace {

using ir::Attribute;
using ir::DataType;
using ir::Tensor;

using testing::error_of;
using Input = testing::NodeInput;

// Runs one node of the default domain and returns its first output.
Tensor run_node(const std::string& op, int opset, const std::vector<Input>& inputs, std::vector<Attribute> attrs,
                int threads = 2) {
  return testing::run_node(op, "", opset, inputs, std::move(attrs), 1, threads)[0];
}

std::vector<float> random_floats(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(rng);
  return v;
}

Tensor random_tensor(const std::vector<int64_t>& dims, unsigned seed) {
  return Tensor::from_values<float>(dims, random_floats(ir::element_count(dims), seed));
}

std::vector<double> as_doubles(const Tensor& t) {
  std::vector<double> v;
  switch (t.dtype()) {
    case DataType::Float:
      for (float x : t.values<float>()) v.push_back(x);
      break;
    case DataType::Double:
      for (double x : t.values<double>()) v.push_back(x);
      break;
    case DataType::Float16:
      for (uint16_t x : t.values<uint16_t>()) v.push_back(ir::half_to_float(x));
      break;
    default: ADD_FAILURE() << "unexpected type";
  }
  return v;
}

Tensor to_double(const Tensor& t) {
  std::vector<double> v = as_doubles(t);
  return Tensor::from_values<double>(t.dims(), v);
}

Tensor to_half(const Tensor& t) {
  std::vector<uint16_t> h;
  for (float x : t.values<float>()) h.push_back(ir::float_to_half(x));
  return Tensor(DataType::Float16, t.dims(), ir::Bytes::copy_of(h.data(), h.size() * sizeof(uint16_t)));
}

void expect_close(const Tensor& got, const std::vector<int64_t>& dims, const std::vector<double>& want, double tol = 1e-4) {
  ASSERT_EQ(got.dims(), dims);
  std::vector<double> g = as_doubles(got);
  ASSERT_EQ(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_NEAR(g[i], want[i], tol * (1 + std::fabs(want[i]))) << "element " << i;
}

// ---------------------------------------------------------------- naive references

struct ConvParams {
  std::vector<int64_t> strides, dilations, pads_begin, pads_end;  // per spatial axis
  int64_t group = 1;
};

int64_t product(const std::vector<int64_t>& v, size_t from = 0) {
  int64_t p = 1;
  for (size_t i = from; i < v.size(); ++i) p *= v[i];
  return p;
}

// Decodes a row-major flat index into coordinates of `dims`.
std::vector<int64_t> coords(int64_t flat, const std::vector<int64_t>& dims) {
  std::vector<int64_t> c(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    c[d] = flat % dims[d];
    flat /= dims[d];
  }
  return c;
}

// y[n, m, o...] = b[m] + sum_{c, k...} x[n, g*C/G + c, o*s - pb + k*d] * w[m, c, k...]
std::vector<double> naive_conv(const Tensor& x, const Tensor& w, const Tensor* b, const ConvParams& p,
                               std::vector<int64_t>& out_dims) {
  std::vector<double> xv = as_doubles(x), wv = as_doubles(w), bv = b ? as_doubles(*b) : std::vector<double>();
  const auto& xd = x.dims();
  const auto& wd = w.dims();
  size_t nd = xd.size() - 2;
  std::vector<int64_t> in(xd.begin() + 2, xd.end()), k(wd.begin() + 2, wd.end()), out(nd);
  for (size_t i = 0; i < nd; ++i)
    out[i] = (in[i] + p.pads_begin[i] + p.pads_end[i] - ((k[i] - 1) * p.dilations[i] + 1)) / p.strides[i] + 1;
  int64_t n_ = xd[0], c_ = xd[1], m_ = wd[0], cg = c_ / p.group, mg = m_ / p.group;
  out_dims = {n_, m_};
  out_dims.insert(out_dims.end(), out.begin(), out.end());
  std::vector<double> y(static_cast<size_t>(product(out_dims)));
  for (int64_t flat = 0; flat < static_cast<int64_t>(y.size()); ++flat) {
    std::vector<int64_t> yc = coords(flat, out_dims);
    int64_t n = yc[0], m = yc[1], g = m / mg;
    double acc = b ? bv[m] : 0;
    for (int64_t c = 0; c < cg; ++c)
      for (int64_t kf = 0; kf < product(k); ++kf) {
        std::vector<int64_t> kc = coords(kf, k);
        int64_t xoff = n * c_ + g * cg + c;
        bool inside = true;
        for (size_t d = 0; d < nd; ++d) {
          int64_t pos = yc[2 + d] * p.strides[d] - p.pads_begin[d] + kc[d] * p.dilations[d];
          inside = inside && pos >= 0 && pos < in[d];
          xoff = xoff * in[d] + pos;
        }
        if (inside) acc += xv[xoff] * wv[(m * cg + c) * product(k) + kf];
      }
    y[flat] = acc;
  }
  return y;
}

// Scatter form of ConvTranspose: x[n, c, i...] * w[c, m, k...] lands on y[n, g*M/G + m,
// i*s - pb + k*d]; out_spatial given.
std::vector<double> naive_conv_transpose(const Tensor& x, const Tensor& w, const Tensor* b, const ConvParams& p,
                                         const std::vector<int64_t>& out_spatial) {
  std::vector<double> xv = as_doubles(x), wv = as_doubles(w), bv = b ? as_doubles(*b) : std::vector<double>();
  const auto& xd = x.dims();
  const auto& wd = w.dims();
  size_t nd = xd.size() - 2;
  std::vector<int64_t> in(xd.begin() + 2, xd.end()), k(wd.begin() + 2, wd.end());
  int64_t n_ = xd[0], c_ = xd[1], mg = wd[1], m_ = mg * p.group, cg = c_ / p.group;
  std::vector<int64_t> out_dims{n_, m_};
  out_dims.insert(out_dims.end(), out_spatial.begin(), out_spatial.end());
  std::vector<double> y(static_cast<size_t>(product(out_dims)));
  int64_t osz = product(out_spatial);
  for (int64_t i = 0; i < static_cast<int64_t>(y.size()); ++i) y[i] = b ? bv[(i / osz) % m_] : 0;
  for (int64_t flat = 0; flat < static_cast<int64_t>(xv.size()); ++flat) {
    std::vector<int64_t> xc = coords(flat, xd);
    int64_t n = xc[0], c = xc[1], g = c / cg;
    for (int64_t m = 0; m < mg; ++m)
      for (int64_t kf = 0; kf < product(k); ++kf) {
        std::vector<int64_t> kc = coords(kf, k);
        int64_t yoff = n * m_ + g * mg + m;
        bool inside = true;
        for (size_t d = 0; d < nd; ++d) {
          int64_t pos = xc[2 + d] * p.strides[d] - p.pads_begin[d] + kc[d] * p.dilations[d];
          inside = inside && pos >= 0 && pos < out_spatial[d];
          yoff = yoff * out_spatial[d] + pos;
        }
        if (inside) y[yoff] += xv[flat] * wv[(c * mg + m) * product(k) + kf];
      }
  }
  return y;
}

// ---------------------------------------------------------------- Conv

struct ConvCase {
  std::vector<int64_t> x, w;
  ConvParams p;
  std::vector<Attribute> attrs() const {
    std::vector<Attribute> a;
    a.push_back(Attribute::of_ints("strides", p.strides));
    a.push_back(Attribute::of_ints("dilations", p.dilations));
    std::vector<int64_t> pads = p.pads_begin;
    pads.insert(pads.end(), p.pads_end.begin(), p.pads_end.end());
    a.push_back(Attribute::of_ints("pads", pads));
    a.push_back(Attribute::of_int("group", p.group));
    return a;
  }
};

void check_conv(const ConvCase& c, bool constant_weights, bool bias, unsigned seed) {
  Tensor x = random_tensor(c.x, seed), w = random_tensor(c.w, seed + 1), b = random_tensor({c.w[0]}, seed + 2);
  std::vector<Input> inputs{{"x", x}, {"w", w, constant_weights}};
  if (bias) inputs.push_back({"b", b, constant_weights});
  std::vector<int64_t> dims;
  std::vector<double> want = naive_conv(x, w, bias ? &b : nullptr, c.p, dims);
  expect_close(run_node("Conv", 13, inputs, c.attrs()), dims, want);
}

TEST(Conv, TwoDAwkwardSizesStridesDilationsAsymmetricPads) {
  ConvCase c{{2, 3, 13, 11}, {5, 3, 3, 2}, {{2, 1}, {2, 1}, {1, 0}, {2, 1}, 1}};
  check_conv(c, true, true, 1);
  check_conv(c, false, true, 2);
  check_conv(c, true, false, 3);
}

TEST(Conv, GroupsDepthwiseAndMultiplier) {
  check_conv({{1, 6, 9, 9}, {4, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, {1, 1}, 2}}, true, true, 4);
  check_conv({{1, 8, 14, 14}, {8, 1, 3, 3}, {{2, 2}, {1, 1}, {1, 1}, {1, 1}, 8}}, true, true, 5);     // depthwise
  check_conv({{1, 4, 7, 7}, {12, 1, 3, 3}, {{1, 1}, {1, 1}, {0, 0}, {0, 0}, 4}}, false, false, 6);  // multiplier 3
}

TEST(Conv, OneByOneAndLargeChannelCounts) {
  check_conv({{1, 67, 10, 10}, {33, 67, 1, 1}, {{1, 1}, {1, 1}, {0, 0}, {0, 0}, 1}}, true, true, 7);
  check_conv({{1, 64, 8, 8}, {96, 64, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, {1, 1}, 1}}, true, true, 8);
}

TEST(Conv, OneDAndThreeD) {
  check_conv({{2, 3, 17}, {4, 3, 4}, {{3}, {2}, {2}, {1}, 1}}, true, true, 9);
  check_conv({{1, 2, 5, 6, 7}, {3, 2, 2, 3, 2}, {{1, 2, 1}, {1, 1, 2}, {1, 0, 1}, {0, 1, 1}, 1}}, true, true, 10);
}

TEST(Conv, FourSpatialAxesUseTheLoop) {
  check_conv({{1, 2, 3, 4, 3, 4}, {2, 2, 2, 2, 2, 2}, {{1, 1, 1, 1}, {1, 1, 1, 1}, {0, 1, 0, 1}, {1, 0, 1, 0}, 1}}, true,
             true, 11);
}

TEST(Conv, AutoPadModes) {
  Tensor x = random_tensor({1, 2, 7, 8}, 12), w = random_tensor({3, 2, 3, 4}, 13);
  // SAME: output = ceil(in / stride) = [4, 8]; total padding = (out-1)*s + k - in: H 3*2+3-7 = 2
  // (1 and 1), W 7*1+4-8 = 3: UPPER puts 1 before and 2 after, LOWER 2 before and 1 after.
  // VALID: [(7-3)/2+1, 8-4+1] = [3, 5].
  struct Mode {
    std::string name;
    std::vector<int64_t> strides, pb, pe;
  };
  for (const Mode& m : {Mode{"SAME_UPPER", {2, 1}, {1, 1}, {1, 2}}, Mode{"SAME_LOWER", {2, 1}, {1, 2}, {1, 1}},
                        Mode{"VALID", {2, 1}, {0, 0}, {0, 0}}}) {
    std::vector<Attribute> a;
    a.push_back(Attribute::of_string("auto_pad", m.name));
    a.push_back(Attribute::of_ints("strides", m.strides));
    a.push_back(Attribute::of_ints("kernel_shape", {3, 4}));
    std::vector<int64_t> dims;
    std::vector<double> want = naive_conv(x, w, nullptr, {m.strides, {1, 1}, m.pb, m.pe, 1}, dims);
    if (m.name != "VALID") {
      EXPECT_EQ(dims, (std::vector<int64_t>{1, 3, 4, 8})) << m.name;
    }
    expect_close(run_node("Conv", 11, {{"x", x}, {"w", w, true}}, std::move(a)), dims, want);
  }
}

TEST(Conv, DoubleAndFloat16) {
  ConvCase c{{1, 3, 6, 5}, {2, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, {1, 1}, 1}};
  Tensor x = random_tensor(c.x, 14), w = random_tensor(c.w, 15), b = random_tensor({2}, 16);
  std::vector<int64_t> dims;
  std::vector<double> want = naive_conv(x, w, &b, c.p, dims);
  Tensor yd = run_node("Conv", 13, {{"x", to_double(x)}, {"w", to_double(w), true}, {"b", to_double(b)}}, c.attrs());
  EXPECT_EQ(yd.dtype(), DataType::Double);
  expect_close(yd, dims, want, 1e-12);
  Tensor xh = to_half(x), wh = to_half(w), bh = to_half(b);
  want = naive_conv(xh, wh, &bh, c.p, dims);
  Tensor yh = run_node("Conv", 13, {{"x", xh}, {"w", wh, true}, {"b", bh, true}}, c.attrs());
  EXPECT_EQ(yh.dtype(), DataType::Float16);
  expect_close(yh, dims, want, 2e-3);
}

TEST(Conv, ShapeChangesBetweenRunsAndManyThreads) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.add_value("x");
  ir::Value* w = g.add_value("w");
  ir::Value* y = g.add_value("y");
  Tensor wt = random_tensor({4, 3, 3, 3}, 17);
  g.set_initializer(w, wt);
  g.add_input(x);
  g.add_node("Conv", {x, w}, {y})->set_attribute(Attribute::of_ints("pads", {1, 1, 1, 1}));
  g.add_output(y);
  engine::Session session(m);
  ConvParams p{{1, 1}, {1, 1}, {1, 1}, {1, 1}, 1};
  for (std::vector<int64_t> shape : {std::vector<int64_t>{1, 3, 8, 8}, {2, 3, 5, 9}, {1, 3, 8, 8}}) {
    Tensor xt = random_tensor(shape, 18);
    std::vector<int64_t> dims;
    std::vector<double> want = naive_conv(xt, wt, nullptr, p, dims);
    // Several runs at once share the kernel and its cached primitive.
    std::vector<std::thread> threads;
    std::vector<Tensor> results(4);
    for (int t = 0; t < 4; ++t) threads.emplace_back([&, t] { results[t] = session.run({{"x", xt}})[0]; });
    for (auto& t : threads) t.join();
    for (const Tensor& r : results) expect_close(r, dims, want);
  }
}

TEST(Conv, EmptyBatchGivesAnEmptyOutput) {
  Tensor x(DataType::Float, {0, 2, 5, 5});
  Tensor y = run_node("Conv", 13, {{"x", x}, {"w", random_tensor({3, 2, 3, 3}, 19), true}}, {});
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{0, 3, 3, 3}));
}

TEST(Conv, PostOpsRunInsideThePrimitive) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value *x = g.add_value("x"), *w = g.add_value("w"), *y = g.add_value("y");
  Tensor wt = random_tensor({5, 3, 3, 3}, 20), xt = random_tensor({1, 3, 9, 9}, 21);
  ir::Node* n = g.add_node("Conv", {x, w}, {y});
  n->set_attribute(Attribute::of_ints("pads", {1, 1, 1, 1}));
  std::vector<int64_t> dims;
  std::vector<double> plain = naive_conv(xt, wt, nullptr, {{1, 1}, {1, 1}, {1, 1}, {1, 1}, 1}, dims);
  using K = engine::linear::PostOp::Kind;
  struct Case {
    engine::linear::PostOp op;
    std::function<double(double)> f;
  };
  for (const Case& c : {Case{{K::Relu}, [](double v) { return std::max(v, 0.0); }},
                        Case{{K::Clip, 0.f, 0.25f}, [](double v) { return std::min(std::max(v, 0.0), 0.25); }},
                        Case{{K::LeakyRelu, 0.1f}, [](double v) { return v < 0 ? 0.1 * v : v; }},
                        Case{{K::HardSigmoid, 0.2f, 0.5f}, [](double v) { return std::clamp(0.2 * v + 0.5, 0.0, 1.0); }},
                        Case{{K::HardSwish}, [](double v) { return v * std::clamp(v / 6 + 0.5, 0.0, 1.0); }},
                        Case{{K::Sigmoid}, [](double v) { return 1 / (1 + std::exp(-v)); }},
                        Case{{K::Tanh}, [](double v) { return std::tanh(v); }}}) {
    engine::KernelInfo info{*n, 13, {nullptr, &wt}, {}, {}, {}};
    auto kernel = engine::linear::make_conv_kernel(info, {c.op});
    std::vector<const Tensor*> in{&xt, &wt};
    std::vector<Tensor> out(1);
    kernel->run(engine::RunContext{2}, in, out);
    std::vector<double> want;
    for (double v : plain) want.push_back(c.f(v));
    expect_close(out[0], dims, want);
  }
}

TEST(Conv, SumPostOpAddsTheResidualBeforeRelu) {
  using K = engine::linear::PostOp::Kind;
  // 3x3 (blocked layout, summand reordered in), 1x1 on 12x12 (dense), 4-D spatial (loop).
  for (auto [xd, wd, pads] : {std::tuple<std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>>{
                                  {1, 8, 10, 10}, {16, 8, 3, 3}, {1, 1, 1, 1}},
                              {{1, 8, 12, 12}, {16, 8, 1, 1}, {0, 0, 0, 0}},
                              {{1, 2, 3, 3, 3, 3}, {3, 2, 1, 1, 1, 1}, {0, 0, 0, 0, 0, 0, 0, 0}}}) {
    ir::Model m;
    ir::Graph& g = *m.graph;
    ir::Value *x = g.add_value("x"), *w = g.add_value("w"), *b = g.add_value("b"), *sv = g.add_value("s"), *y = g.add_value("y");
    ir::Node* n = g.add_node("Conv", {x, w, b, sv}, {y});
    n->set_attribute(Attribute::of_ints("pads", pads));
    Tensor xt = random_tensor(xd, 80), wt = random_tensor(wd, 81), bt = random_tensor({wd[0]}, 82);
    size_t nd = xd.size() - 2;
    std::vector<int64_t> dims;
    std::vector<double> plain = naive_conv(
        xt, wt, &bt,
        {std::vector<int64_t>(nd, 1), std::vector<int64_t>(nd, 1), std::vector<int64_t>(pads.begin(), pads.begin() + nd),
         std::vector<int64_t>(pads.begin() + nd, pads.end()), 1},
        dims);
    Tensor st = random_tensor(dims, 83);
    engine::KernelInfo info{*n, 13, {nullptr, &wt, &bt, nullptr}, {}, {}, {}};
    auto kernel = engine::linear::make_conv_kernel(info, {{K::Sum, 0.5f}, {K::Relu}});
    std::vector<const Tensor*> in{&xt, &wt, &bt, &st};
    std::vector<Tensor> out(1);
    for (int repeat = 0; repeat < 2; ++repeat) {
      kernel->run(engine::RunContext{2}, in, out);
      std::vector<double> want;
      auto sv_ = st.values<float>();
      for (size_t i = 0; i < plain.size(); ++i) want.push_back(std::max(plain[i] + 0.5 * sv_[i], 0.0));
      expect_close(out[0], dims, want);
    }
    in.pop_back();
    EXPECT_NE(error_of([&] { kernel->run(engine::RunContext{2}, in, out); }).find("the Sum post-op needs input 3"),
              std::string::npos);
  }
}

TEST(Conv, BadAttributesAndShapes) {
  Tensor x = random_tensor({1, 4, 5, 5}, 22), w = random_tensor({2, 4, 3, 3}, 23);
  auto conv = [&](std::vector<Attribute> a, Tensor xx, Tensor ww) {
    return error_of([&] { run_node("Conv", 13, {{"x", xx}, {"w", ww, true}}, std::move(a)); });
  };
  auto one = [](Attribute a) {
    std::vector<Attribute> v;
    v.push_back(std::move(a));
    return v;
  };
  EXPECT_NE(conv(one(Attribute::of_string("auto_pad", "SAME")), x, w).find("auto_pad 'SAME' is not"), std::string::npos);
  EXPECT_NE(conv(one(Attribute::of_int("group", 0)), x, w).find("group 0 must be positive"), std::string::npos);
  EXPECT_NE(conv(one(Attribute::of_ints("strides", {0, 1})), x, w).find("strides [0,1] must be positive"), std::string::npos);
  EXPECT_NE(conv(one(Attribute::of_ints("pads", {-1, 0, 0, 0})), x, w).find("must be non-negative"), std::string::npos);
  EXPECT_NE(conv(one(Attribute::of_ints("kernel_shape", {2, 2})), x, w).find("kernel_shape [2,2] does not match W"),
            std::string::npos);
  EXPECT_NE(conv(one(Attribute::of_ints("strides", {1, 1, 1})), x, w).find("strides [1,1,1] has 3 values, expected 2"),
            std::string::npos);
  EXPECT_NE(conv(one(Attribute::of_int("group", 2)), x, w).find("expects 8 input channels (group 2), X has 4"),
            std::string::npos);
  EXPECT_NE(conv({}, x, random_tensor({2, 4, 7, 7}, 24)).find("larger than the padded input"), std::string::npos);
  EXPECT_NE(conv({}, random_tensor({4, 5}, 25), w).find("X must have a batch, a channel"), std::string::npos);
  EXPECT_NE(error_of([&] { run_node("Conv", 13, {{"x", x}, {"w", w}, {"b", random_tensor({3}, 26)}}, {}); })
                .find("B of shape [3] must be [2]"),
            std::string::npos);
}

// ---------------------------------------------------------------- ConvTranspose

TEST(ConvTranspose, GroupsDilationsOutputPaddingAgainstTheScatterLoop) {
  // out = s*(in-1) + output_padding + (k-1)*d + 1 - pads
  Tensor x = random_tensor({2, 4, 5, 6}, 30), w = random_tensor({4, 3, 3, 2}, 31), b = random_tensor({6}, 32);
  ConvParams p{{2, 3}, {2, 1}, {1, 0}, {0, 2}, 2};
  std::vector<int64_t> out{2 * 4 + 1 + 5 - 1 - 0, 3 * 5 + 0 + 2 - 0 - 2};
  std::vector<Attribute> a;
  a.push_back(Attribute::of_ints("strides", p.strides));
  a.push_back(Attribute::of_ints("dilations", p.dilations));
  a.push_back(Attribute::of_ints("pads", {1, 0, 0, 2}));
  a.push_back(Attribute::of_ints("output_padding", {1, 0}));
  a.push_back(Attribute::of_int("group", 2));
  std::vector<double> want = naive_conv_transpose(x, w, &b, p, out);
  expect_close(run_node("ConvTranspose", 13, {{"x", x}, {"w", w, true}, {"b", b, true}}, std::move(a)),
               {2, 6, out[0], out[1]}, want);
}

TEST(ConvTranspose, OutputShapeAndSameLowerAndDouble) {
  Tensor x = random_tensor({1, 2, 4, 3}, 33), w = random_tensor({2, 3, 3, 3}, 34);
  // output_shape [9, 7] with stride 2: full sizes 2*3+3 = 9 and 2*2+3 = 7, no padding.
  {
    std::vector<Attribute> a;
    a.push_back(Attribute::of_ints("strides", {2, 2}));
    a.push_back(Attribute::of_ints("output_shape", {9, 7}));
    std::vector<double> want = naive_conv_transpose(x, w, nullptr, {{2, 2}, {1, 1}, {0, 0}, {0, 0}, 1}, {9, 7});
    expect_close(run_node("ConvTranspose", 13, {{"x", to_double(x)}, {"w", to_double(w)}}, std::move(a)), {1, 3, 9, 7},
                 want, 1e-12);
  }
  // SAME_LOWER: output = in * stride = [8, 6]; total padding 1 per axis, placed at the start.
  {
    std::vector<Attribute> a;
    a.push_back(Attribute::of_ints("strides", {2, 2}));
    a.push_back(Attribute::of_string("auto_pad", "SAME_LOWER"));
    std::vector<double> want = naive_conv_transpose(x, w, nullptr, {{2, 2}, {1, 1}, {1, 1}, {0, 0}, 1}, {8, 6});
    expect_close(run_node("ConvTranspose", 13, {{"x", x}, {"w", w, true}}, std::move(a)), {1, 3, 8, 6}, want);
  }
  // output_shape smaller than the full result by 3: the spec puts 2 of the padding first.
  {
    std::vector<Attribute> a;
    a.push_back(Attribute::of_ints("strides", {2, 2}));
    a.push_back(Attribute::of_ints("output_shape", {6, 7}));
    std::vector<double> want = naive_conv_transpose(x, w, nullptr, {{2, 2}, {1, 1}, {2, 0}, {1, 0}, 1}, {6, 7});
    expect_close(run_node("ConvTranspose", 13, {{"x", x}, {"w", w, true}}, std::move(a)), {1, 3, 6, 7}, want);
  }
}

TEST(ConvTranspose, OneDAndThreeDAndBadShapes) {
  Tensor x1 = random_tensor({1, 3, 7}, 35), w1 = random_tensor({3, 2, 4}, 36);
  std::vector<Attribute> a;
  a.push_back(Attribute::of_ints("strides", {3}));
  expect_close(run_node("ConvTranspose", 13, {{"x", x1}, {"w", w1}}, std::move(a)), {1, 2, 22},
               naive_conv_transpose(x1, w1, nullptr, {{3}, {1}, {0}, {0}, 1}, {22}));
  Tensor x3 = random_tensor({1, 2, 3, 2, 4}, 37), w3 = random_tensor({2, 2, 2, 2, 2}, 38);
  expect_close(run_node("ConvTranspose", 13, {{"x", x3}, {"w", w3, true}}, {}), {1, 2, 4, 3, 5},
               naive_conv_transpose(x3, w3, nullptr, {{1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, 1}, {4, 3, 5}));
  EXPECT_NE(error_of([&] { run_node("ConvTranspose", 13, {{"x", x1}, {"w", random_tensor({2, 2, 4}, 39)}}, {}); })
                .find("expects 2 input channels, X has 3"),
            std::string::npos);
}

// ---------------------------------------------------------------- Gemm

// y = alpha * op(a) op(b) + beta * c, with c broadcast from [cr, cc].
std::vector<double> naive_gemm(const Tensor& a, const Tensor& b, const Tensor* c, bool ta, bool tb, double alpha,
                               double beta) {
  std::vector<double> av = as_doubles(a), bv = as_doubles(b);
  int64_t m = ta ? a.dims()[1] : a.dims()[0], k = ta ? a.dims()[0] : a.dims()[1], n = tb ? b.dims()[0] : b.dims()[1];
  std::vector<double> y(static_cast<size_t>(m * n));
  std::vector<int64_t> cd;
  std::vector<double> cv;
  if (c) {
    cv = as_doubles(*c);
    cd = c->dims();
    cd.insert(cd.begin(), 2 - cd.size(), 1);
  }
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) s += av[ta ? p * m + i : i * k + p] * bv[tb ? j * k + p : p * n + j];
      y[i * n + j] = alpha * s + (c ? beta * cv[(cd[0] == 1 ? 0 : i) * cd[1] + (cd[1] == 1 ? 0 : j)] : 0);
    }
  return y;
}

TEST(Gemm, TransposesScalesAndEveryBiasShape) {
  int64_t m = 13, k = 7, n = 11;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (std::vector<int64_t> cdims : {std::vector<int64_t>{}, {1}, {n}, {m, 1}, {1, n}, {m, n}})
        for (auto [alpha, beta] : {std::pair{1.f, 1.f}, {0.5f, -2.f}, {2.f, 0.f}}) {
          Tensor a = random_tensor(ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k}, 40);
          Tensor b = random_tensor(tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, 41);
          Tensor c = random_tensor(cdims, 42);
          std::vector<Attribute> at;
          at.push_back(Attribute::of_int("transA", ta));
          at.push_back(Attribute::of_int("transB", tb));
          at.push_back(Attribute::of_float("alpha", alpha));
          at.push_back(Attribute::of_float("beta", beta));
          SCOPED_TRACE(::testing::Message() << "transA " << ta << " transB " << tb << " C " << ir::dims_to_string(cdims)
                                            << " alpha " << alpha << " beta " << beta);
          expect_close(run_node("Gemm", 13, {{"a", a}, {"b", b, true}, {"c", c, ta}}, std::move(at)), {m, n},
                       naive_gemm(a, b, &c, ta, tb, alpha, beta));
        }
}

TEST(Gemm, OptionalCIntegersAndDouble) {
  Tensor a = random_tensor({3, 5}, 43), b = random_tensor({5, 4}, 44);
  expect_close(run_node("Gemm", 11, {{"a", a}, {"b", b}}, {}), {3, 4}, naive_gemm(a, b, nullptr, false, false, 1, 1));
  expect_close(run_node("Gemm", 13, {{"a", to_double(a)}, {"b", to_double(b)}, {"", Tensor()}, }, {}), {3, 4},
               naive_gemm(a, b, nullptr, false, false, 1, 1), 1e-12);
  // [[1,2],[3,4]] x [[5,6],[7,8]] = [[19,22],[43,50]], plus C = [100, 200].
  Tensor ai = Tensor::from_values<int32_t>({2, 2}, std::vector<int32_t>{1, 2, 3, 4});
  Tensor bi = Tensor::from_values<int32_t>({2, 2}, std::vector<int32_t>{5, 6, 7, 8});
  Tensor ci = Tensor::from_values<int32_t>({2}, std::vector<int32_t>{100, 200});
  Tensor y = run_node("Gemm", 13, {{"a", ai}, {"b", bi}, {"c", ci}}, {});
  EXPECT_EQ(std::vector<int32_t>(y.values<int32_t>().begin(), y.values<int32_t>().end()),
            (std::vector<int32_t>{119, 222, 143, 250}));
}

TEST(Gemm, OldBroadcastAttributeAndErrors) {
  Tensor a = random_tensor({3, 5}, 45), b = random_tensor({5, 4}, 46), c = random_tensor({4}, 47);
  std::vector<Attribute> at;
  at.push_back(Attribute::of_int("broadcast", 1));
  expect_close(run_node("Gemm", 6, {{"a", a}, {"b", b}, {"c", c}}, std::move(at)), {3, 4},
               naive_gemm(a, b, &c, false, false, 1, 1));
  EXPECT_NE(error_of([&] { run_node("Gemm", 6, {{"a", a}, {"b", b}, {"c", c}}, {}); }).find("must be [3,4] when broadcast is 0"),
            std::string::npos);
  EXPECT_NE(error_of([&] { run_node("Gemm", 13, {{"a", a}, {"b", a}}, {}); }).find("do not agree on the inner size"),
            std::string::npos);
  EXPECT_NE(error_of([&] { run_node("Gemm", 13, {{"a", a}, {"b", b}, {"c", random_tensor({3}, 48)}}, {}); })
                .find("C of shape [3] does not broadcast to [3,4]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { run_node("Gemm", 13, {{"a", random_tensor({2, 3, 5}, 49)}, {"b", b}}, {}); })
                .find("A and B must be matrices"),
            std::string::npos);
}

// ---------------------------------------------------------------- MatMul

// NumPy matmul on float data, batch axes broadcast.
std::vector<double> naive_matmul(const Tensor& a, const Tensor& b, std::vector<int64_t>& out) {
  std::vector<double> av = as_doubles(a), bv = as_doubles(b);
  std::vector<int64_t> ad = a.dims(), bd = b.dims();
  bool a1 = ad.size() == 1, b1 = bd.size() == 1;
  if (a1) ad.insert(ad.begin(), 1);
  if (b1) bd.push_back(1);
  int64_t m = ad[ad.size() - 2], k = ad.back(), n = bd.back();
  size_t r = std::max(ad.size(), bd.size());
  ad.insert(ad.begin(), r - ad.size(), 1);
  bd.insert(bd.begin(), r - bd.size(), 1);
  std::vector<int64_t> batch(r - 2);
  for (size_t i = 0; i + 2 < r; ++i) batch[i] = std::max(ad[i], bd[i]);
  out = batch;
  if (!a1) out.push_back(m);
  if (!b1) out.push_back(n);
  std::vector<double> y;
  for (int64_t flat = 0; flat < product(batch); ++flat) {
    std::vector<int64_t> bc = coords(flat, batch);
    int64_t ao = 0, bo = 0;
    for (size_t i = 0; i + 2 < r; ++i) {
      ao = ao * ad[i] + (ad[i] == 1 ? 0 : bc[i]);
      bo = bo * bd[i] + (bd[i] == 1 ? 0 : bc[i]);
    }
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += av[(ao * m + i) * k + p] * bv[(bo * k + p) * n + j];
        y.push_back(s);
      }
  }
  return y;
}

TEST(MatMul, BroadcastingAndOneDOperands) {
  using Dims = std::vector<int64_t>;
  for (auto [ad, bd] : {std::pair<Dims, Dims>{{7}, {7}}, {{7}, {2, 7, 5}}, {{3, 4, 7}, {7}}, {{2, 1, 3, 4}, {5, 4, 2}},
                        {{1, 13}, {3, 13, 6}}, {{2, 7, 13}, {13, 5}}, {{2, 7, 13}, {1, 13, 5}}, {{4, 1, 5}, {4, 5, 1}},
                        {{2, 3, 1, 127}, {1, 1, 127, 3}}})
    for (bool constant : {false, true}) {
      SCOPED_TRACE(ir::dims_to_string(ad) + " x " + ir::dims_to_string(bd) + (constant ? " constant B" : ""));
      Tensor a = random_tensor(ad, 50), b = random_tensor(bd, 51);
      Dims out;
      std::vector<double> want = naive_matmul(a, b, out);
      expect_close(run_node("MatMul", 13, {{"a", a}, {"b", b, constant}}, {}), out, want);
    }
}

TEST(MatMul, ConstantWeightsServeChangingShapes) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value *a = g.add_value("a"), *b = g.add_value("b"), *y = g.add_value("y");
  Tensor bt = random_tensor({64, 48}, 90);
  g.set_initializer(b, bt);
  g.add_input(a);
  g.add_node("MatMul", {a, b}, {y});
  g.add_output(y);
  engine::Session session(m);
  for (std::vector<int64_t> shape : {std::vector<int64_t>{3, 64}, {5, 2, 64}, {64}, {1, 197, 64}, {3, 64}}) {
    Tensor at = random_tensor(shape, 91);
    std::vector<int64_t> out;
    std::vector<double> want = naive_matmul(at, bt, out);
    expect_close(session.run({{"a", at}})[0], out, want);
  }
}

TEST(MatMul, EmptyAndZeroInnerSize) {
  Tensor y = run_node("MatMul", 13, {{"a", Tensor(DataType::Float, {2, 3, 0})}, {"b", Tensor(DataType::Float, {0, 4})}}, {});
  expect_close(y, {2, 3, 4}, std::vector<double>(24, 0.0));
  y = run_node("MatMul", 13, {{"a", Tensor(DataType::Float, {0, 3})}, {"b", random_tensor({3, 4}, 52), true}}, {});
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{0, 4}));
}

TEST(MatMul, IntegerDoubleAndFloat16) {
  Tensor a = Tensor::from_values<int64_t>({2, 3}, std::vector<int64_t>{1, 2, 3, 4, 5, 6});
  Tensor b = Tensor::from_values<int64_t>({3}, std::vector<int64_t>{1, -1, 2});
  Tensor y = run_node("MatMul", 13, {{"a", a}, {"b", b}}, {});
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{2}));
  EXPECT_EQ(std::vector<int64_t>(y.values<int64_t>().begin(), y.values<int64_t>().end()), (std::vector<int64_t>{5, 11}));
  Tensor af = random_tensor({3, 4, 5}, 53), bf = random_tensor({5, 2}, 54);
  std::vector<int64_t> out;
  std::vector<double> want = naive_matmul(af, bf, out);
  expect_close(run_node("MatMul", 13, {{"a", to_double(af)}, {"b", to_double(bf)}}, {}), out, want, 1e-12);
  Tensor ah = to_half(af), bh = to_half(bf);
  want = naive_matmul(ah, bh, out);
  Tensor yh = run_node("MatMul", 13, {{"a", ah}, {"b", bh, true}}, {});
  EXPECT_EQ(yh.dtype(), DataType::Float16);
  expect_close(yh, out, want, 2e-3);
}

TEST(MatMul, Errors) {
  EXPECT_NE(error_of([&] { run_node("MatMul", 13, {{"a", random_tensor({2, 3}, 55)}, {"b", random_tensor({4, 2}, 56)}}, {}); })
                .find("do not agree on the inner size (3 vs 4)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { run_node("MatMul", 13, {{"a", random_tensor({2, 2, 3}, 57)}, {"b", random_tensor({3, 3, 2}, 58)}}, {}); })
                .find("cannot be broadcast"),
            std::string::npos);
  EXPECT_NE(error_of([&] { run_node("MatMul", 13, {{"a", random_tensor({}, 59)}, {"b", random_tensor({3}, 60)}}, {}); })
                .find("rank 1 or more"),
            std::string::npos);
}

// ---------------------------------------------------------------- Einsum

Tensor einsum(const std::string& equation, const std::vector<Tensor>& inputs) {
  std::vector<Input> in;
  for (size_t i = 0; i < inputs.size(); ++i) in.push_back({"x" + std::to_string(i), inputs[i]});
  std::vector<Attribute> a;
  a.push_back(Attribute::of_string("equation", equation));
  return run_node("Einsum", 12, in, std::move(a));
}

Tensor iota(const std::vector<int64_t>& dims, double start = 1) {
  std::vector<double> v(static_cast<size_t>(product(dims)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<double>(i);
  return Tensor::from_values<double>(dims, v);
}

TEST(Einsum, MatrixProductsAgainstMatMul) {
  Tensor a = random_tensor({3, 5, 7}, 61), b = random_tensor({3, 7, 4}, 62);
  std::vector<int64_t> out;
  std::vector<double> want = naive_matmul(a, b, out);
  expect_close(einsum("bij,bjk->bik", {a, b}), out, want);
  std::vector<double> summed(5 * 4, 0.0);  // implicit output "ik": b appears twice and is summed
  for (size_t i = 0; i < want.size(); ++i) summed[i % 20] += want[i];
  expect_close(einsum("bij,bjk", {a, b}), {5, 4}, summed);
  expect_close(einsum("...ij,...jk->...ik", {a, b}), out, want);  // ellipsis batch
  // Broadcast ellipsis: [2,1] batch against [3].
  Tensor c = random_tensor({2, 1, 5, 7}, 63), d = random_tensor({3, 7, 4}, 64);
  want = naive_matmul(c, d, out);
  expect_close(einsum("...ij,...jk->...ik", {c, d}), out, want);
}

TEST(Einsum, DiagonalsTracesSumsAndTransposes) {
  Tensor m = iota({3, 3});  // 1..9
  expect_close(einsum("ii->i", {m}), {3}, {1, 5, 9}, 0);
  expect_close(einsum("ii", {m}), {}, {15}, 0);
  expect_close(einsum("ij->", {m}), {}, {45}, 0);
  expect_close(einsum("ij->j", {m}), {3}, {12, 15, 18}, 0);
  expect_close(einsum("ba", {iota({2, 3})}), {3, 2}, {1, 4, 2, 5, 3, 6}, 0);  // implicit: a, b
  expect_close(einsum("i,i", {iota({4}), iota({4})}), {}, {1 + 4 + 9 + 16}, 0);
  expect_close(einsum("i,j->ij", {iota({2}), iota({3})}), {2, 3}, {1, 2, 3, 2, 4, 6}, 0);
  // b-th diagonal of a batch: [2,3,3] -> [2,3].
  expect_close(einsum("bii->bi", {iota({2, 3, 3})}), {2, 3}, {1, 5, 9, 10, 14, 18}, 0);
  // Three operands: sum_j sum_k a_ij b_jk c_k.
  Tensor a = iota({2, 3}), b = iota({3, 2}), c = iota({2});
  // b c = [1*1+2*2, 3+8, 5+12] = [5, 11, 17]; a (bc) = [5+22+51, 20+55+102] = [78, 177]
  expect_close(einsum("ij,jk,k->i", {a, b, c}), {2}, {78, 177}, 0);
  // A label summed inside one operand while the other broadcasts: sum_j a_ij * d_i.
  expect_close(einsum("ij,i->i", {a, iota({2})}), {2}, {6, 30}, 0);
}

TEST(Einsum, ScalarsAndFloat16) {
  Tensor two = Tensor::from_values<double>({}, std::vector<double>{2});
  expect_close(einsum(",i->i", {two, iota({3})}), {3}, {2, 4, 6}, 0);
  expect_close(einsum(",", {two, two}), {}, {4}, 0);
  Tensor a = random_tensor({4, 6}, 92), b = random_tensor({6, 5}, 93);
  Tensor ah = to_half(a), bh = to_half(b);
  std::vector<int64_t> out;
  std::vector<double> want = naive_matmul(ah, bh, out);
  Tensor y = einsum("ij,jk", {ah, bh});
  EXPECT_EQ(y.dtype(), DataType::Float16);
  expect_close(y, out, want, 2e-3);
}

TEST(Einsum, UppercaseLabelsIntegersAndEmpty) {
  Tensor a = Tensor::from_values<int32_t>({2, 2}, std::vector<int32_t>{1, 2, 3, 4});
  Tensor y = einsum("Ab,bC->AC", {a, a});
  EXPECT_EQ(std::vector<int32_t>(y.values<int32_t>().begin(), y.values<int32_t>().end()), (std::vector<int32_t>{7, 10, 15, 22}));
  y = einsum("ij->", {Tensor(DataType::Float, {0, 3})});
  expect_close(y, {}, {0}, 0);
  y = einsum("ij,jk->ik", {Tensor(DataType::Float, {2, 0}), Tensor(DataType::Float, {0, 3})});
  expect_close(y, {2, 3}, std::vector<double>(6, 0), 0);
}

TEST(Einsum, Errors) {
  Tensor m = iota({2, 3});
  EXPECT_NE(error_of([&] { einsum("ij-", {m}); }).find("unexpected '-'"), std::string::npos);
  EXPECT_NE(error_of([&] { einsum("ij,jk->ik", {m}); }).find("has 2 inputs, the node 1"), std::string::npos);
  EXPECT_NE(error_of([&] { einsum("ij->k", {m}); }).find("output label 'k' is in no input"), std::string::npos);
  EXPECT_NE(error_of([&] { einsum("ijk", {m}); }).find("does not have the 3 axes"), std::string::npos);
  EXPECT_NE(error_of([&] { einsum("ii", {m}); }).find("label 'i' has size 2 and 3"), std::string::npos);
  EXPECT_NE(error_of([&] { einsum("ij,ij->i", {m, iota({3, 2})}); }).find("has size 2 and 3"), std::string::npos);
  EXPECT_NE(error_of([&] { einsum("...j->j", {iota({2, 3})}); }).find("output has no '...'"), std::string::npos);
}

// ---------------------------------------------------------------- timings (printed, not checked)

double seconds_per_run(const std::function<void()>& f, int min_runs = 5, double min_seconds = 0.3) {
  f();  // warm up: plans, packed weights
  auto start = std::chrono::steady_clock::now();
  int runs = 0;
  double elapsed = 0;
  while (runs < min_runs || elapsed < min_seconds) {
    f();
    ++runs;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return elapsed / runs;
}

int bench_threads() {
  const char* t = std::getenv("ONNXPTQ_BENCH_THREADS");
  return t ? std::atoi(t) : 2;
}

// A session of one node with constant weights, run repeatedly on one input.
double time_node(const std::string& op, const Tensor& x, const std::vector<Tensor>& constants, std::vector<Attribute> attrs,
                 double min_seconds = 0.3) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* xv = g.add_value("x");
  xv->type = ir::ValueType::tensor(DataType::Float, x.dims());
  g.add_input(xv);
  std::vector<ir::Value*> ins{xv};
  for (size_t i = 0; i < constants.size(); ++i) {
    ir::Value* v = g.add_value("c" + std::to_string(i));
    g.set_initializer(v, constants[i]);
    ins.push_back(v);
  }
  ir::Value* y = g.add_value("y");
  ir::Node* n = g.add_node(op, ins, {y});
  for (Attribute& a : attrs) n->set_attribute(std::move(a));
  g.add_output(y);
  engine::SessionOptions options;
  options.threads = bench_threads();
  engine::Session session(m, options);
  std::map<std::string, Tensor> feeds{{"x", x}};
  return seconds_per_run([&] { session.run(feeds); }, 3, min_seconds);
}

TEST(LinearBenchmark, Conv3x3And1x1AndTransformerMatMul) {
  std::vector<Attribute> a;
  a.push_back(Attribute::of_ints("pads", {1, 1, 1, 1}));
  double t = time_node("Conv", random_tensor({1, 64, 56, 56}, 70), {random_tensor({64, 64, 3, 3}, 71), random_tensor({64}, 72)},
                       std::move(a));
  double flops = 2.0 * 64 * 56 * 56 * 64 * 9;
  std::printf("[bench] Conv 1x64x56x56 -> 64, 3x3 pad 1, %d threads: %.3f ms, %.1f GFLOP/s\n", bench_threads(), t * 1e3,
              flops / t * 1e-9);
  t = time_node("Conv", random_tensor({1, 256, 56, 56}, 73), {random_tensor({64, 256, 1, 1}, 74)}, {});
  flops = 2.0 * 256 * 56 * 56 * 64;
  std::printf("[bench] Conv 1x256x56x56 -> 64, 1x1: %.3f ms, %.1f GFLOP/s\n", t * 1e3, flops / t * 1e-9);
  t = time_node("MatMul", random_tensor({1, 197, 768}, 75), {random_tensor({768, 3072}, 76)}, {});
  flops = 2.0 * 197 * 768 * 3072;
  std::printf("[bench] MatMul [1,197,768] x [768,3072] (constant): %.3f ms, %.1f GFLOP/s\n", t * 1e3, flops / t * 1e-9);
}

// The convolutions of a torchvision model, each timed alone with the input shape it gets in
// the model (tracked through the model's few other ops), summed: the conv share of a run.
TEST(LinearBenchmark, TorchvisionConvolutions) {
  const char* dir = std::getenv("ONNXPTQ_BENCH_MODELS");
  std::filesystem::path models = dir ? dir : ONNXPTQ_MODELS_DIR;
  for (const char* name : {"resnet50", "mobilenet_v2"}) {
    std::filesystem::path path = models / (std::string(name) + ".onnx");
    if (!std::filesystem::exists(path)) {
      std::printf("[bench] %s: no %s (set ONNXPTQ_BENCH_MODELS)\n", name, path.c_str());
      continue;
    }
    ir::Model model = ir::load_model(path);
    std::map<std::string, std::vector<int64_t>> shape;
    shape[model.graph->inputs()[0]->name()] = {1, 3, 224, 224};
    double total = 0, flops = 0;
    int convs = 0;
    // Weights may reach a Conv through an Identity (torch.onnx shares tensors that way).
    auto constant = [](const ir::Value* v) -> const Tensor& {
      while (!v->has_initializer() && v->producer() && v->producer()->op_type == "Identity") v = v->producer()->input(0);
      if (!v->has_initializer()) throw Error("'" + v->name() + "' is not a constant");
      return v->initializer();
    };
    for (ir::Node* n : model.graph->topological_order()) {
      auto in_shape = [&](size_t i) {
        const ir::Value* v = n->input(i);
        return v->has_initializer() ? v->initializer().dims() : shape[v->name()];
      };
      std::vector<int64_t> x = n->inputs().empty() ? std::vector<int64_t>{} : in_shape(0), y = x;
      if (n->op_type == "Conv") {
        ConvParams p{n->attr_ints("strides", {1, 1}), n->attr_ints("dilations", {1, 1}), {}, {}, n->attr_int("group", 1)};
        std::vector<int64_t> pads = n->attr_ints("pads", {0, 0, 0, 0});
        const Tensor& w = constant(n->input(1));
        y = {x[0], w.dims()[0]};
        for (size_t d = 0; d < 2; ++d)
          y.push_back((x[2 + d] + pads[d] + pads[d + 2] - (w.dims()[2 + d] - 1) * p.dilations[d] - 1) / p.strides[d] + 1);
        std::vector<Tensor> constants{w};
        if (n->input(2)) constants.push_back(constant(n->input(2)));
        std::vector<Attribute> attrs;
        for (const Attribute& a : n->attributes)
          attrs.push_back(a.type == ir::AttrType::Int ? Attribute::of_int(a.name, a.i) : Attribute::of_ints(a.name, a.ints));
        total += time_node("Conv", random_tensor(x, 77), constants, std::move(attrs), 0.02);
        flops += 2.0 * product(y) * product(w.dims(), 1);
        ++convs;
      } else if (n->op_type == "MaxPool") {
        std::vector<int64_t> k = n->attr_ints("kernel_shape", {}), s = n->attr_ints("strides", {1, 1}),
                             pads = n->attr_ints("pads", {0, 0, 0, 0});
        y = {x[0], x[1]};
        for (size_t d = 0; d < 2; ++d) y.push_back((x[2 + d] + pads[d] + pads[d + 2] - k[d]) / s[d] + 1);
      } else if (n->op_type == "GlobalAveragePool") {
        y = {x[0], x[1], 1, 1};
      } else if (n->op_type == "Flatten") {
        y = {x[0], product(x, 1)};
      } else if (n->op_type == "Gemm") {
        y = {x[0], constant(n->input(1)).dims()[0]};
      }
      for (const ir::Value* o : n->outputs()) shape[o->name()] = y;
    }
    std::printf("[bench] %s: %d convolutions alone, %d threads: %.2f ms in total, %.1f GFLOP/s\n", name, convs,
                bench_threads(), total * 1e3, flops / total * 1e-9);
  }
}

// oneDNN splits the K sum of a small product (a row vector, few columns) over the threads; the
// engine runs such products on one thread, so their bits do not depend on the thread count
// (calibration gives the same ranges with any number of workers). Before, 920 of resnet18's 1000
// logits (its 1x512x1000 Gemm) changed between 1 and 2 threads on an AVX2 CPU.
TEST(MatMul, SmallProductsGiveTheSameBitsForAnyThreadCount) {
  for (const auto& [m, k, n] : std::vector<std::array<int64_t, 3>>{{1, 512, 1000}, {32, 2048, 64}, {1, 4096, 64}}) {
    SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(k) + "x" + std::to_string(n));
    const std::vector<Input> matmul = {{"a", random_tensor({m, k}, 3)}, {"b", random_tensor({k, n}, 4), true}};
    const std::vector<Input> gemm = {{"a", random_tensor({m, k}, 3)}, {"b", random_tensor({k, n}, 4), true},
                                     {"c", random_tensor({n}, 5), true}};
    for (const auto& [op, inputs] : {std::pair{"MatMul", matmul}, std::pair{"Gemm", gemm}}) {
      const Tensor one = testing::run_node(op, "", 13, inputs, {}, 1, 1)[0];
      const Tensor two = testing::run_node(op, "", 13, inputs, {}, 1, 2)[0];
      ASSERT_EQ(one.size(), two.size());
      EXPECT_EQ(std::memcmp(one.values<float>().data(), two.values<float>().data(), one.size() * sizeof(float)), 0) << op;
    }
  }
}


// ---- Det (what the backend tests leave out: pivoting, singular and empty matrices, batches of
// double and float16, non-square input)

TEST(Det, PivotingSingularEmptyAndBatches) {
  auto det = [](const Tensor& x) { return testing::run_node("Det", "", 11, {{"x", x}})[0]; };
  // [[0, 2], [3, 4]] needs a row swap: -6. A singular matrix: 0. 3x3 with a known determinant: -306.
  Tensor x = Tensor::from_values<double>({3, 3, 3}, std::vector<double>{0, 2, 0, 3, 4, 0, 0, 0, 1,  //
                                                                          1, 2, 3, 2, 4, 6, 7, 8, 9,  //
                                                                          6, 1, 1, 4, -2, 5, 2, 8, 7});
  Tensor y = det(x);
  ASSERT_EQ(y.dims(), (std::vector<int64_t>{3}));
  EXPECT_NEAR(y.values<double>()[0], -6, 1e-12);
  EXPECT_NEAR(y.values<double>()[1], 0, 1e-12);
  EXPECT_NEAR(y.values<double>()[2], -306, 1e-12);
  // A batch of 0x0 matrices has determinant 1.
  Tensor empty = det(Tensor(DataType::Float, {2, 0, 0}));
  EXPECT_EQ(empty.dims(), (std::vector<int64_t>{2}));
  EXPECT_EQ(empty.values<float>()[1], 1.0f);
  // float16 in, float16 out.
  std::vector<uint16_t> h = {ir::float_to_half(2.0f), ir::float_to_half(1.0f), ir::float_to_half(1.0f),
                             ir::float_to_half(3.0f)};
  Tensor yh = det(Tensor(DataType::Float16, {2, 2}, Tensor::from_values<uint16_t>({2, 2}, h).bytes()));
  EXPECT_EQ(yh.dtype(), DataType::Float16);
  EXPECT_EQ(ir::half_to_float(yh.values<uint16_t>()[0]), 5.0f);
  EXPECT_NE(error_of([&] { det(Tensor(DataType::Float, {2, 3})); }).find("square matrices"), std::string::npos);
}

}  // namespace
}  // namespace onnxptq
