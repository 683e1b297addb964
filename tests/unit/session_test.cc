// The engine's Session: schedule, observers, transforms, constants, errors and concurrent runs,
// on graphs of Identity and If so the kernels under test are only the engine's own plumbing.
#include "engine/session.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <functional>
#include <thread>

#include "onnxptq/error.h"
#include "support/one_node.h"

namespace onnxptq::engine {
namespace {

using ir::DataType;

// x -> Identity -> a -> Identity -> y, plus w (an initializer) -> Identity -> wy.
ir::Model chain_model() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.add_value("x");
  x->type = ir::ValueType::tensor(DataType::Float, {3});
  ir::Value* a = g.add_value("a");
  ir::Value* y = g.add_value("y");
  ir::Value* w = g.add_value("w");
  ir::Value* wy = g.add_value("wy");
  g.set_initializer(w, Tensor::from_values<float>({2}, std::vector<float>{1.5f, -2.5f}));
  g.add_input(x);
  g.add_node("Identity", {a}, {y}, "second");  // out of order on purpose
  g.add_node("Identity", {x}, {a}, "first");
  g.add_node("Identity", {w}, {wy}, "weight");
  g.add_output(y);
  g.add_output(wy);
  return m;
}

std::map<std::string, Tensor> feed_x(std::vector<float> values) {
  return {{"x", Tensor::from_values<float>({3}, values)}};
}

TEST(Session, RunsInDependencyOrder) {
  ir::Model m = chain_model();
  Session s(m);
  auto out = s.run(feed_x({1, 2, 3}));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].values<float>()[2], 3.0f);
  EXPECT_EQ(out[1].values<float>()[1], -2.5f);
  ASSERT_EQ(s.inputs().size(), 1u);
  EXPECT_EQ(s.inputs()[0]->name(), "x");
}

TEST(Session, ObserverSeesEveryRunTimeTensorOnceInOrder) {
  ir::Model m = chain_model();
  Session s(m);
  std::vector<std::string> seen;
  TensorObserver observe = [&](const std::string& name, const Tensor&) { seen.push_back(name); };
  s.run(feed_x({1, 2, 3}), {&observe, nullptr});
  // "wy" depends on constants only: computed once when the session is built, not per run.
  EXPECT_EQ(seen, (std::vector<std::string>{"x", "a", "y"}));
}

TEST(Session, TransformReplacesATensorBeforeItsUsers) {
  ir::Model m = chain_model();
  Session s(m);
  TensorTransform round_a = [](const std::string& name, Tensor& t) {
    if (name != "a") return;
    for (float& v : t.mutable_values<float>()) v = std::round(v);
  };
  std::map<std::string, float> observed_first;
  TensorObserver observe = [&](const std::string& name, const Tensor& t) { observed_first[name] = t.values<float>()[0]; };
  auto feeds = feed_x({1.4f, 2.6f, -0.7f});
  auto out = s.run(feeds, {&observe, &round_a});
  EXPECT_EQ(out[0].values<float>()[0], 1.0f);
  EXPECT_EQ(out[0].values<float>()[1], 3.0f);
  EXPECT_EQ(observed_first["a"], 1.0f);                       // observers see the transformed tensor
  EXPECT_EQ(feeds["x"].values<float>()[0], 1.4f);             // the caller's input is not touched
  EXPECT_EQ(s.run(feeds)[0].values<float>()[0], 1.4f);        // hooks belong to one run
}

TEST(Session, ConstantTransformAppliesToWeightsOnceAndLeavesTheModelAlone) {
  ir::Model m = chain_model();
  int calls = 0;
  SessionOptions options;
  options.constant_transform = [&](const std::string& name, Tensor& t) {
    if (name != "w") return;
    ++calls;
    for (float& v : t.mutable_values<float>()) v *= 2;
  };
  Session s(m, options);
  auto out = s.run(feed_x({0, 0, 0}));
  out = s.run(feed_x({0, 0, 0}));
  EXPECT_EQ(out[1].values<float>()[0], 3.0f);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(m.graph->find_value("w")->initializer().values<float>()[0], 1.5f);
}

TEST(Session, ConcurrentRunsGiveTheirOwnResults) {
  ir::Model m = chain_model();
  Session s(m);
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        float v = static_cast<float>(t * 1000 + i);
        if (s.run(feed_x({v, v, v}))[0].values<float>()[1] != v) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

using testing::error_of;

TEST(Session, BadFeedsAreClearErrors) {
  ir::Model m = chain_model();
  Session s(m);
  EXPECT_EQ(error_of([&] { s.run({}); }), "missing input 'x' (float[3])");
  EXPECT_EQ(error_of([&] { s.run({{"x", Tensor(DataType::Float, {3})}, {"z", Tensor(DataType::Float, {1})}}); }),
            "the model has no input named 'z' (its inputs: x)");
  EXPECT_EQ(error_of([&] { s.run({{"x", Tensor(DataType::Int64, {3})}}); }), "input 'x': expected float, got int64");
  EXPECT_EQ(error_of([&] { s.run({{"x", Tensor(DataType::Float, {4})}}); }),
            "input 'x': expected shape float[3], got [4]");
}

TEST(Session, MissingKernelsNameTheNodeOpAndOpset) {
  ir::Model m = chain_model();
  ir::Graph& g = *m.graph;
  g.add_node("NoSuchOp", {g.find_value("y")}, {g.add_value("z")}, "mystery");
  EXPECT_EQ(error_of([&] { Session s(m); }), "node 'mystery' (NoSuchOp, opset 13): no kernel for this op");
  ir::Model custom = chain_model();
  custom.set_opset("com.example", 1);
  custom.graph->add_node("Thing", {custom.graph->find_value("y")}, {custom.graph->add_value("z")}, "t", "com.example");
  EXPECT_EQ(error_of([&] { Session s(custom); }), "node 't' (com.example.Thing, opset 1): no kernel for this op");
}

TEST(Session, IfRunsTheChosenBranchWithOuterValues) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* cond = g.add_value("cond");
  ir::Value* x = g.add_value("x");
  ir::Value* y = g.add_value("y");
  g.add_input(cond);
  g.add_input(x);
  ir::Node* if_node = g.add_node("If", {cond}, {y}, "if");
  for (const char* branch : {"then_branch", "else_branch"}) {
    ir::Attribute a;
    a.name = branch;
    a.type = ir::AttrType::Graph;
    a.g = std::make_unique<ir::Graph>(&g);
    ir::Value* out = a.g->add_value(std::string(branch) + "_out");
    if (std::string(branch) == "then_branch") {
      a.g->add_node("Identity", {x}, {out});  // reads x from the enclosing graph
    } else {
      ir::Node* c = a.g->add_node("Constant", {}, {out});
      c->set_attribute(ir::Attribute::of_tensor("value", Tensor::from_values<float>({1}, std::vector<float>{-1})));
    }
    a.g->add_output(out);
    if_node->attributes.push_back(std::move(a));
  }
  g.add_output(y);
  Session s(m);
  Tensor yes(DataType::Bool, {});
  yes.mutable_values<bool>()[0] = true;
  Tensor no(DataType::Bool, {});
  Tensor x_value = Tensor::from_values<float>({1}, std::vector<float>{42});
  EXPECT_EQ(s.run({{"cond", yes}, {"x", x_value}})[0].values<float>()[0], 42.0f);
  EXPECT_EQ(s.run({{"cond", no}, {"x", x_value}})[0].values<float>()[0], -1.0f);
}

}  // namespace
}  // namespace onnxptq::engine
