#include "calib/progress_reader.h"

#include <algorithm>

namespace onnxptq::calib {
namespace {

class ProgressReader final : public DataReader {
 public:
  ProgressReader(DataReader& source, ProgressFunction progress, size_t limit)
      : source_(source), progress_(std::move(progress)), limit_(limit) {}

  std::optional<Feed> next() override {
    std::optional<Feed> feed = source_.next();
    if (feed) {
      ++done_;
      progress_({"calibration data", "samples", done_, total()});
    }
    return feed;
  }
  std::optional<size_t> size() const override { return source_.size(); }
  bool can_rewind() const override { return source_.can_rewind(); }
  void rewind() override {
    source_.rewind();
    done_ = 0;
  }
  std::string describe() const override { return source_.describe(); }

 private:
  size_t total() const {
    size_t n = source_.size().value_or(0);
    if (limit_ > 0) n = n > 0 ? std::min(n, limit_) : limit_;
    return std::max(n, done_);
  }

  DataReader& source_;
  ProgressFunction progress_;
  size_t limit_;
  size_t done_ = 0;
};

}  // namespace

std::unique_ptr<DataReader> make_progress_reader(DataReader& source, ProgressFunction progress, size_t limit) {
  return std::make_unique<ProgressReader>(source, std::move(progress), limit);
}

}  // namespace onnxptq::calib
