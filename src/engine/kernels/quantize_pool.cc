// The com.microsoft QLinearGlobalAveragePool and QLinearAveragePool of ONNX Runtime's QOperator
// format, following its CPU kernels' arithmetic to the bit.
#include <algorithm>
#include <array>

#include "engine/kernels/quantize.h"
#include "engine/parallel.h"

namespace onnxptq::engine {
namespace {

constexpr int64_t kMinChunk = 16384;

// MLAS's global average: an exact int32 sum minus zp_x * size, requantized with the multiplier
// x_scale / (y_scale * size).
template <class T>
void global_average(const T* x, int64_t N, int64_t C, int64_t S, bool channels_last, QParams xq, QParams yq, T* y,
                    int threads) {
  float multiplier = xq.scale / (yq.scale * static_cast<float>(S));
  int32_t bias = -xq.zp * static_cast<int32_t>(S);
  if (!channels_last) {
    parallel_for(threads, N * C, std::max<int64_t>(1, kMinChunk / std::max<int64_t>(S, 1)), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T* p = x + r * S;
        int32_t sum = 0;
        for (int64_t i = 0; i < S; ++i) sum += p[i];
        y[r] = requantize_value<T>(sum + bias, multiplier, yq.zp);
      }
    });
    return;
  }
  parallel_for(threads, N, 1, [&](int64_t b, int64_t e) {
    std::vector<int32_t> sums(C);
    for (int64_t n = b; n < e; ++n) {
      std::fill(sums.begin(), sums.end(), bias);
      const T* p = x + n * S * C;
      for (int64_t i = 0; i < S; ++i)
        for (int64_t c = 0; c < C; ++c) sums[c] += p[i * C + c];
      for (int64_t c = 0; c < C; ++c) y[n * C + c] = requantize_value<T>(sums[c], multiplier, yq.zp);
    }
  });
}

class QLinearGlobalAveragePoolKernel : public Kernel {
 public:
  explicit QLinearGlobalAveragePoolKernel(const KernelInfo& info) {
    int64_t c = info.node.attr_int("channels_last", 0);
    if (c != 0 && c != 1) throw Error("channels_last must be 0 or 1, got " + std::to_string(c));
    channels_last_ = c == 1;
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = required_input(in, 0, "X");
    if (x.rank() < 3) throw Error("the input must have rank >= 3, got shape " + ir::dims_to_string(x.dims()));
    std::vector<int64_t> dims = x.dims();
    int64_t N = dims[0], C = channels_last_ ? dims.back() : dims[1], S = 1;
    size_t first = channels_last_ ? 1 : 2;
    for (size_t k = first; k < first + x.rank() - 2; ++k) {
      S *= dims[k];
      dims[k] = 1;
    }
    Tensor y = Tensor::uninitialized(x.dtype(), dims);
    visit_8bit_type(x.dtype(), "X", [&](auto tag) {
      using T = decltype(tag);
      QParams xq = read_qparams(in, 1, 2, x.dtype(), "x");
      QParams yq = read_qparams(in, 3, 4, x.dtype(), "y");
      global_average<T>(x.values<T>().data(), N, C, S, channels_last_, xq, yq, y.mutable_values<T>().data(), ctx.threads);
    });
    out[0] = std::move(y);
  }

 private:
  bool channels_last_ = false;
};

// ORT's QLinearAveragePool: the input dequantized to float (x_scale * (q - zp)), windows summed
// in float in row-major order and divided by the element count, then
// y = saturate(round_half_even(avg / y_scale + zp_y)). A window covering the whole unpadded
// input falls back to the global average above (integer sum), as ORT does.
class QLinearAveragePoolKernel : public Kernel {
 public:
  explicit QLinearAveragePoolKernel(const KernelInfo& info) {
    geometry_.read(info.node, false, true);
    if (geometry_.kernel.empty()) throw Error("kernel_shape is required");
    int64_t c = info.node.attr_int("channels_last", 0);
    if (c != 0 && c != 1) throw Error("channels_last must be 0 or 1, got " + std::to_string(c));
    channels_last_ = c == 1;
    int64_t p = info.node.attr_int("count_include_pad", 0);
    if (p != 0 && p != 1) throw Error("count_include_pad must be 0 or 1, got " + std::to_string(p));
    count_include_pad_ = p == 1;
    geometry_.complete(geometry_.kernel.size());
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    const Tensor& x = required_input(in, 0, "X");
    size_t rank = geometry_.kernel.size();
    if (x.rank() != rank + 2)
      throw Error("the input has shape " + ir::dims_to_string(x.dims()) + ", expected rank " + std::to_string(rank + 2) +
                  " for a " + std::to_string(rank) + "-D kernel");
    const auto& d = x.dims();
    int64_t N = d[0], C = channels_last_ ? d.back() : d[1];
    std::vector<int64_t> in_sp(d.begin() + (channels_last_ ? 1 : 2), d.begin() + (channels_last_ ? 1 : 2) + rank);
    std::vector<int64_t> pads;
    std::vector<int64_t> out_sp = geometry_.output_dims(in_sp, pads);
    std::vector<int64_t> out_dims{N};
    if (!channels_last_) out_dims.push_back(C);
    out_dims.insert(out_dims.end(), out_sp.begin(), out_sp.end());
    if (channels_last_) out_dims.push_back(C);
    Tensor y = Tensor::uninitialized(x.dtype(), out_dims);
    visit_8bit_type(x.dtype(), "X", [&](auto tag) {
      using T = decltype(tag);
      QParams xq = read_qparams(in, 1, 2, x.dtype(), "x");
      QParams yq = read_qparams(in, 3, 4, x.dtype(), "y");
      const T* xv = x.values<T>().data();
      T* yv = y.mutable_values<T>().data();
      bool global = in_sp == geometry_.kernel && std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; });
      if (global) {
        global_average<T>(xv, N, C, ir::element_count(in_sp), channels_last_, xq, yq, yv, ctx.threads);
        return;
      }
      pool<T>(xv, N, C, in_sp, out_sp, pads, xq, yq, yv, ctx.threads);
    });
    out[0] = std::move(y);
  }

 private:
  template <class T>
  void pool(const T* x, int64_t N, int64_t C, const std::vector<int64_t>& in, const std::vector<int64_t>& out,
            const std::vector<int64_t>& pads, QParams xq, QParams yq, T* y, int threads) const {
    size_t rank = in.size();
    int64_t in_size = ir::element_count(in), out_size = ir::element_count(out);
    int64_t kernel_size = ir::element_count(geometry_.kernel);
    // Dequantized input, in the input's layout.
    std::vector<float> xf(N * C * in_size);
    std::array<float, 256> deq;
    for (int i = 0; i < 256; ++i) deq[i] = dequantize_value<T>(static_cast<T>(i), xq.scale, xq.zp);
    for (size_t i = 0; i < xf.size(); ++i) xf[i] = deq[static_cast<uint8_t>(x[i])];
    // Element strides of the spatial dims and of the channel in the input.
    std::vector<int64_t> sp_stride(rank);
    for (int64_t k = static_cast<int64_t>(rank) - 1, s = channels_last_ ? C : 1; k >= 0; --k) {
      sp_stride[k] = s;
      s *= in[k];
    }
    int64_t c_stride = channels_last_ ? 1 : in_size;
    int64_t batch_stride = C * in_size;
    parallel_for(threads, N * out_size, std::max<int64_t>(1, kMinChunk / std::max<int64_t>(C * kernel_size, 1)),
                 [&](int64_t b, int64_t e) {
                   std::vector<int64_t> start(rank), end(rank), idx(rank);
                   for (int64_t r = b; r < e; ++r) {
                     int64_t n = r / out_size, o = r % out_size;
                     int64_t count = 1;
                     for (int64_t k = static_cast<int64_t>(rank) - 1, t = o; k >= 0; --k) {
                       int64_t ok = t % out[k];
                       t /= out[k];
                       int64_t s = ok * geometry_.strides[k] - pads[k];
                       int64_t en = std::min(s + geometry_.kernel[k], in[k]);
                       s = std::max<int64_t>(s, 0);
                       start[k] = s;
                       end[k] = en;
                       count *= std::max<int64_t>(en - s, 0);
                     }
                     if (count_include_pad_) count = kernel_size;
                     for (int64_t c = 0; c < C; ++c) {
                       const float* base = xf.data() + n * batch_stride + c * c_stride;
                       float sum = 0.0f;
                       bool empty = false;
                       for (size_t k = 0; k < rank; ++k) {
                         idx[k] = start[k];
                         empty = empty || start[k] >= end[k];
                       }
                       while (!empty) {
                         int64_t off = 0;
                         for (size_t k = 0; k < rank; ++k) off += idx[k] * sp_stride[k];
                         sum += base[off];
                         int64_t k = static_cast<int64_t>(rank) - 1;
                         for (; k >= 0; --k) {
                           if (++idx[k] < end[k]) break;
                           idx[k] = start[k];
                         }
                         if (k < 0) break;
                       }
                       float avg = sum / static_cast<float>(count);
                       int64_t yo = channels_last_ ? (n * out_size + o) * C + c : (n * C + c) * out_size + o;
                       y[yo] = quantize_scaled<T>(avg / yq.scale + static_cast<float>(yq.zp), 0);
                     }
                   }
                 });
  }

  WindowGeometry geometry_;
  bool channels_last_ = false;
  bool count_include_pad_ = false;
};

}  // namespace

void register_quantize_pool_kernels(KernelRegistry& r) {
  r.add("com.microsoft", "QLinearGlobalAveragePool", 1, 1, kernel_factory<QLinearGlobalAveragePoolKernel>());
  r.add("com.microsoft", "QLinearAveragePool", 1, 1, kernel_factory<QLinearAveragePoolKernel>());
}

}  // namespace onnxptq::engine
