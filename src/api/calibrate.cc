// Calibration alone: the tensors the quantizer's plan calibrates, on the model it prepares.
#include "onnxptq/calibrate.h"

#include "api/ranges.h"
#include "calib/calibrate.h"
#include "calib/progress_reader.h"
#include "calib/shard_file.h"
#include "ir/model.h"
#include "onnxptq/error.h"
#include "quant/float16_model.h"
#include "quant/quantize.h"

namespace onnxptq {

namespace {

// Calibration as quantize() would run it, up to the call of the calibrator: `run` gets the
// prepared model, its calibrated tensors, the samples and the options.
template <class Run>
auto run_calibration(const Model& model, DataReader& reader, const Config& config, const CalibrateOptions& options,
                     calib::CalibOptions& o, quant::QuantConfig& c, Run&& run) {
  c = config.quant();
  quant::resolve_float16_model(c, model.ir(), options.log);  // QuantizeFP16 calibrates the widened model
  if (!c.save_and_restore.empty())
    throw Error("extra option SaveAndRestore goes with quantize; calibrate returns the ranges it would save");
  o = c.calibration_options();
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
  o.ranks = options.ranks;

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
  return run(m, tensors, samples);
}

}  // namespace

Calibration calibrate(const Model& model, DataReader& reader, const Config& config, const CalibrateOptions& options) {
  calib::CalibOptions o;
  quant::QuantConfig c;
  return run_calibration(model, reader, config, options, o, c,
                         [&](const ir::Model& m, const std::vector<std::string>& tensors, DataReader& samples) {
                           calib::CalibrationResult r = calib::calibrate(m, tensors, samples, o);
                           return api::calibration_of(r, o.method, c.activation_type);
                         });
}

std::string calibrate_shard(const Model& model, DataReader& reader, const Config& config, size_t shard, size_t shards,
                            const CalibrateOptions& options, const std::string& first_pass) {
  if (options.ranks) throw Error("calibrate_shard: a shard runs in one process, without ranks");
  if (shards == 0 || shard >= shards)
    throw Error("shard " + std::to_string(shard) + " of " + std::to_string(shards) + ": shards are numbered 0 to " +
                (shards ? std::to_string(shards - 1) : std::string("N-1 of N >= 1")));
  calib::CalibOptions o;
  quant::QuantConfig c;
  return run_calibration(model, reader, config, options, o, c,
                         [&](const ir::Model& m, const std::vector<std::string>& tensors, DataReader& samples) {
                           calib::ShardFile file;
                           calib::ShardHeader& h = file.header;
                           h.model = calib::model_digest(ir::serialize_model(m));
                           h.options = calib::calib_options_json(o);
                           h.activation_type = quant::quant_type_name(c.activation_type);
                           h.tensors = tensors;
                           h.shard = shard;
                           h.shards = shards;
                           const size_t size = samples.size().value_or(0);
                           h.samples = o.max_samples ? std::min(size, o.max_samples) : size;
                           if (!first_pass.empty()) {  // checked before any sample is run
                             calib::ShardFile first = calib::read_shard_file(first_pass, "the first pass");
                             if (!first.header.merged)
                               throw Error("the first pass: a shard's, not the merge of every shard's");
                             calib::check_same_calibration(first.header, h, "this shard", "the first pass");
                             h.pass = 2;
                             h.first_pass = calib::statistics_digest(first.statistics);
                             o.first_pass = std::move(first.statistics);
                           }
                           o.shard = shard;
                           o.shards = shards;
                           calib::CalibrationResult r = calib::calibrate(m, tensors, samples, o);
                           file.statistics = std::move(r.shard_stats);
                           return calib::write_shard_file(file);
                         });
}

MergedShards merge_shards(const std::vector<std::string>& files, const std::vector<std::string>& names,
                          const std::string& first_pass, const std::string& first_pass_name) {
  if (files.size() != names.size()) throw Error("merge_shards: one name a file");
  std::vector<calib::ShardFile> shards;
  for (size_t k = 0; k < files.size(); ++k) shards.push_back(calib::read_shard_file(files[k], names[k]));
  const std::vector<size_t> order = calib::check_shards(shards, names);
  const calib::ShardHeader& h = shards[0].header;
  calib::CalibOptions o = calib::calib_options_from_json(h.options);
  std::vector<std::string> stats, what;
  for (size_t k : order) {
    stats.push_back(std::move(shards[k].statistics));
    what.push_back(names[k]);
  }
  MergedShards out;
  const bool two_passes = calib::needs_merged_second_pass(o);
  if (two_passes && h.pass == 1) {
    if (!first_pass.empty())
      throw Error(names[0] + ": a first pass; " + first_pass_name + " goes with the shards' second passes");
    calib::ShardFile merged;
    merged.header = h;
    merged.header.shard = 0;
    merged.header.merged = true;
    merged.statistics = calib::merge_first_pass_shards(stats, what, h.tensors);
    out.first_pass = calib::write_shard_file(merged);
    return out;
  }
  if (h.pass == 2) {
    if (first_pass.empty()) throw Error(names[0] + ": a second pass: give the merged first pass it ran on");
    calib::ShardFile first = calib::read_shard_file(first_pass, first_pass_name);
    if (!first.header.merged) throw Error(first_pass_name + ": a shard's first pass, not the merge of every shard's");
    calib::check_same_calibration(h, first.header, first_pass_name, names[0]);
    if (calib::statistics_digest(first.statistics) != h.first_pass)
      throw Error(names[0] + ": a second pass on another first pass than " + first_pass_name);
    o.first_pass = std::move(first.statistics);
  } else if (!first_pass.empty()) {
    throw Error(first_pass_name + ": a first pass goes with MinMSE \"All\" or LayerWisePercentile, not " +
                calib::method_name(o.method));
  }
  calib::CalibrationResult r = calib::merge_shard_stats(stats, what, h.tensors, o);
  out.ranges = api::calibration_of(r, o.method, quant::parse_quant_type(h.activation_type));
  return out;
}

}  // namespace onnxptq
