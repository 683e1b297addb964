// `onnxptq options [KEY] [--json | --markdown]`: the keys `quantize --config FILE` and
// `--extra-option KEY=VALUE` take, from the table the parser reads (Config::keys()).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "onnxptq/config.h"
#include "onnxptq/error.h"

namespace onnxptq::cli {
namespace {

nlohmann::json key_json(const ConfigKeyInfo& k) {
  return {{"name", k.name},     {"in", k.scope},  {"type", k.type},  {"default", k.default_value},
          {"status", k.status}, {"note", k.note}, {"owner", k.owner}};
}

// A default that is a JSON value is code in Markdown; words are not.
std::string markdown_default(const std::string& text) { return nlohmann::json::accept(text) ? "`" + text + "`" : text; }

// docs/options.md's key index, one row per key (tests/unit/config_keys_test.cc reads it back).
void print_markdown() {
  std::cout << "| key | in | type | default | status | owner |\n| --- | --- | --- | --- | --- | --- |\n";
  for (const ConfigKeyInfo& k : Config::keys())
    std::cout << "| `" << k.name << "` | " << k.scope << " | " << k.type << " | " << markdown_default(k.default_value)
              << " | " << k.status_text << " | " << k.owner << " |\n";
}

void print_list() {
  size_t name_width = 0, type_width = 0, default_width = 0;
  for (const ConfigKeyInfo& k : Config::keys()) {
    name_width = std::max(name_width, k.name.size());
    type_width = std::max(type_width, k.type.size());
    default_width = std::max(default_width, k.default_value.size());
  }
  auto row = [&](const std::string& name, const std::string& type, const std::string& value,
                 const std::string& status) {
    std::printf("  %-*s  %-*s  %-*s  %s\n", static_cast<int>(name_width), name.c_str(), static_cast<int>(type_width),
                type.c_str(), static_cast<int>(default_width), value.c_str(), status.c_str());
  };
  for (const char* scope : {"config", "extra_options"}) {
    std::printf(scope == std::string("config") ? "Config keys (quantize --config FILE):\n"
                                               : "\nextra_options keys (--extra-option KEY=VALUE, or \"extra_options\" "
                                                 "in --config):\n");
    row("KEY", "TYPE", "DEFAULT", "STATUS");
    for (const ConfigKeyInfo& k : Config::keys())
      if (k.scope == scope) row(k.name, k.type, k.default_value, k.status_text);
  }
  std::printf(
      "\nA key ending in * stands for every other key starting so. Keys not listed are refused as unknown.\n"
      "`onnxptq options KEY` shows one key; docs/options.md says what each does.\n");
}

void show_key(const ConfigKeyInfo& k, const std::string& name) {
  std::cout << k.name << " (" << k.scope << ")\n"
            << "  type: " << k.type << "\n"
            << "  default: " << k.default_value << "\n"
            << "  status: " << k.status_text << "\n"
            << "  owner: " << k.owner << "\n";
  if (k.scope == "config")
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
      const ConfigKeyInfo k = Config::key(a->key);
      if (a->json)
        std::cout << key_json(k).dump(2) << "\n";
      else
        show_key(k, a->key);
    } else if (a->json) {
      nlohmann::json out = nlohmann::json::array();
      for (const ConfigKeyInfo& k : Config::keys()) out.push_back(key_json(k));
      std::cout << out.dump(2) << "\n";
    } else if (a->markdown) {
      print_markdown();
    } else {
      print_list();
    }
  });
}

}  // namespace onnxptq::cli
