// The output error of plans that quantize a few tensors each, computed from what is downstream of
// them: with only those tensors quantized, every value not downstream of one equals the float
// model's. So the float model runs once per sample, in parts (a session per part, all samples at
// a time), and keeps only the float values at the cut of the plans still to measure: the values
// from outside that their downstream region reads (the node's inputs, residual skips). Each
// region (the quantized nodes and every node downstream of them up to the compared output) is
// then simulated alone from those values. The float values go as soon as no later region or part
// needs them, so memory holds a few tensors per sample on a chain of layers.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "accuracy/sensitivity.h"
#include "ir/model.h"
#include "onnxptq/progress.h"
#include "quant/config.h"
#include "quant/plan.h"

namespace onnxptq::accuracy {

// Where the time and memory of downstream_errors went.
struct DownstreamStats {
  double float_seconds = 0;      // the float model in parts: sessions built and run
  double build_seconds = 0;      // regions cut and their simulations built
  double run_seconds = 0;        // regions run and compared
  size_t float_runs = 0;         // runs of a float part (one per part per sample)
  size_t region_runs = 0;        // runs of a region (one per plan per sample)
  double region_nodes = 0;       // the regions' nodes as a share of the model's, averaged over plans run
  size_t peak_cached_bytes = 0;  // float values held at once, all samples
};

// For each group of plans (each quantizing tensors of `model`, the model the plans are for; a
// group shares one region, cut for all its plans' tensors: the parts of one node's plan), the
// error of `model` simulated with each plan against `reference`, fed its samples as they are:
// what simulated_error gives for each plan, up to float rounding (the engine may compute a
// region's values along another path, fused or in another layout). A plan without tensors
// measures no error. `progress` counts the groups measured (phase "sensitivity", unit "nodes"). The plans need not be a
// node's: any tensors of the model. Error as simulated_error for a plan the model does not fit.
std::vector<std::vector<OutputMetrics>> downstream_errors(const ir::Model& model,
                                                          const std::vector<std::vector<quant::Plan>>& groups,
                                                          const quant::QuantConfig& config,
                                                          const ReferenceOutputs& reference, int threads,
                                                          DownstreamStats* stats = nullptr,
                                                          const ProgressFunction& progress = {});

// "float parts 1.2 s (32 runs), regions built 3.4 s, run 20.1 s (384 runs, 41 % of the nodes
// each), float values held at most 120.5 MB"
std::string describe(const DownstreamStats& stats);

}  // namespace onnxptq::accuracy
