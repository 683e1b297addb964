// Conv and ConvTranspose as trained layers, 1-D to 3-D, with groups, strides, dilations, pads,
// auto_pad, and ConvTranspose's output_padding and output_shape (the ONNX operator
// specification), through oneDNN's convolution and deconvolution primitives: forward_training for
// y, backward_weights for dL/dw (oneDNN Developer Guide, "Convolution" and "Deconvolution").
// dL/db is the sum of dy over the batch and the spatial positions, accumulated here in double.
// The primitives are made once per input shape, in the layouts oneDNN prefers (blocked), with
// reorders from and to the caller's row-major buffers: nearly twice as fast as plain layouts, the
// reorders included, for a 3x3 convolution of 64 channels.
#include <omp.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "finetune/layer_op_detail.h"
#include "ir/tensor.h"
#include "onnxptq/error.h"

namespace onnxptq::finetune::detail {
namespace {

using Dims = std::vector<int64_t>;

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

dnnl::memory::dims dnnl_dims(const Dims& v) { return dnnl::memory::dims(v.begin(), v.end()); }

dnnl::memory::desc f32_desc(const Dims& dims, const Dims& strides) {
  return dnnl::memory::desc(dnnl_dims(dims), dnnl::memory::data_type::f32, dnnl_dims(strides));
}

// Row-major: what the caller's buffers hold (the layouts oneDNN names ncw, nchw, ncdhw, goihw...).
dnnl::memory::desc f32_dense(const Dims& dims) {
  Dims strides(dims.size());
  int64_t s = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    strides[i] = s;
    s *= dims[i];
  }
  return f32_desc(dims, strides);
}

dnnl::memory::desc f32_any(const Dims& dims) {
  return dnnl::memory::desc(dnnl_dims(dims), dnnl::memory::data_type::f32, dnnl::memory::format_tag::any);
}

// One operand of a primitive: the caller's layout of it and the one the primitive chose, with a
// reorder between them and the primitive's copy (allocated by oneDNN, aligned) when they differ.
class Staged {
 public:
  // `to_primitive`: the operand is read by the primitive (else written by it).
  Staged(const dnnl::memory::desc& user, const dnnl::memory::desc& primitive, bool to_primitive) : user_(user) {
    if (user == primitive) return;
    const dnnl::engine& engine = cpu_engine();
    copy_ = dnnl::memory(primitive, engine);
    reorder_ = to_primitive ? dnnl::reorder(dnnl::reorder::primitive_desc(engine, user, engine, primitive))
                            : dnnl::reorder(dnnl::reorder::primitive_desc(engine, primitive, engine, user));
  }

  // The memory the primitive reads: the caller's, or its copy in the primitive's layout.
  dnnl::memory read(const dnnl::stream& stream, const float* data) {
    dnnl::memory user(user_, cpu_engine(), const_cast<float*>(data));
    if (!reorder_) return user;
    reorder_->execute(stream, user, copy_);
    return copy_;
  }

  // The memory the primitive writes; written() then brings it to the caller's layout.
  dnnl::memory target(float* data) { return reorder_ ? copy_ : dnnl::memory(user_, cpu_engine(), data); }
  void written(const dnnl::stream& stream, float* data) {
    if (!reorder_) return;
    dnnl::memory user(user_, cpu_engine(), data);
    reorder_->execute(stream, copy_, user);
  }

 private:
  dnnl::memory::desc user_;
  dnnl::memory copy_;
  std::optional<dnnl::reorder> reorder_;
};

// The primitives and buffers for one input shape.
struct Plan {
  Dims y_dims;
  bool cropped = false;  // oneDNN computes a part of y only, the rest is the bias
  dnnl::stream stream;
  dnnl::primitive forward, backward_weights;
  std::optional<Staged> x_forward, w_forward, y_forward, x_backward, dy_backward, dw_backward;
  dnnl::memory::desc bias;
};

class ConvOp : public LayerOp {
 public:
  ConvOp(const ir::Node& node, const Dims& weight_dims, size_t bias_size, int threads)
      : name_(node.name),
        transpose_(node.op_type == "ConvTranspose"),
        weight_dims_(weight_dims),
        bias_size_(bias_size),
        threads_(threads > 0 ? threads : omp_get_num_procs()) {
    if (weight_dims.size() < 3 || weight_dims.size() > 5)
      fail("the weight has " + std::to_string(weight_dims.size()) + " dims, expected 3 to 5 (1-D to 3-D)");
    for (int64_t d : weight_dims)
      if (d < 1) fail("the weight has an empty dim");
    const size_t rank = weight_dims.size() - 2;
    kernel_.assign(weight_dims.begin() + 2, weight_dims.end());
    group_ = node.attr_int("group", 1);
    if (group_ < 1) fail("group " + std::to_string(group_) + " must be positive");
    if (node.attr_ints("kernel_shape", kernel_) != kernel_) fail("kernel_shape does not match the weight's dims");
    strides_ = per_axis(node.attr_ints("strides", {}), rank, 1, "strides", 1);
    dilations_ = per_axis(node.attr_ints("dilations", {}), rank, 1, "dilations", 1);
    Dims pads = node.attr_ints("pads", {});
    if (pads.empty()) pads.assign(2 * rank, 0);
    if (pads.size() != 2 * rank)
      fail("pads has " + std::to_string(pads.size()) + " values, expected " + std::to_string(2 * rank));
    for (int64_t p : pads)
      if (p < 0) fail("pads must not be negative");
    pads_begin_.assign(pads.begin(), pads.begin() + rank);
    pads_end_.assign(pads.begin() + rank, pads.end());
    auto_pad_ = node.attr_string("auto_pad", "NOTSET");
    if (auto_pad_.empty()) auto_pad_ = "NOTSET";
    if (auto_pad_ != "NOTSET" && auto_pad_ != "VALID" && auto_pad_ != "SAME_UPPER" && auto_pad_ != "SAME_LOWER")
      fail("auto_pad '" + auto_pad_ + "' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER");
    if (transpose_) {
      // W [C_in, C_out / group, k...]
      output_padding_ = per_axis(node.attr_ints("output_padding", {}), rank, 0, "output_padding", 0);
      output_shape_ = node.attr_ints("output_shape", {});
      if (output_shape_.size() == rank + 2) output_shape_.erase(output_shape_.begin(), output_shape_.begin() + 2);
      if (!output_shape_.empty() && output_shape_.size() != rank)
        fail("output_shape has " + std::to_string(output_shape_.size()) + " values, expected " + std::to_string(rank));
      for (int64_t d : output_shape_)
        if (d < 1) fail("output_shape must be positive");
      in_channels_ = weight_dims[0];
      out_channels_ = weight_dims[1] * group_;
      if (in_channels_ % group_ != 0)
        fail("the weight's " + std::to_string(in_channels_) + " input channels are not a multiple of group " +
             std::to_string(group_));
    } else {
      // W [C_out, C_in / group, k...]
      if (node.find_attribute("output_padding") || node.find_attribute("output_shape"))
        fail("output_padding and output_shape are attributes of ConvTranspose, not Conv");
      out_channels_ = weight_dims[0];
      in_channels_ = weight_dims[1] * group_;
      if (out_channels_ % group_ != 0)
        fail("the weight's " + std::to_string(out_channels_) + " output channels are not a multiple of group " +
             std::to_string(group_));
    }
    if (bias_size != 0 && static_cast<int64_t>(bias_size) != out_channels_)
      fail("the bias holds " + std::to_string(bias_size) + " values, the node has " + std::to_string(out_channels_) +
           " output channels");
  }

  Dims output_dims(const Dims& x_dims) const override { return geometry(x_dims).y_dims; }

  void forward(const float* x, const Dims& x_dims, const float* w, const float* b, float* y) const override {
    if (bias_size_ > 0 && !b) fail("the bias is missing");
    std::lock_guard<std::mutex> lock(mutex_);
    omp_set_num_threads(threads_);  // oneDNN's OpenMP runtime splits its work over omp_get_max_threads()
    Plan& plan = plan_for(x_dims);
    if (plan.cropped) fill_bias(b, plan.y_dims, y);
    try {
      std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, plan.x_forward->read(plan.stream, x)},
                                                    {DNNL_ARG_WEIGHTS, plan.w_forward->read(plan.stream, w)},
                                                    {DNNL_ARG_DST, plan.y_forward->target(y)}};
      if (bias_size_ > 0) args[DNNL_ARG_BIAS] = dnnl::memory(plan.bias, cpu_engine(), const_cast<float*>(b));
      plan.forward.execute(plan.stream, args);
      plan.y_forward->written(plan.stream, y);
      plan.stream.wait();
    } catch (const dnnl::error& e) {
      fail(std::string("oneDNN failed: ") + e.what());
    }
  }

  void backward(const float* x, const Dims& x_dims, const float* w, const float* dy, float* dw,
                float* db) const override {
    std::lock_guard<std::mutex> lock(mutex_);
    omp_set_num_threads(threads_);
    Plan& plan = plan_for(x_dims);
    if (db && bias_size_ > 0) bias_gradient(dy, plan.y_dims, db);
    if (!dw) return;
    try {
      plan.backward_weights.execute(plan.stream, {{DNNL_ARG_SRC, plan.x_backward->read(plan.stream, x)},
                                                  {DNNL_ARG_DIFF_DST, plan.dy_backward->read(plan.stream, dy)},
                                                  {DNNL_ARG_DIFF_WEIGHTS, plan.dw_backward->target(dw)}});
      plan.dw_backward->written(plan.stream, dw);
      plan.stream.wait();
    } catch (const dnnl::error& e) {
      fail(std::string("oneDNN failed: ") + e.what());
    }
  }

  size_t weight_size() const override { return static_cast<size_t>(ir::element_count(weight_dims_)); }
  size_t bias_size() const override { return bias_size_; }

 private:
  // The shapes of one input in oneDNN's terms. oneDNN's pads cannot be negative, which a
  // ConvTranspose's are when its output reaches past its result (output_padding, or an output_shape
  // larger than the result): oneDNN then computes the `result` part of y, at `result_offset`.
  struct Geometry {
    Dims y_dims, result_dims, result_offset, pads_begin, pads_end;
  };

  [[noreturn]] void fail(const std::string& why) const {
    throw Error("finetune: node '" + name_ + "' (" + (transpose_ ? "ConvTranspose" : "Conv") + "): " + why);
  }

  // An attribute with one value per spatial axis (`fallback` each when absent), each at least `low`.
  Dims per_axis(const Dims& values, size_t rank, int64_t fallback, const char* name, int64_t low) const {
    if (values.empty()) return Dims(rank, fallback);
    if (values.size() != rank)
      fail(std::string(name) + " has " + std::to_string(values.size()) + " values, expected " + std::to_string(rank) +
           " (one per spatial axis)");
    for (int64_t v : values)
      if (v < low) fail(std::string(name) + " must be " + (low > 0 ? "positive" : "non-negative"));
    return values;
  }

  Geometry geometry(const Dims& x_dims) const {
    const size_t rank = kernel_.size();
    if (x_dims.size() != rank + 2)
      fail("the input has " + std::to_string(x_dims.size()) + " dims, the weight needs " + std::to_string(rank + 2));
    for (int64_t d : x_dims)
      if (d < 1) fail("the input has an empty dim");
    if (x_dims[1] != in_channels_)
      fail("the input has " + std::to_string(x_dims[1]) + " channels, the weight takes " +
           std::to_string(in_channels_));
    const bool same = auto_pad_ == "SAME_UPPER" || auto_pad_ == "SAME_LOWER";
    Geometry g;
    g.y_dims = {x_dims[0], out_channels_};
    g.result_dims = g.y_dims;
    for (size_t d = 0; d < rank; ++d) {
      const int64_t in = x_dims[d + 2], stride = strides_[d], extent = (kernel_[d] - 1) * dilations_[d] + 1;
      int64_t begin = auto_pad_ == "VALID" ? 0 : pads_begin_[d], end = auto_pad_ == "VALID" ? 0 : pads_end_[d];
      int64_t out = 0;
      if (!transpose_) {
        if (same) {
          // The ONNX specification: output ceil(in / stride), the odd pad at the end for
          // SAME_UPPER, at the beginning for SAME_LOWER.
          out = (in + stride - 1) / stride;
          const int64_t total = std::max<int64_t>(0, (out - 1) * stride + extent - in);
          begin = auto_pad_ == "SAME_UPPER" ? total / 2 : total - total / 2;
          end = total - begin;
        } else {
          if (in + begin + end < extent)
            fail("the kernel is larger than the padded input on spatial axis " + std::to_string(d));
          out = (in + begin + end - extent) / stride + 1;
        }
      } else {
        // The result before pads: stride * (in - 1) + extent, and output_padding past it.
        const int64_t full = stride * (in - 1) + output_padding_[d] + extent;
        const int64_t wanted = !output_shape_.empty() ? output_shape_[d] : same ? in * stride : -1;
        if (wanted > 0) {
          // The specification's split of the total padding, in floor division as its reference
          // implementation (Python's //): a negative total puts y past the result.
          const int64_t total = full - wanted, half = floor_div(total, 2);
          begin = auto_pad_ == "SAME_UPPER" ? half : total - half;
          end = total - begin;
          out = wanted;
        } else {
          out = full - begin - end;
          if (out < 1) fail("pads remove the whole output on spatial axis " + std::to_string(d));
        }
        end -= output_padding_[d];  // padding_r of the result without output_padding
      }
      g.y_dims.push_back(out);
      g.result_offset.push_back(std::max<int64_t>(0, -begin));
      begin = std::max<int64_t>(0, begin);
      end = std::max<int64_t>(0, end);
      const int64_t result = transpose_ ? stride * (in - 1) + extent - begin - end : out;
      if (result < 1) fail("the output lies outside the ConvTranspose's result on spatial axis " + std::to_string(d));
      g.result_dims.push_back(result);
      g.pads_begin.push_back(begin);
      g.pads_end.push_back(end);
    }
    return g;
  }

  // The weight's layout for oneDNN: dims [OC, IC, k...], or [G, OC/G, IC/G, k...] with groups,
  // where oneDNN's deconvolution takes OC as the output channels. ONNX's Conv weight [C_out,
  // C_in/group, k...] is that row-major; ConvTranspose's [C_in, C_out/group, k...] swaps the
  // two channel axes of each group: a strided view, no copy.
  dnnl::memory::desc user_weights() const {
    const int64_t k = ir::element_count(kernel_), oc = out_channels_ / group_, ic = in_channels_ / group_;
    Dims dims, strides;
    if (group_ > 1) {
      dims.push_back(group_);
      strides.push_back(oc * ic * k);
    }
    dims.insert(dims.end(), {oc, ic});
    if (transpose_)
      strides.insert(strides.end(), {k, oc * k});
    else
      strides.insert(strides.end(), {ic * k, k});
    int64_t stride = k;
    for (int64_t extent : kernel_) {
      dims.push_back(extent);
      stride /= extent;
      strides.push_back(stride);
    }
    return f32_desc(dims, strides);
  }

  // The plan for `x_dims`, made on first use and kept (a trainer feeds few shapes: its batch, a
  // smaller last one). The mutex serializes calls, which share the plans' buffers: the trainer
  // runs one layer at a time, from one thread, and oneDNN parallelizes within each call.
  Plan& plan_for(const Dims& x_dims) const {
    auto found = plans_.find(x_dims);
    if (found != plans_.end()) return found->second;
    const Geometry g = geometry(x_dims);
    Plan plan;
    plan.y_dims = g.y_dims;
    plan.cropped = g.result_dims != g.y_dims;
    Dims dilations;
    for (int64_t d : dilations_) dilations.push_back(d - 1);  // oneDNN counts the gaps
    const dnnl::memory::desc x = f32_dense(x_dims), w = user_weights();
    dnnl::memory::desc y = f32_dense(g.y_dims);
    if (plan.cropped) {
      Dims offsets = {0, 0};
      offsets.insert(offsets.end(), g.result_offset.begin(), g.result_offset.end());
      y = y.submemory_desc(dnnl_dims(g.result_dims), dnnl_dims(offsets));
    }
    const dnnl::memory::dims strides = dnnl_dims(strides_), dilates = dnnl_dims(dilations);
    const dnnl::memory::dims pad_l = dnnl_dims(g.pads_begin), pad_r = dnnl_dims(g.pads_end);
    if (bias_size_ > 0) plan.bias = f32_dense({out_channels_});
    try {
      plan.stream = dnnl::stream(cpu_engine());
      if (!transpose_)
        make_primitives<dnnl::convolution_forward, dnnl::convolution_backward_weights>(
            plan, dnnl::algorithm::convolution_direct, x, w, y, strides, dilates, pad_l, pad_r);
      else
        make_primitives<dnnl::deconvolution_forward, dnnl::deconvolution_backward_weights>(
            plan, dnnl::algorithm::deconvolution_direct, x, w, y, strides, dilates, pad_l, pad_r);
    } catch (const dnnl::error& e) {
      fail("oneDNN declines the input of dims " + ir::dims_to_string(x_dims) + ": " + e.what());
    }
    return plans_.emplace(x_dims, std::move(plan)).first->second;
  }

  // The forward and backward-weights primitives, in the layouts oneDNN chooses ("any"), and the
  // staging of each operand from or to the caller's layout: `x`, `w`, `y` (a view of y when
  // cropped).
  template <class Forward, class BackwardWeights>
  void make_primitives(Plan& plan, dnnl::algorithm algorithm, const dnnl::memory::desc& x, const dnnl::memory::desc& w,
                       const dnnl::memory::desc& y, const dnnl::memory::dims& strides,
                       const dnnl::memory::dims& dilates, const dnnl::memory::dims& pad_l,
                       const dnnl::memory::dims& pad_r) const {
    const dnnl::engine& engine = cpu_engine();
    const dnnl::memory::desc x_any = f32_any(x.dims()), w_any = f32_any(w.dims()), y_any = f32_any(y.dims());
    const auto training = dnnl::prop_kind::forward_training;
    typename Forward::desc forward_desc =
        bias_size_ > 0
            ? typename Forward::desc(training, algorithm, x_any, w_any, plan.bias, y_any, strides, dilates, pad_l,
                                     pad_r)
            : typename Forward::desc(training, algorithm, x_any, w_any, y_any, strides, dilates, pad_l, pad_r);
    typename Forward::primitive_desc forward(forward_desc, engine);
    typename BackwardWeights::primitive_desc backward(
        typename BackwardWeights::desc(algorithm, x_any, w_any, y_any, strides, dilates, pad_l, pad_r), engine,
        forward);
    plan.forward = Forward(forward);
    plan.backward_weights = BackwardWeights(backward);
    plan.x_forward.emplace(x, forward.src_desc(), true);
    plan.w_forward.emplace(w, forward.weights_desc(), true);
    plan.y_forward.emplace(y, forward.dst_desc(), false);
    plan.x_backward.emplace(x, backward.src_desc(), true);
    plan.dy_backward.emplace(y, backward.diff_dst_desc(), true);
    plan.dw_backward.emplace(w, backward.diff_weights_desc(), false);
  }

  // y = the bias (or 0) everywhere: the part oneDNN writes is overwritten after.
  void fill_bias(const float* b, const Dims& y_dims, float* y) const {
    const int64_t spatial = ir::element_count(y_dims) / (y_dims[0] * y_dims[1]);
    for (int64_t n = 0; n < y_dims[0]; ++n)
      for (int64_t c = 0; c < out_channels_; ++c) {
        float* row = y + (n * out_channels_ + c) * spatial;
        std::fill(row, row + spatial, bias_size_ > 0 ? b[c] : 0.0f);
      }
  }

  // db[c] = the sum of dy over the batch and the positions of channel c, in one fixed order.
  void bias_gradient(const float* dy, const Dims& y_dims, float* db) const {
    const int64_t batch = y_dims[0], channels = out_channels_, spatial = ir::element_count(y_dims) / (batch * channels);
#pragma omp parallel for num_threads(threads_) schedule(static)
    for (int64_t c = 0; c < channels; ++c) {
      double sum = 0;
      for (int64_t n = 0; n < batch; ++n) {
        const float* row = dy + (n * channels + c) * spatial;
        for (int64_t i = 0; i < spatial; ++i) sum += row[i];
      }
      db[c] = static_cast<float>(sum);
    }
  }

  std::string name_;
  bool transpose_;
  Dims weight_dims_, kernel_, strides_, dilations_, pads_begin_, pads_end_, output_padding_, output_shape_;
  std::string auto_pad_;
  int64_t group_ = 1, in_channels_ = 0, out_channels_ = 0;
  size_t bias_size_;
  int threads_;
  mutable std::mutex mutex_;
  mutable std::map<Dims, Plan> plans_;
};

}  // namespace

std::unique_ptr<LayerOp> make_conv_op(const ir::Node& node, const std::vector<int64_t>& weight_dims, size_t bias_size,
                                      int threads) {
  return std::make_unique<ConvOp>(node, weight_dims, bias_size, threads);
}

}  // namespace onnxptq::finetune::detail
