// The linear family: Conv, ConvTranspose, Gemm, MatMul and Einsum. This file holds the oneDNN
// plumbing the parts share (engine, threads, scratch buffers, post-ops, a float batched matrix
// product) and the family's registration; conv_shape.cc holds the convolution geometry, and
// each op lives in its own file.
#include "engine/kernels/linear.h"

#include "engine/vector_math.h"

#include <omp.h>

#include <array>
#include <cmath>
#include <cstdlib>

namespace onnxptq::engine {
namespace linear {

const dnnl::engine& dnnl_cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

void dnnl_use_threads(int threads) {
  if (threads > 0 && omp_get_max_threads() != threads) omp_set_num_threads(threads);
}

namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

struct ThreadBuffer {
  std::unique_ptr<void, FreeDeleter> data;
  size_t size = 0;
};

}  // namespace

void* thread_buffer(Scratch slot, size_t bytes) {
  thread_local std::array<ThreadBuffer, 4> buffers;
  ThreadBuffer& b = buffers[static_cast<size_t>(slot)];
  if (bytes > b.size) {
    size_t size = (bytes + 63) / 64 * 64;
    b.data.reset();  // free first: the old contents are not needed
    void* p = std::aligned_alloc(64, size);
    if (!p) throw Error("out of memory for a " + std::to_string(size) + "-byte work buffer");
    b.data.reset(p);
    b.size = size;
  }
  return b.data.get();
}

dnnl::memory::desc f32_desc(const std::vector<int64_t>& dims) {
  std::vector<int64_t> strides(dims.size());
  int64_t s = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(dims[i], 1);
  }
  return f32_desc(dims, strides);
}

dnnl::memory::desc f32_desc(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  return dnnl::memory::desc(dnnl::memory::dims(dims.begin(), dims.end()), dnnl::memory::data_type::f32,
                            dnnl::memory::dims(strides.begin(), strides.end()));
}

dnnl::memory::desc f32_any(const std::vector<int64_t>& dims) {
  return dnnl::memory::desc(dnnl::memory::dims(dims.begin(), dims.end()), dnnl::memory::data_type::f32,
                            dnnl::memory::format_tag::any);
}

void dnnl_execute(const dnnl::stream& stream, const dnnl::primitive& prim, const dnnl::primitive_desc_base& pd,
                  std::unordered_map<int, dnnl::memory> args) {
  dnnl::memory::desc scratch_md = pd.scratchpad_desc();
  if (scratch_md.get_size() > 0)
    args[DNNL_ARG_SCRATCHPAD] =
        dnnl::memory(scratch_md, dnnl_cpu_engine(), thread_buffer(Scratch::Pad, scratch_md.get_size()));
  prim.execute(stream, args);
}

dnnl::primitive_attr dnnl_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

dnnl::reorder::primitive_desc dnnl_reorder_pd(const dnnl::memory::desc& from, const dnnl::memory::desc& to) {
  const dnnl::engine& eng = dnnl_cpu_engine();
  return dnnl::reorder::primitive_desc(eng, from, eng, to, dnnl_attr());
}

void dnnl_reorder(const dnnl::stream& stream, const dnnl::reorder& r, const dnnl::reorder::primitive_desc& pd,
                  const dnnl::memory& from, const dnnl::memory& to) {
  dnnl_execute(stream, r, pd, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
}

// ---- post-ops

dnnl::post_ops make_dnnl_post_ops(const std::vector<PostOp>& post_ops) {
  using dnnl::algorithm;
  dnnl::post_ops ops;
  for (const PostOp& p : post_ops) {
    switch (p.kind) {
      case PostOp::Kind::Relu: ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f); break;
      case PostOp::Kind::LeakyRelu: ops.append_eltwise(1.f, algorithm::eltwise_relu, p.alpha, 0.f); break;
      case PostOp::Kind::Clip: ops.append_eltwise(1.f, algorithm::eltwise_clip, p.alpha, p.beta); break;
      case PostOp::Kind::HardSigmoid:
        ops.append_eltwise(1.f, algorithm::eltwise_linear, p.alpha, p.beta);
        ops.append_eltwise(1.f, algorithm::eltwise_clip, 0.f, 1.f);
        break;
      case PostOp::Kind::HardSwish: ops.append_eltwise(1.f, algorithm::eltwise_hardswish, 0.f, 0.f); break;
      case PostOp::Kind::Sigmoid: ops.append_eltwise(1.f, algorithm::eltwise_logistic, 0.f, 0.f); break;
      case PostOp::Kind::Tanh: ops.append_eltwise(1.f, algorithm::eltwise_tanh, 0.f, 0.f); break;
      case PostOp::Kind::Swish: ops.append_eltwise(1.f, algorithm::eltwise_swish, 1.f, 0.f); break;
      case PostOp::Kind::Sum: ops.append_sum(p.alpha); break;
    }
  }
  return ops;
}

bool has_sum(const std::vector<PostOp>& post_ops) {
  return std::any_of(post_ops.begin(), post_ops.end(), [](const PostOp& p) { return p.kind == PostOp::Kind::Sum; });
}

void apply_post_ops(const std::vector<PostOp>& post_ops, float* d, int64_t n, const float* summand) {
  for (const PostOp& p : post_ops) {
    switch (p.kind) {
      case PostOp::Kind::Relu:
        for (int64_t i = 0; i < n; ++i) d[i] = d[i] > 0 ? d[i] : 0.f;
        break;
      case PostOp::Kind::LeakyRelu:
        for (int64_t i = 0; i < n; ++i) d[i] = d[i] < 0 ? p.alpha * d[i] : d[i];
        break;
      case PostOp::Kind::Clip:
        for (int64_t i = 0; i < n; ++i) d[i] = std::min(std::max(d[i], p.alpha), p.beta);
        break;
      case PostOp::Kind::HardSigmoid:
        for (int64_t i = 0; i < n; ++i) d[i] = std::max(0.f, std::min(1.f, p.alpha * d[i] + p.beta));
        break;
      case PostOp::Kind::HardSwish:
        for (int64_t i = 0; i < n; ++i) d[i] = d[i] * std::max(0.f, std::min(1.f, d[i] / 6.f + 0.5f));
        break;
      // The engine's own Sigmoid and Tanh (vector_math.h), vectorised: the values the ops unfused give.
      case PostOp::Kind::Sigmoid:
        sigmoid_values(d, d, n);
        break;
      case PostOp::Kind::Tanh:
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) d[i] = fast_tanh(d[i]);
        break;
      case PostOp::Kind::Swish:
        sigmoid_values<true>(d, d, n);
        break;
      case PostOp::Kind::Sum:
        for (int64_t i = 0; i < n; ++i) d[i] += p.alpha * summand[i];
        break;
    }
  }
}

// ---- float batched matmul

void matmul_f32(int threads, const float* a, const float* b, float* c, int64_t batch, int64_t m, int64_t k, int64_t n) {
  if (batch == 0 || m == 0 || n == 0) return;
  if (k == 0) {
    std::fill(c, c + batch * m * n, 0.f);
    return;
  }
  dnnl_use_threads(threads);
  try {
    const dnnl::engine& eng = dnnl_cpu_engine();
    std::vector<int64_t> ad{batch, m, k}, bd{batch, k, n}, cd{batch, m, n};
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(f32_desc(ad), f32_desc(bd), f32_desc(cd)), dnnl_attr(), eng);
    dnnl::matmul prim(pd);
    dnnl::stream stream(eng);
    dnnl_execute(stream, prim, pd,
                 {{DNNL_ARG_SRC, dnnl::memory(pd.src_desc(), eng, const_cast<float*>(a))},
                  {DNNL_ARG_WEIGHTS, dnnl::memory(pd.weights_desc(), eng, const_cast<float*>(b))},
                  {DNNL_ARG_DST, dnnl::memory(pd.dst_desc(), eng, c)}});
    stream.wait();
    return;
  } catch (const dnnl::error&) {
    // oneDNN declined (an unsupported size): the loop below is slow but exact.
  }
  for (int64_t i = 0; i < batch; ++i) matmul_reference(a + i * m * k, k, 1, b + i * k * n, n, 1, c + i * m * n, m, n, k);
}

}  // namespace linear

void register_linear_kernels(KernelRegistry& r) {
  linear::register_conv_kernels(r);
  linear::register_conv_transpose_kernels(r);
  linear::register_gemm_matmul_kernels(r);
  linear::register_einsum_kernels(r);
  linear::register_matmul_nbits_kernels(r);
  linear::register_det_kernels(r);
}

}  // namespace onnxptq::engine
