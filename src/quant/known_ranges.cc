#include "quant/known_ranges.h"

#include <set>

#include "onnxptq/error.h"

namespace onnxptq::quant {

void check_known_ranges(const KnownRanges& known, const ir::Model& model, const QuantConfig& config) {
  if (known.method != config.calibrate_method)
    throw Error(known.source + ": ranges calibrated with " + calib::method_name(known.method) +
                ", but the config's calibrate_method is " + calib::method_name(config.calibrate_method));
  if (known.activation_type != config.activation_type)
    throw Error(known.source + ": ranges calibrated for activation_type " + quant_type_name(known.activation_type) +
                ", but the config's is " + quant_type_name(config.activation_type));
  auto check = [&](const std::string& name) {
    if (!model.graph->find_value_nested(name))
      throw Error(known.source + ": the model has no tensor '" + name + "' (ranges of another model?)");
  };
  for (const auto& [name, range] : known.result.ranges) check(name);
  for (const std::string& name : known.result.non_finite) check(name);
}

calib::CalibrationResult take_known_ranges(const KnownRanges& known, const std::vector<std::string>& tensors,
                                           ir::DataType type) {
  if (type != known.activation_type)
    throw Error(known.source + ": ranges for " + quant_type_name(known.activation_type) + ", but " +
                std::to_string(tensors.size()) + " tensors are quantized as " + quant_type_name(type) +
                " (power-of-two ranges depend on the type)");
  const std::set<std::string> non_finite(known.result.non_finite.begin(), known.result.non_finite.end());
  calib::CalibrationResult r;
  r.samples = known.result.samples;
  r.skipped = known.result.skipped;
  for (const std::string& t : tensors) {
    auto it = known.result.ranges.find(t);
    if (it != known.result.ranges.end())
      r.ranges.insert(*it);
    else if (non_finite.count(t))
      r.non_finite.push_back(t);
    else
      throw Error(known.source + ": no range for tensor '" + t + "', which the plan calibrates (ranges of another " +
                  "model, or of other settings: op types, nodes, optimize_model)");
  }
  return r;
}

}  // namespace onnxptq::quant
