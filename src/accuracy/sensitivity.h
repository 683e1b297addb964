// Per-node sensitivity: how much of a quantized model's output error each quantized node makes
// on its own. The quantized plan is simulated with only one node's tensors quantized (its
// inputs, weight, bias and outputs, with the parameters they have in the whole plan), and the
// chosen model output is compared with the float model's. The accuracy-target search falls
// nodes back to float in this order, worst first (as Intel Neural Compressor's per-op fallback
// and Quark's AutoMixprecision rank theirs, but from simulations of one plan instead of a
// quantization per node).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "calib/data_reader.h"
#include "ir/model.h"
#include "quant/config.h"
#include "quant/plan.h"

namespace onnxptq::accuracy {

// Signal-to-quantization-noise ratio of tensors against references, summed over samples:
// 10 log10(sum ref^2 / sum (ref - x)^2), infinity when they are equal.
class OutputError {
 public:
  // Error when the shapes differ (naming `what`); non-float tensors are compared as float.
  void add(const ir::Tensor& reference, const ir::Tensor& value, const std::string& what);
  double sqnr_db() const;

 private:
  double signal_ = 0;
  double noise_ = 0;
};

struct NodeSensitivity {
  std::string node;
  std::string op_type;
  double sqnr_db = 0;  // the output's SQNR with only this node quantized (infinity: no error)
};

// Samples and the float model's output `output_index` on each: what the measures compare with.
struct ReferenceOutputs {
  std::vector<Feed> feeds;
  std::vector<ir::Tensor> outputs;
  size_t output_index = 0;
};

// `model` run on every sample of `reader` (at most `max_samples`, 0: all). Error when the model
// has no output `output_index` or a sample does not fit the model.
ReferenceOutputs reference_outputs(const ir::Model& model, DataReader& reader, size_t output_index,
                                   size_t max_samples, int threads);

// The plan with only `node`'s tensors quantized: its inputs and outputs as the whole plan
// quantizes them (shared parameters resolved), and the output of an activation the plan removes
// after it (whose quantization clips in its place).
quant::Plan plan_of_node(const quant::Plan& plan, const ir::Graph& graph, const std::string& node);

// For every node of plan.quantized_nodes: the output SQNR of `model` (the model the plan was
// made for) simulated with only that node quantized, on `reference`'s samples (fed as they are
// to `model`). Ordered worst first; nodes whose quantization changes nothing come last.
std::vector<NodeSensitivity> rank_nodes_alone(const ir::Model& model, const quant::Plan& plan,
                                              const quant::QuantConfig& config, const ReferenceOutputs& reference,
                                              int threads);

}  // namespace onnxptq::accuracy
