// The quantization plan on tiny graphs: which tensors each op marks, by the rules of ORT's QDQ
// quantizer (ONNX Runtime's quantization/qdq_quantizer.py and operators/), and the errors of bad
// options.
#include "quant/plan.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "onnxptq/error.h"
#include "quant/export.h"
#include "support/export_models.h"

namespace onnxptq::quant {
namespace {

using ir::DataType;

// x -> Conv(w, b) -> c -> Relu -> r -> MaxPool -> y (graph output)
ir::Model conv_relu_pool() {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* x = g.add_value("x");
  x->type = ir::ValueType::tensor(DataType::Float, {1, 2, 4, 4});
  g.add_input(x);
  ir::Value* w = g.add_value("w");
  g.set_initializer(w, ir::Tensor::from_values<float>({3, 2, 1, 1}, std::vector<float>{1, -2, 0.5f, 0.25f, -1, 3}));
  ir::Value* b = g.add_value("b");
  g.set_initializer(b, ir::Tensor::from_values<float>({3}, std::vector<float>{0.1f, -0.2f, 0.3f}));
  ir::Value* c = g.add_value("c");
  ir::Value* r = g.add_value("r");
  ir::Value* y = g.add_value("y");
  g.add_node("Conv", {x, w, b}, {c}, "conv");
  g.add_node("Relu", {c}, {r}, "relu");
  ir::Node* pool = g.add_node("MaxPool", {r}, {y}, "pool");
  pool->set_attribute(ir::Attribute::of_ints("kernel_shape", {2, 2}));
  g.add_output(y);
  return m;
}

TEST(Plan, AsymmetricReluIsRemovedAndItsProducerTakesItsOutput) {
  ir::Model m = conv_relu_pool();
  QuantConfig c;
  c.calibrate_method = calib::Method::MinMax;
  c.activation_type = DataType::UInt8;
  Plan p = make_plan(m, c, testing::all_float(m));
  EXPECT_EQ(p.find("c"), nullptr);  // the Relu goes: nothing quantizes the Conv's own output
  EXPECT_EQ(p.removed_activations, std::set<std::string>{"r"});
  ASSERT_TRUE(p.find("w") && p.find("b") && p.find("r") && p.find("y"));
  EXPECT_EQ(p.find("w")->role, Role::Weight);
  EXPECT_EQ(p.find("w")->type, DataType::Int8);
  EXPECT_EQ(p.find("b")->role, Role::Bias);
  EXPECT_EQ(p.find("y")->shared_from, "r");  // MaxPool keeps its input's parameters
  EXPECT_EQ(p.tensors_to_calibrate(), (std::vector<std::string>{"x", "r"}));

  // Exported: no Relu, the Conv writes r, and y keeps its name through a DequantizeLinear.
  calib::CalibrationResult ranges;
  ranges.ranges["x"].lo = -1;
  ranges.ranges["x"].hi = 1;
  ranges.ranges["r"].hi = 6;
  assign_parameters(p, m, c, ranges);
  ir::Model q = export_qdq(m, p, c);
  int relus = 0, dqs = 0;
  for (const auto& n : q.graph->nodes()) {
    relus += n->op_type == "Relu";
    dqs += n->op_type == "DequantizeLinear";
  }
  EXPECT_EQ(relus, 0);
  EXPECT_EQ(dqs, 5);  // x, r, y, w, b
  EXPECT_EQ(q.graph->find_value("r")->producer()->op_type, "Conv");
  EXPECT_EQ(q.graph->outputs()[0]->name(), "y");
  EXPECT_EQ(q.graph->outputs()[0]->producer()->op_type, "DequantizeLinear");
  EXPECT_EQ(p.find("b")->data->dtype(), DataType::Int32);
  // bias scale = s_x * s_w: s_x = 2/255 (asymmetric uint8 over [-1, 1]), s_w = 3/127 (symmetric int8)
  EXPECT_NEAR(p.find("b")->params[0].scale, (2.0 / 255) * (3.0 / 127), 1e-9);
}

TEST(Plan, SymmetricReluStaysAndItsInputTakesItsRange) {
  ir::Model m = conv_relu_pool();
  QuantConfig c;
  c.calibrate_method = calib::Method::MinMax;
  c.activation_symmetric = true;
  Plan p = make_plan(m, c, testing::all_float(m));
  ASSERT_NE(p.find("c"), nullptr);
  EXPECT_TRUE(p.removed_activations.empty());
  EXPECT_EQ(p.find("c")->range_from, "r");  // ORT's adjust_tensor_ranges: the single-use input takes the Relu's range
  EXPECT_EQ(p.tensors_to_calibrate(), (std::vector<std::string>{"x", "r"}));
}

// Asymmetric activations, but ranges calibrated symmetric (the power-of-two methods' and
// Percentile's default, or CalibTensorRangeSymmetric): quantizing r would not clip at 0, so
// removing the Relu would let negative values through. It stays.
TEST(Plan, ReluStaysWhenCalibratedRangesAreSymmetric) {
  ir::Model m = conv_relu_pool();
  for (calib::Method method : {calib::Method::MinMSE, calib::Method::NonOverflow, calib::Method::Percentile}) {
    QuantConfig c;
    c.calibrate_method = method;
    Plan p = make_plan(m, c, testing::all_float(m));
    EXPECT_TRUE(p.removed_activations.empty()) << calib::method_name(method);
    EXPECT_EQ(p.find("c")->range_from, "r");
  }
  QuantConfig c;
  c.calibrate_method = calib::Method::MinMax;
  c.calib.symmetric = true;
  EXPECT_TRUE(make_plan(m, c, testing::all_float(m)).removed_activations.empty());
  c.calibrate_method = calib::Method::MinMSE;
  c.calib.symmetric = false;  // asymmetric power-of-two ranges clip at 0: removed
  EXPECT_EQ(make_plan(m, c, testing::all_float(m)).removed_activations, std::set<std::string>{"r"});
}

TEST(Plan, SelectionAndBadOptions) {
  ir::Model m = conv_relu_pool();
  QuantConfig c;
  c.nodes_to_exclude = {"conv"};
  Plan p = make_plan(m, c, testing::all_float(m));
  EXPECT_EQ(p.float_nodes.at("conv"), "excluded");
  EXPECT_EQ(p.float_nodes.at("relu"), "its input is not quantized");
  EXPECT_EQ(p.find("w"), nullptr);

  c.nodes_to_exclude = {"no_such_node"};
  try {
    make_plan(m, c, testing::all_float(m));
    FAIL() << "an unknown node name was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "the model has no node named 'no_such_node' (in nodes_to_exclude)");
  }

  QuantConfig wide;
  wide.activation_type = DataType::Int32;
  EXPECT_THROW(check_config(wide), Error);
  wide.format = QuantFormat::VitisQDQ;
  EXPECT_NO_THROW(check_config(wide));
  EXPECT_THROW(parse_quant_type("QInt7"), Error);
  EXPECT_EQ(parse_quant_type("QuantType.QUInt8"), DataType::UInt8);
}

}  // namespace
}  // namespace onnxptq::quant
