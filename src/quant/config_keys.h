// The configuration keys as one table: every key of the JSON config (quantize_static's arguments
// as vai_q_onnx and Quark name them) and of its extra_options, with the value it takes, its default,
// whether onnxptq acts on it, the part that does, and how it sets a QuantConfig. The parser
// (apply_config_json, apply_extra_option) looks keys up in it, `onnxptq options` lists it, and
// docs/options.md's key index is checked against it (tests/unit/config_keys_test.cc).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "quant/config.h"

namespace onnxptq::quant {

enum class KeyScope {
  Config,       // a top-level key of the JSON config (`quantize --config FILE`)
  ExtraOption,  // a key of its extra_options (`--extra-option KEY=VALUE`)
};

enum class KeyStatus {
  Works,    // onnxptq acts on it (`note`: what it needs to take effect, if anything)
  Limited,  // some values are refused: `note` says which and why (the error's text)
  Refused,  // refused: a feature not built, which `note` names
};

struct ConfigKey;
using ApplyKey = void (*)(QuantConfig& config, const ConfigKey& key, const nlohmann::json& value);

struct ConfigKey {
  // The key. A name ending in '*' stands for every other key starting so (a family of refused keys).
  std::string name;
  KeyScope scope;
  std::string type;           // the value: "bool", "number", "integer", "string", "list of strings", "object", ...
  std::string default_value;  // JSON where it is a value (false, 0.01, "All", []); else words ("by method"); "-": none
  KeyStatus status;
  std::string note;
  std::string owner;  // the folder that implements it (quant, calib, passes, finetune, accuracy, engine), cli, or "-"
  ApplyKey apply;     // sets the config (Works and Limited keys); the parser refuses the others by their status
};

// Every key: the config's, then extra_options', in the order docs/options.md gives them.
const std::vector<ConfigKey>& config_keys();

// The entry of `name` in `scope`: its own, else the first family ("Convert*") it starts with; nullptr
// when there is none.
const ConfigKey* find_config_key(KeyScope scope, const std::string& name);

const char* key_scope_name(KeyScope scope);     // "config", "extra_options"
const char* key_status_name(KeyStatus status);  // "works", "limited", "command line", "refused"
// The status with its note: "works", "works: with enable_dpu", "refused: Quark's MX data types (QMX)".
std::string key_status_text(const ConfigKey& key);

// Sets one extra_options key (vai_q_onnx's, ONNX Runtime's and Quark's names) from a JSON value.
// Error for an unknown key (`unknown extra option 'KEY'`), a value of the wrong kind, and for keys
// onnxptq refuses, naming the feature or the command-line flags that take their place.
void apply_extra_option(QuantConfig& config, const std::string& key, const nlohmann::json& value);

// Reads a JSON config: an object of the top-level keys of the table ("quant_format",
// "calibrate_method", ..., "extra_options": {...}). Error naming an unknown key
// (`unknown config key 'KEY'`) or a bad value.
void apply_config_json(QuantConfig& config, const nlohmann::json& json);

}  // namespace onnxptq::quant
