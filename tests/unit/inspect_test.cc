#include <gtest/gtest.h>

#include "tools/inspect.h"

namespace onnxptq::tools {
namespace {

TEST(Inspect, CountsNodesOpTypesAndParameters) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.add_value("x");
  x->type = ir::ValueType::tensor(ir::DataType::Float, {1, 3});
  x->type.shape[0] = ir::Dim::symbol("N");
  g.add_input(x);
  ir::Value* w = g.add_value("w");
  g.set_initializer(w, ir::Tensor(ir::DataType::Float, {3, 4}));
  ir::Value* c = g.add_value("c");
  ir::Node* constant = g.add_node("Constant", {}, {c}, "const");
  constant->set_attribute(ir::Attribute::of_tensor("value", ir::Tensor(ir::DataType::Int8, {5})));
  ir::Value* a = g.add_value("a");
  ir::Value* b = g.add_value("b");
  ir::Value* y = g.add_value("y");
  g.add_node("MatMul", {x, w}, {a}, "mm");
  g.add_node("Relu", {a}, {b}, "r1");
  g.add_node("Relu", {b}, {y}, "r2");
  g.add_output(y);

  auto s = inspect_model(m);
  EXPECT_EQ(s["nodes"], 4);
  EXPECT_EQ(s["op_types"]["Relu"], 2);
  EXPECT_EQ(s["op_types"].begin().key(), "Relu");  // most frequent first
  EXPECT_EQ(s["initializers"], 1);
  EXPECT_EQ(s["constants"], 1);
  EXPECT_EQ(s["parameters"], 17);
  EXPECT_EQ(s["parameter_bytes"], 53);
  EXPECT_EQ(s["parameters_by_type"]["int8"], 5);
  EXPECT_EQ(s["inputs"][0]["shape"], nlohmann::ordered_json::parse(R"(["N", 3])"));
  EXPECT_EQ(s["outputs"][0]["shape"], nullptr);  // rank unknown
  std::string text = format_inspection(s);
  EXPECT_NE(text.find("17 in 1 initializers and 1 constants, 53 B (float 12, int8 5)"), std::string::npos) << text;
  EXPECT_NE(text.find("x  float[N,3]"), std::string::npos) << text;
}

}  // namespace
}  // namespace onnxptq::tools
