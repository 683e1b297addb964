// Private helpers of the norm_pool family (norm_pool.cc: normalizations and the registration,
// norm_pool_pooling.cc: pools).
#pragma once

#include <string>
#include <type_traits>
#include <vector>

#include "engine/kernel.h"

namespace onnxptq::engine {

void norm_pool_register_pooling(KernelRegistry& r);  // MaxPool, AveragePool, LpPool, Global*Pool
void norm_pool_register_unpool(KernelRegistry& r);  // MaxUnpool (norm_pool_unpool.cc)
// com.amd.quark ExtendedInstanceNormalization (norm_pool_dpu_instance.cc)
void norm_pool_register_dpu_instance_norm(KernelRegistry& r);

// Calls f(std::type_identity<T>{}) for the C++ type T of `type` among Ts; false if none matches.
template <class... Ts, class F>
bool norm_pool_visit_type(DataType type, F&& f) {
  return ((type == ir::data_type_of<Ts>() ? (f(std::type_identity<Ts>{}), true) : false) || ...);
}

inline bool norm_pool_is_half(DataType t) { return t == DataType::Float16 || t == DataType::BFloat16; }

inline std::string norm_pool_type_name(DataType t) { return std::string(ir::data_type_name(t)); }

// Y of `out_dims` from compute(const T* x, T* y) in x's element type T among Ts; float16 and
// bfloat16 are computed in float32 and stored back. Error naming `op` for any other type.
template <class... Ts, class F>
Tensor norm_pool_compute_typed(const Tensor& x, const std::vector<int64_t>& out_dims, const std::string& op,
                               F&& compute) {
  const DataType type = x.dtype();
  if (norm_pool_is_half(type)) {
    Tensor xf = as_float32(x);
    Tensor yf = Tensor::uninitialized(DataType::Float, out_dims);
    compute(xf.values<float>().data(), yf.mutable_values<float>().data());
    return float32_as(yf, type);
  }
  Tensor y = Tensor::uninitialized(type, out_dims);
  bool known = norm_pool_visit_type<Ts...>(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    compute(x.values<T>().data(), y.mutable_values<T>().data());
  });
  if (!known) throw Error(op + " does not take " + norm_pool_type_name(type) + " tensors");
  return y;
}

}  // namespace onnxptq::engine
