// GridSample (opsets 16 to 19): X [N, C, H, W] sampled at the normalized locations of grid
// [N, H_out, W_out, 2], bilinear, nearest or bicubic (Keys' cubic convolution, a = -0.75:
// R. Keys, "Cubic convolution interpolation for digital image processing", IEEE TASSP 1981),
// with zeros, border or reflection padding, as the ONNX operator docs and
// torch.nn.functional.grid_sample define them.
//
// Padding applies to each tap of the interpolation (a tap outside the input reads 0, the nearest
// border pixel, or the pixel reflected into the input), so border and reflection need no clamped
// coordinates. The taps and weights of a run of output points are computed once and applied to
// every channel; the runs are split over threads.
#include <algorithm>
#include <cmath>

#include "engine/kernels/shape.h"

namespace onnxptq::engine::shape {
namespace {

enum class SampleMode { Bilinear, Nearest, Bicubic };
enum class Padding { Zeros, Border, Reflection };

// Output points whose taps are computed together (and kept in cache while each channel reads them).
constexpr int64_t kPointsPerRun = 256;

// Keys' cubic convolution weights of the taps at -1, 0, 1, 2 from a point `t` in [0, 1) past tap 0.
template <class T>
void cubic_weights(T t, T w[4]) {
  constexpr T a = T(-0.75);
  auto near = [&](T d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };       // |d| <= 1
  auto far = [&](T d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };  // 1 < |d| < 2
  w[0] = far(t + 1);
  w[1] = near(t);
  w[2] = near(1 - t);
  w[3] = far(2 - t);
}

class GridSampleKernel : public Kernel {
 public:
  explicit GridSampleKernel(const KernelInfo& info) : align_corners_(info.node.attr_int("align_corners", 0) != 0) {
    const std::string mode = info.node.attr_string("mode", "bilinear");
    if (mode == "bilinear") mode_ = SampleMode::Bilinear;
    else if (mode == "nearest") mode_ = SampleMode::Nearest;
    else if (mode == "bicubic") mode_ = SampleMode::Bicubic;
    else throw Error("mode '" + mode + "' is not bilinear, nearest or bicubic");
    const std::string padding = info.node.attr_string("padding_mode", "zeros");
    if (padding == "zeros") padding_ = Padding::Zeros;
    else if (padding == "border") padding_ = Padding::Border;
    else if (padding == "reflection") padding_ = Padding::Reflection;
    else throw Error("padding_mode '" + padding + "' is not zeros, border or reflection");
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    const Tensor& grid = *in[1];
    auto is_float = [](DataType t) {
      return t == DataType::Float || t == DataType::Double || t == DataType::Float16 || t == DataType::BFloat16;
    };
    if (!is_float(x.dtype())) throw Error("GridSample takes float inputs, got X " + describe(x));
    if (!is_float(grid.dtype())) throw Error("grid must be a float tensor, got " + describe(grid));
    if (x.rank() != 4) throw Error("X " + describe(x) + " must be [N, C, H, W]");
    if (grid.rank() != 4 || grid.dims()[3] != 2) throw Error("grid " + describe(grid) + " must be [N, H_out, W_out, 2]");
    if (grid.dims()[0] != x.dims()[0])
      throw Error("grid " + describe(grid) + " and X " + describe(x) + " differ in batch size");
    const std::vector<int64_t> out_dims = {x.dims()[0], x.dims()[1], grid.dims()[1], grid.dims()[2]};
    checked_element_count(out_dims, "GridSample output");

    if (x.dtype() == DataType::Double) {
      Tensor y = Tensor::uninitialized(DataType::Double, out_dims);
      Tensor g = grid.dtype() == DataType::Double ? grid : float32_as(as_float32(grid), DataType::Double);
      sample<double>(x.values<double>().data(), x.dims(), g.values<double>().data(), out_dims,
                     y.mutable_values<double>().data(), ctx.threads);
      out[0] = std::move(y);
      return;
    }
    Tensor xf = as_float32(x), gf = as_float32(grid);
    Tensor y = Tensor::uninitialized(DataType::Float, out_dims);
    sample<float>(xf.values<float>().data(), x.dims(), gf.values<float>().data(), out_dims,
                  y.mutable_values<float>().data(), ctx.threads);
    out[0] = float32_as(y, x.dtype());
  }

 private:
  // The input coordinate of normalized `v` on an axis of `length` pixels.
  template <class T>
  T denormalize(T v, int64_t length) const {
    const auto len = static_cast<T>(length);
    return align_corners_ ? (v + 1) / 2 * (len - 1) : ((v + 1) * len - 1) / 2;
  }

  // The pixel index tap `i` reads on an axis of `length` pixels, or -1 for a zero.
  int64_t pad_index(int64_t i, int64_t length) const {
    if (i >= 0 && i < length) return i;
    switch (padding_) {
      case Padding::Zeros: return -1;
      case Padding::Border: return std::clamp<int64_t>(i, 0, length - 1);
      case Padding::Reflection: {
        // Reflected at the borders (pixel centres with align_corners, else pixel edges) until inside.
        const double lo = align_corners_ ? 0.0 : -0.5;
        const double hi = align_corners_ ? static_cast<double>(length - 1) : static_cast<double>(length) - 0.5;
        const double range = hi - lo;
        if (range <= 0) return 0;
        double v = static_cast<double>(i);
        const double distance = v < lo ? lo - v : v - hi;
        const double flips = std::floor(distance / range);
        const double rest = distance - flips * range;
        const bool even = std::fmod(flips, 2.0) == 0;
        v = v < lo ? (even ? lo + rest : hi - rest) : (even ? hi - rest : lo + rest);
        return std::clamp<int64_t>(static_cast<int64_t>(v), 0, length - 1);
      }
    }
    return -1;
  }

  int taps() const { return mode_ == SampleMode::Nearest ? 1 : mode_ == SampleMode::Bilinear ? 4 : 16; }

  // Taps (plane offsets, -1 for zero) and weights of one output point at input location (x, y).
  template <class T>
  void point_taps(T x, T y, int64_t height, int64_t width, int64_t* index, T* weight) const {
    const int n = taps();
    if (!std::isfinite(x) || !std::isfinite(y)) {  // no location: a zero
      std::fill(index, index + n, int64_t{-1});
      std::fill(weight, weight + n, T{0});
      return;
    }
    // Far outside, every tap pads alike: clamping keeps the integer casts in range and changes no value.
    const T limit_x = static_cast<T>(padding_ == Padding::Reflection ? 1e15 : static_cast<double>(width) + 4);
    const T limit_y = static_cast<T>(padding_ == Padding::Reflection ? 1e15 : static_cast<double>(height) + 4);
    x = std::clamp(x, -limit_x, limit_x);
    y = std::clamp(y, -limit_y, limit_y);
    auto at = [&](int64_t r, int64_t c) -> int64_t {
      const int64_t rr = pad_index(r, height), cc = pad_index(c, width);
      return rr < 0 || cc < 0 ? -1 : rr * width + cc;
    };
    if (mode_ == SampleMode::Nearest) {
      index[0] = at(static_cast<int64_t>(std::nearbyint(y)), static_cast<int64_t>(std::nearbyint(x)));
      weight[0] = 1;
      return;
    }
    const T fx = std::floor(x), fy = std::floor(y);
    const auto x0 = static_cast<int64_t>(fx), y0 = static_cast<int64_t>(fy);
    if (mode_ == SampleMode::Bilinear) {
      const T dx = x - fx, dy = y - fy;
      index[0] = at(y0, x0);
      index[1] = at(y0, x0 + 1);
      index[2] = at(y0 + 1, x0);
      index[3] = at(y0 + 1, x0 + 1);
      weight[0] = (1 - dy) * (1 - dx);
      weight[1] = (1 - dy) * dx;
      weight[2] = dy * (1 - dx);
      weight[3] = dy * dx;
      return;
    }
    T wx[4], wy[4];
    cubic_weights(x - fx, wx);
    cubic_weights(y - fy, wy);
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 4; ++c) {
        index[r * 4 + c] = at(y0 - 1 + r, x0 - 1 + c);
        weight[r * 4 + c] = wy[r] * wx[c];
      }
  }

  template <class T>
  void sample(const T* x, const std::vector<int64_t>& x_dims, const T* grid, const std::vector<int64_t>& out_dims, T* y,
              int threads) const {
    const int64_t batch = x_dims[0], channels = x_dims[1], height = x_dims[2], width = x_dims[3];
    const int64_t points = out_dims[2] * out_dims[3];
    if (batch * channels * points == 0) return;
    if (height == 0 || width == 0) {
      std::fill(y, y + batch * channels * points, T{0});
      return;
    }
    const int n_taps = taps();
    const int64_t runs = (points + kPointsPerRun - 1) / kPointsPerRun;
    const int64_t min_items = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, channels * kPointsPerRun * n_taps));
    parallel_for(threads, batch * runs, min_items, [&](int64_t first, int64_t last) {
      std::vector<int64_t> index(static_cast<size_t>(kPointsPerRun * n_taps));
      std::vector<T> weight(index.size());
      for (int64_t item = first; item < last; ++item) {
        const int64_t b = item / runs, p0 = (item % runs) * kPointsPerRun;
        const int64_t count = std::min(kPointsPerRun, points - p0);
        const T* g = grid + (b * points + p0) * 2;
        for (int64_t p = 0; p < count; ++p)
          point_taps<T>(denormalize(g[2 * p], width), denormalize(g[2 * p + 1], height), height, width,
                        index.data() + p * n_taps, weight.data() + p * n_taps);
        for (int64_t c = 0; c < channels; ++c) {
          const T* plane = x + (b * channels + c) * height * width;
          T* dst = y + (b * channels + c) * points + p0;
          const int64_t* idx = index.data();
          const T* w = weight.data();
          if (n_taps == 4) {
#pragma omp simd
            for (int64_t p = 0; p < count; ++p) {
              T v = 0;
              for (int t = 0; t < 4; ++t) {
                const int64_t i = idx[p * 4 + t];
                v += i >= 0 ? w[p * 4 + t] * plane[i] : T{0};
              }
              dst[p] = v;
            }
          } else {
            for (int64_t p = 0; p < count; ++p) {
              T v = 0;
              for (int t = 0; t < n_taps; ++t) {
                const int64_t i = idx[p * n_taps + t];
                if (i >= 0) v += w[p * n_taps + t] * plane[i];
              }
              dst[p] = v;
            }
          }
        }
      }
    });
  }

  bool align_corners_;
  SampleMode mode_ = SampleMode::Bilinear;
  Padding padding_ = Padding::Zeros;
};

}  // namespace

void register_grid_sample_kernels(KernelRegistry& r) {
  // GridSample-20 renames the modes (linear, cubic) and takes N-D inputs.
  r.add("", "GridSample", 16, 19, kernel_factory<GridSampleKernel>());
}

}  // namespace onnxptq::engine::shape
