// The bytes of calibration statistics as they travel between ranks and into shard files:
// little-endian integers and doubles (bit patterns, so every value round-trips), LEB128 varints
// for counts, which are mostly small. A reader checks every length against what is left and
// names `what` it was reading when the bytes end early or hold an impossible value.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string>

namespace onnxptq::calib {

static_assert(std::endian::native == std::endian::little, "statistics bytes are written as the machine holds them");

class StatsWriter {
 public:
  void u8(uint8_t v) { bytes_.push_back(static_cast<char>(v)); }
  void u64(uint64_t v) { bytes_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void f64(double v) { u64(std::bit_cast<uint64_t>(v)); }
  void varint(uint64_t v);
  std::string& bytes() { return bytes_; }

 private:
  std::string bytes_;
};

class StatsReader {
 public:
  // `what` names the bytes in messages ("shard file s0.stats", "the statistics of rank 2").
  StatsReader(const std::string& bytes, std::string what) : bytes_(bytes), what_(std::move(what)) {}
  uint8_t u8();
  uint64_t u64();
  int64_t i64() { return static_cast<int64_t>(u64()); }
  double f64() { return std::bit_cast<double>(u64()); }
  uint64_t varint();
  // A count of items at least `min_bytes` each, checked against the bytes left (0: not checked,
  // the caller bounds it).
  size_t count(size_t min_bytes = 1);
  bool at_end() const { return pos_ == bytes_.size(); }
  // Error: "<what>: corrupt statistics (<why>) at byte <pos>".
  [[noreturn]] void fail(const std::string& why) const;

 private:
  const std::string& bytes_;
  std::string what_;
  size_t pos_ = 0;
};

}  // namespace onnxptq::calib
