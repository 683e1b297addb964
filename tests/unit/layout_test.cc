#include "engine/layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "engine/fusion.h"
#include "engine/session.h"
#include "ir/model.h"
#include "support/model_run.h"

namespace onnxptq::engine {
namespace {

// Builds small float graphs of convolutions with seeded random weights.
struct GraphMaker {
  ir::Model m;
  ir::Graph& g = *m.graph;
  std::mt19937 rng{7};

  GraphMaker() { m.set_opset("", 17); }

  std::vector<float> random(size_t n) {
    std::normal_distribution<float> normal(0.f, 1.f);
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    return v;
  }
  ir::Value* input(const std::string& name) {
    ir::Value* x = g.add_value(name);
    g.add_input(x);
    return x;
  }
  struct ConvSpec {
    int64_t in = 8, out = 8, kernel = 3, stride = 1, pad = 1, group = 1, dilation = 1;
  };
  // Weights scaled by 1 / sqrt(fan-in) as trained networks have them, so that activations stay
  // near 1 through a chain and the outputs compare at one relative tolerance.
  ir::Value* conv(ir::Value* x, const std::string& name, ConvSpec c) {
    ir::Value* w = g.add_value(name + ".w");
    ir::Value* b = g.add_value(name + ".b");
    int64_t fan_in = c.in / c.group * c.kernel * c.kernel;
    std::vector<float> weights = random(static_cast<size_t>(c.out * fan_in));
    for (float& v : weights) v /= std::sqrt(static_cast<float>(fan_in));
    g.set_initializer(w, ir::Tensor::from_values<float>({c.out, c.in / c.group, c.kernel, c.kernel}, weights));
    g.set_initializer(b, ir::Tensor::from_values<float>({c.out}, random(static_cast<size_t>(c.out))));
    ir::Value* y = g.add_value(name);
    ir::Node* n = g.add_node("Conv", {x, w, b}, {y}, name);
    n->set_attribute(ir::Attribute::of_ints("pads", {c.pad, c.pad, c.pad, c.pad}));
    n->set_attribute(ir::Attribute::of_ints("strides", {c.stride, c.stride}));
    n->set_attribute(ir::Attribute::of_ints("dilations", {c.dilation, c.dilation}));
    if (c.group != 1) n->set_attribute(ir::Attribute::of_int("group", c.group));
    return y;
  }
  ir::Value* op(const std::string& type, std::vector<ir::Value*> inputs, const std::string& name) {
    ir::Value* y = g.add_value(name);
    g.add_node(type, std::move(inputs), {y}, name);
    return y;
  }
  ir::Value* scalar(const std::string& name, float value) {
    ir::Value* s = g.add_value(name);
    g.set_initializer(s, ir::Tensor::from_values<float>({}, std::vector<float>{value}));
    return s;
  }

  int count(const std::string& op_type) const {
    int n = 0;
    for (const auto& node : g.nodes()) n += node->op_type == op_type;
    return n;
  }
  const ir::Node* producer(const std::string& value) const { return g.find_value(value)->producer(); }
};

using testing::nothing_visible;

int optimize(ir::Graph& g, const std::function<bool(const ir::Value*)>& visible) {
  fuse_conv_activations(g, visible);
  return run_convolutions_nhwc(g, visible, 17);
}

TEST(NhwcLayout, ConvChainRunsNhwcBetweenOneTransposeInAndOneOut) {
  GraphMaker t;
  ir::Value* a = t.conv(t.input("x"), "a", {});
  ir::Value* r = t.op("Relu", {a}, "r");
  ir::Value* b = t.conv(r, "b", {.kernel = 1, .pad = 0});
  t.g.add_output(t.op("Sigmoid", {b}, "y"));

  EXPECT_EQ(optimize(t.g, nothing_visible), 2);
  EXPECT_EQ(t.count("NhwcConv"), 2);
  EXPECT_EQ(t.count("Transpose"), 2);
  EXPECT_EQ(t.g.node_count(), 4u);
  // The second conv reads the first one's NHWC output directly.
  const ir::Node* second = t.producer("y")->input(0)->producer();
  ASSERT_EQ(second->op_type, "NhwcConv");
  EXPECT_EQ(second->attr_string("activation", ""), "Sigmoid");
  EXPECT_EQ(second->input(0)->producer()->op_type, "NhwcConv");
  EXPECT_EQ(second->input(0)->producer()->attr_string("activation", ""), "Relu");
  // The graph output is made under its own name, NCHW.
  EXPECT_EQ(t.producer("y")->op_type, "Transpose");
  EXPECT_EQ(t.producer("y")->attr_ints("perm", {}), kToNchw);
  EXPECT_EQ(t.g.outputs()[0]->name(), "y");
}

TEST(NhwcLayout, ResidualAddStaysNhwc) {
  GraphMaker t;
  ir::Value* a = t.conv(t.input("x"), "a", {});
  ir::Value* b = t.conv(a, "b", {});
  ir::Value* sum = t.op("Add", {a, b}, "sum");
  ir::Value* scaled = t.op("Mul", {sum, t.scalar("half", 0.5f)}, "scaled");
  ir::Value* c = t.conv(scaled, "c", {.kernel = 1, .pad = 0});
  t.g.add_output(c);

  EXPECT_EQ(optimize(t.g, nothing_visible), 3);
  EXPECT_EQ(t.count("Transpose"), 2);  // x in, c out
  const ir::Node* conv_c = t.producer("c")->input(0)->producer();
  ASSERT_EQ(conv_c->op_type, "NhwcConv");
  const ir::Node* mul = conv_c->input(0)->producer();
  ASSERT_EQ(mul->op_type, "Mul");
  const ir::Node* add = mul->input(0)->producer();
  ASSERT_EQ(add->op_type, "Add");
  EXPECT_EQ(add->input(0)->producer()->op_type, "NhwcConv");
  EXPECT_EQ(add->input(1)->producer()->op_type, "NhwcConv");
}

TEST(NhwcLayout, VisibleTensorStaysNchwAndIsWhatTheNextConvReads) {
  GraphMaker t;
  ir::Value* a = t.conv(t.input("x"), "a", {});
  ir::Value* b = t.conv(a, "b", {});
  ir::Value* c = t.conv(b, "c", {});
  t.g.add_output(c);
  auto b_visible = [&](const ir::Value* v) { return v->name() == "b"; };

  // a and b run NHWC; c, between the visible b and the graph output, gains nothing and stays.
  EXPECT_EQ(optimize(t.g, b_visible), 2);
  const ir::Node* makes_b = t.producer("b");
  ASSERT_EQ(makes_b->op_type, "Transpose");
  EXPECT_EQ(makes_b->attr_ints("perm", {}), kToNchw);
  EXPECT_EQ(makes_b->input(0)->producer()->op_type, "NhwcConv");
  // c is computed from b itself, not from an NHWC copy that bypasses it.
  EXPECT_EQ(t.producer("c")->op_type, "Conv");
  EXPECT_EQ(t.producer("c")->input(0)->name(), "b");
  EXPECT_EQ(t.count("Transpose"), 2);
}

TEST(NhwcLayout, GraphOutputInTheMiddleIsKept) {
  GraphMaker t;
  ir::Value* a = t.conv(t.input("x"), "a", {});
  ir::Value* b = t.conv(a, "b", {});
  ir::Value* c = t.conv(b, "c", {});
  t.g.add_output(b);
  t.g.add_output(c);

  EXPECT_EQ(optimize(t.g, nothing_visible), 2);
  EXPECT_EQ(t.producer("b")->op_type, "Transpose");
  EXPECT_EQ(t.producer("b")->attr_ints("perm", {}), kToNchw);
  EXPECT_EQ(t.producer("c")->input(0)->name(), "b");
  EXPECT_EQ(t.g.outputs()[0]->name(), "b");
  EXPECT_EQ(t.g.outputs()[1]->name(), "c");
}

TEST(NhwcLayout, ConvBetweenNchwOnlyOpsIsLeftAConv) {
  GraphMaker t;
  ir::Value* p = t.op("GlobalAveragePool", {t.input("x")}, "p");
  ir::Value* a = t.conv(p, "a", {.kernel = 1, .pad = 0});
  t.g.add_output(t.op("Softmax", {a}, "y"));
  EXPECT_EQ(optimize(t.g, nothing_visible), 0);
  EXPECT_EQ(t.count("Conv"), 1);
  EXPECT_EQ(t.count("Transpose"), 0);
}

TEST(NhwcLayout, ConcatOfNhwcTensorsJoinsOnTheLastAxis) {
  GraphMaker t;
  ir::Value* x = t.input("x");
  ir::Value* a = t.conv(x, "a", {});
  ir::Value* b = t.conv(x, "b", {});
  ir::Value* cat = t.op("Concat", {a, b}, "cat");
  t.g.find_value("cat")->producer()->set_attribute(ir::Attribute::of_int("axis", 1));
  t.g.add_output(t.conv(cat, "c", {.in = 16}));
  optimize(t.g, nothing_visible);
  const ir::Node* concat = t.producer("c")->input(0)->producer()->input(0)->producer();
  ASSERT_EQ(concat->op_type, "Concat");
  EXPECT_EQ(concat->attr_int("axis", 0), 3);
  EXPECT_EQ(t.count("Transpose"), 2);
}

// Outputs of a session with the pass and without it, compared like the FusedConv test does.
void expect_same_outputs(const ir::Model& m, const std::vector<int64_t>& x_dims, const std::string& what,
                         SessionOptions options = {}) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> xs(static_cast<size_t>(ir::element_count(x_dims)));
  for (float& v : xs) v = normal(rng);
  std::map<std::string, ir::Tensor> feeds = {{"x", ir::Tensor::from_values<float>(x_dims, xs)}};
  SessionOptions plain = options;
  plain.optimize = false;
  std::vector<ir::Tensor> want = Session(m, plain).run(feeds);
  std::vector<ir::Tensor> got = Session(m, options).run(feeds);
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t o = 0; o < want.size(); ++o) {
    ASSERT_EQ(got[o].dims(), want[o].dims()) << what;
    auto g = got[o].values<float>(), w = want[o].values<float>();
    int64_t differ = 0;
    float worst = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      differ += !(std::fabs(g[i] - w[i]) <= 1e-5f * (1 + std::fabs(w[i])));
      worst = std::max(worst, std::fabs(g[i] - w[i]));
    }
    EXPECT_EQ(differ, 0) << what << ", output " << o << ": largest difference " << worst;
  }
}

// Quark's block quantize ops between convolutions (a BFP16 model): their weights' nodes fold into
// constants, the block ops run channels-last with their axis on the channels (3), and no
// Transpose is left between the convolutions.
TEST(NhwcLayout, BlockQuantizeOpsRunNhwcWithTheirAxisOnTheChannels) {
  GraphMaker t;
  t.m.set_opset("com.amd.quark", 1);
  auto block = [&](ir::Value* v, const std::string& name) {
    ir::Value* y = t.g.add_value(name);
    ir::Node* n = t.g.add_node("BFPQuantizeDequantize", {v}, {y}, name, "com.amd.quark");
    n->set_attribute(ir::Attribute::of_int("axis", 1));
    n->set_attribute(ir::Attribute::of_int("rounding_mode", 2));
    return y;
  };
  ir::Value* x = block(t.input("x"), "xq");
  ir::Value* a = t.conv(x, "a", {});
  ir::Node* conv_a = t.g.find_value("a")->producer();
  t.g.set_node_input(conv_a, 1, block(conv_a->input(1), "a.wq"));  // a block-quantized weight
  ir::Value* aq = block(a, "aq");
  t.g.add_output(t.conv(aq, "b", {}));
  EXPECT_EQ(fold_block_quantized_constants(t.g, nothing_visible), 1);
  optimize(t.g, nothing_visible);
  const ir::Node* between = nullptr;  // the node named aq (its output renamed by the pass)
  for (const auto& n : t.g.nodes())
    if (n->name == "aq") between = n.get();
  ASSERT_NE(between, nullptr);
  ASSERT_EQ(between->op_type, "BFPQuantizeDequantize");
  EXPECT_EQ(between->attr_int("axis", 0), 3);
  EXPECT_EQ(t.count("Transpose"), 2);  // into a, out of b

  GraphMaker same;  // the outputs equal those of the model run node by node
  same.m.set_opset("com.amd.quark", 1);
  ir::Value* sx = same.input("x");
  ir::Value* sy = same.g.add_value("y");
  ir::Node* sn = same.g.add_node("BFPQuantizeDequantize", {same.conv(sx, "a", {})}, {sy}, "aq", "com.amd.quark");
  sn->set_attribute(ir::Attribute::of_int("axis", 1));
  same.g.add_output(same.conv(sy, "b", {}));
  expect_same_outputs(same.m, {1, 8, 9, 7}, "conv, BFP, conv");
}

// ConvNeXt's pattern: the model itself goes channels-last for a few ops and back.
TEST(NhwcLayout, ModelsOwnTransposesCancelWithTheEngines) {
  GraphMaker t;
  ir::Value* a = t.conv(t.input("x"), "a", {});
  ir::Value* last = t.op("Transpose", {a}, "last");
  t.g.find_value("last")->producer()->set_attribute(ir::Attribute::of_ints("perm", kToNhwc));
  ir::Value* r = t.op("Tanh", {last}, "r");
  ir::Value* first = t.op("Transpose", {r}, "first");
  t.g.find_value("first")->producer()->set_attribute(ir::Attribute::of_ints("perm", kToNchw));
  t.g.add_output(t.conv(first, "b", {}));
  ir::Model copy = ir::clone_model(t.m);
  EXPECT_EQ(optimize(*copy.graph, nothing_visible), 2);
  int transposes = 0;
  for (const auto& n : copy.graph->nodes()) transposes += n->op_type == "Transpose";
  EXPECT_EQ(transposes, 2);  // x in, the output out
  expect_same_outputs(t.m, {1, 8, 10, 6}, "the model's own Transposes");
}

TEST(NhwcLayout, SameOutputsAsNchwOverConvolutionShapes) {
  struct Case {
    const char* what;
    GraphMaker::ConvSpec spec;
  };
  // Channel counts off the SIMD width (13) catch tails; each conv feeds a second one and a
  // residual Add so NHWC tensors flow between kernels.
  const Case cases[] = {
      {"3x3 pad 1", {.in = 13, .out = 13}},
      {"3x3 stride 2", {.in = 13, .out = 13, .stride = 2}},
      {"5x5 pad 2 stride 2", {.in = 13, .out = 13, .kernel = 5, .stride = 2, .pad = 2}},
      {"grouped", {.in = 12, .out = 12, .group = 3}},
      {"depthwise", {.in = 13, .out = 13, .group = 13}},
      {"depthwise stride 2", {.in = 32, .out = 32, .stride = 2, .group = 32}},
      {"1x1", {.in = 13, .out = 13, .kernel = 1, .pad = 0}},
      {"1x1 wide", {.in = 40, .out = 40, .kernel = 1, .pad = 0}},
      {"dilated", {.in = 13, .out = 13, .pad = 2, .dilation = 2}},
      {"no pad", {.in = 13, .out = 13, .pad = 0}},
  };
  for (const Case& c : cases) {
    GraphMaker t;
    ir::Value* x = t.input("x");
    ir::Value* a = t.op("Relu", {t.conv(x, "a", c.spec)}, "a_relu");
    GraphMaker::ConvSpec same = c.spec;
    same.stride = 1;
    same.pad = (same.kernel - 1) * same.dilation / 2;
    ir::Value* b = t.conv(a, "b", same);
    ir::Value* sum = t.op("Add", {a, b}, "sum");
    ir::Value* clipped = t.op("Clip", {sum, t.scalar("lo", -0.5f), t.scalar("hi", 2.f)}, "clipped");
    t.g.add_output(t.conv(clipped, "c", {.in = c.spec.out, .out = 5, .kernel = 1, .pad = 0}));
    expect_same_outputs(t.m, {2, c.spec.in, 17, 15}, c.what);
    ir::Model copy = ir::clone_model(t.m);
    EXPECT_EQ(optimize(*copy.graph, nothing_visible), 3) << c.what;
  }
}

TEST(NhwcLayout, SameOutputsWithGraphOutputsAndVisibleTensorsBetweenConvolutions) {
  GraphMaker t;
  ir::Value* a = t.conv(t.input("x"), "a", {});
  ir::Value* b = t.conv(t.op("Relu", {a}, "r"), "b", {.stride = 2});
  ir::Value* c = t.conv(b, "c", {.kernel = 1, .pad = 0});
  ir::Value* d = t.conv(t.op("Add", {b, c}, "sum"), "d", {.group = 8});
  t.g.add_output(b);
  t.g.add_output(d);
  expect_same_outputs(t.m, {1, 8, 12, 10}, "b an output");
  SessionOptions r_visible;
  r_visible.visible = {"r", "c"};
  expect_same_outputs(t.m, {1, 8, 12, 10}, "r and c visible", r_visible);
  expect_same_outputs(t.m, {0, 8, 12, 10}, "an empty batch (oneDNN declines it: the reference loop runs)");
}

// A max pool, a squeeze-excitation block, a nearest upsampling and a Concat along channels,
// as ResNet and PP-OCR's detector have them: all of it runs NHWC, the pools and Resize as the
// engine's Nhwc* ops.
TEST(NhwcLayout, SameOutputsThroughPoolsResizeAndConcat) {
  GraphMaker t;
  ir::Value* a0 = t.conv(t.input("x"), "a0", {.in = 8, .out = 24});
  ir::Value* a = t.op("MaxPool", {a0}, "a");
  ir::Node* max_pool = t.g.find_value("a")->producer();
  max_pool->set_attribute(ir::Attribute::of_ints("kernel_shape", {3, 2}));
  max_pool->set_attribute(ir::Attribute::of_ints("strides", {2, 2}));
  max_pool->set_attribute(ir::Attribute::of_ints("pads", {1, 0, 1, 1}));
  max_pool->set_attribute(ir::Attribute::of_int("ceil_mode", 1));
  ir::Value* pooled = t.op("GlobalAveragePool", {a}, "pooled");
  ir::Value* squeezed = t.op("Relu", {t.conv(pooled, "squeeze", {.in = 24, .out = 6, .kernel = 1, .pad = 0})}, "squeezed");
  ir::Value* gate = t.op("HardSigmoid", {t.conv(squeezed, "excite", {.in = 6, .out = 24, .kernel = 1, .pad = 0})}, "gate");
  ir::Value* se = t.op("Add", {a, t.op("Mul", {a, gate}, "scaled")}, "se");
  ir::Value* scales = t.g.add_value("scales");
  t.g.set_initializer(scales, ir::Tensor::from_values<float>({4}, std::vector<float>{1, 1, 2, 2}));
  ir::Value* up = t.op("Resize", {se, nullptr, scales}, "up");
  ir::Value* b = t.conv(up, "b", {.in = 24, .out = 8});
  ir::Value* joined = t.op("Concat", {up, b}, "joined");
  t.g.find_value("joined")->producer()->set_attribute(ir::Attribute::of_int("axis", -3));
  ir::Value* c = t.conv(joined, "c", {.in = 32, .out = 16, .stride = 2});
  t.g.add_output(t.op("GlobalMaxPool", {c}, "y"));
  expect_same_outputs(t.m, {2, 8, 13, 9}, "pools, Resize and Concat");

  ir::Model copy = ir::clone_model(t.m);
  ir::Graph& g = *copy.graph;
  optimize(g, nothing_visible);
  int transposes = 0, nhwc_ops = 0;
  for (const auto& n : g.nodes()) {
    transposes += n->op_type == "Transpose";
    nhwc_ops += n->domain == kEngineDomain && n->op_type != "NhwcConv";
    if (n->op_type == "Concat") {
      EXPECT_EQ(n->attr_int("axis", 0), 3);  // -3 of NCHW is C, last in NHWC
    }
  }
  EXPECT_EQ(transposes, 2);  // x in, y out
  EXPECT_EQ(nhwc_ops, 4);    // NhwcMaxPool, NhwcGlobalAveragePool, NhwcResize, NhwcGlobalMaxPool
  EXPECT_EQ(g.find_value("joined"), nullptr);  // nothing reads the NCHW Concat any more
}

TEST(NhwcLayout, ObserversAndTransformsSeeTheModelsOwnTensors) {
  GraphMaker t;
  ir::Value* a = t.conv(t.input("x"), "a", {});
  ir::Value* b = t.conv(a, "b", {});
  t.g.add_output(t.conv(b, "c", {}));
  std::vector<int64_t> dims = {1, 8, 9, 11};

  // b is seen in NCHW, and a transform of b changes c as it does without the pass.
  SessionOptions options;
  options.visible = {"b"};
  std::map<std::string, std::vector<int64_t>> seen;
  TensorObserver observe = [&](const std::string& name, const ir::Tensor& v) { seen[name] = v.dims(); };
  TensorTransform halve = [](const std::string& name, ir::Tensor& v) {
    if (name != "b") return;
    ir::Tensor copy = ir::Tensor::from_values<float>(v.dims(), std::vector<float>(v.values<float>().begin(), v.values<float>().end()));
    for (float& f : copy.mutable_values<float>()) f *= 0.5f;
    v = copy;
  };
  std::map<std::string, ir::Tensor> feeds = {
      {"x", ir::Tensor::from_values<float>(dims, std::vector<float>(static_cast<size_t>(ir::element_count(dims)), 0.25f))}};
  SessionOptions plain = options;
  plain.optimize = false;
  std::vector<ir::Tensor> want = Session(t.m, plain).run(feeds, {nullptr, &halve});
  std::vector<ir::Tensor> got = Session(t.m, options).run(feeds, {&observe, &halve});
  EXPECT_EQ(seen.size(), 3u);  // x, b, c: nothing the engine made
  EXPECT_EQ(seen["b"], (std::vector<int64_t>{1, 8, 9, 11}));
  auto g = got[0].values<float>(), w = want[0].values<float>();
  for (size_t i = 0; i < w.size(); ++i) ASSERT_NEAR(g[i], w[i], 1e-5f * (1 + std::fabs(w[i]))) << i;
}

// Hooks that ignore layout see a visible tensor as the engine holds it (channels-last between
// convolutions, so the pass is not held back), with the same elements, and a per-element
// transform acts as it does on the NCHW tensor.
TEST(NhwcLayout, HooksIgnoringLayoutSeeTheSameElementsChannelsLast) {
  GraphMaker t;
  ir::Value* a = t.conv(t.input("x"), "a", {});
  ir::Value* b = t.conv(a, "b", {});
  t.g.add_output(t.conv(t.op("Relu", {b}, "r"), "c", {}));
  std::vector<int64_t> dims = {1, 8, 9, 11};
  std::vector<float> x = t.random(static_cast<size_t>(ir::element_count(dims)));
  std::map<std::string, ir::Tensor> feeds = {{"x", ir::Tensor::from_values<float>(dims, x)}};

  struct Seen {
    std::vector<int64_t> dims;
    std::vector<float> sorted;
  };
  auto watch = [](std::map<std::string, Seen>& seen) {
    return TensorObserver([&seen](const std::string& name, const ir::Tensor& v) {
      auto values = v.values<float>();
      Seen& s = seen[name];
      s.dims = v.dims();
      s.sorted.assign(values.begin(), values.end());
      std::sort(s.sorted.begin(), s.sorted.end());
    });
  };
  TensorTransform halve = [](const std::string& name, ir::Tensor& v) {
    if (name != "b") return;
    std::vector<float> copy(v.values<float>().begin(), v.values<float>().end());
    for (float& f : copy) f *= 0.5f;
    v = ir::Tensor::from_values<float>(v.dims(), copy);
  };
  SessionOptions plain;
  plain.optimize = false;
  std::map<std::string, Seen> want_seen, got_seen;
  TensorObserver want_observe = watch(want_seen), got_observe = watch(got_seen);
  std::vector<ir::Tensor> want = Session(t.m, plain).run(feeds, {&want_observe, &halve});
  SessionOptions options;
  options.visible = {"a", "b"};
  options.hooks_ignore_layout = true;
  std::vector<ir::Tensor> got = Session(t.m, options).run(feeds, {&got_observe, &halve});

  for (const char* name : {"a", "b"}) {
    ASSERT_TRUE(got_seen.count(name)) << name;
    EXPECT_EQ(got_seen[name].dims, (std::vector<int64_t>{1, 9, 11, 8})) << name << " is seen channels-last";
    const std::vector<float>& g = got_seen[name].sorted;
    const std::vector<float>& w = want_seen[name].sorted;
    ASSERT_EQ(g.size(), w.size());
    for (size_t i = 0; i < w.size(); ++i) ASSERT_NEAR(g[i], w[i], 1e-5f * (1 + std::fabs(w[i]))) << name << " " << i;
  }
  auto g = got[0].values<float>(), w = want[0].values<float>();
  for (size_t i = 0; i < w.size(); ++i) ASSERT_NEAR(g[i], w[i], 1e-5f * (1 + std::fabs(w[i]))) << i;
}

}  // namespace
}  // namespace onnxptq::engine
