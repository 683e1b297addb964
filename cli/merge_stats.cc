// `onnxptq merge-stats`: the ranges of all the samples from the shard files of
// `calibrate --shard i/N --save-stats`, as `onnxptq calibrate` writes them.
#include <fstream>
#include <iostream>
#include <iterator>

#include "cli/commands.h"
#include "onnxptq/calibrate.h"
#include "onnxptq/error.h"
#include "onnxptq/files.h"

namespace onnxptq::cli {
namespace {

struct MergeStatsArgs {
  std::vector<std::string> files;
  std::string output;
  bool quiet = false;
};

void merge_stats_command(const MergeStatsArgs& a) {
  std::vector<std::string> bytes;
  for (const std::string& path : a.files) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(path + ": cannot read the file");
    bytes.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (in.bad()) throw Error(path + ": cannot read the file");
  }
  Calibration result = merge_shards(bytes, a.files);
  std::string text = result.to_json() + "\n";
  if (a.output.empty() || a.output == "-") {
    std::cout << text;
    return;
  }
  write_text_file(a.output, text);
  if (!a.quiet)
    std::cerr << "ranges of " << result.tensors.size() << " tensors from " << a.files.size() << " shards of "
              << result.samples - result.skipped_samples.size() << " samples written to " << a.output << "\n";
}

}  // namespace

void add_merge_stats_command(CLI::App& app) {
  auto a = std::make_shared<MergeStatsArgs>();
  CLI::App* cmd = app.add_subcommand(
      "merge-stats",
      "Merge the shard files of `calibrate --shard i/N --save-stats` into the ranges of all the samples (JSON, as "
      "`calibrate` writes them)");
  cmd->add_option("FILES", a->files, "Shard files, one per shard, in any order")->required();
  cmd->add_option("--output,-o", a->output, "JSON file to write (default: standard output)");
  cmd->add_flag("--quiet", a->quiet, "Print nothing but errors");
  cmd->callback([a] { merge_stats_command(*a); });
}

}  // namespace onnxptq::cli
