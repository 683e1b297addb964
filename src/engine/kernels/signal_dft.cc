// DFT (opsets 17 to 19) and STFT (17), over the fast Fourier transform of FftPlan.
//
// Signals are [batch, dims..., 1] (real) or [batch, dims..., 2] (real and imaginary parts); as
// ONNX Runtime does, a rank-2 input [batch, n] is a real signal too. Each transformed line is
// gathered into a complex buffer (cut or zero-padded to the DFT length), transformed in double,
// and written back as [..., 2]; lines are split over threads. onesided keeps the first
// floor(n / 2) + 1 values of the full transform, of complex and inverse ones too, as ONNX Runtime
// does (the docs allow it for real forward transforms only).
#include <algorithm>
#include <cmath>
#include <numbers>

#include "engine/kernels/signal.h"
#include "engine/parallel.h"

namespace onnxptq::engine::signal {

namespace {

// Lengths up to this use the direct sum when they are not powers of two (exact twiddles, and
// no slower than three transforms of twice the length).
constexpr int64_t kDirectMax = 64;
// The longest transform: 16M points (Bluestein's method takes up to four times as many values).
constexpr int64_t kMaxLength = int64_t{1} << 24;

bool is_power_of_two(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

}  // namespace

FftPlan::~FftPlan() = default;
FftPlan::FftPlan(FftPlan&&) noexcept = default;

FftPlan::FftPlan(int64_t n, bool inverse) : n_(n) {
  if (n < 1 || n > kMaxLength)
    throw Error("a DFT length must be between 1 and " + std::to_string(kMaxLength) + ", got " + std::to_string(n));
  const double sign = inverse ? 1.0 : -1.0;
  auto unit = [&](double turns) { return std::polar(1.0, sign * 2 * std::numbers::pi * turns); };
  if (is_power_of_two(n)) {
    kind_ = Kind::Radix2;
    twiddle_.resize(static_cast<size_t>(n / 2));
    for (int64_t k = 0; k < n / 2; ++k) twiddle_[k] = unit(static_cast<double>(k) / static_cast<double>(n));
    reverse_.resize(static_cast<size_t>(n));
    int bits = 0;
    while ((int64_t{1} << bits) < n) ++bits;
    for (uint32_t i = 0; i < static_cast<uint32_t>(n); ++i) {
      uint32_t r = 0;
      for (int b = 0; b < bits; ++b) r |= ((i >> b) & 1u) << (bits - 1 - b);
      reverse_[i] = r;
    }
  } else if (n <= kDirectMax) {
    kind_ = Kind::Direct;
    twiddle_.resize(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) twiddle_[k] = unit(static_cast<double>(k) / static_cast<double>(n));
  } else {
    // jk = (j^2 + k^2 - (k - j)^2) / 2, so X[k] = c[k] sum_j (x[j] c[j]) conj(c[k - j]) with the
    // chirp c[k] = exp(+-pi i k^2 / n): a convolution, done as a cyclic one of length m >= 2n - 1.
    kind_ = Kind::Bluestein;
    int64_t m = 1;
    while (m < 2 * n - 1) m <<= 1;
    chirp_.resize(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) {
      const int64_t k2 = (k * k) % (2 * n);  // exact: exp(pi i k^2 / n) has period 2n in k^2
      chirp_[k] = unit(static_cast<double>(k2) / static_cast<double>(2 * n));
    }
    forward_m_ = std::make_unique<FftPlan>(m, false);
    inverse_m_ = std::make_unique<FftPlan>(m, true);
    kernel_fft_.assign(static_cast<size_t>(m), Complex(0, 0));
    for (int64_t k = 0; k < n; ++k) {
      kernel_fft_[k] = std::conj(chirp_[k]);
      if (k > 0) kernel_fft_[m - k] = std::conj(chirp_[k]);
    }
    forward_m_->run(kernel_fft_.data(), nullptr);
    // The inverse transform's 1/m folded in once.
    for (Complex& v : kernel_fft_) v /= static_cast<double>(m);
  }
}

size_t FftPlan::work_size() const {
  switch (kind_) {
    case Kind::Radix2: return 0;
    case Kind::Direct: return static_cast<size_t>(n_);
    case Kind::Bluestein: return kernel_fft_.size();
  }
  return 0;
}

void FftPlan::run_radix2(Complex* a) const {
  const auto n = static_cast<size_t>(n_);
  for (size_t i = 0; i < n; ++i)
    if (i < reverse_[i]) std::swap(a[i], a[reverse_[i]]);
  for (size_t len = 2; len <= n; len <<= 1) {
    const size_t half = len / 2, step = n / len;
    for (size_t start = 0; start < n; start += len) {
      Complex* lo = a + start;
      Complex* hi = lo + half;
      for (size_t j = 0; j < half; ++j) {
        const Complex v = hi[j] * twiddle_[j * step];
        hi[j] = lo[j] - v;
        lo[j] += v;
      }
    }
  }
}

void FftPlan::run(Complex* data, Complex* work) const {
  switch (kind_) {
    case Kind::Radix2: run_radix2(data); return;
    case Kind::Direct: {
      std::copy(data, data + n_, work);
      for (int64_t k = 0; k < n_; ++k) {
        Complex sum(0, 0);
        int64_t index = 0;  // j * k mod n
        for (int64_t j = 0; j < n_; ++j) {
          sum += work[j] * twiddle_[index];
          index += k;
          if (index >= n_) index -= n_;
        }
        data[k] = sum;
      }
      return;
    }
    case Kind::Bluestein: {
      const size_t m = kernel_fft_.size();
      for (int64_t k = 0; k < n_; ++k) work[k] = data[k] * chirp_[k];
      std::fill(work + n_, work + m, Complex(0, 0));
      forward_m_->run(work, nullptr);
      for (size_t k = 0; k < m; ++k) work[k] *= kernel_fft_[k];
      inverse_m_->run(work, nullptr);
      for (int64_t k = 0; k < n_; ++k) data[k] = work[k] * chirp_[k];
      return;
    }
  }
}

namespace {

// Where one line of a batch of signals lies: its first element and the step between elements,
// in complex-or-real elements of the source, and likewise in complex values of the output.
struct Line {
  int64_t src = 0, dst = 0;
};

struct LineGeometry {
  int64_t components = 1;  // 1 real, 2 complex
  int64_t available = 0;   // elements of the line in the source (cut or zero-padded to the plan's n)
  int64_t src_stride = 1;  // between elements of a line, in source elements
  int64_t dst_stride = 1;  // between elements of an output line, in complex values
  int64_t out_len = 0;     // output values per line
  double scale = 1;        // 1/n for the inverse transform
};

// Transforms every line: reads the source (T float or double), multiplies by `window` when given
// (n values), writes out_len complex values to `dst` as pairs of T.
template <class T>
void transform_lines(const T* src, T* dst, const std::vector<Line>& lines, const LineGeometry& g, const FftPlan& plan,
                     const std::vector<double>* window, int threads) {
  const int64_t n = plan.size();
  const int64_t take = std::min(n, g.available);
  const int64_t cost = std::max<int64_t>(1, n * 8);
  parallel_for(threads, static_cast<int64_t>(lines.size()), std::max<int64_t>(1, 16384 / cost),
               [&](int64_t first, int64_t last) {
                 std::vector<Complex> buffer(static_cast<size_t>(n));
                 std::vector<Complex> work(plan.work_size());
                 for (int64_t l = first; l < last; ++l) {
                   const T* s = src + lines[l].src * g.components;
                   for (int64_t k = 0; k < take; ++k) {
                     const T* e = s + k * g.src_stride * g.components;
                     Complex v(static_cast<double>(e[0]), g.components == 2 ? static_cast<double>(e[1]) : 0.0);
                     buffer[k] = window ? v * (*window)[k] : v;
                   }
                   std::fill(buffer.begin() + take, buffer.end(), Complex(0, 0));
                   plan.run(buffer.data(), work.data());
                   T* d = dst + lines[l].dst * 2;
                   for (int64_t k = 0; k < g.out_len; ++k) {
                     d[k * g.dst_stride * 2] = static_cast<T>(buffer[k].real() * g.scale);
                     d[k * g.dst_stride * 2 + 1] = static_cast<T>(buffer[k].imag() * g.scale);
                   }
                 }
               });
}

bool is_float_type(DataType t) {
  return t == DataType::Float || t == DataType::Double || t == DataType::Float16 || t == DataType::BFloat16;
}

// Runs transform_lines on `x` in float (float16 and bfloat16 through float32) or double, into
// a new tensor of `out_dims` of x's type.
Tensor transform_tensor(const Tensor& x, const std::vector<int64_t>& out_dims, const std::vector<Line>& lines,
                        const LineGeometry& g, const FftPlan& plan, const std::vector<double>* window, int threads) {
  if (x.dtype() == DataType::Double) {
    Tensor y = Tensor::uninitialized(DataType::Double, out_dims);
    transform_lines(x.values<double>().data(), y.mutable_values<double>().data(), lines, g, plan, window, threads);
    return y;
  }
  Tensor xf = as_float32(x);
  Tensor y = Tensor::uninitialized(DataType::Float, out_dims);
  transform_lines(xf.values<float>().data(), y.mutable_values<float>().data(), lines, g, plan, window, threads);
  return float32_as(y, x.dtype());
}

// Components (1 real, 2 complex) of a signal of `dims`: the last axis of size 1 or 2, or a rank-2
// real signal. Error naming `what` otherwise.
int64_t signal_components(const std::vector<int64_t>& dims, const std::string& what) {
  if (dims.size() == 2) return 1;
  if (dims.size() >= 3 && (dims.back() == 1 || dims.back() == 2)) return dims.back();
  throw Error(what + " " + ir::dims_to_string(dims) +
              " must be [batch, ..., 1] (real) or [batch, ..., 2] (complex), or [batch, length]");
}

class DftKernel : public Kernel {
 public:
  explicit DftKernel(const KernelInfo& info)
      : axis_(info.node.attr_int("axis", 1)),
        inverse_(info.node.attr_int("inverse", 0)),
        onesided_(info.node.attr_int("onesided", 0)) {
    if (inverse_ != 0 && inverse_ != 1) throw Error("inverse must be 0 or 1, got " + std::to_string(inverse_));
    if (onesided_ != 0 && onesided_ != 1) throw Error("onesided must be 0 or 1, got " + std::to_string(onesided_));
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    if (!is_float_type(x.dtype()))
      throw Error("DFT takes float tensors, got " + std::string(ir::data_type_name(x.dtype())));
    const std::vector<int64_t>& dims = x.dims();
    if (dims.size() < 2) throw Error("input " + ir::dims_to_string(dims) + " must have rank 2 or more");
    const int64_t components = signal_components(dims, "input");
    // The signal's axes: all but the last one of real and imaginary parts.
    std::vector<int64_t> signal(dims.begin(), dims.size() == 2 ? dims.end() : dims.end() - 1);
    const auto rank = static_cast<int64_t>(dims.size());
    const int64_t axis = normalize_axis(axis_, rank);
    if (axis >= static_cast<int64_t>(signal.size()))
      throw Error("axis " + std::to_string(axis_) + " is the real/imaginary axis of input " + ir::dims_to_string(dims));
    int64_t n = signal[axis];
    if (in.size() > 1 && in[1]) {
      n = signal_int_scalar(in[1], "dft_length");
      if (n <= 0) throw Error("dft_length must be positive, got " + std::to_string(n));
    }
    if (n == 0) throw Error("cannot transform the empty axis " + std::to_string(axis) + " of " + ir::dims_to_string(dims));

    LineGeometry g;
    g.components = components;
    g.available = signal[axis];
    g.out_len = onesided_ ? n / 2 + 1 : n;
    g.scale = inverse_ ? 1.0 / static_cast<double>(n) : 1.0;
    std::vector<int64_t> out_dims = signal;
    out_dims[axis] = g.out_len;
    out_dims.push_back(2);
    ir::checked_element_count(out_dims, "DFT output");

    int64_t outer = 1, inner = 1;
    for (int64_t a = 0; a < axis; ++a) outer *= signal[a];
    for (size_t a = static_cast<size_t>(axis) + 1; a < signal.size(); ++a) inner *= signal[a];
    g.src_stride = inner;
    g.dst_stride = inner;
    std::vector<Line> lines;
    lines.reserve(static_cast<size_t>(outer * inner));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) lines.push_back({o * g.available * inner + i, o * g.out_len * inner + i});

    const FftPlan plan(n, inverse_ != 0);
    out[0] = transform_tensor(x, out_dims, lines, g, plan, nullptr, ctx.threads);
  }

 private:
  int64_t axis_, inverse_, onesided_;
};

// STFT: the DFT of each frame of frame_length values, frame_step apart, times the window.
class StftKernel : public Kernel {
 public:
  explicit StftKernel(const KernelInfo& info) : onesided_(info.node.attr_int("onesided", 1)) {
    if (onesided_ != 0 && onesided_ != 1) throw Error("onesided must be 0 or 1, got " + std::to_string(onesided_));
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    if (!is_float_type(x.dtype()))
      throw Error("STFT takes float signals, got " + std::string(ir::data_type_name(x.dtype())));
    const std::vector<int64_t>& dims = x.dims();
    if (dims.size() != 2 && dims.size() != 3)
      throw Error("signal " + ir::dims_to_string(dims) + " must be [batch, length, 1 or 2] or [batch, length]");
    const int64_t components = signal_components(dims, "signal");
    const int64_t batch = dims[0], length = dims[1];
    const int64_t step = signal_int_scalar(in[1], "frame_step");
    if (step <= 0) throw Error("frame_step must be positive, got " + std::to_string(step));

    const Tensor* window = in.size() > 2 ? in[2] : nullptr;
    const Tensor* frame_length = in.size() > 3 ? in[3] : nullptr;
    int64_t n = 0;
    std::vector<double> weights;
    if (window) {
      if (window->rank() != 1) throw Error("window must be 1-D, got shape " + ir::dims_to_string(window->dims()));
      if (!is_float_type(window->dtype()))
        throw Error("window must be a float tensor, got " + std::string(ir::data_type_name(window->dtype())));
      n = window->dims()[0];
      if (window->dtype() == DataType::Double) weights.assign(window->values<double>().begin(), window->values<double>().end());
      else {
        Tensor wf = as_float32(*window);
        weights.assign(wf.values<float>().begin(), wf.values<float>().end());
      }
    }
    if (frame_length) {
      const int64_t fl = signal_int_scalar(frame_length, "frame_length");
      if (window && fl != n)
        throw Error("frame_length " + std::to_string(fl) + " differs from the window's length " + std::to_string(n));
      n = fl;
    }
    if (!window && !frame_length) throw Error("neither a window nor frame_length is given");
    if (n <= 0) throw Error("the frame length must be positive, got " + std::to_string(n));
    if (n > length)
      throw Error("the frame length " + std::to_string(n) + " is longer than the signal " + ir::dims_to_string(dims));

    LineGeometry g;
    g.components = components;
    g.available = n;
    g.out_len = onesided_ ? n / 2 + 1 : n;
    const int64_t frames = (length - n) / step + 1;
    std::vector<int64_t> out_dims = {batch, frames, g.out_len, 2};
    ir::checked_element_count(out_dims, "STFT output");
    std::vector<Line> lines;
    lines.reserve(static_cast<size_t>(batch * frames));
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t f = 0; f < frames; ++f) lines.push_back({b * length + f * step, (b * frames + f) * g.out_len});

    const FftPlan plan(n, false);
    out[0] = transform_tensor(x, out_dims, lines, g, plan, window ? &weights : nullptr, ctx.threads);
  }

 private:
  int64_t onesided_;
};

}  // namespace

void register_dft_kernels(KernelRegistry& r) {
  // DFT-20 takes the axis as an input.
  r.add("", "DFT", 17, 19, kernel_factory<DftKernel>());
  r.add("", "STFT", 17, kLatestOpset, kernel_factory<StftKernel>());
}

}  // namespace onnxptq::engine::signal
