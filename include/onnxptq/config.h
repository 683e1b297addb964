// quantize_static's configuration: the arguments and extra_options of vai_q_onnx and Quark for
// ONNX (docs/options.md), as the JSON of `onnxptq quantize --config FILE` and the Python module
// give them, or a named preset. Values are JSON text: "true", "0.5", "\"QDQ\"", "[\"Conv\"]".
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace onnxptq {

namespace quant {
struct QuantConfig;  // the library's form, not part of the API
}

// A setting of a preset that onnxptq refuses, and why.
struct PresetRefusal {
  std::string key;
  std::string error;
};

struct PresetInfo {
  std::string name;
  std::string description;
  std::string config_json;             // its arguments and extra options, as a --config file holds them
  bool ready = false;                  // false: it needs a part onnxptq does not have
  std::vector<PresetRefusal> refused;  // what it needs that onnxptq does not have
};

// One key of the configuration, as `onnxptq options` lists it and docs/options.md describes it.
struct ConfigKeyInfo {
  std::string name;           // a name ending in '*' stands for every other key starting so
  std::string scope;          // "config" (quantize_static's arguments) or "extra_options"
  std::string type;           // "bool", "number", "integer", "string", "list of strings", "object", ...
  std::string default_value;  // JSON where it is a value (false, 0.01, "All", []); else words ("by method")
  std::string status;         // "works", "limited", "command line", "refused"
  std::string status_text;    // the status with its note: "refused: Quark's MX data types (QMX)"
  std::string note;
  std::string owner;  // the part of onnxptq that implements it (quant, calib, passes, finetune, ...)
};

class Config {
 public:
  // vai_q_onnx's quantize_static defaults.
  Config();
  // A preset of Quark or of the seeds' recommended configurations (`onnxptq presets`), set over
  // what is there. Error (unsupported) naming each setting it needs that onnxptq does not have.
  Config& apply_preset(std::string_view name);
  static Config preset(std::string_view name) { return Config().apply_preset(name); }
  static std::vector<PresetInfo> presets();
  static bool has_preset(std::string_view name);
  // Error naming the presets there are for an unknown name.
  static PresetInfo preset_info(std::string_view name);

  // Every key set() and set_extra_option() take (and the ones they refuse by name): the config's,
  // then extra_options', in docs/options.md's order.
  static std::vector<ConfigKeyInfo> keys();
  // The entry the parser uses for `name`: the config's, else extra_options' (a family's for a key
  // it covers); Error (bad input) for a key neither has.
  static ConfigKeyInfo key(std::string_view name);
  // A JSON object of quantize_static's arguments, with "extra_options" inside, set over what is
  // there.
  Config& apply_json(std::string_view json);
  static Config from_json(std::string_view json) { return Config().apply_json(json); }

  // One argument (quant_format, calibrate_method, per_channel, ...) or extra option
  // (ActivationSymmetric, FastFinetune, ...), set over what is there. Error naming the key
  // for an unknown one or a bad value.
  Config& set(std::string_view key, std::string_view json_value);
  Config& set_extra_option(std::string_view key, std::string_view json_value);
  // Names added to a list argument (op_types_to_quantize, nodes_to_quantize, nodes_to_exclude,
  // input_nodes, output_nodes, extra_op_types_to_quantize) instead of replacing it.
  Config& append(std::string_view key, const std::vector<std::string>& names);
  // One pair added to subgraphs_to_exclude (Quark's): the nodes from these start nodes to these
  // end nodes stay float. Error when either list is empty.
  Config& append_subgraph_to_exclude(const std::vector<std::string>& start_nodes,
                                     const std::vector<std::string>& end_nodes);
  // include_fast_ft off and its FastFinetune dropped: a preset's _ADAROUND / _ADAQUANT without
  // the finetune.
  Config& disable_fast_finetune();

  // How the work runs; none of these changes the result.
  Config& threads(int n);        // 0 (default): every hardware thread
  Config& calib_workers(int n);  // samples calibrated at once (CalibWorkerNum); 0: one a thread
  Config& calib_size(size_t n);  // the first n samples only (CalibDataSize); 0: all
  Config& strict(bool on);       // a sample with NaN or Inf is an error instead of skipped

  // UseRandomData: quantize(), calibrate() and analyze_sensitivity() calibrate on seeded random
  // samples (RandomDataReaderInputShape, RandomDataReaderInputDataRange) instead of the reader's.
  bool uses_random_data() const;
  // use_dynamic_quant (quantize_dynamic): activations quantized at run time; no sample is read.
  bool uses_dynamic_quant() const;

  // The checks made before any data is read: Error for settings that do not go together.
  void check() const;

  // For the library's own use.
  const quant::QuantConfig& quant() const { return *config_; }

 private:
  quant::QuantConfig& mutable_quant();
  std::shared_ptr<quant::QuantConfig> config_;  // shared until changed
};

}  // namespace onnxptq
