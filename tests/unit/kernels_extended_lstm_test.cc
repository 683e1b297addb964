// com.amd.quark ExtendedLSTM (engine/kernels/recurrent_extended.cc) against a plain scalar
// reference written here from Quark's CPU kernel (quark/onnx/operators/custom_ops/src/lstm/cpu/
// lstm.h and custom_op_lstm.cc): the same integer steps on [seq][input] and [input][4H] arrays of
// shorts, in the order lstm.h takes them. Bit for bit on random cases (shapes, zero points both
// sides of 32768, power-of-two scales whose multiplier wraps to -2^15, Y grids narrow enough for h
// codes to wrap), and the refusals, each by name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <optional>
#include <random>
#include <set>

#include "support/one_node.h"

namespace onnxptq {
// A named namespace: the unity build puts several test files in one translation unit.
namespace extended_lstm_kernel_test {

using testing::attrs;
using testing::error_of;
using testing::NodeInput;

// ---- the reference, from lstm.h

struct Quant {
  float scale;
  int64_t zp;
};

struct Case {
  int64_t seq, input, hidden;
  Quant x, w, r, b, y;
  std::vector<float> X, W, R, B;  // [seq,1,I], [2,4H,I], [2,4H,H], [2,8H]
};

// QuantizeLinear to uint16: round half to even, saturate (Quark's QuantizeLinearApply).
std::vector<int> codes(const std::vector<float>& v, Quant q) {
  std::vector<int> out;
  for (float f : v) {
    float r = std::nearbyint(f / q.scale) + static_cast<float>(q.zp);
    out.push_back(static_cast<int>(std::min(65535.0f, std::max(0.0f, r))));
  }
  return out;
}

long long ref_srs(long long x, int shift, long long lo, long long hi) {
  long long half = shift == 0 ? 0 : (1LL << (shift - 1));
  long long m = ((x < 0 ? -x : x) + half) >> shift;
  if (x < 0) m = -m;
  return m < lo ? lo : m > hi ? hi : m;
}
int srs32(long long x, int shift) { return static_cast<int>(ref_srs(x, shift, INT32_MIN, INT32_MAX)); }

double round_half_away(double x) {
  double r = 0.5 + std::fabs(x);
  return x < 0 ? -r : r;
}

// Quark's params_float_to_fix: returns the shift a, sets the short multiplier (which wraps).
// `ok` false for what Quark's ints cannot hold (the kernel refuses those cases).
int to_fix(double v, short& m, bool& ok) {
  if (v == 0) {
    m = 0;
    return 0;
  }
  int a = 15 - static_cast<int>(std::ceil(std::log2(std::fabs(v))));
  if (a < 0 || a > 30) {
    ok = false;
    return 0;
  }
  double s = static_cast<double>(1 << a) * v;
  m = static_cast<short>(static_cast<int>(round_half_away(s)));
  return a;
}

// The float output Y [seq, 2, 1, H] of Quark's kernel, or nullopt when a shift leaves [0, 31].
std::optional<std::vector<float>> reference(const Case& c) {
  const int S = static_cast<int>(c.seq), I = static_cast<int>(c.input), H = static_cast<int>(c.hidden), G = 4 * H;
  std::vector<int> xq = codes(c.X, c.x), wq = codes(c.W, c.w), rq = codes(c.R, c.r), bq = codes(c.B, c.b);
  // x[t][j], w[d][j][g], r[d][j][g] as shorts (code - 32768)
  std::vector<std::vector<short>> x(S, std::vector<short>(I));
  for (int t = 0; t < S; ++t)
    for (int j = 0; j < I; ++j) x[t][j] = static_cast<short>(xq[t * I + j] - 32768);
  std::vector<std::vector<std::vector<short>>> w(2, std::vector<std::vector<short>>(I, std::vector<short>(G)));
  std::vector<std::vector<std::vector<short>>> r(2, std::vector<std::vector<short>>(H, std::vector<short>(G)));
  for (int d = 0; d < 2; ++d)
    for (int g = 0; g < G; ++g) {
      for (int j = 0; j < I; ++j) w[d][j][g] = static_cast<short>(wq[(d * G + g) * I + j] - 32768);
      for (int j = 0; j < H; ++j) r[d][j][g] = static_cast<short>(rq[(d * G + g) * H + j] - 32768);
    }
  const float zx = static_cast<float>(c.x.zp - 32768), zw = static_cast<float>(c.w.zp - 32768);
  const float zr = static_cast<float>(c.r.zp - 32768), zb = static_cast<float>(c.b.zp - 32768);
  const float zy = static_cast<float>(c.y.zp - 32768);
  const double sg = 16777216.0;
  const double qxf = c.x.scale * c.w.scale * sg, qhf = c.y.scale * c.r.scale * sg;
  const double qaf = qxf * zw, qbf = qhf * zr;
  bool ok = true;
  short qx, qh, qa, qb;
  const int xw_shft = static_cast<int>(std::ceil(std::log2(I))), hr_shft = static_cast<int>(std::ceil(std::log2(H)));
  const int xwq_shft = to_fix(qxf, qx, ok) - xw_shft, hrq_shft = to_fix(qhf, qh, ok) - hr_shft;
  const int xs_shft = to_fix(qaf, qa, ok), hs_shft = to_fix(qbf, qb, ok);
  const double qo = 1.0 / c.y.scale;
  const int oa = 16 - static_cast<int>(std::ceil(std::log2(qo)));
  const double os = (oa >= 0 ? static_cast<double>(1 << oa) : 1.0 / static_cast<double>(1 << -oa)) * qo;
  const unsigned short ohs = static_cast<unsigned short>(std::min(65535.0, std::trunc(round_half_away(os))));
  const short ohz = static_cast<short>(static_cast<int>(zy + 0.000000001));
  const int oh_shft = 24 + oa;
  for (int s : {xw_shft, hr_shft, xwq_shft, hrq_shft, xs_shft, hs_shft, oh_shft})
    if (s < 0 || s > 31) ok = false;
  if (!ok) return std::nullopt;

  std::vector<float> y(static_cast<size_t>(S * 2 * H));
  for (int d = 0; d < 2; ++d) {
    std::vector<int> qc(G);
    const double cc = static_cast<double>(I) * qaf * zx + static_cast<double>(H) * qbf * zy;
    for (int g = 0; g < G; ++g) {
      double v = cc, sw = 0, sr = 0;
      for (int j = 0; j < I; ++j) sw += w[d][j][g];
      for (int j = 0; j < H; ++j) sr += r[d][j][g];
      v -= qxf * zx * sw;
      v -= qhf * zy * sr;
      const double bx = bq[d * 2 * G + g] - 32768, bh = bq[d * 2 * G + G + g] - 32768;
      v += static_cast<double>(c.b.scale) * sg * (bx + bh - 2.0 * zb);
      qc[g] = static_cast<int>(round_half_away(v));
    }
    std::vector<short> h(H, ohz);
    std::vector<float> cell(H, 0);
    for (int step = 0; step < S; ++step) {
      const int t = d == 0 ? step : S - 1 - step;
      int sx = 0, sh = 0;
      for (int j = 0; j < I; ++j) sx += x[t][j];
      for (int j = 0; j < H; ++j) sh += h[j];
      const int xs = srs32(static_cast<long long>(sx) * qa, xs_shft);
      const int hs = srs32(static_cast<long long>(sh) * qb, hs_shft);
      std::vector<int> gate(G);
      for (int g = 0; g < G; ++g) {
        long long a = 0, b = 0;
        for (int j = 0; j < I; ++j) a += static_cast<long long>(x[t][j]) * w[d][j][g];
        for (int j = 0; j < H; ++j) b += static_cast<long long>(h[j]) * r[d][j][g];
        const int xb = srs32(static_cast<long long>(srs32(a, xw_shft)) * qx, xwq_shft);
        const int xc = srs32(static_cast<long long>(srs32(b, hr_shft)) * qh, hrq_shft);
        gate[g] = static_cast<int>(static_cast<unsigned>(xb) + static_cast<unsigned>(xc) - static_cast<unsigned>(xs) -
                                   static_cast<unsigned>(hs) + static_cast<unsigned>(qc[g]));
      }
      for (int j = 0; j < H; ++j) {
        float vi = std::tanh(static_cast<float>(gate[j] / (2.0 * sg))) * 0.5 + 0.5;
        float vo = std::tanh(static_cast<float>(gate[j + H] / (2.0 * sg))) * 0.5 + 0.5;
        float vf = std::tanh(static_cast<float>(gate[j + 2 * H] / (2.0 * sg))) * 0.5 + 0.5;
        float vc = std::tanh(static_cast<float>(gate[j + 3 * H] / sg));
        float cf = vi * vc + vf * cell[j];
        float hf = vo * std::tanh(cf);
        const int hi = static_cast<int>(round_half_away(hf * sg));
        const long long sum = static_cast<long long>(hi) * ohs + static_cast<long long>(ohz) * (1LL << oh_shft);
        h[j] = static_cast<short>(ref_srs(sum, oh_shft, -65536, 65535));
        cell[j] = cf;
        const int code = static_cast<unsigned short>(h[j] + 32768);
        y[static_cast<size_t>((t * 2 + d) * H + j)] = static_cast<float>(code - c.y.zp) * c.y.scale;
      }
    }
  }
  return y;
}

// ---- running the op

std::vector<ir::Attribute> case_attrs(const Case& c) {
  std::vector<ir::Attribute> a;
  const std::pair<const char*, Quant> q[] = {{"x", c.x}, {"w", c.w}, {"r", c.r}, {"b", c.b}, {"y", c.y}};
  for (const auto& [p, v] : q) {
    a.push_back(ir::Attribute::of_float(std::string(p) + "_scale", v.scale));
    a.push_back(ir::Attribute::of_int(std::string(p) + "_zero_point", v.zp));
  }
  a.push_back(ir::Attribute::of_string("direction", "bidirectional"));
  a.push_back(ir::Attribute::of_int("hidden_size", c.hidden));
  a.push_back(ir::Attribute::of_int("layout", 0));
  return a;
}

ir::Tensor tensor(std::vector<int64_t> dims, const std::vector<float>& v) {
  return ir::Tensor::from_values<float>(std::move(dims), v);
}

std::vector<NodeInput> case_inputs(const Case& c, bool constant, bool zero_states) {
  const int64_t G = 4 * c.hidden;
  std::vector<NodeInput> in{{"X", tensor({c.seq, 1, c.input}, c.X)},
                            {"W", tensor({2, G, c.input}, c.W), constant},
                            {"R", tensor({2, G, c.hidden}, c.R), constant},
                            {"B", tensor({2, 2 * G}, c.B), constant}};
  if (zero_states) {
    const std::vector<float> zeros(static_cast<size_t>(2 * c.hidden), 0.0f);
    in.push_back({"", {}});
    in.push_back({"initial_h", tensor({2, 1, c.hidden}, zeros)});
    in.push_back({"initial_c", tensor({2, 1, c.hidden}, zeros)});
  }
  return in;
}

std::vector<ir::Tensor> run_case(const Case& c, bool constant = true, bool zero_states = false) {
  return testing::run_node("ExtendedLSTM", "com.amd.quark", 14, case_inputs(c, constant, zero_states), case_attrs(c));
}

// A random case: values uniform over each tensor's grid (a little beyond for X, which saturates).
Case random_case(std::mt19937& rng, int index) {
  auto pick = [&](std::initializer_list<int64_t> v) {
    return *(v.begin() + std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng));
  };
  auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  Case c;
  c.seq = pick({1, 2, 3, 5, 8, 13});
  c.input = pick({1, 2, 3, 5, 8, 17, 33});
  c.hidden = pick({1, 2, 3, 4, 7, 16, 19});
  // Zero points both sides of 32768, 32768 itself (qa or qb 0), and near the ends.
  auto zp = [&] {
    return pick({0, 100, 12345, 32767, 32768, 32769, 40000, 60000, 65535, static_cast<int64_t>(uniform(0, 65535))});
  };
  // A scale making [lo, hi] about the range of the grid; power of two every fourth case (the
  // multipliers then round to 2^15 and wrap).
  auto scale_for = [&](double range) {
    double s = range / 65535.0 * uniform(0.8, 1.25);
    if (index % 4 == 0) s = std::exp2(std::round(std::log2(s)));
    return static_cast<float>(s);
  };
  c.x = {scale_for(uniform(1, 8)), zp()};
  c.w = {scale_for(uniform(0.2, 2)), zp()};
  c.r = {scale_for(uniform(0.2, 2)), zp()};
  c.b = {scale_for(uniform(0.2, 2)), zp()};
  // Y's grid over h's [-1, 1]; every fifth case a quarter of it, so that h codes wrap.
  c.y = {scale_for(index % 5 == 1 ? 0.5 : 2.0), index % 5 == 1 ? 32768 : zp()};
  // Values in [-span, span] clamped to the grid's range (zero points far from 32768 leave little
  // on one side), times `beyond` (X: a tenth beyond, which saturates).
  auto fill = [&](std::vector<float>& v, int64_t n, Quant q, double fraction, double beyond) {
    const double lo = (0 - q.zp) * static_cast<double>(q.scale), hi = (65535 - q.zp) * static_cast<double>(q.scale);
    const double span = (hi - lo) * fraction;
    v.resize(static_cast<size_t>(n));
    for (float& f : v) f = static_cast<float>(std::clamp(uniform(-span, span), lo, hi) * beyond);
  };
  const int64_t G = 4 * c.hidden;
  fill(c.X, c.seq * c.input, c.x, 0.5, 1.1);
  fill(c.W, 2 * G * c.input, c.w, 0.25, 1.0);
  fill(c.R, 2 * G * c.hidden, c.r, 0.25, 1.0);
  fill(c.B, 2 * 2 * G, c.b, 0.25, 1.0);
  return c;
}

std::string describe(const Case& c) {
  auto q = [](Quant v) { return std::to_string(v.scale) + "/" + std::to_string(v.zp); };
  return "seq " + std::to_string(c.seq) + " input " + std::to_string(c.input) + " hidden " + std::to_string(c.hidden) +
         " x " + q(c.x) + " w " + q(c.w) + " r " + q(c.r) + " b " + q(c.b) + " y " + q(c.y);
}

TEST(ExtendedLstmKernel, MatchesQuarksArithmeticBitForBit) {
  std::mt19937 rng(20241130);
  int compared = 0, refused = 0, wrapped_multiplier = 0, y_zero_below = 0, varied = 0;
  for (int index = 0; compared < 60 && index < 400; ++index) {
    Case c = random_case(rng, index);
    std::optional<std::vector<float>> expected = reference(c);
    if (!expected) {
      // What Quark's ints cannot hold is refused by name.
      EXPECT_NE(error_of([&] { run_case(c); }).find("Quark's ExtendedLSTM computes"), std::string::npos) << describe(c);
      ++refused;
      continue;
    }
    // W, R, B constant (prepared once) or fed; zero initial states fed in every third case.
    std::vector<ir::Tensor> out = run_case(c, index % 2 == 0, index % 3 == 0);
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].dims(), (std::vector<int64_t>{c.seq, 2, 1, c.hidden})) << describe(c);
    auto got = out[0].values<float>();
    ASSERT_EQ(got.size(), expected->size());
    size_t mismatches = 0;
    for (size_t i = 0; i < got.size(); ++i)
      if (std::memcmp(&got[i], &(*expected)[i], sizeof(float)) != 0) ++mismatches;
    EXPECT_EQ(mismatches, 0u) << describe(c);
    // Most outputs are not constant: the steps compute something (zero points at the ends of the
    // grid, and Y grids a quarter of h's range, make a few saturate).
    varied += std::set<float>(got.begin(), got.end()).size() > 2;
    ++compared;
    wrapped_multiplier += index % 4 == 0;
    y_zero_below += c.y.zp < 32768;
  }
  EXPECT_EQ(compared, 60);
  // The draws do reach the quirks.
  EXPECT_GT(wrapped_multiplier, 5);
  EXPECT_GT(y_zero_below, 5);
  EXPECT_GE(varied, 45);
  std::cout << compared << " cases compared (" << varied << " of varied outputs), " << refused << " refused\n";
}

// Quark's quirks, each on a case made to show it, against values worked out by hand.
TEST(ExtendedLstmKernel, HCodesWrapAroundAboveYsRange) {
  // One step, one input, hidden 1, W and R zero; the biases make the gates i = o = 2, f = 0,
  // c~ = 0.5, so h = sigmoid(2) tanh(sigmoid(2) tanh(0.5)) ~ 0.34. Y's grid, zero point 32768 and
  // scale 2^-17, covers [-0.25, 0.25): h's code 32768 + 0.34 * 2^17 is past 65535 (but below the
  // saturation at 32768 + 65535), and wraps to the bottom of the grid: the output is h - 0.5.
  Case c;
  c.seq = 1, c.input = 1, c.hidden = 1;
  c.x = {1.0f / 256, 32768};
  c.w = {1.0f / 4096, 32768};
  c.r = {1.0f / 4096, 32768};
  c.b = {1.0f / 4096, 32768};
  c.y = {1.0f / 131072, 32768};
  c.X = {1.0f};
  c.W = std::vector<float>(8, 0.0f);
  c.R = std::vector<float>(8, 0.0f);
  // Wb then Rb per direction, gates in ONNX's order i, o, f, c.
  c.B = {2, 2, 0, 0.5f, 0, 0, 0, 0, 2, 2, 0, 0.5f, 0, 0, 0, 0};
  std::vector<ir::Tensor> out = run_case(c);
  const float s2 = 1.0f / (1.0f + std::exp(-2.0f));
  const float h_true = s2 * std::tanh(s2 * std::tanh(0.5f));
  ASSERT_GT(h_true, 0.25f);
  ASSERT_LT(h_true, 0.5f);
  for (float got : out[0].values<float>()) EXPECT_NEAR(got, h_true - 0.5f, 2 * c.y.scale);
}

TEST(ExtendedLstmKernel, YZeroPointBelow32768IsTakenOneHigherForH) {
  // All weights and biases zero: every gate is 0, so c = 0.5 * tanh(0) = 0 and h = 0 at each step:
  // h's code is then the zero point as Quark's kernel holds it. With 30000 (below 32768) it holds
  // 30001, and the output dequantized with the true zero point is one step of the grid above 0.
  Case c;
  c.seq = 3, c.input = 2, c.hidden = 2;
  c.x = {1.0f / 1024, 32768};
  c.w = {1.0f / 4096, 32768};
  c.r = {1.0f / 4096, 32768};
  c.b = {1.0f / 4096, 32768};
  c.y = {2.0f / 65536, 30000};
  c.X = {0.5f, -0.25f, 0.125f, 1.0f, -1.0f, 0.0f};
  c.W = std::vector<float>(2 * 8 * 2, 0.0f);
  c.R = std::vector<float>(2 * 8 * 2, 0.0f);
  c.B = std::vector<float>(2 * 16, 0.0f);
  const std::vector<ir::Tensor> below = run_case(c);
  for (float v : below[0].values<float>()) EXPECT_EQ(v, c.y.scale);
  c.y.zp = 40000;  // above 32768: exact
  const std::vector<ir::Tensor> above = run_case(c);
  for (float v : above[0].values<float>()) EXPECT_EQ(v, 0.0f);
}

// ---- refusals

std::string case_error(Case c, std::vector<ir::Attribute> extra = {}, std::vector<NodeInput> more = {},
                       int64_t batch = 1) {
  std::vector<ir::Attribute> a = case_attrs(c);
  for (ir::Attribute& e : extra) {
    std::erase_if(a, [&](const ir::Attribute& x) { return x.name == e.name; });
    a.push_back(std::move(e));
  }
  std::vector<NodeInput> in = case_inputs(c, true, false);
  if (batch != 1) {
    std::vector<float> x(static_cast<size_t>(c.seq * batch * c.input), 0.1f);
    in[0].value = tensor({c.seq, batch, c.input}, x);
  }
  in.insert(in.end(), more.begin(), more.end());
  return error_of([&] { testing::run_node("ExtendedLSTM", "com.amd.quark", 14, in, std::move(a)); });
}

Case small_case() {
  std::mt19937 rng(7);
  Case c = random_case(rng, 1);
  c.seq = 2, c.input = 3, c.hidden = 2;
  c.x = {1.0f / 8192, 32768}, c.w = {1.0f / 16384, 32768}, c.r = {1.0f / 16384, 32768};
  c.b = {1.0f / 16384, 32768}, c.y = {1.0f / 32768, 32768};
  c.X.assign(6, 0.25f), c.W.assign(2 * 8 * 3, 0.1f), c.R.assign(2 * 8 * 2, 0.1f), c.B.assign(2 * 16, 0.1f);
  return c;
}

TEST(ExtendedLstmKernel, RefusesWhatQuarkCannotCompute) {
  const Case c = small_case();
  EXPECT_EQ(error_of([&] { run_case(c); }), "");
  EXPECT_NE(case_error(c, attrs(ir::Attribute::of_string("direction", "forward"))).find("direction forward"),
            std::string::npos);
  EXPECT_NE(case_error(c, attrs(ir::Attribute::of_int("layout", 1))).find("layout 1"), std::string::npos);
  EXPECT_NE(case_error(c, attrs(ir::Attribute::of_int("input_forget", 1))).find("input_forget"), std::string::npos);
  EXPECT_NE(case_error(c, attrs(ir::Attribute::of_float("clip", 1.0f))).find("attribute clip"), std::string::npos);
  EXPECT_NE(case_error(c, attrs(ir::Attribute::of_int("y_zero_point", 70000))).find("y_zero_point 70000"),
            std::string::npos);
  EXPECT_NE(case_error(c, attrs(ir::Attribute::of_float("x_scale", 0.0f))).find("x_scale"), std::string::npos);
  EXPECT_NE(case_error(c, {}, {}, 3).find("has batch 3: Quark's ExtendedLSTM computes batch 1 only"),
            std::string::npos);
  // x_scale * w_scale * 2^24 = 2^10 with input 3: shift 15 - 10 - 2 = 3 fits; 2^14 leaves -1.
  Case big = c;
  big.x.scale = 1.0f / 4, big.w.scale = 1.0f / 256;
  EXPECT_NE(case_error(big).find("X W shift -1 is outside the [0, 31] Quark's ExtendedLSTM computes"),
            std::string::npos);
  // Initial states other than zeros, sequence_lens shorter than the sequence.
  const std::vector<float> ones(4, 1.0f);
  EXPECT_NE(case_error(c, {}, {{"", {}}, {"initial_h", tensor({2, 1, 2}, ones)}}).find("initial_h is not all zeros"),
            std::string::npos);
  ir::Tensor lens = ir::Tensor::from_values<int32_t>({1}, std::vector<int32_t>{1});
  EXPECT_NE(case_error(c, {}, {{"sequence_lens", lens}}).find("sequence_lens value 1"), std::string::npos);
  // No B.
  std::vector<NodeInput> no_b = case_inputs(c, true, false);
  no_b.pop_back();
  EXPECT_NE(error_of([&] {
              testing::run_node("ExtendedLSTM", "com.amd.quark", 14, no_b, case_attrs(c));
            }).find("input B is required"),
            std::string::npos);
  // Y_h asked for.
  EXPECT_NE(error_of([&] {
              testing::run_node("ExtendedLSTM", "com.amd.quark", 14, case_inputs(c, true, false), case_attrs(c), 2);
            }).find("Y_h"),
            std::string::npos);
  // Each message is one line.
  EXPECT_EQ(case_error(c, {}, {}, 3).find('\n'), std::string::npos);
}

}  // namespace extended_lstm_kernel_test
}  // namespace onnxptq
