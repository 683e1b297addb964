// The configuration keys of Quark's graph pre- and post-processing (its apply_pre_process and
// apply_post_process): initializer copies before quantizing, Q/DQ removal, int16 biases, one
// DequantizeLinear per reader.
#include <nlohmann/json.hpp>

#include "engine/kernel.h"
#include "onnxptq/error.h"
#include "passes/onnx_bridge.h"
#include "quant/config_keys_detail.h"
#include "quant/post_process.h"

namespace onnxptq::quant {

namespace {

using namespace config_keys_detail;

// An op type of a graph node: one ONNX defines, or a com.microsoft one the engine runs.
std::string json_op_type(const std::string& key, const json& v) {
  if (!v.is_string()) throw Error("extra option " + key + ": expected an op type (a string), got " + v.dump());
  std::string op = v.get<std::string>();
  if (!passes::onnx_knows_op(op) && !engine::KernelRegistry::instance().knows("com.microsoft", op))
    throw Error("extra option " + key + ": '" + op + "' is not an ONNX op type");
  return op;
}

// Quark's None (null: off) or a list of op types ([]: every op type).
std::optional<std::vector<std::string>> json_op_types_or_none(const std::string& key, const json& v) {
  if (v.is_null()) return std::nullopt;
  if (!v.is_array()) throw Error("extra option " + key + ": expected null or a list of op types, got " + v.dump());
  std::vector<std::string> ops;
  for (const json& e : v) ops.push_back(json_op_type(key, e));
  return ops;
}

// Quark's None (null: nothing) or a list of [op, op] pairs (its list of tuples).
std::vector<std::pair<std::string, std::string>> json_op_pairs(const std::string& key, const json& v) {
  std::vector<std::pair<std::string, std::string>> pairs;
  if (v.is_null()) return pairs;
  if (!v.is_array()) throw Error("extra option " + key + ": expected a list of [op, op] pairs, got " + v.dump());
  for (const json& pair : v) {
    if (!pair.is_array() || pair.size() != 2)
      throw Error("extra option " + key + ": expected a pair [op, op], got " + pair.dump());
    pairs.emplace_back(json_op_type(key, pair[0]), json_op_type(key, pair[1]));
  }
  return pairs;
}

}  // namespace

void add_post_process_keys(std::vector<ConfigKey>& keys) {
  keys.push_back(works(kExtra, "CopySharedInit", "list of strings or null", "null", "passes",
                       [](QuantConfig& c, const ConfigKey& k, const json& v) {
                         c.copy_shared_init = json_op_types_or_none(k.name, v);
                       }));
  keys.push_back(works(
      kExtra, "CopyBiasInit", "list of strings or null", "[\"Conv\", \"ConvTranspose\", \"Gemm\"]", "passes",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.copy_bias_init = json_op_types_or_none(k.name, v); },
      "with 8/16-bit integer types and MinMax, Entropy, Percentile or Distribution"));
  keys.push_back(
      works(kExtra, "RemoveQDQMulAdd", "bool", "false", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.remove_qdq_mul_add = json_bool(k.name, v); }));
  keys.push_back(works(
      kExtra, "RemoveQDQBetweenOps", "list of pairs or null", "null", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.remove_qdq_between_ops = json_op_pairs(k.name, v); }));
  keys.push_back(works(
      kExtra, "Int16Bias", "bool", "false", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.int16_bias = json_bool(k.name, v); },
      "below opset 21 com.microsoft's DequantizeLinear"));
  keys.push_back(
      works(kExtra, "DedicateDQNode", "bool", "false", "passes",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.dedicate_dq_node = json_bool(k.name, v); }));
}

}  // namespace onnxptq::quant
