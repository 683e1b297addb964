// HannWindow, HammingWindow, BlackmanWindow and MelWeightMatrix (opset 17), and the registration
// of the signal family.
//
// The windows are cosine sums (ONNX operator docs; F. Harris, "On the use of windows for harmonic
// analysis with the discrete Fourier transform", Proc. IEEE 1978):
//   w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N),  N = size (periodic) or size - 1,
// computed in double and stored in output_datatype.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "engine/kernels/signal.h"

namespace onnxptq::engine {
namespace signal {

int64_t signal_int_scalar(const Tensor* t, const std::string& what) {
  if (!t) throw Error(what + " is required");
  if (t->size() != 1) throw Error(what + " must be a scalar, got shape " + ir::dims_to_string(t->dims()));
  if (t->dtype() == DataType::Int64) return t->values<int64_t>()[0];
  if (t->dtype() == DataType::Int32) return t->values<int32_t>()[0];
  throw Error(what + " must be int32 or int64, got " + std::string(ir::data_type_name(t->dtype())));
}

double signal_float_scalar(const Tensor* t, const std::string& what) {
  if (!t) throw Error(what + " is required");
  if (t->size() != 1) throw Error(what + " must be a scalar, got shape " + ir::dims_to_string(t->dims()));
  switch (t->dtype()) {
    case DataType::Double: return t->values<double>()[0];
    case DataType::Float:
    case DataType::Float16:
    case DataType::BFloat16: return as_float32(*t).values<float>()[0];
    default: throw Error(what + " must be a float tensor, got " + std::string(ir::data_type_name(t->dtype())));
  }
}

namespace {

// v truncated toward zero and saturated to the range of the integer type I (NaN as 0).
template <class I>
I saturate_cast(double v) {
  if (std::isnan(v)) return I{0};
  const double t = std::trunc(v);
  if (t <= static_cast<double>(std::numeric_limits<I>::lowest())) return std::numeric_limits<I>::lowest();
  if (t >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(t);
}

}  // namespace

Tensor signal_store(const std::vector<double>& values, std::vector<int64_t> dims, DataType type) {
  if (type == DataType::Float16 || type == DataType::BFloat16) {
    Tensor f = Tensor::uninitialized(DataType::Float, dims);
    std::transform(values.begin(), values.end(), f.mutable_values<float>().begin(),
                   [](double v) { return static_cast<float>(v); });
    return float32_as(f, type);
  }
  Tensor y = Tensor::uninitialized(type, std::move(dims));
  bool known = signal_visit_type<float, double>(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::transform(values.begin(), values.end(), y.mutable_values<T>().begin(),
                   [](double v) { return static_cast<T>(v); });
  });
  known = known || signal_visit_type<int8_t, uint8_t, int16_t, uint16_t, int32_t, uint32_t, int64_t, uint64_t>(
                       type, [&](auto tag) {
                         using T = typename decltype(tag)::type;
                         std::transform(values.begin(), values.end(), y.mutable_values<T>().begin(), saturate_cast<T>);
                       });
  if (!known) throw Error("cannot store the output as " + std::string(ir::data_type_name(type)));
  return y;
}

DataType signal_output_type(const ir::Node& node) {
  const int64_t code = node.attr_int("output_datatype", 1);
  switch (code) {
    case 1: case 2: case 3: case 4: case 5: case 6: case 7: case 10: case 11: case 12: case 13: case 16:
      return static_cast<DataType>(code);
    default:
      throw Error("output_datatype " + std::to_string(code) +
                  " is not a float or integer type (1-7, 10-13 or 16 of TensorProto.DataType)");
  }
}

namespace {

struct CosineSum {
  double a0, a1, a2;
};

class WindowKernel : public Kernel {
 public:
  WindowKernel(const KernelInfo& info, CosineSum sum)
      : sum_(sum), type_(signal_output_type(info.node)), periodic_(info.node.attr_int("periodic", 1)) {
    if (periodic_ != 0 && periodic_ != 1) throw Error("periodic must be 0 or 1, got " + std::to_string(periodic_));
  }

  void run(const RunContext&, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const int64_t size = signal_int_scalar(in[0], "size");
    if (size < 0) throw Error("size must not be negative, got " + std::to_string(size));
    ir::checked_element_count({size}, "window size");
    std::vector<double> w(static_cast<size_t>(size));
    // A symmetric window of one point (N = 0) is its peak, 1, as in NumPy and PyTorch.
    const int64_t period = periodic_ ? size : size - 1;
    for (int64_t i = 0; i < size; ++i) {
      if (period == 0) {
        w[i] = 1.0;
        continue;
      }
      const double angle = 2 * std::numbers::pi * static_cast<double>(i) / static_cast<double>(period);
      w[i] = sum_.a0 - sum_.a1 * std::cos(angle) + sum_.a2 * std::cos(2 * angle);
    }
    out[0] = signal_store(w, {size}, type_);
  }

 private:
  CosineSum sum_;
  DataType type_;
  int64_t periodic_;
};

struct WindowFactory {
  CosineSum sum;
  std::unique_ptr<Kernel> operator()(const KernelInfo& info) const { return std::make_unique<WindowKernel>(info, sum); }
};

// MelWeightMatrix: triangular filters with peaks of 1, evenly spaced on the mel scale
// mel(f) = 2595 log10(1 + f / 700) between lower_edge_hertz and upper_edge_hertz, over the
// floor(dft_length / 2) + 1 bins of a one-sided spectrum. The filter edges are the FFT bins
// floor((dft_length + 1) f / sample_rate) of num_mel_bins + 2 points a mel step of
// (high - low) / (num_mel_bins + 2) apart, as in the ONNX operator's reference.
class MelWeightMatrixKernel : public Kernel {
 public:
  explicit MelWeightMatrixKernel(const KernelInfo& info) : type_(signal_output_type(info.node)) {}

  void run(const RunContext&, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const int64_t mel_bins = signal_int_scalar(in[0], "num_mel_bins");
    const int64_t dft_length = signal_int_scalar(in[1], "dft_length");
    const int64_t sample_rate = signal_int_scalar(in[2], "sample_rate");
    const double lower = signal_float_scalar(in[3], "lower_edge_hertz");
    const double upper = signal_float_scalar(in[4], "upper_edge_hertz");
    if (mel_bins <= 0) throw Error("num_mel_bins must be positive, got " + std::to_string(mel_bins));
    if (dft_length <= 0) throw Error("dft_length must be positive, got " + std::to_string(dft_length));
    if (sample_rate <= 0) throw Error("sample_rate must be positive, got " + std::to_string(sample_rate));
    if (!(lower >= 0) || !(upper >= lower) || !std::isfinite(upper))
      throw Error("the edges must satisfy 0 <= lower_edge_hertz <= upper_edge_hertz, got " + std::to_string(lower) +
                  " and " + std::to_string(upper));
    const int64_t spectrum_bins = dft_length / 2 + 1;
    ir::checked_element_count({spectrum_bins, mel_bins}, "MelWeightMatrix output");

    auto mel = [](double hz) { return 2595 * std::log10(1 + hz / 700); };
    const double low_mel = mel(lower), high_mel = mel(upper);
    const double step = (high_mel - low_mel) / static_cast<double>(mel_bins + 2);
    std::vector<int64_t> edges(static_cast<size_t>(mel_bins + 2));
    for (size_t i = 0; i < edges.size(); ++i) {
      const double hz = 700 * (std::pow(10.0, (low_mel + step * static_cast<double>(i)) / 2595) - 1);
      const double bin = std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(sample_rate));
      if (!(bin >= 0 && bin < static_cast<double>(spectrum_bins)))
        throw Error("upper_edge_hertz " + std::to_string(upper) + " lies beyond the " + std::to_string(spectrum_bins) +
                    " bins of a " + std::to_string(dft_length) + "-point DFT at sample_rate " +
                    std::to_string(sample_rate));
      edges[i] = static_cast<int64_t>(bin);
    }

    std::vector<double> w(static_cast<size_t>(spectrum_bins * mel_bins), 0.0);
    for (int64_t m = 0; m < mel_bins; ++m) {
      const int64_t left = edges[m], center = edges[m + 1], right = edges[m + 2];
      auto at = [&](int64_t bin) -> double& { return w[static_cast<size_t>(bin * mel_bins + m)]; };
      if (center == left) at(center) = 1;
      else
        for (int64_t j = left; j <= center; ++j)
          at(j) = static_cast<double>(j - left) / static_cast<double>(center - left);
      for (int64_t j = center; j < right; ++j) at(j) = static_cast<double>(right - j) / static_cast<double>(right - center);
    }
    out[0] = signal_store(w, {spectrum_bins, mel_bins}, type_);
  }

 private:
  DataType type_;
};

}  // namespace

void register_window_kernels(KernelRegistry& r) {
  r.add("", "HannWindow", 17, kLatestOpset, WindowFactory{{0.5, 0.5, 0.0}});
  r.add("", "HammingWindow", 17, kLatestOpset, WindowFactory{{25.0 / 46.0, 21.0 / 46.0, 0.0}});
  r.add("", "BlackmanWindow", 17, kLatestOpset, WindowFactory{{0.42, 0.5, 0.08}});
  r.add("", "MelWeightMatrix", 17, kLatestOpset, kernel_factory<MelWeightMatrixKernel>());
}

}  // namespace signal

void register_signal_kernels(KernelRegistry& r) {
  signal::register_window_kernels(r);
  signal::register_dft_kernels(r);
}

}  // namespace onnxptq::engine
