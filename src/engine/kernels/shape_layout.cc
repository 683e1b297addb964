// Ops that copy a strided view of their input: Transpose, Slice, Split, Expand, Tile,
// DepthToSpace, SpaceToDepth; and Concat, which copies whole blocks.
#include <algorithm>
#include <optional>

#include "engine/kernels/shape.h"

namespace onnxptq::engine::shape {
namespace {

// The view of the whole of `x`, in its own order.
StridedView full_view(const Tensor& x) { return {x.dims(), contiguous_strides(x.dims()), 0}; }

// The output of `view` over `x`: the input itself, sharing its data, when the view is the
// identity; else a copy.
Tensor materialize(const Tensor& x, const StridedView& view, int threads, std::string_view op) {
  StridedView simple = simplify_view(view);
  bool identity = simple.offset == 0 && ir::element_count(view.dims) == x.size() &&
                  (simple.dims.empty() || (simple.dims.size() == 1 && simple.strides[0] == 1));
  if (identity && x.dtype() != DataType::String) return Tensor(x.dtype(), view.dims, x.bytes());
  Tensor out = Tensor::uninitialized(x.dtype(), view.dims);
  copy_view_tensor(x, view, out, threads, op);
  return out;
}

class TransposeKernel : public Kernel {
 public:
  explicit TransposeKernel(const KernelInfo& info) : perm_(info.node.attr_ints("perm", {})) {
    std::vector<int64_t> sorted = perm_;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size(); ++i)
      if (sorted[i] != static_cast<int64_t>(i))
        throw Error("perm " + ir::dims_to_string(perm_) + " is not a permutation of 0.." +
                    std::to_string(perm_.size() - 1));
  }
  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    size_t rank = x.rank();
    std::vector<int64_t> perm = perm_;
    if (!has_perm()) {
      for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(rank - 1 - i));
    } else if (perm.size() != rank) {
      throw Error("perm " + ir::dims_to_string(perm) + " does not fit input " + describe(x));
    }
    std::vector<int64_t> strides = contiguous_strides(x.dims());
    StridedView view;
    for (int64_t p : perm) {
      view.dims.push_back(x.dims()[p]);
      view.strides.push_back(strides[p]);
    }
    out[0] = materialize(x, view, ctx.threads, "Transpose");
  }

 private:
  bool has_perm() const { return !perm_.empty(); }
  std::vector<int64_t> perm_;
};

class ConcatKernel : public Kernel {
 public:
  explicit ConcatKernel(const KernelInfo& info) {
    if (info.opset >= 4 && !info.node.find_attribute("axis")) throw Error("the axis attribute is required");
    axis_ = info.node.attr_int("axis", 1);
  }
  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    if (in.empty() || !in[0]) throw Error("Concat needs at least one input");
    const Tensor& first = *in[0];
    auto rank = static_cast<int64_t>(first.rank());
    if (rank == 0) throw Error("cannot concatenate scalars");
    int64_t axis = normalize_axis(axis_, rank);
    std::vector<int64_t> dims = first.dims();
    dims[axis] = 0;
    for (const Tensor* t : in) {
      if (!t) throw Error("Concat inputs cannot be omitted");
      bool fits = t->dtype() == first.dtype() && t->rank() == first.rank();
      for (int64_t i = 0; fits && i < rank; ++i) fits = i == axis || t->dims()[i] == first.dims()[i];
      if (!fits)
        throw Error("input " + describe(*t) + " does not fit " + describe(first) + " along axis " +
                    std::to_string(axis));
      dims[axis] += t->dims()[axis];
    }
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < rank; ++i) {
      if (i < axis) outer *= dims[i];
      if (i > axis) inner *= dims[i];
    }
    Tensor y = Tensor::uninitialized(first.dtype(), dims);
    int64_t out_row = dims[axis] * inner;  // elements of one outer row of the output
    visit_storage(first.dtype(), "Concat", [&]<class T>(std::type_identity<T>) {
      T* dst = mutable_elements<T>(y);
      if constexpr (std::is_trivially_copyable_v<T>) {
        if (outer == 1) {  // one block per input: split the bytes over threads
          std::vector<CopyBlock> blocks;
          int64_t at = 0;
          for (const Tensor* t : in) {
            blocks.push_back({t->bytes().data(), reinterpret_cast<std::byte*>(dst + at),
                              static_cast<size_t>(t->size()) * sizeof(T)});
            at += t->size();
          }
          copy_blocks(blocks, ctx.threads);
          return;
        }
      }
      parallel_for(ctx.threads, outer, min_chunk_for(out_row * static_cast<int64_t>(sizeof(T))),
                   [&](int64_t begin, int64_t end) {
                     for (int64_t o = begin; o < end; ++o) {
                       T* d = dst + o * out_row;
                       for (const Tensor* t : in) {
                         int64_t block = t->dims()[axis] * inner;
                         copy_elements(elements<T>(*t) + o * block, d, block);
                         d += block;
                       }
                     }
                   });
    });
    out[0] = std::move(y);
  }

 private:
  int64_t axis_;
};

class SplitKernel : public Kernel {
 public:
  explicit SplitKernel(const KernelInfo& info) : opset_(info.opset), axis_(info.node.attr_int("axis", 0)) {
    if (opset_ < 13 && info.node.find_attribute("split")) split_attr_ = info.node.attr_ints("split", {});
    if (opset_ >= 18 && info.node.find_attribute("num_outputs")) {
      num_outputs_ = info.node.attr_int("num_outputs", 0);
      if (*num_outputs_ < 1) throw Error("num_outputs must be at least 1, got " + std::to_string(*num_outputs_));
      if (static_cast<size_t>(*num_outputs_) != info.node.outputs().size())
        throw Error("num_outputs is " + std::to_string(*num_outputs_) + " but the node has " +
                    std::to_string(info.node.outputs().size()) + " outputs");
    }
  }
  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    int64_t axis = normalize_axis(axis_, static_cast<int64_t>(x.rank()));
    int64_t dim = x.dims()[axis];
    auto n = static_cast<int64_t>(out.size());
    if (n == 0) throw Error("Split needs at least one output");
    std::vector<int64_t> sizes;
    if (split_attr_) {
      sizes = *split_attr_;
    } else if (opset_ >= 13 && in.size() > 1 && in[1]) {
      sizes = read_int64s(*in[1], "split");
    } else if (num_outputs_) {
      // The last part takes what is left: ceil(dim / n) for the others.
      int64_t part = (dim + n - 1) / n;
      if (part * (n - 1) > dim)
        throw Error("cannot split size " + std::to_string(dim) + " into " + std::to_string(n) + " parts");
      sizes.assign(static_cast<size_t>(n), part);
      sizes.back() = dim - part * (n - 1);
    } else {
      if (dim % n != 0)
        throw Error("cannot split size " + std::to_string(dim) + " into " + std::to_string(n) + " equal parts");
      sizes.assign(static_cast<size_t>(n), dim / n);
    }
    int64_t sum = 0;
    for (int64_t s : sizes) {
      if (s < 0 || s > dim)
        throw Error("split " + ir::dims_to_string(sizes) + " does not fit axis " + std::to_string(axis) + " of " +
                    describe(x));
      sum += s;
    }
    if (static_cast<int64_t>(sizes.size()) != n || sum != dim)
      throw Error("split " + ir::dims_to_string(sizes) + " does not divide axis " + std::to_string(axis) + " of " +
                  describe(x) + " into " + std::to_string(n) + " outputs");
    StridedView view = full_view(x);
    for (int64_t i = 0; i < n; ++i) {
      view.dims[axis] = sizes[i];
      out[i] = materialize(x, view, ctx.threads, "Split");
      view.offset += sizes[i] * view.strides[axis];
    }
  }

 private:
  int64_t opset_;
  int64_t axis_;
  std::optional<std::vector<int64_t>> split_attr_;
  std::optional<int64_t> num_outputs_;
};

class SliceKernel : public Kernel {
 public:
  explicit SliceKernel(const KernelInfo& info) : opset_(info.opset) {
    if (opset_ < 10) {
      if (!info.node.find_attribute("starts") || !info.node.find_attribute("ends"))
        throw Error("the starts and ends attributes are required");
      starts_ = info.node.attr_ints("starts", {});
      ends_ = info.node.attr_ints("ends", {});
      if (info.node.find_attribute("axes")) axes_ = info.node.attr_ints("axes", {});
    }
  }
  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    std::vector<int64_t> starts = starts_, ends = ends_, steps;
    std::optional<std::vector<int64_t>> axes = axes_;
    if (opset_ >= 10) {
      if (in.size() < 3 || !in[1] || !in[2]) throw Error("the starts and ends inputs are required");
      starts = read_int64s(*in[1], "starts");
      ends = read_int64s(*in[2], "ends");
      if (in.size() > 3 && in[3]) axes = read_int64s(*in[3], "axes");
      if (in.size() > 4 && in[4]) steps = read_int64s(*in[4], "steps");
    }
    size_t n = starts.size();
    if (steps.empty()) steps.assign(n, 1);
    if (!axes) {
      axes.emplace();
      for (size_t i = 0; i < n; ++i) axes->push_back(static_cast<int64_t>(i));
    }
    if (ends.size() != n || axes->size() != n || steps.size() != n)
      throw Error("starts, ends, axes and steps have different lengths (" + std::to_string(n) + ", " +
                  std::to_string(ends.size()) + ", " + std::to_string(axes->size()) + ", " +
                  std::to_string(steps.size()) + ")");
    auto rank = static_cast<int64_t>(x.rank());
    StridedView view = full_view(x);
    std::vector<bool> seen(x.rank(), false);
    for (size_t i = 0; i < n; ++i) {
      int64_t axis = normalize_axis((*axes)[i], rank);
      if (seen[axis])
        throw Error("axes " + ir::dims_to_string(*axes) + " name axis " + std::to_string(axis) + " twice");
      seen[axis] = true;
      int64_t dim = x.dims()[axis], step = steps[i];
      if (step == 0) throw Error("steps cannot be 0");
      // A step longer than the axis takes at most one element: shorten it so nothing overflows.
      step = std::clamp(step, -std::max<int64_t>(dim, 1), std::max<int64_t>(dim, 1));
      int64_t start = starts[i] < 0 ? starts[i] + dim : starts[i];
      int64_t end = ends[i] < 0 ? ends[i] + dim : ends[i];
      int64_t count = 0;
      if (dim == 0) {
        start = 0;
      } else if (step > 0) {
        start = std::clamp(start, int64_t{0}, dim);
        end = std::clamp(end, int64_t{0}, dim);
        count = end > start ? (end - start - 1) / step + 1 : 0;
      } else {
        start = std::clamp(start, int64_t{0}, dim - 1);
        end = std::clamp(end, int64_t{-1}, dim - 1);
        count = start > end ? (start - end - 1) / -step + 1 : 0;
      }
      if (count > 0) view.offset += start * view.strides[axis];
      view.dims[axis] = count;
      view.strides[axis] *= step;
    }
    out[0] = materialize(x, view, ctx.threads, "Slice");
  }

 private:
  int64_t opset_;
  std::vector<int64_t> starts_, ends_;
  std::optional<std::vector<int64_t>> axes_;
};

class ExpandKernel : public Kernel {
 public:
  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    std::vector<int64_t> shape = read_int64s(*in[1], "shape");
    checked_element_count(shape, "shape");
    std::vector<int64_t> dims = broadcast_shapes(x.dims(), shape);
    checked_element_count(dims, "output shape");
    std::vector<int64_t> strides = contiguous_strides(x.dims());
    StridedView view{dims, std::vector<int64_t>(dims.size(), 0), 0};
    size_t lead = dims.size() - x.rank();
    for (size_t i = 0; i < x.rank(); ++i) view.strides[lead + i] = x.dims()[i] == 1 ? 0 : strides[i];
    out[0] = materialize(x, view, ctx.threads, "Expand");
  }
};

class TileKernel : public Kernel {
 public:
  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    std::vector<int64_t> repeats = read_int64s(*in[1], "repeats");
    if (repeats.size() != x.rank())
      throw Error("repeats " + ir::dims_to_string(repeats) + " does not fit input " + describe(x));
    // The output [r0*d0, r1*d1, ...] read in row-major order is the view [r0, d0, r1, d1, ...]
    // of the input with stride 0 over each repetition.
    std::vector<int64_t> strides = contiguous_strides(x.dims());
    StridedView view;
    std::vector<int64_t> dims;
    for (size_t i = 0; i < x.rank(); ++i) {
      if (repeats[i] < 0) throw Error("repeats " + ir::dims_to_string(repeats) + " has a negative count");
      view.dims.insert(view.dims.end(), {repeats[i], x.dims()[i]});
      view.strides.insert(view.strides.end(), {0, strides[i]});
      dims.push_back(checked_element_count({repeats[i], x.dims()[i]}, "repeats times size"));
    }
    checked_element_count(dims, "output shape");
    Tensor y = Tensor::uninitialized(x.dtype(), dims);
    copy_view_tensor(x, view, y, ctx.threads, "Tile");
    out[0] = std::move(y);
  }
};

// DepthToSpace and SpaceToDepth: a 4-D tensor read through a 6-D view.
class DepthToSpaceKernel : public Kernel {
 public:
  explicit DepthToSpaceKernel(const KernelInfo& info) : blocksize_(info.node.attr_int("blocksize", 0)) {
    if (blocksize_ < 1) throw Error("blocksize must be positive, got " + std::to_string(blocksize_));
    std::string mode = info.opset >= 11 ? info.node.attr_string("mode", "DCR") : "DCR";
    if (mode != "DCR" && mode != "CRD") throw Error("mode '" + mode + "' is not DCR or CRD");
    crd_ = mode == "CRD";
  }
  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    int64_t b = blocksize_;
    if (x.rank() != 4 || b > x.dims()[1] / b || x.dims()[1] % (b * b) != 0)
      throw Error("input " + describe(x) +
                  " is not [N,C,H,W] with C a multiple of blocksize^2 = " + std::to_string(b * b));
    int64_t n = x.dims()[0], c = x.dims()[1] / (b * b), h = x.dims()[2], w = x.dims()[3], hw = h * w;
    // Output [n, c, h, b1, w, b2]; input channel (b1*b + b2)*c + c' (DCR) or c'*b*b + b1*b + b2 (CRD).
    StridedView view;
    view.dims = {n, c, h, b, w, b};
    if (crd_) view.strides = {x.dims()[1] * hw, b * b * hw, w, b * hw, 1, hw};
    else view.strides = {x.dims()[1] * hw, hw, w, b * c * hw, 1, c * hw};
    Tensor y = Tensor::uninitialized(x.dtype(), {n, c, h * b, w * b});
    copy_view_tensor(x, view, y, ctx.threads, "DepthToSpace");
    out[0] = std::move(y);
  }

 private:
  int64_t blocksize_;
  bool crd_ = false;
};

class SpaceToDepthKernel : public Kernel {
 public:
  explicit SpaceToDepthKernel(const KernelInfo& info) : blocksize_(info.node.attr_int("blocksize", 0)) {
    if (blocksize_ < 1) throw Error("blocksize must be positive, got " + std::to_string(blocksize_));
  }
  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    int64_t b = blocksize_;
    if (x.rank() != 4 || x.dims()[2] % b != 0 || x.dims()[3] % b != 0)
      throw Error("input " + describe(x) + " is not [N,C,H,W] with H and W multiples of blocksize " +
                  std::to_string(b));
    int64_t n = x.dims()[0], c = x.dims()[1], h = x.dims()[2], w = x.dims()[3];
    // Output [n, b1, b2, c, h', w'] from input [n, c, h'*b + b1, w'*b + b2].
    StridedView view;
    view.dims = {n, b, b, c, h / b, w / b};
    view.strides = {c * h * w, w, 1, h * w, b * w, b};
    Tensor y = Tensor::uninitialized(x.dtype(), {n, c * b * b, h / b, w / b});
    copy_view_tensor(x, view, y, ctx.threads, "SpaceToDepth");
    out[0] = std::move(y);
  }

 private:
  int64_t blocksize_;
};

}  // namespace

void register_layout_kernels(KernelRegistry& r) {
  r.add("", "Transpose", 1, kLatestOpset, kernel_factory<TransposeKernel>());
  r.add("", "Concat", 1, kLatestOpset, kernel_factory<ConcatKernel>());
  r.add("", "Split", 2, kLatestOpset, kernel_factory<SplitKernel>());
  r.add("", "Slice", 1, kLatestOpset, kernel_factory<SliceKernel>());
  r.add("", "Expand", 8, kLatestOpset, kernel_factory<ExpandKernel>());
  r.add("", "Tile", 6, kLatestOpset, kernel_factory<TileKernel>());
  r.add("", "DepthToSpace", 1, kLatestOpset, kernel_factory<DepthToSpaceKernel>());
  r.add("", "SpaceToDepth", 1, kLatestOpset, kernel_factory<SpaceToDepthKernel>());
}

}  // namespace onnxptq::engine::shape
