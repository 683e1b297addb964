#include "calib/exact_sum.h"

#include <cmath>

#include "calib/stats_bytes.h"

namespace onnxptq::calib {

void ExactSum::add(double v) {
  if (std::isnan(v) || v < 0) {
    nan_ = true;
    return;
  }
  if (std::isinf(v)) {
    infinite_ = true;
    return;
  }
  if (v == 0) return;
  if (digits_.empty()) digits_.assign(kDigits, 0);
  int e = 0;
  const double fraction = std::frexp(v, &e);                        // v = fraction * 2^e, fraction in [0.5, 1)
  auto mantissa = static_cast<uint64_t>(std::ldexp(fraction, 53));  // v = mantissa * 2^(e - 53)
  int bit = e - 53 + 1074;                                          // of the mantissa's lowest bit, in steps of 2^-1074
  if (bit < 0) {                                                    // a subnormal: its low bits are zeros
    mantissa >>= -bit;
    bit = 0;
  }
  const auto wide = static_cast<unsigned __int128>(mantissa) << (bit % 32);
  const auto word = static_cast<size_t>(bit / 32);
  digits_[word] += static_cast<uint32_t>(wide);
  digits_[word + 1] += static_cast<uint32_t>(wide >> 32);
  digits_[word + 2] += static_cast<uint64_t>(wide >> 64);
  if (++uncarried_ == (uint32_t{1} << 30)) carry();
}

void ExactSum::carry() {
  for (size_t i = 0; i + 1 < digits_.size(); ++i) {
    digits_[i + 1] += digits_[i] >> 32;
    digits_[i] &= 0xffffffffu;
  }
  uncarried_ = 0;
}

void ExactSum::merge(const ExactSum& other) {
  nan_ = nan_ || other.nan_;
  infinite_ = infinite_ || other.infinite_;
  if (other.digits_.empty()) return;
  if (digits_.empty()) digits_.assign(kDigits, 0);
  ExactSum o = other;
  o.carry();  // its digits under 2^32, as one addition adds
  for (size_t i = 0; i < kDigits; ++i) digits_[i] += o.digits_[i];
  if (++uncarried_ == (uint32_t{1} << 30)) carry();
}

double ExactSum::value() const {
  if (nan_) return NAN;
  if (infinite_) return INFINITY;
  ExactSum c = *this;
  c.carry();
  size_t top = c.digits_.size();
  while (top > 0 && c.digits_[top - 1] == 0) --top;
  if (top == 0) return 0;
  // The top three digits (96 bits), with the lowest bit set if anything below is not zero: the
  // conversion to double then rounds as the whole sum would.
  const size_t low = top >= 3 ? top - 3 : 0;
  unsigned __int128 v = 0;
  for (size_t i = top; i-- > low;) v = (v << 32) | c.digits_[i];
  for (size_t i = 0; i < low; ++i)
    if (c.digits_[i]) {
      v |= 1;
      break;
    }
  return std::ldexp(static_cast<double>(v), static_cast<int>(32 * low) - 1074);
}

void ExactSum::write(StatsWriter& out) const {
  ExactSum c = *this;
  c.carry();
  out.u8(static_cast<uint8_t>(nan_ | infinite_ << 1 | !c.digits_.empty() << 2));
  for (uint64_t d : c.digits_) out.varint(d);
}

ExactSum ExactSum::read(StatsReader& in) {
  ExactSum s;
  const uint8_t flags = in.u8();
  if (flags > 7) in.fail("an exact sum's flags " + std::to_string(flags));
  s.nan_ = flags & 1;
  s.infinite_ = flags & 2;
  if (flags & 4) {
    s.digits_.resize(kDigits);
    for (uint64_t& d : s.digits_)
      if ((d = in.varint()) > 0xffffffffu) in.fail("an exact sum's digit beyond 32 bits");
  }
  return s;
}

}  // namespace onnxptq::calib
