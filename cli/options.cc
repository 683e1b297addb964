// `onnxptq options [KEY] [--json | --markdown]`: the keys `quantize --config FILE` and
// `--extra-option KEY=VALUE` take, from the table the parser reads (quant/config_keys.h).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "onnxptq/error.h"
#include "quant/config_keys.h"

namespace onnxptq::cli {
namespace {

using quant::ConfigKey;
using quant::KeyScope;

nlohmann::json key_json(const ConfigKey& k) {
  return {{"name", k.name},
          {"in", quant::key_scope_name(k.scope)},
          {"type", k.type},
          {"default", k.default_value},
          {"status", quant::key_status_name(k.status)},
          {"note", k.note},
          {"owner", k.owner}};
}

// A default that is a JSON value is code in Markdown; words are not.
std::string markdown_default(const std::string& text) { return nlohmann::json::accept(text) ? "`" + text + "`" : text; }

// docs/options.md's key index, one row per key (tests/unit/config_keys_test.cc reads it back).
void print_markdown() {
  std::cout << "| key | in | type | default | status | owner |\n| --- | --- | --- | --- | --- | --- |\n";
  for (const ConfigKey& k : quant::config_keys())
    std::cout << "| `" << k.name << "` | " << quant::key_scope_name(k.scope) << " | " << k.type << " | "
              << markdown_default(k.default_value) << " | " << quant::key_status_text(k) << " | " << k.owner << " |\n";
}

void print_list() {
  size_t name_width = 0, type_width = 0, default_width = 0;
  for (const ConfigKey& k : quant::config_keys()) {
    name_width = std::max(name_width, k.name.size());
    type_width = std::max(type_width, k.type.size());
    default_width = std::max(default_width, k.default_value.size());
  }
  auto row = [&](const std::string& name, const std::string& type, const std::string& value,
                 const std::string& status) {
    std::printf("  %-*s  %-*s  %-*s  %s\n", static_cast<int>(name_width), name.c_str(), static_cast<int>(type_width),
                type.c_str(), static_cast<int>(default_width), value.c_str(), status.c_str());
  };
  for (KeyScope scope : {KeyScope::Config, KeyScope::ExtraOption}) {
    std::printf(scope == KeyScope::Config ? "Config keys (quantize --config FILE):\n"
                                          : "\nextra_options keys (--extra-option KEY=VALUE, or \"extra_options\" "
                                            "in --config):\n");
    row("KEY", "TYPE", "DEFAULT", "STATUS");
    for (const ConfigKey& k : quant::config_keys())
      if (k.scope == scope) row(k.name, k.type, k.default_value, quant::key_status_text(k));
  }
  std::printf(
      "\nA key ending in * stands for every other key starting so. Keys not listed are refused as unknown.\n"
      "`onnxptq options KEY` shows one key; docs/options.md says what each does.\n");
}

// The entry of a key the parser would use: the config's, else extra_options' (a family's for a
// key it covers).
const ConfigKey& find_key(const std::string& name) {
  const ConfigKey* k = quant::find_config_key(KeyScope::Config, name);
  if (!k) k = quant::find_config_key(KeyScope::ExtraOption, name);
  if (!k) throw Error("unknown config key or extra option '" + name + "' (`onnxptq options` lists them)");
  return *k;
}

void show_key(const ConfigKey& k, const std::string& name) {
  std::cout << k.name << " (" << quant::key_scope_name(k.scope) << ")\n"
            << "  type: " << k.type << "\n"
            << "  default: " << k.default_value << "\n"
            << "  status: " << quant::key_status_text(k) << "\n"
            << "  owner: " << k.owner << "\n";
  if (k.scope == KeyScope::Config)
    std::cout << "  given as: \"" << name << "\": VALUE in a --config file\n";
  else
    std::cout << "  given as: --extra-option " << name << "=VALUE, or \"extra_options\": {\"" << name
              << "\": VALUE} in a --config file\n";
}

}  // namespace

void add_options_command(CLI::App& app) {
  struct Args {
    std::string key;
    bool json = false;
    bool markdown = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "options", "List the config keys and extra options of `quantize`: type, default and status, or show one");
  cmd->add_option("KEY", a->key, "A key: print its entry");
  CLI::Option* json = cmd->add_flag("--json", a->json, "Print the list (or the key) as JSON");
  cmd->add_flag("--markdown", a->markdown, "Print the list as docs/options.md's key index")->excludes(json);
  cmd->callback([a] {
    if (!a->key.empty()) {
      if (a->markdown) throw Error("--markdown prints the whole list; give no KEY with it");
      const ConfigKey& k = find_key(a->key);
      if (a->json)
        std::cout << key_json(k).dump(2) << "\n";
      else
        show_key(k, a->key);
    } else if (a->json) {
      nlohmann::json out = nlohmann::json::array();
      for (const ConfigKey& k : quant::config_keys()) out.push_back(key_json(k));
      std::cout << out.dump(2) << "\n";
    } else if (a->markdown) {
      print_markdown();
    } else {
      print_list();
    }
  });
}

}  // namespace onnxptq::cli
