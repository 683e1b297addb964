#include "quant/quantize.h"

#include <chrono>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "engine/parallel.h"
#include "engine/session.h"
#include "passes/cle.h"
#include "passes/pipeline.h"
#include "onnxptq/error.h"
#include "quant/export.h"

namespace onnxptq::quant {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The element type of every value the first sample computes (value_info is often missing).
std::map<std::string, ir::DataType> value_types(const ir::Model& model, calib::DataReader& reader, int threads) {
  std::optional<calib::Feed> feed = reader.next();
  if (!feed) throw Error("calibration data: " + reader.describe() + " gave no sample");
  if (reader.can_rewind())
    reader.rewind();
  else
    throw Error("calibration data: " + reader.describe() +
                " cannot start over, and the quantizer reads it more than once");
  engine::SessionOptions so;
  so.threads = threads;
  so.hooks_ignore_layout = true;
  for (const auto& node : model.graph->nodes())
    for (const ir::Value* v : node->outputs())
      if (v) so.visible.insert(v->name());
  engine::Session session(model, so);
  std::map<std::string, ir::DataType> types;
  engine::TensorObserver observe = [&](const std::string& name, const ir::Tensor& t) { types[name] = t.dtype(); };
  try {
    session.run(*feed, {&observe});
  } catch (const Error& e) {
    throw Error("calibration sample 0 of " + reader.describe() + ": " + e.what());
  }
  return types;
}

// optimize_model: the preparation passes on a copy, the engine's shape run at the first sample's
// input shapes.
ir::Model prepare_model(const ir::Model& model, calib::DataReader& reader,
                        const std::function<void(const std::string&)>& say) {
  passes::PrepareOptions options;
  if (std::optional<calib::Feed> feed = reader.next()) {
    for (const auto& [name, t] : *feed) options.input_shapes[name] = t.dims();
    if (reader.can_rewind()) reader.rewind();
  }
  ir::Model prepared = ir::clone_model(model);
  for (const std::string& line : passes::prepare(prepared, options).log) say(line);
  return prepared;
}

// include_cle / ReplaceClip6Relu: the data-free rewrites of the float weights, on the nodes the
// quantizer may quantize only.
void equalize(ir::Model& model, const QuantConfig& config, const std::function<void(const std::string&)>& say) {
  passes::CleOptions options = config.cle;
  std::set<std::string> ops(config.op_types_to_quantize.begin(), config.op_types_to_quantize.end());
  if (ops.empty()) ops = default_op_types();
  std::set<std::string> only(config.nodes_to_quantize.begin(), config.nodes_to_quantize.end());
  std::set<std::string> excluded(config.nodes_to_exclude.begin(), config.nodes_to_exclude.end());
  options.quantizable = [ops, only, excluded](const ir::Node& n) {
    return ops.count(n.op_type) && !excluded.count(n.name) && (only.empty() || only.count(n.name));
  };
  passes::PassContext context;
  if (config.include_cle) {
    passes::CleResult result = passes::equalize_cross_layers(model, options, context);
    say("cross-layer equalization: " + std::to_string(result.pairs.size()) + " pairs, " +
        std::to_string(result.sweep_changes.size()) + " sweeps");
  } else {
    passes::replace_clip6_relu(model, context);
  }
  for (const std::string& line : context.log) say(line);
}

bool json_bool(const std::string& key, const nlohmann::json& v) {
  if (!v.is_boolean()) throw Error("extra option " + key + ": expected true or false, got " + v.dump());
  return v.get<bool>();
}

double json_number(const std::string& key, const nlohmann::json& v) {
  if (!v.is_number()) throw Error("extra option " + key + ": expected a number, got " + v.dump());
  return v.get<double>();
}

std::string json_string(const std::string& key, const nlohmann::json& v) {
  if (!v.is_string()) throw Error("option " + key + ": expected a string, got " + v.dump());
  return v.get<std::string>();
}

std::vector<std::string> json_strings(const std::string& key, const nlohmann::json& v) {
  if (!v.is_array()) throw Error("option " + key + ": expected a list of strings, got " + v.dump());
  std::vector<std::string> out;
  for (const auto& e : v) out.push_back(json_string(key, e));
  return out;
}

}  // namespace

void apply_extra_option(QuantConfig& c, const std::string& key, const nlohmann::json& v) {
  if (key == "ActivationSymmetric")
    c.activation_symmetric = json_bool(key, v);
  else if (key == "WeightSymmetric")
    c.weight_symmetric = json_bool(key, v);
  else if (key == "UseUnsignedReLU")
    c.use_unsigned_relu = json_bool(key, v);
  else if (key == "QuantizeBias")
    c.quantize_bias = json_bool(key, v);
  else if (key == "AddQDQPairToWeight")
    c.add_qdq_pair_to_weight = json_bool(key, v);
  else if (key == "DedicatedQDQPair")
    c.dedicated_qdq_pair = json_bool(key, v);
  else if (key == "ForceQuantizeNoInputCheck")
    c.force_quantize_no_input_check = json_bool(key, v);
  else if (key == "MatMulConstBOnly")
    c.matmul_const_b_only = json_bool(key, v);
  else if (key == "UseQDQVitisCustomOps") {
    // True (vai_q_onnx's default) is what VitisQuantFormat.QDQ writes: the com.vai.quantize ops.
    if (!json_bool(key, v))
      throw Error("UseQDQVitisCustomOps false (vai_q_onnx's ai.onnx.contrib int8 QuantizeLinear/DequantizeLinear) "
                  "is not written by onnxptq: VitisQuantFormat.QDQ writes VitisQuantizeLinear/VitisDequantizeLinear");
  } else if (key == "QDQKeepRemovableActivations")
    c.keep_removable_activations = json_bool(key, v);
  else if (key == "OpTypesToExcludeOutputQuantization") {
    std::vector<std::string> ops = json_strings(key, v);
    c.op_types_to_exclude_output_quantization = std::set<std::string>(ops.begin(), ops.end());
  } else if (key == "QDQOpTypePerChannelSupportToAxis") {
    if (!v.is_object()) throw Error("extra option " + key + ": expected {op type: axis}, got " + v.dump());
    for (const auto& [op, axis] : v.items()) {
      if (!axis.is_number_integer()) throw Error("extra option " + key + ": axis of " + op + " must be an integer");
      c.per_channel_axis[op] = axis.get<int64_t>();
    }
  } else if (key == "CalibTensorRangeSymmetric")
    c.calib.symmetric = json_bool(key, v);
  else if (key == "CalibMovingAverage")
    c.calib.moving_average = json_bool(key, v);
  else if (key == "CalibMovingAverageConstant")
    c.calib.averaging_constant = json_number(key, v);
  else if (key == "CalibPercentile")
    c.calib.percentile = json_number(key, v);
  else if (key == "CalibNumBins")
    c.calib.num_bins = static_cast<size_t>(json_number(key, v));
  else if (key == "CalibNumQuantizedBins")
    c.calib.num_quantized_bins = static_cast<size_t>(json_number(key, v));
  else if (key == "CalibWorkerNum")
    c.calib.workers = static_cast<int>(json_number(key, v));
  else if (key == "MinMSEMode")
    c.calib.minmse_mode = json_string(key, v);
  else if (key == "LWPMetric")
    c.calib.lwp_metric = json_string(key, v);
  else if (key == "PercentileCandidates") {
    if (!v.is_array()) throw Error("extra option " + key + ": expected a list of numbers");
    c.calib.percentile_candidates.clear();
    for (const auto& p : v) c.calib.percentile_candidates.push_back(json_number(key, p));
  } else if (key == "RemoveInputInit") {
    c.remove_input_init = json_bool(key, v);
  } else if (key == "RandomDataReaderInputDataRange" || key == "UseRandomData") {
    throw Error("extra option " + key + " is given on the command line (--random, --random-range) in this version");
  } else if (key == "ConvertBNToConv" || key == "ConvertReduceMeanToGlobalAvgPool" || key == "SplitLargeKernelPool" ||
             key == "ConvertSplitToSlice" || key == "FuseInstanceNorm" || key == "FuseL2Norm" ||
             key == "ConvertClipToRelu" || key == "RemoveQDQConvLeakyRelu" || key == "RemoveQDQConvPRelu" ||
             key == "SimulateDPU" || key == "IPULimitationCheck" || key.rfind("Convert", 0) == 0 ||
             key.rfind("Adjust", 0) == 0 || key.rfind("Align", 0) == 0 || key == "UsePowerOf2Scale" ||
             key == "Int16Scale") {
    throw Error("extra option " + key + " belongs to the NPU path (enable_dpu, power-of-two XINT8), not built yet");
  } else if (key == "ReplaceClip6Relu") {
    c.cle.replace_clip6_relu = json_bool(key, v);
  } else if (key == "CLESteps") {
    if (!v.is_number_integer()) throw Error("extra option " + key + ": expected an integer, got " + v.dump());
    c.cle.steps = v.get<int64_t>();
  } else if (key == "CLETotalLayerDiffThreshold") {
    c.cle.total_layer_diff_threshold = json_number(key, v);
  } else if (key == "CLEScaleAppendBias") {
    c.cle.scale_append_bias = json_bool(key, v);
  } else if (key == "CLEScaleUseThreshold") {
    c.cle.scale_use_threshold = json_bool(key, v);
  } else if (key == "CLEWeightThreshold") {
    c.cle.weight_threshold = json_number(key, v);
  } else if (key == "CLEBalanceMethod") {
    c.cle.balance_method = json_string(key, v);
  } else if (key.rfind("FastFinetune", 0) == 0 || key == "FastFinetune") {
    throw Error("extra option " + key + " belongs to fast finetune (AdaRound, AdaQuant), not built yet");
  } else {
    throw Error("unknown extra option '" + key + "'");
  }
}

void apply_config_json(QuantConfig& c, const nlohmann::json& j) {
  if (!j.is_object()) throw Error("the config must be a JSON object");
  for (const auto& [key, v] : j.items()) {
    if (key == "quant_format")
      c.format = parse_quant_format(json_string(key, v));
    else if (key == "calibrate_method")
      c.calibrate_method = calib::parse_method(json_string(key, v));
    else if (key == "activation_type")
      c.activation_type = parse_quant_type(json_string(key, v));
    else if (key == "weight_type")
      c.weight_type = parse_quant_type(json_string(key, v));
    else if (key == "per_channel")
      c.per_channel = json_bool(key, v);
    else if (key == "reduce_range")
      c.reduce_range = json_bool(key, v);
    else if (key == "optimize_model")
      c.optimize_model = json_bool(key, v);
    else if (key == "include_cle")
      c.include_cle = json_bool(key, v);
    else if (key == "op_types_to_quantize")
      c.op_types_to_quantize = json_strings(key, v);
    else if (key == "nodes_to_quantize")
      c.nodes_to_quantize = json_strings(key, v);
    else if (key == "nodes_to_exclude")
      c.nodes_to_exclude = json_strings(key, v);
    else if (key == "input_nodes")
      c.input_nodes = json_strings(key, v);
    else if (key == "output_nodes")
      c.output_nodes = json_strings(key, v);
    else if (key == "execution_providers") {
      for (const std::string& p : json_strings(key, v))
        if (p != "CPUExecutionProvider")
          throw Error("execution provider '" + p +
                      "' is not available: onnxptq runs on its own CPU engine (CPUExecutionProvider)");
    } else if (key == "extra_options") {
      if (!v.is_object()) throw Error("extra_options must be a JSON object");
      for (const auto& [k, value] : v.items()) apply_extra_option(c, k, value);
    } else {
      throw Error("unknown config key '" + key + "'");
    }
  }
}

std::optional<ir::Model> prepare_float_model(const ir::Model& model, calib::DataReader& reader,
                                             const QuantConfig& config,
                                             const std::function<void(const std::string&)>& log,
                                             std::map<std::string, double>* seconds) {
  auto say = [&](const std::string& line) {
    if (log) log(line);
  };
  std::optional<ir::Model> prepared;
  auto start = std::chrono::steady_clock::now();
  std::vector<std::string> input_inits;
  for (const ir::Value* v : model.graph->inputs())
    if (v->has_initializer()) input_inits.push_back(v->name());
  if (config.remove_input_init && !input_inits.empty()) {
    prepared = ir::clone_model(model);
    for (const std::string& name : input_inits) prepared->graph->remove_input(prepared->graph->find_value(name));
    say("RemoveInputInit: " + std::to_string(input_inits.size()) + " graph inputs that are initializers are weights");
  }
  if (config.optimize_model) {
    prepared = prepare_model(prepared ? *prepared : model, reader, say);
    if (seconds) (*seconds)["prepare"] = seconds_since(start);
    start = std::chrono::steady_clock::now();
  }
  if (config.include_cle || config.cle.replace_clip6_relu) {
    if (!prepared) prepared = ir::clone_model(model);
    equalize(*prepared, config, say);
    if (seconds) (*seconds)["cle"] = seconds_since(start);
  }
  return prepared;
}

Plan plan_quantization(const ir::Model& model, calib::DataReader& reader, const QuantConfig& config) {
  // A prepared model (shape inference) types every value: no run needed to learn them.
  std::map<std::string, ir::DataType> types;
  bool all_typed = true;
  for (const auto& node : model.graph->nodes())
    for (const ir::Value* v : node->outputs())
      if (v) {
        if (v->type.is_tensor() && v->type.elem_type != ir::DataType::Undefined)
          types[v->name()] = v->type.elem_type;
        else
          all_typed = false;
      }
  if (all_typed) return make_plan(model, config, types);
  int threads = config.calib.threads > 0 ? config.calib.threads : engine::hardware_threads();
  return make_plan(model, config, value_types(model, reader, threads));
}

QuantizeResult quantize_static(const ir::Model& float_model, calib::DataReader& reader, const QuantConfig& config,
                               const std::function<void(const std::string&)>& log) {
  check_config(config);
  auto say = [&](const std::string& line) {
    if (log) log(line);
  };
  size_t warned = 0;  // the plan's warnings said so far (planning and parameters add some)
  auto say_warnings = [&](const Plan& plan) {
    for (; warned < plan.warnings.size(); ++warned) say("warning: " + plan.warnings[warned]);
  };
  QuantizeResult r;
  r.prepared = prepare_float_model(float_model, reader, config, log, &r.seconds);
  auto start = std::chrono::steady_clock::now();
  const ir::Model& model = r.prepared ? *r.prepared : float_model;
  r.plan = plan_quantization(model, reader, config);
  say_warnings(r.plan);
  r.seconds["plan"] = seconds_since(start);

  start = std::chrono::steady_clock::now();
  calib::CalibOptions calib = config.calib;
  calib.method = config.calibrate_method;
  if (config.power_of_two()) calib.activation_type = config.activation_type;
  if (!calib.log) calib.log = log;
  std::vector<std::string> tensors = r.plan.tensors_to_calibrate();
  say("calibrating " + std::to_string(tensors.size()) + " tensors with " + calib::method_name(calib.method));
  r.calibration = calib::calibrate(model, tensors, reader, calib);
  r.seconds["calibrate"] = seconds_since(start);

  start = std::chrono::steady_clock::now();
  assign_parameters(r.plan, model, config, r.calibration);
  say_warnings(r.plan);
  r.seconds["parameters"] = seconds_since(start);

  start = std::chrono::steady_clock::now();
  r.model = export_model(model, r.plan, config);
  r.seconds["export"] = seconds_since(start);
  return r;
}

namespace {

std::map<std::string, int> quantized_by_op_type(const ir::Model& model, const Plan& plan) {
  std::set<std::string> quantized(plan.quantized_nodes.begin(), plan.quantized_nodes.end());
  std::map<std::string, int> counts;
  for (const auto& node : model.graph->nodes())
    if (quantized.count(node->name)) ++counts[node->op_type];
  return counts;
}

}  // namespace

std::string summary(const ir::Model& float_model, const QuantizeResult& r) {
  std::ostringstream out;
  out << "quantized nodes by op type:";
  for (const auto& [op, n] : quantized_by_op_type(r.prepared ? *r.prepared : float_model, r.plan)) out << " " << op << " " << n << ",";
  out.seekp(-1, std::ios_base::cur);
  out << "\n";
  std::map<std::string, int> reasons;
  for (const auto& [node, why] : r.plan.float_nodes) ++reasons[why];
  if (!reasons.empty()) {
    out << "nodes left in float:";
    for (const auto& [why, n] : reasons) out << " " << n << " (" << why << ")";
    out << "\n";
  }
  out << "time:";
  for (const char* phase : {"prepare", "cle", "plan", "calibrate", "parameters", "export"})
    if (r.seconds.count(phase))
      out << " " << phase << " " << std::fixed << std::setprecision(2) << r.seconds.at(phase) << " s";
  out << "\n";
  return out.str();
}

nlohmann::json report(const ir::Model& float_model, const QuantizeResult& r) {
  nlohmann::json j;
  j["quantized_nodes_by_op_type"] = quantized_by_op_type(r.prepared ? *r.prepared : float_model, r.plan);
  j["float_nodes"] = r.plan.float_nodes;
  j["removed_activations"] = r.plan.removed_activations;
  j["seconds"] = r.seconds;
  j["calibration"] = {{"samples", r.calibration.samples},
                      {"skipped_samples", r.calibration.skipped},
                      {"passes", r.calibration.passes},
                      {"tensors", r.calibration.ranges.size()}};
  j["warnings"] = r.plan.warnings;
  return j;
}

}  // namespace onnxptq::quant
