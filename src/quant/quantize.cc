#include "quant/quantize.h"

#include <chrono>
#include <optional>
#include <set>

#include "calib/adapt_reader.h"
#include "engine/parallel.h"
#include "engine/session.h"
#include "onnxptq/error.h"
#include "passes/cle.h"
#include "passes/dedicate.h"
#include "passes/dpu.h"
#include "passes/model_format.h"
#include "passes/onnx_bridge.h"
#include "passes/pipeline.h"
#include "passes/unique_subgraph_names.h"
#include "quant/align_float.h"
#include "quant/block_standard_ops.h"
#include "quant/dpu_plan.h"
#include "quant/dynamic_quant.h"
#include "quant/export.h"
#include "quant/float16_model.h"
#include "quant/ipu_limitation.h"
#include "quant/matmul_nbits.h"
#include "quant/node_selection.h"
#include "quant/post_process.h"
#include "quant/quarot.h"
#include "quant/smooth_quant.h"

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
    session.run_for_hooks(*feed, {&observe});
  } catch (const Error& e) {
    throw Error("calibration sample 0 of " + reader.describe() + ": " + e.what(), e.kind());
  }
  return types;
}

// The ranges of `tensors`: those `known` has (or knows to be never finite) as they are, the
// others calibrated now and added to `known`. A tensor's range depends on its own values only,
// so this gives what calibrating them all at once gives.
calib::CalibrationResult calibrate_missing(const ir::Model& model, const std::vector<std::string>& tensors,
                                           calib::DataReader& reader, const calib::CalibOptions& options,
                                           calib::CalibrationResult& known,
                                           const std::function<void(const std::string&)>& say) {
  std::set<std::string> non_finite(known.non_finite.begin(), known.non_finite.end());
  std::set<std::string> never(known.never_computed.begin(), known.never_computed.end());
  std::vector<std::string> missing;
  for (const std::string& t : tensors)
    if (!known.ranges.count(t) && !non_finite.count(t) && !never.count(t)) missing.push_back(t);
  if (!missing.empty()) {
    say("calibrating " + std::to_string(missing.size()) + " tensors with " + calib::method_name(options.method));
    calib::CalibrationResult found = calib::calibrate(model, missing, reader, options);
    known.ranges.insert(found.ranges.begin(), found.ranges.end());
    known.non_finite.insert(known.non_finite.end(), found.non_finite.begin(), found.non_finite.end());
    known.never_computed.insert(known.never_computed.end(), found.never_computed.begin(), found.never_computed.end());
    known.samples = found.samples;
    known.skipped = found.skipped;
    known.passes += found.passes;
  }
  calib::CalibrationResult r;
  r.samples = known.samples;
  r.skipped = known.skipped;
  r.passes = missing.empty() ? 0 : known.passes;
  non_finite.insert(known.non_finite.begin(), known.non_finite.end());
  never.insert(known.never_computed.begin(), known.never_computed.end());
  for (const std::string& t : tensors) {
    auto it = known.ranges.find(t);
    if (it != known.ranges.end())
      r.ranges.insert(*it);
    else if (non_finite.count(t))
      r.non_finite.push_back(t);
    else if (never.count(t))
      r.never_computed.push_back(t);
  }
  return r;
}

// Whether the plan has tensors `calibration` did not calibrate (it has a range of each other one,
// or knows it never finite or never computed).
bool needs_calibration(const Plan& plan, const calib::CalibrationResult& calibration) {
  std::set<std::string> known(calibration.non_finite.begin(), calibration.non_finite.end());
  known.insert(calibration.never_computed.begin(), calibration.never_computed.end());
  for (const std::string& t : plan.tensors_to_calibrate())
    if (!calibration.ranges.count(t) && !known.count(t)) return true;
  return false;
}

// The nodes of the If/Loop/Scan bodies no calibration sample ran (a tensor of the plan computed
// in them was never computed), with the bodies in `bodies`.
std::set<std::string> nodes_of_bodies_not_run(const Plan& plan, const ir::Model& model,
                                              const calib::CalibrationResult& calibration,
                                              std::vector<const ir::Graph*>& bodies) {
  const std::set<std::string> never(calibration.never_computed.begin(), calibration.never_computed.end());
  std::set<const ir::Graph*> unrun;
  for (const std::string& t : plan.tensors_to_calibrate()) {
    if (!never.count(t)) continue;
    const ir::Value* v = model.graph->find_value_nested(t);
    if (v && v->graph() != model.graph.get()) unrun.insert(v->graph());
  }
  bodies.assign(unrun.begin(), unrun.end());
  std::set<std::string> nodes;
  for (const ir::Graph* body : bodies)
    for (const ir::Node* n : body->topological_order_with_bodies()) nodes.insert(n->name);
  return nodes;
}

// The type each calibrated tensor's power-of-two position is for: that of the first plan entry
// taking its range (its own, or a Relu/Clip output's).
std::map<std::string, ir::DataType> calibration_types(const Plan& plan) {
  std::map<std::string, ir::DataType> types;
  for (const TensorPlan& t : plan.tensors) {
    types.emplace(t.name, t.type);
    if (!t.range_from.empty()) types.emplace(t.range_from, t.type);
  }
  return types;
}

void merge_calibration(calib::CalibrationResult& into, calib::CalibrationResult&& part) {
  into.ranges.merge(part.ranges);
  into.non_finite.insert(into.non_finite.end(), part.non_finite.begin(), part.non_finite.end());
  into.never_computed.insert(into.never_computed.end(), part.never_computed.begin(), part.never_computed.end());
  into.samples = part.samples;
  into.skipped = part.skipped;
  into.passes += part.passes;
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

// The nodes the quantizer may quantize, by op type and name (what the float-weight rewrites touch).
std::function<bool(const ir::Node&)> quantizable_nodes(const ir::Model& model, const QuantConfig& config) {
  std::set<std::string> ops = quantized_op_types(config, *model.graph);
  std::set<std::string> only(config.nodes_to_quantize.begin(), config.nodes_to_quantize.end());
  std::set<std::string> excluded = named_exclusions(*model.graph, config);
  return [ops, only, excluded](const ir::Node& n) {
    return ops.count(n.op_type) && !excluded.count(n.name) && (only.empty() || only.count(n.name));
  };
}

// include_cle / ReplaceClip6Relu: the data-free rewrites of the float weights, on the nodes the
// quantizer may quantize only.
void equalize(ir::Model& model, const QuantConfig& config, const std::function<void(const std::string&)>& say) {
  passes::CleOptions options = config.cle;
  options.quantizable = quantizable_nodes(model, config);
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

// The on/off of every graph rewrite of the enable_dpu lists (rewrite_on).
std::map<std::string, bool> rewrite_switches(const QuantConfig& config) {
  std::map<std::string, bool> out;
  for (const passes::DpuPassOption& o : passes::dpu_pass_options()) out[o.option] = rewrite_on(config, o.option);
  return out;
}

bool any_rewrite(const QuantConfig& config) {
  if (config.enable_dpu) return true;
  for (const auto& [key, on] : rewrite_switches(config))
    if (on) return true;
  return false;
}

// Quark's CopySharedInit, then CopyBiasInit (its apply_pre_process, after RemoveInputInit), on
// `prepared` (a copy of `model` made when needed).
void copy_shared_initializers(std::optional<ir::Model>& prepared, const ir::Model& model, const QuantConfig& config,
                              const std::function<void(const std::string&)>& say) {
  auto integer = [](ir::DataType t) {
    return t == ir::DataType::Int8 || t == ir::DataType::UInt8 || t == ir::DataType::Int16 || t == ir::DataType::UInt16;
  };
  // Quark copies biases only for its integer types with one of ONNX Runtime's CalibrationMethods.
  const calib::Method m = config.calibrate_method;
  const bool ort_method = m == calib::Method::MinMax || m == calib::Method::Entropy || m == calib::Method::Percentile ||
                          m == calib::Method::Distribution;
  const bool copy_biases =
      config.copy_bias_init && integer(config.weight_type) && integer(config.activation_type) && ort_method;
  if (!config.copy_shared_init && !copy_biases) return;
  ir::Model copy = ir::clone_model(prepared ? *prepared : model);
  passes::PassContext context;
  bool changed = false;
  if (config.copy_shared_init)
    changed = passes::copy_shared_initializers(copy, *config.copy_shared_init, false, context) || changed;
  if (copy_biases) changed = passes::copy_shared_initializers(copy, *config.copy_bias_init, true, context) || changed;
  for (const std::string& line : context.log) say(line);
  if (changed) prepared = std::move(copy);
}

}  // namespace

std::unique_ptr<calib::DataReader> adapted_reader(calib::DataReader& reader, const ir::Model& model,
                                                  const QuantConfig& config) {
  if (!widens_float16(config) && !config.convert_nchw_to_nhwc) return nullptr;
  calib::FeedAdaptation adaptation{.widen_float16 = widens_float16(config),
                                   .nchw_to_nhwc = config.convert_nchw_to_nhwc};
  return calib::adapt_reader(reader, model.graph->fed_inputs(), adaptation);
}

std::unique_ptr<calib::DataReader> random_data_reader(const ir::Model& model, const QuantConfig& config) {
  if (!config.use_random_data) return nullptr;
  return calib::make_random_reader(model.graph->fed_inputs(), config.random_data);
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
  const int64_t opset = model.opset("");
  if (config.convert_opset_version && *config.convert_opset_version != opset) {  // first, as Quark's pre-process
    passes::PassContext context;
    context.target_opset = *config.convert_opset_version;
    if (opset < context.target_opset) {
      prepared = ir::clone_model(model);
      passes::upgrade_opset(*prepared, context);
    } else {
      prepared = passes::onnx_convert_version(model, context.target_opset);
      context.log.push_back("ConvertOpsetVersion: opset " + std::to_string(opset) + " -> " +
                            std::to_string(context.target_opset) + " by libonnx's version converter");
    }
    for (const std::string& line : context.log) say(line);
  }
  if (!config.fix_shapes.empty()) {  // FixShapes, before the models' passes
    if (!prepared) prepared = ir::clone_model(model);
    passes::PassContext context;
    passes::fix_shapes(*prepared, config.fix_shapes, context);
    for (const std::string& line : context.log) say(line);
  }
  if (widens_float16(config) || config.convert_nchw_to_nhwc) {  // first, as vai_q_onnx's quantize_static
    if (!prepared) prepared = ir::clone_model(model);
    passes::PassContext context;
    if (widens_float16(config)) passes::convert_fp16_to_fp32(*prepared, context);
    if (config.convert_nchw_to_nhwc) passes::convert_nchw_to_nhwc(*prepared, context);
    for (const std::string& line : context.log) say(line);
  }
  std::vector<std::string> input_inits;
  for (const ir::Value* v : (prepared ? *prepared : model).graph->inputs())
    if (v->has_initializer()) input_inits.push_back(v->name());
  if (config.remove_input_init && !input_inits.empty()) {
    if (!prepared) prepared = ir::clone_model(model);
    for (const std::string& name : input_inits) prepared->graph->remove_input(prepared->graph->find_value(name));
    say("RemoveInputInit: " + std::to_string(input_inits.size()) + " graph inputs that are initializers are weights");
  }
  copy_shared_initializers(prepared, model, config, say);
  if (config.optimize_model) {
    std::unique_ptr<calib::DataReader> adapted = adapted_reader(reader, prepared ? *prepared : model, config);
    prepared = prepare_model(prepared ? *prepared : model, adapted ? *adapted : reader, say);
    if (seconds) (*seconds)["prepare"] = seconds_since(start);
    start = std::chrono::steady_clock::now();
  }
  // Quark's dynamic path (use_dynamic_quant) runs no cross-layer equalization.
  if ((config.include_cle || config.cle.replace_clip6_relu) && !config.use_dynamic_quant) {
    if (!prepared) prepared = ir::clone_model(model);
    equalize(*prepared, config, say);
    if (seconds) (*seconds)["cle"] = seconds_since(start);
  }
  if (config.include_sq) {  // Quark: after CLE, before calibration
    start = std::chrono::steady_clock::now();
    if (!prepared) prepared = ir::clone_model(model);
    if (!reader.can_rewind())
      throw Error("include_sq: SmoothQuant reads the calibration data before calibration, and " + reader.describe() +
                  " cannot start over");
    reader.rewind();
    std::unique_ptr<calib::DataReader> adapted = adapted_reader(reader, *prepared, config);
    smooth_quant(*prepared, adapted ? *adapted : reader, config, quantizable_nodes(*prepared, config), say);
    reader.rewind();
    if (seconds) (*seconds)["smooth_quant"] = seconds_since(start);
  }
  if (config.include_rotation) {  // Quark: after SmoothQuant, before calibration
    start = std::chrono::steady_clock::now();
    if (!prepared) prepared = ir::clone_model(model);
    // The float model's outputs on the first sample, which the rotated model must still give.
    std::optional<Feed> first;
    std::vector<ir::Tensor> before;
    if (reader.can_rewind()) {
      reader.rewind();
      std::unique_ptr<calib::DataReader> adapted = adapted_reader(reader, *prepared, config);
      first = (adapted ? *adapted : reader).next();
      reader.rewind();
      engine::SessionOptions so;
      so.threads = config.calib.threads;
      if (first) before = engine::Session(*prepared, so).run(*first);
    }
    rotate_r1(*prepared, config.rotation, say);
    if (first) check_rotation_kept_function(*prepared, *first, before, config.rotation, config.calib.threads);
    if (seconds) (*seconds)["rotation"] = seconds_since(start);
  }
  if (any_rewrite(config)) {  // as vai_q_onnx's optimize.py and Quark's rewrites, on the nodes quantized
    start = std::chrono::steady_clock::now();
    if (!prepared) prepared = ir::clone_model(model);
    passes::PassContext context = dpu_pass_context(*prepared, config);
    passes::run_dpu_passes(passes::dpu_pre_calibration_passes(), *prepared, rewrite_switches(config), context);
    for (const std::string& line : context.log) say(line);
    if (seconds) (*seconds)["dpu"] = seconds_since(start);
  }
  // Last: the plan and calibration key tensors by name, across the bodies too.
  if (quantizes_subgraphs(config) && !(prepared ? *prepared : model).graph->nested_graphs().empty()) {
    if (!prepared) prepared = ir::clone_model(model);
    passes::PassContext context;
    passes::unique_subgraph_names(*prepared, context);
    for (const std::string& line : context.log) say(line);
  }
  return prepared;
}

Plan plan_quantization(const ir::Model& model, calib::DataReader& reader, const QuantConfig& config) {
  // A prepared model (shape inference) types every value: no run needed to learn them.
  std::map<std::string, ir::DataType> types;
  bool all_typed = true;
  std::vector<ir::Graph*> graphs = model.graph->nested_graphs();  // If/Loop/Scan bodies' values too
  graphs.insert(graphs.begin(), model.graph.get());
  for (const ir::Graph* g : graphs)
    for (const auto& node : g->nodes())
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
                               const std::function<void(const std::string&)>& log, const PlanRefiner& refine,
                               const KnownRanges* given) {
  check_config(config);
  QuantizeResult r;
  r.prepared = prepare_float_model(float_model, reader, config, log, &r.seconds);
  quantize_prepared(r, float_model, reader, config, log, nullptr, true, refine, given);
  return r;
}

void quantize_prepared(QuantizeResult& r, const ir::Model& float_model, calib::DataReader& reader,
                       const QuantConfig& config, const std::function<void(const std::string&)>& log,
                       RangeCache* known_ranges, bool with_export, const PlanRefiner& refine,
                       const KnownRanges* given) {
  if (has_post_quantization(config) && !refine)
    throw Error(std::string(config.include_fast_ft   ? "include_fast_ft"
                            : config.bias_correction ? "BiasCorrection"
                            : config.use_gptq        ? "UseGPTQ"
                                                     : "MatMulNBitsParams Algorithm GPTQ") +
                ": the post-quantization algorithms run above the quantizer (finetune/fast_finetune.h), which this "
                "caller did not give");
  auto say = [&](const std::string& line) {
    if (log) log(line);
  };
  size_t warned = 0;  // the plan's warnings said so far (planning and parameters add some)
  auto say_warnings = [&](const Plan& plan) {
    for (; warned < plan.warnings.size(); ++warned) say("warning: " + plan.warnings[warned]);
  };
  auto start = std::chrono::steady_clock::now();
  const ir::Model& model = r.prepared ? *r.prepared : float_model;
  if (config.use_dynamic_quant) {  // ORT's quantize_dynamic (Quark: use_dynamic_quant): no calibration, no Q/DQ
    r.plan = Plan{};
    if (!with_export) return;
    // DynamicQuantizeLinear begins at opset 11: an older model is converted (ONNX Runtime's
    // quantize_dynamic moves a model below opset 10 to 11 too, by its opset number alone).
    std::optional<ir::Model> upgraded;
    if (model.opset("") < 11) {
      upgraded = ir::clone_model(model);
      passes::PassContext context;
      context.target_opset = 11;
      passes::upgrade_opset(*upgraded, context);
      say("use_dynamic_quant: opset " + std::to_string(model.opset("")) +
          " converted to 11, where DynamicQuantizeLinear begins");
    }
    DynamicQuantResult written = write_dynamic_quant(upgraded ? *upgraded : model, config);
    for (const std::string& w : written.warnings) say("warning: " + w);
    say("use_dynamic_quant: " + std::to_string(written.quantized_nodes.size()) +
        " nodes to MatMulInteger / ConvInteger, activations by DynamicQuantizeLinear (uint8), weights " +
        quant_type_name(config.weight_type) + (config.per_channel ? " per channel" : " per tensor"));
    r.plan.quantized_nodes = std::move(written.quantized_nodes);
    r.model = std::move(written.model);
    r.seconds["export"] = seconds_since(start);
    return;
  }
  if (config.use_matmul_nbits) {  // Quark's MatMulNBits path: no calibration, no Q/DQ
    r.plan = Plan{};
    const bool gptq = config.matmul_nbits.algorithm == "GPTQ", hqq = config.matmul_nbits.algorithm == "HQQ";
    if (gptq) {  // the weights rounded by GPTQ above the quantizer (finetune/gptq.h), from the float model's inputs
      r.plan = matmul_nbits_plan(model, config);
      r.seconds["plan"] = seconds_since(start);
      start = std::chrono::steady_clock::now();
      reader.rewind();
      r.finetuned = refine(r.plan, model, reader);
      r.seconds["finetune"] = seconds_since(start);
      start = std::chrono::steady_clock::now();
    }
    if (!with_export) return;
    MatMulNBitsResult written = write_matmul_nbits(model, config, gptq ? &r.plan : nullptr);
    say("UseMatMulNBits: " + std::to_string(written.quantized_nodes.size()) + " MatMuls to MatMulNBits (" +
        std::to_string(config.matmul_nbits.bits) + "-bit, block " + std::to_string(config.matmul_nbits.group_size) +
        (hqq ? ", HQQ, float zero points)"
             : std::string(config.matmul_nbits.symmetric ? ", symmetric" : ", asymmetric") + (gptq ? ", GPTQ)" : ")")));
    r.plan.quantized_nodes = std::move(written.quantized_nodes);
    r.model = std::move(written.model);
    r.seconds["export"] = seconds_since(start);
    return;
  }
  // Samples for the converted model's inputs (convert_fp16_to_fp32, convert_nchw_to_nhwc).
  std::unique_ptr<calib::DataReader> adapted = adapted_reader(reader, model, config);
  calib::DataReader& data = adapted ? *adapted : reader;
  r.plan = plan_quantization(model, data, config);
  say_warnings(r.plan);
  r.seconds["plan"] = seconds_since(start);

  start = std::chrono::steady_clock::now();
  // The plan's ranges, calibrated (or taken from `given`) into r.calibration.
  auto calibrate_plan = [&] {
    calib::CalibOptions calib = config.calibration_options();
    const bool pof2_calibration = calib::is_power_of_two(calib.method);
    if (pof2_calibration) calib.activation_type = config.activation_type;
    if (!calib.log) calib.log = log;
    // Power-of-two positions depend on the type: one calibration per activation type of the plan
    // (mixed precision); ranges of float scales do not.
    std::map<ir::DataType, std::vector<std::string>> groups;
    const std::map<std::string, ir::DataType> types = calibration_types(r.plan);
    for (const std::string& t : r.plan.tensors_to_calibrate())
      groups[pof2_calibration ? types.at(t) : calib.activation_type].push_back(t);
    // Still one run when nothing is calibrated (block formats): a model that cannot run is an error
    // here. A block type has no integer range for power-of-two positions, and none is computed.
    if (groups.empty()) groups[quant_type_is_block(calib.activation_type) ? ir::DataType::Int8 : calib.activation_type];
    r.calibration = {};
    if (given) {
      check_known_ranges(*given, model, config);
      size_t count = 0;
      for (const auto& [type, tensors] : groups) count += tensors.size();
      say("ranges of " + std::to_string(count) + " tensors from " + given->source + " (not calibrated)");
    }
    if (groups.size() > 1 && !data.can_rewind() && !given)
      throw Error("mixed precision with power-of-two scales calibrates once per type, and " + data.describe() +
                  " cannot start over");
    for (const auto& [type, tensors] : groups) {
      calib.activation_type = type;
      calib::CalibrationResult found;
      if (given) {  // float-scale ranges hold for any type; power-of-two ones are for the file's
        found = take_known_ranges(*given, tensors, config.power_of_two() ? type : given->activation_type);
        merge_calibration(r.calibration, std::move(found));
        continue;
      }
      if (type != groups.begin()->first) data.rewind();
      if (known_ranges) {
        calib::CalibrationResult& known = (*known_ranges)[pof2_calibration ? type : ir::DataType::Undefined];
        found = calibrate_missing(model, tensors, data, calib, known, say);
      } else {
        say("calibrating " + std::to_string(tensors.size()) + " tensors with " + calib::method_name(calib.method) +
            (groups.size() > 1 ? std::string(" for ") + quant_type_name(type) : ""));
        found = calib::calibrate(model, tensors, data, calib);
      }
      merge_calibration(r.calibration, std::move(found));
    }
  };
  calibrate_plan();
  // A body calibration never ran (an If branch not taken, a Loop of no iteration) has no ranges:
  // its nodes stay float, said in a warning; a new plan may need a range the first did not.
  QuantConfig plan_config = config;
  for (;;) {
    std::vector<const ir::Graph*> bodies;
    std::set<std::string> unrun = nodes_of_bodies_not_run(r.plan, model, r.calibration, bodies);
    if (unrun.empty()) break;
    plan_config.nodes_to_exclude.insert(plan_config.nodes_to_exclude.end(), unrun.begin(), unrun.end());
    if (data.can_rewind()) data.rewind();
    r.plan = plan_quantization(model, data, plan_config);
    std::string names;
    for (const ir::Graph* b : bodies) names += (names.empty() ? "'" : ", '") + b->name + "'";
    r.plan.warnings.push_back("EnableSubgraph: " + std::to_string(unrun.size()) + " nodes stay float in " +
                              std::to_string(bodies.size()) + " bodies no calibration sample ran (" + names + ")");
    say_warnings(r.plan);
    if (!needs_calibration(r.plan, r.calibration)) break;
    if (!data.can_rewind())
      throw Error(
          "EnableSubgraph: the plan without the bodies calibration never ran needs ranges of other tensors, "
          "and " +
          data.describe() + " cannot start over");
    data.rewind();
    calibrate_plan();
  }
  r.seconds["calibrate"] = seconds_since(start);

  if (any_rewrite(config)) {  // after calibration, as vai_q_onnx, on a copy; r.prepared (so `model`) becomes it
    start = std::chrono::steady_clock::now();
    ir::Model dpu = ir::clone_model(model);
    passes::PassContext context = dpu_pass_context(dpu, config);
    const std::map<std::string, bool> switches = rewrite_switches(config);
    if (!passes::run_dpu_passes(passes::dpu_post_calibration_passes(), dpu, switches, context).empty()) {
      // ConvertClipToRelu: the plan of the Relu model, which may read the first sample again.
      if (data.can_rewind()) data.rewind();
      r.plan = plan_quantization(dpu, data, plan_config);
    }
    if (config.enable_dpu) {
      size_t fused = fuse_annotated_activations(r.plan, dpu, config);
      say("enable_dpu: " + std::to_string(fused) +
          " tensors between an annotated producer and its activation lose their Q/DQ");
      say_warnings(r.plan);
      if (config.simulate_dpu) passes::run_dpu_passes(passes::dpu_simulation_passes(), dpu, switches, context);
    }
    for (const std::string& line : context.log) say(line);
    *r.prepared = std::move(dpu);
    r.seconds["dpu"] += seconds_since(start);
  }

  start = std::chrono::steady_clock::now();
  assign_parameters(r.plan, model, config, r.calibration);
  say_warnings(r.plan);
  // Quark's align_quantize_info (refine.py); power-of-two plans on the NPU path get the IPU check's rules.
  if (!(config.enable_dpu && config.power_of_two())) {
    std::map<std::string, int> aligned;
    for (const AlignChange& c : align_float_scales(r.plan, model, config)) ++aligned[c.rule];
    for (const auto& [rule, n] : aligned) say(rule + ": " + std::to_string(n) + " parameters changed");
    say_warnings(r.plan);
  }
  if (config.enable_dpu && config.ipu.enabled && config.power_of_two())  // as vai_q_onnx: after SimulateDPU
    for (const std::string& line : ipu_limitation_log(apply_ipu_limitations(r.plan, model, config), config)) say(line);
  if (size_t n = remove_qdq_between_ops(r.plan, model, config)) {  // Quark: before its post-quantization algorithms
    say("RemoveQDQMulAdd / RemoveQDQBetweenOps: " + std::to_string(n) + " tensors lose their Q/DQ");
    say_warnings(r.plan);
  }
  r.seconds["parameters"] = seconds_since(start);

  if (has_post_quantization(config)) {
    start = std::chrono::steady_clock::now();
    data.rewind();
    r.finetuned = refine(r.plan, model, data);
    r.seconds["finetune"] = seconds_since(start);
  }

  if (config.int16_bias) {
    say("Int16Bias: " + std::to_string(convert_biases_to_int16(r.plan, model)) + " int32 biases stored as int16");
    say_warnings(r.plan);
  }

  if (!with_export) return;
  start = std::chrono::steady_clock::now();
  r.model = export_model(model, r.plan, config);
  if (config.dedicate_dq_node) {  // Quark's last post-process: numbers unchanged, so on the written model only
    passes::PassContext context;
    passes::dedicate_dq_nodes(r.model, context);
    for (const std::string& line : context.log) say(line);
  }
  if (config.block_qdq_as_standard_ops)
    say("BlockQDQAsStandardOps: " + std::to_string(write_block_nodes_in_standard_ops(r.model)) +
        " block nodes written in standard ops");
  r.seconds["export"] = seconds_since(start);
}

}  // namespace onnxptq::quant
