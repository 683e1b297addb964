// The parts the files of the key table share (config_keys.cc, config_keys_calib.cc): value
// readers that name the key in their errors, and the makers of a table row by status.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "onnxptq/error.h"
#include "quant/config_keys.h"

namespace onnxptq::quant::config_keys_detail {

using json = nlohmann::json;

inline bool json_bool(const std::string& key, const json& v) {
  if (!v.is_boolean()) throw Error("extra option " + key + ": expected true or false, got " + v.dump());
  return v.get<bool>();
}

inline double json_number(const std::string& key, const json& v) {
  if (!v.is_number()) throw Error("extra option " + key + ": expected a number, got " + v.dump());
  return v.get<double>();
}

inline int64_t json_integer(const std::string& key, const json& v) {
  if (!v.is_number_integer()) throw Error("extra option " + key + ": expected an integer, got " + v.dump());
  return v.get<int64_t>();
}

inline std::string json_string(const std::string& key, const json& v) {
  if (!v.is_string()) throw Error("option " + key + ": expected a string, got " + v.dump());
  return v.get<std::string>();
}

inline std::vector<std::string> json_strings(const std::string& key, const json& v) {
  if (!v.is_array()) throw Error("option " + key + ": expected a list of strings, got " + v.dump());
  std::vector<std::string> out;
  for (const auto& e : v) out.push_back(json_string(key, e));
  return out;
}

inline ConfigKey works(KeyScope scope, std::string name, std::string type, std::string default_value, std::string owner,
                       ApplyKey apply, std::string note = "") {
  return {std::move(name),  scope,           std::move(type),  std::move(default_value),
          KeyStatus::Works, std::move(note), std::move(owner), apply};
}

inline ConfigKey limited(KeyScope scope, std::string name, std::string type, std::string default_value,
                         std::string owner, std::string note, ApplyKey apply) {
  return {std::move(name),    scope,           std::move(type),  std::move(default_value),
          KeyStatus::Limited, std::move(note), std::move(owner), apply};
}

// A key of vai_q_onnx's or Quark's whose feature nobody has built: the feature.
inline ConfigKey refused(std::string name, std::string type, std::string feature) {
  return {std::move(name), KeyScope::ExtraOption, std::move(type), "-", KeyStatus::Refused, std::move(feature), "-",
          nullptr};
}

constexpr KeyScope kConfig = KeyScope::Config;
constexpr KeyScope kExtra = KeyScope::ExtraOption;
constexpr const char* kOtherKey = "onnxptq options lists those it has";

// The calibration keys (calib::CalibOptions) and Quark's SaveAndRestore (config_keys_calib.cc).
void add_calibration_options(std::vector<ConfigKey>& keys);

}  // namespace onnxptq::quant::config_keys_detail
