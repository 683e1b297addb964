// Pad: constant, edge, reflect and wrap (opset 19) modes; negative pads crop. Each axis gets a
// table from output index to input index (-1: the constant), and each output row is copied
// as left pad, one contiguous run of input, right pad.
#include <algorithm>

#include "engine/kernels/shape.h"

namespace onnxptq::engine::shape {
namespace {

enum class PadMode { Constant, Edge, Reflect, Wrap };

// Output index -> input index along one axis. A negative pad crops first, then the mode pads
// the cropped range (so "edge" repeats the new edge).
std::vector<int64_t> axis_map(PadMode mode, int64_t dim, int64_t begin, int64_t end, int64_t out_dim) {
  int64_t first = std::max<int64_t>(-begin, 0);             // first input kept
  int64_t kept = dim - first - std::max<int64_t>(-end, 0);  // inputs kept
  int64_t lead = std::max<int64_t>(begin, 0);               // outputs before them
  std::vector<int64_t> map(static_cast<size_t>(out_dim));
  for (int64_t o = 0; o < out_dim; ++o) {
    int64_t j = o - lead;
    if (mode == PadMode::Constant && (j < 0 || j >= kept)) {
      map[o] = -1;
      continue;
    }
    int64_t m = j;
    if (j < 0 || j >= kept) {
      if (mode == PadMode::Edge) {
        m = std::clamp<int64_t>(j, 0, kept - 1);
      } else if (mode == PadMode::Wrap) {
        m = ((j % kept) + kept) % kept;
      } else if (kept > 1) {  // reflect: mirrored without repeating the edge, periodic beyond
        int64_t period = 2 * (kept - 1);
        m = ((j % period) + period) % period;
        if (m >= kept) m = period - m;
      } else {
        m = 0;
      }
    }
    map[o] = m + first;
  }
  return map;
}

class PadKernel : public Kernel {
 public:
  explicit PadKernel(const KernelInfo& info) : opset_(info.opset) {
    std::string mode = info.node.attr_string("mode", "constant");
    if (mode == "constant") mode_ = PadMode::Constant;
    else if (mode == "edge") mode_ = PadMode::Edge;
    else if (mode == "reflect") mode_ = PadMode::Reflect;
    else if (mode == "wrap" && opset_ >= 19) mode_ = PadMode::Wrap;
    else throw Error("mode '" + mode + "' is not one of constant, edge, reflect" + (opset_ >= 19 ? ", wrap" : ""));
    if (opset_ < 11) {
      if (!info.node.find_attribute("pads")) throw Error("the pads attribute is required");
      pads_ = info.node.attr_ints("pads", {});
      value_ = info.node.attr_float("value", 0.0f);
    }
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    auto rank = static_cast<int64_t>(x.rank());
    std::vector<int64_t> pads = pads_;
    std::vector<int64_t> axes;
    if (opset_ >= 11) {
      if (in.size() < 2 || !in[1]) throw Error("the pads input is required");
      pads = read_int64s(*in[1], "pads");
      if (opset_ >= 18 && in.size() > 3 && in[3]) axes = read_int64s(*in[3], "axes");
    }
    if (axes.empty())
      for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
    if (pads.size() != 2 * axes.size())
      throw Error("pads " + ir::dims_to_string(pads) + " should have " + std::to_string(2 * axes.size()) +
                  " values for input " + describe(x));
    std::vector<int64_t> begin(x.rank(), 0), end(x.rank(), 0), dims = x.dims();
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t axis = normalize_axis(axes[i], rank);
      begin[axis] = pads[i];
      end[axis] = pads[i + axes.size()];
    }
    for (int64_t p : pads)
      if (p > (int64_t{1} << 48) || p < -(int64_t{1} << 48))
        throw Error("pads " + ir::dims_to_string(pads) + " are too large");
    for (size_t a = 0; a < x.rank(); ++a) {
      dims[a] = x.dims()[a] + begin[a] + end[a];
      if (dims[a] < 0)
        throw Error("pads " + ir::dims_to_string(pads) + " crop more than axis " + std::to_string(a) + " of " +
                    describe(x));
      int64_t kept = x.dims()[a] - std::max<int64_t>(-begin[a], 0) - std::max<int64_t>(-end[a], 0);
      if (mode_ != PadMode::Constant && kept <= 0 && dims[a] > 0)
        throw Error("cannot pad axis " + std::to_string(a) + " of " + describe(x) +
                    " in this mode: nothing is left to repeat");
    }
    checked_element_count(dims, "output shape");
    std::vector<std::vector<int64_t>> maps(x.rank());
    for (size_t a = 0; a < x.rank(); ++a) maps[a] = axis_map(mode_, x.dims()[a], begin[a], end[a], dims[a]);
    Tensor value = constant_value(x, in);
    Tensor y = Tensor::uninitialized(x.dtype(), dims);
    visit_storage(x.dtype(), "Pad", [&]<class T>(std::type_identity<T>) {
      pad(elements<T>(x), x.dims(), maps, begin, elements<T>(value)[0], mutable_elements<T>(y), dims, ctx.threads);
    });
    out[0] = std::move(y);
  }

 private:
  // The padding value as a one-element tensor of the input's type.
  Tensor constant_value(const Tensor& x, std::span<const Tensor* const> in) const {
    if (opset_ < 11) {
      if (x.dtype() == DataType::String) return Tensor(DataType::String, {1});
      return filled_tensor(x.dtype(), {1}, value_);
    }
    if (in.size() > 2 && in[2] && in[2]->size() > 0) {
      if (in[2]->dtype() != x.dtype())
        throw Error("constant_value " + describe(*in[2]) + " is not of the input's type " + describe(x));
      return *in[2];
    }
    return Tensor(x.dtype(), {1});  // zero
  }

  template <class T>
  static void pad(const T* src, const std::vector<int64_t>& in_dims, const std::vector<std::vector<int64_t>>& maps,
                  const std::vector<int64_t>& begin, const T value, T* dst, const std::vector<int64_t>& dims,
                  int threads) {
    int64_t total = ir::element_count(dims);
    if (total == 0) return;
    if (dims.empty()) {
      dst[0] = src[0];
      return;
    }
    size_t outer_rank = dims.size() - 1;
    int64_t inner = dims.back();
    int64_t rows = total / inner;
    std::vector<int64_t> in_strides = contiguous_strides(in_dims);
    const std::vector<int64_t>& last = maps.back();
    // The output columns [copy_begin, copy_end) read one contiguous run of the input row.
    int64_t copy_begin = std::clamp<int64_t>(begin.back(), 0, inner);
    int64_t copy_end = copy_begin;
    while (copy_end < inner && last[copy_end] >= 0 && last[copy_end] == last[copy_begin] + (copy_end - copy_begin))
      ++copy_end;
    int64_t item_bytes = std::is_same_v<T, std::string> ? 32 : static_cast<int64_t>(sizeof(T));
    parallel_for(threads, rows, min_chunk_for(inner * item_bytes), [&](int64_t row_begin, int64_t row_end) {
      std::vector<int64_t> index(outer_rank);
      int64_t r = row_begin;
      for (size_t k = outer_rank; k-- > 0;) {
        index[k] = r % dims[k];
        r /= dims[k];
      }
      for (int64_t row = row_begin; row < row_end; ++row) {
        T* d = dst + row * inner;
        int64_t offset = 0;
        bool inside = true;
        for (size_t k = 0; k < outer_rank && inside; ++k) {
          int64_t m = maps[k][index[k]];
          inside = m >= 0;
          offset += m * in_strides[k];
        }
        if (!inside) {
          std::fill(d, d + inner, value);
        } else {
          const T* s = src + offset;
          for (int64_t j = 0; j < copy_begin; ++j) d[j] = last[j] >= 0 ? s[last[j]] : value;
          if (copy_end > copy_begin) copy_elements(s + last[copy_begin], d + copy_begin, copy_end - copy_begin);
          for (int64_t j = copy_end; j < inner; ++j) d[j] = last[j] >= 0 ? s[last[j]] : value;
        }
        for (size_t k = outer_rank; k-- > 0;) {
          if (++index[k] < dims[k]) break;
          index[k] = 0;
        }
      }
    });
  }

  int64_t opset_;
  PadMode mode_ = PadMode::Constant;
  std::vector<int64_t> pads_;
  float value_ = 0.0f;
};

}  // namespace

void register_pad_kernels(KernelRegistry& r) { r.add("", "Pad", 2, kLatestOpset, kernel_factory<PadKernel>()); }

}  // namespace onnxptq::engine::shape
