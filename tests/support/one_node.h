// Test support: run one node through the engine, list its attributes, and catch the message of
// an Error.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir/model.h"

namespace onnxptq::testing {

struct NodeInput {
  std::string name;  // empty: an omitted optional input
  ir::Tensor value;
  bool constant = false;  // an initializer instead of a graph input
};

// A model of one node `op` of `domain` (the default domain imported at `opset`; another domain
// at version 1), named n0, its inputs fed or initializers, run by a Session with `threads`; its outputs.
std::vector<ir::Tensor> run_node(const std::string& op, const std::string& domain, int64_t opset,
                                 const std::vector<NodeInput>& inputs, std::vector<ir::Attribute> attrs = {},
                                 size_t outputs = 1, int threads = 2);

// The attributes as a list (attributes are move-only: no initializer lists of them).
template <class... A>
std::vector<ir::Attribute> attrs(A... a) {
  std::vector<ir::Attribute> v;
  (v.push_back(std::move(a)), ...);
  return v;
}

// The message of the onnxptq::Error `fn` throws, or "" when it throws none.
std::string error_of(const std::function<void()>& fn);

}  // namespace onnxptq::testing
