// Resize (opsets 10, 11, 13, 18, 19) and Upsample (7 to 9, Resize's ancestor).
//
// Each resized axis gets a plan: for every output index, the input indices it reads and their
// weights. Nearest mode then gathers elements of any type by width; linear and cubic modes work
// in float32, one axis at a time (the N-D filters of Resize are products of 1-D ones).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "engine/fusion.h"
#include "engine/kernels/shape.h"

namespace onnxptq::engine::shape {
namespace {

enum class Mode { Nearest, Linear, Cubic };
enum class Coord {
  HalfPixel,
  HalfPixelSymmetric,
  PytorchHalfPixel,
  AlignCorners,
  Asymmetric,
  TfHalfPixelForNN,
  TfCropAndResize
};
// Simple is the rule of Upsample and Resize-10, which had no nearest_mode: as ONNX Runtime does,
// ceil when shrinking the axis, truncate when growing it.
enum class NearestMode { RoundPreferFloor, RoundPreferCeil, Floor, Ceil, Simple };
enum class AspectPolicy { Stretch, NotLarger, NotSmaller };

// How one axis is resized.
struct AxisGeometry {
  int64_t in = 0, out = 0;
  double scale = 1;            // out / in as the op defines it (from scales, or sizes / in)
  double length_resized = 0;   // scale * in, the output length before flooring
  double roi_start = 0, roi_end = 1;
};

// Output index -> input indices and weights (taps per output index), for one axis.
struct AxisPlan {
  int64_t out = 0;
  int taps = 1;
  std::vector<int64_t> index;    // out * taps, clamped into the input
  std::vector<float> weight;     // out * taps (not for nearest)
  std::vector<uint8_t> outside;  // out: extrapolated (tf_crop_and_resize); empty when none is
  bool identity = false;
};

double cubic_kernel(double t, double a) {
  t = std::fabs(t);
  if (t <= 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
  if (t < 2) return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
  return 0;
}

// out[j] = sum over taps of weight * in[index] along a contiguous row (a gather per element).
void filter_row(const float* in, float* out, const AxisPlan& p) {
  const int64_t* idx = p.index.data();
  const float* w = p.weight.data();
  if (p.taps == 2) {
    for (int64_t j = 0; j < p.out; ++j) out[j] = w[2 * j] * in[idx[2 * j]] + w[2 * j + 1] * in[idx[2 * j + 1]];
    return;
  }
  for (int64_t j = 0; j < p.out; ++j) {
    float v = 0;
    for (int t = 0; t < p.taps; ++t) v += w[j * p.taps + t] * in[idx[j * p.taps + t]];
    out[j] = v;
  }
}

// out row j (of `inner` values) = sum over taps of weight * in row index: whole rows at a time
// (omp simd: the output never aliases the input).
void filter_rows(const float* in, float* out, int64_t j, int64_t inner, const AxisPlan& p) {
  const int64_t* idx = p.index.data() + j * p.taps;
  const float* w = p.weight.data() + j * p.taps;
  const float* s0 = in + idx[0] * inner;
  float w0 = w[0];
  if (p.taps == 2) {
    const float* s1 = in + idx[1] * inner;
    float w1 = w[1];
#pragma omp simd
    for (int64_t e = 0; e < inner; ++e) out[e] = w0 * s0[e] + w1 * s1[e];
    return;
  }
#pragma omp simd
  for (int64_t e = 0; e < inner; ++e) out[e] = w0 * s0[e];
  for (int t = 1; t < p.taps; ++t) {
    if (w[t] == 0) continue;
    const float* s = in + idx[t] * inner;
    float wt = w[t];
#pragma omp simd
    for (int64_t e = 0; e < inner; ++e) out[e] += wt * s[e];
  }
}

// One axis of a separable filter: src [outer, in_dim, inner] -> dst [outer, p.out, inner].
void filter_axis(const float* src, float* dst, int64_t outer, int64_t in_dim, int64_t inner, const AxisPlan& p,
                 int threads) {
  if (inner == 1) {
    parallel_for(threads, outer, min_chunk_for(p.out * 4 * p.taps), [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) filter_row(src + o * in_dim, dst + o * p.out, p);
    });
    return;
  }
  parallel_for(threads, outer * p.out, min_chunk_for(inner * 4 * p.taps), [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      int64_t o = item / p.out;
      filter_rows(src + o * in_dim * inner, dst + item * inner, item % p.out, inner, p);
    }
  });
}

// The two innermost axes of `planes` planes [in_h, in_w] -> [ph.out, pw.out]: each needed input
// row resized across, then output rows blended from those.
void filter_planes(const float* src, float* dst, int64_t in_h, int64_t in_w, const AxisPlan& ph, const AxisPlan& pw,
                   int64_t planes, int threads) {
  std::vector<uint8_t> needed(static_cast<size_t>(in_h), 0);
  for (int64_t i : ph.index) needed[i] = 1;
  int64_t out_w = pw.out, out_plane = ph.out * out_w;
  parallel_for(threads, planes, min_chunk_for(out_plane * 4), [&](int64_t begin, int64_t end) {
    std::vector<float> rows(static_cast<size_t>(in_h * out_w));
    for (int64_t p = begin; p < end; ++p) {
      const float* plane = src + p * in_h * in_w;
      for (int64_t y = 0; y < in_h; ++y)
        if (needed[y]) filter_row(plane + y * in_w, rows.data() + y * out_w, pw);
      for (int64_t j = 0; j < ph.out; ++j) filter_rows(rows.data(), dst + p * out_plane + j * out_w, j, out_w, ph);
    }
  });
}

class ResizeKernel : public Kernel {
 public:
  // `channels_last`: NhwcResize of the channels-last pass (engine/layout.h), X [N, H, W, C] with
  // roi, scales and sizes still given in N C H W order, and the ONNX opset in `onnx_opset`.
  ResizeKernel(const KernelInfo& info, bool upsample, bool channels_last = false)
      : opset_(channels_last ? info.node.attr_int("onnx_opset", 11) : info.opset),
        upsample_(upsample),
        channels_last_(channels_last) {
    const ir::Node& n = info.node;
    std::string mode = n.attr_string("mode", "nearest");
    if (mode == "nearest") mode_ = Mode::Nearest;
    else if (mode == "linear" || (upsample && mode == "bilinear")) mode_ = Mode::Linear;
    else if (mode == "cubic" && !upsample && opset_ >= 11) mode_ = Mode::Cubic;
    else
      throw unsupported("mode '" + mode + "' is not supported (nearest, linear" + (upsample || opset_ < 11 ? "" : ", cubic") +
                  ")");

    bool legacy = upsample || opset_ < 11;  // asymmetric coordinates and the Simple nearest rule only
    coord_ = legacy ? Coord::Asymmetric : coord_of(n.attr_string("coordinate_transformation_mode", "half_pixel"));
    nearest_ = legacy ? NearestMode::Simple : nearest_of(n.attr_string("nearest_mode", "round_prefer_floor"));
    if (!legacy) {
      cubic_a_ = n.attr_float("cubic_coeff_a", -0.75f);
      exclude_outside_ = n.attr_int("exclude_outside", 0) != 0;
      extrapolation_ = n.attr_float("extrapolation_value", 0.0f);
    }
    if (!upsample && opset_ >= 18) {
      antialias_ = n.attr_int("antialias", 0) != 0;
      if (std::vector<int64_t> axes = n.attr_ints("axes", {}); !axes.empty()) axes_ = axes;
      std::string policy = n.attr_string("keep_aspect_ratio_policy", "stretch");
      if (policy == "stretch") policy_ = AspectPolicy::Stretch;
      else if (policy == "not_larger") policy_ = AspectPolicy::NotLarger;
      else if (policy == "not_smaller") policy_ = AspectPolicy::NotSmaller;
      else throw Error("keep_aspect_ratio_policy '" + policy + "' is not stretch, not_larger or not_smaller");
    }
    if (upsample && opset_ < 9) {
      if (!n.find_attribute("scales")) throw Error("the scales attribute is required");
      for (float s : n.attr_floats("scales", {})) scales_attr_.push_back(s);
    }
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    std::vector<AxisGeometry> geometry;
    if (channels_last_) {
      if (x.rank() != 4) throw Error("NhwcResize takes an [N, H, W, C] input, got " + describe(x));
      const std::vector<int64_t>& d = x.dims();
      std::vector<AxisGeometry> nchw = resolve_geometry(x, {d[0], d[3], d[1], d[2]}, in);
      geometry = {nchw[0], nchw[2], nchw[3], nchw[1]};
    } else {
      geometry = resolve_geometry(x, x.dims(), in);
    }
    std::vector<int64_t> dims;
    for (const AxisGeometry& g : geometry) dims.push_back(g.out);
    std::vector<AxisPlan> plans;
    for (const AxisGeometry& g : geometry) plans.push_back(plan_axis(g));
    if (ir::element_count(dims) == 0) {
      out[0] = Tensor::uninitialized(x.dtype(), dims);
      return;
    }
    if (std::all_of(plans.begin(), plans.end(), [](const AxisPlan& p) { return p.identity; })) {
      out[0] = x.dtype() == DataType::String ? x : Tensor(x.dtype(), x.dims(), x.bytes());
      return;
    }
    out[0] = mode_ == Mode::Nearest ? resize_nearest(x, plans, dims, ctx.threads)
                                    : resize_filtered(x, plans, dims, ctx.threads);
  }

 private:
  static Coord coord_of(const std::string& s) {
    if (s == "half_pixel") return Coord::HalfPixel;
    if (s == "half_pixel_symmetric") return Coord::HalfPixelSymmetric;
    if (s == "pytorch_half_pixel") return Coord::PytorchHalfPixel;
    if (s == "align_corners") return Coord::AlignCorners;
    if (s == "asymmetric") return Coord::Asymmetric;
    if (s == "tf_half_pixel_for_nn") return Coord::TfHalfPixelForNN;
    if (s == "tf_crop_and_resize") return Coord::TfCropAndResize;
    throw unsupported("coordinate_transformation_mode '" + s + "' is not supported");
  }

  static NearestMode nearest_of(const std::string& s) {
    if (s == "round_prefer_floor") return NearestMode::RoundPreferFloor;
    if (s == "round_prefer_ceil") return NearestMode::RoundPreferCeil;
    if (s == "floor") return NearestMode::Floor;
    if (s == "ceil") return NearestMode::Ceil;
    throw Error("nearest_mode '" + s + "' is not round_prefer_floor, round_prefer_ceil, floor or ceil");
  }

  // Output sizes, scales and regions of interest of every axis, from the inputs of this opset.
  // `dims`: X's dims in the order the inputs name its axes.
  std::vector<AxisGeometry> resolve_geometry(const Tensor& x, const std::vector<int64_t>& dims,
                                             std::span<const Tensor* const> in) const {
    auto rank = static_cast<int64_t>(dims.size());
    auto input = [&](size_t i) -> const Tensor* {
      return i < in.size() && in[i] && in[i]->size() > 0 ? in[i] : nullptr;
    };
    const Tensor* roi = nullptr;
    const Tensor* scales = nullptr;
    const Tensor* sizes = nullptr;
    if (upsample_ || opset_ < 11) {
      scales = input(1);
    } else {
      roi = input(1);
      scales = input(2);
      sizes = input(3);
    }
    std::vector<int64_t> axes;
    for (int64_t a : axes_.value_or(std::vector<int64_t>{})) {
      int64_t axis = normalize_axis(a, rank);
      if (std::find(axes.begin(), axes.end(), axis) != axes.end())
        throw Error("axes name axis " + std::to_string(axis) + " twice");
      axes.push_back(axis);
    }
    if (!axes_) {
      axes.resize(dims.size());
      std::iota(axes.begin(), axes.end(), int64_t{0});
    }
    auto n = static_cast<int64_t>(axes.size());

    std::vector<AxisGeometry> g(dims.size());
    for (size_t a = 0; a < dims.size(); ++a) g[a] = {dims[a], dims[a], 1.0, static_cast<double>(dims[a]), 0, 1};

    if (roi && coord_ == Coord::TfCropAndResize) {
      Tensor r = as_float32(*roi);
      if (r.size() != 2 * n) throw Error("roi " + describe(*roi) + " should hold " + std::to_string(2 * n) + " values");
      auto v = r.values<float>();
      for (int64_t i = 0; i < n; ++i) {
        g[axes[i]].roi_start = v[i];
        g[axes[i]].roi_end = v[i + n];
      }
    }

    std::vector<double> scale_values;
    if (upsample_ && opset_ < 9) scale_values = scales_attr_;
    else if (scales) {
      if (sizes) throw Error("scales and sizes cannot both be given");
      Tensor s = as_float32(*scales);
      for (float f : s.values<float>()) scale_values.push_back(f);
    }
    if (!scale_values.empty()) {
      if (static_cast<int64_t>(scale_values.size()) != n)
        throw Error("scales has " + std::to_string(scale_values.size()) + " values for " + std::to_string(n) +
                    " axes of " + describe(x));
      for (int64_t i = 0; i < n; ++i) {
        double s = scale_values[i];
        if (!(s > 0) || !std::isfinite(s)) throw Error("scale " + std::to_string(s) + " is not a positive number");
        AxisGeometry& a = g[axes[i]];
        a.scale = s;
        a.length_resized = s * static_cast<double>(a.in);
        if (!(a.length_resized < 1e15))
          throw Error("scale " + std::to_string(s) + " makes axis " + std::to_string(axes[i]) + " too large");
        a.out = static_cast<int64_t>(std::floor(a.length_resized));
      }
      check_output(g);
      return g;
    }
    if (!sizes) throw Error("neither scales nor sizes is given");
    std::vector<int64_t> size_values = read_int64s(*sizes, "sizes");
    if (static_cast<int64_t>(size_values.size()) != n)
      throw Error("sizes has " + std::to_string(size_values.size()) + " values for " + std::to_string(n) + " axes of " +
                  describe(x));
    for (int64_t i = 0; i < n; ++i) {
      AxisGeometry& a = g[axes[i]];
      if (size_values[i] < 0) throw Error("sizes " + ir::dims_to_string(size_values) + " has a negative size");
      if (a.in == 0 && size_values[i] != 0)
        throw Error("cannot resize an empty axis to size " + std::to_string(size_values[i]));
      a.out = size_values[i];
      a.scale = a.in == 0 ? 1.0 : static_cast<double>(a.out) / static_cast<double>(a.in);
      a.length_resized = static_cast<double>(a.out);
    }
    if (policy_ != AspectPolicy::Stretch && n > 0) {
      // One scale for every resized axis, the smallest or the largest asked for.
      double s = g[axes[0]].scale;
      for (int64_t a : axes) s = policy_ == AspectPolicy::NotLarger ? std::min(s, g[a].scale) : std::max(s, g[a].scale);
      for (int64_t a : axes) {
        g[a].scale = s;
        g[a].length_resized = s * static_cast<double>(g[a].in);
        g[a].out = static_cast<int64_t>(std::floor(g[a].length_resized + 0.5));
      }
    }
    check_output(g);
    return g;
  }

  static void check_output(const std::vector<AxisGeometry>& g) {
    std::vector<int64_t> dims;
    for (const AxisGeometry& a : g) dims.push_back(a.out);
    checked_element_count(dims, "output shape");
  }

  // The input coordinate that output index `o` maps to.
  double original_coordinate(const AxisGeometry& g, int64_t o) const {
    double x = static_cast<double>(o), in = static_cast<double>(g.in);
    switch (coord_) {
      case Coord::HalfPixel: return (x + 0.5) / g.scale - 0.5;
      case Coord::HalfPixelSymmetric: {
        double adjustment = static_cast<double>(g.out) / g.length_resized;
        double center = in / 2;
        return center * (1 - adjustment) + (x + 0.5) / g.scale - 0.5;
      }
      case Coord::PytorchHalfPixel: return g.length_resized > 1 ? (x + 0.5) / g.scale - 0.5 : 0.0;
      case Coord::AlignCorners: return g.length_resized == 1 ? 0.0 : x * (in - 1) / (g.length_resized - 1);
      case Coord::Asymmetric: return x / g.scale;
      case Coord::TfHalfPixelForNN: return (x + 0.5) / g.scale;
      case Coord::TfCropAndResize:
        return g.length_resized > 1
                   ? g.roi_start * (in - 1) + x * (g.roi_end - g.roi_start) * (in - 1) / (g.length_resized - 1)
                   : 0.5 * (g.roi_start + g.roi_end) * (in - 1);
    }
    return x;
  }

  int64_t nearest_index(double x, double scale) const {
    double lo = std::floor(x), frac = x - lo;
    switch (nearest_) {
      case NearestMode::RoundPreferFloor: return static_cast<int64_t>(frac <= 0.5 ? lo : lo + 1);
      case NearestMode::RoundPreferCeil: return static_cast<int64_t>(frac < 0.5 ? lo : lo + 1);
      case NearestMode::Floor: return static_cast<int64_t>(lo);
      case NearestMode::Ceil: return static_cast<int64_t>(std::ceil(x));
      case NearestMode::Simple: return static_cast<int64_t>(scale < 1 ? std::ceil(x) : std::trunc(x));
    }
    return static_cast<int64_t>(lo);
  }

  AxisPlan plan_axis(const AxisGeometry& g) const {
    AxisPlan p;
    p.out = g.out;
    if (g.in == 0 || g.out == 0) return p;
    bool crop = coord_ == Coord::TfCropAndResize;
    if (crop) p.outside.assign(static_cast<size_t>(g.out), 0);
    auto clamp_index = [&](int64_t i) { return std::clamp<int64_t>(i, 0, g.in - 1); };

    if (mode_ == Mode::Nearest) {
      p.index.resize(static_cast<size_t>(g.out));
      for (int64_t o = 0; o < g.out; ++o) {
        double x = original_coordinate(g, o);
        if (crop && (x < 0 || x > static_cast<double>(g.in - 1))) p.outside[o] = 1;
        // Coordinates far outside the axis (huge roi) must not overflow int64.
        x = std::clamp(x, -1.0, static_cast<double>(g.in));
        p.index[o] = clamp_index(nearest_index(x, g.scale));
      }
    } else {
      // Antialiasing stretches the filter by 1 / scale when shrinking (to a few times the input
      // length at most: there is an output only when scale * in >= 0.5).
      double stretch = antialias_ && g.scale < 1 ? g.scale : 1.0;
      double radius = mode_ == Mode::Linear ? 1.0 : 2.0;
      auto first = static_cast<int64_t>(std::floor(-radius / stretch) + 1);
      p.taps = static_cast<int>(2 - 2 * first);
      p.index.resize(static_cast<size_t>(g.out * p.taps));
      p.weight.resize(p.index.size());
      std::vector<double> w(static_cast<size_t>(p.taps));
      for (int64_t o = 0; o < g.out; ++o) {
        double x = original_coordinate(g, o);
        if (crop && (x < 0 || x > static_cast<double>(g.in - 1))) p.outside[o] = 1;
        x = std::clamp(x, -radius - 1, static_cast<double>(g.in) + radius);
        double lo = std::floor(x), frac = x - lo;
        double sum = 0;
        for (int t = 0; t < p.taps; ++t) {
          double d = stretch * (static_cast<double>(first + t) - frac);
          w[t] = mode_ == Mode::Linear ? std::max(0.0, 1 - std::fabs(d)) : cubic_kernel(d, cubic_a_);
          int64_t i = static_cast<int64_t>(lo) + first + t;
          if (exclude_outside_ && (i < 0 || i >= g.in)) w[t] = 0;
          sum += w[t];
        }
        bool normalize = (antialias_ || exclude_outside_) && sum != 0;
        for (int t = 0; t < p.taps; ++t) {
          p.index[o * p.taps + t] = clamp_index(static_cast<int64_t>(lo) + first + t);
          p.weight[o * p.taps + t] = static_cast<float>(normalize ? w[t] / sum : w[t]);
        }
      }
    }
    if (crop && std::find(p.outside.begin(), p.outside.end(), 1) == p.outside.end()) p.outside.clear();
    // The identity: every output reads its own input with weight 1 (clamped taps may repeat it).
    p.identity = g.out == g.in && p.outside.empty();
    for (int64_t o = 0; p.identity && o < g.out; ++o) {
      double own = 0, other = 0;
      for (int t = 0; t < p.taps; ++t) {
        double w = p.weight.empty() ? 1.0 : p.weight[o * p.taps + t];
        (p.index[o * p.taps + t] == o ? own : other) += std::fabs(w);
      }
      p.identity = own == 1.0 && other == 0.0;
    }
    return p;
  }

  // Gathers elements of any type: out[o_0, ..., o_n] = x[index_0[o_0], ..., index_n[o_n]].
  Tensor resize_nearest(const Tensor& x, const std::vector<AxisPlan>& plans, const std::vector<int64_t>& dims,
                        int threads) const {
    Tensor y = Tensor::uninitialized(x.dtype(), dims);
    bool any_outside = std::any_of(plans.begin(), plans.end(), [](const AxisPlan& p) { return !p.outside.empty(); });
    Tensor fill;
    if (any_outside)
      fill =
          x.dtype() == DataType::String ? Tensor(DataType::String, {1}) : filled_tensor(x.dtype(), {1}, extrapolation_);
    visit_storage(x.dtype(), "Resize", [&]<class T>(std::type_identity<T>) {
      const T* src = elements<T>(x);
      T* dst = mutable_elements<T>(y);
      const T* extrapolated = any_outside ? elements<T>(fill) : nullptr;
      std::vector<int64_t> in_strides = contiguous_strides(x.dims());
      size_t outer_rank = dims.size() - 1;
      int64_t inner = dims.back();
      const AxisPlan& last = plans.back();
      int64_t rows = ir::element_count(dims) / inner;
      int64_t item_bytes = std::is_same_v<T, std::string> ? 32 : static_cast<int64_t>(sizeof(T));
      parallel_for(threads, rows, min_chunk_for(inner * item_bytes), [&](int64_t begin, int64_t end) {
        std::vector<int64_t> index(outer_rank);
        int64_t r = begin;
        for (size_t k = outer_rank; k-- > 0;) {
          index[k] = r % dims[k];
          r /= dims[k];
        }
        int64_t previous = -1;  // source row of the previous output row
        for (int64_t row = begin; row < end; ++row) {
          T* d = dst + row * inner;
          int64_t offset = 0;
          bool outside = false;
          for (size_t k = 0; k < outer_rank; ++k) {
            offset += plans[k].index[index[k]] * in_strides[k];
            outside = outside || (!plans[k].outside.empty() && plans[k].outside[index[k]]);
          }
          if (outside) {
            std::fill(d, d + inner, *extrapolated);
            previous = -1;
          } else if (offset == previous) {  // upsampling repeats rows: copy the one just made
            copy_elements(d - inner, d, inner);
          } else {
            const T* s = src + offset;
            if (last.identity) copy_elements(s, d, inner);
            else for (int64_t j = 0; j < inner; ++j) d[j] = s[last.index[j]];
            if (!last.outside.empty())
              for (int64_t j = 0; j < inner; ++j)
                if (last.outside[j]) d[j] = *extrapolated;
            previous = offset;
          }
          for (size_t k = outer_rank; k-- > 0;) {
            if (++index[k] < dims[k]) break;
            index[k] = 0;
          }
        }
      });
    });
    return y;
  }

  // Linear and cubic over float32 data: the two innermost axes together plane by plane (the
  // common NCHW case, which keeps the intermediate rows in cache), else one pass per axis.
  Tensor resize_filtered(const Tensor& x, const std::vector<AxisPlan>& plans, const std::vector<int64_t>& dims,
                         int threads) const {
    Tensor current = to_float(x);
    std::vector<size_t> active;
    for (size_t a = 0; a < plans.size(); ++a)
      if (!plans[a].identity) active.push_back(a);
    size_t rank = dims.size();
    if (rank >= 2 && active.size() == 2 && active[0] == rank - 2 && active[1] == rank - 1) {
      Tensor next = Tensor::uninitialized(DataType::Float, dims);
      filter_planes(current.values<float>().data(), next.mutable_values<float>().data(), x.dims()[rank - 2],
                    x.dims()[rank - 1], plans[rank - 2], plans[rank - 1],
                    ir::element_count(dims) / (dims[rank - 2] * dims[rank - 1]), threads);
      current = std::move(next);
    } else {
      // Shrinking axes first leaves less data for the others; among equals the inner axis first,
      // as its pass (a gather per element) is the costly one.
      std::stable_sort(active.begin(), active.end(), [&](size_t a, size_t b) {
        double ra = static_cast<double>(dims[a]) / static_cast<double>(x.dims()[a]);
        double rb = static_cast<double>(dims[b]) / static_cast<double>(x.dims()[b]);
        return ra != rb ? ra < rb : a > b;
      });
      std::vector<int64_t> cur_dims = x.dims();
      for (size_t a : active) {
        int64_t in_dim = cur_dims[a];
        cur_dims[a] = plans[a].out;
        int64_t outer = 1, inner = 1;
        for (size_t k = 0; k < a; ++k) outer *= cur_dims[k];
        for (size_t k = a + 1; k < rank; ++k) inner *= cur_dims[k];
        Tensor next = Tensor::uninitialized(DataType::Float, cur_dims);
        filter_axis(current.values<float>().data(), next.mutable_values<float>().data(), outer, in_dim, inner, plans[a],
                    threads);
        current = std::move(next);
      }
    }
    // tf_crop_and_resize: points outside the region of interest take the extrapolation value.
    float* out = current.mutable_values<float>().data();
    for (size_t a = 0; a < plans.size(); ++a) {
      if (plans[a].outside.empty()) continue;
      int64_t outer = 1, inner = 1;
      for (size_t k = 0; k < a; ++k) outer *= dims[k];
      for (size_t k = a + 1; k < rank; ++k) inner *= dims[k];
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < dims[a]; ++j)
          if (plans[a].outside[j]) std::fill_n(out + (o * dims[a] + j) * inner, inner, extrapolation_);
    }
    return float32_as_rounded(current, x.dtype());
  }

  static Tensor to_float(const Tensor& x) {
    switch (x.dtype()) {
      case DataType::Float:
      case DataType::Float16:
      case DataType::BFloat16:
      case DataType::Double: return as_float32(x);
      case DataType::String:
      case DataType::Bool: throw Error("linear and cubic Resize need numbers, got " + describe(x));
      default: break;
    }
    Tensor f = Tensor::uninitialized(DataType::Float, x.dims());
    float* dst = f.mutable_values<float>().data();
    for (int64_t i = 0; i < x.size(); ++i) dst[i] = static_cast<float>(element_as_double(x, i));
    return f;
  }

  int64_t opset_;
  bool upsample_;
  Mode mode_ = Mode::Nearest;
  Coord coord_ = Coord::HalfPixel;
  NearestMode nearest_ = NearestMode::RoundPreferFloor;
  double cubic_a_ = -0.75;
  bool exclude_outside_ = false;
  float extrapolation_ = 0.0f;
  bool antialias_ = false;
  std::optional<std::vector<int64_t>> axes_;
  AspectPolicy policy_ = AspectPolicy::Stretch;
  std::vector<double> scales_attr_;
  bool channels_last_ = false;
};

struct ResizeFactory {
  bool upsample;
  bool channels_last = false;
  std::unique_ptr<Kernel> operator()(const KernelInfo& info) const {
    return std::make_unique<ResizeKernel>(info, upsample, channels_last);
  }
};

}  // namespace

void register_resize_kernels(KernelRegistry& r) {
  r.add("", "Resize", 10, kLatestOpset, ResizeFactory{false});
  r.add("", "Upsample", 7, 9, ResizeFactory{true});
  r.add(kEngineDomain, "NhwcResize", 1, 1, ResizeFactory{false, true});
}

}  // namespace onnxptq::engine::shape
