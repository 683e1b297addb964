// QuantizeLinear and DequantizeLinear (ONNX opsets 10 to 22, and com.microsoft version 1), and
// DynamicQuantizeLinear: per tensor, per axis and (opset 21) per block; 8-bit, 16-bit and 4-bit
// integer types (int32 too for DequantizeLinear). float8 types are not supported.
#include <algorithm>
#include <cstring>

#include "engine/kernels/quantize.h"
#include "engine/parallel.h"

namespace onnxptq::engine {
namespace {

constexpr int64_t kMinChunk = 16384;

bool is_4bit(DataType t) { return t == DataType::Int4 || t == DataType::UInt4; }

bool is_float8(DataType t) {
  return t == DataType::Float8E4M3FN || t == DataType::Float8E4M3FNUZ || t == DataType::Float8E5M2 ||
         t == DataType::Float8E5M2FNUZ;
}

// Element i of a packed 4-bit tensor (the first element in the low nibble, ONNX order).
int32_t nibble_at(const std::byte* data, int64_t i, bool is_signed) {
  int v = (static_cast<int>(data[i >> 1]) >> ((i & 1) * 4)) & 0xF;
  return is_signed && v >= 8 ? v - 16 : v;
}

// Every element of a quantized tensor (4-bit included) as int32.
std::vector<int32_t> quantized_values(const Tensor& t) {
  if (is_4bit(t.dtype())) {
    std::vector<int32_t> out(t.size());
    for (int64_t i = 0; i < t.size(); ++i) out[i] = nibble_at(t.bytes().data(), i, t.dtype() == DataType::Int4);
    return out;
  }
  return int32_values(t);
}

// How the scale applies to x: per tensor, per axis (x seen as [outer, axis_dim, inner]) or per
// block of `block` elements along the axis (scale of shape [outer, ceil(axis_dim / block), inner]).
struct QdqLayout {
  bool per_tensor = true;
  int64_t outer = 1, axis_dim = 1, inner = 1;
  int64_t block = 0;
};

QdqLayout qdq_layout(const std::vector<int64_t>& x_dims, const Tensor& scale, const Tensor* zp, int64_t axis,
                     int64_t block_size) {
  QdqLayout l;
  if (zp && zp->dims() != scale.dims() && !(zp->size() == 1 && scale.size() == 1))
    throw Error("the zero point shape " + ir::dims_to_string(zp->dims()) + " differs from the scale shape " +
                ir::dims_to_string(scale.dims()));
  // A scalar or 1-element scale is per tensor, whatever the axis (as ONNX Runtime does).
  if (scale.size() == 1 && block_size == 0) return l;
  int64_t rank = static_cast<int64_t>(x_dims.size());
  if (rank == 0) throw Error("a scale of shape " + ir::dims_to_string(scale.dims()) + " needs an input of rank >= 1");
  int64_t a = normalize_axis(axis, rank);
  l.per_tensor = false;
  for (int64_t i = 0; i < a; ++i) l.outer *= x_dims[i];
  l.axis_dim = x_dims[a];
  for (int64_t i = a + 1; i < rank; ++i) l.inner *= x_dims[i];
  if (block_size == 0) {
    if (scale.rank() != 1 || scale.dims()[0] != l.axis_dim)
      throw Error("a per-axis scale must be 1-D with " + std::to_string(l.axis_dim) + " values (dim " +
                  std::to_string(a) + " of the input), got shape " + ir::dims_to_string(scale.dims()));
    return l;
  }
  l.block = block_size;
  std::vector<int64_t> want = x_dims;
  want[a] = (x_dims[a] + block_size - 1) / block_size;
  if (scale.dims() != want)
    throw Error("a blocked scale (block_size " + std::to_string(block_size) + ", axis " + std::to_string(a) +
                ") must have shape " + ir::dims_to_string(want) + ", got " + ir::dims_to_string(scale.dims()));
  return l;
}

// Index into the scale / zero point of the row r = (o, a) of [outer, axis_dim] rows.
int64_t scale_row(const QdqLayout& l, int64_t r) {
  if (l.per_tensor) return 0;
  int64_t a = r % l.axis_dim;
  if (l.block == 0) return a;
  int64_t blocks = (l.axis_dim + l.block - 1) / l.block;
  return ((r / l.axis_dim) * blocks + a / l.block) * l.inner;
}

// `range` narrows the saturation for 4-bit values held in int8 / uint8.
template <class T>
void quantize_tensor(const float* x, int64_t n, const QdqLayout& l, const std::vector<float>& scale,
                     const std::vector<int32_t>& zp, QRange range, T* y, int threads) {
  if (l.per_tensor) {
    float s = scale[0];
    int32_t z = zp.empty() ? 0 : zp[0];
    parallel_for(threads, n, kMinChunk, [&](int64_t b, int64_t e) { quantize_values<T>(x + b, e - b, s, z, y + b, range); });
    return;
  }
  int64_t rows = l.outer * l.axis_dim;
  int64_t inner = l.inner;
  parallel_for(threads, rows, std::max<int64_t>(1, kMinChunk / std::max<int64_t>(inner, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      int64_t k = scale_row(l, r);
      const float* xr = x + r * inner;
      T* yr = y + r * inner;
      if (l.block == 0) {
        quantize_values<T>(xr, inner, scale[k], zp.empty() ? 0 : zp[k], yr, range);
      } else {
        for (int64_t i = 0; i < inner; ++i) yr[i] = quantize_value<T>(xr[i], scale[k + i], zp.empty() ? 0 : zp[k + i], range);
      }
    }
  });
}

template <class T>
void dequantize_tensor(const T* q, int64_t n, const QdqLayout& l, const std::vector<float>& scale,
                       const std::vector<int32_t>& zp, float* y, int threads) {
  if (l.per_tensor) {
    float s = scale[0];
    int32_t z = zp.empty() ? 0 : zp[0];
    parallel_for(threads, n, kMinChunk, [&](int64_t b, int64_t e) { dequantize_values<T>(q + b, e - b, s, z, y + b); });
    return;
  }
  int64_t rows = l.outer * l.axis_dim;
  int64_t inner = l.inner;
  parallel_for(threads, rows, std::max<int64_t>(1, kMinChunk / std::max<int64_t>(inner, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      int64_t k = scale_row(l, r);
      const T* qr = q + r * inner;
      float* yr = y + r * inner;
      if (l.block == 0) {
        dequantize_values<T>(qr, inner, scale[k], zp.empty() ? 0 : zp[k], yr);
      } else {
        for (int64_t i = 0; i < inner; ++i) yr[i] = dequantize_value<T>(qr[i], scale[k + i], zp.empty() ? 0 : zp[k + i]);
      }
    }
  });
}

// x as float32: float, float16, bfloat16 (and int32, which ONNX allows as QuantizeLinear input).
Tensor input_as_float(const Tensor& x) {
  if (x.dtype() == DataType::Int32) {
    Tensor out = Tensor::uninitialized(DataType::Float, x.dims());
    auto src = x.values<int32_t>();
    auto dst = out.mutable_values<float>();
    for (size_t i = 0; i < src.size(); ++i) dst[i] = static_cast<float>(src[i]);
    return out;
  }
  if (x.dtype() != DataType::Float && x.dtype() != DataType::Float16 && x.dtype() != DataType::BFloat16)
    throw Error("the input has type " + std::string(ir::data_type_name(x.dtype())) +
                ", expected float, float16, bfloat16 or int32");
  return as_float32(x);
}

class QuantizeLinearKernel : public Kernel {
 public:
  explicit QuantizeLinearKernel(const KernelInfo& info) {
    const ir::Node& n = info.node;
    axis_ = n.attr_int("axis", 1);
    if (n.domain.empty() && info.opset >= 19) {
      int64_t saturate = n.attr_int("saturate", 1);
      if (saturate != 0 && saturate != 1) throw Error("saturate must be 0 or 1, got " + std::to_string(saturate));
    }
    if (n.domain.empty() && info.opset >= 21) {
      block_size_ = n.attr_int("block_size", 0);
      if (block_size_ < 0) throw Error("block_size must not be negative, got " + std::to_string(block_size_));
      int64_t dtype = n.attr_int("output_dtype", 0);
      if (dtype != 0) {
        if (!ir::data_type_is_known(static_cast<int32_t>(dtype)))
          throw Error("output_dtype " + std::to_string(dtype) + " is not an ONNX data type");
        output_dtype_ = static_cast<DataType>(dtype);
        check_output_type(output_dtype_);
      }
    }
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x_in = required_input(in, 0, "x");
    const Tensor& scale_t = required_input(in, 1, "y_scale");
    const Tensor* zp = optional_input(in, 2);
    DataType type = output_dtype_ != DataType::Undefined ? output_dtype_ : DataType::UInt8;
    if (zp) {
      if (output_dtype_ != DataType::Undefined && zp->dtype() != output_dtype_)
        throw Error("the zero point has type " + std::string(ir::data_type_name(zp->dtype())) +
                    " but output_dtype is " + std::string(ir::data_type_name(output_dtype_)));
      type = zp->dtype();
      check_output_type(type);
    }
    Tensor x = input_as_float(x_in);
    QdqLayout l = qdq_layout(x.dims(), scale_t, zp, axis_, block_size_);
    std::vector<float> scale = scale_values(scale_t);
    std::vector<int32_t> zps = zp ? quantized_values(*zp) : std::vector<int32_t>{};
    const float* xs = x.values<float>().data();
    int64_t n = x.size();
    Tensor y = Tensor::uninitialized(type, x.dims());
    if (is_4bit(type)) {
      bool is_signed = type == DataType::Int4;
      std::vector<int8_t> q(n);
      quantize_tensor<int8_t>(xs, n, l, scale, zps, is_signed ? kInt4Range : kUInt4Range, q.data(), ctx.threads);
      std::byte* dst = y.mutable_bytes();
      std::memset(dst, 0, y.byte_size());
      for (int64_t i = 0; i < n; ++i) dst[i >> 1] |= static_cast<std::byte>((q[i] & 0xF) << ((i & 1) * 4));
    } else {
      visit_quant_type(type, "the output", [&](auto tag) {
        using T = decltype(tag);
        quantize_tensor<T>(xs, n, l, scale, zps, quant_range_of<T>(), y.mutable_values<T>().data(), ctx.threads);
      });
    }
    out[0] = std::move(y);
  }

 private:
  static void check_output_type(DataType type) {
    if (is_float8(type)) throw unsupported("quantization to " + std::string(ir::data_type_name(type)) + " is not supported");
    if (type != DataType::Int8 && type != DataType::UInt8 && type != DataType::Int16 && type != DataType::UInt16 &&
        !is_4bit(type))
      throw Error("cannot quantize to " + std::string(ir::data_type_name(type)) +
                  ": expected int8, uint8, int16, uint16, int4 or uint4");
  }

  int64_t axis_ = 1;
  int64_t block_size_ = 0;
  DataType output_dtype_ = DataType::Undefined;
};

class DequantizeLinearKernel : public Kernel {
 public:
  explicit DequantizeLinearKernel(const KernelInfo& info) {
    const ir::Node& n = info.node;
    axis_ = n.attr_int("axis", 1);
    if (n.domain.empty() && info.opset >= 21) {
      block_size_ = n.attr_int("block_size", 0);
      if (block_size_ < 0) throw Error("block_size must not be negative, got " + std::to_string(block_size_));
    }
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = required_input(in, 0, "x");
    const Tensor& scale_t = required_input(in, 1, "x_scale");
    const Tensor* zp = optional_input(in, 2);
    if (is_float8(x.dtype()))
      throw unsupported("dequantization of " + std::string(ir::data_type_name(x.dtype())) + " is not supported");
    if (zp && zp->dtype() != x.dtype())
      throw Error("the zero point has type " + std::string(ir::data_type_name(zp->dtype())) + ", the input " +
                  std::string(ir::data_type_name(x.dtype())));
    QdqLayout l = qdq_layout(x.dims(), scale_t, zp, axis_, block_size_);
    std::vector<float> scale = scale_values(scale_t);
    std::vector<int32_t> zps = zp ? quantized_values(*zp) : std::vector<int32_t>{};
    int64_t n = x.size();
    Tensor y = Tensor::uninitialized(DataType::Float, x.dims());
    float* ys = y.mutable_values<float>().data();
    if (is_4bit(x.dtype())) {
      std::vector<int8_t> q(n);
      for (int64_t i = 0; i < n; ++i) q[i] = static_cast<int8_t>(nibble_at(x.bytes().data(), i, x.dtype() == DataType::Int4));
      dequantize_tensor<int8_t>(q.data(), n, l, scale, zps, ys, ctx.threads);
    } else {
      visit_quant_type(x.dtype(), "the input", [&](auto tag) {
        using T = decltype(tag);
        dequantize_tensor<T>(x.values<T>().data(), n, l, scale, zps, ys, ctx.threads);
      });
    }
    // The output has the scale's type (float16 and bfloat16 since opset 19): computed in float32.
    out[0] = float32_as(y, scale_t.dtype());
  }

 private:
  int64_t axis_ = 1;
  int64_t block_size_ = 0;
};

// y_scale = (max(0, max x) - min(0, min x)) / 255, y_zero_point = round(saturate(-min / y_scale)),
// y = QuantizeLinear(x); an all-zero input gets scale 1 (as ONNX Runtime, not a division by 0).
class DynamicQuantizeLinearKernel : public Kernel {
 public:
  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = required_input(in, 0, "x");
    if (x.dtype() != DataType::Float)
      throw Error("the input has type " + std::string(ir::data_type_name(x.dtype())) + ", expected float");
    auto xs = x.values<float>();
    float lo = 0.0f, hi = 0.0f;
    for (float v : xs) {
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
    float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
    float initial_zp = 0.0f - lo / scale;
    auto zp = static_cast<uint8_t>(round_half_even(std::max(0.0f, std::min(255.0f, initial_zp))));
    Tensor y = Tensor::uninitialized(DataType::UInt8, x.dims());
    uint8_t* ys = y.mutable_values<uint8_t>().data();
    parallel_for(ctx.threads, x.size(), kMinChunk, [&](int64_t b, int64_t e) {
      quantize_values<uint8_t>(xs.data() + b, e - b, scale, zp, ys + b);
    });
    out[0] = std::move(y);
    if (out.size() > 1) out[1] = Tensor::from_values<float>({}, std::vector<float>{scale});
    if (out.size() > 2) out[2] = Tensor::from_values<uint8_t>({}, std::vector<uint8_t>{zp});
  }
};

}  // namespace

void register_quantize_linear_kernels(KernelRegistry& r) {
  // Opset 23 adds float4 and a `precision` attribute: not claimed.
  r.add("", "QuantizeLinear", 10, 22, kernel_factory<QuantizeLinearKernel>());
  r.add("", "DequantizeLinear", 10, 22, kernel_factory<DequantizeLinearKernel>());
  r.add("com.microsoft", "QuantizeLinear", 1, 1, kernel_factory<QuantizeLinearKernel>());
  r.add("com.microsoft", "DequantizeLinear", 1, 1, kernel_factory<DequantizeLinearKernel>());
  r.add("", "DynamicQuantizeLinear", 11, kLatestOpset, kernel_factory<DynamicQuantizeLinearKernel>());
}

}  // namespace onnxptq::engine
