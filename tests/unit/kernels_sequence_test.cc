// The sequence and optional ops on what the ONNX backend tests leave out: bad positions, types
// and kinds refused with one line naming the node (SequenceAt, SequenceErase, SequenceInsert,
// OptionalGetElement, a tensor op given a sequence, Session::run given or asked for a sequence),
// and SplitToSequence's and ConcatFromSequence's attributes on values worked out from the
// operator docs by hand.
#include <gtest/gtest.h>

#include "engine/session.h"
#include "support/one_node.h"

namespace onnxptq::engine {
namespace {

using testing::error_of;

// x [2,3] and y [2,3] (float graph inputs) -> SequenceConstruct "seq" -> the nodes `add` makes.
struct SeqModel {
  ir::Model model;
  ir::Graph& g;
  SeqModel() : g(*model.graph) {
    model.set_opset("", 17);
    for (const char* name : {"x", "y"}) {
      ir::Value* v = g.add_value(name);
      v->type = ir::ValueType::tensor(DataType::Float, {2, 3});
      g.add_input(v);
    }
    g.add_node("SequenceConstruct", {g.find_value("x"), g.find_value("y")}, {g.add_value("seq")}, "construct");
  }
  ir::Value* constant(const std::string& name, Tensor t) {
    ir::Value* v = g.add_value(name);
    g.set_initializer(v, std::move(t));
    return v;
  }
  // A node named after its output.
  ir::Value* node(const std::string& op, std::vector<ir::Value*> in, const std::string& out,
                  std::vector<ir::Attribute> attributes = {}) {
    ir::Value* v = g.add_value(out);
    ir::Node* n = g.add_node(op, std::move(in), {v}, out);
    for (ir::Attribute& a : attributes) n->set_attribute(std::move(a));
    return v;
  }
  std::vector<Value> run(ir::Value* output) {
    g.add_output(output);
    Session s(model);
    return s.run_values({{"x", Tensor::from_values<float>({2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6})},
                         {"y", Tensor::from_values<float>({2, 3}, std::vector<float>{7, 8, 9, 10, 11, 12})}});
  }
};

Tensor seq_i64(int64_t v) { return Tensor::from_values<int64_t>({}, std::vector<int64_t>{v}); }

TEST(SequenceKernels, PositionsOutOfRangeNameTheNodeAndTheRange) {
  {
    SeqModel m;
    ir::Value* at = m.node("SequenceAt", {m.g.find_value("seq"), m.constant("p", seq_i64(2))}, "at");
    EXPECT_EQ(error_of([&] { m.run(at); }),
              "node 'at' (SequenceAt, opset 17): position 2 is out of range [-2, 1] for a sequence of 2 tensors");
  }
  {
    SeqModel m;
    ir::Value* at = m.node("SequenceAt", {m.g.find_value("seq"), m.constant("p", seq_i64(-2))}, "at");
    EXPECT_EQ(m.run(at)[0].tensor().values<float>()[0], 1.0f);  // -2: the first of two
  }
  {
    SeqModel m;
    ir::Value* erased = m.node("SequenceErase", {m.g.find_value("seq"), m.constant("p", seq_i64(-3))}, "erase");
    EXPECT_EQ(
        error_of([&] { m.run(erased); }),
        "node 'erase' (SequenceErase, opset 17): position -3 is out of range [-2, 1] for a sequence of 2 tensors");
  }
  {
    SeqModel m;
    ir::Value* inserted =
        m.node("SequenceInsert", {m.g.find_value("seq"), m.g.find_value("x"), m.constant("p", seq_i64(3))}, "insert");
    EXPECT_EQ(
        error_of([&] { m.run(inserted); }),
        "node 'insert' (SequenceInsert, opset 17): position 3 is out of range [-2, 2] for a sequence of 2 tensors");
  }
  {
    SeqModel m;
    Tensor two_positions = Tensor::from_values<int64_t>({2}, std::vector<int64_t>{0, 1});
    ir::Value* at = m.node("SequenceAt", {m.g.find_value("seq"), m.constant("p", two_positions)}, "at");
    EXPECT_EQ(
        error_of([&] { m.run(at); }),
        "node 'at' (SequenceAt, opset 17): the position must be one int32 or int64 value, got a int64 tensor [2]");
  }
}

TEST(SequenceKernels, WrongTypesAndKindsAreOneLineErrors) {
  {
    SeqModel m;
    ir::Value* inserted = m.node("SequenceInsert", {m.g.find_value("seq"), m.constant("i", seq_i64(1))}, "insert");
    EXPECT_EQ(error_of([&] { m.run(inserted); }),
              "node 'insert' (SequenceInsert, opset 17): a int64 tensor cannot join a sequence of float tensors");
  }
  {
    SeqModel m;
    ir::Value* relu = m.node("Relu", {m.g.find_value("seq")}, "relu");
    EXPECT_EQ(error_of([&] { m.run(relu); }),
              "node 'relu' (Relu, opset 17): input 0 'seq' is a sequence of 2 float tensors, and the op takes tensors");
  }
  {
    SeqModel m;
    ir::Value* length = m.node("SequenceLength", {m.g.find_value("x")}, "length");
    EXPECT_EQ(error_of([&] { m.run(length); }),
              "node 'length' (SequenceLength, opset 17): expected a sequence, got a float tensor [2,3]");
  }
  {
    SeqModel m;
    ir::Value* empty = m.node("Optional", {}, "empty");
    ir::Value* got = m.node("OptionalGetElement", {empty}, "get");
    EXPECT_EQ(error_of([&] { m.run(got); }),
              "node 'get' (OptionalGetElement, opset 17): the optional input is empty: there is no element to get");
  }
  {
    SeqModel m;
    ir::Value* seq = m.g.find_value("seq");
    m.g.add_output(seq);
    Session s(m.model);
    Tensor x = Tensor::from_values<float>({2, 3}, std::vector<float>(6, 1.0f));
    EXPECT_EQ(error_of([&] {
                s.run({{"x", x}, {"y", x}});
              }),
              "output 'seq' is a sequence of 2 float tensors, and only tensors can be returned");
  }
}

// SplitToSequence's docs: a scalar split gives parts of that size, the last smaller; keepdims 0
// (no split) drops the axis. ConcatFromSequence's: new_axis stacks, and its axis may be -rank-1.
TEST(SequenceKernels, SplitAndConcatAttributes) {
  {
    SeqModel m;
    ir::Value* parts = m.node("SplitToSequence", {m.g.find_value("x"), m.constant("s", seq_i64(2))}, "split",
                              testing::attrs(ir::Attribute::of_int("axis", 1)));
    std::vector<Value> out = m.run(parts);
    ASSERT_EQ(out[0].items().size(), 2u);
    EXPECT_EQ(out[0].items()[0].values<float>().size(), 4u);
    EXPECT_EQ(out[0].items()[1].dims(), (std::vector<int64_t>{2, 1}));
    EXPECT_EQ(std::vector<float>(out[0].items()[1].values<float>().begin(), out[0].items()[1].values<float>().end()),
              (std::vector<float>{3, 6}));
  }
  {
    SeqModel m;
    ir::Value* rows =
        m.node("SplitToSequence", {m.g.find_value("x")}, "split", testing::attrs(ir::Attribute::of_int("keepdims", 0)));
    std::vector<Value> out = m.run(rows);
    ASSERT_EQ(out[0].items().size(), 2u);
    EXPECT_EQ(out[0].items()[1].dims(), (std::vector<int64_t>{3}));
    EXPECT_EQ(out[0].items()[1].values<float>()[0], 4.0f);
  }
  {
    SeqModel m;
    ir::Value* stacked =
        m.node("ConcatFromSequence", {m.g.find_value("seq")}, "concat",
               testing::attrs(ir::Attribute::of_int("axis", -1), ir::Attribute::of_int("new_axis", 1)));
    Tensor t = m.run(stacked)[0].tensor();
    EXPECT_EQ(t.dims(), (std::vector<int64_t>{2, 3, 2}));
    EXPECT_EQ(std::vector<float>(t.values<float>().begin(), t.values<float>().begin() + 4),
              (std::vector<float>{1, 7, 2, 8}));
  }
}

}  // namespace
}  // namespace onnxptq::engine
