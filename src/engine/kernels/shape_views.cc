// Reshape, Squeeze, Unsqueeze and Flatten give the input's data new dimensions without copying
// it (the output shares the input's bytes; copy-on-write protects both); Shape and Size read the
// dimensions.
#include <algorithm>
#include <optional>

#include "engine/kernels/shape.h"

namespace onnxptq::engine::shape {
namespace {

// The input's data under new dimensions (same element count).
Tensor with_dims(const Tensor& in, std::vector<int64_t> dims) {
  if (in.dtype() == DataType::String) return Tensor::from_strings(std::move(dims), in.string_values());
  return Tensor(in.dtype(), std::move(dims), in.bytes());
}

// The axes attribute of opsets before 13 (later opsets take an input), nullopt when absent.
std::optional<std::vector<int64_t>> axes_attribute(const KernelInfo& info) {
  if (info.opset >= 13 || !info.node.find_attribute("axes")) return std::nullopt;
  return info.node.attr_ints("axes", {});
}

class ReshapeKernel : public Kernel {
 public:
  explicit ReshapeKernel(const KernelInfo& info)
      : allowzero_(info.opset >= 14 && info.node.attr_int("allowzero", 0) != 0) {
    if (info.opset < 5) shape_attr_ = info.node.attr_ints("shape", {});
  }
  void run(const RunContext&, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    std::vector<int64_t> shape;
    if (shape_attr_) shape = *shape_attr_;
    else if (in.size() > 1 && in[1]) shape = read_int64s(*in[1], "shape");
    else throw Error("the shape input is missing");
    out[0] = with_dims(x, output_dims(x.dims(), shape));
  }

 private:
  std::vector<int64_t> output_dims(const std::vector<int64_t>& in_dims, const std::vector<int64_t>& shape) const {
    std::vector<int64_t> dims(shape.size());
    int64_t known = 1;
    int inferred = -1;
    for (size_t i = 0; i < shape.size(); ++i) {
      int64_t s = shape[i];
      if (s == -1) {
        if (inferred >= 0) throw Error("shape " + ir::dims_to_string(shape) + " has more than one -1");
        inferred = static_cast<int>(i);
        continue;
      }
      if (s < -1) throw Error("shape " + ir::dims_to_string(shape) + " has the negative size " + std::to_string(s));
      if (s == 0 && !allowzero_) {
        if (i >= in_dims.size())
          throw Error("shape " + ir::dims_to_string(shape) + " copies dimension " + std::to_string(i) +
                      " (0) from input " + ir::dims_to_string(in_dims) + ", which has no such dimension");
        s = in_dims[i];
      }
      dims[i] = s;
      if (s > 0 && known > (int64_t{1} << 48) / s) throw Error("shape " + ir::dims_to_string(shape) + " is too large");
      known *= s;
    }
    int64_t total = ir::element_count(in_dims);
    if (inferred >= 0) {
      if (known == 0 || total % known != 0)
        throw Error("cannot reshape " + ir::dims_to_string(in_dims) + " to " + ir::dims_to_string(shape) +
                    ": the -1 dimension cannot be inferred");
      dims[inferred] = total / known;
    } else if (known != total) {
      throw Error("cannot reshape " + ir::dims_to_string(in_dims) + " (" + std::to_string(total) + " elements) to " +
                  ir::dims_to_string(shape) + " (" + std::to_string(known) + " elements)");
    }
    return dims;
  }

  bool allowzero_;
  std::optional<std::vector<int64_t>> shape_attr_;
};

class SqueezeKernel : public Kernel {
 public:
  explicit SqueezeKernel(const KernelInfo& info) : info_opset_(info.opset), axes_attr_(axes_attribute(info)) {}
  void run(const RunContext&, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    auto rank = static_cast<int64_t>(x.rank());
    std::vector<bool> drop(x.rank(), false);
    std::optional<std::vector<int64_t>> axes =
        info_opset_ < 13 ? axes_attr_
                         : (in.size() > 1 && in[1] ? std::optional(read_int64s(*in[1], "axes")) : std::nullopt);
    if (axes && !axes->empty()) {  // an empty list squeezes every 1, as no list does (ONNX Runtime too)
      for (int64_t a : *axes) {
        int64_t axis = normalize_axis(a, rank);
        if (x.dims()[axis] != 1)
          throw Error("cannot squeeze axis " + std::to_string(a) + " of shape " + ir::dims_to_string(x.dims()) +
                      ": its size is not 1");
        drop[axis] = true;
      }
    } else {
      for (size_t i = 0; i < x.rank(); ++i) drop[i] = x.dims()[i] == 1;
    }
    std::vector<int64_t> dims;
    for (size_t i = 0; i < x.rank(); ++i)
      if (!drop[i]) dims.push_back(x.dims()[i]);
    out[0] = with_dims(x, std::move(dims));
  }

 private:
  int64_t info_opset_;
  std::optional<std::vector<int64_t>> axes_attr_;
};

class UnsqueezeKernel : public Kernel {
 public:
  explicit UnsqueezeKernel(const KernelInfo& info) : opset_(info.opset), axes_attr_(axes_attribute(info)) {
    if (opset_ < 13 && !axes_attr_) throw Error("the axes attribute is required");
  }
  void run(const RunContext&, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    std::vector<int64_t> axes;
    if (opset_ < 13) axes = *axes_attr_;
    else if (in.size() > 1 && in[1]) axes = read_int64s(*in[1], "axes");
    else throw Error("the axes input is missing");
    auto rank = static_cast<int64_t>(x.rank() + axes.size());
    std::vector<bool> inserted(static_cast<size_t>(rank), false);
    for (int64_t a : axes) {
      int64_t axis = normalize_axis(a, rank);
      if (inserted[axis])
        throw Error("axes " + ir::dims_to_string(axes) + " name axis " + std::to_string(axis) + " twice");
      inserted[axis] = true;
    }
    std::vector<int64_t> dims;
    size_t next = 0;
    for (int64_t i = 0; i < rank; ++i) dims.push_back(inserted[i] ? 1 : x.dims()[next++]);
    out[0] = with_dims(x, std::move(dims));
  }

 private:
  int64_t opset_;
  std::optional<std::vector<int64_t>> axes_attr_;
};

class FlattenKernel : public Kernel {
 public:
  explicit FlattenKernel(const KernelInfo& info) : axis_(info.node.attr_int("axis", 1)) {}
  void run(const RunContext&, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    auto rank = static_cast<int64_t>(x.rank());
    // The axis may equal the rank (everything in the first dimension).
    if (axis_ < -rank || axis_ > rank)
      throw Error("axis " + std::to_string(axis_) + " is out of range for rank " + std::to_string(rank));
    int64_t axis = axis_ < 0 ? axis_ + rank : axis_;
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < rank; ++i) (i < axis ? outer : inner) *= x.dims()[i];
    out[0] = with_dims(x, {outer, inner});
  }

 private:
  int64_t axis_;
};

class ShapeKernel : public Kernel {
 public:
  explicit ShapeKernel(const KernelInfo& info) {
    if (info.opset >= 15) {
      start_ = info.node.attr_int("start", 0);
      if (info.node.find_attribute("end")) end_ = info.node.attr_int("end", 0);
    }
  }
  void run(const RunContext&, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const std::vector<int64_t>& dims = in[0]->dims();
    auto rank = static_cast<int64_t>(dims.size());
    auto clamp = [rank](int64_t i) { return std::clamp(i < 0 ? i + rank : i, int64_t{0}, rank); };
    int64_t start = clamp(start_), end = end_ ? clamp(*end_) : rank;
    std::vector<int64_t> part(dims.begin() + start, dims.begin() + std::max(start, end));
    out[0] = Tensor::from_values<int64_t>({static_cast<int64_t>(part.size())}, part);
  }

 private:
  int64_t start_ = 0;
  std::optional<int64_t> end_;
};

class SizeKernel : public Kernel {
 public:
  void run(const RunContext&, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    out[0] = Tensor::from_values<int64_t>({}, std::vector<int64_t>{in[0]->size()});
  }
};

}  // namespace

void register_view_kernels(KernelRegistry& r) {
  r.add("", "Reshape", 1, kLatestOpset, kernel_factory<ReshapeKernel>());
  r.add("", "Squeeze", 1, kLatestOpset, kernel_factory<SqueezeKernel>());
  r.add("", "Unsqueeze", 1, kLatestOpset, kernel_factory<UnsqueezeKernel>());
  r.add("", "Flatten", 1, kLatestOpset, kernel_factory<FlattenKernel>());
  r.add("", "Shape", 1, kLatestOpset, kernel_factory<ShapeKernel>());
  r.add("", "Size", 1, kLatestOpset, kernel_factory<SizeKernel>());
}

}  // namespace onnxptq::engine::shape
