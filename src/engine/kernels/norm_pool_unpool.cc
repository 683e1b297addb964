// MaxUnpool (opsets 9 and later): the values of X put back at the flat positions I gives them
// (MaxPool's Indices, over the whole output tensor) in an output of zeros.
//
// The indices address an output whose spatial axes are (in - 1) * stride + kernel - pad_begin -
// pad_end (ONNX operator docs); an output_shape up to a kernel larger pads it, as the ONNX backend
// tests and ONNX Runtime do. Values of every element type move as their bytes.
#include <cstring>

#include "engine/kernels/norm_pool.h"

namespace onnxptq::engine {
namespace {

class MaxUnpoolKernel : public Kernel {
 public:
  explicit MaxUnpoolKernel(const KernelInfo& info) {
    const ir::Node& n = info.node;
    if (!n.find_attribute("kernel_shape")) throw Error("MaxUnpool needs the kernel_shape attribute");
    kernel_ = n.attr_ints("kernel_shape", {});
    const size_t k = kernel_.size();
    strides_ = n.attr_ints("strides", std::vector<int64_t>(k, 1));
    pads_ = n.attr_ints("pads", std::vector<int64_t>(2 * k, 0));
    if (k == 0 || strides_.size() != k || pads_.size() != 2 * k)
      throw Error("kernel_shape " + ir::dims_to_string(kernel_) + " needs " + std::to_string(k) + " strides and " +
                  std::to_string(2 * k) + " pads, got strides " + ir::dims_to_string(strides_) + " and pads " +
                  ir::dims_to_string(pads_));
    for (size_t i = 0; i < k; ++i) {
      if (kernel_[i] < 1) throw Error("kernel_shape " + ir::dims_to_string(kernel_) + " must be positive");
      if (strides_[i] < 1) throw Error("strides " + ir::dims_to_string(strides_) + " must be positive");
      if (pads_[i] < 0 || pads_[i + k] < 0) throw Error("pads " + ir::dims_to_string(pads_) + " must not be negative");
    }
  }

  void run(const RunContext&, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    const Tensor& indices = *in[1];
    const size_t k = kernel_.size();
    if (x.rank() != k + 2)
      throw Error("X " + ir::dims_to_string(x.dims()) + " does not match kernel_shape " + ir::dims_to_string(kernel_) +
                  ": expected rank " + std::to_string(k + 2));
    if (indices.dtype() != DataType::Int64) throw Error("I must be int64");
    if (indices.dims() != x.dims())
      throw Error("I " + ir::dims_to_string(indices.dims()) + " must have X's shape " + ir::dims_to_string(x.dims()));
    if (ir::data_type_bits(x.dtype()) % 8 != 0 || x.dtype() == DataType::String)
      throw Error("MaxUnpool does not take " + norm_pool_type_name(x.dtype()) + " tensors");

    // The indices address the shape MaxPool's attributes give, whatever output_shape says.
    std::vector<int64_t> dims = {x.dims()[0], x.dims()[1]};
    for (size_t i = 0; i < k; ++i) {
      const int64_t d = (x.dims()[2 + i] - 1) * strides_[i] + kernel_[i] - pads_[i] - pads_[i + k];
      if (d < 0) throw Error("pads " + ir::dims_to_string(pads_) + " leave no output for X " + ir::dims_to_string(x.dims()));
      dims.push_back(x.dims()[2 + i] == 0 ? 0 : d);
    }
    const int64_t count = ir::checked_element_count(dims, "MaxUnpool output");
    Tensor y(x.dtype(), dims);  // zeros
    const size_t width = ir::data_type_bits(x.dtype()) / 8;
    const std::byte* src = x.bytes().data();
    std::byte* dst = y.mutable_bytes();
    auto idx = indices.values<int64_t>();
    for (size_t i = 0; i < idx.size(); ++i) {
      if (idx[i] < 0 || idx[i] >= count)
        throw Error("index " + std::to_string(idx[i]) + " in I is out of range for the output " + ir::dims_to_string(dims));
      std::memcpy(dst + static_cast<size_t>(idx[i]) * width, src + i * width, width);
    }

    const Tensor* shape = in.size() > 2 && in[2] && in[2]->size() > 0 ? in[2] : nullptr;
    if (shape) {
      // A larger output_shape pads each spatial axis after the values (as ONNX Runtime does: by
      // up to a kernel's length, one of it before them when it is a whole kernel).
      std::vector<int64_t> given = read_int64s(*shape, "output_shape");
      std::vector<int64_t> offset(given.size(), 0);
      bool valid = given.size() == dims.size() && given[0] == dims[0] && given[1] == dims[1];
      for (size_t i = 0; valid && i < k; ++i) {
        const int64_t extra = given[2 + i] - dims[2 + i];
        valid = extra >= 0 && extra <= kernel_[i];
        offset[2 + i] = extra == kernel_[i] && extra > 0 ? 1 : 0;
      }
      if (!valid)
        throw Error("output_shape " + ir::dims_to_string(given) + " must keep N and C of " + ir::dims_to_string(dims) +
                    " and lie within kernel_shape " + ir::dims_to_string(kernel_) + " of its spatial sizes");
      if (given != dims) y = place(y, given, offset, width);
    }
        out[0] = std::move(y);
  }

 private:
  // `y` copied into zeros of `dims` at `offset` on each axis.
  static Tensor place(const Tensor& y, const std::vector<int64_t>& dims, const std::vector<int64_t>& offset, size_t width) {
    Tensor out(y.dtype(), dims);
    const std::vector<int64_t>& from = y.dims();
    const int64_t row = from.back();
    const int64_t rows = row == 0 ? 0 : y.size() / row;
    std::vector<int64_t> index(from.size(), 0);
    for (int64_t r = 0; r < rows; ++r) {
      int64_t at = 0;
      for (size_t a = 0; a < dims.size(); ++a) at = at * dims[a] + index[a] + offset[a];
      std::memcpy(out.mutable_bytes() + static_cast<size_t>(at) * width, y.bytes().data() + r * row * width, row * width);
      for (size_t a = from.size() - 1; a-- > 0;) {
        if (++index[a] < from[a]) break;
        index[a] = 0;
      }
    }
    return out;
  }

  std::vector<int64_t> kernel_, strides_, pads_;
};

}  // namespace

void norm_pool_register_unpool(KernelRegistry& r) {
  r.add("", "MaxUnpool", 9, kLatestOpset, kernel_factory<MaxUnpoolKernel>());
}

}  // namespace onnxptq::engine
