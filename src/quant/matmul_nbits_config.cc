// extra_options' MatMulNBitsParams: Quark's keys for its MatMulNBits path (Algorithm, GroupSize,
// Symmetric, Bits, AccuracyLevel), checked against what ONNX Runtime's MatMulNBits takes.
#include <nlohmann/json.hpp>
#include <string>

#include "onnxptq/error.h"
#include "quant/config.h"

namespace onnxptq::quant {
namespace {

[[noreturn]] void bad(const std::string& key, const std::string& expected, const nlohmann::json& v) {
  throw Error("MatMulNBitsParams " + key + ": expected " + expected + ", got " + v.dump());
}

int64_t whole(const std::string& key, const nlohmann::json& v) {
  if (!v.is_number_integer()) bad(key, "an integer", v);
  return v.get<int64_t>();
}

}  // namespace

void apply_matmul_nbits_params(MatMulNBitsParams& p, const nlohmann::json& value) {
  if (!value.is_object()) bad("", "an object of Algorithm, GroupSize, Symmetric, Bits, AccuracyLevel", value);
  p.given = true;
  for (const auto& [key, v] : value.items()) {
    if (key == "Algorithm") {
      if (!v.is_string()) bad(key, "a string", v);
      const std::string a = v.get<std::string>();
      if (a != "DEFAULT" && a != "GPTQ" && a != "HQQ") bad(key, "DEFAULT, GPTQ or HQQ", v);
      p.algorithm = a;
    } else if (key == "GroupSize") {
      // MatMulNBits' block_size: a power of 2, at least 16 (ONNX Runtime's contrib operator schema).
      p.group_size = whole(key, v);
      if (p.group_size < 16 || (p.group_size & (p.group_size - 1)) != 0) bad(key, "a power of 2 of at least 16", v);
    } else if (key == "Symmetric") {
      if (!v.is_boolean()) bad(key, "true or false", v);
      p.symmetric = v.get<bool>();
    } else if (key == "Bits") {
      p.bits = whole(key, v);
      if (p.bits != 4 && p.bits != 8) bad(key, "4 or 8", v);
    } else if (key == "AccuracyLevel") {
      p.accuracy_level = whole(key, v);
      if (p.accuracy_level < 0 || p.accuracy_level > 4) bad(key, "0 to 4", v);
    } else {
      throw Error("MatMulNBitsParams has no key " + key +
                  " (known: Algorithm, GroupSize, Symmetric, Bits, AccuracyLevel)");
    }
  }
  // HQQ solves each block's zero point: its blocks are asymmetric (a Symmetric true from defaults or
  // a preset gives way; asked for beside HQQ, it is refused).
  if (p.algorithm == "HQQ" && value.contains("Symmetric") && value["Symmetric"] == true)
    throw Error(
        "MatMulNBitsParams Algorithm HQQ with Symmetric true: HQQ's blocks are asymmetric (it solves each "
        "block's zero point); leave Symmetric out");
  // HQQ's zero points are floats, which ONNX Runtime's MatMulNBits kernel takes with 4 bits only.
  if (p.algorithm == "HQQ" && p.bits != 4)
    throw unsupported("MatMulNBitsParams Algorithm HQQ with Bits " + std::to_string(p.bits) +
                      ": HQQ writes float zero points, which ONNX Runtime's MatMulNBits takes with 4 bits only");
}

}  // namespace onnxptq::quant
