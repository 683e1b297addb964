// The custom quantize and dequantize ops that vai_q_onnx and Quark write into their models:
//
//   com.vai.quantize v1  VitisQuantizeLinear, VitisDequantizeLinear       vai_q_onnx 1.16's C++ custom ops
//   com.amd.quark v1     ExtendedQuantizeLinear, ExtendedDequantizeLinear  Quark for ONNX's custom ops
//   ai.onnx.contrib v1   FixNeuron, QuantizeLinear, DequantizeLinear       vai_q_onnx's onnxruntime-extensions ops
//
// The Vitis and Extended ops take exactly three inputs (x, scale, zero point); the zero point's
// type is the quantized type: uint8, int8, uint16, int16, uint32, int32, float16 or bfloat16.
//   integer   q = saturate(round_half_even(float32(x) / scale) + zp)      the full range of the type
//             x = float32(int64(q) - int64(zp)) * scale
//   bfloat16  q = bf16(x / scale + float(zp))                             round to nearest even
//             x = (float(q) - float(zp)) * scale
//   float16   Vitis:  q = half(clip(x, -65504, 65504)), x = float(q)     scale and zp ignored
//             Quark:  q = half(x / scale),              x = float(q) * scale   zp ignored
// A scale of one value is per tensor; a 1-D scale of dim[axis] values is per axis (`axis`, default
// 1), which the original Vitis ops get wrong (see axis_layout).
// The contrib ops are vai_q_onnx's Python ops: one scale, an int8 zero point, saturation to the
// signed `bit_width` range [-2^(b-1), 2^(b-1) - 1]; FixNeuron is the quantize-dequantize pair in
// one op, float in and out.
//
// Inputs x and scales may be float32 or float16 (float16 is computed in float32, as Quark's
// kernels do); a float output (dequantization, FixNeuron) has the type of the scale, or of x for
// FixNeuron. Rounding and saturation are those of qmath/quantize.h: NaN quantizes to the lowest
// value of the type (FixNeuron keeps it NaN, as NumPy does), infinities saturate (the reference's
// int64 cast of an infinity is undefined behaviour in C++).
#include <algorithm>
#include <charconv>
#include <cmath>

#include "engine/kernels/quantize.h"
#include "engine/parallel.h"
#include "ir/float16.h"

namespace onnxptq::engine {
namespace {

constexpr int64_t kMinChunk = 16384;
constexpr float kHalfMax = 65504.0f;

enum class Flavor { Vitis, Quark };

std::string type_name(DataType t) { return std::string(ir::data_type_name(t)); }

// Error unless `t` is float32 or float16.
void check_float(const Tensor& t, const std::string& what) {
  if (t.dtype() != DataType::Float && t.dtype() != DataType::Float16)
    throw Error(what + " has type " + type_name(t.dtype()) + ", expected float or float16");
}

// Error unless `type` is one of the eight types the Vitis and Extended ops quantize to.
void check_target_type(DataType type, const std::string& what) {
  switch (type) {
    case DataType::UInt8:
    case DataType::Int8:
    case DataType::UInt16:
    case DataType::Int16:
    case DataType::UInt32:
    case DataType::Int32:
    case DataType::Float16:
    case DataType::BFloat16: return;
    default:
      throw Error(what + " has type " + type_name(type) +
                  ", expected uint8, int8, uint16, int16, uint32, int32, float16 or bfloat16");
  }
}

// Every value of an integer tensor as int64 (uint32 zero points do not fit int32).
std::vector<int64_t> int64_values(const Tensor& t) {
  std::vector<int64_t> out;
  visit_integer_quant_type(t.dtype(), "the zero point", [&](auto tag) {
    auto v = t.values<decltype(tag)>();
    out.assign(v.begin(), v.end());
  });
  return out;
}

// How the scale and zero point apply to x, seen as [outer, axis_dim, inner]: one value for the
// whole tensor, or one per index along `axis`.
struct AxisLayout {
  bool per_tensor = true;
  int64_t axis_dim = 1;
  int64_t inner = 1;
};

// A scalar or 1-element scale is per tensor; a 1-D scale of dim[axis] values is per axis. The
// original VitisQuantizeLinear treats every 1-D scale as per tensor and uses its first value
// (a bug of vai_q_onnx 1.16): here a 1-D scale of more than one value is really per axis.
// The Extended ops get the same rule (their optional `axis` is for per-channel quantization).
AxisLayout axis_layout(const std::vector<int64_t>& x_dims, const Tensor& scale, const Tensor& zp, int64_t axis,
                       const std::string& scale_name, const std::string& zp_name) {
  if (zp.size() != scale.size() || (scale.size() != 1 && zp.dims() != scale.dims()))
    throw Error(zp_name + " has shape " + ir::dims_to_string(zp.dims()) + ", " + scale_name + " " +
                ir::dims_to_string(scale.dims()) + ": they must match");
  AxisLayout l;
  if (scale.size() == 1) return l;
  auto rank = static_cast<int64_t>(x_dims.size());
  if (scale.rank() != 1 || rank == 0)
    throw Error(scale_name + " of shape " + ir::dims_to_string(scale.dims()) +
                " is neither one value nor 1-D along axis " + std::to_string(axis) + " of the input " +
                ir::dims_to_string(x_dims));
  int64_t a = normalize_axis(axis, rank);
  if (scale.dims()[0] != x_dims[a])
    throw Error(scale_name + " has " + std::to_string(scale.dims()[0]) + " values, the input " +
                ir::dims_to_string(x_dims) + " has " + std::to_string(x_dims[a]) + " along axis " + std::to_string(a));
  l.per_tensor = false;
  l.axis_dim = x_dims[a];
  for (int64_t i = a + 1; i < rank; ++i) l.inner *= x_dims[i];
  return l;
}

// Calls fn(begin, end, k) over the runs of [0, n) that share scale index k, split over threads.
template <class F>
void for_each_run(int threads, int64_t n, const AxisLayout& l, F&& fn) {
  parallel_for(threads, n, kMinChunk, [&](int64_t b, int64_t e) {
    if (l.per_tensor) {
      fn(b, e, int64_t{0});
      return;
    }
    while (b < e) {
      int64_t row = b / l.inner;
      int64_t end = std::min(e, (row + 1) * l.inner);
      fn(b, end, row % l.axis_dim);
      b = end;
    }
  });
}

// qmath's bulk functions take an int32 zero point, which cannot hold every uint32 one: the same
// clamp, then round half to even, in double (exact for every bound and every float).
uint32_t quantize_uint32(float v, int64_t zp) {
  const double lo = 0.0 - static_cast<double>(zp);
  const double hi = 4294967295.0 - static_cast<double>(zp);
  double d = v;
  d = d > lo ? d : lo;  // NaN -> lo
  d = d < hi ? d : hi;
  return static_cast<uint32_t>(static_cast<int64_t>(std::nearbyint(d)) + zp);
}

template <class T>
void quantize_run(const float* x, int64_t n, float scale, int64_t zp, T* y) {
  if constexpr (std::is_same_v<T, uint32_t>) {
    for (int64_t i = 0; i < n; ++i) y[i] = quantize_uint32(x[i] / scale, zp);
  } else {
    quantize_values<T>(x, n, scale, static_cast<int32_t>(zp), y);
  }
}

template <class T>
void dequantize_run(const T* q, int64_t n, float scale, int64_t zp, float* y) {
  if constexpr (std::is_same_v<T, uint32_t>) {
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(static_cast<int64_t>(q[i]) - zp) * scale;
  } else {
    dequantize_values<T>(q, n, scale, static_cast<int32_t>(zp), y);
  }
}

// VitisQuantizeLinear and ExtendedQuantizeLinear: (x, y_scale, y_zero_point) -> y.
template <Flavor F>
class CustomQuantizeKernel : public Kernel {
 public:
  explicit CustomQuantizeKernel(const KernelInfo& info) : axis_(info.node.attr_int("axis", 1)) {}

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x_in = required_input(in, 0, "x");
    const Tensor& scale_t = required_input(in, 1, "y_scale");
    const Tensor& zp_t = required_input(in, 2, "y_zero_point");
    check_float(x_in, "the input x");
    check_float(scale_t, "y_scale");
    const DataType type = zp_t.dtype();
    check_target_type(type, "y_zero_point");
    Tensor x = as_float32(x_in);
    AxisLayout l = axis_layout(x.dims(), scale_t, zp_t, axis_, "y_scale", "y_zero_point");
    std::vector<float> scale = scale_values(scale_t);
    const float* xs = x.values<float>().data();
    const int64_t n = x.size();
    Tensor y = Tensor::uninitialized(type, x.dims());
    if (type == DataType::Float16) {
      uint16_t* ys = y.mutable_values<uint16_t>().data();
      if constexpr (F == Flavor::Vitis) {
        // A Cast after a clip to float16's largest finite value; the scale and zero point are
        // read and checked above, and then ignored, as the original does.
        parallel_for(ctx.threads, n, kMinChunk, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) {
            float v = xs[i];
            v = v > kHalfMax ? kHalfMax : (v < -kHalfMax ? -kHalfMax : v);  // NaN stays NaN
            ys[i] = ir::float_to_half(v);
          }
        });
      } else {
        for_each_run(ctx.threads, n, l, [&](int64_t b, int64_t e, int64_t k) {
          for (int64_t i = b; i < e; ++i) ys[i] = ir::float_to_half(xs[i] / scale[k]);
        });
      }
    } else if (type == DataType::BFloat16) {
      std::vector<float> zp = scale_values(zp_t);  // bfloat16 as float32
      uint16_t* ys = y.mutable_values<uint16_t>().data();
      for_each_run(ctx.threads, n, l, [&](int64_t b, int64_t e, int64_t k) {
        for (int64_t i = b; i < e; ++i) ys[i] = ir::float_to_bfloat16(xs[i] / scale[k] + zp[k]);
      });
    } else {
      std::vector<int64_t> zp = int64_values(zp_t);
      visit_integer_quant_type(type, "the target", [&](auto tag) {
        using T = decltype(tag);
        T* ys = y.mutable_values<T>().data();
        for_each_run(ctx.threads, n, l,
                     [&](int64_t b, int64_t e, int64_t k) { quantize_run<T>(xs + b, e - b, scale[k], zp[k], ys + b); });
      });
    }
    out[0] = std::move(y);
  }

 private:
  int64_t axis_;
};

// VitisDequantizeLinear and ExtendedDequantizeLinear: (x, x_scale, x_zero_point) -> y.
template <Flavor F>
class CustomDequantizeKernel : public Kernel {
 public:
  explicit CustomDequantizeKernel(const KernelInfo& info) : axis_(info.node.attr_int("axis", 1)) {}

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = required_input(in, 0, "x");
    const Tensor& scale_t = required_input(in, 1, "x_scale");
    const Tensor& zp_t = required_input(in, 2, "x_zero_point");
    const DataType type = x.dtype();
    check_target_type(type, "the input x");
    if (zp_t.dtype() != type)
      throw Error("x_zero_point has type " + type_name(zp_t.dtype()) + ", the input x " + type_name(type));
    check_float(scale_t, "x_scale");
    AxisLayout l = axis_layout(x.dims(), scale_t, zp_t, axis_, "x_scale", "x_zero_point");
    std::vector<float> scale = scale_values(scale_t);
    const int64_t n = x.size();
    Tensor y = Tensor::uninitialized(DataType::Float, x.dims());
    float* ys = y.mutable_values<float>().data();
    if (type == DataType::Float16) {
      const uint16_t* qs = x.values<uint16_t>().data();
      for_each_run(ctx.threads, n, l, [&](int64_t b, int64_t e, int64_t k) {
        if constexpr (F == Flavor::Vitis) {
          for (int64_t i = b; i < e; ++i) ys[i] = ir::half_to_float(qs[i]);  // scale ignored
        } else {
          for (int64_t i = b; i < e; ++i) ys[i] = ir::half_to_float(qs[i]) * scale[k];
        }
      });
    } else if (type == DataType::BFloat16) {
      std::vector<float> zp = scale_values(zp_t);
      const uint16_t* qs = x.values<uint16_t>().data();
      for_each_run(ctx.threads, n, l, [&](int64_t b, int64_t e, int64_t k) {
        for (int64_t i = b; i < e; ++i) ys[i] = (ir::bfloat16_to_float(qs[i]) - zp[k]) * scale[k];
      });
    } else {
      std::vector<int64_t> zp = int64_values(zp_t);
      visit_integer_quant_type(type, "the target", [&](auto tag) {
        using T = decltype(tag);
        const T* qs = x.values<T>().data();
        for_each_run(ctx.threads, n, l, [&](int64_t b, int64_t e, int64_t k) {
          dequantize_run<T>(qs + b, e - b, scale[k], zp[k], ys + b);
        });
      });
    }
    out[0] = float32_as(y, scale_t.dtype());
  }

 private:
  int64_t axis_;
};

// ---------------------------------------------------------------------------------------------
// ai.onnx.contrib: vai_q_onnx's Python ops.

// `bit_width` is a string attribute holding an integer ("8" from the quantizer; an int attribute
// is taken too), 8 when absent (Quark's default). `pos` is informational and not read.
int read_bit_width(const ir::Node& node, int max_bits) {
  int64_t bits = 8;
  if (const ir::Attribute* a = node.find_attribute("bit_width")) {
    if (a->type == ir::AttrType::String) {
      const std::string& s = a->s;
      auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), bits);
      if (ec != std::errc() || end != s.data() + s.size() || s.empty())
        throw Error("bit_width '" + s + "' is not an integer");
    } else if (a->type == ir::AttrType::Int) {
      bits = a->i;
    } else {
      throw Error("bit_width must be a string (or int) attribute");
    }
  }
  if (bits < 1 || bits > max_bits)
    throw Error("bit_width " + std::to_string(bits) + " is outside [1, " + std::to_string(max_bits) + "]");
  return static_cast<int>(bits);
}

// [-2^(b-1), 2^(b-1) - 1]
QRange signed_range(int bits) {
  const int64_t half = int64_t{1} << (bits - 1);
  return {-half, half - 1};
}

// The scale (float or float16) and int8 zero point of a contrib op, one value each: the Python
// ops broadcast them with NumPy's rules and have no axis, and the quantizer writes one value.
QParams contrib_qparams(const Tensor& scale, const Tensor& zp) {
  check_float(scale, "the scale");
  check_scalar(scale, "the scale");
  check_scalar(zp, "the zero point");
  if (zp.dtype() != DataType::Int8) throw Error("the zero point has type " + type_name(zp.dtype()) + ", expected int8");
  return {scale_values(scale)[0], zp.values<int8_t>()[0]};
}

// QuantizeLinear (ai.onnx.contrib): (x, scale, zero_point int8) -> int8.
class ContribQuantizeKernel : public Kernel {
 public:
  explicit ContribQuantizeKernel(const KernelInfo& info) : range_(signed_range(read_bit_width(info.node, 8))) {}

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x_in = required_input(in, 0, "x");
    check_float(x_in, "the input x");
    QParams p = contrib_qparams(required_input(in, 1, "scale"), required_input(in, 2, "zero_point"));
    Tensor x = as_float32(x_in);
    const float* xs = x.values<float>().data();
    Tensor y = Tensor::uninitialized(DataType::Int8, x.dims());
    int8_t* ys = y.mutable_values<int8_t>().data();
    parallel_for(ctx.threads, x.size(), kMinChunk,
                 [&](int64_t b, int64_t e) { quantize_values<int8_t>(xs + b, e - b, p.scale, p.zp, ys + b, range_); });
    out[0] = std::move(y);
  }

 private:
  QRange range_;
};

// DequantizeLinear (ai.onnx.contrib): y = (clip(q, bit_width range) - zp) * scale.
class ContribDequantizeKernel : public Kernel {
 public:
  explicit ContribDequantizeKernel(const KernelInfo& info) : range_(signed_range(read_bit_width(info.node, 8))) {}

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = required_input(in, 0, "x");
    if (x.dtype() != DataType::Int8) throw Error("the input x has type " + type_name(x.dtype()) + ", expected int8");
    const Tensor& scale_t = required_input(in, 1, "scale");
    QParams p = contrib_qparams(scale_t, required_input(in, 2, "zero_point"));
    const int8_t* qs = x.values<int8_t>().data();
    Tensor y = Tensor::uninitialized(DataType::Float, x.dims());
    float* ys = y.mutable_values<float>().data();
    parallel_for(ctx.threads, x.size(), kMinChunk, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        int32_t q = static_cast<int32_t>(std::clamp<int64_t>(qs[i], range_.min, range_.max));
        ys[i] = static_cast<float>(q - p.zp) * p.scale;
      }
    });
    out[0] = float32_as(y, scale_t.dtype());
  }

 private:
  QRange range_;
};

// FixNeuron (ai.onnx.contrib): y = (clip(round(x / scale) + zp, bit_width range) - zp) * scale,
// float in and out. A NaN stays NaN, as in the NumPy original.
class FixNeuronKernel : public Kernel {
 public:
  explicit FixNeuronKernel(const KernelInfo& info) : bits_(read_bit_width(info.node, 32)) {}

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x_in = required_input(in, 0, "x");
    check_float(x_in, "the input x");
    QParams p = contrib_qparams(required_input(in, 1, "scale"), required_input(in, 2, "zero_point"));
    Tensor x = as_float32(x_in);
    const float* xs = x.values<float>().data();
    Tensor y = Tensor::uninitialized(DataType::Float, x.dims());
    float* ys = y.mutable_values<float>().data();
    const QRange range = signed_range(bits_);
    auto fake_quantize = [&](auto tag) {
      using T = decltype(tag);
      parallel_for(ctx.threads, x.size(), kMinChunk, [&](int64_t b, int64_t e) {
        fake_quantize_values<T>(xs + b, e - b, p.scale, p.zp, ys + b, range);
        for (int64_t i = b; i < e; ++i)
          if (std::isnan(xs[i])) ys[i] = xs[i];
      });
    };
    if (bits_ <= 8)
      fake_quantize(int8_t{});
    else if (bits_ <= 16)
      fake_quantize(int16_t{});
    else
      fake_quantize(int32_t{});
    out[0] = float32_as(y, x_in.dtype());
  }

 private:
  int bits_;
};

}  // namespace

void register_quantize_custom_kernels(KernelRegistry& r) {
  r.add("com.vai.quantize", "VitisQuantizeLinear", 1, 1, kernel_factory<CustomQuantizeKernel<Flavor::Vitis>>());
  r.add("com.vai.quantize", "VitisDequantizeLinear", 1, 1, kernel_factory<CustomDequantizeKernel<Flavor::Vitis>>());
  r.add("com.amd.quark", "ExtendedQuantizeLinear", 1, 1, kernel_factory<CustomQuantizeKernel<Flavor::Quark>>());
  r.add("com.amd.quark", "ExtendedDequantizeLinear", 1, 1, kernel_factory<CustomDequantizeKernel<Flavor::Quark>>());
  r.add("ai.onnx.contrib", "FixNeuron", 1, 1, kernel_factory<FixNeuronKernel>());
  r.add("ai.onnx.contrib", "QuantizeLinear", 1, 1, kernel_factory<ContribQuantizeKernel>());
  r.add("ai.onnx.contrib", "DequantizeLinear", 1, 1, kernel_factory<ContribDequantizeKernel>());
}

}  // namespace onnxptq::engine
