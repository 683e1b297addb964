// Cast and CastLike between the numeric types, bool and string. Float16 and bfloat16 go through
// float32 (exact both ways up to the final rounding); float8 and 4-bit types are not supported.
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/kernels/elementwise.h"
#include "ir/float16.h"

namespace onnxptq::engine::elementwise {
namespace {

bool castable(DataType t) {
  switch (t) {
    case DataType::Float: case DataType::Double: case DataType::Float16: case DataType::BFloat16:
    case DataType::Int8: case DataType::Int16: case DataType::Int32: case DataType::Int64:
    case DataType::UInt8: case DataType::UInt16: case DataType::UInt32: case DataType::UInt64:
    case DataType::Bool: case DataType::String:
      return true;
    default:
      return false;
  }
}

void check_castable(DataType t, const char* role) {
  if (!castable(t)) throw unsupported(std::string("Cast ") + role + " type " + type_name(t) + " is not supported");
}

// One element from S to D: to bool is "not zero" (NaN is true); floating to integer saturates
// and NaN gives 0 (a plain conversion would be undefined); integer to integer wraps.
template <class D, class S>
inline D convert(S v) {
  if constexpr (std::is_same_v<D, bool>) return v != S(0);
  else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<S>) return saturate_to<D>(static_cast<double>(v));
  else return static_cast<D>(v);
}

// Numeric and bool types with their C++ types (bool is read and written as one byte 0/1).
template <class F>
void visit_cast_type(DataType t, F&& f) {
  if (t == DataType::Bool) f(bool{});
  else visit_type<TypeSet::Numeric>(t, "Cast", f);
}

Tensor cast_numeric(const RunContext& ctx, const Tensor& x, DataType to) {
  if (is_float16_like(x.dtype())) return cast_numeric(ctx, as_float32(x), to);
  if (is_float16_like(to)) return float32_as(cast_numeric(ctx, x, DataType::Float), to);
  Tensor result = Tensor::uninitialized(to, x.dims());
  visit_cast_type(x.dtype(), [&](auto src_tag) {
    using S = decltype(src_tag);
    visit_cast_type(to, [&](auto dst_tag) {
      using D = decltype(dst_tag);
      const S* src = reinterpret_cast<const S*>(x.bytes().data());
      D* dst = reinterpret_cast<D*>(result.mutable_bytes());
      parallel_for(ctx.threads, x.size(), kCheapChunk, [&](int64_t begin, int64_t end) {
        if constexpr (std::is_same_v<S, bool>) {
          // Bytes other than 0 and 1 would not be valid bools: read them as bytes.
          const uint8_t* bytes = reinterpret_cast<const uint8_t*>(src);
          for (int64_t i = begin; i < end; ++i) dst[i] = static_cast<D>(bytes[i] != 0);
        } else {
          for (int64_t i = begin; i < end; ++i) dst[i] = convert<D>(src[i]);
        }
      });
    });
  });
  return result;
}

// Shortest text that reads back to the same value; NaN and infinities spelled NaN, INF, -INF.
template <class T>
std::string float_to_string(T v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "INF" : "-INF";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, r.ptr);
}

// The fewest significant digits that read back to the same 16-bit value (0.1, not the float
// 0.099975586 the half nearest 0.1 is).
std::string float16_to_string(uint16_t bits, DataType t) {
  bool half = t == DataType::Float16;
  float v = half ? ir::half_to_float(bits) : ir::bfloat16_to_float(bits);
  if (std::isnan(v) || std::isinf(v)) return float_to_string(v);
  char buf[64];
  for (int digits = 1; digits < 9; ++digits) {
    auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::general, digits);
    float back = 0;
    std::from_chars(buf, r.ptr, back);
    if ((half ? ir::float_to_half(back) : ir::float_to_bfloat16(back)) == bits) return std::string(buf, r.ptr);
  }
  return float_to_string(v);
}

Tensor cast_to_string(const Tensor& x) {
  std::vector<std::string> values(x.size());
  DataType t = x.dtype();
  if (t == DataType::Float) {
    auto v = x.values<float>();
    for (size_t i = 0; i < v.size(); ++i) values[i] = float_to_string(v[i]);
  } else if (is_float16_like(t)) {
    auto bits = x.values<uint16_t>();
    for (size_t i = 0; i < bits.size(); ++i) values[i] = float16_to_string(bits[i], t);
  } else if (t == DataType::Double) {
    auto v = x.values<double>();
    for (size_t i = 0; i < v.size(); ++i) values[i] = float_to_string(v[i]);
  } else if (t == DataType::Bool) {
    auto v = x.values<uint8_t>();
    for (size_t i = 0; i < v.size(); ++i) values[i] = v[i] ? "1" : "0";
  } else {
    visit_type<TypeSet::Integer>(t, "Cast", [&](auto tag) {
      using T = decltype(tag);
      auto v = x.values<T>();
      for (size_t i = 0; i < v.size(); ++i) values[i] = std::to_string(v[i]);
    });
  }
  return Tensor::from_strings(x.dims(), std::move(values));
}

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

// Parses the whole of `text` (surrounding blanks and a leading '+' allowed) as T: decimal or
// scientific notation, "NaN", "INF", "-INF", "Infinity" in any case, "true"/"false" for bool.
template <class T>
T parse_number(const std::string& text) {
  std::string_view s = text;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  if constexpr (std::is_same_v<T, bool>) {
    if (equals_ignoring_case(s, "true")) return true;
    if (equals_ignoring_case(s, "false")) return false;
  }
  std::string_view body = s;
  if (body.size() > 1 && body[0] == '+' && body[1] != '-') body.remove_prefix(1);  // from_chars refuses '+'
  const char* first = body.data();
  const char* last = body.data() + body.size();
  if constexpr (std::is_floating_point_v<T>) {
    T v{};
    auto r = std::from_chars(first, last, v);
    if (r.ec == std::errc() && r.ptr == last) return v;
    if (r.ec == std::errc::result_out_of_range && r.ptr == last)  // beyond the type's range
      return body[0] == '-' ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
  } else {
    using I = std::conditional_t<std::is_same_v<T, bool>, int64_t, T>;
    I v{};
    auto r = std::from_chars(first, last, v);
    if (r.ec == std::errc() && r.ptr == last) return convert<T>(v);
    double d = 0;  // "1e3", "2.5": read as a number, then converted
    auto rd = std::from_chars(first, last, d);
    if (rd.ec == std::errc() && rd.ptr == last) return convert<T>(d);
  }
  throw Error("cannot read the string '" + text + "' as a number");
}

Tensor cast_from_string(const RunContext& ctx, const Tensor& x, DataType to) {
  if (to == DataType::String) return x;
  if (is_float16_like(to)) return float32_as(cast_from_string(ctx, x, DataType::Float), to);
  const auto& strings = x.string_values();
  Tensor result = Tensor::uninitialized(to, x.dims());
  visit_cast_type(to, [&](auto tag) {
    using D = decltype(tag);
    D* dst = reinterpret_cast<D*>(result.mutable_bytes());
    for (size_t i = 0; i < strings.size(); ++i) dst[i] = parse_number<D>(strings[i]);
  });
  return result;
}

Tensor cast(const RunContext& ctx, const Tensor& x, DataType to) {
  check_castable(x.dtype(), "input");
  if (x.dtype() == to) return x;
  if (x.dtype() == DataType::String) return cast_from_string(ctx, x, to);
  if (to == DataType::String) return cast_to_string(x);
  return cast_numeric(ctx, x, to);
}

void check_saturate(const KernelInfo& info) {
  int64_t saturate = info.node.attr_int("saturate", 1);  // opset 19+, for float8 targets only
  if (saturate != 0 && saturate != 1) throw Error("attribute saturate must be 0 or 1, got " + std::to_string(saturate));
}

class CastKernel : public Kernel {
 public:
  explicit CastKernel(const KernelInfo& info) {
    const ir::Attribute* to = info.node.find_attribute("to");
    if (!to) throw Error("Cast needs the attribute 'to'");
    int64_t code = info.node.attr_int("to", 0);
    if (code < 0 || code > ir::kLastDataType || !ir::data_type_is_known(static_cast<int32_t>(code)))
      throw Error("attribute to is " + std::to_string(code) + ", which is not an ONNX element type");
    to_ = static_cast<DataType>(code);
    check_castable(to_, "target");
    check_saturate(info);
  }
  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    out[0] = cast(ctx, required_input(in, 0, "input"), to_);
  }

 private:
  DataType to_;
};

class CastLikeKernel : public Kernel {
 public:
  explicit CastLikeKernel(const KernelInfo& info) { check_saturate(info); }
  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    DataType to = required_input(in, 1, "target_type").dtype();
    check_castable(to, "target");
    out[0] = cast(ctx, required_input(in, 0, "input"), to);
  }
};

}  // namespace

void register_cast(KernelRegistry& r) {
  // Opset 1 named the target type with a string; from 6 it is the TensorProto number.
  r.add("", "Cast", 6, kLatestOpset, kernel_factory<CastKernel>());
  r.add("", "CastLike", 15, kLatestOpset, kernel_factory<CastLikeKernel>());
}

}  // namespace onnxptq::engine::elementwise
