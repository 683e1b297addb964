#include "ir/data_type.h"

#include <array>

namespace onnxptq {
namespace {

struct TypeInfo {
  std::string_view name;
  int bits;
};

// Indexed by the DataType number; the static_assert keeps it in step with the enum.
constexpr std::array<TypeInfo, kLastDataType + 1> kTypes = {{
    {"undefined", 0},     {"float", 32},       {"uint8", 8},        {"int8", 8},
    {"uint16", 16},       {"int16", 16},       {"int32", 32},       {"int64", 64},
    {"string", 0},        {"bool", 8},         {"float16", 16},     {"double", 64},
    {"uint32", 32},       {"uint64", 64},      {"complex64", 64},   {"complex128", 128},
    {"bfloat16", 16},     {"float8e4m3fn", 8}, {"float8e4m3fnuz", 8}, {"float8e5m2", 8},
    {"float8e5m2fnuz", 8}, {"uint4", 4},       {"int4", 4},
}};
static_assert(kTypes.size() == static_cast<size_t>(DataType::Int4) + 1);

}  // namespace

bool data_type_is_known(int32_t code) { return code >= 0 && code <= kLastDataType; }

std::string_view data_type_name(DataType type) {
  auto code = static_cast<int32_t>(type);
  return data_type_is_known(code) ? kTypes[code].name : std::string_view("unknown");
}

int data_type_bits(DataType type) {
  auto code = static_cast<int32_t>(type);
  return data_type_is_known(code) ? kTypes[code].bits : 0;
}

size_t data_type_bytes(DataType type, int64_t count) {
  return (static_cast<size_t>(count) * data_type_bits(type) + 7) / 8;
}

}  // namespace onnxptq
