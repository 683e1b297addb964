// Finite extrema as the engine takes them (in the kernels that write a tensor, or by reading it
// again), against a plain loop over the finite values of the tensor each observer sees.
#include "engine/extrema.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "engine/kernel.h"
#include "engine/session.h"

namespace onnxptq::engine {
namespace {

using ir::DataType;

Extrema plain_extrema(const Tensor& t) {
  Tensor f = as_float32(t);
  Extrema e;
  for (float v : f.values<float>())
    if (std::isfinite(v)) e.add({v, v});
    else
      e.non_finite = true;
  return e;
}

// n values of mixed signs with NaN and infinities at random places (about one in 500 when `bad`).
std::vector<float> values_with_non_finite(size_t n, unsigned seed, bool bad) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-100, 100);
  std::vector<float> x(n);
  for (float& v : x) v = u(rng);
  if (bad)
    for (size_t i = rng() % 500; i < n; i += 1 + rng() % 1000) x[i] = std::array{NAN, INFINITY, -INFINITY}[rng() % 3];
  return x;
}

TEST(FiniteExtrema, AnyLengthAndThreadCountGiveThePlainLoopsExtrema) {
  for (size_t n : {0, 1, 15, 63, 64, 65, 200, 4097, 100000})
    for (bool bad : {false, true}) {
      std::vector<float> x = values_with_non_finite(n, static_cast<unsigned>(n), bad);
      Extrema want = plain_extrema(Tensor::from_values<float>({static_cast<int64_t>(n)}, x));
      for (int threads : {1, 2, 3}) {
        Extrema got = threads == 1 ? finite_extrema(x.data(), n) : finite_extrema(x.data(), n, threads);
        EXPECT_EQ(got.lo, want.lo) << n << " values, " << threads << " threads, non-finite " << bad;
        EXPECT_EQ(got.hi, want.hi) << n << " values, " << threads << " threads, non-finite " << bad;
        EXPECT_EQ(got.non_finite, want.non_finite) << n << " values, " << threads << " threads";
        EXPECT_EQ(got.abs_max(), n ? std::max(std::fabs(want.lo), std::fabs(want.hi)) : 0.0f) << n << " values";
      }
    }
  std::vector<float> none = {NAN, INFINITY, -INFINITY, NAN};
  EXPECT_TRUE(finite_extrema(none.data(), none.size()).empty());
  EXPECT_EQ(finite_extrema(none.data(), none.size()).abs_max(), 0.0f);
  for (size_t at : {0, 70, 199}) {  // a NaN alone (no infinity) is noted too, in the lanes or the tail
    std::vector<float> x(200, 1.5f);
    x[at] = NAN;
    EXPECT_TRUE(finite_extrema(x.data(), x.size()).non_finite) << at;
  }
}

// x [1,8,100,100] (two chunks of work on two threads): Add of a per-channel constant, Mul by
// itself, Clip, a Transpose (no kernel-taken extrema), a float16 branch, and a Relu nobody
// asked to see.
ir::Model mixed_model() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  auto value = [&](const std::string& name) { return g.add_value(name); };
  ir::Value* x = value("x");
  x->type = ir::ValueType::tensor(DataType::Float, {1, 8, 100, 100});
  g.add_input(x);
  ir::Value* c = value("c");
  std::vector<float> per_channel = {-3, 0.5f, 2, 7, -1, 0, 4, 1e-3f};
  g.set_initializer(c, Tensor::from_values<float>({8, 1, 1}, per_channel));
  ir::Value *lo = value("lo"), *hi = value("hi");
  g.set_initializer(lo, Tensor::from_values<float>({}, std::vector<float>{-50}));
  g.set_initializer(hi, Tensor::from_values<float>({}, std::vector<float>{2000}));
  g.add_node("Add", {x, c}, {value("added")}, "add");
  g.add_node("Mul", {g.find_value("added"), g.find_value("added")}, {value("squared")}, "mul");
  g.add_node("Clip", {g.find_value("squared"), lo, hi}, {value("clipped")}, "clip");
  g.add_node("Relu", {g.find_value("clipped")}, {value("hidden")}, "relu");
  g.add_node("Transpose", {g.find_value("added")}, {value("moved")}, "transpose");
  ir::Node* cast = g.add_node("Cast", {g.find_value("added")}, {value("half")}, "cast");
  cast->attributes.push_back(ir::Attribute::of_int("to", static_cast<int64_t>(DataType::Float16)));
  g.add_node("Neg", {g.find_value("half")}, {value("half_neg")}, "neg");
  for (const char* out : {"hidden", "moved", "half_neg"}) g.add_output(g.find_value(out));
  return m;
}

TEST(Session, ExtremaObserverSeesTheFiniteExtremaOfEachVisibleFloatTensor) {
  ir::Model m = mixed_model();
  const std::set<std::string> visible = {"x", "added", "squared", "clipped", "moved", "half", "half_neg"};
  for (bool bad : {false, true})
    for (int threads : {1, 2}) {
      SessionOptions options;
      options.threads = threads;
      options.visible = {visible.begin(), visible.end()};
      Session s(m, options);
      std::vector<float> x = values_with_non_finite(80000, 7, bad);
      std::set<std::string> seen;
      ExtremaObserver observe = [&](const std::string& name, const Tensor& t, Extrema e) {
        seen.insert(name);
        Extrema want = plain_extrema(t);
        EXPECT_EQ(e.lo, want.lo) << name << ", " << threads << " threads, non-finite " << bad;
        EXPECT_EQ(e.hi, want.hi) << name << ", " << threads << " threads, non-finite " << bad;
        EXPECT_EQ(e.non_finite, want.non_finite) << name << ", " << threads << " threads";
      };
      RunHooks hooks;
      hooks.observe_extrema = &observe;
      s.run({{"x", Tensor::from_values<float>({1, 8, 100, 100}, x)}}, hooks);
      // "hidden" is not visible: an observer of extrema sees only what the session keeps visible.
      EXPECT_EQ(seen, visible);
    }
}

TEST(Session, ExtremaObserverSeesTransformedTensors) {
  ir::Model m = mixed_model();
  SessionOptions options;
  options.visible = {"added", "squared"};
  Session s(m, options);
  TensorTransform halve = [](const std::string& name, Tensor& t) {
    if (name != "squared") return;
    for (float& v : t.mutable_values<float>()) v *= 0.5f;
  };
  std::map<std::string, Extrema> got;
  ExtremaObserver observe = [&](const std::string& name, const Tensor& t, Extrema e) {
    got[name] = e;
    EXPECT_EQ(e.hi, plain_extrema(t).hi) << name;
  };
  RunHooks hooks;
  hooks.observe_extrema = &observe;
  hooks.transform = &halve;
  std::vector<float> x = values_with_non_finite(80000, 3, false);
  s.run({{"x", Tensor::from_values<float>({1, 8, 100, 100}, x)}}, hooks);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_FLOAT_EQ(got["squared"].hi,
                  0.5f * std::max(got["added"].lo * got["added"].lo, got["added"].hi * got["added"].hi));
}

}  // namespace
}  // namespace onnxptq::engine
