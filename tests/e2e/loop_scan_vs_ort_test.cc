// Loop and Scan against ONNX Runtime (npm onnxruntime-node): one-node models over what the ONNX
// operator docs define (Loop with a trip count, a condition or both, values carried, scan outputs
// and values read from the enclosing graph; Scan with several scan inputs on other axes, read
// backwards, scan outputs on other axes and written backwards, and opset 8's batched form with
// sequence lengths), and a real export of Debian's python3-torch (tests/models/export_loop.py):
// a torch.jit.script loop, which torch writes as a Loop carrying a tensor and a sequence
// (SequenceEmpty, SequenceInsert, ConcatFromSequence). Every output must agree within 1e-4 of
// its range, the criterion of engine_vs_ort_test.cc.
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <random>

#include "engine/kernel.h"
#include "ir/model.h"
#include "support/export_models.h"
#include "support/model_run.h"
#include "support/test_paths.h"

namespace onnxptq {
namespace {

namespace fs = std::filesystem;
using ir::DataType;
using ir::Tensor;
using testing::kSource;

void expect_engine_matches_ort(const fs::path& file, const std::map<std::string, Tensor>& feeds,
                               const std::string& label) {
  fs::path dir = file.parent_path() / "ort";
  ir::Model model = ir::load_model(file);
  std::vector<Tensor> ort = testing::ort_run(file, model, feeds, dir);
  std::vector<Tensor> own = testing::run_model(model, feeds);
  ASSERT_EQ(ort.size(), own.size());
  for (size_t i = 0; i < own.size(); ++i) {
    ASSERT_EQ(ort[i].dims(), own[i].dims()) << label << " output " << i;
    double error = testing::range_relative_error(ort[i], own[i]);
    std::cout << label << " output " << model.graph->outputs()[i]->name() << ": max abs diff / range = " << error
              << "\n";
    EXPECT_LE(error, 1e-4) << label << " output " << i;
  }
}

Tensor random_tensor(std::vector<int64_t> dims, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.5f, 1.5f);
  std::vector<float> v(static_cast<size_t>(ir::element_count(dims)));
  for (float& e : v) e = u(rng);
  return Tensor::from_values<float>(std::move(dims), v);
}

Tensor int64_scalar(int64_t v) { return Tensor::from_values<int64_t>({}, std::vector<int64_t>{v}); }

Tensor bool_scalar(bool v) {
  Tensor t(DataType::Bool, {});
  t.mutable_values<bool>()[0] = v;
  return t;
}

// Builds a model of one node with a body graph: inputs fed or left empty, outputs typed.
struct OneNode {
  ir::Model model;
  std::map<std::string, Tensor> feeds;
  std::vector<ir::Value*> node_inputs;

  explicit OneNode(int64_t opset) { model.set_opset("", opset); }
  ir::Graph& g() { return *model.graph; }
  ir::Value* feed(const std::string& name, Tensor t) {
    ir::Value* v = g().add_value(name);
    v->type = ir::ValueType::tensor(t.dtype(), t.dims());
    g().add_input(v);
    feeds[name] = std::move(t);
    return v;
  }
  void input(const std::string& name, Tensor t) { node_inputs.push_back(feed(name, std::move(t))); }
  void omitted() { node_inputs.push_back(nullptr); }
};

ir::Value* body_input(ir::Graph& body, const std::string& name, DataType type, std::vector<int64_t> dims) {
  ir::Value* v = body.add_value(name);
  v->type = ir::ValueType::tensor(type, dims);
  body.add_input(v);
  return v;
}

ir::Value* body_node(ir::Graph& body, const std::string& op, std::vector<ir::Value*> in, const std::string& out) {
  ir::Value* v = body.add_value(out);
  body.add_node(op, std::move(in), {v});
  return v;
}

ir::Node* add_with_body(OneNode& m, const std::string& op, std::unique_ptr<ir::Graph> body,
                        const std::vector<std::string>& outputs) {
  std::vector<ir::Value*> outs;
  for (const std::string& name : outputs) outs.push_back(m.g().add_value(name));
  ir::Node* n = m.g().add_node(op, m.node_inputs, outs, "n0");
  ir::Attribute a;
  a.name = "body";
  a.type = ir::AttrType::Graph;
  a.g = std::move(body);
  n->attributes.push_back(std::move(a));
  for (ir::Value* v : outs) m.g().add_output(v);
  return n;
}

// ---- Loop

struct LoopCase {
  std::string label;
  bool trip_count;
  bool cond;
  int64_t m = 6;
  float limit = 2.5f;  // max(v) that ends the loop through the body's condition
};

// Carries v [2,3] through v = v * 0.9 + w * i (w read from the enclosing graph), stops when
// max(v) reaches `limit` (the body's condition, which ends the loop in ONNX Runtime also when the
// cond input is left out) or after M, and scans each v out: [iterations, 2, 3].
OneNode loop_model(const LoopCase& c) {
  std::mt19937 rng(3);
  OneNode m(16);
  if (c.trip_count)
    m.input("M", int64_scalar(c.m));
  else
    m.omitted();
  if (c.cond)
    m.input("cond", bool_scalar(true));
  else
    m.omitted();
  m.input("v0", random_tensor({2, 3}, rng));
  ir::Value* w = m.feed("w", random_tensor({2, 3}, rng));
  ir::Value* limit = m.feed("limit", Tensor::from_values<float>({}, std::vector<float>{c.limit}));

  auto body = std::make_unique<ir::Graph>(&m.g());
  body->name = "loop_body";
  ir::Value* i = body_input(*body, "i", DataType::Int64, {});
  body_input(*body, "cond_in", DataType::Bool, {});
  ir::Value* v = body_input(*body, "v", DataType::Float, {2, 3});
  ir::Value* decay = body->add_value("decay");
  body->set_initializer(decay, Tensor::from_values<float>({}, std::vector<float>{0.9f}));
  ir::Value* i_float = body->add_value("i_float");
  body->add_node("Cast", {i}, {i_float})->set_attribute(ir::Attribute::of_int("to", 1));
  ir::Value* v_out = body_node(
      *body, "Add", {body_node(*body, "Mul", {v, decay}, "vd"), body_node(*body, "Mul", {w, i_float}, "wi")}, "v_out");
  ir::Value* peak = body->add_value("peak");
  ir::Node* reduce = body->add_node("ReduceMax", {v_out}, {peak});
  reduce->set_attribute(ir::Attribute::of_int("keepdims", 0));
  ir::Value* cond_out = body_node(*body, "Less", {peak, limit}, "cond_out");
  ir::Value* scan_out = body_node(*body, "Identity", {v_out}, "scan_out");
  cond_out->type = ir::ValueType::tensor(DataType::Bool, {});
  v_out->type = ir::ValueType::tensor(DataType::Float, {2, 3});
  scan_out->type = ir::ValueType::tensor(DataType::Float, {2, 3});
  for (ir::Value* out : {cond_out, v_out, scan_out}) body->add_output(out);
  add_with_body(m, "Loop", std::move(body), {"v_final", "vs"});
  return m;
}

class LoopVsOrt : public ::testing::TestWithParam<LoopCase> {};

TEST_P(LoopVsOrt, SameOutputs) {
  const LoopCase& c = GetParam();
  fs::path dir = testing::fresh_dir("loop_" + c.label);
  OneNode m = loop_model(c);
  ir::save_model(m.model, dir / "model.onnx");
  expect_engine_matches_ort(dir / "model.onnx", m.feeds, c.label);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(TripCountAndCondition, LoopVsOrt,
                         ::testing::Values(LoopCase{"trip_count_and_cond", true, true},
                                           LoopCase{"trip_count_only", true, false}, LoopCase{"cond_only", false, true},
                                           LoopCase{"zero_trips", true, true, 0},
                                           LoopCase{"trip_count_ends_it", true, true, 4, 100.0f}),
                         [](const auto& info) { return info.param.label; });

// ---- Scan

// Opset 16: a state s [3,4] and two scan inputs, x [3,5,4] along axis 1 and r [5,2] along axis 0
// read backwards; s = tanh(s + x_t * w) (w from the enclosing graph); scan outputs s * x_t
// stacked on axis 2 written backwards ([3,4,5]), and r_t + r_t stacked on axis -1 ([2,5]).
TEST(ScanVsOrt, AxesAndDirections) {
  std::mt19937 rng(5);
  OneNode m(16);
  m.input("s0", random_tensor({3, 4}, rng));
  m.input("x", random_tensor({3, 5, 4}, rng));
  m.input("r", random_tensor({5, 2}, rng));
  ir::Value* w = m.feed("w", random_tensor({4}, rng));
  auto body = std::make_unique<ir::Graph>(&m.g());
  body->name = "scan_body";
  ir::Value* s = body_input(*body, "s", DataType::Float, {3, 4});
  ir::Value* xt = body_input(*body, "xt", DataType::Float, {3, 4});
  ir::Value* rt = body_input(*body, "rt", DataType::Float, {2});
  ir::Value* s_out =
      body_node(*body, "Tanh", {body_node(*body, "Add", {s, body_node(*body, "Mul", {xt, w}, "xw")}, "sum")}, "s_out");
  ir::Value* y = body_node(*body, "Mul", {s_out, xt}, "y");
  ir::Value* z = body_node(*body, "Add", {rt, rt}, "z");
  s_out->type = ir::ValueType::tensor(DataType::Float, {3, 4});
  y->type = ir::ValueType::tensor(DataType::Float, {3, 4});
  z->type = ir::ValueType::tensor(DataType::Float, {2});
  for (ir::Value* out : {s_out, y, z}) body->add_output(out);
  ir::Node* n = add_with_body(m, "Scan", std::move(body), {"s_final", "ys", "zs"});
  n->set_attribute(ir::Attribute::of_int("num_scan_inputs", 2));
  n->set_attribute(ir::Attribute::of_ints("scan_input_axes", {1, 0}));
  n->set_attribute(ir::Attribute::of_ints("scan_input_directions", {0, 1}));
  n->set_attribute(ir::Attribute::of_ints("scan_output_axes", {2, -1}));
  n->set_attribute(ir::Attribute::of_ints("scan_output_directions", {1, 0}));
  fs::path dir = testing::fresh_dir("scan_axes");
  ir::save_model(m.model, dir / "model.onnx");
  expect_engine_matches_ort(dir / "model.onnx", m.feeds, "scan_axes");
  fs::remove_all(dir);
}

// Opset 8: a batch axis in front of everything, sequence lengths per batch entry (one shorter, its
// scan output padded), the scan input read backwards.
TEST(ScanVsOrt, Opset8BatchesWithSequenceLengths) {
  std::mt19937 rng(6);
  OneNode m(8);
  m.input("lens", Tensor::from_values<int64_t>({2}, std::vector<int64_t>{4, 2}));
  m.input("s0", random_tensor({2, 3}, rng));
  m.input("x", random_tensor({2, 4, 3}, rng));
  auto body = std::make_unique<ir::Graph>(&m.g());
  body->name = "scan_body";
  ir::Value* s = body_input(*body, "s", DataType::Float, {3});
  ir::Value* xt = body_input(*body, "xt", DataType::Float, {3});
  ir::Value* s_out = body_node(*body, "Add", {s, xt}, "s_out");
  ir::Value* y = body_node(*body, "Mul", {s_out, xt}, "y");
  s_out->type = ir::ValueType::tensor(DataType::Float, {3});
  y->type = ir::ValueType::tensor(DataType::Float, {3});
  for (ir::Value* out : {s_out, y}) body->add_output(out);
  ir::Node* n = add_with_body(m, "Scan", std::move(body), {"s_final", "ys"});
  n->set_attribute(ir::Attribute::of_int("num_scan_inputs", 1));
  n->set_attribute(ir::Attribute::of_ints("directions", {1}));
  fs::path dir = testing::fresh_dir("scan_opset8");
  ir::save_model(m.model, dir / "model.onnx");
  expect_engine_matches_ort(dir / "model.onnx", m.feeds, "scan_opset8");
  fs::remove_all(dir);
}

// ---- a torch.jit.script loop

TEST(LoopModelVsOrt, TorchScriptLoop) {
  fs::path dir = testing::fresh_dir("loop_model");
  fs::path file = dir / "loop.onnx";
  std::string command = "/usr/bin/python3 " + (kSource / "tests/models/export_loop.py").string() + " " + file.string() +
                        " > /dev/null 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  ir::Model model = ir::load_model(file);
  // The loop is an ONNX Loop carrying a sequence, and every op of the export has a kernel.
  EXPECT_EQ(testing::count_ops(model, "Loop"), 1u);
  EXPECT_EQ(testing::count_ops(model, "ConcatFromSequence"), 1u);
  for (const auto& n : model.graph->nodes())
    EXPECT_NE(engine::KernelRegistry::instance().find(n->domain, n->op_type, model.opset(n->domain)), nullptr)
        << n->op_type;
  std::mt19937 rng(9);
  for (int64_t steps : {5, 1, 9}) {
    std::map<std::string, Tensor> feeds = {{"x", random_tensor({2, 16}, rng)}, {"steps", int64_scalar(steps)}};
    expect_engine_matches_ort(file, feeds, "torch_loop_" + std::to_string(steps));
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace onnxptq
