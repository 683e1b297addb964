// The calibration rows of the key table: calib::CalibOptions' keys, the random data, and Quark's
// SaveAndRestore.
#include "quant/config_keys_detail.h"

namespace onnxptq::quant::config_keys_detail {

// The calibration keys (calib::CalibOptions).
void add_calibration_options(std::vector<ConfigKey>& keys) {
  auto add = [&](ConfigKey key) { keys.push_back(std::move(key)); };
  add(works(kExtra, "CalibTensorRangeSymmetric", "bool", "by method", "calib",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.calib.symmetric = json_bool(k.name, v); }));
  add(works(
      kExtra, "CalibMovingAverage", "bool", "false", "calib",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.calib.moving_average = json_bool(k.name, v); },
      "with MinMax or NonOverflow"));
  add(works(
      kExtra, "CalibMovingAverageConstant", "number", "0.01", "calib",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.calib.averaging_constant = json_number(k.name, v); }));
  add(works(kExtra, "CalibPercentile", "number", "99.999", "calib",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.calib.percentile = json_number(k.name, v); }));
  add(works(
      kExtra, "UsePowerOf2Scale", "bool", "true", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.use_power_of_two_scale = json_bool(k.name, v); },
      "with a power-of-two method"));
  add(works(kExtra, "Int16Scale", "bool", "false", "quant",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.int16_scale = json_bool(k.name, v); }));
  add(works(kExtra, "MinMSEMode", "string", "\"All\"", "calib",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.calib.minmse_mode = json_string(k.name, v); }));
  // Quark's float-scale weight MinMSE (its quantize_data, compute_minmse). Enum members come by name.
  add(works(
      kExtra, "WeightCalibrateMethod", "string", "\"MinMax\"", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) {
        const std::string m = v.is_null() ? "MinMax" : json_string(k.name, v);
        if (m == "MinMax" || m == "CalibrationMethod.MinMax")
          c.weight_min_mse = false;
        else if (m == "MinMSE" || m == "ExtendedCalibrationMethod.MinMSE")
          c.weight_min_mse = true;
        else
          throw Error("extra option " + k.name + ": expected \"MinMax\" or \"MinMSE\", got " + v.dump());
      },
      "MinMSE with a float-scale calibrate_method (not power of two, not Int16Scale) and integer weights"));
  add(works(
      kExtra, "MinMSEModeFloatScale", "string", "\"Percentile\"", "quant",
      [](QuantConfig& c, const ConfigKey& k, const json& v) {
        if (v.is_null()) {
          c.weight_min_mse_mode.reset();
          return;
        }
        const std::string m = json_string(k.name, v);
        if (m != "Percentile" && m != "HistCenter" && m != "All")
          throw Error("extra option " + k.name + ": expected \"Percentile\", \"HistCenter\" or \"All\", got " +
                      v.dump());
        c.weight_min_mse_mode = m;
      },
      "with WeightCalibrateMethod MinMSE"));
  add(works(kExtra, "CalibWorkerNum", "integer", "1 (command line: 0)", "calib",
            [](QuantConfig& c, const ConfigKey& k, const json& v) {
              c.calib.workers = static_cast<int>(json_number(k.name, v));
            }));
  add(works(kExtra, "LWPMetric", "string", "\"mae\"", "calib",
            [](QuantConfig& c, const ConfigKey& k, const json& v) { c.calib.lwp_metric = json_string(k.name, v); }));
  add(works(kExtra, "PercentileCandidates", "list of numbers", "[99.99, 99.999, 99.99999]", "calib",
            [](QuantConfig& c, const ConfigKey& k, const json& v) {
              if (!v.is_array()) throw Error("extra option " + k.name + ": expected a list of numbers");
              c.calib.percentile_candidates.clear();
              for (const auto& p : v) c.calib.percentile_candidates.push_back(json_number(k.name, p));
            }));
  add(works(kExtra, "CalibNumBins", "integer", "by method", "calib",
            [](QuantConfig& c, const ConfigKey& k, const json& v) {
              c.calib.num_bins = static_cast<size_t>(json_number(k.name, v));
            }));
  add(works(kExtra, "CalibDataSize", "integer", "0 (every sample)", "calib",
            [](QuantConfig& c, const ConfigKey& k, const json& v) {
              const int64_t n = json_integer(k.name, v);
              if (n < 0) throw Error("extra option " + k.name + ": expected 0 or more, got " + v.dump());
              c.calib.max_samples = static_cast<size_t>(n);
            }));
  add(works(
      kExtra, "UseRandomData", "bool", "false", "calib",
      [](QuantConfig& c, const ConfigKey& k, const json& v) { c.use_random_data = json_bool(k.name, v); },
      "one seeded random sample in place of the calibration data"));
  add(works(
      kExtra, "RandomDataReaderInputShape", "object", "{}", "calib",
      [](QuantConfig& c, const ConfigKey& k, const json& v) {
        if (!v.is_object()) throw Error("extra option " + k.name + ": expected {input name: shape}, got " + v.dump());
        c.random_data.shapes.clear();
        for (const auto& [name, shape] : v.items()) {
          std::vector<int64_t> dims;
          if (shape.is_array())
            for (const json& d : shape) dims.push_back(json_integer(k.name + "['" + name + "']", d));
          if (!shape.is_array() || dims.empty())
            throw Error("extra option " + k.name + "['" + name + "']: expected a list of dimensions, got " +
                        shape.dump());
          c.random_data.shapes[name] = dims;
        }
      },
      "with UseRandomData"));
  add(works(
      kExtra, "RandomDataReaderInputDataRange", "object", "{}", "calib",
      [](QuantConfig& c, const ConfigKey& k, const json& v) {
        if (!v.is_object())
          throw Error("extra option " + k.name + ": expected {input name: [low, high]}, got " + v.dump());
        c.random_data.ranges.clear();
        for (const auto& [name, range] : v.items()) {
          const std::string what = k.name + "['" + name + "']";
          if (!range.is_array() || range.size() != 2)
            throw Error("extra option " + what + ": expected [low, high], got " + range.dump());
          c.random_data.ranges[name] = {json_number(what, range[0]), json_number(what, range[1])};
        }
      },
      "with UseRandomData, and for the random data of --random"));
  add(works(kExtra, "CalibNumQuantizedBins", "integer", "128", "calib",
            [](QuantConfig& c, const ConfigKey& k, const json& v) {
              c.calib.num_quantized_bins = static_cast<size_t>(json_number(k.name, v));
            }));
  // Quark's file of ranges (its quantize_static): restored when it exists, else written after
  // calibration. onnxptq's file is `onnxptq calibrate`'s JSON, not Quark's.
  for (const char* name : {"SaveAndRestore", "TensorsRangeFile"})
    add(works(
        kExtra, name, "string", "unset", "api",
        [](QuantConfig& c, const ConfigKey& k, const json& v) {
          c.save_and_restore = json_string(k.name, v);
          if (c.save_and_restore.empty()) throw Error("extra option " + k.name + ": expected a file name, got \"\"");
        },
        std::string(name) == "SaveAndRestore" ? "onnxptq calibrate's JSON"
                                              : "Quark's old name of SaveAndRestore; onnxptq calibrate's JSON"));
}

}  // namespace onnxptq::quant::config_keys_detail
