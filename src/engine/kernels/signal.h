// Private header of the signal family (opset 17's audio ops): signal.cc has the windows,
// MelWeightMatrix and the registration, signal_dft.cc the fast Fourier transform, DFT and STFT.
#pragma once

#include <complex>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "engine/kernel.h"

namespace onnxptq::engine::signal {

void register_window_kernels(KernelRegistry& r);  // HannWindow, HammingWindow, BlackmanWindow, MelWeightMatrix
void register_dft_kernels(KernelRegistry& r);     // DFT, STFT

using Complex = std::complex<double>;

// The discrete Fourier transform of one length, X[k] = sum_j x[j] exp(-+2 pi i jk / n) (the sign
// + for the inverse; unscaled), computed in double: radix-2 Cooley-Tukey for powers of two, the
// direct sum for short other lengths, and Bluestein's chirp z-transform (a convolution done with
// power-of-two transforms, L. Bluestein, "A linear filtering approach to the computation of the
// discrete Fourier transform", 1970) for long ones, so any length costs O(n log n).
class FftPlan {
 public:
  FftPlan(int64_t n, bool inverse);
  ~FftPlan();
  FftPlan(FftPlan&&) noexcept;

  int64_t size() const { return n_; }
  // Scratch run() needs, in complex values.
  size_t work_size() const;
  // data[0..n) replaced by its transform; `work` holds work_size() values.
  void run(Complex* data, Complex* work) const;

 private:
  enum class Kind { Radix2, Direct, Bluestein };
  void run_radix2(Complex* a) const;

  int64_t n_;
  Kind kind_;
  std::vector<Complex> twiddle_;   // exp(+-2 pi i k / n): k < n/2 (radix-2) or k < n (direct)
  std::vector<uint32_t> reverse_;  // radix-2: the bit-reversed index of each index
  // Bluestein: the chirp exp(+-pi i k^2 / n), k < n, the transform of its conjugate's
  // symmetric extension to m >= 2n - 1 values, and the radix-2 plans of length m.
  std::vector<Complex> chirp_, kernel_fft_;
  std::unique_ptr<FftPlan> forward_m_, inverse_m_;
};

// Calls f(std::type_identity<T>{}) for the C++ type T of `type` among Ts; false if none matches.
template <class... Ts, class F>
bool signal_visit_type(DataType type, F&& f) {
  return ((type == ir::data_type_of<Ts>() ? (f(std::type_identity<Ts>{}), true) : false) || ...);
}

// The one value of a scalar (or one-element) int32/int64 input named `what`.
int64_t signal_int_scalar(const Tensor* t, const std::string& what);
// The one value of a scalar (or one-element) float input named `what`, as double.
double signal_float_scalar(const Tensor* t, const std::string& what);

// `values` as a 1-D or 2-D tensor of `type` (any float or integer type; integers truncated toward
// zero and saturated, as Cast does).
Tensor signal_store(const std::vector<double>& values, std::vector<int64_t> dims, DataType type);
// The output_datatype attribute of the windows and MelWeightMatrix, checked: a float or integer type.
DataType signal_output_type(const ir::Node& node);

}  // namespace onnxptq::engine::signal
