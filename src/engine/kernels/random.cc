// Bernoulli (opset 15) and RandomUniformLike (opset 1): the random family.
//
// Draws come from SplitMix64 (G. Steele, D. Lea and C. Flood, "Fast splittable pseudorandom
// number generators", OOPSLA 2014) used as a counter-based generator, as the random calibration
// reader does: draw i of a stream s is splitmix64(s + (i + 1) * golden), so the elements need no
// sequential state and threads fill parts of one tensor independently.
//
// Streams. With the seed attribute, every run draws from the stream of that seed: the same
// values each run, whatever ran before and however many threads run samples at once (ONNX
// Runtime advances one generator from run to run; a calibration here must not depend on the
// order its workers take samples in). Without a seed each run takes a fresh stream, as ONNX
// Runtime draws anew on each run. The ONNX operator docs warn that these ops "may not produce
// the same values in different implementations (even if a seed is specified)": no other
// implementation's values are reproduced.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>
#include <random>

#include "engine/kernel.h"
#include "engine/parallel.h"
#include "ir/float16.h"

namespace onnxptq::engine {
namespace {

constexpr uint64_t kRandomGolden = 0x9E3779B97F4A7C15ULL;

constexpr uint64_t random_splitmix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Draw i of `stream`, uniform in [0, 1): the top 53 bits over 2^53, exact in double.
inline double random_unit(uint64_t stream, int64_t i) {
  return static_cast<double>(random_splitmix64(stream + static_cast<uint64_t>(i + 1) * kRandomGolden) >> 11) *
         0x1.0p-53;
}

// The stream of each run of one node: fixed by the seed attribute, else fresh each run.
class RandomStreams {
 public:
  explicit RandomStreams(const ir::Node& node) {
    if (const ir::Attribute* a = node.find_attribute("seed")) {
      if (a->type != ir::AttrType::Float) throw Error("seed must be a float attribute");
      // The seed's bits, mixed: every distinct float (0.5 and 0.75 alike) seeds its own stream.
      seeded_ = random_splitmix64(std::bit_cast<uint32_t>(a->f) + kRandomGolden);
    } else {
      std::random_device entropy;
      base_ = (static_cast<uint64_t>(entropy()) << 32) ^ entropy();
    }
  }

  uint64_t next() const {
    if (seeded_) return *seeded_;
    return random_splitmix64(base_ + runs_.fetch_add(1, std::memory_order_relaxed) * kRandomGolden);
  }

 private:
  std::optional<uint64_t> seeded_;
  uint64_t base_ = 0;
  mutable std::atomic<uint64_t> runs_{0};
};

// The dtype attribute as a type among `allowed`, or nullopt when absent.
std::optional<DataType> random_dtype_attr(const ir::Node& node, std::initializer_list<DataType> allowed) {
  const ir::Attribute* a = node.find_attribute("dtype");
  if (!a) return std::nullopt;
  const int64_t code = node.attr_int("dtype", 0);
  const auto type = static_cast<DataType>(code);
  if (code < 0 || code > kLastDataType || std::find(allowed.begin(), allowed.end(), type) == allowed.end()) {
    const std::string name = code >= 0 && code <= kLastDataType && ir::data_type_is_known(static_cast<int32_t>(code))
                                 ? " (" + std::string(ir::data_type_name(type)) + ")"
                                 : "";
    throw Error("dtype " + std::to_string(code) + name + " is not an output type of " + node.op_type);
  }
  return type;
}

// ---- Bernoulli

// An output of 1 with probability p: draw u in [0, 1), 1 when u < p (so p = 0 never, p = 1 always).
class BernoulliKernel : public Kernel {
 public:
  explicit BernoulliKernel(const KernelInfo& info)
      : streams_(info.node),
        dtype_(random_dtype_attr(info.node, {DataType::Float16, DataType::Float, DataType::Double, DataType::BFloat16,
                                             DataType::UInt8, DataType::UInt16, DataType::UInt32, DataType::UInt64,
                                             DataType::Int8, DataType::Int16, DataType::Int32, DataType::Int64,
                                             DataType::Bool})) {}

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& input = *in[0];
    const DataType in_type = input.dtype();
    if (in_type != DataType::Float && in_type != DataType::Double && in_type != DataType::Float16 &&
        in_type != DataType::BFloat16)
      throw Error("input must hold float probabilities, got " + std::string(ir::data_type_name(in_type)));
    const int64_t n = input.size();
    // The probabilities in double (float16 and bfloat16 widened through float).
    std::vector<double> p(static_cast<size_t>(n));
    if (in_type == DataType::Double) {
      auto v = input.values<double>();
      std::copy(v.begin(), v.end(), p.begin());
    } else {
      Tensor f = as_float32(input);
      auto v = f.values<float>();
      std::copy(v.begin(), v.end(), p.begin());
    }
    for (int64_t i = 0; i < n; ++i)
      if (!(p[i] >= 0 && p[i] <= 1))
        throw Error("input element " + std::to_string(i) + " is " + std::to_string(p[i]) +
                    ", not a probability in [0, 1]");

    const uint64_t stream = streams_.next();
    std::vector<uint8_t> ones(static_cast<size_t>(n));
    parallel_for(ctx.threads, n, 1 << 14, [&](int64_t first, int64_t last) {
      for (int64_t i = first; i < last; ++i) ones[i] = random_unit(stream, i) < p[i] ? 1 : 0;
    });

    const DataType type = dtype_.value_or(in_type);
    Tensor y = Tensor::uninitialized(type, input.dims());
    auto fill = [&]<class T>(T one) {
      auto v = y.mutable_values<T>();
      for (int64_t i = 0; i < n; ++i) v[i] = ones[i] ? one : T(0);
    };
    switch (type) {
      case DataType::Float: fill(1.0f); break;
      case DataType::Double: fill(1.0); break;
      case DataType::Float16: fill(ir::float_to_half(1.0f)); break;
      case DataType::BFloat16: fill(ir::float_to_bfloat16(1.0f)); break;
      case DataType::UInt8:
      case DataType::Bool: fill(uint8_t{1}); break;
      case DataType::Int8: fill(int8_t{1}); break;
      case DataType::UInt16: fill(uint16_t{1}); break;
      case DataType::Int16: fill(int16_t{1}); break;
      case DataType::UInt32: fill(uint32_t{1}); break;
      case DataType::Int32: fill(int32_t{1}); break;
      case DataType::UInt64: fill(uint64_t{1}); break;
      case DataType::Int64: fill(int64_t{1}); break;
      default: throw Error("Bernoulli cannot write " + std::string(ir::data_type_name(type)));
    }
    out[0] = std::move(y);
  }

 private:
  RandomStreams streams_;
  std::optional<DataType> dtype_;
};

// ---- RandomUniformLike

// float16 neighbours: the next value toward -inf or +inf of a finite or infinite half.
uint16_t half_next_down(uint16_t h) {
  if ((h & 0x7FFF) == 0) return 0x8001;  // +-0: the smallest negative subnormal
  return (h & 0x8000) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h - 1);
}
uint16_t half_next_up(uint16_t h) {
  if ((h & 0x7FFF) == 0) return 0x0001;
  return (h & 0x8000) ? static_cast<uint16_t>(h - 1) : static_cast<uint16_t>(h + 1);
}

// Values uniform in [low, high), the shape of the input, of dtype or else the input's type.
// Each value is low + (high - low) * u in double, rounded to the output type and kept below
// high (and at or above low) by moving a value that rounded onto the bound to its neighbour.
class RandomUniformLikeKernel : public Kernel {
 public:
  explicit RandomUniformLikeKernel(const KernelInfo& info)
      : streams_(info.node),
        dtype_(random_dtype_attr(info.node, {DataType::Float16, DataType::Float, DataType::Double})),
        low_(info.node.attr_float("low", 0.0f)),
        high_(info.node.attr_float("high", 1.0f)) {
    if (!std::isfinite(low_) || !std::isfinite(high_) || !(low_ < high_))
      throw Error("low " + std::to_string(low_) + " and high " + std::to_string(high_) +
                  " must be finite with low < high");
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& like = *in[0];
    const DataType type = dtype_.value_or(like.dtype());
    if (type != DataType::Float && type != DataType::Double && type != DataType::Float16)
      throw Error("the input is " + std::string(ir::data_type_name(like.dtype())) +
                  ": without a dtype attribute the output takes the input's type, which must be float16, float "
                  "or double");
    const int64_t n = like.size();
    const uint64_t stream = streams_.next();
    const double low = low_, span = static_cast<double>(high_) - low_;
    Tensor y = Tensor::uninitialized(type, like.dims());
    auto fill = [&](auto&& store) {
      parallel_for(ctx.threads, n, 1 << 14, [&](int64_t first, int64_t last) {
        for (int64_t i = first; i < last; ++i) store(i, low + span * random_unit(stream, i));
      });
    };
    if (type == DataType::Double) {
      const double top = std::nextafter(static_cast<double>(high_), -HUGE_VAL);
      auto v = y.mutable_values<double>();
      fill([&](int64_t i, double x) { v[i] = std::min(x, top); });
    } else if (type == DataType::Float) {
      const float top = std::nextafter(high_, -HUGE_VALF);
      auto v = y.mutable_values<float>();
      fill([&](int64_t i, double x) { v[i] = std::min(static_cast<float>(x), top); });
    } else {
      // The float16 values nearest inside [low, high); none when both bounds fall between two.
      uint16_t lo = ir::float_to_half(low_), hi = ir::float_to_half(high_);
      if (ir::half_to_float(lo) < low_) lo = half_next_up(lo);
      if (ir::half_to_float(hi) >= high_) hi = half_next_down(hi);
      const float lo_f = ir::half_to_float(lo), hi_f = ir::half_to_float(hi);
      if (!(lo_f <= hi_f))
        throw Error("no float16 value lies in [" + std::to_string(low_) + ", " + std::to_string(high_) + ")");
      auto v = y.mutable_values<uint16_t>();
      fill([&](int64_t i, double x) {
        uint16_t h = ir::float_to_half(static_cast<float>(x));
        const float f = ir::half_to_float(h);
        v[i] = f > hi_f ? hi : f < lo_f ? lo : h;
      });
    }
    out[0] = std::move(y);
  }

 private:
  RandomStreams streams_;
  std::optional<DataType> dtype_;
  float low_, high_;
};

}  // namespace

void register_random_kernels(KernelRegistry& r) {
  // Opset 22 adds bfloat16 to their types (Bernoulli takes it already): later opsets are not claimed.
  r.add("", "Bernoulli", 15, 21, kernel_factory<BernoulliKernel>());
  r.add("", "RandomUniformLike", 1, 21, kernel_factory<RandomUniformLikeKernel>());
}

}  // namespace onnxptq::engine
