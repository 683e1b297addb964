// Calibration's reads of the samples: one Session over the model, the samples split over workers
// that each run whole samples (samples on threads of their own need no joining after each step
// of the engine) and keep statistics of their own, merged by the caller. Over several ranks
// (onnxptq/sample_ranks.h), each reads its share of the samples, and after each pass the ranks'
// statistics are exchanged: each rank's workers merged into one, so that the caller finds one
// worker a rank, in rank order, and merges them as it merges threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "calib/calibrate.h"
#include "calib/data_reader.h"
#include "calib/tensor_stats_detail.h"
#include "engine/extrema.h"
#include "engine/session.h"
#include "ir/model.h"
#include "onnxptq/sample_ranks.h"

namespace onnxptq::calib {

class SamplePasses {
 public:
  // reduce(stats, tensor index, sample index, values, count, extrema) on each calibrated tensor
  // of each sample: the finite extrema of its values in the first pass (empty in the others).
  using Reduce = std::function<void(TensorStats&, size_t, size_t, const float*, size_t, engine::Extrema)>;

  // `tensors`: the calibrated ones, each run by `workers` workers of `threads` engine threads,
  // on samples share.begin..share.end-1; `ranks` (null: none) exchanges the statistics.
  SamplePasses(const ir::Model& model, const std::vector<std::string>& tensors, DataReader& reader,
               const CalibOptions& options, int workers, int threads, SampleShare share, SampleRanks* ranks);

  // Reads the samples once (the first `limit`), split over the workers, and calls reduce on
  // each calibrated tensor, into statistics of the worker's own (workers(), fresh each pass).
  void run(bool first, const Reduce& reduce, size_t limit = SIZE_MAX);
  std::vector<std::vector<TensorStats>>& workers() { return workers_; }
  size_t samples() const { return samples_; }                      // read in the first pass
  const std::vector<size_t>& skipped() const { return skipped_; }  // their indices, in order
  // Samples each rank read in the first pass, in rank order (this one's alone without ranks).
  const std::vector<size_t>& rank_samples() const { return rank_samples_; }
  // The bytes of the largest rank's statistics in the last exchange (0 without ranks).
  size_t exchanged_bytes() const { return exchanged_bytes_; }
  // This share's statistics of the last pass, its workers merged (what a rank sends, what a shard file keeps).
  ShareStats share_stats();

 private:
  bool check_sample(bool first, size_t sample, const Feed& feed);
  void exchange(bool first);
  void log(const std::string& message);

  DataReader& reader_;
  const CalibOptions& options_;
  int worker_count_ = 1;
  size_t tensor_count_ = 0;
  std::unordered_map<std::string, size_t> index_;
  std::unique_ptr<engine::Session> session_;
  std::vector<std::vector<TensorStats>> workers_;
  SampleShare share_;
  SampleRanks* ranks_ = nullptr;
  size_t read_ = 0;  // samples of this share read in the last pass
  size_t exchanged_bytes_ = 0;
  size_t samples_ = 0;
  std::vector<size_t> rank_samples_;
  std::vector<size_t> skipped_;
  std::mutex skipped_mutex_;
};

}  // namespace onnxptq::calib
