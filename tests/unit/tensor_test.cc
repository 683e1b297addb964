#include <gtest/gtest.h>

#include "ir/tensor.h"
#include "onnxptq/error.h"

namespace onnxptq::ir {
namespace {

TEST(Tensor, ZeroFilledWithTheRightByteSize) {
  Tensor t(DataType::Float, {2, 3});
  EXPECT_EQ(t.size(), 6);
  EXPECT_EQ(t.byte_size(), 24u);
  for (float v : t.values<float>()) EXPECT_EQ(v, 0.0f);
  EXPECT_EQ(Tensor(DataType::Int4, {3}).byte_size(), 2u);  // two 4-bit values a byte, rounded up
  EXPECT_EQ(Tensor(DataType::Float, {}).size(), 1);         // a scalar
  EXPECT_EQ(Tensor(DataType::Float, {0, 5}).byte_size(), 0u);
}

TEST(Tensor, DataThatDoesNotFitTheShapeIsAnError) {
  try {
    Tensor(DataType::Float, {2, 3}, Bytes::zeros(20));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "tensor data of 20 bytes does not fit shape [2,3] of float (24 bytes expected)");
  }
}

TEST(Tensor, TypedAccessChecksTheElementWidth) {
  Tensor t = Tensor::from_values<int64_t>({2}, std::vector<int64_t>{7, -8});
  EXPECT_EQ(t.dtype(), DataType::Int64);
  EXPECT_EQ(t.values<int64_t>()[1], -8);
  EXPECT_THROW(t.values<float>(), Error);
  Tensor h(DataType::Float16, {1});
  EXPECT_NO_THROW(h.values<uint16_t>());
}

TEST(Tensor, CopiesShareStorageUntilWritten) {
  Tensor a = Tensor::from_values<float>({3}, std::vector<float>{1, 2, 3});
  Tensor b = a;
  EXPECT_TRUE(a.bytes().same_storage(b.bytes()));
  b.mutable_values<float>()[0] = 10;
  EXPECT_FALSE(a.bytes().same_storage(b.bytes()));
  EXPECT_EQ(a.values<float>()[0], 1);
  EXPECT_EQ(b.values<float>()[0], 10);
}

TEST(Tensor, ViewsAreCopiedBeforeWriting) {
  auto owner = std::make_shared<std::vector<float>>(std::vector<float>{4, 5});
  Bytes view = Bytes::view(owner, reinterpret_cast<const std::byte*>(owner->data()), 8);
  Tensor t(DataType::Float, {2}, view);
  t.mutable_values<float>()[1] = 50;
  EXPECT_EQ((*owner)[1], 5);  // the viewed memory (e.g. a mapped file) is never written
  EXPECT_EQ(t.values<float>()[1], 50);
}

TEST(Tensor, Strings) {
  Tensor s = Tensor::from_strings({2}, {"a", "bc"});
  EXPECT_EQ(s.dtype(), DataType::String);
  EXPECT_EQ(s.string_values()[1], "bc");
  EXPECT_THROW(Tensor::from_strings({3}, {"a"}), Error);
}

TEST(DataType, NamesAndWidths) {
  EXPECT_EQ(data_type_name(DataType::BFloat16), "bfloat16");
  EXPECT_EQ(data_type_name(DataType::Float8E4M3FN), "float8e4m3fn");
  EXPECT_EQ(data_type_bits(DataType::UInt4), 4);
  EXPECT_EQ(data_type_bits(DataType::Complex128), 128);
  EXPECT_FALSE(data_type_is_known(23));
  EXPECT_EQ(dims_to_string({1, 3, 224, 224}), "[1,3,224,224]");
}

}  // namespace
}  // namespace onnxptq::ir
