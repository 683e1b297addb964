// What the user asks of the quantizer: the arguments and extra_options of the seeds'
// quantize_static (shared/seeds, shared/spec/vai_q_onnx.md §1), as one struct.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "calib/calibrate.h"
#include "ir/data_type.h"
#include "passes/cle.h"

namespace onnxptq::quant {

enum class QuantFormat {
  QOperator,  // QuantFormat.QOperator: QLinearConv, QLinearMatMul, ...
  QDQ,        // QuantFormat.QDQ: standard QuantizeLinear / DequantizeLinear pairs
  VitisQDQ,   // VitisQuantFormat.QDQ: VitisQuantizeLinear / VitisDequantizeLinear (com.vai.quantize)
  FixNeuron,  // VitisQuantFormat.FixNeuron: one FixNeuron node per quantized tensor
};

// "QDQ", "QOperator", "VitisQuantFormat.QDQ", "FixNeuron", with or without the enum prefix
// ("QuantFormat.QDQ", "VitisQuantFormat.FixNeuron"); Error naming the known ones otherwise.
QuantFormat parse_quant_format(const std::string& name);
const char* quant_format_name(QuantFormat format);

// "QInt8", "QUInt8", "QInt16", "QUInt16", "QInt32", "QUInt32", "QFloat16", "QBFloat16", with or
// without the prefix "QuantType." or "VitisQuantType."; Error naming the known ones otherwise.
ir::DataType parse_quant_type(const std::string& name);
const char* quant_type_name(ir::DataType type);

struct QuantConfig {
  QuantFormat format = QuantFormat::QDQ;
  // calibrate_method; vai_q_onnx's default is PowerOfTwoMethod.MinMSE. calib.method follows it.
  calib::Method calibrate_method = calib::Method::MinMSE;
  ir::DataType activation_type = ir::DataType::Int8;
  ir::DataType weight_type = ir::DataType::Int8;
  bool per_channel = false;
  bool reduce_range = false;                      // weights only, as ORT applies it
  std::vector<std::string> op_types_to_quantize;  // empty: the default set (plan.h)
  std::vector<std::string> nodes_to_quantize;     // empty: every node of those types
  std::vector<std::string> nodes_to_exclude;
  std::vector<std::string> input_nodes, output_nodes;  // vai §4.7: become exclusions

  // extra_options
  bool activation_symmetric = false;           // ActivationSymmetric
  std::optional<bool> weight_symmetric;        // WeightSymmetric; default: true for signed weight types
  bool use_unsigned_relu = false;              // UseUnsignedReLU (power-of-two activations only)
  bool quantize_bias = true;                   // QuantizeBias
  bool add_qdq_pair_to_weight = false;         // AddQDQPairToWeight
  bool dedicated_qdq_pair = false;             // DedicatedQDQPair
  bool force_quantize_no_input_check = false;  // ForceQuantizeNoInputCheck
  bool matmul_const_b_only = false;            // MatMulConstBOnly
  std::set<std::string> op_types_to_exclude_output_quantization;  // OpTypesToExcludeOutputQuantization
  std::map<std::string, int64_t> per_channel_axis;                // QDQOpTypePerChannelSupportToAxis
  bool keep_removable_activations = false;                        // QDQKeepRemovableActivations (ORT)

  // include_cle and the CLE* / ReplaceClip6Relu extra_options: cross-layer equalization of the
  // float model before calibration (passes/cle.h).
  bool include_cle = false;
  // RemoveInputInit: graph inputs that are initializers (old exporters list every weight as an
  // input) stop being inputs, so they are quantized as the weights they are.
  bool remove_input_init = true;
  passes::CleOptions cle;

  calib::CalibOptions calib;  // the Calib* extra_options, threads, workers, ...

  // optimize_model (the seeds' default): the float model is prepared first (passes::prepare:
  // shapes, opset upgrade to 13, graph optimisation).
  bool optimize_model = true;

  bool power_of_two() const { return calib::is_power_of_two(calibrate_method); }
  bool weights_symmetric() const;
};

// Error (one line, naming the options) for a combination the seeds reject or onnxptq cannot do.
void check_config(const QuantConfig& config);

}  // namespace onnxptq::quant
