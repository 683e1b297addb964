// Test support for the kernel tests: one node run by the engine (its inputs fed, omitted or
// constant, its attributes listed), tensors made from listed values and read back, and the
// comparison of a result with values computed in double.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "ir/tensor.h"

namespace onnxptq::kernel_test {

inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
inline constexpr float kInf = std::numeric_limits<float>::infinity();
// The domain of Quark's custom ops.
inline const std::string kQuark = "com.amd.quark";

template <class T>
ir::Tensor make(std::vector<int64_t> dims, std::vector<T> values) {
  return ir::Tensor::from_values<T>(std::move(dims), values);
}
template <class T>
ir::Tensor scalar_of(T v) {
  return make<T>({}, {v});
}
inline ir::Tensor scalar(float v) { return scalar_of<float>(v); }

template <class T>
std::vector<T> values_of(const ir::Tensor& t) {
  auto v = t.values<T>();
  return {v.begin(), v.end()};
}

ir::Tensor f32(std::vector<int64_t> dims, std::vector<float> v);
ir::Tensor i32(std::vector<int64_t> dims, std::vector<int32_t> v);
ir::Tensor i64(std::vector<int64_t> dims, std::vector<int64_t> v);
// Seeded values in [lo, hi).
ir::Tensor random_f32(const std::vector<int64_t>& dims, unsigned seed, float lo = -3.0f, float hi = 3.0f);
std::vector<float> floats(const ir::Tensor& t);

struct Attr {
  std::string name;
  std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>, ir::Tensor,
               std::vector<std::string>>
      value;
};

// A node of the default domain and what its run needs.
struct Op {
  std::string type;
  int64_t opset = 13;
  std::vector<Attr> attrs = {};
  int outputs = 1;
  int threads = 1;
  std::set<size_t> constants = {};  // inputs given as initializers
};

// Runs a one-node model of `op` once: its inputs are graph inputs (std::nullopt: an omitted
// optional input) unless `op.constants` lists them.
std::vector<ir::Tensor> run_all(const Op& op, const std::vector<std::optional<ir::Tensor>>& inputs);
// Its first output.
ir::Tensor run_op(const Op& op, const std::vector<std::optional<ir::Tensor>>& inputs);
// The message of the Error the op raises (when built or run), or "" when it runs.
std::string op_error(const Op& op, const std::vector<std::optional<ir::Tensor>>& inputs);

// A float tensor within atol + rtol * |expected| of `expected` element by element; NaN and
// infinities where `expected` has them.
void expect_near_all(const std::vector<double>& expected, const ir::Tensor& got, double rtol = 1e-5,
                     double atol = 1e-5);

}  // namespace onnxptq::kernel_test
