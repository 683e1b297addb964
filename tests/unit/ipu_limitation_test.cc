// IPULimitationCheck on hand-made power-of-two plans: each rule of vai_q_onnx 1.16's refine.py
// on a tiny graph with a violation set by hand and the correction the rule makes, worked shift-cut
// and shift-bias examples, the sweep schedule, weights and biases quantized again (checked against
// rne(w 2^pos) clipped, computed here), the NPU bias (vai_q_onnx's dpu quantizer) and the extra
// options.
#include "quant/ipu_limitation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "onnxptq/error.h"
#include "quant/ipu_rules.h"
#include "quant/quantize.h"
#include "quant/tensor_quant.h"
#include "support/one_node.h"

namespace onnxptq::quant {
namespace {

using ir::DataType;

// A graph built node by node, and a plan whose positions are set by hand (int8, symmetric, zero
// point 0), as assign_parameters would leave them.
struct IpuCase {
  ir::Model model;
  Plan plan;
  QuantConfig config;

  IpuCase() {
    model.set_opset("", 13);
    config.calibrate_method = calib::Method::NonOverflow;
    config.enable_dpu = true;
  }
  ir::Graph& g() { return *model.graph; }
  ir::Value* v(const std::string& name) {
    ir::Value* x = g().find_value(name);
    return x ? x : g().add_value(name);
  }
  ir::Value* input(const std::string& name) {
    ir::Value* x = v(name);
    x->type = ir::ValueType::tensor(DataType::Float, {1, 2, 4, 4});
    g().add_input(x);
    return x;
  }
  ir::Value* init(const std::string& name, std::vector<int64_t> dims, std::vector<float> values) {
    ir::Value* x = v(name);
    g().set_initializer(x, ir::Tensor::from_values<float>(std::move(dims), values));
    return x;
  }
  ir::Node* node(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs,
                 const std::string& name) {
    std::vector<ir::Value*> in, out;
    for (const std::string& s : ins) in.push_back(v(s));
    for (const std::string& s : outs) out.push_back(v(s));
    return g().add_node(op, in, out, name);
  }

  TensorPlan& add(const std::string& name, Role role, int pos) {
    plan.index[name] = plan.tensors.size();
    TensorPlan& t = plan.tensors.emplace_back();
    t.name = name;
    t.role = role;
    t.type = DataType::Int8;
    t.symmetric = true;
    t.params = {{std::ldexp(1.0, -pos), 0}};
    t.pos = pos;
    return t;
  }
  void act(const std::string& name, int pos) { add(name, Role::Activation, pos); }
  void shared(const std::string& name, const std::string& from) {
    TensorPlan& t = add(name, Role::Activation, *plan.provider(from).pos);
    t.shared_from = from;
  }
  // A weight (or a bias quantized like one) at `pos`, its values quantized by the code under test.
  void weight(const std::string& name, int pos) {
    TensorPlan& t = add(name, Role::Weight, pos);
    t.data = quantize_tensor(g().find_value(name)->initializer(), DataType::Int8, t.params, std::nullopt,
                             weight_options_of(Tool::vai, ScaleKind::power_of_two).quantize);
  }
  int pos(const std::string& name) const { return *plan.provider(name).pos; }

  // Only `rule` runs.
  void only(IpuRule rule) {
    QuantConfig::IpuCheck& c = config.ipu;
    c.adjust_shift_read = rule == IpuRule::AdjustShiftRead;
    c.adjust_shift_write = rule == IpuRule::AdjustShiftWrite;
    c.adjust_shift_cut = rule == IpuRule::AdjustShiftCut;
    c.adjust_shift_bias = rule == IpuRule::AdjustShiftBias;
    c.adjust_hard_sigmoid = rule == IpuRule::AdjustHardSigmoid;
    c.adjust_shift_swish = rule == IpuRule::AdjustShiftSwish;
    config.align_concat = rule == IpuRule::AlignConcat;
    config.align_pool = rule == IpuRule::AlignPool;
    config.align_pad = rule == IpuRule::AlignPad;
    config.align_slice = rule == IpuRule::AlignSlice;
  }
  std::vector<IpuAdjustment> run() { return apply_ipu_limitations(plan, model, config); }
};

// int8 values of w at 2^-pos as vai_q_onnx stores weights: clip(rne(w 2^pos), -127, 127).
std::vector<int8_t> expected_int8(std::span<const float> w, int pos) {
  std::vector<int8_t> q;
  for (float x : w)
    q.push_back(static_cast<int8_t>(std::clamp(std::nearbyint(std::ldexp(double{x}, pos)), -127.0, 127.0)));
  return q;
}

std::vector<int8_t> stored(const IpuCase& c, const std::string& name) {
  std::span<const int8_t> d = c.plan.find(name)->data->values<int8_t>();
  return {d.begin(), d.end()};
}

std::span<const float> float_values(IpuCase& c, const std::string& name) {
  return c.g().find_value(name)->initializer().values<float>();
}

// x -> Conv(w[, b]) -> y
void conv(IpuCase& c, bool bias) {
  c.input("x");
  c.init("w", {2, 2, 1, 1}, {0.3f, -0.17f, 0.051f, 0.9f});
  if (bias) c.init("b", {2}, {0.01f, -0.004f});
  c.node("Conv", bias ? std::vector<std::string>{"x", "w", "b"} : std::vector<std::string>{"x", "w"}, {"y"}, "conv");
}

// A worked AdjustShiftCut example (vai_q_onnx 1.16's rule): wpos 9, ipos 7, opos 0 -> shift_cut 16,
// allowed; opos -1 -> 17, and wpos := 16 - 1 - 7 = 8, the stored weight quantized again at 2^-8.
TEST(IpuLimitation, AppendixAExample6ShiftCut) {
  IpuCase ok;
  conv(ok, false);
  ok.act("x", 7);
  ok.weight("w", 9);
  ok.act("y", 0);
  EXPECT_TRUE(ok.run().empty());
  EXPECT_EQ(ok.pos("w"), 9);

  IpuCase c;
  conv(c, false);
  c.act("x", 7);
  c.weight("w", 9);
  c.act("y", -1);
  std::vector<IpuAdjustment> changes = c.run();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].rule, "AdjustShiftCut");
  EXPECT_EQ(changes[0].node, "conv");
  EXPECT_EQ(changes[0].tensor, "w");
  EXPECT_EQ(changes[0].from, 9);
  EXPECT_EQ(changes[0].to, 8);
  EXPECT_EQ(c.pos("w"), 8);
  EXPECT_EQ(c.plan.find("w")->params[0].scale, 1.0 / 256);
  // Quantized again (vai_q_onnx 1.16 keeps the 2^-9 integers): 0.3 -> rne(76.8) = 77, not 127 (153.6 clipped).
  EXPECT_EQ(stored(c, "w"), expected_int8(float_values(c, "w"), 8));
  EXPECT_EQ(stored(c, "w")[0], 77);
}

// A worked AdjustShiftBias example (vai_q_onnx 1.16's rule): wpos 8, ipos 5, opos 4 (shift_cut 9),
// bpos 14 -> shift_bias -1 in [-7, 15]; bpos 22 -> -9, and bpos := 8 + 5 - (-7) = 20, the bias
// quantized again at 2^-20.
TEST(IpuLimitation, AppendixAExample7ShiftBias) {
  for (int bpos : {14, 22}) {
    IpuCase c;
    conv(c, true);
    c.act("x", 5);
    c.weight("w", 8);
    c.weight("b", bpos);
    c.act("y", 4);
    std::vector<IpuAdjustment> changes = c.run();
    if (bpos == 14) {
      EXPECT_TRUE(changes.empty());
      continue;
    }
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_EQ(changes[0].rule, "AdjustShiftBias");
    EXPECT_EQ(changes[0].tensor, "b");
    EXPECT_EQ(changes[0].to, 20);
    EXPECT_EQ(c.pos("b"), 20);
    EXPECT_EQ(stored(c, "b"), expected_int8(float_values(c, "b"), 20));
    EXPECT_EQ(stored(c, "b")[1], -127);  // -0.004 * 2^20 = -4194 saturates; at 2^-22 it did too
  }
}

// A LeakyRelu fused into the Conv (no Q/DQ between, RemoveQDQConvLeakyRelu) raises the lower bound
// of shift_bias to 0: -1 becomes 0, bpos := wpos + ipos.
TEST(IpuLimitation, ShiftBiasBeforeFusedLeakyRelu) {
  IpuCase c;
  c.config.remove_qdq_conv_leaky_relu = true;
  c.input("x");
  c.init("w", {2, 2, 1, 1}, {0.3f, -0.17f, 0.051f, 0.9f});
  c.init("b", {2}, {0.01f, -0.004f});
  c.node("Conv", {"x", "w", "b"}, {"c"}, "conv");
  c.node("LeakyRelu", {"c"}, {"l"}, "leaky")->set_attribute(ir::Attribute::of_float("alpha", 0.1f));
  c.act("x", 5);
  c.weight("w", 8);
  c.weight("b", 14);
  c.act("l", 4);  // c has no position: opos is the LeakyRelu's output
  c.only(IpuRule::AdjustShiftBias);
  std::vector<IpuAdjustment> changes = c.run();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(c.pos("b"), 13);
}

// AdjustShiftRead: Add inputs at 10 and 2 (shift_read 8 > 7): the larger becomes 2 + 7 = 9.
TEST(IpuLimitation, ShiftReadLowersTheLargerInput) {
  IpuCase c;
  c.input("a");
  c.input("b");
  c.node("Add", {"a", "b"}, {"y"}, "add");
  c.act("a", 10);
  c.act("b", 2);
  c.act("y", 2);
  c.only(IpuRule::AdjustShiftRead);
  std::vector<IpuAdjustment> changes = c.run();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].tensor, "a");
  EXPECT_EQ(c.pos("a"), 9);
  EXPECT_EQ(c.pos("b"), 2);
  EXPECT_EQ(c.plan.find("a")->params[0].scale, std::ldexp(1.0, -9));
}

// AdjustShiftWrite: Add min(ipos) - opos in [-7, 25], Mul sum(ipos) - opos in [0, 32]; opos moves
// to the nearest bound.
TEST(IpuLimitation, ShiftWriteAddAndMul) {
  struct Row {
    const char* op;
    int a, b, y, expected;
  };
  for (Row r : {Row{"Add", 5, 6, 20, 12},   // 5 - 20 = -15 -> -7: opos = 5 + 7
                Row{"Add", 30, 31, 0, 5},   // 30 > 25: opos = 30 - 25
                Row{"Add", 5, 6, 10, 10},   // -5: fine
                Row{"Mul", 3, 4, 10, 7},    // 7 - 10 = -3 -> 0: opos = 7
                Row{"Mul", 20, 20, 0, 8},   // 40 > 32: opos = 40 - 32
                Row{"Mul", 3, 4, 5, 5}}) {  // 2: fine
    IpuCase c;
    c.input("a");
    c.input("b");
    c.node(r.op, {"a", "b"}, {"y"}, "n");
    c.act("a", r.a);
    c.act("b", r.b);
    c.act("y", r.y);
    c.only(IpuRule::AdjustShiftWrite);
    c.run();
    EXPECT_EQ(c.pos("y"), r.expected) << r.op << " " << r.a << " " << r.b << " " << r.y;
    EXPECT_EQ(c.pos("a"), r.a);
    EXPECT_EQ(c.pos("b"), r.b);
  }
}

// A Mul with an input that has no position (the DPU scaling Mul's constant) is skipped.
TEST(IpuLimitation, MulWithAnInputWithoutPositionIsSkipped) {
  IpuCase c;
  c.input("a");
  c.init("k", {}, {1.5f});
  c.node("Mul", {"a", "k"}, {"y"}, "n");
  c.act("a", 20);
  c.act("y", 0);
  c.only(IpuRule::AdjustShiftWrite);
  EXPECT_TRUE(c.run().empty());
}

// AdjustHardSigmoid, opos looked up through the DPU scaling Mul: ipos into [0, 15], opos >= 7,
// and opos := 14 + ipos when 14 + ipos - opos <= 0.
TEST(IpuLimitation, HardSigmoidThroughTheDpuMul) {
  struct Row {
    int in, out, in_expected, out_expected;
  };
  for (Row r : {Row{17, 9, 15, 9}, Row{-2, 5, 0, 7}, Row{0, 20, 0, 14}, Row{3, 12, 3, 12}}) {
    IpuCase c;
    c.input("x");
    ir::Node* h = c.node("HardSigmoid", {"x"}, {"h_Mul"}, "hsig");
    h->set_attribute(ir::Attribute::of_float("alpha", static_cast<float>(1.0 / 6)));
    h->set_attribute(ir::Attribute::of_float("beta", 0.5f));
    c.init("h_Scale", {}, {1.0001220703125f});
    c.node("Mul", {"h_Mul", "h_Scale"}, {"h"}, "h_Mul");
    c.act("x", r.in);
    c.act("h", r.out);
    c.only(IpuRule::AdjustHardSigmoid);
    c.run();
    EXPECT_EQ(c.pos("x"), r.in_expected) << r.in << " " << r.out;
    EXPECT_EQ(c.pos("h"), r.out_expected) << r.in << " " << r.out;
  }
}

// AdjustShiftSwish: x * hsigmoid(x), ipos0 + ipos1 - opos in [0, 15]: 6 + 7 - (-5) = 18 -> opos = -2.
TEST(IpuLimitation, ShiftSwish) {
  IpuCase c;
  c.input("x");
  ir::Node* h = c.node("HardSigmoid", {"x"}, {"h"}, "hsig");
  h->set_attribute(ir::Attribute::of_float("alpha", static_cast<float>(1.0 / 6)));
  c.node("Mul", {"x", "h"}, {"y"}, "swish");
  c.act("x", 6);
  c.act("h", 7);
  c.act("y", -5);
  c.only(IpuRule::AdjustShiftSwish);
  std::vector<IpuAdjustment> changes = c.run();
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].node, "swish");
  EXPECT_EQ(c.pos("y"), -2);
  // A Mul of two tensors no hard sigmoid reads is no swish.
  IpuCase plain;
  plain.input("x");
  plain.input("z");
  plain.node("Mul", {"x", "z"}, {"y"}, "mul");
  plain.act("x", 6);
  plain.act("z", 7);
  plain.act("y", -5);
  plain.only(IpuRule::AdjustShiftSwish);
  EXPECT_TRUE(plain.run().empty());
}

// AlignConcat: every position becomes the minimum; an input sharing another tensor's parameters
// (Reshape) changes through its provider, and the sharing tensor follows.
TEST(IpuLimitation, AlignConcatThroughTheProvider) {
  IpuCase c;
  c.input("a0");
  c.input("b");
  c.g().set_initializer(c.v("shape"), ir::Tensor::from_values<int64_t>({4}, std::vector<int64_t>{1, 2, 4, 4}));
  c.node("Reshape", {"a0", "shape"}, {"a"}, "reshape");
  c.node("Concat", {"a", "b"}, {"y"}, "concat")->set_attribute(ir::Attribute::of_int("axis", 1));
  c.act("a0", 5);
  c.shared("a", "a0");
  c.act("b", 3);
  c.act("y", 4);
  c.only(IpuRule::AlignConcat);
  std::vector<IpuAdjustment> changes = c.run();
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_EQ(changes[0].tensor, "y");
  EXPECT_EQ(changes[1].tensor, "a0");
  EXPECT_EQ(c.pos("a0"), 3);
  EXPECT_EQ(c.pos("b"), 3);
  EXPECT_EQ(c.pos("y"), 3);
  EXPECT_EQ(*c.plan.find("a")->pos, 3);
  EXPECT_EQ(c.plan.find("a")->params[0].scale, 0.125);
}

// AlignPool: the larger of ipos and opos becomes the smaller; an average pool behind a Pad
// without Q/DQ reads the Pad's input position (refine.py's look-through).
TEST(IpuLimitation, AlignPool) {
  for (auto [in, out] : {std::pair{6, 4}, std::pair{3, 5}}) {
    IpuCase c;
    c.input("x");
    c.node("GlobalAveragePool", {"x"}, {"y"}, "gap");
    c.act("x", in);
    c.act("y", out);
    c.only(IpuRule::AlignPool);
    c.run();
    EXPECT_EQ(c.pos("x"), std::min(in, out));
    EXPECT_EQ(c.pos("y"), std::min(in, out));
  }
  IpuCase c;
  c.input("x");
  c.g().set_initializer(c.v("pads"), ir::Tensor::from_values<int64_t>({8}, std::vector<int64_t>(8, 0)));
  c.node("Pad", {"x", "pads"}, {"p"}, "pad");
  c.node("AveragePool", {"p"}, {"y"}, "avg")->set_attribute(ir::Attribute::of_ints("kernel_shape", {2, 2}));
  c.act("x", 6);  // p has none
  c.act("y", 4);
  c.only(IpuRule::AlignPool);
  c.run();
  EXPECT_EQ(c.pos("x"), 4);
}

// Quark's AlignPad and AlignSlice (adjust_quantize_info, the pools' min rule): off unless set,
// as vai_q_onnx has no such rule; set, input and output take the smaller position.
TEST(IpuLimitation, QuarksAlignPadAndAlignSlice) {
  for (bool set : {false, true})
    for (const char* op : {"Pad", "Slice"}) {
      IpuCase c;
      c.input("x");
      if (std::string(op) == "Pad") {
        c.g().set_initializer(c.v("pads"), ir::Tensor::from_values<int64_t>({8}, std::vector<int64_t>(8, 1)));
        c.node("Pad", {"x", "pads"}, {"y"}, "pad");
      } else {
        for (const char* name : {"starts", "ends"})
          c.g().set_initializer(c.v(name), ir::Tensor::from_values<int64_t>({1}, {std::string(name) == "ends" ? 2 : 0}));
        c.node("Slice", {"x", "starts", "ends"}, {"y"}, "slice");
      }
      c.act("x", 6);
      c.act("y", 4);
      if (set) {
        c.only(std::string(op) == "Pad" ? IpuRule::AlignPad : IpuRule::AlignSlice);
      }
      c.run();
      EXPECT_EQ(c.pos("x"), set ? 4 : 6) << op;
      EXPECT_EQ(c.pos("y"), 4) << op;
    }
}

// A Relu the plan removed: the Conv writes its output, whose position is opos (Q/DQ removal, as
// refine.py).
TEST(IpuLimitation, OutputPositionThroughARemovedRelu) {
  IpuCase c;
  c.input("x");
  c.init("w", {2, 2, 1, 1}, {0.3f, -0.17f, 0.051f, 0.9f});
  c.node("Conv", {"x", "w"}, {"c"}, "conv");
  c.node("Relu", {"c"}, {"r"}, "relu");
  c.act("x", 7);
  c.weight("w", 9);
  c.act("r", -1);
  c.plan.removed_activations.insert("r");
  c.only(IpuRule::AdjustShiftCut);
  c.run();
  EXPECT_EQ(c.pos("w"), 8);
}

// The schedule: a later rule's change breaks an earlier rule's constraint, which only the next
// sweep mends. Add(a, b): shift_read |10 - 9| = 1; then AlignConcat(a, z) lowers a to 1, so
// shift_read is 8: with one sweep it stays, with two b becomes 1 + 7 = 8.
TEST(IpuLimitation, SecondSweepMendsWhatALaterRuleBroke) {
  for (int loops : {1, 2, 5}) {
    IpuCase c;
    c.config.ipu.max_loops = loops;
    c.input("a");
    c.input("b");
    c.input("z");
    c.node("Add", {"a", "b"}, {"y"}, "add");
    c.node("Concat", {"a", "z"}, {"cc"}, "concat")->set_attribute(ir::Attribute::of_int("axis", 1));
    c.act("a", 10);
    c.act("b", 9);
    c.act("y", 5);
    c.act("z", 1);
    c.act("cc", 1);
    std::vector<IpuAdjustment> changes = c.run();
    EXPECT_EQ(c.pos("a"), 1);
    EXPECT_EQ(c.pos("b"), loops == 1 ? 9 : 8) << loops;
    EXPECT_EQ(changes.size(), loops == 1 ? 1u : 2u);
    // Every constraint holds after two sweeps, as the rules evaluate them.
    if (loops == 1) continue;
    for (const auto& n : c.g().nodes())
      for (IpuRule rule : kIpuRules) {
        struct View : PositionView {
          const Plan& p;
          explicit View(const Plan& plan) : p(plan) {}
          std::string read_slot(const ir::Value* v) const override { return p.find(v->name()) ? v->name() : ""; }
          std::string write_slot(const ir::Value* v) const override { return read_slot(v); }
          std::optional<int> pos(const std::string& s) const override { return p.find(s)->pos; }
        } view(c.plan);
        if (auto check = ipu_check_node(rule, *n, view, {})) {
          for (const IpuConstraint& k : check->constraints) EXPECT_TRUE(k.holds()) << k.quantity << " " << k.terms;
        }
      }
  }
}

// NPU bias (vai_q_onnx 1.16 with enable_dpu): the Conv's bias is a weight of weight_type with its
// own power-of-two position from its values: max |b| = 0.4 -> 0.4/127 -> -log2 = 8.3 -> pos 8 (and
// the finest position holding 0.4 is 8 too), values clip(rne(b 256), -127, 127).
TEST(IpuLimitation, NpuBiasIsAPowerOfTwoWeight) {
  IpuCase c;
  c.input("x");
  c.init("w", {2, 2, 1, 1}, {0.3f, -0.17f, 0.051f, 0.9f});
  c.init("b", {2}, {0.4f, -0.1f});
  c.node("Conv", {"x", "w", "b"}, {"y"}, "conv");
  c.g().add_output(c.v("y"));
  c.config.activation_symmetric = true;
  c.config.activation_type = DataType::UInt8;
  std::map<std::string, DataType> types = {{"y", DataType::Float}};
  Plan p = make_plan(c.model, c.config, types);
  ASSERT_TRUE(p.find("b"));
  EXPECT_EQ(p.find("b")->role, Role::Weight);
  EXPECT_EQ(p.find("b")->type, DataType::Int8);
  calib::CalibrationResult ranges;
  for (auto [name, pos] : {std::pair{"x", 6}, std::pair{"y", 5}}) {
    ranges.ranges[name].lo = -128 * std::ldexp(1.0, -pos);
    ranges.ranges[name].hi = 127 * std::ldexp(1.0, -pos);
    ranges.ranges[name].pos = pos;
  }
  assign_parameters(p, c.model, c.config, ranges);
  const TensorPlan& b = *p.find("b");
  EXPECT_EQ(*b.pos, 8);
  EXPECT_EQ(b.params[0].scale, 1.0 / 256);
  EXPECT_EQ(b.params[0].zero_point, 0);
  std::span<const int8_t> q = b.data->values<int8_t>();
  EXPECT_EQ(std::vector<int8_t>(q.begin(), q.end()), expected_int8(float_values(c, "b"), 8));
}

TEST(IpuLimitation, ExtraOptions) {
  QuantConfig c;
  apply_extra_option(c, "IPULimitationCheck", false);
  EXPECT_FALSE(c.ipu.enabled);
  apply_extra_option(c, "NPULimitationCheck", true);
  EXPECT_TRUE(c.ipu.enabled);
  for (auto [key, field] : {std::pair{"AdjustShiftCut", &QuantConfig::IpuCheck::adjust_shift_cut},
                            std::pair{"AdjustShiftBias", &QuantConfig::IpuCheck::adjust_shift_bias},
                            std::pair{"AdjustShiftRead", &QuantConfig::IpuCheck::adjust_shift_read},
                            std::pair{"AdjustShiftWrite", &QuantConfig::IpuCheck::adjust_shift_write},
                            std::pair{"AdjustHardSigmoid", &QuantConfig::IpuCheck::adjust_hard_sigmoid},
                            std::pair{"AdjustShiftSwish", &QuantConfig::IpuCheck::adjust_shift_swish}}) {
    apply_extra_option(c, key, false);
    EXPECT_FALSE(c.ipu.*field) << key;
  }
  apply_extra_option(c, "MaxLoopNum", 5);
  EXPECT_EQ(c.ipu.max_loops, 5);
  EXPECT_NE(testing::error_of([&] { apply_extra_option(c, "MaxLoopNum", 2.5); }).find("MaxLoopNum"), std::string::npos);
  EXPECT_NE(testing::error_of([&] { apply_extra_option(c, "AdjustShiftCut", 1); }).find("AdjustShiftCut"),
            std::string::npos);
  // Set without the NPU path, they would do nothing: refused by name.
  QuantConfig plain;
  apply_extra_option(plain, "AdjustShiftCut", false);
  EXPECT_NE(testing::error_of([&] { check_config(plain); }).find("enable_dpu"), std::string::npos);
  // Quark's alignments without a position rule are refused on the NPU path, not ignored.
  QuantConfig npu;
  npu.enable_dpu = true;
  npu.activation_symmetric = true;
  npu.align_pad = true;
  npu.align_slice = true;
  EXPECT_EQ(testing::error_of([&] { check_config(npu); }), "");
  npu.align_transpose = true;
  EXPECT_NE(testing::error_of([&] { check_config(npu); }).find("AlignTranspose true with enable_dpu"),
            std::string::npos);
  npu.align_transpose = false;
  EXPECT_EQ(testing::error_of([&] { check_config(npu); }), "");
}

}  // namespace
}  // namespace onnxptq::quant
