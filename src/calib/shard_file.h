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
  std::string model;    // the calibrated model's digest (model_digest)
  std::string options;  // calib_options_json of the options it ran with
  std::string activation_type;  // the configuration's, as the ranges report it ("QInt8", ...)
  std::vector<std::string> tensors;  // calibrated, in order
  size_t shard = 0, shards = 0;
  size_t samples = 0;  // of every shard together
};

struct ShardFile {
  ShardHeader header;
  std::string statistics;
};

// A digest of a serialized model (64-bit FNV-1a, as hex): shards of another model differ.
std::string model_digest(const std::string& serialized_model);

std::string write_shard_file(const ShardFile& file);
// Error naming `name` when the bytes are no shard file, of another version, or not whole.
ShardFile read_shard_file(const std::string& bytes, const std::string& name);

// The shards, each file once, checked to belong together: Error naming the file whose model,
// options, tensors or shard count differ from the first's, a shard given twice, or missing.
// Returns them in shard order.
std::vector<size_t> check_shards(const std::vector<ShardFile>& files, const std::vector<std::string>& names);

}  // namespace onnxptq::calib
