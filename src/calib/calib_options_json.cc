// The calibration options a shard file records, so that merging checks the shards agree and
// computes their ranges with the options they ran with.
#include <nlohmann/json.hpp>

#include "calib/calibrate.h"
#include "onnxptq/error.h"

namespace onnxptq::calib {

std::string calib_options_json(const CalibOptions& o) {
  nlohmann::json j = {
      {"method", method_name(o.method)},     {"symmetric", ranges_symmetric(o)},
      {"moving_average", o.moving_average},  {"averaging_constant", o.averaging_constant},
      {"num_bins", calib_histogram_bins(o)}, {"num_quantized_bins", o.num_quantized_bins},
      {"percentile", o.percentile},          {"percentile_candidates", o.percentile_candidates},
      {"lwp_metric", o.lwp_metric},          {"scenario", o.scenario},
      {"minmse_mode", o.minmse_mode},        {"activation_type", static_cast<int32_t>(o.activation_type)},
      {"max_samples", o.max_samples},        {"strict", o.strict},
  };
  return j.dump();  // keys sorted: equal options give equal text
}

CalibOptions calib_options_from_json(const std::string& text) {
  CalibOptions o;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    o.method = parse_method(j.at("method").get<std::string>());
    o.symmetric = j.at("symmetric").get<bool>();
    o.moving_average = j.at("moving_average").get<bool>();
    o.averaging_constant = j.at("averaging_constant").get<double>();
    o.num_bins = j.at("num_bins").get<size_t>();
    o.num_quantized_bins = j.at("num_quantized_bins").get<size_t>();
    o.percentile = j.at("percentile").get<double>();
    o.percentile_candidates = j.at("percentile_candidates").get<std::vector<double>>();
    o.lwp_metric = j.at("lwp_metric").get<std::string>();
    o.scenario = j.at("scenario").get<std::string>();
    o.minmse_mode = j.at("minmse_mode").get<std::string>();
    const auto type = j.at("activation_type").get<int32_t>();
    if (!data_type_is_known(type)) throw Error("unknown activation type " + std::to_string(type));
    o.activation_type = static_cast<ir::DataType>(type);
    o.max_samples = j.at("max_samples").get<size_t>();
    o.strict = j.at("strict").get<bool>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("calibration options: ") + e.what());
  }
  return o;
}

}  // namespace onnxptq::calib
