// The elementwise kernels on what the ONNX backend tests leave out: broadcasting corners and
// thread splits against a naive multi-index reference, integer edge cases (truncation, wrap,
// division by zero), NaN and infinities, the accuracy of the fast float exp/tanh/sigmoid over
// their whole range, Cast corner cases, empty tensors and attribute errors.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <optional>
#include <random>
#include <variant>

#include "engine/session.h"
#include "engine/vector_math.h"
#include "ir/float16.h"
#include "onnxptq/error.h"
#include "support/kernel_run.h"

namespace onnxptq::engine {
namespace {

using ir::DataType;
using kernel_test::f32;
using kernel_test::kInf;
using kernel_test::kNaN;
using kernel_test::make;
using kernel_test::values_of;

struct ElementwiseAttr {
  std::string name;
  std::variant<int64_t, float, std::string> value;
};

struct ElementwiseOp {
  std::string type;
  int64_t opset = 17;
  std::vector<ElementwiseAttr> attrs = {};
  int threads = 1;
};

// Builds a one-node model whose inputs are all graph inputs (std::nullopt: an omitted optional
// input) and runs it once.
Tensor run_elementwise(const ElementwiseOp& op, const std::vector<std::optional<Tensor>>& inputs) {
  ir::Model m;
  m.set_opset("", op.opset);
  ir::Graph& g = *m.graph;
  std::vector<ir::Value*> ins;
  std::map<std::string, Tensor> feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) {
      ins.push_back(nullptr);
      continue;
    }
    ir::Value* v = g.add_value("in" + std::to_string(i));
    g.add_input(v);
    ins.push_back(v);
    feeds["in" + std::to_string(i)] = *inputs[i];
  }
  ir::Value* y = g.add_value("y");
  ir::Node* node = g.add_node(op.type, ins, {y}, "node");
  for (const ElementwiseAttr& a : op.attrs) {
    if (auto* i = std::get_if<int64_t>(&a.value)) node->set_attribute(ir::Attribute::of_int(a.name, *i));
    else if (auto* f = std::get_if<float>(&a.value)) node->set_attribute(ir::Attribute::of_float(a.name, *f));
    else node->set_attribute(ir::Attribute::of_string(a.name, std::get<std::string>(a.value)));
  }
  g.add_output(y);
  SessionOptions options;
  options.threads = op.threads;
  Session session(m, options);
  return session.run(feeds)[0];
}

// The message of the Error the op raises (when built or run), or "" when it runs.
std::string elementwise_error(const ElementwiseOp& op, const std::vector<std::optional<Tensor>>& inputs) {
  try {
    run_elementwise(op, inputs);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

Tensor bools(std::vector<int64_t> dims, std::vector<uint8_t> values) {
  Tensor t(DataType::Bool, std::move(dims));
  if (!values.empty()) std::memcpy(t.mutable_bytes(), values.data(), values.size());
  return t;
}

// NumPy broadcasting the obvious way: every output multi-index mapped into each input.
template <class T, class F>
std::vector<T> naive_broadcast(const std::vector<int64_t>& da, const std::vector<float>& a, const std::vector<int64_t>& db,
                               const std::vector<float>& b, std::vector<int64_t>& out_dims, F f) {
  size_t rank = std::max(da.size(), db.size());
  auto pad = [&](const std::vector<int64_t>& d) {
    std::vector<int64_t> p(rank - d.size(), 1);
    p.insert(p.end(), d.begin(), d.end());
    return p;
  };
  std::vector<int64_t> pa = pad(da), pb = pad(db);
  out_dims.assign(rank, 0);
  for (size_t i = 0; i < rank; ++i) out_dims[i] = pa[i] == 1 ? pb[i] : pa[i];
  int64_t total = 1;
  for (int64_t d : out_dims) total *= d;
  std::vector<T> out(total);
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t rest = flat, ia = 0, ib = 0, sa = 1, sb = 1;
    for (size_t i = rank; i-- > 0;) {
      int64_t idx = rest % out_dims[i];
      rest /= out_dims[i];
      ia += (pa[i] == 1 ? 0 : idx) * sa;
      ib += (pb[i] == 1 ? 0 : idx) * sb;
      sa *= pa[i];
      sb *= pb[i];
    }
    out[flat] = f(a[ia], b[ib]);
  }
  return out;
}

std::vector<float> iota_floats(int64_t n, float scale) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>((i * 37) % 101) * scale - 3.0f;
  return v;
}

int64_t count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// --- broadcasting

TEST(ElementwiseBroadcast, MatchesNaiveReferenceOnAwkwardShapes) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{13}, {13}},          {{13}, {}},           {{}, {127}},          {{3, 4, 5}, {5}},
      {{3, 4, 5}, {4, 1}},   {{1, 4, 1, 6}, {3, 1, 5, 1}}, {{2, 1, 3}, {1, 7, 1}}, {{1, 1, 1}, {1}},
      {{2, 13, 7, 3}, {13, 1, 1}}, {{5, 1}, {1, 127}}, {{1, 64, 9, 9}, {1, 64, 1, 1}}, {{4, 1, 1, 9}, {4, 5, 3, 9}},
  };
  for (const auto& [da, db] : cases) {
    std::vector<float> a = iota_floats(count(da), 0.5f), b = iota_floats(count(db), 0.25f);
    for (int threads : {1, 2}) {
      Tensor got = run_elementwise({"Sub", 14, {}, threads}, {f32(da, a), f32(db, b)});
      std::vector<int64_t> dims;
      std::vector<float> want = naive_broadcast<float>(da, a, db, b, dims, [](float x, float y) { return x - y; });
      EXPECT_EQ(got.dims(), dims) << ir::dims_to_string(da) << " - " << ir::dims_to_string(db);
      EXPECT_EQ(values_of<float>(got), want) << ir::dims_to_string(da) << " - " << ir::dims_to_string(db);
    }
  }
}

// Big enough to be split between two threads in the middle of rows.
TEST(ElementwiseBroadcast, ThreadSplitsMidRowMatchReference) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {
      {{5, 127, 131}, {127, 1}}, {{5, 127, 131}, {131}}, {{90001}, {1}}, {{3, 1, 40000}, {1, 2, 1}}};
  for (const auto& [da, db] : cases) {
    std::vector<float> a = iota_floats(count(da), 0.5f), b = iota_floats(count(db), 0.25f);
    Tensor got = run_elementwise({"Mul", 14, {}, 2}, {f32(da, a), f32(db, b)});
    std::vector<int64_t> dims;
    std::vector<float> want = naive_broadcast<float>(da, a, db, b, dims, [](float x, float y) { return x * y; });
    EXPECT_EQ(got.dims(), dims);
    EXPECT_EQ(values_of<float>(got), want) << ir::dims_to_string(da) << " * " << ir::dims_to_string(db);
  }
}

TEST(ElementwiseBroadcast, EmptyTensors) {
  Tensor got = run_elementwise({"Add"}, {f32({0, 3}, {}), f32({3}, {1, 2, 3})});
  EXPECT_EQ(got.dims(), (std::vector<int64_t>{0, 3}));
  got = run_elementwise({"Add"}, {f32({2, 0}, {}), f32({1, 1}, {1})});
  EXPECT_EQ(got.dims(), (std::vector<int64_t>{2, 0}));
  got = run_elementwise({"Relu"}, {f32({0}, {})});
  EXPECT_EQ(got.dims(), (std::vector<int64_t>{0}));
  got = run_elementwise({"Where"}, {bools({0}, {}), f32({1}, {1}), f32({1}, {2})});
  EXPECT_EQ(got.dims(), (std::vector<int64_t>{0}));
}

TEST(ElementwiseBroadcast, MismatchNamesBothShapes) {
  std::string e = elementwise_error({"Add"}, {f32({2, 3}, std::vector<float>(6)), f32({4}, std::vector<float>(4))});
  EXPECT_NE(e.find("[2,3] and [4] cannot be broadcast"), std::string::npos) << e;
  e = elementwise_error({"Add"}, {f32({2}, {1, 2}), make<int64_t>({2}, {1, 2})});
  EXPECT_NE(e.find("same element type"), std::string::npos) << e;
}

TEST(ElementwiseBroadcast, LegacyOpset6AlignsBAtAxis) {
  // [2,3] + [2] with axis=0: B runs down the rows (NumPy would refuse [2,3] + [2]).
  Tensor got = run_elementwise({"Add", 6, {{"broadcast", int64_t{1}}, {"axis", int64_t{0}}}},
                               {f32({2, 3}, {0, 1, 2, 3, 4, 5}), f32({2}, {10, 20})});
  EXPECT_EQ(values_of<float>(got), (std::vector<float>{10, 11, 12, 23, 24, 25}));
  std::string e = elementwise_error({"Add", 6}, {f32({2, 3}, std::vector<float>(6)), f32({3}, {1, 2, 3})});
  EXPECT_NE(e.find("broadcast is 0"), std::string::npos) << e;
}

// --- arithmetic

TEST(ElementwiseArith, IntegerDivisionTruncatesAndWraps) {
  Tensor got = run_elementwise({"Div"}, {make<int32_t>({5}, {-7, 7, -7, 7, std::numeric_limits<int32_t>::min()}),
                                         make<int32_t>({5}, {2, 2, -2, -2, -1})});
  EXPECT_EQ(values_of<int32_t>(got), (std::vector<int32_t>{-3, 3, 3, -3, std::numeric_limits<int32_t>::min()}));
  std::string e = elementwise_error({"Div"}, {make<int64_t>({2}, {1, 2}), make<int64_t>({2}, {1, 0})});
  EXPECT_NE(e.find("division by zero"), std::string::npos) << e;
}

TEST(ElementwiseArith, IntegerAddAndMulWrap) {
  Tensor got = run_elementwise({"Add"}, {make<int8_t>({2}, {127, -128}), make<int8_t>({2}, {1, -1})});
  EXPECT_EQ(values_of<int8_t>(got), (std::vector<int8_t>{-128, 127}));
  got = run_elementwise({"Mul"}, {make<uint16_t>({1}, {65535}), make<uint16_t>({1}, {65535})});
  EXPECT_EQ(values_of<uint16_t>(got), (std::vector<uint16_t>{1}));  // 65535^2 mod 2^16
  got = run_elementwise({"Mul"}, {make<int64_t>({1}, {int64_t{1} << 62}), make<int64_t>({1}, {4})});
  EXPECT_EQ(values_of<int64_t>(got), (std::vector<int64_t>{0}));
}

TEST(ElementwiseArith, Float16AndDouble) {
  auto half = [](std::vector<float> v) {
    std::vector<uint16_t> h;
    for (float f : v) h.push_back(ir::float_to_half(f));
    return Tensor(DataType::Float16, {static_cast<int64_t>(v.size())}, ir::Bytes::copy_of(h.data(), h.size() * 2));
  };
  Tensor got = run_elementwise({"Add"}, {half({1.5f, -2.0f}), half({2.25f, 0.5f})});
  ASSERT_EQ(got.dtype(), DataType::Float16);
  EXPECT_EQ(ir::half_to_float(got.values<uint16_t>()[0]), 3.75f);
  EXPECT_EQ(ir::half_to_float(got.values<uint16_t>()[1]), -1.5f);
  got = run_elementwise({"Div"}, {make<double>({1}, {1.0}), make<double>({1}, {3.0})});
  EXPECT_EQ(got.values<double>()[0], 1.0 / 3.0);  // computed in double, not through float
}

TEST(ElementwiseArith, PowTypes) {
  Tensor got = run_elementwise({"Pow", 15}, {make<int64_t>({4}, {2, -3, 7, 1}), make<int64_t>({4}, {10, 3, 0, -5})});
  EXPECT_EQ(values_of<int64_t>(got), (std::vector<int64_t>{1024, -27, 1, 1}));
  got = run_elementwise({"Pow", 15}, {make<int32_t>({2}, {4, 2}), make<float>({2}, {0.5f, -1.0f})});
  EXPECT_EQ(values_of<int32_t>(got), (std::vector<int32_t>{2, 0}));
  got = run_elementwise({"Pow", 15}, {f32({4}, {-3, 1.5f, kNaN, -kInf}), f32({}, {2})});  // the x*x path
  EXPECT_EQ(got.values<float>()[0], 9.0f);
  EXPECT_EQ(got.values<float>()[1], 2.25f);
  EXPECT_TRUE(std::isnan(got.values<float>()[2]));
  EXPECT_EQ(got.values<float>()[3], kInf);
  got = run_elementwise({"Pow", 15}, {f32({2}, {2, 9}), make<uint8_t>({2}, {3, 0})});
  EXPECT_EQ(values_of<float>(got), (std::vector<float>{8, 1}));
}

TEST(ElementwiseArith, ModSignRules) {
  // fmod=0 follows the divisor's sign (Python), fmod=1 the dividend's (C).
  auto a = make<int32_t>({4}, {-7, 7, -7, 7});
  auto b = make<int32_t>({4}, {3, -3, -3, 3});
  EXPECT_EQ(values_of<int32_t>(run_elementwise({"Mod"}, {a, b})), (std::vector<int32_t>{2, -2, -1, 1}));
  EXPECT_EQ(values_of<int32_t>(run_elementwise({"Mod", 17, {{"fmod", int64_t{1}}}}, {a, b})),
            (std::vector<int32_t>{-1, 1, -1, 1}));
  Tensor got = run_elementwise({"Mod", 17, {{"fmod", int64_t{1}}}}, {f32({2}, {-7.5f, 7.5f}), f32({2}, {2, -2})});
  EXPECT_EQ(values_of<float>(got), (std::vector<float>{-1.5f, 1.5f}));
  std::string e = elementwise_error({"Mod"}, {f32({1}, {1}), f32({1}, {1})});
  EXPECT_NE(e.find("needs fmod=1"), std::string::npos) << e;
  e = elementwise_error({"Mod", 17, {{"fmod", int64_t{2}}}}, {a, b});
  EXPECT_NE(e.find("fmod must be 0 or 1, got 2"), std::string::npos) << e;
  e = elementwise_error({"Mod"}, {a, make<int32_t>({1}, {0})});
  EXPECT_NE(e.find("division by zero"), std::string::npos) << e;
}

TEST(ElementwiseArith, BitShift) {
  auto x = make<uint8_t>({4}, {1, 255, 16, 3});
  auto y = make<uint8_t>({4}, {7, 1, 8, 200});
  EXPECT_EQ(values_of<uint8_t>(run_elementwise({"BitShift", 17, {{"direction", std::string("LEFT")}}}, {x, y})),
            (std::vector<uint8_t>{128, 254, 0, 0}));
  EXPECT_EQ(values_of<uint8_t>(run_elementwise({"BitShift", 17, {{"direction", std::string("RIGHT")}}}, {x, y})),
            (std::vector<uint8_t>{0, 127, 0, 0}));
  std::string e = elementwise_error({"BitShift", 17, {{"direction", std::string("UP")}}}, {x, y});
  EXPECT_NE(e.find("direction must be LEFT or RIGHT, got 'UP'"), std::string::npos) << e;
}

// --- comparison and logic

TEST(ElementwiseCompare, NaNAndBroadcast) {
  auto x = f32({2, 2}, {kNaN, 1, 2, -kInf});
  auto y = f32({2}, {kNaN, 2});
  EXPECT_EQ(values_of<uint8_t>(run_elementwise({"Equal"}, {x, y})), (std::vector<uint8_t>{0, 0, 0, 0}));
  EXPECT_EQ(values_of<uint8_t>(run_elementwise({"Less"}, {x, y})), (std::vector<uint8_t>{0, 1, 0, 1}));
  EXPECT_EQ(values_of<uint8_t>(run_elementwise({"GreaterOrEqual"}, {x, y})), (std::vector<uint8_t>{0, 0, 0, 0}));
  EXPECT_EQ(values_of<uint8_t>(run_elementwise({"LessOrEqual"}, {x, y})), (std::vector<uint8_t>{0, 1, 0, 1}));
  Tensor got = run_elementwise({"Greater"}, {make<uint64_t>({2}, {~uint64_t{0}, 0}), make<uint64_t>({}, {1})});
  EXPECT_EQ(values_of<uint8_t>(got), (std::vector<uint8_t>{1, 0}));
  got = run_elementwise({"Equal", 19}, {Tensor::from_strings({3}, {"a", "b", ""}), Tensor::from_strings({}, {"b"})});
  EXPECT_EQ(values_of<uint8_t>(got), (std::vector<uint8_t>{0, 1, 0}));
}

TEST(ElementwiseLogic, TruthTablesWithBroadcast) {
  auto a = bools({2, 2}, {0, 0, 1, 1});
  auto b = bools({2}, {0, 1});
  EXPECT_EQ(values_of<uint8_t>(run_elementwise({"And"}, {a, b})), (std::vector<uint8_t>{0, 0, 0, 1}));
  EXPECT_EQ(values_of<uint8_t>(run_elementwise({"Or"}, {a, b})), (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(values_of<uint8_t>(run_elementwise({"Xor"}, {a, b})), (std::vector<uint8_t>{0, 1, 1, 0}));
  EXPECT_EQ(values_of<uint8_t>(run_elementwise({"Not"}, {a})), (std::vector<uint8_t>{1, 1, 0, 0}));
  std::string e = elementwise_error({"And"}, {f32({1}, {1}), f32({1}, {1})});
  EXPECT_NE(e.find("must be bool"), std::string::npos) << e;
}

TEST(ElementwisePRelu, UnidirectionalAndLegacyChannels) {
  Tensor got = run_elementwise({"PRelu", 16}, {f32({2, 2}, {-1, 2, -3, 4}), f32({2, 1}, {0.5f, 2})});
  EXPECT_EQ(values_of<float>(got), (std::vector<float>{-0.5f, 2, -6, 4}));
  // Opset 6: a slope per channel (axis 1) when it has the channel count.
  got = run_elementwise({"PRelu", 6}, {f32({1, 2, 3}, {-1, -1, -1, -2, 2, -2}), f32({2}, {0.5f, 3})});
  EXPECT_EQ(values_of<float>(got), (std::vector<float>{-0.5f, -0.5f, -0.5f, -6, 2, -6}));
  std::string e = elementwise_error({"PRelu", 16}, {f32({2}, {1, 2}), f32({2, 2}, {1, 2, 3, 4})});
  EXPECT_NE(e.find("cannot be broadcast to the first [2]"), std::string::npos) << e;
  got = run_elementwise({"PRelu", 16}, {make<int32_t>({3}, {-4, 0, 5}), make<int32_t>({1}, {3})});
  EXPECT_EQ(values_of<int32_t>(got), (std::vector<int32_t>{-12, 0, 5}));
}

// --- variadic and Where

TEST(ElementwiseVariadic, MinMaxPropagateNaNAndBroadcastThreeInputs) {
  auto a = f32({2, 1}, {1, kNaN});
  auto b = f32({3}, {0, 5, -1});
  auto c = f32({}, {2});
  EXPECT_EQ(run_elementwise({"Max"}, {a, b, c}).dims(), (std::vector<int64_t>{2, 3}));
  std::vector<float> mx = values_of<float>(run_elementwise({"Max"}, {a, b, c}));
  std::vector<float> mn = values_of<float>(run_elementwise({"Min"}, {a, b, c}));
  EXPECT_EQ(std::vector<float>(mx.begin(), mx.begin() + 3), (std::vector<float>{2, 5, 2}));
  EXPECT_EQ(std::vector<float>(mn.begin(), mn.begin() + 3), (std::vector<float>{0, 1, -1}));
  for (int i = 3; i < 6; ++i) EXPECT_TRUE(std::isnan(mx[i]) && std::isnan(mn[i])) << i;
}

TEST(ElementwiseVariadic, SumMeanAndIntegers) {
  Tensor got = run_elementwise({"Mean"}, {f32({2}, {1, 2}), f32({2}, {2, 2}), f32({1}, {0})});
  EXPECT_EQ(values_of<float>(got), (std::vector<float>{1, 4.0f / 3.0f}));
  got =
      run_elementwise({"Sum"}, {make<int32_t>({2}, {std::numeric_limits<int32_t>::max(), 1}), make<int32_t>({}, {1})});
  EXPECT_EQ(values_of<int32_t>(got), (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), 2}));
  got = run_elementwise({"Max"}, {make<uint8_t>({3}, {1, 200, 3})});  // one input: itself
  EXPECT_EQ(values_of<uint8_t>(got), (std::vector<uint8_t>{1, 200, 3}));
  std::string e = elementwise_error({"Mean"}, {make<int32_t>({1}, {1}), make<int32_t>({1}, {1})});
  EXPECT_NE(e.find("does not support element type int32"), std::string::npos) << e;
}

TEST(ElementwiseWhere, BroadcastsAllThreeAndCopiesAnyType) {
  auto c = bools({2, 1}, {1, 0});
  Tensor got = run_elementwise({"Where"}, {c, make<int64_t>({3}, {1, 2, 3}), make<int64_t>({}, {-1})});
  EXPECT_EQ(got.dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(values_of<int64_t>(got), (std::vector<int64_t>{1, 2, 3, -1, -1, -1}));
  got = run_elementwise(
      {"Where"}, {bools({3}, {1, 0, 1}), Tensor::from_strings({3}, {"a", "b", "c"}), Tensor::from_strings({1}, {"z"})});
  EXPECT_EQ(got.string_values(), (std::vector<std::string>{"a", "z", "c"}));
  std::string e = elementwise_error({"Where"}, {c, f32({1}, {1}), make<double>({1}, {1})});
  EXPECT_NE(e.find("same type"), std::string::npos) << e;
}

// --- unary

// The fast float exp, tanh, sigmoid and erf against the double-precision library over their range.
// Softplus and Mish in float (fast_exp, fast_log and ln(1 + u) by Goldberg's factor) against the
// double-precision formulas, Softplus's tiny results below -87 (down into the denormals) included.
TEST(ElementwiseUnary, SoftplusAndMishAccuracy) {
  std::vector<float> xs;
  for (float x = -110.0f; x <= 110.0f; x += 0.00917f) xs.push_back(x);
  for (float x : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-7f, -1e-7f, 16.6f, 17.0f, 88.0f, -88.0f}) xs.push_back(x);
  Tensor x = f32({static_cast<int64_t>(xs.size())}, xs);
  std::vector<float> sp = values_of<float>(run_elementwise({"Softplus"}, {x}));
  std::vector<float> mish = values_of<float>(run_elementwise({"Mish", 18}, {x}));
  double worst_sp = 0, worst_mish = 0;
  auto rel = [](double got, double want) {
    if (std::fabs(want) < std::numeric_limits<float>::min()) return std::fabs(got - want) <= 2.9e-45 ? 0.0 : 1.0;
    return std::fabs(got - want) / std::fabs(want);
  };
  for (size_t i = 0; i < xs.size(); ++i) {
    const double v = xs[i];
    const double want = std::max(v, 0.0) + std::log1p(std::exp(-std::fabs(v)));
    worst_sp = std::max(worst_sp, rel(sp[i], want));
    // (Mish below about -87 multiplies a softplus in the denormals, of a few significant bits.)
    if (want >= std::numeric_limits<float>::min()) worst_mish = std::max(worst_mish, rel(mish[i], v * std::tanh(want)));
  }
  EXPECT_LT(worst_sp, 1e-6);
  EXPECT_LT(worst_mish, 2e-6);
  std::cout << "float relative error: softplus " << worst_sp << ", mish " << worst_mish << "\n";
  std::vector<float> special = values_of<float>(run_elementwise({"Softplus"}, {f32({3}, {kNaN, kInf, -kInf})}));
  EXPECT_TRUE(std::isnan(special[0]));
  EXPECT_EQ(special[1], kInf);
  EXPECT_EQ(special[2], 0.0f);
}

TEST(ElementwiseUnary, FastExpTanhSigmoidErfAccuracy) {
  std::vector<float> xs;
  for (float x = -110.0f; x <= 90.0f; x += 0.0137f) xs.push_back(x);
  for (float x = -1.0f; x <= 1.0f; x += 1.0e-4f) xs.push_back(x);
  for (float x : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-6f, 0.1732867951f, 0.17328681f, 88.7f, 88.72f, -87.3f, -103.0f})
    xs.push_back(x);
  Tensor x = f32({static_cast<int64_t>(xs.size())}, xs);
  std::vector<float> e = values_of<float>(run_elementwise({"Exp"}, {x}));
  std::vector<float> t = values_of<float>(run_elementwise({"Tanh"}, {x}));
  std::vector<float> s = values_of<float>(run_elementwise({"Sigmoid"}, {x}));
  std::vector<float> f = values_of<float>(run_elementwise({"Erf"}, {x}));
  double worst_e = 0, worst_t = 0, worst_s = 0, worst_f = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    double v = xs[i];
    double want_e = std::exp(v), want_t = std::tanh(v), want_s = 1.0 / (1.0 + std::exp(-v));
    // Relative error for normal results; results in the denormals may differ by their spacing.
    auto rel = [](double got, double want) {
      if (std::fabs(want) < std::numeric_limits<float>::min()) return std::fabs(got - want) <= 2.9e-45 ? 0.0 : 1.0;
      return std::fabs(got - want) / std::fabs(want);
    };
    if (want_e <= std::numeric_limits<float>::max()) worst_e = std::max(worst_e, rel(e[i], want_e));
    else EXPECT_EQ(e[i], kInf) << xs[i];
    worst_t = std::max(worst_t, rel(t[i], want_t));
    worst_s = std::max(worst_s, rel(s[i], want_s));
    worst_f = std::max(worst_f, rel(f[i], std::erf(v)));
  }
  EXPECT_LT(worst_e, 3e-7);
  EXPECT_LT(worst_t, 1e-6);
  EXPECT_LT(worst_s, 1e-6);
  EXPECT_LT(worst_f, 1e-6);
  std::cout << "fast float relative error: exp " << worst_e << ", tanh " << worst_t << ", sigmoid " << worst_s
            << ", erf " << worst_f << "\n";

  Tensor special = f32({5}, {kNaN, kInf, -kInf, 1000.0f, -1000.0f});
  e = values_of<float>(run_elementwise({"Exp"}, {special}));
  t = values_of<float>(run_elementwise({"Tanh"}, {special}));
  s = values_of<float>(run_elementwise({"Sigmoid"}, {special}));
  f = values_of<float>(run_elementwise({"Erf"}, {special}));
  EXPECT_TRUE(std::isnan(e[0]) && std::isnan(t[0]) && std::isnan(s[0]) && std::isnan(f[0]));
  EXPECT_EQ(std::vector<float>(f.begin() + 1, f.end()), (std::vector<float>{1, -1, 1, -1}));
  EXPECT_EQ(std::vector<float>(e.begin() + 1, e.end()), (std::vector<float>{kInf, 0, kInf, 0}));
  EXPECT_EQ(std::vector<float>(t.begin() + 1, t.end()), (std::vector<float>{1, -1, 1, -1}));
  EXPECT_EQ(std::vector<float>(s.begin() + 1, s.end()), (std::vector<float>{1, 0, 1, 0}));
  EXPECT_TRUE(std::signbit(values_of<float>(run_elementwise({"Tanh"}, {f32({1}, {-0.0f})}))[0]));
}

// The array function (in 512-bit registers on AVX-512) gives fast_sigmoid's values bit for bit,
// on every lane of a remainder too, and SiLU's are x times them: the Sigmoid op, a Conv's fused
// Sigmoid or SiLU and the unfused ops agree (a NaN's sign bit aside).
TEST(VectorMath, SigmoidValuesAreFastSigmoidsBitForBit) {
  std::mt19937 rng(11);
  std::normal_distribution<float> wide(0.0f, 40.0f);
  std::vector<float> xs = {0.0f, -0.0f, kInf, -kInf, kNaN, -104.0f, -103.99999f, -104.00001f, -87.5f, -88.0f,
                           -100.0f, 1e-40f, -1e-40f, 1e-30f, -1e-30f, 88.8f, 120.0f, -120.0f, 0.5f, -0.5f};
  for (int i = 0; i < 5000; ++i) xs.push_back(wide(rng));
  for (float x = -120.0f; x <= 120.0f; x += 0.00731f) xs.push_back(x);
  xs.resize(xs.size() / 16 * 16 + 7);  // a remainder of 7
  std::vector<float> s(xs.size()), silu(xs.size());
  sigmoid_values(xs.data(), s.data(), static_cast<int64_t>(xs.size()));
  sigmoid_values<true>(xs.data(), silu.data(), static_cast<int64_t>(xs.size()));
  auto same = [](float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0 || (a != a && b != b); };
  size_t differ = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const float want = fast_sigmoid(xs[i]);
    const float want_silu = xs[i] * want;
    if (!same(s[i], want) || !same(silu[i], want_silu)) {
      if (differ++ < 5) ADD_FAILURE() << "x " << xs[i] << ": " << s[i] << " / " << silu[i] << ", want " << want << " / " << want_silu;
    }
  }
  EXPECT_EQ(differ, 0u) << "of " << xs.size();
}

TEST(VectorMath, FastLogAccuracy) {
  // Every normal float from the smallest to the largest in steps of about 1e-3 relative, and
  // around 1 (where ln x is small and its relative error would show) more densely.
  double worst = 0, worst_near_one = 0;
  for (float x = std::numeric_limits<float>::min(); x < std::numeric_limits<float>::max() / 1.001f; x *= 1.001f)
    worst = std::max(worst, std::fabs(fast_log(x) - std::log(static_cast<double>(x))) /
                                std::max(std::fabs(std::log(static_cast<double>(x))), 1e-30));
  for (float x = 0.5f; x < 2.0f; x += 1.0e-5f) {
    double want = std::log(static_cast<double>(x));
    worst_near_one = std::max(worst_near_one, std::fabs(fast_log(x) - want) / std::max(std::fabs(want), 1e-30));
  }
  EXPECT_EQ(fast_log(1.0f), 0.0f);
  EXPECT_LT(worst, 3e-7);
  EXPECT_LT(worst_near_one, 3e-7);
  std::cout << "fast_log relative error: " << worst << " (near 1: " << worst_near_one << ")\n";
}

TEST(ElementwiseUnary, RoundHalfToEven) {
  Tensor got = run_elementwise(
      {"Round"}, {f32({10}, {0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 2.4999998f, 8388609.0f, 1e10f, -kInf, kNaN})});
  std::vector<float> v = values_of<float>(got);
  EXPECT_EQ(std::vector<float>(v.begin(), v.end() - 1),
            (std::vector<float>{0, 2, 2, -0.0f, -2, 2, 8388609.0f, 1e10f, -kInf}));
  EXPECT_TRUE(std::signbit(v[3]));
  EXPECT_TRUE(std::isnan(v[9]));
}

TEST(ElementwiseUnary, ActivationsClosedForms) {
  std::vector<float> xs = {-3.5f, -1.0f, -0.25f, 0.0f, 0.3f, 2.0f, 7.0f};
  Tensor x = f32({7}, xs);
  auto check = [&](const ElementwiseOp& op, const std::function<double(double)>& f) {
    std::vector<float> got = values_of<float>(run_elementwise(op, {x}));
    for (size_t i = 0; i < xs.size(); ++i)
      EXPECT_NEAR(got[i], f(xs[i]), 1e-6 * (1 + std::fabs(f(xs[i])))) << op.type << " " << xs[i];
  };
  check({"LeakyRelu"}, [](double v) { return v < 0 ? 0.01 * v : v; });
  check({"HardSigmoid"}, [](double v) { return std::clamp(0.2 * v + 0.5, 0.0, 1.0); });
  check({"HardSwish"}, [](double v) { return v * std::clamp(v / 6 + 0.5, 0.0, 1.0); });
  check({"Elu", 17, {{"alpha", 2.0f}}}, [](double v) { return v < 0 ? 2 * (std::exp(v) - 1) : v; });
  check({"Celu", 17, {{"alpha", 2.0f}}}, [](double v) { return std::max(0.0, v) + std::min(0.0, 2 * (std::exp(v / 2) - 1)); });
  check({"Selu"}, [](double v) { return v > 0 ? 1.0507009873554805 * v : 1.0507009873554805 * 1.6732632423543772 * (std::exp(v) - 1); });
  check({"ThresholdedRelu", 17, {{"alpha", 0.3f}}}, [](double v) { return v > 0.3f ? v : 0; });
  check({"Softsign"}, [](double v) { return v / (1 + std::fabs(v)); });
  check({"Softplus"}, [](double v) { return std::log(1 + std::exp(v)); });
  check({"Mish", 18}, [](double v) { return v * std::tanh(std::log(1 + std::exp(v))); });
  check({"Gelu", 20}, [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); });
  check({"Gelu", 20, {{"approximate", std::string("tanh")}}},
        [](double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))); });
  check({"Shrink", 17, {{"lambd", 1.0f}, {"bias", 0.5f}}}, [](double v) { return v < -1 ? v + 0.5 : v > 1 ? v - 0.5 : 0; });
  check({"Erf"}, [](double v) { return std::erf(v); });
  // Softplus of large inputs does not overflow.
  EXPECT_EQ(values_of<float>(run_elementwise({"Softplus"}, {f32({2}, {1000, -1000})})), (std::vector<float>{1000, 0}));
}

TEST(ElementwiseUnary, NaNAndIntegerEdges) {
  std::vector<float> relu = values_of<float>(run_elementwise({"Relu"}, {f32({3}, {kNaN, -0.5f, 0.5f})}));
  EXPECT_TRUE(std::isnan(relu[0]));
  EXPECT_EQ(relu[1], 0.0f);
  EXPECT_EQ(values_of<int8_t>(run_elementwise({"Abs"}, {make<int8_t>({3}, {-128, -5, 5})})),
            (std::vector<int8_t>{-128, 5, 5}));
  EXPECT_EQ(
      values_of<int32_t>(run_elementwise({"Neg"}, {make<int32_t>({2}, {std::numeric_limits<int32_t>::min(), 4})})),
      (std::vector<int32_t>{std::numeric_limits<int32_t>::min(), -4}));
  EXPECT_EQ(values_of<int64_t>(run_elementwise({"Sign"}, {make<int64_t>({3}, {-9, 0, 9})})),
            (std::vector<int64_t>{-1, 0, 1}));
  EXPECT_EQ(values_of<int32_t>(run_elementwise({"Relu"}, {make<int32_t>({2}, {-9, 9})})), (std::vector<int32_t>{0, 9}));
  Tensor x = f32({4}, {kNaN, kInf, -kInf, 1});
  EXPECT_EQ(values_of<uint8_t>(run_elementwise({"IsNaN"}, {x})), (std::vector<uint8_t>{1, 0, 0, 0}));
  EXPECT_EQ(values_of<uint8_t>(run_elementwise({"IsInf"}, {x})), (std::vector<uint8_t>{0, 1, 1, 0}));
  EXPECT_EQ(values_of<uint8_t>(run_elementwise({"IsInf", 17, {{"detect_positive", int64_t{0}}}}, {x})),
            (std::vector<uint8_t>{0, 0, 1, 0}));
  std::string e = elementwise_error({"Sqrt"}, {make<int32_t>({1}, {4})});
  EXPECT_NE(e.find("does not support element type int32"), std::string::npos) << e;
  e = elementwise_error({"Neg"}, {make<uint8_t>({1}, {4})});
  EXPECT_NE(e.find("does not support element type uint8"), std::string::npos) << e;
}

TEST(ElementwiseUnary, AttributeErrors) {
  std::string e = elementwise_error({"Gelu", 20, {{"approximate", std::string("fast")}}}, {f32({1}, {1})});
  EXPECT_NE(e.find("approximate must be 'none' or 'tanh', got 'fast'"), std::string::npos) << e;
  e = elementwise_error({"Celu", 17, {{"alpha", 0.0f}}}, {f32({1}, {1})});
  EXPECT_NE(e.find("alpha of Celu must not be 0"), std::string::npos) << e;
  e = elementwise_error({"LeakyRelu", 17, {{"alpha", int64_t{1}}}}, {f32({1}, {1})});
  EXPECT_NE(e.find("alpha"), std::string::npos) << e;
}

TEST(ElementwiseClip, BoundsInputsAttributesAndTypes) {
  Tensor x = f32({5}, {-2, -0.5f, 0.5f, 2, kNaN});
  std::vector<float> v = values_of<float>(run_elementwise({"Clip", 13}, {x, std::nullopt, f32({}, {1})}));
  EXPECT_EQ(std::vector<float>(v.begin(), v.end() - 1), (std::vector<float>{-2, -0.5f, 0.5f, 1}));
  EXPECT_TRUE(std::isnan(v[4]));
  v = values_of<float>(run_elementwise({"Clip", 13}, {x, f32({}, {1}), f32({}, {0})}));  // min > max: all max
  EXPECT_EQ(std::vector<float>(v.begin(), v.end() - 1), (std::vector<float>{0, 0, 0, 0}));
  v = values_of<float>(run_elementwise({"Clip", 13}, {f32({2}, {-kInf, kInf})}));  // no bounds: unchanged
  EXPECT_EQ(v, (std::vector<float>{-kInf, kInf}));
  v = values_of<float>(run_elementwise({"Clip", 6, {{"min", -1.0f}, {"max", 0.25f}}}, {x}));
  EXPECT_EQ(std::vector<float>(v.begin(), v.end() - 1), (std::vector<float>{-1, -0.5f, 0.25f, 0.25f}));
  Tensor got = run_elementwise({"Clip", 13}, {make<int8_t>({3}, {-128, 0, 127}), make<int8_t>({}, {-5})});
  EXPECT_EQ(values_of<int8_t>(got), (std::vector<int8_t>{-5, 0, 127}));
  std::string e = elementwise_error({"Clip", 13}, {x, f32({2}, {0, 1})});
  EXPECT_NE(e.find("must be scalars, got shape [2]"), std::string::npos) << e;
}

// --- Cast

TEST(ElementwiseCast, NumericCorners) {
  auto to = [](DataType t) { return ElementwiseAttr{"to", static_cast<int64_t>(t)}; };
  Tensor got =
      run_elementwise({"Cast", 13, {to(DataType::Int32)}}, {f32({6}, {2.9f, -2.9f, kNaN, 1e20f, -1e20f, -0.0f})});
  EXPECT_EQ(values_of<int32_t>(got), (std::vector<int32_t>{2, -2, 0, std::numeric_limits<int32_t>::max(),
                                                           std::numeric_limits<int32_t>::min(), 0}));
  got = run_elementwise({"Cast", 13, {to(DataType::Int8)}}, {make<int32_t>({2}, {300, -129})});
  EXPECT_EQ(values_of<int8_t>(got), (std::vector<int8_t>{44, 127}));  // integers wrap modulo 2^8
  got = run_elementwise({"Cast", 13, {to(DataType::Bool)}}, {f32({4}, {0, -0.0f, 0.1f, kNaN})});
  EXPECT_EQ(values_of<uint8_t>(got), (std::vector<uint8_t>{0, 0, 1, 1}));
  got = run_elementwise({"Cast", 13, {to(DataType::Float)}}, {bools({2}, {1, 0})});
  EXPECT_EQ(values_of<float>(got), (std::vector<float>{1, 0}));
  got = run_elementwise({"Cast", 13, {to(DataType::Float16)}}, {make<double>({2}, {65504.0, 1e6})});
  EXPECT_EQ(ir::half_to_float(got.values<uint16_t>()[0]), 65504.0f);
  EXPECT_EQ(ir::half_to_float(got.values<uint16_t>()[1]), kInf);
  got = run_elementwise({"Cast", 13, {to(DataType::UInt64)}}, {make<int64_t>({1}, {-1})});
  EXPECT_EQ(values_of<uint64_t>(got), (std::vector<uint64_t>{~uint64_t{0}}));
  got = run_elementwise({"CastLike", 15}, {make<uint8_t>({2}, {7, 255}), f32({}, {0})});
  EXPECT_EQ(values_of<float>(got), (std::vector<float>{7, 255}));
}

TEST(ElementwiseCast, Strings) {
  auto to = [](DataType t) { return ElementwiseAttr{"to", static_cast<int64_t>(t)}; };
  Tensor got = run_elementwise(
      {"Cast", 13, {to(DataType::Float)}},
      {Tensor::from_strings({8}, {"1e3", "+INF", "-inf", " 2.5 ", "NaN", "-1.5E-2", "1e60", "Infinity"})});
  std::vector<float> v = values_of<float>(got);
  EXPECT_EQ(v[0], 1000.0f);
  EXPECT_EQ(v[1], kInf);
  EXPECT_EQ(v[2], -kInf);
  EXPECT_EQ(v[3], 2.5f);
  EXPECT_TRUE(std::isnan(v[4]));
  EXPECT_EQ(v[5], -0.015f);
  EXPECT_EQ(v[6], kInf);
  EXPECT_EQ(v[7], kInf);
  got = run_elementwise({"Cast", 13, {to(DataType::Int64)}},
                        {Tensor::from_strings({3}, {"-9223372036854775808", "42", "1e3"})});
  EXPECT_EQ(values_of<int64_t>(got), (std::vector<int64_t>{std::numeric_limits<int64_t>::min(), 42, 1000}));
  got = run_elementwise({"Cast", 13, {to(DataType::String)}}, {f32({6}, {0.1f, kNaN, -kInf, 1e20f, -3, 0.039187793f})});
  EXPECT_EQ(got.string_values(), (std::vector<std::string>{"0.1", "NaN", "-INF", "1e+20", "-3", "0.039187793"}));
  std::vector<uint16_t> h = {ir::float_to_half(0.1f), ir::float_to_half(-2.5f), ir::float_to_half(65504.0f)};
  got = run_elementwise({"Cast", 13, {to(DataType::String)}},
                        {Tensor(DataType::Float16, {3}, ir::Bytes::copy_of(h.data(), h.size() * 2))});
  EXPECT_EQ(got.string_values(), (std::vector<std::string>{"0.1", "-2.5", "6.55e+04"}));
  got = run_elementwise({"Cast", 13, {to(DataType::String)}}, {make<int64_t>({2}, {-5, 1234567890123})});
  EXPECT_EQ(got.string_values(), (std::vector<std::string>{"-5", "1234567890123"}));
  std::string e = elementwise_error({"Cast", 13, {to(DataType::Float)}}, {Tensor::from_strings({1}, {"abc"})});
  EXPECT_NE(e.find("cannot read the string 'abc' as a number"), std::string::npos) << e;
}

TEST(ElementwiseCast, BadTargets) {
  std::string e = elementwise_error({"Cast", 13, {{"to", int64_t{999}}}}, {f32({1}, {1})});
  EXPECT_NE(e.find("attribute to is 999"), std::string::npos) << e;
  e = elementwise_error({"Cast", 13, {{"to", static_cast<int64_t>(DataType::Complex64)}}}, {f32({1}, {1})});
  EXPECT_NE(e.find("complex64 is not supported"), std::string::npos) << e;
  e = elementwise_error({"Cast", 13}, {f32({1}, {1})});
  EXPECT_NE(e.find("needs the attribute 'to'"), std::string::npos) << e;
}

// --- speed, printed for comparison (not an assertion)

TEST(ElementwiseSpeed, AddAndReluAgainstMemcpy) {
  const std::vector<int64_t> dims = {1, 64, 112, 112};
  int64_t n = count(dims);
  Tensor a = f32(dims, iota_floats(n, 0.01f)), b = f32(dims, iota_floats(n, 0.02f));
  auto time_ms = [](const std::function<void()>& f) {
    f();
    double best = 1e9;
    for (int rep = 0; rep < 10; ++rep) {
      auto start = std::chrono::steady_clock::now();
      f();
      best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    return best;
  };
  std::vector<float> dst(n);
  const float* src = a.values<float>().data();
  double copy = time_ms([&] { std::memcpy(dst.data(), src, n * sizeof(float)); });
  for (int threads : {1, 2}) {
    // Sessions built once; the run includes the engine's own per-run overhead.
    auto session_of = [&](const std::string& op, int inputs, ir::Model& m) {
      m.set_opset("", 17);
      std::vector<ir::Value*> ins;
      for (int i = 0; i < inputs; ++i) {
        ins.push_back(m.graph->add_value("in" + std::to_string(i)));
        m.graph->add_input(ins.back());
      }
      ir::Value* y = m.graph->add_value("y");
      m.graph->add_node(op, ins, {y});
      m.graph->add_output(y);
      SessionOptions o;
      o.threads = threads;
      return std::make_unique<Session>(m, o);
    };
    std::string line = "[1,64,112,112] float, " + std::to_string(threads) + " thread(s), ms:";
    // op, second input (none, same shape, per channel)
    const std::vector<std::pair<std::string, int>> ops = {
        {"Add", 1}, {"Mul", 2}, {"Max", 1}, {"PRelu", 2}, {"Less", 1}, {"Relu", 0}, {"LeakyRelu", 0},
        {"Clip", 0}, {"HardSwish", 0}, {"HardSigmoid", 0}, {"Sigmoid", 0}, {"Tanh", 0}, {"Exp", 0}, {"Erf", 0}};
    for (const auto& [op, second] : ops) {
      ir::Model m;
      auto session = session_of(op, second ? 2 : 1, m);
      std::map<std::string, Tensor> feeds = {{"in0", a}};
      if (second == 1) feeds["in1"] = b;
      if (second == 2) feeds["in1"] = f32({64, 1, 1}, iota_floats(64, 0.1f));
      char buf[96];
      std::snprintf(buf, sizeof(buf), " %s%s %.3f,", op.c_str(), second == 2 ? "(per-channel)" : "",
                    time_ms([&] { session->run(feeds); }));
      line += buf;
    }
    std::cout << line << " memcpy of one tensor " << copy << "\n";
  }
}

}  // namespace
}  // namespace onnxptq::engine
