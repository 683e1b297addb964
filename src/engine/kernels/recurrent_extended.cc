// com.amd.quark ExtendedLSTM v1: Quark for ONNX's quantized LSTM custom op, computed as its CPU
// kernel computes it (Quark's quark/onnx/operators/custom_ops/src/custom_op_lstm.cc, which calls
// lstm() of src/lstm/cpu/lstm.h). Quark writes the op only through its tool
// quark/onnx/tools/convert_lstm_to_customlstm.py (onnxptq lstm-to-customlstm); docs/formats.md.
//
// Inputs X, W, R, B are float and are quantized by the op itself, per tensor to uint16 with the
// attributes x_scale / x_zero_point, w_..., r_..., b_... (round half to even, saturate: Quark's
// QuantizeLinear); output Y is float, the uint16 codes of h dequantized with y_scale / y_zero_point.
// Every code c is used as the int16 value c - 32768 ("zero points" below are shifted so too).
// One step of a direction, for each of the 4H gate rows g (ONNX's order i, o, f, c):
//
//   acc[g] = srs(srs(sum_j x_j W[g][j], sx) * qx, sxq) + srs(srs(sum_j h_j R[g][j], sh) * qh, shq)
//            - srs(sum_j x_j * qa, sa) - srs(sum_j h_j * qb, sb) + qc[g]
//
// an int32 in units of 2^-24 (srs: shift right rounding half away from zero, saturated to int32;
// sx = ceil(log2 I), sh = ceil(log2 H)). The multipliers are 16-bit fixed point: m = round(v 2^a)
// with a = 15 - ceil(log2 |v|), for qx = s_x s_w 2^24 (the product s_x s_w rounded to float first),
// qh = s_y s_r 2^24, qa = qx zw, qb = qh zy, and their shifts (sxq = a - sx, ...). qc[g] (double,
// rounded to int32) holds the zero-point cross terms and the two biases (s_b 2^24 (Wb + Rb - 2 zb)).
// Then in float: i, o, f = sigmoid(acc / 2^24) as tanh(acc / 2^25) / 2 + 1/2, c~ = tanh(acc / 2^24),
// c = i c~ + f c, h = o tanh(c); h is rounded to Y's grid every step: code = srs(round(h 2^24) ohs +
// zy' 2^so, so) with ohs = round(2^a / s_y), a = 16 - ceil(log2(1 / s_y)), so = 24 + a. States start
// at h = Y's zero point, c = 0. Both directions are always computed (the reverse over X reversed).
//
// Quark's quirks, reproduced:
//  - a multiplier v 2^a that rounds to 2^15 (v a power of two, or just below one) becomes -2^15:
//    lstm.h stores it in a short;
//  - the h code is saturated to [-65536, 65535] and then stored in a short, so it wraps around:
//    an h above Y's range comes out at the bottom of it, and is fed back so;
//  - the Y zero point used for h (zy' above) is float(zp - 32768) + 1e-9 converted to an integer,
//    which truncates towards zero: a zero point below 32768 is taken one higher (the cross terms
//    in qc and the output's dequantization use the true one);
//  - ohs saturates at 65535 (when 1 / s_y is a power of two, 2^16 rounds to 65535).
// What Quark cannot compute is refused by name: a direction other than bidirectional (Quark reads
// two directions of W, R and B whatever the attribute says), a batch other than 1 (it reads X as
// [seq, input] and writes one batch entry of Y), layout 1, input_forget, a shift outside [0, 31],
// initial states other than zeros and sequence_lens shorter than the sequence (it ignores them),
// the outputs Y_h and Y_c (it has one output).
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "engine/kernel.h"
#include "engine/kernels/recurrent.h"
#include "qmath/quantize.h"

namespace onnxptq::engine::recurrent {
namespace {

constexpr double kAccUnit = 16777216.0;  // 2^24: one unit of the gate accumulators
constexpr int64_t kCodeOffset = 32768;

std::string dims_text(const Tensor& t) { return ir::dims_to_string(t.dims()); }

// The per-tensor uint16 quantization of one operand, from the node's attributes.
struct Operand {
  float scale = 1;
  int64_t zero_point = 0;
};

Operand read_operand(const ir::Node& node, const std::string& prefix) {
  const std::string scale_name = prefix + "_scale", zp_name = prefix + "_zero_point";
  if (!node.find_attribute(scale_name)) throw Error("attribute " + scale_name + " is required");
  if (!node.find_attribute(zp_name)) throw Error("attribute " + zp_name + " is required");
  Operand o{node.attr_float(scale_name, 1), node.attr_int(zp_name, 0)};
  if (!(o.scale > 0) || !std::isfinite(o.scale))
    throw Error(scale_name + " " + std::to_string(o.scale) + " must be positive and finite");
  if (o.zero_point < 0 || o.zero_point > 65535)
    throw Error(zp_name + " " + std::to_string(o.zero_point) + " is outside uint16's [0, 65535]");
  return o;
}

// x / 2^shift rounded half away from zero, saturated to int32 (lstm.h's srs_int).
inline int32_t shift_round(int64_t x, int shift) {
  const int64_t half = shift == 0 ? 0 : int64_t{1} << (shift - 1);
  int64_t m = ((x < 0 ? -x : x) + half) >> shift;
  m = x < 0 ? -m : m;
  return static_cast<int32_t>(std::clamp<int64_t>(m, INT32_MIN, INT32_MAX));
}

// round half away from zero (lstm.h's round_int), saturated to int32.
inline int32_t round_away(double x) {
  double r = 0.5 + std::fabs(x);
  r = x < 0 ? -r : r;
  return static_cast<int32_t>(std::clamp(r, static_cast<double>(INT32_MIN), static_cast<double>(INT32_MAX)));
}

// A 16-bit fixed-point multiplier of v and its shift: m = round(v 2^a), a = 15 - ceil(log2 |v|).
struct FixedPoint {
  int16_t m = 0;
  int shift = 0;
};

FixedPoint fixed_point(double v, const char* what) {
  // 0 (a zero point of 32768 makes qa or qb 0): Quark's shift is then undefined behaviour, but
  // its product with m = 0 is 0 whatever it is.
  if (v == 0) return {};
  const double exponent = 15 - std::ceil(std::log2(std::fabs(v)));
  // lstm.h computes 2^a as the int (1 << a): it must be in [1, 2^30].
  if (!(exponent >= 0 && exponent <= 30))
    throw Error(std::string(what) + " multiplier " + std::to_string(v) + " needs a shift of " +
                std::to_string(exponent) + ", outside the [0, 30] Quark's ExtendedLSTM computes");
  const int a = static_cast<int>(exponent);
  const double s = static_cast<double>(int64_t{1} << a) * v;
  // Rounded half away from zero into a short: 2^15 wraps to -2^15 (Quark's quirk).
  return {static_cast<int16_t>(static_cast<uint16_t>(round_away(s))), a};
}

int checked_shift(int shift, const char* what) {
  if (shift < 0 || shift > 31)
    throw Error(std::string(what) + " shift " + std::to_string(shift) +
                " is outside the [0, 31] Quark's ExtendedLSTM computes");
  return shift;
}

// Everything lstm.h derives from the scales and zero points before the steps (its get_params),
// but the per-row constants qc, which need the weights.
struct StepParams {
  FixedPoint qx, qh, qa, qb;
  int x_sum_shift = 0, h_sum_shift = 0;  // ceil(log2 I), ceil(log2 H)
  int xw_shift = 0, hr_shift = 0;        // the shifts after qx and qh
  uint16_t out_multiplier = 0;           // ohs
  int out_shift = 0;                     // oh_shft
  int16_t h_zero = 0;                    // Y's zero point as h uses it (see the quirks)
};

struct Prepared {
  int64_t input = 0, hidden = 0;
  // Per direction: W and R as int16 values (code - 32768), [4H][I] and [4H][H] as ONNX lays them
  // out; qc per gate row.
  std::vector<int16_t> w[2], r[2];
  std::vector<int32_t> qc[2];
  StepParams p;
};

class ExtendedLstmKernel : public Kernel {
 public:
  explicit ExtendedLstmKernel(const KernelInfo& info) {
    const ir::Node& node = info.node;
    static const char* const kKnown[] = {"x_scale",      "x_zero_point", "w_scale",      "w_zero_point", "r_scale",
                                         "r_zero_point", "b_scale",      "b_zero_point", "y_scale",      "y_zero_point",
                                         "direction",    "hidden_size",  "layout",       "input_forget"};
    for (const ir::Attribute& a : node.attributes)
      if (std::find_if(std::begin(kKnown), std::end(kKnown), [&](const char* k) { return a.name == k; }) ==
          std::end(kKnown))
        throw Error("attribute " + a.name + " is not one of ExtendedLSTM's (Quark's kernel does not read it)");
    x_ = read_operand(node, "x"), w_ = read_operand(node, "w"), r_ = read_operand(node, "r");
    b_ = read_operand(node, "b"), y_ = read_operand(node, "y");
    const std::string direction = node.attr_string("direction", "bidirectional");
    if (direction != "bidirectional")
      throw Error("direction " + direction + ": Quark's ExtendedLSTM computes bidirectional only");
    hidden_ = node.attr_int("hidden_size", -1);
    if (hidden_ <= 0) throw Error("hidden_size is required and must be positive");
    if (int64_t layout = node.attr_int("layout", 0); layout != 0)
      throw Error("layout " + std::to_string(layout) + ": Quark's ExtendedLSTM computes layout 0 only");
    if (node.attr_int("input_forget", 0) != 0) throw Error("input_forget 1: Quark's ExtendedLSTM computes 0 only");
    if (node.outputs().size() > 1)
      for (size_t i = 1; i < node.outputs().size(); ++i)
        if (node.output(i))
          throw Error("output " + std::to_string(i) + " (" + (i == 1 ? "Y_h" : "Y_c") +
                      "): Quark's ExtendedLSTM has output Y only");
    if (node.inputs().size() > 7 && node.input(7)) throw Error("peepholes P: Quark's ExtendedLSTM has none");
    if (info.constant(1) && info.constant(2) && info.constant(3))
      prepared_ = prepare(*info.constant(1), *info.constant(2), *info.constant(3));
  }

  void run(const RunContext&, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    auto input = [&](size_t i) -> const Tensor* { return i < in.size() ? in[i] : nullptr; };
    if (!input(0) || !input(1) || !input(2)) throw Error("inputs X, W and R are required");
    if (!input(3)) throw Error("input B is required: Quark's ExtendedLSTM reads it");
    std::optional<Prepared> made;
    if (!prepared_) made = prepare(*input(1), *input(2), *input(3));
    const Prepared& pr = prepared_ ? *prepared_ : *made;
    const Tensor& x_in = *input(0);
    if (x_in.dtype() != DataType::Float)
      throw Error("X has type " + std::string(ir::data_type_name(x_in.dtype())) + ", expected float");
    if (x_in.rank() != 3) throw Error("X must have rank 3, got shape " + dims_text(x_in));
    const int64_t seq = x_in.dims()[0], batch = x_in.dims()[1];
    if (batch != 1)
      throw Error("X " + dims_text(x_in) + " has batch " + std::to_string(batch) +
                  ": Quark's ExtendedLSTM computes batch 1 only");
    if (x_in.dims()[2] != pr.input)
      throw Error("X " + dims_text(x_in) + " has input size " + std::to_string(x_in.dims()[2]) + ", W has " +
                  std::to_string(pr.input));
    if (const Tensor* s = input(4)) {
      for (int64_t l : read_int64s(*s, "sequence_lens"))
        if (l != seq)
          throw Error("sequence_lens value " + std::to_string(l) + " is not the sequence length " +
                      std::to_string(seq) + ": Quark's ExtendedLSTM ignores sequence_lens");
    }
    for (size_t i : {5, 6})
      if (const Tensor* t = input(i)) {
        Tensor f = as_float32(*t);
        for (float v : f.values<float>())
          if (v != 0)
            throw Error(std::string(i == 5 ? "initial_h" : "initial_c") +
                        " is not all zeros: Quark's ExtendedLSTM starts from zero states");
      }

    const int64_t I = pr.input, H = pr.hidden;
    std::vector<uint16_t> xq(static_cast<size_t>(seq * I));
    qmath::quantize_values<uint16_t>(x_in.values<float>().data(), seq * I, x_.scale,
                                     static_cast<int32_t>(x_.zero_point), xq.data());
    std::vector<int16_t> xs(xq.size());
    for (size_t i = 0; i < xq.size(); ++i) xs[i] = static_cast<int16_t>(int32_t{xq[i]} - kCodeOffset);

    std::vector<uint16_t> yq(static_cast<size_t>(seq * 2 * H));
    std::vector<int16_t> h(static_cast<size_t>(H));
    std::vector<float> c(static_cast<size_t>(H));
    std::vector<int32_t> acc(static_cast<size_t>(4 * H));
    for (int d = 0; d < 2; ++d) {
      std::fill(h.begin(), h.end(), pr.p.h_zero);
      std::fill(c.begin(), c.end(), 0.0f);
      for (int64_t step = 0; step < seq; ++step) {
        const int64_t t = d == 0 ? step : seq - 1 - step;
        run_step(pr, d, xs.data() + t * I, h.data(), c.data(), acc.data());
        uint16_t* y_row = yq.data() + (t * 2 + d) * H;
        for (int64_t j = 0; j < H; ++j) y_row[j] = static_cast<uint16_t>(int32_t{h[j]} + kCodeOffset);
      }
    }
    Tensor y = Tensor::uninitialized(DataType::Float, {seq, 2, 1, H});
    qmath::dequantize_values<uint16_t>(yq.data(), seq * 2 * H, y_.scale, static_cast<int32_t>(y_.zero_point),
                                       y.mutable_values<float>().data());
    if (!out.empty()) out[0] = std::move(y);
  }

 private:
  // One time step of direction d: x is the step's input row, h and c the state, updated.
  static void run_step(const Prepared& pr, int d, const int16_t* x, int16_t* h, float* c, int32_t* acc) {
    const int64_t I = pr.input, H = pr.hidden;
    const StepParams& p = pr.p;
    const int16_t* w = pr.w[d].data();
    const int16_t* r = pr.r[d].data();
    const int32_t* qc = pr.qc[d].data();
    int32_t x_sum = 0, h_sum = 0;
    for (int64_t j = 0; j < I; ++j) x_sum += x[j];
    for (int64_t j = 0; j < H; ++j) h_sum += h[j];
    const int32_t xs = shift_round(int64_t{x_sum} * p.qa.m, p.qa.shift);
    const int32_t hs = shift_round(int64_t{h_sum} * p.qb.m, p.qb.shift);
    for (int64_t g = 0; g < 4 * H; ++g) {
      const int16_t* wg = w + g * I;
      const int16_t* rg = r + g * H;
      int64_t xw = 0, hr = 0;
#pragma omp simd reduction(+ : xw)
      for (int64_t j = 0; j < I; ++j) xw += int32_t{x[j]} * int32_t{wg[j]};
#pragma omp simd reduction(+ : hr)
      for (int64_t j = 0; j < H; ++j) hr += int32_t{h[j]} * int32_t{rg[j]};
      const int32_t xb = shift_round(int64_t{shift_round(xw, p.x_sum_shift)} * p.qx.m, p.xw_shift);
      const int32_t xc = shift_round(int64_t{shift_round(hr, p.h_sum_shift)} * p.qh.m, p.hr_shift);
      // int arithmetic in lstm.h: wraps around on overflow as two's complement does.
      acc[g] = static_cast<int32_t>(static_cast<uint32_t>(xb) + static_cast<uint32_t>(xc) - static_cast<uint32_t>(xs) -
                                    static_cast<uint32_t>(hs) + static_cast<uint32_t>(qc[g]));
    }
    for (int64_t j = 0; j < H; ++j) {
      // float(acc / 2^25), tanh in float (tanhf), then t * 0.5 + 0.5 in double rounded to float.
      const float xi = static_cast<float>(acc[j] / (2.0 * kAccUnit));
      const float xo = static_cast<float>(acc[j + H] / (2.0 * kAccUnit));
      const float xf = static_cast<float>(acc[j + 2 * H] / (2.0 * kAccUnit));
      const float xg = static_cast<float>(acc[j + 3 * H] / kAccUnit);
      const float vi = static_cast<float>(std::tanh(xi) * 0.5 + 0.5);
      const float vo = static_cast<float>(std::tanh(xo) * 0.5 + 0.5);
      const float vf = static_cast<float>(std::tanh(xf) * 0.5 + 0.5);
      const float vg = std::tanh(xg);
      const float c_new = vi * vg + vf * c[j];
      const float h_float = vo * std::tanh(c_new);
      const int32_t h_int = round_away(static_cast<double>(h_float) * kAccUnit);
      // Saturated to [-65536, 65535], then stored in a short: wraps around (Quark's quirk).
      const int64_t code = int64_t{h_int} * p.out_multiplier + int64_t{p.h_zero} * (int64_t{1} << p.out_shift);
      int64_t m = ((code < 0 ? -code : code) + (p.out_shift == 0 ? 0 : int64_t{1} << (p.out_shift - 1))) >> p.out_shift;
      m = std::clamp<int64_t>(code < 0 ? -m : m, -65536, 65535);
      h[j] = static_cast<int16_t>(static_cast<uint16_t>(m));
      c[j] = c_new;
    }
  }

  Prepared prepare(const Tensor& w_in, const Tensor& r_in, const Tensor& b_in) const {
    for (const Tensor* t : {&w_in, &r_in, &b_in})
      if (t->dtype() != DataType::Float)
        throw Error(std::string(t == &w_in   ? "W"
                                : t == &r_in ? "R"
                                             : "B") +
                    " has type " + std::string(ir::data_type_name(t->dtype())) + ", expected float");
    const int64_t H = hidden_;
    if (w_in.rank() != 3 || w_in.dims()[0] != 2 || w_in.dims()[1] != 4 * H)
      throw Error("W has shape " + dims_text(w_in) + ", expected [2," + std::to_string(4 * H) + ",input_size]");
    const int64_t I = w_in.dims()[2];
    if (I <= 0) throw Error("W has shape " + dims_text(w_in) + ": input_size must be positive");
    if (r_in.dims() != std::vector<int64_t>{2, 4 * H, H})
      throw Error("R has shape " + dims_text(r_in) + ", expected " + ir::dims_to_string({2, 4 * H, H}));
    if (b_in.dims() != std::vector<int64_t>{2, 8 * H})
      throw Error("B has shape " + dims_text(b_in) + ", expected " + ir::dims_to_string({2, 8 * H}));

    Prepared pr;
    pr.input = I, pr.hidden = H;
    auto codes = [](const Tensor& t, const Operand& o) {
      std::vector<uint16_t> q(static_cast<size_t>(t.size()));
      qmath::quantize_values<uint16_t>(t.values<float>().data(), t.size(), o.scale, static_cast<int32_t>(o.zero_point),
                                       q.data());
      std::vector<int16_t> v(q.size());
      for (size_t i = 0; i < q.size(); ++i) v[i] = static_cast<int16_t>(int32_t{q[i]} - kCodeOffset);
      return v;
    };
    std::vector<int16_t> w = codes(w_in, w_), r = codes(r_in, r_), b = codes(b_in, b_);

    // The zero points as lstm.h's get_params takes them: float(zp - 32768).
    const float zx = static_cast<float>(x_.zero_point - kCodeOffset),
                zw = static_cast<float>(w_.zero_point - kCodeOffset);
    const float zr = static_cast<float>(r_.zero_point - kCodeOffset),
                zb = static_cast<float>(b_.zero_point - kCodeOffset);
    const float zy = static_cast<float>(y_.zero_point - kCodeOffset);
    // s_x s_w is a float product (both scales are floats), then widened.
    const double q_x = static_cast<double>(x_.scale * w_.scale) * kAccUnit;
    const double q_h = static_cast<double>(y_.scale * r_.scale) * kAccUnit;
    const double q_a = q_x * zw, q_b = q_h * zr;
    StepParams& p = pr.p;
    p.x_sum_shift = checked_shift(static_cast<int>(std::ceil(std::log2(static_cast<double>(I)))), "X W sum");
    p.h_sum_shift = checked_shift(static_cast<int>(std::ceil(std::log2(static_cast<double>(H)))), "H R sum");
    p.qx = fixed_point(q_x, "s_x s_w");
    p.qh = fixed_point(q_h, "s_y s_r");
    p.xw_shift = checked_shift(p.qx.shift - p.x_sum_shift, "X W");
    p.hr_shift = checked_shift(p.qh.shift - p.h_sum_shift, "H R");
    p.qa = fixed_point(q_a, "X zero-point");
    p.qb = fixed_point(q_b, "H zero-point");
    {
      const double qo = 1.0 / y_.scale;
      const int a = 16 - static_cast<int>(std::ceil(std::log2(qo)));
      if (a > 30 || a < -30)
        throw Error("y_scale " + std::to_string(y_.scale) + " is outside what Quark's ExtendedLSTM computes");
      double s = a >= 0 ? static_cast<double>(int64_t{1} << a) : 1.0 / static_cast<double>(int64_t{1} << -a);
      s *= qo;
      p.out_multiplier = static_cast<uint16_t>(std::min<int32_t>(round_away(s), 65535));
      p.out_shift = checked_shift(24 + a, "h output");
      // float + 1e-9 truncated towards zero: a negative zero point is taken one higher (Quark's quirk).
      p.h_zero = static_cast<int16_t>(static_cast<int32_t>(static_cast<double>(zy) + 0.000000001));
    }
    const double q_cc =
        static_cast<double>(I) * q_a * static_cast<double>(zx) + static_cast<double>(H) * q_b * static_cast<double>(zy);
    for (int d = 0; d < 2; ++d) {
      pr.w[d].assign(w.begin() + d * 4 * H * I, w.begin() + (d + 1) * 4 * H * I);
      pr.r[d].assign(r.begin() + d * 4 * H * H, r.begin() + (d + 1) * 4 * H * H);
      pr.qc[d].resize(static_cast<size_t>(4 * H));
      const int16_t* bx = b.data() + d * 8 * H;
      const int16_t* bh = bx + 4 * H;
      for (int64_t g = 0; g < 4 * H; ++g) {
        double v = q_cc, sum = 0;
        for (int64_t j = 0; j < I; ++j) sum += static_cast<double>(pr.w[d][static_cast<size_t>(g * I + j)]);
        v -= q_x * static_cast<double>(zx) * sum;
        sum = 0;
        for (int64_t j = 0; j < H; ++j) sum += static_cast<double>(pr.r[d][static_cast<size_t>(g * H + j)]);
        v -= q_h * static_cast<double>(zy) * sum;
        v += static_cast<double>(b_.scale) * kAccUnit *
             (static_cast<double>(bx[g]) + static_cast<double>(bh[g]) - 2.0 * static_cast<double>(zb));
        pr.qc[d][static_cast<size_t>(g)] = round_away(v);
      }
    }
    return pr;
  }

  Operand x_, w_, r_, b_, y_;
  int64_t hidden_ = 0;
  std::optional<Prepared> prepared_;
};

}  // namespace

void register_extended_lstm_kernel(KernelRegistry& r) {
  r.add("com.amd.quark", "ExtendedLSTM", 1, 1, kernel_factory<ExtendedLstmKernel>());
}

}  // namespace onnxptq::engine::recurrent
