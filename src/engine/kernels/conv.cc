// Conv: float through oneDNN (weights packed once when constant, one primitive per input
// shape), double through the reference loop, float16 and bfloat16 computed as float.
#include <array>
#include <optional>

#include "engine/fusion.h"
#include "engine/kernels/linear.h"
#include "engine/parallel.h"

namespace onnxptq::engine::linear {

// ---- the oneDNN plan shared with ConvTranspose

void forward_plan_finish(ForwardPlan& plan, const float* constant_weights, const ForwardPlan* previous, bool summand) {
  const dnnl::engine& eng = dnnl_cpu_engine();
  dnnl::memory::desc src = plan.pd.src_desc(0), weights = plan.pd.weights_desc(0), dst = plan.pd.dst_desc(0);
  plan.reorder_src = src != plan.user_src;
  plan.reorder_dst = dst != plan.user_dst;
  plan.reorder_weights = weights != plan.user_weights;
  if (plan.reorder_src) {
    plan.src_reorder_pd = dnnl_reorder_pd(plan.user_src, src);
    plan.src_reorder = dnnl::reorder(plan.src_reorder_pd);
  }
  if (plan.reorder_dst) {
    plan.dst_reorder_pd = dnnl_reorder_pd(dst, plan.user_dst);
    plan.dst_reorder = dnnl::reorder(plan.dst_reorder_pd);
    if (summand) {  // the Sum post-op reads the summand from the primitive's own output
      plan.summand_reorder_pd = dnnl_reorder_pd(plan.user_dst, dst);
      plan.summand_reorder = dnnl::reorder(plan.summand_reorder_pd);
    }
  }
  if (plan.reorder_weights) {
    plan.weights_reorder_pd = dnnl_reorder_pd(plan.user_weights, weights);
    plan.weights_reorder = dnnl::reorder(plan.weights_reorder_pd);
  }
  if (!constant_weights) return;
  if (previous && previous->packed_weights && previous->packed_weights->get_desc() == weights) {
    plan.packed_weights = previous->packed_weights;
    return;
  }
  auto packed = std::make_shared<dnnl::memory>(weights, eng);  // owned by oneDNN, aligned
  dnnl::memory user(plan.user_weights, eng, const_cast<float*>(constant_weights));
  dnnl::stream stream(eng);
  if (plan.reorder_weights) {
    dnnl_reorder(stream, plan.weights_reorder, plan.weights_reorder_pd, user, *packed);
  } else {
    dnnl::reorder::primitive_desc copy_pd = dnnl_reorder_pd(plan.user_weights, weights);
    dnnl_reorder(stream, dnnl::reorder(copy_pd), copy_pd, user, *packed);
  }
  stream.wait();
  plan.packed_weights = std::move(packed);
}

void forward_plan_run(const ForwardPlan& plan, const float* x, const float* w, const float* b, float* y,
                      const float* summand) {
  const dnnl::engine& eng = dnnl_cpu_engine();
  dnnl::stream stream(eng);
  dnnl::memory user_src(plan.user_src, eng, const_cast<float*>(x));
  dnnl::memory user_dst(plan.user_dst, eng, y);
  dnnl::memory src = user_src, dst = user_dst, weights;
  if (plan.reorder_src) {
    dnnl::memory::desc md = plan.pd.src_desc(0);
    src = dnnl::memory(md, eng, thread_buffer(Scratch::Src, md.get_size()));
    dnnl_reorder(stream, plan.src_reorder, plan.src_reorder_pd, user_src, src);
  }
  if (plan.reorder_dst) {
    dnnl::memory::desc md = plan.pd.dst_desc(0);
    dst = dnnl::memory(md, eng, thread_buffer(Scratch::Dst, md.get_size()));
    if (summand) {
      dnnl::memory user_summand(plan.user_dst, eng, const_cast<float*>(summand));
      dnnl_reorder(stream, plan.summand_reorder, plan.summand_reorder_pd, user_summand, dst);
    }
  } else if (summand) {
    std::copy(summand, summand + plan.user_dst.get_size() / sizeof(float), y);
  }
  if (plan.packed_weights) {
    weights = *plan.packed_weights;
  } else {
    dnnl::memory user_weights(plan.user_weights, eng, const_cast<float*>(w));
    weights = user_weights;
    if (plan.reorder_weights) {
      dnnl::memory::desc md = plan.pd.weights_desc(0);
      weights = dnnl::memory(md, eng, thread_buffer(Scratch::Weights, md.get_size()));
      dnnl_reorder(stream, plan.weights_reorder, plan.weights_reorder_pd, user_weights, weights);
    }
  }
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}};
  if (b) args[DNNL_ARG_BIAS] = dnnl::memory(plan.pd.weights_desc(1), eng, const_cast<float*>(b));
  dnnl_execute(stream, plan.prim, plan.pd, std::move(args));
  if (plan.reorder_dst) dnnl_reorder(stream, plan.dst_reorder, plan.dst_reorder_pd, dst, user_dst);
  stream.wait();
}

// Measured on the convolutions of ResNet-50 and MobileNetV2 (oneDNN 2.6, AVX-512): a 1x1
// stride-1 convolution on dense NCHW is one GEMM and beats blocked layouts plus the two reorders
// by 10-60% from 10x10 outputs up; on 7x7 outputs, strided or larger kernels the blocked
// primitives win even with the reorders (depthwise by 3-6x).
bool conv_prefers_dense(const ConvShape& s) {
  for (size_t i = 0; i < s.in.size(); ++i)
    if (s.kernel[i] != 1 || s.strides[i] != 1 || s.pads_begin[i] != 0 || s.pads_end[i] != 0) return false;
  return s.group == 1 && ir::element_count(s.out) >= 100;
}

namespace {

dnnl::memory::dims to_dnnl(const std::vector<int64_t>& v) { return dnnl::memory::dims(v.begin(), v.end()); }

// Perms as Transpose takes them: out.dims[i] = in.dims[perm[i]].
constexpr std::array<int64_t, 4> kNhwcToNchw = {0, 3, 1, 2};
constexpr std::array<int64_t, 4> kNchwToNhwc = {0, 2, 3, 1};

std::vector<int64_t> permute(const std::vector<int64_t>& dims, const std::array<int64_t, 4>& perm) {
  return {dims[perm[0]], dims[perm[1]], dims[perm[2]], dims[perm[3]]};
}

// A float rank-4 tensor transposed (for the rare shapes oneDNN declines).
Tensor transpose_4d(const Tensor& x, const std::array<int64_t, 4>& perm) {
  const std::vector<int64_t>& d = x.dims();
  std::array<int64_t, 4> in_strides = {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1};
  Tensor y = Tensor::uninitialized(DataType::Float, permute(d, perm));
  const std::vector<int64_t>& o = y.dims();
  const float* src = x.values<float>().data();
  float* dst = y.mutable_values<float>().data();
  for (int64_t a = 0; a < o[0]; ++a)
    for (int64_t b = 0; b < o[1]; ++b)
      for (int64_t c = 0; c < o[2]; ++c)
        for (int64_t e = 0; e < o[3]; ++e)
          *dst++ = src[a * in_strides[perm[0]] + b * in_strides[perm[1]] + c * in_strides[perm[2]] + e * in_strides[perm[3]]];
  return y;
}

// Whether oneDNN can take the shape at all: 1 to 3 spatial axes, no empty axis.
bool dnnl_can_run(const ConvShape& s) {
  if (s.in.empty() || s.in.size() > 3) return false;
  if (s.batch <= 0 || s.in_channels <= 0 || s.out_channels <= 0) return false;
  for (size_t i = 0; i < s.in.size(); ++i)
    if (s.in[i] <= 0 || s.out[i] <= 0 || s.kernel[i] <= 0) return false;
  return true;
}

// Conv weights [M, C/group, k...] seen as oneDNN's [M, C/g, k...] or [g, M/g, C/g, k...].
std::vector<int64_t> conv_weight_dims(const ConvShape& s) {
  std::vector<int64_t> d;
  if (s.group > 1) d.push_back(s.group);
  d.push_back(s.out_channels / s.group);
  d.push_back(s.in_channels / s.group);
  d.insert(d.end(), s.kernel.begin(), s.kernel.end());
  return d;
}

// A dense f32 descriptor of an N C H W shape stored channels-last (oneDNN's acdb).
dnnl::memory::desc f32_nhwc_desc(const std::vector<int64_t>& nchw) {
  return dnnl::memory::desc(to_dnnl(nchw), dnnl::memory::data_type::f32, dnnl::memory::format_tag::nhwc);
}

bool has_sigmoid(const std::vector<PostOp>& post_ops) {
  return std::any_of(post_ops.begin(), post_ops.end(),
                     [](const PostOp& p) { return p.kind == PostOp::Kind::Sigmoid || p.kind == PostOp::Kind::Swish; });
}

// `nhwc`: X and Y are channels-last tensors, and the primitive reads and writes them as they are.
std::shared_ptr<const ForwardPlan> make_conv_plan(const ConvShape& s, const std::vector<PostOp>& post_ops, bool has_bias,
                                                  const float* constant_weights, const ForwardPlan* previous,
                                                  bool nhwc) {
  auto plan = std::make_shared<ForwardPlan>();
  std::vector<int64_t> x_dims{s.batch, s.in_channels};
  x_dims.insert(x_dims.end(), s.in.begin(), s.in.end());
  plan->user_src = nhwc ? f32_nhwc_desc(x_dims) : f32_desc(x_dims);
  plan->user_dst = nhwc ? f32_nhwc_desc(s.out_dims()) : f32_desc(s.out_dims());
  std::vector<int64_t> w_dims = conv_weight_dims(s);
  plan->user_weights = f32_desc(w_dims);
  // Channels-last tensors are given to the primitive as they are: asked to choose ("any") for
  // every convolution of MobileNetV2, ResNet-50 and PP-OCRv4's detector, oneDNN 2.6 picks that
  // layout itself (brgconv, brgconv_1x1, brdgmm_dw on AVX-512), so there is no reorder to trade.
  bool dense = nhwc || conv_prefers_dense(s);
  dnnl::memory::desc src = dense ? plan->user_src : f32_any(x_dims);
  dnnl::memory::desc dst = dense ? plan->user_dst : f32_any(s.out_dims());
  std::vector<int64_t> dilations;  // oneDNN counts the holes: ONNX dilation - 1
  for (int64_t d : s.dilations) dilations.push_back(d - 1);
  try {
    using cf = dnnl::convolution_forward;
    auto primitive_desc = [&](bool with_post_ops) {
      dnnl::primitive_attr attr = dnnl_attr();
      if (with_post_ops) attr.set_post_ops(make_dnnl_post_ops(post_ops));
      auto kind = dnnl::prop_kind::forward_inference;
      auto alg = dnnl::algorithm::convolution_direct;
      cf::desc d = has_bias ? cf::desc(kind, alg, src, f32_any(w_dims), f32_desc({s.out_channels}), dst, to_dnnl(s.strides),
                                       to_dnnl(dilations), to_dnnl(s.pads_begin), to_dnnl(s.pads_end))
                            : cf::desc(kind, alg, src, f32_any(w_dims), dst, to_dnnl(s.strides), to_dnnl(dilations),
                                       to_dnnl(s.pads_begin), to_dnnl(s.pads_end));
      return cf::primitive_desc(d, attr, dnnl_cpu_engine());
    };
    // oneDNN's GEMM convolution applies post-ops in a slow scalar pass (a fused Clip made 1x1
    // convolutions of MobileNetV2 10x slower): on the dense NCHW path, or wherever oneDNN picks
    // GEMM for channels-last tensors (CPUs without brgconv), our own loops apply them. So they do
    // a Sigmoid or SiLU everywhere: the engine's own (sigmoid_values) equals the unfused ops bit
    // for bit on every path, and with AVX-512 a pass of it over the output takes less time than
    // oneDNN 2.6's fused eltwise_swish (EfficientNet-B0, 2 threads: 3.9-4.0 against 4.1-4.3 ms).
    plan->post_ops_after = !post_ops.empty() && ((dense && !nhwc) || has_sigmoid(post_ops));
    cf::primitive_desc pd = primitive_desc(!post_ops.empty() && !plan->post_ops_after);
    if (nhwc && !post_ops.empty() && !has_sum(post_ops) && std::string(pd.impl_info_str()).find("gemm") != std::string::npos) {
      plan->post_ops_after = true;
      pd = primitive_desc(false);
    }
    plan->pd = pd;
    plan->prim = cf(pd);
    forward_plan_finish(*plan, constant_weights, previous, has_sum(post_ops) && !plan->post_ops_after);
  } catch (const dnnl::error&) {
    plan->reference = true;  // a shape oneDNN does not implement
  }
  return plan;
}

class ConvKernel : public Kernel {
 public:
  // `nhwc`: X and Y are [N, H, W, C] tensors (the NhwcConv of engine/layout.h).
  ConvKernel(const KernelInfo& info, std::vector<PostOp> post_ops, bool nhwc)
      : attrs_(info.node, false), post_ops_(std::move(post_ops)), nhwc_(nhwc) {
    if (const Tensor* w = info.constant(1); w && is_float_like(w->dtype())) weights_ = as_float32(*w);
    if (const Tensor* b = info.constant(2); b && is_float_like(b->dtype())) bias_ = as_float32(*b);
    // With the shapes known now, the primitive is built and the weights packed at load time.
    if (weights_ && !info.input_types.empty()) {
      if (auto x = info.input_types[0].static_shape(); x && is_float_like(info.input_types[0].elem_type)) {
        try {
          ConvShape s = conv_resolve(attrs_, nchw_dims_of_x(*x), weights_->dims());
          if (dnnl_can_run(s)) plan_for(s, info.prepared_threads(), info.has_input(2));
        } catch (const std::exception&) {
          // reported by run with the actual input
        }
      }
    }
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = *in[0];
    const Tensor& w = *in[1];
    const Tensor* b = in.size() > 2 ? in[2] : nullptr;
    conv_check_types(x, w, b);
    ConvShape s = conv_resolve(attrs_, nchw_dims_of_x(x.dims()), w.dims());
    conv_check_bias(b, s.out_channels);
    std::vector<int64_t> y_dims = nhwc_ ? permute(s.out_dims(), kNchwToNhwc) : s.out_dims();
    if (x.dtype() == DataType::Double) {
      if (nhwc_) throw Error("NhwcConv takes float, float16 or bfloat16, got double");
      if (!post_ops_.empty()) throw Error("fused post-ops need float input, got double");
      Tensor y = Tensor::uninitialized(DataType::Double, s.out_dims());
      conv_reference<double>(s, x.values<double>().data(), w.values<double>().data(), b ? b->values<double>().data() : nullptr,
                             y.mutable_values<double>().data());
      out[0] = std::move(y);
      return;
    }
    if (!is_float_like(x.dtype()))
      throw Error("Conv takes float, float16, bfloat16 or double, got " + std::string(ir::data_type_name(x.dtype())));
    Tensor x32 = as_float32(x);
    Tensor w32 = weights_ ? *weights_ : as_float32(w);
    Tensor b32 = b ? (bias_ ? *bias_ : as_float32(*b)) : Tensor();
    const float* bp = b ? b32.values<float>().data() : nullptr;
    Tensor summand;  // the Sum post-op's input, as float
    if (has_sum(post_ops_)) {
      const Tensor* sum = in.size() > 3 ? in[3] : nullptr;
      if (!sum || sum->dims() != y_dims || sum->dtype() != x.dtype())
        throw Error("the Sum post-op needs input 3 of shape " + ir::dims_to_string(y_dims) + " and type " +
                    std::string(ir::data_type_name(x.dtype())) +
                    (sum ? ", got " + ir::dims_to_string(sum->dims()) + " " + std::string(ir::data_type_name(sum->dtype()))
                         : ", got none"));
      summand = as_float32(*sum);
    }
    const float* sp = has_sum(post_ops_) ? summand.values<float>().data() : nullptr;
    Tensor y = Tensor::uninitialized(DataType::Float, y_dims);
    float* yp = y.mutable_values<float>().data();
    dnnl_use_threads(ctx.threads);
    std::shared_ptr<const ForwardPlan> plan = dnnl_can_run(s) ? plan_for(s, ctx.threads, b != nullptr, &w32) : nullptr;
    bool post_ops_after = true;
    if (plan && !plan->reference) {
      forward_plan_run(*plan, x32.values<float>().data(), w32.values<float>().data(), bp, yp,
                       plan->post_ops_after ? nullptr : sp);
      post_ops_after = plan->post_ops_after;
    } else if (nhwc_) {  // the loop works on N C H W: through copies in that layout
      Tensor x_nchw = transpose_4d(x32, kNhwcToNchw);
      Tensor y_nchw = Tensor::uninitialized(DataType::Float, s.out_dims());
      conv_reference<float>(s, x_nchw.values<float>().data(), w32.values<float>().data(), bp,
                            y_nchw.mutable_values<float>().data());
      y = transpose_4d(y_nchw, kNchwToNhwc);
      yp = y.mutable_values<float>().data();
    } else {
      conv_reference<float>(s, x32.values<float>().data(), w32.values<float>().data(), bp, yp);
    }
    if (post_ops_after && !post_ops_.empty())
      parallel_for(ctx.threads, y.size(), 16384, [&](int64_t begin, int64_t end) {
        apply_post_ops(post_ops_, yp + begin, end - begin, sp ? sp + begin : nullptr);
      });
    out[0] = float32_as(y, x.dtype());
  }

 private:
  // The plan for this shape; `runtime_weights` is the W of this run when W is not constant.
  std::shared_ptr<const ForwardPlan> plan_for(const ConvShape& s, int threads, bool has_bias,
                                              const Tensor* runtime_weights = nullptr) const {
    bool constant = weights_.has_value();
    std::vector<int64_t> key = s.out_dims();
    key.insert(key.end(), s.in.begin(), s.in.end());
    key.push_back(s.in_channels);
    key.push_back(threads);  // oneDNN splits work for the thread count it was built with
    key.push_back(has_bias);
    if (!constant) key.insert(key.end(), runtime_weights->dims().begin(), runtime_weights->dims().end());
    return cache_.get(key, [&](const ForwardPlan* previous) {
      dnnl_use_threads(threads);
      return make_conv_plan(s, post_ops_, has_bias, constant ? weights_->values<float>().data() : nullptr, previous,
                            nhwc_);
    });
  }

  // X's dims in the N C spatial... order that the convolution geometry takes.
  std::vector<int64_t> nchw_dims_of_x(const std::vector<int64_t>& x) const {
    if (!nhwc_) return x;
    if (x.size() != 4) throw Error("NhwcConv takes an [N, H, W, C] input, got shape " + ir::dims_to_string(x));
    return permute(x, kNhwcToNchw);
  }

  ConvAttributes attrs_;
  std::vector<PostOp> post_ops_;
  std::optional<Tensor> weights_;  // constant W as float
  std::optional<Tensor> bias_;     // constant B as float
  bool nhwc_ = false;
  PlanCache<ForwardPlan> cache_;
};

}  // namespace

std::unique_ptr<Kernel> make_conv_kernel(const KernelInfo& info, std::vector<PostOp> post_ops) {
  return std::make_unique<ConvKernel>(info, std::move(post_ops), false);
}

namespace {

// The post-op of a FusedConv node made by fuse_conv_activations (engine/fusion.h).
PostOp fused_activation(const ir::Node& node) {
  std::string op = node.attr_string("activation", "");
  std::vector<float> params = node.attr_floats("activation_params", {0.f, 0.f});
  if (params.size() != 2) throw Error("FusedConv: activation_params must hold 2 floats");
  static const std::unordered_map<std::string, PostOp::Kind> kinds = {
      {"Relu", PostOp::Kind::Relu},         {"LeakyRelu", PostOp::Kind::LeakyRelu},
      {"Clip", PostOp::Kind::Clip},         {"HardSigmoid", PostOp::Kind::HardSigmoid},
      {"HardSwish", PostOp::Kind::HardSwish}, {"Sigmoid", PostOp::Kind::Sigmoid},
      {"Tanh", PostOp::Kind::Tanh},         {"Swish", PostOp::Kind::Swish}};
  auto kind = kinds.find(op);
  if (kind == kinds.end()) throw Error("FusedConv: unknown activation '" + op + "'");
  return PostOp{kind->second, params[0], params[1]};
}

}  // namespace

void register_conv_kernels(KernelRegistry& r) {
  // Conv-1 and Conv-11 differ only in the wording of the spec; Conv-22 adds bfloat16.
  r.add("", "Conv", 1, kLatestOpset, [](const KernelInfo& info) { return make_conv_kernel(info, {}); });
  r.add(kEngineDomain, "FusedConv", 1, 1,
        [](const KernelInfo& info) { return make_conv_kernel(info, {fused_activation(info.node)}); });
  // Conv or FusedConv on channels-last tensors (engine/layout.h); the activation is optional.
  r.add(kEngineDomain, "NhwcConv", 1, 1, [](const KernelInfo& info) -> std::unique_ptr<Kernel> {
    std::vector<PostOp> post_ops;
    if (info.node.find_attribute("activation")) post_ops.push_back(fused_activation(info.node));
    return std::make_unique<ConvKernel>(info, std::move(post_ops), true);
  });
}

}  // namespace onnxptq::engine::linear
