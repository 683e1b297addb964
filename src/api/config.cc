// The public Config over quant::QuantConfig and its JSON parser (the same one `--config FILE`
// and the Python module use).
#include "onnxptq/config.h"

#include <nlohmann/json.hpp>

#include "quant/config.h"
#include "quant/config_keys.h"
#include "quant/presets.h"
#include "quant/quantize.h"

namespace onnxptq {
namespace {

nlohmann::json parsed(std::string_view key, std::string_view json_value) {
  nlohmann::json j = nlohmann::json::parse(json_value, nullptr, false);
  if (j.is_discarded())
    throw Error(std::string(key) + ": the value " + std::string(json_value) +
                " is not JSON (a string is written in quotes: \"\\\"QDQ\\\"\")");
  return j;
}

}  // namespace

Config::Config() : config_(std::make_shared<quant::QuantConfig>()) {}

Config& Config::apply_preset(std::string_view name) {
  quant::apply_preset(mutable_quant(), std::string(name));
  return *this;
}

namespace {

PresetInfo preset_info_of(const quant::Preset& p) {
  PresetInfo info{p.name, p.description, p.config.dump(), true, {}};
  for (const quant::PresetRefusal& r : quant::check_preset(p)) info.refused.push_back({r.key, r.error});
  info.ready = info.refused.empty();
  return info;
}

ConfigKeyInfo key_info_of(const quant::ConfigKey& k) {
  return {k.name,
          quant::key_scope_name(k.scope),
          k.type,
          k.default_value,
          quant::key_status_name(k.status),
          quant::key_status_text(k),
          k.note,
          k.owner};
}

}  // namespace

bool Config::uses_random_data() const { return config_->use_random_data; }
bool Config::uses_dynamic_quant() const { return config_->use_dynamic_quant; }

std::vector<PresetInfo> Config::presets() {
  std::vector<PresetInfo> out;
  for (const quant::Preset& p : quant::presets()) out.push_back(preset_info_of(p));
  return out;
}

PresetInfo Config::preset_info(std::string_view name) {
  const quant::Preset* p = quant::find_preset(std::string(name));
  if (!p) throw Error("unknown preset '" + std::string(name) + "' (presets: " + quant::preset_names() + ")");
  return preset_info_of(*p);
}

std::vector<ConfigKeyInfo> Config::keys() {
  std::vector<ConfigKeyInfo> out;
  for (const quant::ConfigKey& k : quant::config_keys()) out.push_back(key_info_of(k));
  return out;
}

ConfigKeyInfo Config::key(std::string_view name) {
  const std::string n(name);
  const quant::ConfigKey* k = quant::find_config_key(quant::KeyScope::Config, n);
  if (!k) k = quant::find_config_key(quant::KeyScope::ExtraOption, n);
  if (!k) throw Error("unknown config key or extra option '" + n + "' (`onnxptq options` lists them)");
  return key_info_of(*k);
}

bool Config::has_preset(std::string_view name) { return quant::find_preset(std::string(name)) != nullptr; }

Config& Config::apply_json(std::string_view json) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded()) throw Error("the config is not valid JSON");
  quant::apply_config_json(mutable_quant(), j);
  return *this;
}

Config& Config::set(std::string_view key, std::string_view json_value) {
  quant::apply_config_json(mutable_quant(), nlohmann::json{{std::string(key), parsed(key, json_value)}});
  return *this;
}

Config& Config::set_extra_option(std::string_view key, std::string_view json_value) {
  quant::apply_extra_option(mutable_quant(), std::string(key), parsed(key, json_value));
  return *this;
}

Config& Config::append(std::string_view key, const std::vector<std::string>& names) {
  quant::QuantConfig& c = mutable_quant();
  std::vector<std::string>* list = key == "op_types_to_quantize"         ? &c.op_types_to_quantize
                                   : key == "nodes_to_quantize"          ? &c.nodes_to_quantize
                                   : key == "nodes_to_exclude"           ? &c.nodes_to_exclude
                                   : key == "input_nodes"                ? &c.input_nodes
                                   : key == "output_nodes"               ? &c.output_nodes
                                   : key == "extra_op_types_to_quantize" ? &c.extra_op_types_to_quantize
                                                                         : nullptr;
  if (!list)
    throw Error("append: " + std::string(key) +
                " is not a list argument (op_types_to_quantize, nodes_to_quantize, nodes_to_exclude, input_nodes, "
                "output_nodes, extra_op_types_to_quantize)");
  list->insert(list->end(), names.begin(), names.end());
  return *this;
}

Config& Config::append_subgraph_to_exclude(const std::vector<std::string>& start_nodes,
                                           const std::vector<std::string>& end_nodes) {
  if (start_nodes.empty() || end_nodes.empty())
    throw Error("subgraphs_to_exclude: a subgraph needs at least one start node and one end node");
  mutable_quant().subgraphs_to_exclude.push_back({start_nodes, end_nodes});
  return *this;
}

Config& Config::disable_fast_finetune() {
  quant::QuantConfig& c = mutable_quant();
  c.include_fast_ft = false;
  c.fast_finetune = {};
  return *this;
}

Config& Config::threads(int n) {
  if (n < 0) throw Error("threads: " + std::to_string(n) + " is negative");
  mutable_quant().calib.threads = n;
  return *this;
}

Config& Config::calib_workers(int n) {
  if (n < 0) throw Error("calib_workers: " + std::to_string(n) + " is negative");
  mutable_quant().calib.workers = n;
  return *this;
}

Config& Config::calib_size(size_t n) {
  mutable_quant().calib.max_samples = n;
  return *this;
}

Config& Config::strict(bool on) {
  mutable_quant().calib.strict = on;
  return *this;
}

void Config::check() const { quant::check_config(*config_); }

quant::QuantConfig& Config::mutable_quant() {
  if (config_.use_count() > 1) config_ = std::make_shared<quant::QuantConfig>(*config_);
  return *config_;
}

}  // namespace onnxptq
