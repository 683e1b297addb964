// Per-node sensitivity: how much of a quantized model's output error each quantized node makes,
// from simulations of one calibrated plan (docs/accuracy.md). Each node is measured quantized
// alone, and on request its weight and activations apart, or the whole model with it left float;
// Quark's AutoMixprecision ranks nodes the first way, Intel Neural Compressor's per-op fallback
// the last.
#pragma once

#include <cstddef>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "onnxptq/config.h"
#include "onnxptq/data_reader.h"
#include "onnxptq/model.h"
#include "onnxptq/progress.h"
#include "onnxptq/sample_ranks.h"

namespace onnxptq {

// How far outputs are from references, over all samples: SQNR 10 log10(sum ref^2 / sum (ref - x)^2)
// (infinity when equal, minus infinity with a NaN), cosine similarity, RMS error, and, when every
// reference row (last axis) is a probability distribution, the mean KL divergence KL(ref || x).
struct OutputMetrics {
  double sqnr_db = std::numeric_limits<double>::infinity();
  double cosine = 1;
  double rmse = 0;
  std::optional<double> kl;
};

struct NodeSensitivity {
  std::string node;
  std::string op_type;
  OutputMetrics alone;  // only this node quantized
  // With the split: only its weight and bias (nodes without: as if float), and only its inputs
  // and outputs that are activations.
  std::optional<OutputMetrics> weight, activations;
  std::optional<OutputMetrics> left_float;  // every node quantized but this one
};

struct SensitivityOptions {
  size_t samples = 8;  // the first calibration samples, measured on
  size_t output_index = 0;
  bool split = false;       // also each node's weight and activations alone (up to 3 plans a node)
  bool left_float = false;  // also every node but each one (a plan per node)
  int threads = 0;
  // Calibration samples read, then nodes measured.
  ProgressFunction progress{};
  // Several processes sharing the calibration samples (onnxptq/sample_ranks.h); the nodes are
  // measured in each, alike. Null: this process alone.
  std::shared_ptr<SampleRanks> ranks{};
};

struct SensitivityReport {
  std::vector<NodeSensitivity> nodes;  // worst alone first
  OutputMetrics whole_model;           // every node quantized
  size_t samples = 0;
  size_t output_index = 0;

  // {"output_index", "samples", "whole_model": metrics, "nodes": [{"node", "op_type", "alone",
  // "weight", "activations", "left_float"}]}, metrics as {"sqnr_db", "cosine", "rmse", "kl"} or
  // null when not measured, infinities and NaN as null; indented by two spaces.
  std::string to_json() const;
  // One line per node, the same columns flattened, after a header line.
  std::string to_csv() const;
  // A page for people: the whole model's error, then a row per node with bars of its errors
  // (inline SVG, no script, no network), worst first. `title` names the model and configuration.
  std::string to_html(const std::string& title) const;
};

// The analysis of `config` on `model`: the model prepared and planned once, calibrated once on
// `reader`, then each node measured on the first `options.samples` samples. `log` gets the
// quantizer's progress lines. Error as quantize() gives them, and for a model without output
// `options.output_index`.
SensitivityReport analyze_sensitivity(const Model& model, DataReader& reader, const Config& config,
                                      const SensitivityOptions& options = {},
                                      const std::function<void(const std::string&)>& log = {});

}  // namespace onnxptq
