#include "accuracy/auto_mixprecision.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "accuracy/sensitivity.h"
#include "finetune/fast_finetune.h"
#include "ir/file_io.h"
#include "onnxptq/error.h"
#include "quant/export.h"
#include "quant/simulate.h"

namespace onnxptq::accuracy {

namespace {

std::string number(double v) {
  std::ostringstream out;
  out << std::setprecision(4) << v;
  return out.str();
}

class AutoMix {
 public:
  AutoMix(const ir::Model& model, DataReader& reader, const quant::QuantConfig& config,
          const EvaluateFunction& evaluate, const std::filesystem::path& work_dir,
          const std::function<void(const std::string&)>& log)
      : model_(model),
        reader_(reader),
        config_(config),
        a_(config.auto_mp),
        evaluate_(evaluate),
        work_dir_(work_dir),
        log_(log) {}

  AutoMixResult run() {
    quant::check_config(config_);
    if (a_.top1_acc_target.has_value() != static_cast<bool>(evaluate_))
      throw Error(a_.top1_acc_target ? "AutoMixprecision.Top1AccTarget needs an evaluate function (EvaluateFunction "
                                       "in Python, --evaluate-command on the command line)"
                                     : "an evaluate function for AutoMixprecision needs Top1AccTarget");
    r_.metric = evaluate_ ? "top1 loss" : "l2";
    r_.target = evaluate_ ? *a_.top1_acc_target : a_.l2_target;
    reader_.rewind();
    prepared_ = quant::prepare_float_model(model_, reader_, config_);
    const ir::Model& prepared = prepared_ ? *prepared_ : model_;
    if (evaluate_) {
      std::filesystem::path path = work_dir_ / "float.onnx";
      ir::save_model(model_, path);
      float_metric_ = evaluate_(path, "the float model");
      std::filesystem::remove(path);
      say("AutoMixprecision: the float model scores " + number(float_metric_));
    } else {
      reference_ =
          prepared_reference_outputs(prepared, reader_, config_, a_.output_index, a_.data_size, config_.calib.threads);
    }

    quant::QuantizeResult base = quantize(config_, false);
    std::vector<std::string> candidates = candidates_of(base);
    say("AutoMixprecision: " + std::to_string(candidates.size()) + " candidate nodes, base " + r_.metric + " " +
        number(loss_of(base, config_, "the base model")));
    const ProgressFunction& progress = config_.calib.progress;
    for (const std::string& node : candidates) {
      if (progress) progress({"AutoMixprecision", "candidates", r_.candidates.size(), candidates.size()});
      quant::QuantConfig c = with_converted({node});
      // AutoMixUseFastFT: the node converted is finetuned before it is measured.
      std::set<std::string> finetuned;
      if (a_.use_fast_ft) finetuned.insert(node);
      r_.candidates.push_back({node, loss_of(quantize(c, false, finetuned), c, node + " alone"), false});
    }
    if (progress) progress({"AutoMixprecision", "candidates", candidates.size(), candidates.size()});
    std::stable_sort(r_.candidates.begin(), r_.candidates.end(),
                     [](const auto& x, const auto& y) { return x.alone < y.alone; });

    std::vector<std::string> converted;
    for (AutoMixResult::Candidate& candidate : r_.candidates) {
      if (a_.num_target && converted.size() >= a_.num_target) {
        r_.stop_reason = "NumTarget (" + std::to_string(a_.num_target) + ") nodes converted";
        break;
      }
      if (progress) progress({"AutoMixprecision, converting", "nodes", converted.size(), candidates.size()});
      converted.push_back(candidate.node);
      quant::QuantConfig c = with_converted(converted);
      double loss = loss_of(quantize(c, false), c, std::to_string(converted.size()) + " nodes converted");
      say("AutoMixprecision: " + candidate.node + " converted: " + r_.metric + " " + number(loss));
      if (loss > r_.target) {
        converted.pop_back();
        r_.stop_reason = "converting " + candidate.node + " would take the " + r_.metric + " to " + number(loss) +
                         ", past the target " + number(r_.target);
        break;
      }
      candidate.converted = true;
      r_.loss = loss;
    }
    if (r_.stop_reason.empty()) r_.stop_reason = "every candidate converted";
    r_.config = with_converted(converted);
    r_.result = quantize(r_.config, true);
    if (converted.empty()) r_.loss = loss_of(r_.result, r_.config, "the base model");
    say("AutoMixprecision: " + std::to_string(converted.size()) + " of " + std::to_string(r_.candidates.size()) +
        " nodes converted, " + r_.metric + " " + number(r_.loss) + " (" + r_.stop_reason + ")");
    return std::move(r_);
  }

 private:
  void say(const std::string& line) const {
    if (log_) log_(line);
  }

  // The nodes that may be converted: quantized nodes of TargetOpType in graph order, narrowed
  // by TargetTensors (nodes reading or writing one), TargetIndices and ExcludeIndices (positions
  // in that order), and NoInputQDQShared (not a node whose activation input other quantized
  // nodes read too: converting it alone would not change what it reads).
  std::vector<std::string> candidates_of(const quant::QuantizeResult& base) const {
    const ir::Model& m = base.prepared ? *base.prepared : model_;
    std::set<std::string> quantized(base.plan.quantized_nodes.begin(), base.plan.quantized_nodes.end());
    std::set<std::string> op_types(a_.target_op_types.begin(), a_.target_op_types.end());
    std::set<std::string> tensors(a_.target_tensors.begin(), a_.target_tensors.end());
    std::vector<std::string> list;
    for (const ir::Node* n : m.graph->topological_order()) {
      if (!quantized.count(n->name) || !op_types.count(n->op_type)) continue;
      if (!tensors.empty()) {
        bool touches = false;
        for (const ir::Value* v : n->inputs()) touches = touches || (v && tensors.count(v->name()));
        for (const ir::Value* v : n->outputs()) touches = touches || (v && tensors.count(v->name()));
        if (!touches) continue;
      }
      list.push_back(n->name);
    }
    auto index_of = [&](int64_t i, const char* key) {
      if (i < 0 || i >= static_cast<int64_t>(list.size()))
        throw Error(std::string("AutoMixprecision.") + key + ": index " + std::to_string(i) + " is outside the " +
                    std::to_string(list.size()) + " candidate nodes");
      return static_cast<size_t>(i);
    };
    std::set<size_t> keep;
    for (int64_t i : a_.target_indices) keep.insert(index_of(i, "TargetIndices"));
    for (int64_t i : a_.exclude_indices) index_of(i, "ExcludeIndices");
    std::vector<std::string> out;
    for (size_t i = 0; i < list.size(); ++i) {
      if (!keep.empty() && !keep.count(i)) continue;
      if (std::find(a_.exclude_indices.begin(), a_.exclude_indices.end(), static_cast<int64_t>(i)) !=
          a_.exclude_indices.end())
        continue;
      if (a_.no_input_qdq_shared && input_shared(m, base.plan, quantized, list[i])) continue;
      out.push_back(list[i]);
    }
    return out;
  }

  static bool input_shared(const ir::Model& m, const quant::Plan& plan, const std::set<std::string>& quantized,
                           const std::string& node) {
    for (const auto& n : m.graph->nodes()) {
      if (n->name != node || !n->input(0)) continue;
      const quant::TensorPlan* t = plan.find(n->input(0)->name());
      if (!t || t->role != quant::Role::Activation) return false;
      for (const ir::Use& u : n->input(0)->uses())
        if (u.node != n.get() && quantized.count(u.node->name)) return true;
    }
    return false;
  }

  quant::QuantConfig with_converted(const std::vector<std::string>& nodes) const {
    quant::QuantConfig c = config_;
    c.dual_quant_nodes = c.dual_quant_nodes || a_.dual_quant_nodes;
    quant::NodePrecision p;
    p.activation = a_.activation_target.value_or(config_.activation_type);
    p.weight = a_.weight_target.value_or(config_.weight_type);
    for (const std::string& n : nodes) c.node_precision[n] = p;
    return c;
  }

  // The model quantized with `config`. Fast finetune (include_fast_ft), BiasCorrection and GPTQ run once, on the model
  // written (`final_model`); the measures before are of models not finetuned, but for the nodes
  // in `finetuned` (AutoMixUseFastFT).
  quant::QuantizeResult quantize(quant::QuantConfig config, bool final_model,
                                 const std::set<std::string>& finetuned = {}) {
    quant::QuantizeResult q;
    if (prepared_) q.prepared = ir::clone_model(*prepared_);
    quant::PlanRefiner refine;
    if (final_model) {
      if (quant::has_post_quantization(config)) refine = finetune::post_quantization_refiner(config, log_);
    } else if (!finetuned.empty()) {
      config.include_fast_ft = true;
      refine = finetune::post_quantization_refiner(config, {}, finetuned);
    } else if (quant::has_post_quantization(config)) {
      refine = [](quant::Plan&, const ir::Model&, DataReader&) { return std::vector<quant::FinetunedLayer>{}; };
    }
    reader_.rewind();
    quant::quantize_prepared(q, model_, reader_, config, {}, &ranges_, final_model, refine);
    return q;
  }

  double loss_of(const quant::QuantizeResult& q, const quant::QuantConfig& config, const std::string& what) {
    const ir::Model& m = q.prepared ? *q.prepared : model_;
    if (evaluate_) {
      std::filesystem::path path = work_dir_ / "candidate.onnx";
      ir::save_model(quant::export_model(m, q.plan, config), path);
      double metric = evaluate_(path, what);
      std::filesystem::remove(path);
      return float_metric_ - metric;
    }
    quant::Simulation simulation(m, q.plan, config, config.calib.threads);
    double sum = 0;
    for (size_t i = 0; i < reference_.feeds.size(); ++i) {
      std::vector<ir::Tensor> out = simulation.run(reference_.feeds[i]);
      const ir::Tensor& ref = reference_.outputs[i];
      ir::Tensor got = out.at(reference_.output_index);
      if (got.dims() != ref.dims()) throw Error("AutoMixprecision: " + what + ": the output's shape changed");
      auto x = got.values<float>(), y = ref.values<float>();
      double squares = 0;
      for (size_t k = 0; k < x.size(); ++k) squares += (static_cast<double>(x[k]) - y[k]) * (x[k] - y[k]);
      sum += std::sqrt(squares);
    }
    return reference_.feeds.empty() ? 0.0 : sum / static_cast<double>(reference_.feeds.size());
  }

  const ir::Model& model_;
  DataReader& reader_;
  const quant::QuantConfig& config_;
  const quant::AutoMixprecision& a_;
  const EvaluateFunction& evaluate_;
  std::filesystem::path work_dir_;
  std::function<void(const std::string&)> log_;
  std::optional<ir::Model> prepared_;
  quant::RangeCache ranges_;
  ReferenceOutputs reference_;
  double float_metric_ = 0;
  AutoMixResult r_;
};

}  // namespace

AutoMixResult auto_mixprecision(const ir::Model& model, DataReader& reader, const quant::QuantConfig& config,
                                const EvaluateFunction& evaluate, const std::filesystem::path& work_dir,
                                const std::function<void(const std::string&)>& log) {
  return AutoMix(model, reader, config, evaluate, work_dir, log).run();
}

nlohmann::json auto_mixprecision_report(const AutoMixResult& r) {
  nlohmann::json j;
  j["metric"] = r.metric;
  j["target"] = r.target;
  j["loss"] = r.loss;
  j["stop_reason"] = r.stop_reason;
  j["candidates"] = nlohmann::json::array();
  for (const auto& c : r.candidates)
    j["candidates"].push_back({{"node", c.node}, {"alone", c.alone}, {"converted", c.converted}});
  return j;
}

}  // namespace onnxptq::accuracy
