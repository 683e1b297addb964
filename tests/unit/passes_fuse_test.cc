// The passes that fuse subgraphs into one op: fuse_matmul_add_gemm, fuse_layer_norm, fuse_gelu.
// Each runs on a small built graph; the engine's outputs before and after must agree and the
// graph must have changed as the pass claims (and not where the fusion would be wrong).
#include <gtest/gtest.h>

#include <cmath>

#include "passes/optimize.h"
#include "support/pass_check.h"

namespace onnxptq::passes {
namespace {

using ir::DataType;
using ir::Tensor;
using testing::add_float_value;
using testing::add_random_initializer;
using testing::count_ops;
using testing::output;
using testing::relative_diff;
using testing::run_model;
using testing::run_pass_checked;
using testing::scalar;

// a [N,5] x B [5,7] + C [7] becomes Gemm; A of rank 3, a C of [3,7], and a MatMul whose output
// is read twice stay.
TEST(FuseMatMulAddGemm, FusesOnlyWhereGemmMeansTheSame) {
  ir::Model m;
  m.set_opset("", 13);
  ir::Graph& g = *m.graph;
  ir::Value* a = add_float_value(g, "a", {-1, 5});
  ir::Value* a3 = add_float_value(g, "a3", {2, 3, 5});
  ir::Value* a2 = add_float_value(g, "a2", {3, 5});
  for (ir::Value* v : {a, a3, a2}) g.add_input(v);
  ir::Value* b = add_random_initializer(g, "b", {5, 7}, 1);
  ir::Value* c = add_random_initializer(g, "c", {7}, 2);
  ir::Value *mm = g.add_value("mm"), *mm3 = g.add_value("mm3"), *mm_full = g.add_value("mm_full"),
            *mm_twice = output(g, "mm_twice");
  g.add_node("MatMul", {a, b}, {mm}, "matmul");
  g.add_node("Add", {c, mm}, {output(g, "y")});
  g.add_node("MatMul", {a3, b}, {mm3});
  g.add_node("Add", {mm3, c}, {output(g, "y3")});
  g.add_node("MatMul", {a2, b}, {mm_full});
  g.add_node("Add", {mm_full, add_random_initializer(g, "c_full", {3, 7}, 3)}, {output(g, "y_full")});
  g.add_node("MatMul", {a2, b}, {mm_twice});
  g.add_node("Add", {mm_twice, c}, {output(g, "y_twice")});
  ir::Model after = run_pass_checked(m, fuse_matmul_add_gemm, true, 5, {{"a", {4, 5}}});
  EXPECT_EQ(count_ops(after, "Gemm"), 1u);
  EXPECT_EQ(count_ops(after, "MatMul"), 3u);
  ir::Node* gemm = after.graph->find_value("y")->producer();
  EXPECT_EQ(gemm->op_type, "Gemm");
  EXPECT_EQ(gemm->name, "matmul");
  EXPECT_EQ(after.graph->find_value("mm"), nullptr);
}

// The decomposed layer norm as torch exports it, of x [2,3,8]. affine: Mul gamma [8] then Add beta [8]; axis:
// ReduceMean axes (-1 or another).
ir::Model layer_norm_model(int64_t opset, bool affine, int64_t axis) {
  ir::Model m;
  m.set_opset("", opset);
  ir::Graph& g = *m.graph;
  ir::Value* x = add_float_value(g, "x", {2, 3, 8});
  g.add_input(x);
  auto v = [&](const std::string& name) { return g.add_value(name); };
  auto reduce_mean = [&](ir::Value* in, ir::Value* out) {
    ir::Node* n = g.add_node("ReduceMean", {in}, {out});
    n->set_attribute(ir::Attribute::of_ints("axes", {axis}));
  };
  reduce_mean(x, v("mean"));
  g.add_node("Sub", {x, g.find_value("mean")}, {v("d")});
  g.add_node("Pow", {g.find_value("d"), scalar(g, "two", 2.0f)}, {v("sq")});
  reduce_mean(g.find_value("sq"), v("var"));
  g.add_node("Add", {g.find_value("var"), scalar(g, "eps", 1e-5f)}, {v("var_eps")});
  g.add_node("Sqrt", {g.find_value("var_eps")}, {v("std")});
  if (!affine) {
    g.add_node("Div", {g.find_value("d"), g.find_value("std")}, {output(g, "y")});
    return m;
  }
  g.add_node("Div", {g.find_value("d"), g.find_value("std")}, {v("n")});
  g.add_node("Mul", {g.find_value("n"), add_random_initializer(g, "gamma", {8}, 7, 0.5f, 1.5f)}, {v("scaled")});
  g.add_node("Add", {add_random_initializer(g, "beta", {8}, 8), g.find_value("scaled")}, {output(g, "y")});
  return m;
}

TEST(FuseLayerNorm, FusesDecomposedLayerNormAtOpset17) {
  ir::Model after = run_pass_checked(layer_norm_model(17, true, -1), fuse_layer_norm, true, 5);
  EXPECT_EQ(after.graph->node_count(), 1u);
  ir::Node* ln = after.graph->find_value("y")->producer();
  ASSERT_EQ(ln->op_type, "LayerNormalization");
  EXPECT_EQ(ln->attr_float("epsilon", 0), 1e-5f);
  EXPECT_EQ(ln->inputs().size(), 3u);
}

TEST(FuseLayerNorm, WithoutScaleAndBiasTakesTheSizeFromTheShape) {
  ir::Model after = run_pass_checked(layer_norm_model(17, false, 2), fuse_layer_norm, true, 5);
  EXPECT_EQ(after.graph->node_count(), 1u);
  ir::Node* ln = after.graph->find_value("y")->producer();
  ASSERT_EQ(ln->op_type, "LayerNormalization");
  EXPECT_EQ(ln->input(1)->initializer().dims(), (std::vector<int64_t>{8}));
}

TEST(FuseLayerNorm, LeavesOtherAxesAndOlderOpsets) {
  run_pass_checked(layer_norm_model(17, true, 1), fuse_layer_norm, false, 5);
  run_pass_checked(layer_norm_model(13, true, -1), fuse_layer_norm, false, 5);
}

// x * 0.5 * (1 + erf(x / sqrt 2)) in torch's order, and (x * 0.5) * (1 + erf(x * (1/sqrt 2))).
ir::Model gelu_model(int64_t opset) {
  ir::Model m;
  m.set_opset("", opset);
  ir::Graph& g = *m.graph;
  ir::Value* x = add_float_value(g, "x", {2, 16});
  g.add_input(x);
  auto v = [&](const std::string& name) { return g.add_value(name); };
  g.add_node("Div", {x, scalar(g, "sqrt2", std::sqrt(2.0f))}, {v("u")});
  g.add_node("Erf", {g.find_value("u")}, {v("e")});
  g.add_node("Add", {g.find_value("e"), scalar(g, "one", 1.0f)}, {v("e1")});
  g.add_node("Mul", {x, g.find_value("e1")}, {v("xe")});
  g.add_node("Mul", {g.find_value("xe"), scalar(g, "half", 0.5f)}, {output(g, "y")});
  g.add_node("Mul", {x, scalar(g, "rsqrt2", std::sqrt(0.5f))}, {v("u2")});
  g.add_node("Erf", {g.find_value("u2")}, {v("e2")});
  g.add_node("Add", {g.find_value("one"), g.find_value("e2")}, {v("e21")});
  g.add_node("Mul", {x, g.find_value("half")}, {v("xh")});
  g.add_node("Mul", {g.find_value("xh"), g.find_value("e21")}, {output(g, "y2")});
  return m;
}

TEST(FuseGelu, FusesBothOrdersAtOpset20) {
  ir::Model after = run_pass_checked(gelu_model(20), fuse_gelu, true, 5);
  EXPECT_EQ(after.graph->node_count(), 2u);
  EXPECT_EQ(count_ops(after, "Gelu"), 2u);
  EXPECT_EQ(after.graph->find_value("y")->producer()->op_type, "Gelu");
  EXPECT_EQ(after.graph->find_value("y2")->producer()->op_type, "Gelu");
}

TEST(FuseGelu, NotBeforeOpset20) { run_pass_checked(gelu_model(17), fuse_gelu, false, 5); }

}  // namespace
}  // namespace onnxptq::passes
