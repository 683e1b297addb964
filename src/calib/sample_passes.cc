#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <optional>
#include <thread>

#include "calib/sample_passes_detail.h"
#include "calib/stats_bytes.h"
#include "engine/kernel.h"
#include "onnxptq/error.h"

namespace onnxptq::calib {

namespace {

// Checks a float input of a sample: how many values are NaN or infinite.
size_t count_non_finite(const ir::Tensor& t) {
  if (t.dtype() != ir::DataType::Float && t.dtype() != ir::DataType::Float16 && t.dtype() != ir::DataType::Double)
    return 0;
  ir::Tensor f = engine::as_float32(t);
  size_t bad = 0;
  for (float v : f.values<float>()) bad += !std::isfinite(v);
  return bad;
}

}  // namespace

SamplePasses::SamplePasses(const ir::Model& model, const std::vector<std::string>& tensors, DataReader& reader,
                           const CalibOptions& options, int workers, int threads, SampleShare share, SampleRanks* ranks)
    : reader_(reader),
      options_(options),
      worker_count_(workers),
      tensor_count_(tensors.size()),
      share_(share),
      ranks_(ranks && ranks->size() > 1 ? ranks : nullptr) {
  for (size_t i = 0; i < tensors.size(); ++i) index_.emplace(tensors[i], i);
  engine::SessionOptions so;
  so.threads = threads;
  so.visible.insert(tensors.begin(), tensors.end());
  so.hooks_ignore_layout = true;  // every statistic here is per tensor: element order does not matter
  session_ = std::make_unique<engine::Session>(model, so);
}

void SamplePasses::run(bool first, const Reduce& reduce, size_t limit) {
  workers_.assign(static_cast<size_t>(worker_count_), std::vector<TensorStats>(tensor_count_));
  // The samples before this share: read past (the protocol has no seek), not run; none when the
  // pass stops before the share.
  limit = std::min(limit, share_.end);
  size_t next_index = 0;
  for (; next_index < std::min(share_.begin, limit); ++next_index)
    if (!reader_.next()) break;
  std::mutex reader_mutex;
  std::exception_ptr failure;
  std::atomic<bool> stop{false};
  auto work = [&](int worker) {
    std::vector<TensorStats>& stats = workers_[worker];
    try {
      while (!stop) {
        std::optional<Feed> feed;
        size_t sample;
        {
          std::lock_guard<std::mutex> lock(reader_mutex);
          if (options_.max_samples && next_index >= options_.max_samples) break;
          if (next_index >= limit) break;
          feed = reader_.next();
          if (!feed) break;
          sample = next_index++;
        }
        if (!check_sample(first, sample, *feed)) continue;
        auto see = [&](const std::string& name, const ir::Tensor& t, engine::Extrema extrema) {
          auto it = index_.find(name);
          if (it == index_.end()) return;
          size_t i = it->second;
          if (t.dtype() != ir::DataType::Float && t.dtype() != ir::DataType::Float16 &&
              t.dtype() != ir::DataType::BFloat16)
            return;  // shapes and indices are not quantized
          stats[i].seen = true;
          if (t.dtype() == ir::DataType::Float) {
            reduce(stats[i], i, sample, t.values<float>().data(), t.size(), extrema);
          } else {
            ir::Tensor f = engine::as_float32(t);
            reduce(stats[i], i, sample, f.values<float>().data(), f.size(), extrema);
          }
        };
        // The first pass takes the extrema, from the engine (the kernels writing the tensors
        // take them as they write); the last one does not need them.
        engine::ExtremaObserver observe_extrema = see;
        engine::TensorObserver observe = [&](const std::string& name, const ir::Tensor& t) {
          see(name, t, engine::Extrema{});
        };
        engine::RunHooks hooks;
        if (first)
          hooks.observe_extrema = &observe_extrema;
        else
          hooks.observe = &observe;
        try {
          session_->run_for_hooks(*feed, hooks);
        } catch (const Error& e) {
          throw Error("calibration sample " + std::to_string(sample) + " of " + reader_.describe() + ": " + e.what());
        }
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(reader_mutex);
      if (!failure) failure = std::current_exception();
      stop = true;
    }
  };
  if (worker_count_ == 1) {
    work(0);
  } else {
    std::vector<std::thread> threads;
    for (int w = 0; w < worker_count_; ++w) threads.emplace_back(work, w);
    for (auto& t : threads) t.join();
  }
  if (failure) std::rethrow_exception(failure);
  read_ = next_index - std::min(next_index, share_.begin);
  if (first) {
    samples_ = next_index;
    std::sort(skipped_.begin(), skipped_.end());
    rank_samples_ = {read_};
  }
  if (ranks_) exchange(first);
}

ShareStats SamplePasses::share_stats() {
  ShareStats share;
  share.samples = read_;
  share.skipped = skipped_;
  share.stats = merge_workers(workers_, tensor_count_);
  return share;
}

// Every rank's statistics of this pass, one worker a rank (MPI_Allgatherv of each rank's bytes),
// and of the first pass, every rank's samples and those skipped.
void SamplePasses::exchange(bool first) {
  StatsWriter out;
  write_share_stats(share_stats(), out);
  std::vector<std::string> all = ranks_->all_gather(out.bytes());
  workers_.clear();
  std::vector<size_t> samples, skipped;
  exchanged_bytes_ = 0;
  for (size_t r = 0; r < all.size(); ++r) {
    exchanged_bytes_ = std::max(exchanged_bytes_, all[r].size());
    StatsReader in(all[r], "the statistics of rank " + std::to_string(r));
    ShareStats share = read_share_stats(in, tensor_count_);
    samples.push_back(share.samples);
    skipped.insert(skipped.end(), share.skipped.begin(), share.skipped.end());
    workers_.push_back(std::move(share.stats));
  }
  if (first) {
    rank_samples_ = samples;
    samples_ = 0;
    for (size_t n : samples) samples_ += n;
    skipped_ = skipped;  // each rank's in order, the ranks in sample order
  }
}

// Whether to use the sample: a non-finite input skips it (reported once, on the first pass) or
// fails the run with `strict`.
bool SamplePasses::check_sample(bool first, size_t sample, const Feed& feed) {
  for (const auto& [name, t] : feed) {
    size_t bad = count_non_finite(t);
    if (!bad) continue;
    std::string what = "calibration sample " + std::to_string(sample) + ", input '" + name +
                       "': " + std::to_string(bad) + " NaN or Inf value" + (bad == 1 ? "" : "s");
    if (options_.strict) throw Error(what + " (--strict)");
    if (first) {
      std::lock_guard<std::mutex> lock(skipped_mutex_);
      skipped_.push_back(sample);
      log(what + "; sample skipped");
    }
    return false;
  }
  return true;
}

void SamplePasses::log(const std::string& message) {
  if (options_.log) options_.log(message);
}

}  // namespace onnxptq::calib
