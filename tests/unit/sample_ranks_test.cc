// SampleRanks through the public API, without MPI: three threads of this process as three ranks
// (all_gather meets at a barrier), each calling calibrate() as one process of mpirun would; each
// gets the ranges one process gets.
#include "onnxptq/sample_ranks.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "onnxptq/calibrate.h"
#include "onnxptq/readers.h"
#include "support/test_paths.h"

namespace onnxptq {
namespace {

// Every rank's bytes, once all have given theirs; a rank that comes back for the next gather
// waits until the others have taken this one's (they copy it before they can come back).
class ThreadRanksHub {
 public:
  explicit ThreadRanksHub(int size) : size_(size), slots_(static_cast<size_t>(size)) {}
  std::vector<std::string> gather(int rank, const std::string& mine) {
    std::unique_lock<std::mutex> lock(mutex_);
    slots_[static_cast<size_t>(rank)] = mine;
    if (++arrived_ == size_) {
      gathered_ = slots_;
      arrived_ = 0;
      ++round_;
      done_.notify_all();
    } else {
      const uint64_t round = round_;
      done_.wait(lock, [&] { return round_ != round; });
    }
    return gathered_;
  }
  int size() const { return size_; }

 private:
  std::mutex mutex_;
  std::condition_variable done_;
  int size_;
  int arrived_ = 0;
  uint64_t round_ = 0;
  std::vector<std::string> slots_, gathered_;
};

class ThreadRanks : public SampleRanks {
 public:
  ThreadRanks(ThreadRanksHub& hub, int rank) : hub_(hub), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return hub_.size(); }
  std::vector<std::string> all_gather(const std::string& mine) override { return hub_.gather(rank_, mine); }

 private:
  ThreadRanksHub& hub_;
  int rank_;
};

TEST(SampleRanks, ThreeRanksOfThreadsGiveTheOneProcessRanges) {
  const Model model = Model::load(testing::kCls);
  const std::vector<std::pair<std::string, std::string>> methods = {
      {"MinMax", "CalibMovingAverage"}, {"Percentile", ""}, {"MinMSE", ""}, {"LayerWisePercentile", ""}};
  for (const auto& [method, extra] : methods) {
    Config config;
    config.set("calibrate_method", "\"" + method + "\"").threads(1);
    if (!extra.empty()) config.set_extra_option(extra, "true");
    const RandomData data{5, 3, {{"x", {1, 3, 48, 192}}}};
    auto reader = random_reader(model, data);
    const std::string want = calibrate(model, *reader, config).to_json();

    ThreadRanksHub hub(3);
    std::vector<std::string> got(3);
    std::vector<std::thread> ranks;
    for (int r = 0; r < 3; ++r)
      ranks.emplace_back([&, r] {
        auto own = random_reader(model, data);
        CalibrateOptions options;
        options.ranks = std::make_shared<ThreadRanks>(hub, r);
        got[static_cast<size_t>(r)] = calibrate(model, *own, config, options).to_json();
      });
    for (std::thread& t : ranks) t.join();
    for (int r = 0; r < 3; ++r) EXPECT_EQ(got[static_cast<size_t>(r)], want) << method << ", rank " << r;
  }
}

}  // namespace
}  // namespace onnxptq
