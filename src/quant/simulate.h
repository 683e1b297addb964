// Simulation: the float model run with the plan applied as fake quantization (docs/ARCHITECTURE.md:
// decide on a plan, simulate from it, export from it). Weights and biases are the plan's
// quantized values dequantized; every quantized activation is quantized and dequantized right
// after it is produced, with its provider's parameters. The exported QDQ model run by the engine
// gives the same numbers.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/block_quantizer.h"
#include "engine/session.h"
#include "ir/model.h"
#include "quant/config.h"
#include "quant/plan.h"
#include "quant/tensor_quant.h"

namespace onnxptq::quant {

class Simulation {
 public:
  // `model` is the float model the plan was made for (after preparation, if any); the plan's
  // parameters must be assigned. Error naming a planned tensor the model does not have, or
  // one without parameters.
  Simulation(const ir::Model& model, const Plan& plan, const QuantConfig& config, int threads = 0);
  ~Simulation();

  const engine::Session& session() const { return *session_; }
  // The graph outputs in order. `observe` (optional) sees every fake-quantized tensor as the
  // quantized model would hold it (after its fake quantization).
  std::vector<ir::Tensor> run(const std::map<std::string, ir::Tensor>& feeds,
                              const engine::TensorObserver* observe = nullptr) const;

 private:
  struct Activation {
    ir::DataType type;
    qmath::ScaleZeroPoint params;
    bool clip = false;  // BF16WithClip: clipped to the bfloat16 range first
    bool cast = true;   // false under EnableVaimlBF16 (bfloat16): the written model does not round it
    std::shared_ptr<const engine::BlockQuantizer> block;  // a block type's node (then nothing else applies)
  };
  void add_conversions(ir::Graph& graph, const Plan& plan, const QuantConfig& config, engine::SessionOptions& options);
  void write_extended_lstms(ir::Graph& graph, const Plan& plan);

  std::map<std::string, Activation> activations_;  // value name -> what its Q/DQ pair (or block node) does
  int threads_ = 1;                                // of the session, for the block nodes
  engine::TensorTransform transform_;
  std::unique_ptr<engine::Session> session_;
};

// The arithmetic of the quantize/dequantize ops the config's format writes (how float16/bfloat16
// cast: vai_q_onnx's ops, Quark's ops, or their Cast form in standard ops).
QuantizeOptions quantize_options_of(const QuantConfig& config);

// `plan` for a part of the model it was made for (`part`: engine::extract_model's cut): without
// the tensors the part does not hold, shared parameters resolved first (the provider may be
// outside the part).
Plan plan_within(const Plan& plan, const ir::Graph& part);

// `value` of activation `name` fake-quantized as the simulation does it (a model input fed to a
// part, say); unchanged when the plan leaves `name` float.
void fake_quantize_activation(const Plan& plan, const QuantConfig& config, const std::string& name, ir::Tensor& value);

}  // namespace onnxptq::quant
