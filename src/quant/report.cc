// quantize_static's report: a summary for people and the same as JSON for machines.
#include <iomanip>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "quant/quantize.h"

namespace onnxptq::quant {

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
  for (const auto& [op, n] : quantized_by_op_type(r.prepared ? *r.prepared : float_model, r.plan))
    out << " " << op << " " << n << ",";
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
  for (const char* phase : {"prepare", "cle", "dpu", "plan", "calibrate", "parameters", "finetune", "export"})
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
  if (!r.plan.fused_activations.empty()) j["fused_activations"] = r.plan.fused_activations;  // enable_dpu's QDQ removal
  j["seconds"] = r.seconds;
  j["calibration"] = {{"samples", r.calibration.samples},
                      {"skipped_samples", r.calibration.skipped},
                      {"passes", r.calibration.passes},
                      {"tensors", r.calibration.ranges.size()}};
  j["warnings"] = r.plan.warnings;
  for (const FinetunedLayer& l : r.finetuned) {  // "fast_finetune" or "bias_correction": a list of layers each
    nlohmann::json e = {{"node", l.node}, {"op_type", l.op_type}};
    if (!l.skipped.empty()) {
      e["skipped"] = l.skipped;
    } else {
      e["activation"] = l.activation;
      e["loss_before"] = l.loss_before;
      e["loss_after"] = l.loss_after;
      e["iterations"] = l.iterations;
      e["kept"] = l.kept;
      e["seconds"] = l.seconds;
      if (l.output_distance) {
        e["output_distance_before"] = l.output_distance->first;
        e["output_distance_after"] = l.output_distance->second;
      }
    }
    j[l.pass].push_back(std::move(e));
  }
  return j;
}

}  // namespace onnxptq::quant
