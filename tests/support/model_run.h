// Test support: a model run by the engine, its nodes counted, a value's producer found. The
// exporters' and the passes' support both use these.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "calib/data_reader.h"
#include "engine/session.h"
#include "ir/model.h"

namespace onnxptq::testing {

// Samples held in memory, read in order; it can start over.
class FeedListReader : public DataReader {
 public:
  explicit FeedListReader(std::vector<Feed> feeds) : feeds_(std::move(feeds)) {}
  std::optional<Feed> next() override {
    return next_ < feeds_.size() ? std::optional<Feed>(feeds_[next_++]) : std::nullopt;
  }
  bool can_rewind() const override { return true; }
  void rewind() override { next_ = 0; }
  std::string describe() const override { return "test feeds"; }

 private:
  std::vector<Feed> feeds_;
  size_t next_ = 0;
};

// The model's outputs on `feeds`, run by the engine on 2 threads, with or without its speed
// rewrites.
std::vector<ir::Tensor> run_model(const ir::Model& model, const std::map<std::string, ir::Tensor>& feeds,
                                  bool optimize = true, engine::SessionOptions options = {},
                                  const engine::TensorTransform* transform = nullptr);

// The engine's graph rewrites' `visible` predicate when no value must stay visible (observed,
// transformed, or a graph output).
inline bool nothing_visible(const ir::Value*) { return false; }

// How many nodes of `op_type` (any domain) the main graph has.
size_t count_ops(const ir::Model& model, std::string_view op_type);

// The node that computes the value `name` of the main graph; nullptr for none (a graph input, an
// initializer, no such value).
const ir::Node* producer(const ir::Model& model, const std::string& name);

// The largest |expected - got| over the range of `expected` (max - min, at least 1e-12), both
// float32; infinity when a difference is NaN, 0 for empty tensors.
double range_relative_error(const ir::Tensor& expected, const ir::Tensor& got);

}  // namespace onnxptq::testing
