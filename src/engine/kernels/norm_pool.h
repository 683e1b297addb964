// Private helpers of the norm_pool family (norm_pool.cc: normalizations and the registration,
// norm_pool_pooling.cc: pools).
#pragma once

#include <string>
#include <type_traits>

#include "engine/kernel.h"

namespace onnxptq::engine {

void norm_pool_register_pooling(KernelRegistry& r);  // MaxPool, AveragePool, LpPool, Global*Pool

// Calls f(std::type_identity<T>{}) for the C++ type T of `type` among Ts; false if none matches.
template <class... Ts, class F>
bool norm_pool_visit_type(DataType type, F&& f) {
  return ((type == ir::data_type_of<Ts>() ? (f(std::type_identity<Ts>{}), true) : false) || ...);
}

inline bool norm_pool_is_half(DataType t) { return t == DataType::Float16 || t == DataType::BFloat16; }

inline std::string norm_pool_type_name(DataType t) { return std::string(ir::data_type_name(t)); }

}  // namespace onnxptq::engine
