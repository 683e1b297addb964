// `onnxptq presets [NAME] [--json]`: the named configurations `quantize --config NAME` takes.
#include "quant/presets.h"

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "onnxptq/error.h"

namespace onnxptq::cli {
namespace {

nlohmann::json refusals_json(const std::vector<quant::PresetRefusal>& refused) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : refused) out.push_back({{"key", r.key}, {"error", r.error}});
  return out;
}

void list_presets(bool json) {
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const quant::Preset& p : quant::presets()) {
      std::vector<quant::PresetRefusal> refused = quant::check_preset(p);
      out.push_back({{"name", p.name},
                     {"description", p.description},
                     {"ready", refused.empty()},
                     {"refused", refusals_json(refused)},
                     {"config", p.config}});
    }
    std::cout << out.dump(2) << "\n";
    return;
  }
  for (const quant::Preset& p : quant::presets()) {
    const char* status = quant::check_preset(p).empty() ? "ready" : "not yet";
    std::printf("%-27s %-8s %s\n", p.name.c_str(), status, p.description.c_str());
  }
  std::printf(
      "\n'not yet': the preset needs a part onnxptq does not have yet; `onnxptq presets NAME` says which.\n"
      "Use one with `onnxptq quantize MODEL -o OUT --config NAME`; other options override its settings.\n");
}

void show_preset(const std::string& name, bool json) {
  const quant::Preset* p = quant::find_preset(name);
  if (!p) throw Error("unknown preset '" + name + "' (presets: " + quant::preset_names() + ")");
  if (json) {  // exactly what `quantize --config FILE` reads
    std::cout << p->config.dump(2) << "\n";
    return;
  }
  std::cout << p->name << ": " << p->description << "\n" << p->config.dump(2) << "\n";
  std::vector<quant::PresetRefusal> refused = quant::check_preset(*p);
  if (refused.empty()) {
    std::cout << "status: ready (onnxptq quantize MODEL -o OUT --config " << p->name << ")\n";
    return;
  }
  std::cout << "status: not yet; onnxptq refuses:\n";
  for (const auto& r : refused) std::cout << "  " << r.key << ": " << r.error << "\n";
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
