// `onnxptq presets [NAME] [--json]`: the named configurations `quantize --config NAME` takes.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "onnxptq/config.h"
#include "onnxptq/error.h"

namespace onnxptq::cli {
namespace {

nlohmann::json refusals_json(const std::vector<PresetRefusal>& refused) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : refused) out.push_back({{"key", r.key}, {"error", r.error}});
  return out;
}

void list_presets(bool json) {
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const PresetInfo& p : Config::presets())
      out.push_back({{"name", p.name},
                     {"description", p.description},
                     {"ready", p.ready},
                     {"refused", refusals_json(p.refused)},
                     {"config", nlohmann::json::parse(p.config_json)}});
    std::cout << out.dump(2) << "\n";
    return;
  }
  for (const PresetInfo& p : Config::presets()) {
    const char* status = p.ready ? "ready" : "not yet";
    std::printf("%-27s %-8s %s\n", p.name.c_str(), status, p.description.c_str());
  }
  std::printf(
      "\n'not yet': the preset needs a part onnxptq does not have yet; `onnxptq presets NAME` says which.\n"
      "Use one with `onnxptq quantize MODEL -o OUT --config NAME`; other options override its settings.\n");
}

void show_preset(const std::string& name, bool json) {
  const PresetInfo p = Config::preset_info(name);
  const std::string config = nlohmann::json::parse(p.config_json).dump(2);
  if (json) {  // exactly what `quantize --config FILE` reads
    std::cout << config << "\n";
    return;
  }
  std::cout << p.name << ": " << p.description << "\n" << config << "\n";
  if (p.ready) {
    std::cout << "status: ready (onnxptq quantize MODEL -o OUT --config " << p.name << ")\n";
    return;
  }
  std::cout << "status: not yet; onnxptq refuses:\n";
  for (const auto& r : p.refused) std::cout << "  " << r.key << ": " << r.error << "\n";
}

}  // namespace

void add_presets_command(CLI::App& app) {
  struct Args {
    std::string name;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd =
      app.add_subcommand("presets", "List the named configurations of `quantize --config NAME`, or show one");
  cmd->add_option("NAME", a->name, "A preset: print its settings (the JSON of `quantize --config FILE`)");
  cmd->add_flag("--json", a->json, "Print JSON: the list with status, or the preset's config");
  cmd->callback([a] {
    if (a->name.empty())
      list_presets(a->json);
    else
      show_preset(a->name, a->json);
  });
}

}  // namespace onnxptq::cli
