// Fast finetune of a quantization plan, layer by layer (Quark for ONNX's fast_finetune, with
// AdaRound or AdaQuant): for each target node in graph order, its input as the quantized model
// computes it (the layers before already finetuned) and its output in the float model train its
// weight (layer_trainer.h); the integers found replace the plan's (AdaQuant only: a float16/bfloat16
// weight's cast of the float weight trained, a block-format weight's float weight trained). The
// quantized and the float model each run once over the samples in all, in stages (staged_run.h),
// not once per layer.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "calib/data_reader.h"
#include "finetune/layer_trainer.h"
#include "finetune/sample_store.h"
#include "finetune/staged_run.h"
#include "ir/model.h"
#include "quant/config.h"
#include "quant/plan.h"
#include "quant/quantize.h"

namespace onnxptq::finetune {

struct FastFinetuneOptions {
  TrainOptions train;
  // Quark's TargetOpType default.
  std::set<std::string> target_op_types = {"Conv",   "ConvTranspose",         "Gemm",
                                           "MatMul", "InstanceNormalization", "LayerNormalization"};
  bool parallel = false;  // Quark's Parallel: every layer's input from the plan before any finetune
  // Quark's SelectiveUpdate: a trained layer is kept only if it brings the model's output
  // `output_index` closer to the float model's (mean L2 distance over the samples).
  bool selective_update = false;
  size_t output_index = 0;
  // Quark's OutputQDQ: each layer's loss is taken after its output's quantization, where the
  // plan quantizes that output to an integer type.
  bool output_qdq = false;
  // Quark's MemOptLevel 2: every sample's values (inputs, the layers' data) kept in files in this
  // directory, read back a sample at a time, so memory does not grow with the samples.
  std::optional<std::filesystem::path> spill;
  // Only these target nodes are trained (empty: every one), as automatic mixed precision's
  // AutoMixUseFastFT finetunes the node it converts.
  std::set<std::string> nodes;
  // Quark's SelectMaxMemLayer: only the target whose training data takes the most memory (its
  // inputs and output over every sample, and its weight), to see a run's peak quickly.
  bool select_max_mem_layer = false;
  int threads = 0;  // 0: every hardware thread
};

// The quantized model `plan` simulates for `model`, run in stages over `samples` (the float
// model's inputs, quantized where the plan quantizes them), `workers` samples at a time on
// `threads` threads each: each part is made with the plan as it is then, so layers refined
// before compute with their new weights; a Relu the plan removes stays with its producer.
// `plan` and `config` must outlive the run.
StagedRun quantized_staged_run(const ir::Model& model, const quant::Plan& plan, const quant::QuantConfig& config,
                               const SampleInputs& samples, int workers, int threads,
                               const std::optional<std::filesystem::path>& spill = std::nullopt);

// The options of include_fast_ft's FastFinetune (quant/config.h), its defaults by algorithm.
FastFinetuneOptions fast_finetune_options(const quant::FastFinetune& config, int threads);

// Finetunes the weights `plan` quantizes (its parameters assigned) for `model`, the float model
// the plan was made for, on `samples` (the inputs of `model`, sample_store.h): the target nodes whose weight the plan
// quantizes (to an integer type; with AdaQuant also to float16/bfloat16, trained through the
// cast), in topological order. Writes the quantized weights of every kept layer into the plan
// (and AdaQuant's biases with update_bias, quantized again with their scales);
// scales and zero points do not change. The targets come from `reference` when given (Quark's
// RefModelPath: a model with the same inputs and tensor names, say the float model before some
// change), else from `model`. `log` gets one line per layer: its losses, iterations,
// time and an estimate of the time left.
std::vector<quant::FinetunedLayer> fast_finetune(const ir::Model& model, quant::Plan& plan,
                                                 const quant::QuantConfig& config, const SampleInputs& samples,
                                                 const FastFinetuneOptions& options,
                                                 const std::function<void(const std::string&)>& log = {},
                                                 const ir::Model* reference = nullptr);

// BiasCorrection's steps (correct_bias in layer_trainer.h).
inline constexpr int kBiasCorrectionSteps = 3;
// BiasCorrection's samples, the first of the calibration data: a mean settles long before, and the
// staged runs hold each sample's values at their frontier (MemOptLevel 2: in files).
inline constexpr size_t kBiasCorrectionSamples = 128;

// BiasCorrection's options: fast_finetune with Algorithm::BiasCorrection over the Conv,
// ConvTranspose and Gemm nodes (Quark's Conv and Gemm), spilled as FastFinetune's MemOptLevel says.
FastFinetuneOptions bias_correction_options(const quant::QuantConfig& config);

// What quantize_static runs after the parameters (quant::PlanRefiner), Quark's post-quantization
// algorithms in its order: with UseGPTQ (or MatMulNBitsParams Algorithm GPTQ), GPTQ of the MatMul
// and Gemm weights on every calibration sample (gptq.h); with BiasCorrection, fast_finetune
// correcting biases on the first kBiasCorrectionSamples calibration samples; then with
// include_fast_ft, fast_finetune with config.fast_finetune on the
// reader's first DataSize samples and the model of RefModelPath loaded as the reference; both on
// the threads of config.calib. `log` gets their lines. With `nodes`, only those are finetuned
// (FastFinetuneOptions::nodes; AutoMixUseFastFT).
quant::PlanRefiner post_quantization_refiner(const quant::QuantConfig& config,
                                             std::function<void(const std::string&)> log = {},
                                             std::set<std::string> nodes = {});

}  // namespace onnxptq::finetune
