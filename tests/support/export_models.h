// Test support for the exporters: a small float model with the ops the formats treat
// differently, its plan calibrated on random samples, and engine runs of a model.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "engine/session.h"
#include "ir/model.h"
#include "quant/config.h"
#include "quant/plan.h"
#include "quant/quantize.h"
#include "support/model_run.h"  // run_model, count_ops

namespace onnxptq::testing {

// x [1,3,8,8] -> Conv(w, b) -> Relu -> MaxPool -> {Sigmoid, LeakyRelu} -> Add -> Concat(with the
// MaxPool output) -> AveragePool -> GlobalAveragePool... see export_models.cc for the whole graph:
// two graph outputs, y (a Gemm with bias) and m (a MatMul with a constant B).
ir::Model export_test_model(int64_t opset = 13);

// The plan of `model` for `config`, calibrated on `samples` random inputs in [-1, 1] (seed 1).
quant::Plan calibrated_plan(const ir::Model& model, const quant::QuantConfig& config, size_t samples = 4);

// quantize_static of `model` calibrated on `samples` random inputs (seed `seed`, the random
// reader's default ranges).
quant::QuantizeResult quantize_random(const ir::Model& model, const quant::QuantConfig& config, size_t samples,
                                      uint32_t seed);

// Every node output of `model` typed float: the value types make_plan takes for an all-float graph.
std::map<std::string, ir::DataType> all_float(const ir::Model& model);

// A random input for every fed graph input, values in [-1.5, 1.5] (seed `seed`).
std::map<std::string, ir::Tensor> random_feeds(const ir::Model& model, uint32_t seed);

// ONNX Runtime's outputs (tests/oracle/ort_run.js, 2 threads) of the model file `path` on `feeds`,
// in the order of `model`'s graph outputs; the inputs and outputs go through .npy files in `dir`.
// Error when ORT fails to load or run it. `literal`: with ORT's graph optimizations off (its fused
// QLinear kernels compute some steps differently from the ONNX ops, see quantize_vs_ort_test.cc).
std::vector<ir::Tensor> ort_run(const std::filesystem::path& path, const ir::Model& model,
                                const std::map<std::string, ir::Tensor>& feeds, const std::filesystem::path& dir,
                                bool literal = false);

// The same for a model in memory: saved, with its inputs and outputs, in a temporary folder that
// is removed afterwards (also when ORT fails).
std::vector<ir::Tensor> ort_run_model(const ir::Model& model, const std::map<std::string, ir::Tensor>& feeds,
                                      bool literal = false);

// python3-onnx's checker with full_check (shape inference) on the model file: "" when it passes,
// else what it printed.
std::string onnx_check(const std::filesystem::path& path);

// `model` saved to `path`, expected to pass onnx_check, and loaded back.
ir::Model saved_and_loaded(const ir::Model& model, const std::filesystem::path& path);

// An empty directory onnxptq_<name>_<pid> in the system's temporary directory (what an earlier
// run left there removed).
std::filesystem::path fresh_dir(const std::string& name);

// A rendered text image (tests/models/render_text_input.py) of the input shape "1x3xHxW", written
// as .npy to `file`; seeds give different texts.
void render_text_image(const std::string& shape, int seed, const std::filesystem::path& file);

// Whether ONNX Runtime's 8-bit integer kernels (QLinearConv, QLinearMatMul, and the QDQ groups its
// optimizer fuses into them) can saturate on this CPU: x86 without VNNI multiplies uint8 by int8
// pairs with VPMADDUBSW, whose int16 pair sums saturate when the weights use all 8 bits (ONNX
// Runtime's quantization guide: quantize with reduce_range on such machines). Tests that hold ORT's
// integer kernels to the engine's exact sums quantize with reduce_range there.
bool ort_int8_may_saturate();

// The same float values, output by output; `what` names the comparison in a failure.
void expect_bit_equal(const std::vector<ir::Tensor>& a, const std::vector<ir::Tensor>& b, const std::string& what);

// The largest |a - b| over the elements, in units of `step`.
double max_steps(const ir::Tensor& a, const ir::Tensor& b, double step);

// The values of an integer (8 to 32 bits) or float tensor, as doubles.
std::vector<double> values_of(const ir::Tensor& t);

// How many float16 (bfloat16) values apart two floats of that type are (0 for -0 and 0; infinity
// when one is NaN).
double sixteen_bit_steps(float a, float b, ir::DataType type);

// ONNX Runtime and the engine, layer by layer, on a quantized model file: ORT runs it literally
// (graph optimizations off) with every quantized tensor (the output of a QuantizeLinear, a QLinear*
// op or QGemm, or the Cast back to float of a Cast to float16 / bfloat16: steps of that type) also a
// graph output; the engine runs it literally with each quantized tensor it
// computes compared with ORT's and then replaced by it, so every layer starts from ORT's values.
// Files go to `dir`. A single rounding tie that two runtimes resolve differently can grow through
// later layers, so this, not the whole-model distance, is what two correct runtimes must agree on.
// With `from_ort_floats`, the float value each quantize reads (QuantizeLinear's input, the start of
// a Cast form's chain) is also an output of ORT's and replaced by it in the engine's run: every
// quantize then starts from the same floats, so the quantized values differ only where the two
// runtimes quantize differently (`floats_worst` says how far the engine's float values were).
struct LayerwiseAgreement {
  size_t quantized = 0;  // quantized tensors in the model
  size_t compared = 0;   // of those, computed by the engine and compared
  double worst = 0;      // the largest |engine - ORT| of a quantized value, in integer steps
  std::string worst_tensor;
  size_t floats = 0;        // with from_ort_floats: the float values replaced
  double floats_worst = 0;  // their largest |engine - ORT|, in float32 steps at the tensor's largest |value|
  std::string floats_worst_tensor;
  std::vector<ir::Tensor> ort_outputs;  // ORT's literal outputs, in the model's output order
};
LayerwiseAgreement agree_layer_by_layer(const std::filesystem::path& model_file,
                                        const std::map<std::string, ir::Tensor>& feeds,
                                        const std::filesystem::path& dir, bool from_ort_floats = false);

}  // namespace onnxptq::testing
