// ConvTranspose: float through oneDNN's deconvolution (weights packed once when constant),
// double and shapes oneDNN declines (negative padding from output_shape) through the loop.
#include <optional>

#include "engine/kernels/linear.h"
#include "engine/parallel.h"

namespace onnxptq::engine::linear {
namespace {

bool dnnl_can_run(const ConvShape& s) {
  if (s.in.empty() || s.in.size() > 3) return false;
  if (s.batch <= 0 || s.in_channels <= 0 || s.out_channels <= 0) return false;
  for (size_t i = 0; i < s.in.size(); ++i)
    if (s.in[i] <= 0 || s.out[i] <= 0 || s.pads_begin[i] < 0 || s.pads_end[i] < 0) return false;
  return true;
}

// ConvTranspose weights [C, M/group, k...] seen as oneDNN's [M, C, k...] or
// [g, M/g, C/g, k...], through strides (no copy).
dnnl::memory::desc deconv_user_weights(const ConvShape& s) {
  int64_t k = ir::element_count(s.kernel), cg = s.in_channels / s.group, mg = s.out_channels / s.group;
  std::vector<int64_t> dims, strides;
  if (s.group > 1) {
    dims.push_back(s.group);
    strides.push_back(cg * mg * k);
  }
  dims.insert(dims.end(), {mg, cg});
  strides.insert(strides.end(), {k, mg * k});
  int64_t stride = k;
  for (int64_t extent : s.kernel) {
    dims.push_back(extent);
    stride /= extent;
    strides.push_back(stride);
  }
  return f32_desc(dims, strides);
}

std::shared_ptr<const ForwardPlan> make_deconv_plan(const ConvShape& s, bool has_bias, const float* constant_weights,
                                                    const ForwardPlan* previous) {
  auto plan = std::make_shared<ForwardPlan>();
  std::vector<int64_t> x_dims{s.batch, s.in_channels};
  x_dims.insert(x_dims.end(), s.in.begin(), s.in.end());
  plan->user_src = f32_desc(x_dims);
  plan->user_dst = f32_desc(s.out_dims());
  plan->user_weights = deconv_user_weights(s);
  dnnl::memory::dims w_dims = plan->user_weights.dims();
  std::vector<int64_t> dilations;
  for (int64_t d : s.dilations) dilations.push_back(d - 1);
  auto dims = [](const std::vector<int64_t>& v) { return dnnl::memory::dims(v.begin(), v.end()); };
  try {
    using df = dnnl::deconvolution_forward;
    auto kind = dnnl::prop_kind::forward_inference;
    auto alg = dnnl::algorithm::deconvolution_direct;
    dnnl::memory::desc src = f32_any(x_dims), dst = f32_any(s.out_dims());
    dnnl::memory::desc weights(w_dims, dnnl::memory::data_type::f32, dnnl::memory::format_tag::any);
    df::desc d = has_bias ? df::desc(kind, alg, src, weights, f32_desc({s.out_channels}), dst, dims(s.strides),
                                     dims(dilations), dims(s.pads_begin), dims(s.pads_end))
                          : df::desc(kind, alg, src, weights, dst, dims(s.strides), dims(dilations), dims(s.pads_begin),
                                     dims(s.pads_end));
    df::primitive_desc pd(d, dnnl_attr(), dnnl_cpu_engine());
    plan->pd = pd;
    plan->prim = df(pd);
    forward_plan_finish(*plan, constant_weights, previous);
  } catch (const dnnl::error&) {
    plan->reference = true;
  }
  return plan;
}

class ConvTransposeKernel : public Kernel {
 public:
  explicit ConvTransposeKernel(const KernelInfo& info) : attrs_(info.node, true) {
    if (const Tensor* w = info.constant(1); w && is_float_like(w->dtype())) weights_ = as_float32(*w);
    if (const Tensor* b = info.constant(2); b && is_float_like(b->dtype())) bias_ = as_float32(*b);
    // With the shapes known now, the primitive is built and the weights packed at load time.
    if (weights_ && !info.input_types.empty() && is_float_like(info.input_types[0].elem_type)) {
      if (auto x = info.input_types[0].static_shape()) {
        try {
          ConvShape s = conv_transpose_resolve(attrs_, *x, weights_->dims());
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
    ConvShape s = conv_transpose_resolve(attrs_, x.dims(), w.dims());
    conv_check_bias(b, s.out_channels);
    if (x.dtype() == DataType::Double) {
      Tensor y = Tensor::uninitialized(DataType::Double, s.out_dims());
      conv_transpose_reference<double>(s, x.values<double>().data(), w.values<double>().data(),
                                       b ? b->values<double>().data() : nullptr, y.mutable_values<double>().data());
      out[0] = std::move(y);
      return;
    }
    if (!is_float_like(x.dtype()))
      throw Error("ConvTranspose takes float, float16, bfloat16 or double, got " + std::string(ir::data_type_name(x.dtype())));
    Tensor x32 = as_float32(x);
    Tensor w32 = weights_ ? *weights_ : as_float32(w);
    Tensor b32 = b ? (bias_ ? *bias_ : as_float32(*b)) : Tensor();
    const float* bp = b ? b32.values<float>().data() : nullptr;
    Tensor y = Tensor::uninitialized(DataType::Float, s.out_dims());
    float* yp = y.mutable_values<float>().data();
    dnnl_use_threads(ctx.threads);
    std::shared_ptr<const ForwardPlan> plan = dnnl_can_run(s) ? plan_for(s, ctx.threads, b != nullptr) : nullptr;
    if (plan && !plan->reference)
      forward_plan_run(*plan, x32.values<float>().data(), w32.values<float>().data(), bp, yp);
    else
      conv_transpose_reference<float>(s, x32.values<float>().data(), w32.values<float>().data(), bp, yp);
    out[0] = float32_as(y, x.dtype());
  }

 private:
  std::shared_ptr<const ForwardPlan> plan_for(const ConvShape& s, int threads, bool has_bias) const {
    std::vector<int64_t> key = s.out_dims();
    key.insert(key.end(), s.in.begin(), s.in.end());
    key.insert(key.end(), s.kernel.begin(), s.kernel.end());
    key.insert(key.end(), {s.in_channels, threads, has_bias});
    return cache_.get(key, [&](const ForwardPlan* previous) {
      dnnl_use_threads(threads);
      return make_deconv_plan(s, has_bias, weights_ ? weights_->values<float>().data() : nullptr, previous);
    });
  }

  ConvAttributes attrs_;
  std::optional<Tensor> weights_;  // constant W as float
  std::optional<Tensor> bias_;     // constant B as float
  PlanCache<ForwardPlan> cache_;
};

}  // namespace

void register_conv_transpose_kernels(KernelRegistry& r) {
  // ConvTranspose-1 and -11 compute the same; 11 spells out the padding that output_shape and
  // SAME_* imply (followed here for every version), 22 adds bfloat16.
  r.add("", "ConvTranspose", 1, kLatestOpset, kernel_factory<ConvTransposeKernel>());
}

}  // namespace onnxptq::engine::linear
