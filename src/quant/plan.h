// The quantization plan: for every tensor the quantizer will quantize, its role, type,
// symmetry, axis and (once assigned) its scales and zero points; which nodes are quantized and
// why the others stay float. One plan drives calibration (which tensors), simulation and every
// exporter (docs/ARCHITECTURE.md: decide on a plan, simulate from it, export from it).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "calib/calibrate.h"
#include "ir/model.h"
#include "qmath/params.h"
#include "quant/config.h"
#include "quant/tensor_quant.h"

namespace onnxptq::quant {

enum class Role {
  Activation,  // quantized with its calibrated range (or an initializer quantized like one)
  Weight,      // an initializer quantized from its values (per tensor or per channel)
  Bias,        // an int32 initializer with scale s_input * s_weight
};

struct TensorPlan {
  std::string name;
  Role role = Role::Activation;
  ir::DataType type = ir::DataType::Int8;
  bool symmetric = false;
  std::optional<int64_t> axis;  // weights quantized per channel along this axis
  // A block type (QBFP, QMX): the axis its blocks run along (quant/block_format.h).
  std::optional<int64_t> block_axis;
  // UseMatMulNBits with Algorithm GPTQ only (quant/matmul_nbits.h): a weight [K, N] quantized per
  // group of group_size rows of a column, `params` one per group in MatMulNBits' order (n *
  // ceil(K / group_size) + k / group_size), `data` the codes [K, N] unpacked as uint8. No Q/DQ
  // exporter reads such a plan: the MatMulNBits writer packs it.
  std::optional<int64_t> group_size;
  // Uses the parameters of this tensor (data movement ops, Split outputs, ...).
  std::string shared_from;
  // Takes its range from this tensor's calibration (a Relu/Clip output: ORT's range adjustment).
  std::string range_from;
  // Fixed parameters, not from a range or values (Softmax outputs; TensorQuantOverrides' scale
  // and zero_point): one, or one per channel of a per-channel weight.
  std::vector<qmath::ScaleZeroPoint> fixed;
  // TensorQuantOverrides' rmin and rmax: this range instead of the calibrated one.
  std::optional<std::pair<double, double>> range;
  std::optional<bool> reduce_range;  // a weight's own reduce_range (TensorQuantOverrides)
  // Bias: the input and weight of its node, and Gemm's beta.
  std::string bias_input, bias_weight;
  double bias_beta = 1;
  // vai_q_onnx: a Relu-like output (asymmetric with rmin 0 under UseUnsignedReLU).
  bool relu_like = false;

  // Assigned by assign_parameters: one per tensor, or one per channel, and for weights and
  // biases their quantized values. A block-format weight has neither, but fast finetune (AdaQuant)
  // may set `data` to the float weight it trained, which then goes through the block node.
  std::vector<qmath::ScaleZeroPoint> params;
  std::optional<ir::Tensor> data;
  std::optional<int> pos;     // power-of-two position, when the scale is one
  bool bias_clipped = false;  // int32 bias values were clipped

  // The consumers in recv_nodes (every consumer when empty) read this activation quantized,
  // dequantized, then quantized again to `type` (ORT's "convert", a Q -> DQ -> Q -> DQ chain):
  // where nodes of two precisions meet (quant/overrides.h).
  struct Conversion {
    ir::DataType type = ir::DataType::Int8;
    bool symmetric = false;
    std::optional<std::pair<double, double>> range;  // default: the range the tensor's parameters represent
    std::optional<qmath::ScaleZeroPoint> fixed;
    std::set<std::string> recv_nodes;
    std::optional<qmath::ScaleZeroPoint> params;  // assigned by assign_parameters; none for a block type
    std::optional<int64_t> block_axis;            // a block type's (quant/block_format.h)
  };
  std::optional<Conversion> convert;

  // The axis `params` run along in `data`: a weight's per-channel axis; for a bias, its only axis
  // when it has one scale per weight channel (none with one scale in all).
  std::optional<int64_t> data_axis() const;
};

struct Plan {
  std::vector<TensorPlan> tensors;  // in the order they were marked
  std::map<std::string, size_t> index;
  std::vector<std::string> quantized_nodes;
  std::map<std::string, std::string> float_nodes;  // node name -> why it stays float
  // Outputs of the Relu/Clip nodes removed (asymmetric activations, ORT's QDQRemovableActivation): the node goes,
  // and its producer writes this tensor, whose range clips.
  std::set<std::string> removed_activations;
  // enable_dpu (vai_q_onnx's dpu quantizer): tensors between an annotated producer (Conv, Add, MaxPool, the average
  // pools, MatMul, Gemm; or a Pad before an average pool) and the activation (Relu, Clip(0, 6),
  // LeakyRelu/PRelu by option) or pool reading it, which get no Q/DQ: the NPU runs the pair as one.
  // Each maps to the consumer's output, whose Q/DQ stands for both; the consumer node stays.
  std::map<std::string, std::string> fused_activations;
  std::vector<std::string> warnings;  // what the seeds only warn about (an unknown input_nodes name, ...)

  TensorPlan* find(const std::string& name);
  const TensorPlan* find(const std::string& name) const;
  // The tensor whose parameters `name` uses (itself when it has its own).
  const TensorPlan& provider(const std::string& name) const;
  // The activations whose ranges calibration must find: exactly those with parameters of their
  // own computed from a range, including the Relu/Clip outputs others take theirs from.
  std::vector<std::string> tensors_to_calibrate() const;
  nlohmann::json to_json() const;
};

// The op types quantized when op_types_to_quantize is empty (vai_q_onnx 1.16's registries without the DPU one).
const std::set<std::string>& default_op_types();
// With enable_dpu, vai_q_onnx's DPU registry adds these (HardSigmoid, LayerNormalization, Div, ...).
const std::set<std::string>& dpu_op_types();
// Quark's NPUTransformerRegistry (quark/onnx registry.py): the op types enable_npu_transformer
// quantizes when op_types_to_quantize is empty: Gemm and MatMul.
const std::set<std::string>& npu_transformer_op_types();
// The op types the quantizer quantizes: op_types_to_quantize, or the default set (with the DPU
// registry under enable_dpu; Quark's transformer registry under enable_npu_transformer); with
// enable_dpu or enable_npu_transformer and ConvertBNToConv on, BatchNormalization too (vai_q_onnx
// and Quark append it, so the BN nodes ConvertBNToConv leaves are quantized).
std::set<std::string> quantized_op_types(const QuantConfig& config);
// The same for `graph`: with extra_op_types_to_quantize, and with QuantizeAllOpTypes every op type
// of its nodes in the standard domain (an op type with no rule of its own takes the generic one).
std::set<std::string> quantized_op_types(const QuantConfig& config, const ir::Graph& graph);

// Whether the plan takes the nodes of If/Loop/Scan bodies (EnableSubgraph): with the Q/DQ
// formats (QDQ, VitisQuantFormat.QDQ, Quark's extended QDQ), whose writer puts the pairs inside the
// bodies. The other formats leave bodies float, with a warning in the plan when they hold nodes of
// quantized op types. Under enable_dpu the DPU's rewrites, fusions and IPU checks stay in the main
// graph: an NPU runs no control flow, so the bodies run on the CPU, as plain Q/DQ.
bool quantizes_subgraphs(const QuantConfig& config);

// The plan for `model`: nodes selected by the config (op types, nodes_to_quantize,
// nodes_to_exclude, subgraphs_to_exclude, input_nodes/output_nodes), visited in topological order,
// each marking its tensors by the per-op rules of ORT's QDQ quantizer (its registry.py) and
// vai_q_onnx (its registry.py). `types` gives each value's element type where the model does
// not (from a run of the float model). Error for a node name in nodes_to_exclude or
// nodes_to_quantize that the model does not have, and as quant/node_selection.h says; one in
// input_nodes or output_nodes is a warning in plan.warnings (as vai_q_onnx), as are an
// extra_op_types_to_quantize op type the model lacks (as Quark) and node_selection.h's warnings.
Plan make_plan(const ir::Model& model, const QuantConfig& config, const std::map<std::string, ir::DataType>& types);

// nodes_to_exclude, subgraphs_to_exclude and the nodes that input_nodes / output_nodes exclude in
// `model` (vai_q_onnx's get_exclude_nodes).
std::set<std::string> excluded_nodes(const ir::Model& model, const QuantConfig& config);

// Scales and zero points: activations from the calibrated ranges, weights from their values,
// biases from their input and weight scales, shared tensors from their providers. Error naming
// a tensor that needs a range calibration did not give.
void assign_parameters(Plan& plan, const ir::Model& model, const QuantConfig& config,
                       const calib::CalibrationResult& ranges);

// The integers weight `t`'s values saturate to when assign_parameters quantizes them: the type's
// range (ONNX Runtime's quantize_nparray) or, with power-of-two scales, the symmetric one of
// signed types (vai_q_onnx's and Quark's).
qmath::QRange weight_saturation(const TensorPlan& t, const QuantConfig& config);
// Whose scale rules a configuration takes: vai_q_onnx's own quantizer for its power-of-two methods
// (UsePowerOf2Scale false too) and Int16Scale, ONNX Runtime's otherwise.
Tool scale_tool(const QuantConfig& config);
ScaleKind scale_kind(const QuantConfig& config);

}  // namespace onnxptq::quant
