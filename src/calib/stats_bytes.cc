#include "calib/stats_bytes.h"

#include <cstring>

#include "onnxptq/error.h"

namespace onnxptq::calib {

void StatsWriter::varint(uint64_t v) {
  while (v >= 0x80) {
    u8(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  u8(static_cast<uint8_t>(v));
}

uint8_t StatsReader::u8() {
  if (pos_ >= bytes_.size()) fail("it ends early: truncated?");
  return static_cast<uint8_t>(bytes_[pos_++]);
}

uint64_t StatsReader::u64() {
  if (bytes_.size() - pos_ < sizeof(uint64_t)) fail("it ends early: truncated?");
  uint64_t v = 0;
  std::memcpy(&v, bytes_.data() + pos_, sizeof v);
  pos_ += sizeof v;
  return v;
}

uint64_t StatsReader::varint() {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    const uint8_t b = u8();
    v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  fail("a count longer than 64 bits");
}

size_t StatsReader::count(size_t min_bytes) {
  const uint64_t n = varint();
  if (min_bytes && n > (bytes_.size() - pos_) / min_bytes)
    fail("a count of " + std::to_string(n) + " items beyond its end");
  return static_cast<size_t>(n);
}

void StatsReader::fail(const std::string& why) const {
  throw Error(what_ + ": corrupt statistics (" + why + ") at byte " + std::to_string(pos_));
}

}  // namespace onnxptq::calib
