// Calibration's reads of the samples: one Session over the model, the samples split over workers
// that each run whole samples (samples on threads of their own need no joining after each step
// of the engine) and keep statistics of their own, merged by the caller.
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

namespace onnxptq::calib {

class SamplePasses {
 public:
  // reduce(stats, tensor index, sample index, values, count, extrema) on each calibrated tensor
  // of each sample: the finite extrema of its values in the first pass (empty in the others).
  using Reduce = std::function<void(TensorStats&, size_t, size_t, const float*, size_t, engine::Extrema)>;

  // `tensors`: the calibrated ones, each run by `workers` workers of `threads` engine threads.
  SamplePasses(const ir::Model& model, const std::vector<std::string>& tensors, DataReader& reader,
               const CalibOptions& options, int workers, int threads);

  // Reads the samples once (the first `limit`), split over the workers, and calls reduce on
  // each calibrated tensor, into statistics of the worker's own (workers(), fresh each pass).
  void run(bool first, const Reduce& reduce, size_t limit = SIZE_MAX);
  std::vector<std::vector<TensorStats>>& workers() { return workers_; }
  size_t samples() const { return samples_; }                      // read in the first pass
  const std::vector<size_t>& skipped() const { return skipped_; }  // their indices, in order

 private:
  bool check_sample(bool first, size_t sample, const Feed& feed);
  void log(const std::string& message);

  DataReader& reader_;
  const CalibOptions& options_;
  int worker_count_ = 1;
  size_t tensor_count_ = 0;
  std::unordered_map<std::string, size_t> index_;
  std::unique_ptr<engine::Session> session_;
  std::vector<std::vector<TensorStats>> workers_;
  size_t samples_ = 0;
  std::vector<size_t> skipped_;
  std::mutex skipped_mutex_;
};

}  // namespace onnxptq::calib
