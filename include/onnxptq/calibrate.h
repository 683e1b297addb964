// Calibration on its own: the range of every tensor the quantizer would calibrate, with the
// config's method and settings (calibrate_method, activation_type, ActivationSymmetric,
// CalibTensorRangeSymmetric, CalibMovingAverage, CalibPercentile, ...; docs/options.md), on the
// model as quantize() prepares it (unless optimize_model is false).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "onnxptq/config.h"
#include "onnxptq/data_reader.h"
#include "onnxptq/model.h"
#include "onnxptq/progress.h"
#include "onnxptq/sample_ranks.h"

namespace onnxptq {

struct TensorRange {
  std::string tensor;
  double min = 0;
  double max = 0;
  // Power-of-two methods: the position p of the scale 2^-p; [min, max] is then exactly what that
  // scale and its zero point represent.
  std::optional<int> pos;
  // Distribution only: the mean and standard deviation.
  std::optional<double> mean, std;
};

struct Calibration {
  std::string method;                   // "MinMax", "Entropy", ...
  std::string activation_type;          // the config's, which the ranges are for: "QInt8", "QUInt16", ...
  size_t samples = 0;                   // samples read
  std::vector<size_t> skipped_samples;  // indices of samples skipped for NaN or Inf
  int passes = 0;                       // times the data was read
  std::vector<TensorRange> tensors;     // by name
  // Tensors computed, but never to a finite value (they have no range and stay float).
  std::vector<std::string> non_finite_tensors;
  // {"method", "activation_type", "samples", "skipped_samples", "passes", "tensors": {name: {"min",
  // "max"[, "pos"][, "mean", "std"]}}, "non_finite_tensors"}, indented by two spaces: what `onnxptq
  // calibrate` writes, and what QuantizeOptions::ranges and the SaveAndRestore extra option read.
  std::string to_json() const;
  // The same read back, exactly (numbers round-trip). Error (bad input) naming what is wrong: not
  // JSON, a key missing, unknown or of the wrong kind, an unknown method or type, Quark's own
  // SaveAndRestore file ("tensors_range").
  static Calibration from_json(const std::string& text);
};

struct CalibrateOptions {
  // Progress lines and warnings (these start with "warning: ").
  std::function<void(const std::string&)> log{};
  // Samples read of each pass over the data.
  ProgressFunction progress{};
  // Distribution's scenario, "same" (default) or "p3" (vai_q_onnx's DistributionCalibrater; no
  // extra option sets it).
  std::string distribution_scenario = "same";
  // Several processes sharing the samples (onnxptq/sample_ranks.h): each calls calibrate with
  // the same arguments and gets the same ranges. Null: this process alone.
  std::shared_ptr<SampleRanks> ranks{};
};

// Error (bad input) for a sample that does not fit the model (naming it) or no usable sample;
// Error for a method that needs the data twice when the reader cannot start over.
Calibration calibrate(const Model& model, DataReader& reader, const Config& config,
                      const CalibrateOptions& options = {});

// Calibration split over jobs that do not talk to each other (a batch scheduler's): shard `shard`
// of `shards` runs its contiguous share of the samples (sample_share) and returns its statistics
// as the bytes of a shard file (docs/formats.md), for merge_shards. MinMSE "All" and
// LayerWisePercentile score candidates in a second pass over the first merged: their shards run
// the first pass, then, given `first_pass` (the bytes of merge_shards' merged first pass), the
// second. Error (bad input) for a shard number out of range, a reader that does not know its
// size, a first pass of another calibration.
std::string calibrate_shard(const Model& model, DataReader& reader, const Config& config, size_t shard, size_t shards,
                            const CalibrateOptions& options = {}, const std::string& first_pass = {});

// What merge_shards makes of shard files: the ranges, or for the first passes of MinMSE "All" and
// LayerWisePercentile, their merge, a file for each shard's second pass (calibrate_shard).
struct MergedShards {
  std::optional<Calibration> ranges;
  std::string first_pass;
};

// What calibrate gives on all the samples, from the bytes of every shard's file (`names` name
// them in messages), with `first_pass` (named `first_pass_name`) for second passes. Error (bad
// input) naming the file: not a shard file, another version, truncated or corrupt, of another
// model, method, options, shard count or pass than the first, a shard given twice; and naming a
// shard missing.
MergedShards merge_shards(const std::vector<std::string>& files, const std::vector<std::string>& names,
                          const std::string& first_pass = {}, const std::string& first_pass_name = {});

}  // namespace onnxptq
