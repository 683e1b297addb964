#include "support/proto_compare.h"

#include <google/protobuf/util/message_differencer.h>

#include <cstring>
#include <fstream>
#include <stdexcept>

namespace onnxptq::testing {
namespace {

template <class Field, class Stored>
std::string pack(const Field& field) {
  std::string raw(field.size() * sizeof(Stored), '\0');
  for (int i = 0; i < field.size(); ++i) {
    auto v = static_cast<Stored>(field.Get(i));
    std::memcpy(raw.data() + i * sizeof(Stored), &v, sizeof(Stored));
  }
  return raw;
}

void normalize_tensor(onnx::TensorProto& t) {
  if (t.has_raw_data() || t.data_location() == onnx::TensorProto::EXTERNAL || t.data_type() == onnx::TensorProto::STRING)
    return;
  std::string raw;
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
    case onnx::TensorProto::COMPLEX64: raw = pack<decltype(t.float_data()), float>(t.float_data()); break;
    case onnx::TensorProto::DOUBLE:
    case onnx::TensorProto::COMPLEX128: raw = pack<decltype(t.double_data()), double>(t.double_data()); break;
    case onnx::TensorProto::INT64: raw = pack<decltype(t.int64_data()), int64_t>(t.int64_data()); break;
    case onnx::TensorProto::UINT64: raw = pack<decltype(t.uint64_data()), uint64_t>(t.uint64_data()); break;
    case onnx::TensorProto::UINT32: raw = pack<decltype(t.uint64_data()), uint32_t>(t.uint64_data()); break;
    case onnx::TensorProto::INT32: raw = pack<decltype(t.int32_data()), int32_t>(t.int32_data()); break;
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::UINT16:
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16: raw = pack<decltype(t.int32_data()), uint16_t>(t.int32_data()); break;
    case onnx::TensorProto::BOOL: {
      raw.resize(static_cast<size_t>(t.int32_data_size()));
      for (int i = 0; i < t.int32_data_size(); ++i) raw[i] = t.int32_data(i) != 0;
      break;
    }
    default: raw = pack<decltype(t.int32_data()), uint8_t>(t.int32_data()); break;  // int8, uint8, float8, int4
  }
  t.clear_float_data();
  t.clear_double_data();
  t.clear_int32_data();
  t.clear_int64_data();
  t.clear_uint64_data();
  t.set_raw_data(raw);
}

}  // namespace

onnx::ModelProto read_model_proto(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  onnx::ModelProto proto;
  if (!in || !proto.ParseFromIstream(&in)) throw std::runtime_error("protobuf cannot read " + path.string());
  return proto;
}

void normalize_tensor_encoding(google::protobuf::Message& message) {
  if (auto* tensor = dynamic_cast<onnx::TensorProto*>(&message)) normalize_tensor(*tensor);
  const auto* descriptor = message.GetDescriptor();
  const auto* reflection = message.GetReflection();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const auto* field = descriptor->field(i);
    if (field->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (field->is_repeated()) {
      for (int k = 0; k < reflection->FieldSize(message, field); ++k)
        normalize_tensor_encoding(*reflection->MutableRepeatedMessage(&message, field, k));
    } else if (reflection->HasField(message, field)) {
      normalize_tensor_encoding(*reflection->MutableMessage(&message, field));
    }
  }
}

std::string model_difference(onnx::ModelProto a, onnx::ModelProto b) {
  normalize_tensor_encoding(a);
  normalize_tensor_encoding(b);
  google::protobuf::util::MessageDifferencer differencer;
  differencer.set_message_field_comparison(google::protobuf::util::MessageDifferencer::EQUIVALENT);
  std::string report;
  differencer.ReportDifferencesToString(&report);
  return differencer.Compare(a, b) ? std::string() : (report.empty() ? "differ" : report);
}

}  // namespace onnxptq::testing
