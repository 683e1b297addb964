// Named configurations: the vai_q_onnx guide's recommended ones and Quark's DefaultConfigMapping,
// each the JSON config apply_config_json reads (docs/options.md, "Presets").
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "onnxptq/error.h"
#include "quant/config.h"

namespace onnxptq::quant {

struct Preset {
  std::string name;
  std::string description;  // one line
  // The arguments and extra_options in the form of `onnxptq quantize --config FILE` (the core's
  // names: vai_q_onnx's CalibPercentile for Quark's Percentile, enable_dpu for enable_npu_cnn).
  // Switches of features that are off are left out.
  nlohmann::json config;
};

// Quark's DEFAULT_ADAROUND_PARAMS (or DEFAULT_ADAQUANT_PARAMS): the FastFinetune extra option of
// the _ADAROUND (_ADAQUANT) presets.
nlohmann::json default_finetune_params(bool adaquant);

// Every preset, in the order `onnxptq presets` lists them.
const std::vector<Preset>& presets();

// nullptr for a name that is no preset (names are exact, upper case).
const Preset* find_preset(const std::string& name);

// "VAI_CNN_NPU, VAI_CNN_NPU_CLE, ..., MATMUL_NBITS", for messages.
std::string preset_names();

// One setting of a preset the core refused: the config key (an extra option's own key, or
// "check_config" for a combination refused after everything applied) and the core's error.
struct PresetRefusal {
  std::string key;
  std::string error;
  ErrorKind kind = ErrorKind::bad_input;
};

// Applies every setting of `preset` to `config`, each on its own, and returns the ones the core
// refuses (a feature not built yet, mostly); empty when the preset applies and passes
// check_config. Whole-feature switches are applied first, then types, format, method, the other
// arguments and the extra options.
std::vector<PresetRefusal> apply_preset_settings(QuantConfig& config, const Preset& preset);

// What `onnxptq presets` reports: apply_preset_settings on a default QuantConfig, then (when
// nothing was refused) check_config, whose refusal has the key "check_config". Empty: ready.
std::vector<PresetRefusal> check_preset(const Preset& preset);

// apply_preset_settings by name, as `onnxptq quantize --config NAME` does: Error "unknown preset
// 'X' (presets: ...)", or "preset X: <error>; <error>..." naming every refused setting. A
// preset that applies is not yet checked (check_config runs after the command line's overrides).
void apply_preset(QuantConfig& config, const std::string& name);

}  // namespace onnxptq::quant
