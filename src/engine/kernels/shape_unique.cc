// Unique (opsets 11 and later): the distinct elements of X (flattened), or its distinct slices
// along `axis`, sorted ascending (slices compared element by element) or in order of first
// occurrence, with the index of each one's first occurrence, each input's index in Y, and counts
// (as numpy.unique). Floats compare by value (-0 equals 0; NaNs equal each other and sort last).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "engine/kernels/shape.h"

namespace onnxptq::engine::shape {
namespace {

// Three-way comparison of a and b; floats in a total order with NaN largest.
template <class T>
int compare_values(const T& a, const T& b) {
  if constexpr (std::is_floating_point_v<T>) {
    const bool na = std::isnan(a), nb = std::isnan(b);
    if (na || nb) return na == nb ? 0 : (na ? 1 : -1);
  }
  return a < b ? -1 : (b < a ? 1 : 0);
}

class UniqueKernel : public Kernel {
 public:
  explicit UniqueKernel(const KernelInfo& info) : sorted_(info.node.attr_int("sorted", 1)) {
    if (sorted_ != 0 && sorted_ != 1) throw Error("sorted must be 0 or 1, got " + std::to_string(sorted_));
    if (info.node.find_attribute("axis")) axis_ = info.node.attr_int("axis", 0);
  }

  void run(const RunContext&, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    const auto rank = static_cast<int64_t>(x.rank());
    // The input as [outer, n, inner] around the axis: n slices of outer x inner elements.
    int64_t outer = 1, n = x.size(), inner = 1, axis = -1;
    if (axis_) {
      if (rank == 0) throw Error("axis " + std::to_string(*axis_) + " given for a scalar input");
      axis = normalize_axis(*axis_, rank);
      n = x.dims()[axis];
      for (int64_t a = 0; a < axis; ++a) outer *= x.dims()[a];
      for (int64_t a = axis + 1; a < rank; ++a) inner *= x.dims()[a];
    }

    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t{0});
    // Slice comparison, over the elements of each slice in order.
    auto sort_with = [&]<class T>(const T* v) {
      auto cmp = [&](int64_t a, int64_t b) {
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t i = 0; i < inner; ++i) {
            const int c = compare_values(v[(o * n + a) * inner + i], v[(o * n + b) * inner + i]);
            if (c != 0) return c;
          }
        return 0;
      };
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return cmp(a, b) < 0; });
      std::vector<int64_t> starts;  // positions in `order` where a new distinct slice begins
      for (int64_t p = 0; p < n; ++p)
        if (p == 0 || cmp(order[p - 1], order[p]) != 0) starts.push_back(p);
      return starts;
    };
    std::vector<int64_t> starts = sorted_keys(x, sort_with);

    // Distinct slices: the first occurrence (stable sort: the first of each run) and count.
    const auto k = static_cast<int64_t>(starts.size());
    std::vector<int64_t> first(static_cast<size_t>(k)), counts(static_cast<size_t>(k));
    std::vector<int64_t> group_of(static_cast<size_t>(n));
    for (int64_t g = 0; g < k; ++g) {
      const int64_t end = g + 1 < k ? starts[g + 1] : n;
      first[g] = order[starts[g]];
      counts[g] = end - starts[g];
      for (int64_t p = starts[g]; p < end; ++p) group_of[order[p]] = g;
    }
    std::vector<int64_t> rank_of(static_cast<size_t>(k));  // output position of each group
    std::iota(rank_of.begin(), rank_of.end(), int64_t{0});
    if (!sorted_) {
      std::vector<int64_t> by_first(static_cast<size_t>(k));
      std::iota(by_first.begin(), by_first.end(), int64_t{0});
      std::sort(by_first.begin(), by_first.end(), [&](int64_t a, int64_t b) { return first[a] < first[b]; });
      for (int64_t p = 0; p < k; ++p) rank_of[by_first[p]] = p;
    }
    std::vector<int64_t> out_first(static_cast<size_t>(k)), out_counts(static_cast<size_t>(k));
    for (int64_t g = 0; g < k; ++g) {
      out_first[rank_of[g]] = first[g];
      out_counts[rank_of[g]] = counts[g];
    }
    std::vector<int64_t> inverse(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) inverse[i] = rank_of[group_of[i]];

    std::vector<int64_t> y_dims = {k};
    if (axis >= 0) {
      y_dims = x.dims();
      y_dims[axis] = k;
    }
    Tensor y = x.dtype() == DataType::String ? Tensor(DataType::String, y_dims) : Tensor::uninitialized(x.dtype(), y_dims);
    visit_storage(x.dtype(), "Unique", [&]<class S>(std::type_identity<S>) {
      const S* src = elements<S>(x);
      S* dst = mutable_elements<S>(y);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t u = 0; u < k; ++u)
          copy_elements(src + (o * n + out_first[u]) * inner, dst + (o * k + u) * inner, inner);
    });
    out[0] = std::move(y);
    if (out.size() > 1) out[1] = Tensor::from_values<int64_t>({k}, out_first);
    if (out.size() > 2) out[2] = Tensor::from_values<int64_t>({n}, inverse);
    if (out.size() > 3) out[3] = Tensor::from_values<int64_t>({k}, out_counts);
  }

 private:
  // Calls sort_with(values) with x's elements as comparable values (half floats widened).
  template <class F>
  static std::vector<int64_t> sorted_keys(const Tensor& x, F&& sort_with) {
    switch (x.dtype()) {
      case DataType::Float: return sort_with(x.values<float>().data());
      case DataType::Double: return sort_with(x.values<double>().data());
      case DataType::Float16:
      case DataType::BFloat16: {
        Tensor f = as_float32(x);
        return sort_with(f.values<float>().data());
      }
      case DataType::Int8: return sort_with(x.values<int8_t>().data());
      case DataType::UInt8: return sort_with(x.values<uint8_t>().data());
      case DataType::Bool: return sort_with(x.values<uint8_t>().data());
      case DataType::Int16: return sort_with(x.values<int16_t>().data());
      case DataType::UInt16: return sort_with(x.values<uint16_t>().data());
      case DataType::Int32: return sort_with(x.values<int32_t>().data());
      case DataType::UInt32: return sort_with(x.values<uint32_t>().data());
      case DataType::Int64: return sort_with(x.values<int64_t>().data());
      case DataType::UInt64: return sort_with(x.values<uint64_t>().data());
      case DataType::String: return sort_with(x.string_values().data());
      default: throw unsupported("Unique does not support " + std::string(ir::data_type_name(x.dtype())) + " tensors");
    }
  }

  int64_t sorted_;
  std::optional<int64_t> axis_;
};

}  // namespace

void register_unique_kernels(KernelRegistry& r) { r.add("", "Unique", 11, kLatestOpset, kernel_factory<UniqueKernel>()); }

}  // namespace onnxptq::engine::shape
