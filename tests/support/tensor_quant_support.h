// Test support for the tensor quantization tests: float tensors, typed values, one-line errors.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ir/tensor.h"
#include "onnxptq/error.h"
#include "qmath/params.h"

namespace onnxptq::testing {

inline ir::Tensor floats(std::vector<int64_t> dims, const std::vector<float>& v, std::string name = "") {
  ir::Tensor t = ir::Tensor::from_values<float>(std::move(dims), v);
  t.name = std::move(name);
  return t;
}

template <class T>
inline std::vector<T> values_of(const ir::Tensor& t) {
  auto s = t.values<T>();
  return {s.begin(), s.end()};
}

inline qmath::ScaleZeroPoint sz(double scale, int64_t zero_point) { return {scale, zero_point}; }

inline double f32(double v) { return static_cast<float>(v); }

// Expects an onnxptq::Error whose message is one line and contains `part`.
template <class F>
inline void expect_error(F&& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing '" << part << "'";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find(part), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

}  // namespace onnxptq::testing
