// A shard file: the statistics of one share of the calibration samples, run apart from the others
// (onnxptq calibrate --shard i/N --save-stats), for `onnxptq merge-stats` to combine. Layout
// (docs/formats.md): the line "onnxptq calibration shard", a line of JSON (the header below),
// then the statistics' bytes (stats_bytes.h). Everything that must agree between the shards is
// in the header, and read_shard_file checks the bytes are whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace onnxptq::calib {

inline constexpr int kShardFileVersion = 1;

struct ShardHeader {
  int version = kShardFileVersion;
  std::string model;                 // the calibrated model's digest (model_digest)
  std::string options;               // calib_options_json of the options it ran with
  std::string activation_type;       // the configuration's, as the ranges report it ("QInt8", ...)
  std::vector<std::string> tensors;  // calibrated, in order
  size_t shard = 0, shards = 0;
  size_t samples = 0;  // of every shard together
  // MinMSE "All" and LayerWisePercentile read the samples twice: a shard's first pass (1), the
  // first passes of every shard merged (1, `merged`), a shard's second pass on that (2, with
  // `first_pass` the digest of the merged first pass's statistics).
  int pass = 1;
  bool merged = false;
  std::string first_pass;
};

struct ShardFile {
  ShardHeader header;
  std::string statistics;
};

// A digest of bytes (64-bit FNV-1a, as hex): of the serialized model, so that shards of another
// model differ, and of statistics.
std::string model_digest(const std::string& serialized_model);
std::string statistics_digest(const std::string& statistics);

std::string write_shard_file(const ShardFile& file);
// Error naming `name` when the bytes are no shard file, of another version, or not whole.
ShardFile read_shard_file(const std::string& bytes, const std::string& name);

// The shards, each file once, checked to belong together: Error naming the file whose model,
// options, tensors, shard count, pass or first pass differ from the first's, a merged first
// pass among them, a shard given twice, or missing. Returns them in shard order.
std::vector<size_t> check_shards(const std::vector<ShardFile>& files, const std::vector<std::string>& names);

// Error naming `name` unless `other` is a shard of the same calibration as `header` (model,
// options, activation type, tensors, shard count and samples).
void check_same_calibration(const ShardHeader& header, const ShardHeader& other, const std::string& name,
                            const std::string& first_name);

}  // namespace onnxptq::calib
