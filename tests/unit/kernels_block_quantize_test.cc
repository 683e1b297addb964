// com.amd.quark BFPQuantizeDequantize and MXQuantizeDequantize (src/engine/kernels/quantize_block.cc)
// against a reference written here from the formats' definitions (Quark for ONNX's operator docs:
// BFP16, the shared-microexponent MX4/MX6/MX9 of arXiv:2302.08007, the OCP MX v1.0 element
// formats). The reference works on values in double precision (a block's step, a binade's
// quantum, rounding by floor and remainder), not on shifted mantissa bits as the kernel does, and
// moves the block axis last by an explicit transpose. A few values are worked out by hand to
// anchor the reference itself.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ir/float16.h"
#include "ir/model.h"
#include "support/kernel_run.h"
#include "support/one_node.h"

namespace onnxptq {
namespace {

using ir::Attribute;
using ir::DataType;
using ir::Tensor;
using testing::error_of;
using In = testing::NodeInput;
using kernel_test::kInf;
using kernel_test::kNaN;
using kernel_test::kQuark;

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
int exponent_field(float f) { return static_cast<int>((bits(f) >> 23) & 255u); }
bool is_negative(float f) { return (bits(f) >> 31) != 0; }

// ---------------------------------------------------------------------------------------------
// The reference.

// y rounded to an integer: 0 half away from zero, 1 half up, 2 half to even. A zero result takes
// y's sign in modes 0 and 1 (std::round, std::ceil); mode 2 (Quark's floor-based "py3_round")
// gives +0 unless y itself is -0.
double ref_round(double y, int mode) {
  const double f = std::floor(y);
  const double d = y - f;  // in [0, 1)
  double r;
  if (d > 0.5)
    r = f + 1;
  else if (d < 0.5)
    r = f;
  else if (mode == 0)
    r = y > 0 ? f + 1 : f;
  else if (mode == 1)
    r = f + 1;
  else
    r = std::fmod(f, 2.0) == 0 ? f : f + 1;
  if (r == 0) {
    if (mode == 2) return y == 0 ? y : 0.0;
    return std::copysign(0.0, y);
  }
  return r;
}

struct BfpAttrs {
  std::string method = "to_bfp";
  int bit_width = 16;
  int block_size = 8;
  int rounding = 0;
  int sub_block_size = 2;
  int shift_bits = 1;
  bool to_bfloat = false;
  bool compiler = false;
};

int max_finite_exponent(const std::vector<float>& b) {
  int e = 0;
  for (float v : b) {
    int x = exponent_field(v);
    if (x != 255) e = std::max(e, x);
  }
  return e;
}

// to_bfp: step 2^(e - m + 1) below the block's largest exponent e, values clamp(round(x / step))
// in [-(2^m - 1), 2^m - 1] steps; Inf and NaN unchanged.
std::vector<float> ref_bfp(const std::vector<float>& b, const BfpAttrs& a) {
  const int m = a.bit_width - 9;
  int e = max_finite_exponent(b) - 127;
  double step = std::ldexp(1.0, e - m + 1);
  double hi = std::ldexp(1.0, e + 1) - step, lo = -hi;
  if (a.compiler) {
    // A value of the largest exponent that rounds to >= 128 or < -128 steps raises the exponent;
    // the range is then [-2^e * 2^m, 2^e * (2^m - 1)].
    for (float v : b) {
      if (exponent_field(v) != e + 127) continue;
      double r = ref_round(static_cast<float>(v / static_cast<float>(step)), a.rounding);
      if (r >= 128 || r < -128) {
        e += 1;
        step *= 2;
        break;
      }
    }
    hi = std::ldexp(1.0, e) * (std::ldexp(1.0, m) - 1);
    lo = -std::ldexp(1.0, e) * std::ldexp(1.0, m);
  }
  std::vector<float> out;
  for (float v : b) {
    if (!std::isfinite(v)) {
      out.push_back(v);
      continue;
    }
    const float y = v / static_cast<float>(step);  // the division in float32, as the op computes it
    double q = ref_round(y, a.rounding) * step;
    q = std::max(static_cast<double>(static_cast<float>(lo)), std::min(q, static_cast<double>(static_cast<float>(hi))));
    out.push_back(static_cast<float>(q));
  }
  return out;
}

// to_bfp_prime: a sub-block whose largest exponent is below the block's by k binades uses the
// block exponent lowered by min(k, 2^d - 1); each value is round(|x| / unit) units of
// 2^(E - 127 - shift + 1 - m), at most 2^(m+1) - 1, its sign kept (so -0 for small negatives);
// subnormal inputs count as 0; a block with Inf or NaN becomes NaN.
std::vector<float> ref_bfp_prime(const std::vector<float>& b, const BfpAttrs& a) {
  const int m = a.bit_width - 9;
  int eb = 0;
  for (float v : b) eb = std::max(eb, exponent_field(v));
  if (eb == 255) return std::vector<float>(b.size(), from_bits(0x7FFFFFFFu));
  std::vector<float> out;
  for (size_t s = 0; s < b.size(); s += a.sub_block_size) {
    int es = 0;
    for (size_t i = s; i < s + a.sub_block_size; ++i) es = std::max(es, exponent_field(b[i]));
    const int shift = std::min(eb - es, (1 << a.shift_bits) - 1);
    const double unit = std::ldexp(1.0, eb - 127 - shift + 1 - m);
    for (size_t i = s; i < s + a.sub_block_size; ++i) {
      const float v = b[i];
      const double mag = exponent_field(v) == 0 ? 0.0 : std::fabs(static_cast<double>(v));
      const double y = mag / unit;
      double q = std::floor(y);
      const double d = y - q;
      const bool tie_up =
          a.rounding == 0 || (a.rounding == 1 && !is_negative(v)) || (a.rounding == 2 && std::fmod(q, 2.0) != 0);
      if (d > 0.5 || (d == 0.5 && tie_up)) q += 1;
      q = std::min(q, std::ldexp(1.0, m + 1) - 1);
      out.push_back(static_cast<float>((is_negative(v) ? -unit : unit) * q));
    }
  }
  return out;
}

struct MxFormat {
  std::string name;
  int ebits;  // 0: int8
  int mbits;
  int emax;
  double max_norm;
};

const std::vector<MxFormat> kMxFormats = {
    {"int8", 0, 8, 0, 127},      {"fp8_e5m2", 5, 2, 15, 57344}, {"fp8_e4m3", 4, 3, 8, 448},
    {"fp6_e3m2", 3, 2, 4, 28.0}, {"fp6_e2m3", 2, 3, 2, 7.5},    {"fp4_e2m1", 2, 1, 2, 6.0},
};

// OCP MX: scale 2^(E - 127 - emax) from the block's largest finite exponent E; a float element is
// |v| rounded half to even to its binade's quantum 2^(max(floor(log2|v|), 1 - bias) - mbits) (the
// binade below the normals' is the subnormals'), saturated to max_norm, zero as +0; an int8
// element is round(v * 64) in [-128, 127], over 64. Inf and NaN unchanged.
// `coarser`: the scale twice as large; `int8_min`: -127 with symmetric_int8.
std::vector<float> ref_mx(const std::vector<float>& b, const MxFormat& f, int rounding, bool coarser = false,
                          double int8_min = -128) {
  const auto scale = static_cast<float>(std::ldexp(1.0, max_finite_exponent(b) - 127 - f.emax + (coarser ? 1 : 0)));
  std::vector<float> out;
  for (float x : b) {
    if (!std::isfinite(x)) {
      out.push_back(x);
      continue;
    }
    const float v = x / scale;
    double q;
    if (f.ebits == 0) {
      q = std::max(int8_min, std::min(ref_round(static_cast<double>(v) * 64, rounding), 127.0)) / 64;
    } else {
      const double a = std::fabs(static_cast<double>(v));
      const int bias = (1 << (f.ebits - 1)) - 1;
      int binade = a > 0 ? std::ilogb(a) : 0;
      binade = std::max(binade, 1 - bias);
      const double quantum = std::ldexp(1.0, binade - f.mbits);
      double n = std::floor(a / quantum);
      const double d = a / quantum - n;
      if (d > 0.5 || (d == 0.5 && std::fmod(n, 2.0) != 0)) n += 1;
      q = std::min(n * quantum, f.max_norm);
      q = q == 0 ? 0.0 : std::copysign(q, static_cast<double>(v));
    }
    out.push_back(scale * static_cast<float>(q));
  }
  return out;
}

// min_error_scale: of the rule's scale and the one twice as large, the one whose values are
// nearer the block's finite values in squared error (summed in long double; ties keep the rule's).
std::vector<float> ref_mx_min_error(const std::vector<float>& b, const MxFormat& f, int rounding, double int8_min) {
  auto error = [&](const std::vector<float>& q) {
    long double sum = 0;
    for (size_t i = 0; i < b.size(); ++i)
      if (std::isfinite(b[i])) sum += std::pow(static_cast<long double>(b[i]) - static_cast<long double>(q[i]), 2);
    return sum;
  };
  std::vector<float> rule = ref_mx(b, f, rounding, false, int8_min), coarser = ref_mx(b, f, rounding, true, int8_min);
  return error(coarser) < error(rule) ? coarser : rule;
}

// fp32 -> bf16 -> fp32, to nearest even on the bit pattern.
float ref_bfloat16(float v) {
  uint32_t u = bits(v);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return from_bits(u & 0xFFFF0000u);
}

// The whole op: the block axis moved last by a transpose, each row zero-padded to whole blocks,
// `block` applied to each, the padding dropped and the axis moved back.
template <class BlockRef>
std::vector<float> ref_tensor(std::vector<float> x, const std::vector<int64_t>& dims, int64_t axis, int block_size,
                              BlockRef&& block) {
  if (x.size() <= 1) return x;
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (rank == 1) axis = 0;
  if (axis < 0) axis += rank;
  int64_t outer = 1, inner = 1, len = dims[axis];
  for (int64_t d = 0; d < axis; ++d) outer *= dims[d];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= dims[d];
  // transposed[o][i][k] = x[o][k][i]
  std::vector<float> t(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < len; ++k)
      for (int64_t i = 0; i < inner; ++i) t[(o * inner + i) * len + k] = x[(o * len + k) * inner + i];
  const int64_t padded = (len + block_size - 1) / block_size * block_size;
  for (int64_t row = 0; row < outer * inner; ++row) {
    std::vector<float> r(t.begin() + row * len, t.begin() + (row + 1) * len);
    r.resize(padded, 0.0f);
    std::vector<float> q;
    for (int64_t s = 0; s < padded; s += block_size) {
      std::vector<float> blk(r.begin() + s, r.begin() + s + block_size);
      std::vector<float> res = block(blk);
      q.insert(q.end(), res.begin(), res.end());
    }
    std::copy(q.begin(), q.begin() + len, t.begin() + row * len);
  }
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < len; ++k)
      for (int64_t i = 0; i < inner; ++i) x[(o * len + k) * inner + i] = t[(o * inner + i) * len + k];
  return x;
}

std::vector<float> ref_bfp_tensor(std::vector<float> x, const std::vector<int64_t>& dims, int64_t axis,
                                  const BfpAttrs& a) {
  if (a.to_bfloat)
    for (float& v : x) v = ref_bfloat16(v);
  const bool prime = a.method != "to_bfp";
  return ref_tensor(x, dims, axis, a.block_size,
                    [&](const std::vector<float>& blk) { return prime ? ref_bfp_prime(blk, a) : ref_bfp(blk, a); });
}

// ---------------------------------------------------------------------------------------------
// Running the ops.

std::vector<Attribute> bfp_attributes(const BfpAttrs& a, int64_t axis) {
  std::vector<Attribute> v;
  v.push_back(Attribute::of_string("bfp_method", a.method));
  v.push_back(Attribute::of_int("axis", axis));
  v.push_back(Attribute::of_int("bit_width", a.bit_width));
  v.push_back(Attribute::of_int("block_size", a.block_size));
  v.push_back(Attribute::of_int("rounding_mode", a.rounding));
  v.push_back(Attribute::of_int("sub_block_size", a.sub_block_size));
  v.push_back(Attribute::of_int("sub_block_shift_bits", a.shift_bits));
  v.push_back(Attribute::of_int("convert_to_bfloat_before_bfp", a.to_bfloat ? 1 : 0));
  v.push_back(Attribute::of_int("use_compiler_version_cpu_kernel", a.compiler ? 1 : 0));
  return v;
}

std::vector<Attribute> mx_attributes(const std::string& dtype, int block_size, int rounding, int64_t axis,
                                     bool min_error_scale = false, bool symmetric_int8 = false) {
  std::vector<Attribute> v;
  v.push_back(Attribute::of_string("element_dtype", dtype));
  v.push_back(Attribute::of_int("axis", axis));
  v.push_back(Attribute::of_int("block_size", block_size));
  v.push_back(Attribute::of_int("rounding_mode", rounding));
  if (min_error_scale) v.push_back(Attribute::of_int("min_error_scale", 1));
  if (symmetric_int8) v.push_back(Attribute::of_int("symmetric_int8", 1));
  return v;
}

Tensor run_op(const std::string& op, const Tensor& x, std::vector<Attribute> attrs, int threads = 2) {
  auto out = testing::run_node(op, kQuark, 21, {In{"x", x}}, std::move(attrs), 1, threads);
  return out.at(0);
}

std::vector<float> run_float(const std::string& op, const std::vector<float>& x, const std::vector<int64_t>& dims,
                             std::vector<Attribute> attrs, int threads = 2) {
  Tensor y = run_op(op, Tensor::from_values<float>(dims, x), std::move(attrs), threads);
  EXPECT_EQ(y.dtype(), DataType::Float);
  EXPECT_EQ(y.dims(), dims);
  auto v = y.values<float>();
  return {v.begin(), v.end()};
}

// Bit-for-bit equality, naming the first few elements that differ.
void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, const std::vector<float>& x,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (bits(got[i]) == bits(want[i])) continue;
    ADD_FAILURE() << what << ": element " << i << " of input " << x[i] << " (0x" << std::hex << bits(x[i])
                  << ") gives 0x" << bits(got[i]) << " (" << got[i] << "), expected 0x" << bits(want[i]) << " ("
                  << want[i] << ")" << std::dec;
    if (++reported == 5) return;
  }
}

// ---------------------------------------------------------------------------------------------
// Inputs.

// Values of a block spread over `span` binades below 2^top, half of them on a coarse grid (so
// that exact halves of a step occur often), with random signs.
std::vector<float> random_values(std::mt19937& rng, size_t n, int top, int span) {
  std::uniform_int_distribution<int> binade(top - span, top - 1), coin(0, 1), grid(0, 255);
  std::uniform_real_distribution<float> unit(1.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) {
    const int e = binade(rng);
    float mag = coin(rng) ? std::ldexp(unit(rng), e) : std::ldexp(static_cast<float>(grid(rng)) / 256.0f, e);
    x = coin(rng) ? -mag : mag;
  }
  return v;
}

// Blocks of awkward values, each `n` long: zeros, signed zeros, denormals, the largest floats,
// Inf, NaN, exact halves, values just under a binade's end, wide ranges in one block.
std::vector<std::vector<float>> edge_blocks(size_t n) {
  const float denorm = from_bits(0x00000001u), denorm_big = from_bits(0x007FFFFFu);
  const float fmax = std::numeric_limits<float>::max();
  std::vector<std::vector<float>> pools = {
      {0.0f},
      {-0.0f, 0.0f},
      {denorm, -denorm, denorm_big, -denorm_big, 0.0f, from_bits(0x00400000u)},
      {fmax, -fmax, 1e38f, -3e38f, 2.5e38f},
      {kInf, 1.0f, 0.3f, -0.7f},
      {-kInf, 2.0f, -0.5f},
      {kNaN, 1.5f, -0.25f},
      {kInf, kNaN, -kInf},
      {1.0f, -0.5078125f, 0.0078125f, -0.0078125f, 1.9921875f, -1.9921875f, 0.75f, -0.25f, 2.5f / 64},
      {1.999f, -1.999f, 1.99999988f, -1.99999988f, 0.5f},
      {6.0f, 7.0f, 7.5f, 5.0f, -5.5f, 448.0f, 480.0f, 57344.0f, 61440.0f, 28.0f, 30.0f},
      {1e30f, 1e-30f, -1e-30f, 3e-39f, -1e-44f},
      {1.0f, 1e-7f, -1e-7f, 3e-8f, -6e-8f, 1.2e-38f},
  };
  std::vector<std::vector<float>> blocks;
  for (const auto& p : pools) {
    std::vector<float> b(n);
    for (size_t i = 0; i < n; ++i) b[i] = p[(i * 7 + i / p.size()) % p.size()];
    blocks.push_back(b);
  }
  return blocks;
}

std::vector<float> concat(const std::vector<std::vector<float>>& parts) {
  std::vector<float> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

// ---------------------------------------------------------------------------------------------
// Hand-checked values.

// BFP16 of a block whose largest value is 1.0 (exponent 0): m = 7, step 2^(0 - 6) = 1/64, range
// +-127/64. 0.3 * 64 = 19.2 -> 19/64 = 0.296875; -0.5078125 = -32.5/64 is a negative exact half:
// mode 0 -> -33/64, mode 1 -> -32/64, mode 2 -> -32/64 (even); 0.0078125 = 0.5/64: modes 0 and 1
// -> 1/64, mode 2 -> 0; 1.9921875 = 127.5/64 -> 128 -> clamped to 127/64 = 1.984375;
// -0.001 * 64 = -0.064 -> zero: -0 in modes 0 and 1, +0 in mode 2.
TEST(BlockQuantizeTest, Bfp16HandValues) {
  const std::vector<float> x = {1.0f, 0.3f, -0.5078125f, 0.0078125f, 1.9921875f, -0.001f, 0.0f, -1.99f};
  const std::vector<std::vector<float>> want = {
      {1.0f, 0.296875f, -0.515625f, 0.015625f, 1.984375f, -0.0f, 0.0f, -1.984375f},
      {1.0f, 0.296875f, -0.5f, 0.015625f, 1.984375f, -0.0f, 0.0f, -1.984375f},
      {1.0f, 0.296875f, -0.5f, 0.0f, 1.984375f, 0.0f, 0.0f, -1.984375f},
  };
  for (int mode = 0; mode < 3; ++mode) {
    BfpAttrs a;
    a.rounding = mode;
    auto got = run_float("BFPQuantizeDequantize", x, {8}, bfp_attributes(a, 1));
    expect_same_bits(got, want[mode], x, "kernel, mode " + std::to_string(mode));
    expect_same_bits(ref_bfp(x, a), want[mode], x, "reference, mode " + std::to_string(mode));
  }
}

// MX9 (to_bfp_prime, m = 7, sub-blocks of 2, shift up to 1): in a block whose largest value is
// 1.0 (E = 127), a sub-block {0.3, 0.2} has exponent 125 (0.3 = 1.2 * 2^-2), two below, so its
// shift is min(2, 1) = 1 and its unit 2^(0 - 1 + 1 - 7) = 1/128: 0.3 -> 38.4 -> 38/128 = 0.296875,
// 0.2 -> 25.6 -> 26/128 = 0.203125. Beside 1.0 the unit is 1/64: 0.1 -> 6.4 -> 6/64 = 0.09375;
// in a sub-block of its own (exponent 123, shift min(4, 1) = 1) 0.1 -> 12.8 -> 13/128 = 0.1015625.
TEST(BlockQuantizeTest, Mx9HandValues) {
  std::vector<float> x(16, 0.0f);
  x[0] = 1.0f;
  x[1] = 0.1f;
  x[2] = 0.3f;
  x[3] = 0.2f;
  x[4] = 0.1f;
  x[5] = -0.1f;
  std::vector<float> want(16, 0.0f);
  want[0] = 1.0f;
  want[1] = 0.09375f;
  want[2] = 0.296875f;
  want[3] = 0.203125f;
  want[4] = 0.1015625f;
  want[5] = -0.1015625f;
  BfpAttrs a;
  a.method = "to_bfp_prime";
  a.block_size = 16;
  a.rounding = 2;
  auto got = run_float("BFPQuantizeDequantize", x, {16}, bfp_attributes(a, 1));
  expect_same_bits(got, want, x, "kernel");
  expect_same_bits(ref_bfp_prime(x, a), want, x, "reference");
}

// MXINT8 with a block maximum of 1.0: scale 2^(127 - 127 - 0) = 1, elements round(v * 64) / 64 in
// [-128, 127]: 0.3 -> 19/64 = 0.296875; 1.99 -> 127.36 -> 127/64 = 1.984375; -1.999 -> -127.936
// -> -128/64 = -2 (the range is asymmetric).
// MXFP4 (E2M1, values 0, 0.5, 1, 1.5, 2, 3, 4, 6) with a block maximum of 5.0 (exponent 2):
// scale 2^(2 - 2) = 1; 5 is halfway between 4 and 6 -> 4 (even mantissa); 2.5 -> 2; 7 -> 8 ->
// saturated to 6; 0.25 -> 0 and -0.25 -> +0 (a zero element has no sign); 0.75 -> 1; -1.25 -> -1.
TEST(BlockQuantizeTest, MxHandValues) {
  std::vector<float> xi(32, 0.0f);
  xi[0] = 1.0f;
  xi[1] = 0.3f;
  xi[2] = 1.99f;
  xi[3] = -1.999f;
  std::vector<float> wi(32, 0.0f);
  wi[0] = 1.0f;
  wi[1] = 0.296875f;
  wi[2] = 1.984375f;
  wi[3] = -2.0f;
  expect_same_bits(run_float("MXQuantizeDequantize", xi, {32}, mx_attributes("int8", 32, 2, 1)), wi, xi, "int8");
  expect_same_bits(ref_mx(xi, kMxFormats[0], 2), wi, xi, "int8 reference");

  const std::vector<float> xf = {5.0f, 2.5f, 7.0f, 0.25f, -0.25f, 0.75f, -1.25f, 0.0f};
  const std::vector<float> wf = {4.0f, 2.0f, 6.0f, 0.0f, 0.0f, 1.0f, -1.0f, 0.0f};
  expect_same_bits(run_float("MXQuantizeDequantize", xf, {8}, mx_attributes("fp4_e2m1", 8, 0, 1)), wf, xf, "fp4");
  expect_same_bits(ref_mx(xf, kMxFormats[5], 0), wf, xf, "fp4 reference");
}

// ---------------------------------------------------------------------------------------------
// The kernel against the reference.

struct BfpCase {
  std::string name;
  BfpAttrs attrs;
};

std::vector<BfpCase> bfp_cases() {
  std::vector<BfpCase> cases;
  for (int mode = 0; mode < 3; ++mode) {
    const std::string r = " rounding " + std::to_string(mode);
    BfpAttrs bfp16;
    bfp16.rounding = mode;
    cases.push_back({"BFP16" + r, bfp16});
    BfpAttrs compiler = bfp16;
    compiler.compiler = true;
    cases.push_back({"BFP16 compiler version" + r, compiler});
    BfpAttrs bf = bfp16;
    bf.to_bfloat = true;
    cases.push_back({"BFP16 after bfloat16" + r, bf});
    BfpAttrs bfp12 = bfp16;
    bfp12.bit_width = 12;
    bfp12.block_size = 5;
    cases.push_back({"BFP12 blocks of 5" + r, bfp12});
    // The vector kernel's other block sizes; bit_width 10: 1 mantissa bit; 31 and 32: the widest
    // grid that rounds by float addition (22 bits) and the first that does not.
    for (auto [bit_width, size] :
         {std::pair{13, 16}, std::pair{24, 32}, std::pair{10, 8}, std::pair{31, 8}, std::pair{32, 8}}) {
      BfpAttrs wider = bfp16;
      wider.bit_width = bit_width;
      wider.block_size = size;
      cases.push_back({"BFP" + std::to_string(bit_width) + " blocks of " + std::to_string(size) + r, wider});
    }
    for (int bw : {11, 13, 16}) {
      BfpAttrs mx;
      mx.method = "to_bfp_prime";
      mx.bit_width = bw;
      mx.block_size = 16;
      mx.rounding = mode;
      cases.push_back({"MX bit_width " + std::to_string(bw) + r, mx});
    }
    BfpAttrs wide;
    wide.method = "to_bfp_prime_shared";
    wide.bit_width = 13;
    wide.block_size = 12;
    wide.sub_block_size = 3;
    wide.shift_bits = 2;
    wide.rounding = mode;
    cases.push_back({"MX6 sub-blocks of 3, shift 2 bits" + r, wide});
  }
  return cases;
}

TEST(BlockQuantizeTest, BfpRandomAndEdgeBlocksMatchReference) {
  std::mt19937 rng(2027);
  for (const BfpCase& c : bfp_cases()) {
    const size_t bs = static_cast<size_t>(c.attrs.block_size);
    std::vector<std::vector<float>> parts = edge_blocks(bs);
    for (int i = 0; i < 200; ++i) parts.push_back(random_values(rng, bs, (i % 40) - 20, 1 + i % 12));
    parts.push_back(random_values(rng, bs, 127, 30));   // up to the largest binade
    parts.push_back(random_values(rng, bs, -120, 20));  // into the subnormals
    parts.push_back(random_values(rng, bs, 10, 60));    // wider than the mantissa
    const std::vector<float> x = concat(parts);
    const std::vector<int64_t> dims = {static_cast<int64_t>(x.size() / bs), static_cast<int64_t>(bs)};
    auto got = run_float("BFPQuantizeDequantize", x, dims, bfp_attributes(c.attrs, 1));
    expect_same_bits(got, ref_bfp_tensor(x, dims, 1, c.attrs), x, c.name);
    // The same blocks strided, as along the channels of an NCHW tensor: block i is column i.
    const int64_t blocks = dims[0];
    std::vector<float> columns(x.size());
    for (int64_t i = 0; i < blocks; ++i)
      for (size_t j = 0; j < bs; ++j) columns[j * blocks + i] = x[i * bs + j];
    const std::vector<int64_t> strided = {static_cast<int64_t>(bs), blocks};
    expect_same_bits(run_float("BFPQuantizeDequantize", columns, strided, bfp_attributes(c.attrs, 0)),
                     ref_bfp_tensor(columns, strided, 0, c.attrs), columns, c.name + " strided");
  }
}

// Blocks of `bs` values for the MX tests: the edge blocks, random ones of many binades and widths,
// blocks at the top of the float range (where min_error_scale's coarser int8 scale overflows) and
// near the bottom, and blocks whose maximum lies anywhere in [2^emax, 2^(emax + 1)) times the
// scale: above max_norm for most formats, so the block's largest values saturate.
std::vector<float> mx_test_values(std::mt19937& rng, int bs) {
  std::vector<std::vector<float>> parts = edge_blocks(bs);
  for (int i = 0; i < 150; ++i) parts.push_back(random_values(rng, bs, (i % 40) - 20, 1 + i % 16));
  parts.push_back(random_values(rng, bs, 127, 30));
  parts.push_back(random_values(rng, bs, -120, 20));
  for (int i = 0; i < 20; ++i) {
    auto b = random_values(rng, bs, 4, 6);
    b[i % bs] = std::ldexp(1.0f + static_cast<float>(i) / 20.0f, 4);
    parts.push_back(b);
  }
  return concat(parts);
}

// fn(format, rounding mode, block size, name, values, dims) for every MX format, rounding mode and
// block size (32, and 7 with remainders), on mx_test_values from a generator seeded `seed`.
template <class Fn>
void for_each_mx_case(uint32_t seed, Fn fn) {
  std::mt19937 rng(seed);
  for (const MxFormat& f : kMxFormats)
    for (int mode = 0; mode < 3; ++mode)
      for (int bs : {32, 7}) {
        const std::string name = f.name + " rounding " + std::to_string(mode) + " blocks of " + std::to_string(bs);
        const std::vector<float> x = mx_test_values(rng, bs);
        const std::vector<int64_t> dims = {static_cast<int64_t>(x.size() / bs), bs};
        fn(f, mode, bs, name, x, dims);
      }
}

TEST(BlockQuantizeTest, MxRandomAndEdgeBlocksMatchReference) {
  for_each_mx_case(31, [](const MxFormat& f, int mode, int bs, const std::string& name, const std::vector<float>& x,
                          const std::vector<int64_t>& dims) {
    auto got = run_float("MXQuantizeDequantize", x, dims, mx_attributes(f.name, bs, mode, -1));
    auto want = ref_tensor(x, dims, 1, bs, [&](const std::vector<float>& blk) { return ref_mx(blk, f, mode); });
    expect_same_bits(got, want, x, name);
    // The same blocks strided, as along the channels of an NCHW tensor: block i is column i.
    const int64_t blocks = dims[0];
    std::vector<float> columns(x.size());
    for (int64_t i = 0; i < blocks; ++i)
      for (int64_t j = 0; j < bs; ++j) columns[j * blocks + i] = x[i * bs + j];
    const std::vector<int64_t> strided = {bs, blocks};
    expect_same_bits(run_float("MXQuantizeDequantize", columns, strided, mx_attributes(f.name, bs, mode, 0)),
                     ref_tensor(columns, strided, 0, bs, [&](const std::vector<float>& blk) { return ref_mx(blk, f, mode); }),
                     columns, name + " strided");
  });
}

// onnxptq's min_error_scale and symmetric_int8 against the reference, on the same blocks.
TEST(BlockQuantizeTest, MxMinErrorScaleAndSymmetricInt8MatchReference) {
  for_each_mx_case(37, [](const MxFormat& f, int mode, int bs, const std::string& name, const std::vector<float>& x,
                          const std::vector<int64_t>& dims) {
    for (bool symmetric : {false, true}) {
      const double int8_min = symmetric ? -127 : -128;
      auto got = run_float("MXQuantizeDequantize", x, dims, mx_attributes(f.name, bs, mode, -1, true, symmetric));
      auto want = ref_tensor(
          x, dims, 1, bs, [&](const std::vector<float>& blk) { return ref_mx_min_error(blk, f, mode, int8_min); });
      expect_same_bits(got, want, x, name + (symmetric ? " symmetric" : ""));
      auto rule = run_float("MXQuantizeDequantize", x, dims, mx_attributes(f.name, bs, mode, -1, false, symmetric));
      auto rule_want = ref_tensor(
          x, dims, 1, bs, [&](const std::vector<float>& blk) { return ref_mx(blk, f, mode, false, int8_min); });
      expect_same_bits(rule, rule_want, x, name + " floor rule" + (symmetric ? " symmetric" : ""));
    }
  });
}

// FP4 E2M1 (0, 0.5, 1, 1.5, 2, 3, 4, 6): a block of 7.5s takes the scale 2^(2 - 2) = 1 and clips
// every value to 6 (squared error 8 x 2.25); the scale 2 puts them on 4 x 2 = 8 (error 8 x 0.25),
// which min_error_scale takes. MXINT8 at scale 1: -1.9921875 is -127.5 steps of 2^-6, which round
// to -128 in Quark's range and stop at -127 in the symmetric one.
TEST(BlockQuantizeTest, MxMinErrorScaleTakesTheCoarserScaleWhereTheRuleClips) {
  const std::vector<float> sevens(8, 7.5f);
  expect_same_bits(run_float("MXQuantizeDequantize", sevens, {8}, mx_attributes("fp4_e2m1", 8, 0, 0)),
                   std::vector<float>(8, 6.0f), sevens, "floor rule");
  expect_same_bits(run_float("MXQuantizeDequantize", sevens, {8}, mx_attributes("fp4_e2m1", 8, 0, 0, true)),
                   std::vector<float>(8, 8.0f), sevens, "min_error_scale");
  const std::vector<float> x = {1.5f, -1.9921875f};
  expect_same_bits(run_float("MXQuantizeDequantize", x, {2}, mx_attributes("int8", 2, 0, 0)),
                   std::vector<float>{1.5f, -2.0f}, x, "int8");
  expect_same_bits(run_float("MXQuantizeDequantize", x, {2}, mx_attributes("int8", 2, 0, 0, false, true)),
                   std::vector<float>{1.5f, -1.984375f}, x, "symmetric int8");
}

// ---------------------------------------------------------------------------------------------
// Tensor handling: remainders, axes, ranks, float16, one element, threads.

TEST(BlockQuantizeTest, AxesRanksAndRemainders) {
  std::mt19937 rng(5);
  BfpAttrs bfp16;
  bfp16.rounding = 2;
  BfpAttrs mx6;
  mx6.method = "to_bfp_prime";
  mx6.bit_width = 13;
  mx6.block_size = 16;
  struct Shape {
    std::vector<int64_t> dims;
    int64_t axis;
  };
  const std::vector<Shape> shapes = {
      {{37}, 1},  // rank 1: the axis attribute is not read; 37 = 4 * 8 + 5 leaves a remainder
      {{3, 19, 5}, 1}, {{3, 19, 5}, -2}, {{3, 19, 5}, -1},  {{3, 19, 5}, 0},
      {{2, 4, 33}, 2}, {{40, 16}, 1},    {{1, 1, 9, 1}, 2},
      {{2, 13, 21}, 1}, {{1, 20, 3, 11}, 1},  // strided blocks, 8 side by side and the rest
  };
  for (const Shape& s : shapes) {
    int64_t n = 1;
    for (int64_t d : s.dims) n *= d;
    std::vector<float> x = random_values(rng, static_cast<size_t>(n), 3, 12);
    x[static_cast<size_t>(n / 2)] = 0.0f;
    const std::string where = ir::dims_to_string(s.dims) + " axis " + std::to_string(s.axis);
    for (const BfpAttrs& a : {bfp16, mx6}) {
      auto got = run_float("BFPQuantizeDequantize", x, s.dims, bfp_attributes(a, s.axis));
      expect_same_bits(got, ref_bfp_tensor(x, s.dims, s.axis, a), x, a.method + " " + where);
    }
    for (const MxFormat& f : {kMxFormats[0], kMxFormats[2], kMxFormats[5]}) {
      auto got = run_float("MXQuantizeDequantize", x, s.dims, mx_attributes(f.name, 8, 1, s.axis));
      auto want = ref_tensor(x, s.dims, s.axis, 8, [&](const std::vector<float>& b) { return ref_mx(b, f, 1); });
      expect_same_bits(got, want, x, f.name + " " + where);
    }
  }
}

// Blocks of zeros stay zeros, and a one-element tensor is returned as it is (after the bfloat16
// rounding when asked for).
TEST(BlockQuantizeTest, ZerosAndSingleElements) {
  BfpAttrs a;
  const std::vector<float> zeros(24, 0.0f);
  expect_same_bits(run_float("BFPQuantizeDequantize", zeros, {3, 8}, bfp_attributes(a, 1)), zeros, zeros, "bfp");
  expect_same_bits(run_float("MXQuantizeDequantize", zeros, {24}, mx_attributes("fp8_e4m3", 32, 0, 1)), zeros, zeros,
                   "mx");
  for (const std::vector<int64_t>& dims : {std::vector<int64_t>{}, {1}, {1, 1, 1}}) {
    const std::vector<float> one = {0.123456789f};
    expect_same_bits(run_float("BFPQuantizeDequantize", one, dims, bfp_attributes(a, 1)), one, one, "bfp one");
    expect_same_bits(run_float("MXQuantizeDequantize", one, dims, mx_attributes("fp4_e2m1", 32, 0, 5)), one, one,
                     "mx one");
    BfpAttrs bf = a;
    bf.to_bfloat = true;
    // 0.123456789 = 0x3DFCD6EA; bit 15 of 0xD6EA is set and the rest 0x56EA is not zero: up to
    // 0x3DFD0000 = 0.12353515625.
    expect_same_bits(run_float("BFPQuantizeDequantize", one, dims, bfp_attributes(bf, 1)), {0.12353515625f}, one,
                     "bfloat16 one");
  }
}

TEST(BlockQuantizeTest, Float16InputComputedInFloat32) {
  std::mt19937 rng(9);
  std::vector<float> x = random_values(rng, 6 * 20, 2, 10);
  x[3] = kInf;
  x[50] = 6.1e-5f;  // float16 subnormal range starts below 2^-14
  x[51] = -3e-6f;
  std::vector<uint16_t> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = ir::float_to_half(x[i]);
  std::vector<float> xf(x.size());
  for (size_t i = 0; i < x.size(); ++i) xf[i] = ir::half_to_float(h[i]);
  const std::vector<int64_t> dims = {6, 20};
  Tensor input = Tensor::uninitialized(DataType::Float16, dims);
  std::copy(h.begin(), h.end(), input.mutable_values<uint16_t>().begin());

  auto check = [&](const Tensor& y, const std::vector<float>& want, const std::string& what) {
    ASSERT_EQ(y.dtype(), DataType::Float16) << what;
    auto got = y.values<uint16_t>();
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(got[i], ir::float_to_half(want[i])) << what << " element " << i << " input " << xf[i];
  };
  BfpAttrs a;
  a.rounding = 2;
  check(run_op("BFPQuantizeDequantize", input, bfp_attributes(a, 1)), ref_bfp_tensor(xf, dims, 1, a), "bfp16");
  a.method = "to_bfp_prime";
  a.bit_width = 11;
  a.block_size = 16;
  check(run_op("BFPQuantizeDequantize", input, bfp_attributes(a, 0)), ref_bfp_tensor(xf, dims, 0, a), "mx4");
  check(run_op("MXQuantizeDequantize", input, mx_attributes("fp6_e2m3", 32, 0, 1)),
        ref_tensor(xf, dims, 1, 32, [&](const std::vector<float>& b) { return ref_mx(b, kMxFormats[4], 0); }),
        "fp6_e2m3");
}

// Many blocks split over threads give what one thread gives.
TEST(BlockQuantizeTest, ThreadsDoNotChangeResults) {
  std::mt19937 rng(77);
  std::vector<float> x = random_values(rng, 64 * 1000 + 13, 0, 20);
  const std::vector<int64_t> dims = {static_cast<int64_t>(x.size())};
  BfpAttrs a;
  auto one = run_float("BFPQuantizeDequantize", x, dims, bfp_attributes(a, 0), 1);
  auto four = run_float("BFPQuantizeDequantize", x, dims, bfp_attributes(a, 0), 4);
  expect_same_bits(four, one, x, "threads");
  expect_same_bits(one, ref_bfp_tensor(x, dims, 0, a), x, "reference");
}

// ---------------------------------------------------------------------------------------------
// Bad attributes and inputs: one-line errors.

TEST(BlockQuantizeTest, BadAttributesAreErrors) {
  const Tensor x = Tensor::from_values<float>({2, 8}, std::vector<float>(16, 1.0f));
  auto bfp_error = [&](auto change) {
    BfpAttrs a;
    change(a);
    return error_of([&] { run_op("BFPQuantizeDequantize", x, bfp_attributes(a, 1)); });
  };
  EXPECT_NE(bfp_error([](BfpAttrs& a) { a.method = "to_bfp_wide"; }).find("bfp_method 'to_bfp_wide'"),
            std::string::npos);
  EXPECT_NE(bfp_error([](BfpAttrs& a) { a.bit_width = 9; }).find("bit_width 9"), std::string::npos);
  EXPECT_NE(bfp_error([](BfpAttrs& a) { a.bit_width = 33; }).find("bit_width 33"), std::string::npos);
  EXPECT_NE(bfp_error([](BfpAttrs& a) { a.block_size = 0; }).find("block_size 0"), std::string::npos);
  EXPECT_NE(bfp_error([](BfpAttrs& a) { a.rounding = 3; }).find("rounding_mode 3"), std::string::npos);
  EXPECT_NE(bfp_error([](BfpAttrs& a) {
              a.method = "to_bfp_prime";
              a.sub_block_size = 3;
            }).find("sub_block_size 3"),
            std::string::npos);
  EXPECT_NE(bfp_error([](BfpAttrs& a) {
              a.method = "to_bfp_prime";
              a.shift_bits = 9;
            }).find("sub_block_shift_bits 9"),
            std::string::npos);

  EXPECT_NE(
      error_of([&] { run_op("MXQuantizeDequantize", x, mx_attributes("fp5", 32, 0, 1)); }).find("element_dtype 'fp5'"),
      std::string::npos);
  EXPECT_NE(error_of([&] { run_op("MXQuantizeDequantize", x, mx_attributes("int8", -4, 0, 1)); }).find("block_size -4"),
            std::string::npos);
  EXPECT_NE(error_of([&] { run_op("MXQuantizeDequantize", x, mx_attributes("int8", 32, 0, 2)); }).find("axis"),
            std::string::npos);
  BfpAttrs a;
  EXPECT_NE(error_of([&] { run_op("BFPQuantizeDequantize", x, bfp_attributes(a, -3)); }).find("axis"),
            std::string::npos);
  const Tensor ints = Tensor::from_values<int32_t>({4}, {1, 2, 3, 4});
  const std::string msg = error_of([&] { run_op("BFPQuantizeDequantize", ints, bfp_attributes(a, 0)); });
  EXPECT_NE(msg.find("expected float or float16"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

}  // namespace
}  // namespace onnxptq
