// Private header of the linear family (Conv, ConvTranspose, Gemm, MatMul, Einsum): the oneDNN
// plumbing shared by its files, the convolution geometry, and the plain reference loops that
// serve the types oneDNN does not take.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "engine/kernel.h"

namespace onnxptq::engine::linear {

// float32, float16 and bfloat16: computed as float32 (through oneDNN).
inline bool is_float_like(DataType t) {
  return t == DataType::Float || t == DataType::Float16 || t == DataType::BFloat16;
}

// ---- oneDNN plumbing

// The one CPU engine of the process.
const dnnl::engine& dnnl_cpu_engine();

// oneDNN (built with OpenMP) splits work over omp_get_max_threads() of the calling thread, so a
// run honours ctx.threads by setting that thread's OpenMP thread count. It is set only when it
// differs: the call is per thread (an ICV of the caller), so runs from other threads are not
// affected, and parallel_for names its thread count explicitly anyway.
void dnnl_use_threads(int threads);

// The threads a matmul of `outputs` values (rows x N) runs on. oneDNN splits the K sum of a small
// product (one row, or a few columns: 1x512x1000, 32x2048x64) over the threads, and its result then
// depends on their number; the engine's must not (calibration gives the same ranges with any
// number of workers, each with its share of the threads). At most 4096 outputs run on one thread.
inline int matmul_threads(int threads, int64_t outputs) { return outputs <= 4096 ? 1 : threads; }

// Per-thread buffers reused from run to run (64-byte aligned): primitives are created with
// scratchpad_mode::user, and blocked copies of activations live here between reorders. Each
// slot is one buffer; a kernel run uses distinct slots for things alive at the same time.
enum class Scratch { Pad = 0, Src = 1, Dst = 2, Weights = 3 };
void* thread_buffer(Scratch slot, size_t bytes);

// A dense row-major f32 memory descriptor of `dims`, or the same with explicit `strides`.
dnnl::memory::desc f32_desc(const std::vector<int64_t>& dims);
dnnl::memory::desc f32_desc(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides);
// Any layout the primitive prefers.
dnnl::memory::desc f32_any(const std::vector<int64_t>& dims);

// Runs `prim` on `stream` with the given arguments and a per-thread scratchpad (the
// primitive must have been created with scratchpad_mode::user).
void dnnl_execute(const dnnl::stream& stream, const dnnl::primitive& prim, const dnnl::primitive_desc_base& pd,
                  std::unordered_map<int, dnnl::memory> args);
// An attribute set for our primitives: scratchpad given by us, so runs may share a primitive
// (oneDNN's own scratchpad ties a primitive to the thread that created it).
dnnl::primitive_attr dnnl_attr();
// A reorder between two layouts, with our scratchpad, and its run.
dnnl::reorder::primitive_desc dnnl_reorder_pd(const dnnl::memory::desc& from, const dnnl::memory::desc& to);
void dnnl_reorder(const dnnl::stream& stream, const dnnl::reorder& r, const dnnl::reorder::primitive_desc& pd,
                  const dnnl::memory& from, const dnnl::memory& to);

// Keeps what a kernel built for the last input shape it saw. Kernels run as const calls from
// several threads, so the lookup takes a mutex; the plan is shared so that a thread still
// running with it keeps it alive when another thread replaces it. `make(previous)` builds a
// plan (under the lock) and may reuse parts of the previous one (packed weights).
template <class Plan>
class PlanCache {
 public:
  template <class Make>
  std::shared_ptr<const Plan> get(const std::vector<int64_t>& key, Make&& make) const {
    std::lock_guard<std::mutex> lock(mutex_);
    if (plan_ && key == key_) return plan_;
    std::shared_ptr<const Plan> plan = make(plan_.get());
    key_ = key;
    plan_ = plan;
    return plan;
  }

 private:
  mutable std::mutex mutex_;
  mutable std::vector<int64_t> key_;
  mutable std::shared_ptr<const Plan> plan_;
};

// ---- post-ops, attached to a convolution when it is built (fusion by the graph passes)

struct PostOp {
  enum class Kind {
    Relu,         // max(x, 0)
    LeakyRelu,    // x < 0 ? alpha * x : x
    Clip,         // min(max(x, alpha), beta)
    HardSigmoid,  // max(0, min(1, alpha * x + beta))
    HardSwish,    // x * max(0, min(1, x / 6 + 1 / 2))
    Sigmoid,
    Tanh,
    Swish,  // x * sigmoid(x): SiLU, as exporters write it (Sigmoid and Mul reading the same x)
    Sum,  // x + alpha * S, S the node's input 3, of the output's shape (a residual connection)
  };
  Kind kind = Kind::Relu;
  float alpha = 0;
  float beta = 0;
};

// Conv with post-ops applied to its output in the same pass (when oneDNN runs it; the reference
// path applies them afterwards). `info` is the Conv node's; with a Sum post-op the node has a
// fourth input, the summand (B may be omitted before it).
std::unique_ptr<Kernel> make_conv_kernel(const KernelInfo& info, std::vector<PostOp> post_ops);

// Applies post-ops to n floats in place; `summand` (n floats) serves Sum.
void apply_post_ops(const std::vector<PostOp>& post_ops, float* data, int64_t n, const float* summand);
dnnl::post_ops make_dnnl_post_ops(const std::vector<PostOp>& post_ops);
bool has_sum(const std::vector<PostOp>& post_ops);

// ---- convolution geometry

enum class AutoPad { NotSet, SameUpper, SameLower, Valid };
AutoPad parse_auto_pad(const ir::Node& node);

// Attributes of Conv and ConvTranspose, read once.
struct ConvAttributes {
  AutoPad auto_pad = AutoPad::NotSet;
  int64_t group = 1;
  std::vector<int64_t> kernel_shape;  // empty: from W
  std::vector<int64_t> strides, dilations, pads;  // empty: defaults for the rank
  std::vector<int64_t> output_padding, output_shape;  // ConvTranspose only
  explicit ConvAttributes(const ir::Node& node, bool transpose);
};

// One convolution resolved for given input and weight shapes.
struct ConvShape {
  int64_t batch = 0, in_channels = 0, out_channels = 0, group = 1;
  std::vector<int64_t> in, kernel, out;  // spatial sizes
  // pads_end of a ConvTranspose is its end padding less output_padding (oneDNN's padding_r).
  std::vector<int64_t> strides, dilations, pads_begin, pads_end;
  std::vector<int64_t> out_dims() const;  // [batch, out_channels, out...]
  int64_t spatial_rank() const { return static_cast<int64_t>(in.size()); }
};

// Checks X [N, C, D...] and W [M, C/group, k...] (Conv) or W [C, M/group, k...] (ConvTranspose)
// against the attributes and resolves pads and the output shape; Error naming what disagrees.
ConvShape conv_resolve(const ConvAttributes& a, const std::vector<int64_t>& x, const std::vector<int64_t>& w);
ConvShape conv_transpose_resolve(const ConvAttributes& a, const std::vector<int64_t>& x, const std::vector<int64_t>& w);
// Checks that X, W and the optional B have one element type.
void conv_check_types(const Tensor& x, const Tensor& w, const Tensor* b);
// Checks the optional bias B [M].
void conv_check_bias(const Tensor* b, int64_t out_channels);

// ---- oneDNN convolution and deconvolution on dense N C spatial... tensors

// A primitive built for one input shape, with the reorders between the dense tensors of the
// graph and the layouts the primitive prefers, and the constant weights packed once.
struct ForwardPlan {
  dnnl::primitive_desc pd;
  dnnl::primitive prim;
  dnnl::memory::desc user_src, user_weights, user_dst;
  bool reorder_src = false, reorder_dst = false, reorder_weights = false;
  dnnl::reorder::primitive_desc src_reorder_pd, dst_reorder_pd, weights_reorder_pd, summand_reorder_pd;
  dnnl::reorder src_reorder, dst_reorder, weights_reorder, summand_reorder;
  std::shared_ptr<const dnnl::memory> packed_weights;  // constant weights in pd's layout
  bool reference = false;  // oneDNN declined: the kernel runs its loop
  bool post_ops_after = false;  // the primitive has none: the kernel applies them to its output
};

// Fills in the reorders of `plan` (pd, prim and the user descriptors set) and packs
// `constant_weights` (dense, user_weights layout) unless `previous` holds them packed already.
// `summand`: the primitive has a Sum post-op, whose summand is dense like the output.
void forward_plan_finish(ForwardPlan& plan, const float* constant_weights, const ForwardPlan* previous,
                         bool summand = false);
// Runs the plan: `w` is ignored when the weights are packed; `b` and `summand` may be null.
void forward_plan_run(const ForwardPlan& plan, const float* x, const float* w, const float* b, float* y,
                      const float* summand = nullptr);
// Whether dense NCHW in and out is the better layout for this convolution (a 1x1 convolution
// is a plain GEMM there); otherwise the primitive picks a blocked layout and the plan reorders.
bool conv_prefers_dense(const ConvShape& s);

// ---- reference loops (any element type; integers wrap around like the hardware does)

template <class T, bool = std::is_integral_v<T>>
struct AccumulatorOf {
  using type = T;
};
template <class T>
struct AccumulatorOf<T, true> {
  using type = std::make_unsigned_t<T>;
};
template <class T>
using Accumulator = typename AccumulatorOf<T>::type;

// c[m, n] = sum_k a[m * a_rs + k * a_cs] * b[k * b_rs + n * b_cs] for one M x N block of c.
template <class T>
void matmul_reference(const T* a, int64_t a_rs, int64_t a_cs, const T* b, int64_t b_rs, int64_t b_cs, T* c,
                      int64_t m, int64_t n, int64_t k) {
  using A = Accumulator<T>;
  std::vector<A> row(static_cast<size_t>(n));
  for (int64_t i = 0; i < m; ++i) {
    std::fill(row.begin(), row.end(), A{});
    for (int64_t p = 0; p < k; ++p) {
      A av = static_cast<A>(a[i * a_rs + p * a_cs]);
      const T* bp = b + p * b_rs;
      if (b_cs == 1)
        for (int64_t j = 0; j < n; ++j) row[j] += av * static_cast<A>(bp[j]);
      else
        for (int64_t j = 0; j < n; ++j) row[j] += av * static_cast<A>(bp[j * b_cs]);
    }
    for (int64_t j = 0; j < n; ++j) c[i * n + j] = static_cast<T>(row[j]);
  }
}

// Convolution and transposed convolution of any spatial rank, with optional bias.
template <class T>
void conv_reference(const ConvShape& s, const T* x, const T* w, const T* b, T* y);
template <class T>
void conv_transpose_reference(const ConvShape& s, const T* x, const T* w, const T* b, T* y);

// Float batched matrix product through oneDNN: c[i] = a[i] (m x k) * b[i] (k x n), `batch`
// dense row-major blocks each; `threads` as in RunContext. Falls back to the loop when oneDNN
// declines the shape.
void matmul_f32(int threads, const float* a, const float* b, float* c, int64_t batch, int64_t m, int64_t k, int64_t n);

// ---- the parts of the family
void register_conv_kernels(KernelRegistry& r);
void register_conv_transpose_kernels(KernelRegistry& r);
void register_gemm_matmul_kernels(KernelRegistry& r);
void register_einsum_kernels(KernelRegistry& r);
void register_matmul_nbits_kernels(KernelRegistry& r);  // com.microsoft MatMulNBits
void register_det_kernels(KernelRegistry& r);           // Det

}  // namespace onnxptq::engine::linear
