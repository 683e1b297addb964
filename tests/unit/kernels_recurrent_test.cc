// LSTM, GRU and RNN: what the kernels refuse, each by name. Their values are held to ONNX's backend
// node tests (tests/conformance) and to ONNX Runtime (tests/e2e/recurrent_vs_ort_test.cc).
#include <gtest/gtest.h>

#include "support/one_node.h"

namespace onnxptq {
namespace {

using testing::attrs;
using testing::error_of;
using testing::NodeInput;

ir::Tensor recurrent_filled(std::vector<int64_t> dims, float value) {
  std::vector<float> v(static_cast<size_t>(ir::element_count(dims)), value);
  return ir::Tensor::from_values<float>(std::move(dims), v);
}

// A GRU (3 gates) of hidden size 2 over X [4, 1, 3], with `extra` inputs after R and `a` attributes.
std::string gru_error(std::vector<ir::Attribute> a, std::vector<NodeInput> extra = {}, int64_t directions = 1) {
  std::vector<NodeInput> inputs{{"X", recurrent_filled({4, 1, 3}, 0.5f)},
                                {"W", recurrent_filled({directions, 6, 3}, 0.1f), true},
                                {"R", recurrent_filled({directions, 6, 2}, 0.1f), true}};
  inputs.insert(inputs.end(), extra.begin(), extra.end());
  return error_of([&] { testing::run_node("GRU", "", 14, inputs, std::move(a), 2); });
}

TEST(RecurrentKernels, RefuseWhatTheSpecDoesNotDefine) {
  EXPECT_NE(gru_error(attrs(ir::Attribute::of_string("direction", "sideways"))).find("direction \"sideways\""),
            std::string::npos);
  EXPECT_NE(gru_error(attrs(ir::Attribute::of_int("layout", 2))).find("layout 2"), std::string::npos);
  EXPECT_NE(gru_error(attrs(ir::Attribute::of_float("clip", -1.f))).find("clip"), std::string::npos);
  ir::Attribute unknown;
  unknown.name = "activations";
  unknown.type = ir::AttrType::Strings;
  unknown.strings = {"Sigmoid", "Swish"};
  EXPECT_NE(gru_error(attrs(std::move(unknown))).find("\"Swish\""), std::string::npos);
  ir::Attribute three;
  three.name = "activations";
  three.type = ir::AttrType::Strings;
  three.strings = {"Sigmoid", "Tanh", "Tanh"};
  EXPECT_NE(gru_error(attrs(std::move(three))).find("activations has 3 names, expected 2"), std::string::npos);
}

TEST(RecurrentKernels, RefuseInputsThatDisagree) {
  // hidden_size against R, W's directions against the attribute, B's and initial_h's shapes.
  EXPECT_NE(gru_error(attrs(ir::Attribute::of_int("hidden_size", 3))).find("hidden_size is 3"), std::string::npos);
  EXPECT_NE(gru_error(attrs(ir::Attribute::of_string("direction", "bidirectional"))).find("W has shape [1,6,3]"),
            std::string::npos);
  EXPECT_NE(gru_error({}, {{"B", recurrent_filled({1, 6}, 0.f), true}}).find("B has shape [1,6], expected [1,12]"),
            std::string::npos);
  EXPECT_NE(gru_error({}, {{"", {}}, {"", {}}, {"initial_h", recurrent_filled({1, 2, 2}, 0.f)}}).find("initial_h"),
            std::string::npos);
  // sequence_lens: one per batch entry, each in [0, seq_length].
  ir::Tensor too_long = ir::Tensor::from_values<int32_t>({1}, std::vector<int32_t>{5});
  EXPECT_NE(gru_error({}, {{"", {}}, {"sequence_lens", too_long}}).find("sequence_lens value 5 is outside [0, 4]"),
            std::string::npos);
  ir::Tensor two = ir::Tensor::from_values<int32_t>({2}, std::vector<int32_t>{1, 1});
  EXPECT_NE(gru_error({}, {{"", {}}, {"sequence_lens", two}}).find("2 values for a batch of 1"), std::string::npos);
}

}  // namespace
}  // namespace onnxptq
