// Test support for graph passes: run a model before and after a pass on the same seeded inputs
// and compare, count nodes by op type, and build small graphs with random constants.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ir/model.h"
#include "passes/pass.h"
#include "support/model_run.h"  // run_model, count_ops

namespace onnxptq::testing {

using Feeds = std::map<std::string, ir::Tensor>;

// Seeded values in [-2, 2) (normal-looking data with both signs), or in [lo, hi).
ir::Tensor random_float(std::vector<int64_t> dims, uint32_t seed, float lo = -2.0f, float hi = 2.0f);

// Seeded random feeds for every input a run must feed (their shapes from the model, dynamic
// dimensions from `shapes`), uniform in [-2, 2), the inputs seeded `seed`, `seed` + 1, ...
// (export_models.h's random_feeds draws all inputs from one generator, in [-1.5, 1.5]).
Feeds seeded_feeds(const ir::Model& model, uint32_t seed,
                   const std::map<std::string, std::vector<int64_t>>& shapes = {});

// The worst over the outputs of max |expected - got| / (max - min of expected); infinity when
// the shapes differ or a value is NaN in one only.
double relative_diff(const std::vector<ir::Tensor>& expected, const std::vector<ir::Tensor>& got);

// `pass` run on a copy of `model`, which it returns: the pass must say it changed the copy as
// `expect_change`, and the engine's outputs before and after, on seeded_feeds(model, seed,
// shapes), must agree within 1e-5 of their range.
ir::Model run_pass_checked(const ir::Model& model, passes::PassFunction pass, bool expect_change, uint32_t seed,
                           const std::map<std::string, std::vector<int64_t>>& shapes = {});

// The smallest (max - min) over the float outputs: 0 when some output is constant, and a
// comparison of it would show nothing.
double smallest_range(const std::vector<ir::Tensor>& outputs);

// A float initializer `name` of `dims`, seeded random values in [lo, hi).
ir::Value* add_random_initializer(ir::Graph& graph, const std::string& name, std::vector<int64_t> dims, uint32_t seed,
                                  float lo = -1.0f, float hi = 1.0f);

// A float initializer `name` of `dims` holding step * ((i * 7 + offset) % 11 - 5) at element i:
// eleven evenly spaced values of both signs, in an order that is not sorted.
ir::Value* add_step_initializer(ir::Graph& graph, const std::string& name, std::vector<int64_t> dims, float step,
                                int offset = 0);

// A value `name` with a float tensor type of `dims` (-1: a symbolic dimension).
ir::Value* add_float_value(ir::Graph& graph, const std::string& name, const std::vector<int64_t>& dims);

// A new value `name` made a graph output (its type left to shape inference or the run).
ir::Value* output(ir::Graph& graph, const std::string& name);
// A float32 scalar initializer, and a 1-D int64 one.
ir::Value* scalar(ir::Graph& graph, const std::string& name, float value);
ir::Value* ints(ir::Graph& graph, const std::string& name, const std::vector<int64_t>& values);

}  // namespace onnxptq::testing
