// Calibration alone: the tensors the quantizer's plan calibrates, on the model it prepares.
#include "onnxptq/calibrate.h"

#include "api/ranges.h"
#include "calib/calibrate.h"
#include "calib/progress_reader.h"
#include "ir/model.h"
#include "onnxptq/error.h"
#include "quant/float16_model.h"
#include "quant/quantize.h"

namespace onnxptq {

Calibration calibrate(const Model& model, DataReader& reader, const Config& config, const CalibrateOptions& options) {
  quant::QuantConfig c = config.quant();
  quant::resolve_float16_model(c, model.ir(), options.log);  // QuantizeFP16 calibrates the widened model
  if (!c.save_and_restore.empty())
    throw Error("extra option SaveAndRestore goes with quantize; calibrate returns the ranges it would save");
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

  return api::calibration_of(r, o.method, c.activation_type);
}

}  // namespace onnxptq
