// Sums of errors that come out the same in any order: the candidates' errors of MinMSE and
// LayerWisePercentile, summed over samples split among workers and passes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace onnxptq::calib {

class StatsReader;
class StatsWriter;

// A sum of non-negative doubles held exactly, as an integer number of 2^-1074 (the smallest
// double's step): adding is then associative, so the sum is the same in any order and however the
// terms are split over workers and passes. A NaN or infinite term makes the sum NaN or infinite.
class ExactSum {
 public:
  void add(double v);
  void merge(const ExactSum& other);
  double value() const;  // the sum, rounded to nearest
  // Its bytes (stats_bytes.h), carried, so that equal sums write equal bytes; read checks them.
  void write(StatsWriter& out) const;
  static ExactSum read(StatsReader& in);

 private:
  void carry();
  // 32-bit digits in 64-bit words, digit i worth 2^(32 i - 1074): 1024 + 1074 bits of doubles
  // and 64 of headroom. A word takes less than 2^33 an addition: carried every 2^30 additions.
  static constexpr size_t kDigits = 68;
  std::vector<uint64_t> digits_;  // empty while the sum is 0
  uint32_t uncarried_ = 0;
  bool nan_ = false, infinite_ = false;
};

}  // namespace onnxptq::calib
