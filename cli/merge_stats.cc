// `onnxptq merge-stats`: the ranges of all the samples from the shard files of
// `calibrate --shard i/N --save-stats`, as `onnxptq calibrate` writes them.
#include <iostream>

#include "cli/calib_data.h"
#include "cli/commands.h"
#include "onnxptq/calibrate.h"
#include "onnxptq/error.h"
#include "onnxptq/files.h"

namespace onnxptq::cli {
namespace {

struct MergeStatsArgs {
  std::vector<std::string> files;
  std::string output;
  std::string first_pass;  // --first-pass: for second-pass shards
  bool quiet = false;
};

void merge_stats_command(const MergeStatsArgs& a) {
  std::vector<std::string> bytes;
  for (const std::string& path : a.files) bytes.push_back(read_text_file(path, path));
  const std::string first_pass = a.first_pass.empty() ? "" : read_text_file(a.first_pass, a.first_pass);
  MergedShards merged = merge_shards(bytes, a.files, first_pass, a.first_pass);
  if (!merged.ranges) {  // the first passes of a method that reads the samples twice
    if (a.output.empty() || a.output == "-")
      throw Error(
          "these are first passes (MinMSE All or LayerWisePercentile): their merge is a file for each "
          "shard's second pass; give it a name with -o");
    write_text_file(a.output, merged.first_pass);
    if (!a.quiet)
      std::cerr << "first pass of " << a.files.size() << " shards merged into " << a.output
                << "; next, each shard's second pass: calibrate ... --shard i/N --first-pass " << a.output
                << " --save-stats FILE, then merge-stats --first-pass " << a.output << " FILES... -o ranges.json\n";
    return;
  }
  write_ranges(*merged.ranges, a.output, a.quiet, std::to_string(a.files.size()) + " shards of ");
}

}  // namespace

void add_merge_stats_command(CLI::App& app) {
  auto a = std::make_shared<MergeStatsArgs>();
  CLI::App* cmd = app.add_subcommand(
      "merge-stats",
      "Merge the shard files of `calibrate --shard i/N --save-stats` into the ranges of all the samples (JSON, as "
      "`calibrate` writes them), or the first passes of MinMSE All and LayerWisePercentile into one for their "
      "second passes");
  cmd->add_option("FILES", a->files, "Shard files, one per shard, in any order")->required();
  cmd->add_option("--output,-o", a->output, "JSON file to write (default: standard output)");
  cmd->add_option("--first-pass", a->first_pass,
                  "The merged first pass the shards' second passes ran on (MinMSE All, LayerWisePercentile)");
  cmd->add_flag("--quiet", a->quiet, "Print nothing but errors");
  cmd->callback([a] { merge_stats_command(*a); });
}

}  // namespace onnxptq::cli
