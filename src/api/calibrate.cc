// Calibration alone: the tensors the quantizer's plan calibrates, on the model it prepares.
#include "onnxptq/calibrate.h"

#include <nlohmann/json.hpp>

#include "calib/calibrate.h"
#include "calib/progress_reader.h"
#include "ir/model.h"
#include "quant/quantize.h"

namespace onnxptq {

std::string Calibration::to_json() const {
  nlohmann::ordered_json j;
  j["method"] = method;
  j["samples"] = samples;
  j["skipped_samples"] = skipped_samples;
  j["passes"] = passes;
  nlohmann::ordered_json ranges = nlohmann::ordered_json::object();
  for (const TensorRange& t : tensors) {
    nlohmann::ordered_json e;
    e["min"] = t.min;
    e["max"] = t.max;
    if (t.pos) e["pos"] = *t.pos;
    if (t.mean) e["mean"] = *t.mean;
    if (t.std) e["std"] = *t.std;
    ranges[t.tensor] = e;
  }
  j["tensors"] = ranges;
  return j.dump(2);
}

Calibration calibrate(const Model& model, DataReader& reader, const Config& config, const CalibrateOptions& options) {
  const quant::QuantConfig& c = config.quant();
  calib::CalibOptions o = c.calibration_options();
  // The type the ranges are for: power-of-two positions, LayerWisePercentile's errors and which
  // Relu/Clip ranges are kept depend on it; float targets keep the default.
  switch (c.activation_type) {
    case DataType::Int8:
    case DataType::UInt8:
    case DataType::Int16:
    case DataType::UInt16:
      o.activation_type = c.activation_type;
      break;
    default:
      break;
  }
  o.scenario = options.distribution_scenario;
  o.log = options.log;

  std::unique_ptr<DataReader> random = quant::random_data_reader(model.ir(), c);  // UseRandomData
  std::unique_ptr<DataReader> counted;
  if (options.progress)
    counted = calib::make_progress_reader(random ? *random : reader, options.progress, o.max_samples);
  DataReader& data = counted ? *counted : random ? *random : reader;
  std::optional<ir::Model> prepared = quant::prepare_float_model(model.ir(), data, c);
  const ir::Model& m = prepared ? *prepared : model.ir();
  std::unique_ptr<DataReader> adapted = quant::adapted_reader(data, m, c);
  DataReader& samples = adapted ? *adapted : data;
  std::vector<std::string> tensors = quant::plan_quantization(m, samples, c).tensors_to_calibrate();
  calib::CalibrationResult r = calib::calibrate(m, tensors, samples, o);

  Calibration out;
  out.method = calib::method_name(o.method);
  out.samples = r.samples;
  out.skipped_samples = r.skipped;
  out.passes = r.passes;
  for (const auto& [name, t] : r.ranges) {
    TensorRange range{name, t.lo, t.hi, t.pos, std::nullopt, std::nullopt};
    if (o.method == calib::Method::Distribution) {
      range.mean = t.mean;
      range.std = t.std;
    }
    out.tensors.push_back(std::move(range));
  }
  return out;
}

}  // namespace onnxptq
