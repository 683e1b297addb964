// What the user asks of the quantizer: the arguments and extra_options of the seeds'
// quantize_static (vai_q_onnx 1.16's user guide and quantize.py, Quark's quantize_static), as one struct.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
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
  // Quark's ExtendedQuantFormat.QDQ: com.amd.quark ExtendedQuantizeLinear / ExtendedDequantizeLinear,
  // the 8/16-bit ones (and int32 DequantizeLinear with zero point 0) then written as com.microsoft
  // QuantizeLinear / DequantizeLinear (as Quark's quantizer does)
  ExtendedQDQ,
};

// "QDQ", "QOperator", "VitisQuantFormat.QDQ", "FixNeuron", "ExtendedQuantFormat.QDQ", with or
// without the enum prefix ("QuantFormat.QDQ", "VitisQuantFormat.FixNeuron"; Quark's
// "ExtendedQuantFormat.QOperator" is QOperator); Error naming the known ones otherwise.
QuantFormat parse_quant_format(const std::string& name);
const char* quant_format_name(QuantFormat format);
// Quark's deprecated VitisQuantFormat.BFPFixNeuron / MXFixNeuron ("BFPFixNeuron", "MXFixNeuron"):
// ExtendedQuantFormat.QDQ with QBFP / QMX activations and weights (the type here), as Quark maps them.
std::optional<ir::DataType> block_fix_neuron_type(const std::string& name);

// "QInt8", "QUInt8", "QInt16", "QUInt16", "QInt32", "QUInt32", "QFloat16", "QBFloat16", and the
// block formats "QBFP" and "QMX" (kQBfp, kQMx of quant/tensor_quant.h), with or without the prefix
// "QuantType.", "VitisQuantType." or "ExtendedQuantType."; Error naming the known ones otherwise.
ir::DataType parse_quant_type(const std::string& name);
const char* quant_type_name(ir::DataType type);

// A node's precision (extra option NodePrecision; Quark's specific_layer_config lowered the same
// way): the type of its activation inputs and outputs and of its weight; nullopt keeps the
// configuration's. `keep_float` leaves the node in float, as nodes_to_exclude does.
struct NodePrecision {
  std::optional<ir::DataType> activation, weight;
  bool keep_float = false;
};

// One tensor's entry of ORT's TensorQuantOverrides (tensor_quant_overrides.py): its type,
// symmetry, range or fixed parameters (one per channel for a per-channel weight), and a
// "convert": the consumers in recv_nodes (all when empty) read it requantized to another type.
struct TensorOverride {
  std::optional<ir::DataType> quant_type;
  std::optional<bool> symmetric, reduce_range;
  std::optional<int64_t> axis;
  std::optional<double> rmin, rmax;
  std::vector<double> scale;          // with zero_point: fixed parameters
  std::vector<int64_t> zero_point;
  struct Convert {
    ir::DataType quant_type = ir::DataType::Int8;
    std::optional<bool> symmetric;
    std::optional<double> rmin, rmax, scale;
    std::optional<int64_t> zero_point;
    std::set<std::string> recv_nodes;
  };
  std::optional<Convert> convert;
};

// include_fast_ft's FastFinetune (Quark's AdaRoundConfig / AdaQuantConfig, finetune/fast_finetune.h):
// its keys, with the classes' defaults (the learning rate and the iterations by algorithm).
struct FastFinetune {
  bool adaquant = false;                               // OptimAlgorithm: "adaround" or "adaquant"
  uint64_t fixed_seed = 1705472343;                    // FixedSeed
  size_t data_size = 1000000000;                       // DataSize: samples trained on (at most)
  size_t batch_size = 1;                               // BatchSize
  size_t num_batches = 1;                              // NumBatches: early stop's window when > 1
  std::optional<int> num_iterations;                   // NumIterations; default 1000 (adaround), 3000 (adaquant)
  std::optional<double> learning_rate;                 // LearningRate; default 0.1 (adaround), 1e-5 (adaquant)
  bool early_stop = false;                             // EarlyStop
  std::optional<std::pair<double, double>> lr_adjust;  // LRAdjust: (loss threshold, learning rate)
  std::vector<std::string> target_op_types = {"Conv",   "ConvTranspose",         "Gemm",
                                              "MatMul", "InstanceNormalization", "LayerNormalization"};
  bool update_bias = false;                        // UpdateBias (adaquant)
  double drop_ratio = 1.0;                         // DropRatio
  int log_period = 100;                            // LogPeriod: a progress line every so many iterations of a layer
  double reg_param = 0.01;                         // RegParam
  std::pair<double, double> beta_range = {20, 2};  // BetaRange
  double warm_start = 0.2;                         // WarmStart
  bool parallel = false;                           // Parallel: every layer's input from the model before any finetune
  bool selective_update = false;                   // SelectiveUpdate: keep a layer only if the model's output gets closer
  bool output_qdq = false;                         // OutputQDQ: the loss after the layer's output Q/DQ
  std::string ref_model_path;                      // RefModelPath: the targets' model ("": the float model)
  int mem_opt_level = 1;                           // MemOptLevel: 0 and 1 in memory, 2 spilled to CacheDir
  std::string cache_dir;                           // CacheDir: MemOptLevel 2's files ("": the system's temp dir)
  size_t output_index = 0;                         // OutputIndex: the output SelectiveUpdate compares
  bool select_max_mem_layer = false;               // SelectMaxMemLayer: only the layer of the most data
  bool given = false;                              // the FastFinetune key was in the config
};

// include_sq's options (quant/smooth_quant.h): Quark's SmoothAlpha, and onnxptq's search range and
// folding.
struct SmoothQuantOptions {
  std::optional<double> alpha = 0.5;                  // SmoothAlpha; nullopt: "auto", searched per input
  double alpha_min = 0.3, alpha_max = 0.7, alpha_step = 0.05;  // SmoothAlphaRange [min, max, step]
  bool folding = true;  // SmoothFolding: into a LayerNormalization before the MatMuls where it can
  bool range_given = false, given = false;  // SmoothAlphaRange; any of the keys
};

// include_rotation's options (quant/quarot.h), Quark's keys.
struct RotationOptions {
  int64_t matrix_dim = 4096;  // RMatrixDim: the rotation's size, the hidden size of the rotated stream
  bool random = false;        // UseRandomHad: a random +-1 diagonal before the Hadamard matrix
  std::string config_path;    // RConfigPath: the JSON of R1_pairs
  bool given = false;         // any of the keys
};

// include_auto_mp's AutoMixprecision (Quark's legacy automatic mixed precision,
// accuracy/auto_mixprecision.h): its keys, with Quark's defaults.
struct AutoMixprecision {
  size_t data_size = 10000000;  // DataSize: samples the measures use (at most)
  std::vector<std::string> target_op_types = {"Conv", "ConvTranspose", "Gemm", "MatMul"};  // TargetOpType
  // ActTargetQuantType, WeightTargetQuantType (TargetQuantType sets both), BiasTargetQuantType.
  std::optional<ir::DataType> activation_target, weight_target, bias_target;
  bool dual_quant_nodes = false;  // DualQuantNodes
  size_t output_index = 0;        // OutputIndex
  double l2_target = 0.5;         // L2Target
  std::optional<double> top1_acc_target;   // Top1AccTarget, with an evaluate function
  size_t num_target = 0;                   // NumTarget: nodes to convert at most (0: no limit)
  std::vector<std::string> target_tensors;  // TargetTensors
  std::vector<int64_t> target_indices, exclude_indices;  // TargetIndices, ExcludeIndices
  bool no_input_qdq_shared = true;          // NoInputQDQShared
  bool use_fast_ft = false;                 // AutoMixUseFastFT: candidates measured after finetune
  bool given = false;                       // the extra option was set (it needs include_auto_mp)
};

// BFPAttributes (Quark): the attributes of the com.amd.quark BFPQuantizeDequantize node of every
// QBFP tensor, Quark's op defaults (its BFP_OP_DEFAULT_ATTRS) with the given keys over them. The
// meaning of each is the op's (engine/kernels/quantize_block.cc).
struct BfpAttributes {
  std::string bfp_method = "to_bfp";  // BFP16; "to_bfp_prime": MX4, MX6, MX9 (shared microexponents)
  int64_t axis = 1;                   // of the blocks (quant/block_format.h: RefineBlockAxis)
  int64_t bit_width = 16;
  int64_t block_size = 8;
  int64_t rounding_mode = 0;  // 0 half away from zero, 1 half up, 2 half to even
  int64_t sub_block_size = 2;
  int64_t sub_block_shift_bits = 1;
  int64_t convert_to_bfloat_before_bfp = 0;  // activations only: weights are never rounded first
};
// MXAttributes (Quark): those of the MXQuantizeDequantize node of every QMX tensor (MX_OP_DEFAULT_ATTRS).
struct MxAttributes {
  std::string element_dtype = "int8";  // fp8_e5m2, fp8_e4m3, fp6_e3m2, fp6_e2m3, fp4_e2m1, int8
  int64_t axis = 1;
  int64_t block_size = 32;
  int64_t rounding_mode = 0;
  // onnxptq's, written only when 1 (Quark's op has neither): the scale of the two nearest powers of
  // two that gives the block the smaller squared error, and int8 elements in [-127, 127] (OCP).
  int64_t min_error_scale = 0;
  int64_t symmetric_int8 = 0;
};

// UseMatMulNBits' MatMulNBitsParams (Quark): weight-only 4- or 8-bit quantization of the MatMuls
// with constant 2-D weights into com.microsoft MatMulNBits, as ONNX Runtime's
// MatMulNBitsQuantizer writes them (quant/matmul_nbits.h). Quark's defaults.
struct MatMulNBitsParams {
  // "DEFAULT": round to nearest; "GPTQ": GPTQ on the same scales, from the float model's MatMul
  // inputs on the calibration data (finetune/gptq.h, with GPTQParams' BlockSize, PercDamp,
  // ActOrder); "HQQ": Half-Quadratic Quantization's float zero points (quant/hqq.h), 4 bits only.
  std::string algorithm = "DEFAULT";
  int64_t group_size = 128;           // the op's block_size: a power of 2, at least 16
  bool symmetric = true;              // false: a uint8-packed zero point per block (HQQ: floats, always)
  int64_t bits = 4;                   // 4 or 8
  int64_t accuracy_level = 0;         // the op's accuracy_level (0-4), written when not 0
  bool given = false;                 // the extra option was set (it needs UseMatMulNBits)
};

// UseGPTQ's GPTQParams (Quark): GPTQ (finetune/gptq.h) rounds the weights of the MatMuls the
// plan quantizes to integers, on the plan's scales and zero points, after the parameters and
// before BiasCorrection. The quantizer's keys (Bits, GroupSize, PerChannel, WeightSymmetric,
// MSE) describe the grid, which is the plan's here: given, they must agree with it.
struct GptqParams {
  int64_t block_size = 128;  // rows rounded before each lazy batch update
  double perc_damp = 0.01;   // damping: PercDamp * mean(diag H) added to H's diagonal
  bool act_order = false;    // rows by descending diag(H)
  std::optional<int64_t> bits, group_size;
  std::optional<bool> per_channel, weight_symmetric, mse;
  bool given = false;  // the extra option was set (it needs UseGPTQ or MatMulNBits' GPTQ)
};

struct QuantConfig {
  QuantFormat format = QuantFormat::QDQ;
  // calibrate_method; vai_q_onnx's default is PowerOfTwoMethod.MinMSE. calib.method follows it.
  calib::Method calibrate_method = calib::Method::MinMSE;
  // UsePowerOf2Scale (vai_q_onnx): false keeps the float scale of a power-of-two method's range
  // (vai's compute_scale_zp_pof2s with use_pof2s false; MinMSE weights still search positions).
  bool use_power_of_two_scale = true;
  // Int16Scale (vai_q_onnx and Quark): MinMax ranges (Int16Method.MinMax, whatever
  // calibrate_method says) whose float scales become the nearest M / 2^N, M 16-bit.
  bool int16_scale = false;
  // WeightCalibrateMethod MinMSE (Quark's ExtendedCalibrationMethod.MinMSE): float-scale weights
  // take the candidate range of least squared error (quant/tensor_quant.h, WeightMethod::float_min_mse)
  // instead of their min and max; MinMSEModeFloatScale the candidates: "Percentile" (unset),
  // "HistCenter" or "All".
  bool weight_min_mse = false;
  std::optional<std::string> weight_min_mse_mode;
  // ConvertOpsetVersion (Quark): the float model converted to this default-domain opset first.
  std::optional<int64_t> convert_opset_version;
  ir::DataType activation_type = ir::DataType::Int8;
  ir::DataType weight_type = ir::DataType::Int8;
  bool per_channel = false;
  bool reduce_range = false;                      // weights only, as ORT applies it
  std::vector<std::string> op_types_to_quantize;  // empty: the default set (plan.h)
  std::vector<std::string> nodes_to_quantize;     // empty: every node of those types
  // Names, or Quark's regular expressions (quant/node_selection.h).
  std::vector<std::string> nodes_to_exclude;
  std::vector<std::string> input_nodes, output_nodes;  // vai_q_onnx's get_exclude_nodes: become exclusions
  // Quark's subgraphs_to_exclude: every node from the start nodes to the end nodes stays float.
  struct Subgraph {
    std::vector<std::string> start_nodes, end_nodes;
  };
  std::vector<Subgraph> subgraphs_to_exclude;
  // Quark's extra_op_types_to_quantize: op types quantized besides those above (generic rule when
  // they have none of their own).
  std::vector<std::string> extra_op_types_to_quantize;

  // extra_options
  bool activation_symmetric = false;           // ActivationSymmetric
  std::optional<bool> weight_symmetric;        // WeightSymmetric; default: true for signed weight types
  bool use_unsigned_relu = false;              // UseUnsignedReLU (power-of-two activations only)
  bool quantize_bias = true;                   // QuantizeBias
  // WeightsOnly (Quark): only constant tensors (weights) get a Q/DQ; activations and biases, whose
  // int32 scale needs the input's, stay float, and nothing is calibrated.
  bool weights_only = false;
  // ConvertLSTMToCustomLSTM (onnxptq's; Quark converts with its tool convert_lstm_to_customlstm
  // only): each LSTM quantized with uint16 X, W, R, B and Y, one scale each, and written as Quark's
  // com.amd.quark ExtendedLSTM (quant/extended_lstm.h); the simulation runs that op.
  bool convert_lstm_to_custom_lstm = false;
  // UseQDQVitisCustomOps (vai_q_onnx): false writes VitisQuantFormat.QDQ's int8 pairs as vai's
  // ai.onnx.contrib QuantizeLinear / DequantizeLinear (onnxruntime-extensions Python ops) with
  // their bit_width and pos attributes, biases quantized like weights (int8).
  bool use_qdq_vitis_custom_ops = true;
  bool add_qdq_pair_to_weight = false;         // AddQDQPairToWeight
  bool dedicated_qdq_pair = false;             // DedicatedQDQPair
  bool force_quantize_no_input_check = false;  // ForceQuantizeNoInputCheck
  std::optional<bool> matmul_const_b_only;     // MatMulConstBOnly; unset: enable_npu_transformer (Quark)
  // EnableSubgraph (vai_q_onnx, ONNX Runtime): the nodes of If/Loop/Scan bodies are quantized too,
  // where the format writes Q/DQ pairs (quantizes_subgraphs in quant/plan.h); on by default.
  bool enable_subgraph = true;
  std::set<std::string> op_types_to_exclude_output_quantization;  // OpTypesToExcludeOutputQuantization
  std::set<std::string> nodes_to_exclude_output_quantization;     // NodesToExcludeOutputQuantization (Quark)
  std::map<std::string, int64_t> per_channel_axis;                // QDQOpTypePerChannelSupportToAxis
  bool keep_removable_activations = false;                        // QDQKeepRemovableActivations (ORT)

  // Mixed precision (quant/overrides.h): NodePrecision, TensorQuantOverrides (and Quark's
  // MixedPrecisionTensor under specific_tensor_precision), and EnableDualQuantNodePairs: a tensor
  // between nodes of two precisions is quantized at the higher one, and with dual pairs the
  // consumers of the lower one read it requantized to theirs.
  std::map<std::string, NodePrecision> node_precision;
  std::map<std::string, TensorOverride> tensor_overrides;
  bool dual_quant_nodes = false;
  // specific_tensor_precision and MixedPrecisionTensor (Quark's legacy form): tensor -> type,
  // under the TensorQuantOverrides entries.
  bool specific_tensor_precision = false;
  std::map<std::string, ir::DataType> mixed_precision_tensor;
  bool include_auto_mp = false;
  AutoMixprecision auto_mp;
  bool include_fast_ft = false;
  bool include_sq = false;  // SmoothQuant before calibration (quant/smooth_quant.h), with `smooth`
  SmoothQuantOptions smooth;
  bool include_rotation = false;  // QuaRot's R1 rotation before calibration (quant/quarot.h), with `rotation`
  RotationOptions rotation;
  // BiasCorrection (Quark, extra option): after the parameters, before fast finetune, the biases
  // of the quantized Conv, ConvTranspose and Gemm nodes corrected (finetune/fast_finetune.h).
  bool bias_correction = false;
  FastFinetune fast_finetune;
  bool use_gptq = false;  // UseGPTQ (Quark): GPTQ of the MatMul weights, with `gptq`
  GptqParams gptq;
  bool use_matmul_nbits = false;  // UseMatMulNBits: the MatMulNBits path instead of Q/DQ
  MatMulNBitsParams matmul_nbits;
  // use_dynamic_quant (Quark) / quantize_dynamic (ONNX Runtime, vai_q_onnx): weights quantized
  // offline, activations at run time by DynamicQuantizeLinear (quant/dynamic_quant.h); no calibration.
  bool use_dynamic_quant = false;
  // Int32Bias (Quark): an int32 bias with the product scale; false: quantized like a weight.
  // Unset: true, except on the enable_dpu power-of-two path, whose biases are weights already.
  std::optional<bool> int32_bias;

  // include_cle and the CLE* / ReplaceClip6Relu extra_options: cross-layer equalization of the
  // float model before calibration (passes/cle.h).
  bool include_cle = false;
  // RemoveInputInit: graph inputs that are initializers (old exporters list every weight as an
  // input) stop being inputs, so they are quantized as the weights they are.
  bool remove_input_init = true;
  passes::CleOptions cle;

  calib::CalibOptions calib;  // the Calib* extra_options, threads, workers, ...
  // SaveAndRestore (Quark; old name TensorsRangeFile): a file of ranges, read instead of
  // calibrating when it exists, else written after calibrating (onnxptq calibrate's JSON).
  std::string save_and_restore;
  // UseRandomData (Quark's extra option): seeded random samples, shaped and ranged by
  // RandomDataReaderInputShape and RandomDataReaderInputDataRange, in place of the caller's data
  // (the seeds' RandomDataReader: one sample).
  bool use_random_data = false;
  calib::RandomReaderOptions random_data;

  // enable_dpu (vai_q_onnx) / enable_npu_cnn (Quark): the NPU path of vai_q_onnx
  // 1.16: the graph rewrites of passes/dpu.h (switched by their own extra_options keys), the QDQ
  // removal around annotated activations, SimulateDPU, and the IPU limitation check on the plan.
  bool enable_dpu = false;
  std::map<std::string, bool> dpu_pass_switches;  // extra_options key -> on/off, over dpu_pass_options()
  bool simulate_dpu = true;                       // SimulateDPU (master switch of the simulate_dpu.py transforms)
  // Quark's RemoveQDQConv* switches: which activations after an annotated producer lose the Q/DQ
  // between them (vai_q_onnx: Relu and Clip(0, 6) always, LeakyRelu and PRelu never).
  bool remove_qdq_conv_relu = true;         // RemoveQDQConvRelu
  bool remove_qdq_conv_clip = true;         // RemoveQDQConvClip
  bool remove_qdq_conv_leaky_relu = false;  // RemoveQDQConvLeakyRelu
  bool remove_qdq_conv_prelu = false;       // RemoveQDQConvPRelu
  bool remove_qdq_conv_gelu = false;        // RemoveQDQConvGelu: Gelu too
  bool remove_qdq_instance_norm = false;    // RemoveQDQInstanceNorm: InstanceNormalization as a producer too
  // IPULimitationCheck and its Adjust* sub-options (vai_q_onnx; Quark MaxLoopNum). The Align* keys
  // below are shared: on power-of-two plans they are IPULimitationCheck's position rules, on float scales Quark's
  // align_quantize_info.
  struct IpuCheck {
    bool enabled = true;  // IPULimitationCheck (only with enable_dpu)
    bool adjust_shift_cut = true, adjust_shift_bias = true, adjust_shift_read = true, adjust_shift_write = true,
         adjust_hard_sigmoid = true, adjust_shift_swish = true;
    int max_loops = 2;  // vai_q_onnx 1.16 sweeps exactly twice; Quark's MaxLoopNum (5) stops early when nothing changes
  } ipu;
  // Quark's alignment options (unset: the default of the path, see docs/options.md).
  std::optional<bool> align_concat, align_pool, align_pad, align_slice, align_transpose, align_reshape;
  std::optional<bool> align_eltwise_quant_type;  // AlignEltwiseQuantType
  bool adjust_bias_scale = true;                 // AdjustBiasScale
  bool fold_relu = false;                        // FoldRelu (Quark)
  // QuantizeAllOpTypes (Quark's get_static_op_types): every op type of the graph (standard
  // domain) is quantized too; ops without a rule of their own go through the generic one (float
  // inputs and outputs quantized, integer tensors never).
  bool quantize_all_op_types = false;

  // float16 and bfloat16 in ExtendedQuantFormat.QDQ (docs/formats.md). Quark's ActivationScaled and
  // WeightScaled: the range is mapped onto the type's scaled range (bfloat16 [-2, 2], float16
  // [-65504, 65504]) with a scale, instead of a plain cast with scale 1.
  bool activation_scaled = false;
  bool weight_scaled = false;
  // How their Q/DQ pairs are written: by default in standard ops that ONNX Runtime runs (the Cast
  // form of Quark's BF16QDQToCast post-process); FloatQDQAsCustomOps keeps Quark's com.amd.quark
  // ExtendedQuantizeLinear / ExtendedDequantizeLinear, and BF16QDQToCast, when given, decides for
  // bfloat16 alone (Quark's meaning: true the Cast form, false the custom ops).
  bool float_qdq_as_custom_ops = false;  // FloatQDQAsCustomOps (onnxptq)
  std::optional<bool> bf16_qdq_to_cast;  // BF16QDQToCast (Quark)
  bool enable_vaiml_bf16 = false;        // EnableVaimlBF16 (Quark): no bfloat16 casts, rounded float weights
  bool bf16_with_clip = false;           // BF16WithClip (Quark): a Clip to the bfloat16 range first

  // Quark's block formats, the types QBFP and QMX (quant/block_format.h), in ExtendedQuantFormat.QDQ.
  BfpAttributes bfp;
  MxAttributes mx;
  // Set by quant_format VitisQuantFormat.BFPFixNeuron / MXFixNeuron: activations and weights are of
  // this type whatever activation_type and weight_type say, before or after (as in vai_q_onnx and Quark).
  std::optional<ir::DataType> format_block_type;
  bool bfp_given = false, mx_given = false;  // the keys BFPAttributes / MXAttributes were set
  // RefineBlockAxis (Quark): the blocks of MatMul, Gemm and Softmax inputs run along the axis they
  // reduce; unset: on when a block type is asked for.
  std::optional<bool> refine_block_axis;
  // BlockQDQAsStandardOps (onnxptq; the command's --standard-ops): the block nodes written as
  // standard ONNX ops computing the same values (quant/block_standard_ops.h), so that a runtime
  // without Quark's custom ops runs the model.
  bool block_qdq_as_standard_ops = false;

  // enable_npu_transformer (Quark's TransformerQDQQuantizer):
  // the op types default to Quark's NPUTransformerRegistry (Gemm, MatMul), MatMulConstBOnly
  // defaults to true, and ConvertBNToConv, ConvertReduceMeanToGlobalAvgPool, SplitLargeKernelPool
  // and ConvertSplitToSlice (dpu_pass_switches) run before calibration, on the nodes quantized.
  bool enable_npu_transformer = false;

  // Quark's graph pre- and post-processing (its apply_pre_process / apply_post_process). CopySharedInit
  // and CopyBiasInit: initializers (CopyBiasInit: input 2 only) that nodes of these op types share
  // are copied before quantizing, so each node's is quantized on its own; nullopt is Quark's None (off),
  // an empty list every op type. CopyBiasInit applies to 8/16-bit integer types calibrated by one of
  // ONNX Runtime's methods only (MinMax, Entropy, Percentile, Distribution), as in Quark.
  std::optional<std::vector<std::string>> copy_shared_init;
  std::optional<std::vector<std::string>> copy_bias_init = std::vector<std::string>{"Conv", "ConvTranspose", "Gemm"};
  // RemoveQDQMulAdd is RemoveQDQBetweenOps [("Mul", "Add")]: the Q/DQ on a tensor from a node of
  // the first op type read only by a node of the second goes (quant/post_process.h).
  bool remove_qdq_mul_add = false;
  std::vector<std::pair<std::string, std::string>> remove_qdq_between_ops;
  bool int16_bias = false;        // Int16Bias: int32 biases stored as int16 (clipped, as Quark)
  bool dedicate_dq_node = false;  // DedicateDQNode: one DequantizeLinear per reader of the written model

  // optimize_model (the seeds' default): the float model is prepared first (passes::prepare:
  // shapes, opset upgrade to 13, graph optimisation).
  bool optimize_model = true;

  // convert_fp16_to_fp32 (vai_q_onnx's fp16_fp32_convert) and convert_nchw_to_nhwc: the model
  // format conversions of passes/model_format.h, run first; calibration samples are adapted to the
  // converted inputs (calib/adapt_reader.h).
  bool convert_fp16_to_fp32 = false;
  bool convert_nchw_to_nhwc = false;
  // QuantizeFP16 (Quark): a float16 model quantized as one, written with its float16 inputs and
  // outputs (quant/float16_model.h). nullopt: Quark's rule, on for a float16 model unless
  // convert_fp16_to_fp32. UseFP32Scale (Quark, default = QuantizeFP16): the written model computes
  // in float32 between Casts at its inputs and outputs; false: in float16, Q/DQ scales included.
  std::optional<bool> quantize_fp16;
  std::optional<bool> use_fp32_scale;
  // FixShapes (Quark): these graph inputs and outputs take these shapes, and every tensor's shape
  // is stored, before anything else (passes/model_format.h).
  std::map<std::string, std::vector<int64_t>> fix_shapes;

  // The method calibration runs: Int16Scale calibrates with MinMax, and so does NonOverflow with
  // UsePowerOf2Scale false (vai_q_onnx hands NonOverflow to ONNX Runtime's MinMax calibrator and
  // snaps its range in the quantizer; without the snap the range is the extrema).
  calib::Method calibration_method() const {
    if (int16_scale || (!use_power_of_two_scale && calibrate_method == calib::Method::NonOverflow))
      return calib::Method::MinMax;
    return calibrate_method;
  }
  // The calibration options: calib with that method (a NonOverflow calibrated with MinMax keeps its
  // symmetric default).
  calib::CalibOptions calibration_options() const;
  // Power-of-two scales: a power-of-two method, unless UsePowerOf2Scale is false.
  bool power_of_two() const { return calib::is_power_of_two(calibration_method()) && use_power_of_two_scale; }
  bool matmul_const_b_only_on() const { return matmul_const_b_only.value_or(enable_npu_transformer); }
  bool weights_symmetric() const;
  // Whether float16 / bfloat16 Q/DQ are written in the Cast form (standard ops) rather than as
  // custom ops: only ExtendedQuantFormat.QDQ has a Cast form (VitisQuantFormat.QDQ's are vai_q_onnx's ops).
  bool casts_float16() const { return format == QuantFormat::ExtendedQDQ && !float_qdq_as_custom_ops; }
  bool casts_bfloat16() const {
    return format == QuantFormat::ExtendedQDQ &&
           bf16_qdq_to_cast.value_or(enable_vaiml_bf16 || !float_qdq_as_custom_ops);
  }
};

// Error (one line, naming the options) for a combination the seeds reject or onnxptq cannot do.
void check_config(const QuantConfig& config);

// Sets config.fast_finetune from extra_options' FastFinetune value (a JSON object of Quark's keys).
// Error naming a key that is unknown, of the wrong kind, or of a part not built (MemOptLevel 2's
// disk cache, SelectiveUpdate, OutputQDQ, RefModelPath, a device other than the CPU).
void apply_fast_finetune(FastFinetune& fast_finetune, const nlohmann::json& value);

// Sets config.gptq from extra_options' GPTQParams (Bits, BlockSize, GroupSize, PercDamp,
// ActOrder, PerChannel, WeightSymmetric, MSE). Error naming a key that is unknown or of the
// wrong kind or value.
void apply_gptq_params(GptqParams& params, const nlohmann::json& value);

// Whether quantize_static runs a post-quantization algorithm above the quantizer
// (finetune/fast_finetune.h's post_quantization_refiner): UseGPTQ, MatMulNBits' GPTQ,
// BiasCorrection or include_fast_ft.
bool has_post_quantization(const QuantConfig& config);

// The checks of UseGPTQ, GPTQParams and MatMulNBits' GPTQ (part of check_config).
void check_gptq_config(const QuantConfig& config);

// Sets config.matmul_nbits from extra_options' MatMulNBitsParams (Algorithm, GroupSize, Symmetric,
// Bits, AccuracyLevel). Error naming a key that is unknown or of the wrong kind, or a value ONNX
// Runtime's MatMulNBits does not take (HQQ's float zero points with 8 bits, for one).
void apply_matmul_nbits_params(MatMulNBitsParams& params, const nlohmann::json& value);

// The dpu_pass_switches keys enable_npu_transformer takes (Quark turns them on for it in
// its quantize_static): ConvertBNToConv, ConvertReduceMeanToGlobalAvgPool, SplitLargeKernelPool, ConvertSplitToSlice.
bool is_npu_transformer_pass_option(const std::string& key);

// Whether the graph rewrite of dpu_pass_switches' `key` ("ConvertBNToConv") runs: its value when
// set; else, with enable_dpu, its default there (passes/dpu.h), and without it, on for the four
// keys of enable_npu_transformer when that is set (Quark's quantize_static runs the rewrites by
// their keys alone: VINT8 sets them with no NPU flag).
bool rewrite_on(const QuantConfig& config, const std::string& key);

}  // namespace onnxptq::quant
