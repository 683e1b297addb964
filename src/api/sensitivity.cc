// The sensitivity analysis of accuracy/sensitivity.h over the public types.
#include "onnxptq/sensitivity.h"

#include <nlohmann/json.hpp>

#include "accuracy/sensitivity.h"
#include "ir/model.h"
#include "onnxptq/error.h"
#include "quant/config.h"
#include "quant/quantize.h"

namespace onnxptq {

std::string SensitivityReport::to_json() const { return accuracy::sensitivity_json(*this).dump(2); }

std::string SensitivityReport::to_csv() const { return accuracy::sensitivity_csv(nodes); }

std::string SensitivityReport::to_html(const std::string& title) const {
  return accuracy::sensitivity_html(*this, title);
}

SensitivityReport analyze_sensitivity(const Model& model, DataReader& reader, const Config& config,
                                      const SensitivityOptions& options,
                                      const std::function<void(const std::string&)>& log) {
  config.check();  // before any data is read
  quant::QuantConfig c = config.quant();
  if (!c.save_and_restore.empty())
    throw Error("extra option SaveAndRestore goes with quantize, not with the sensitivity analysis");
  c.calib.progress = options.progress;                                            // fast finetune's layers
  c.calib.ranks = options.ranks;
  if (options.ranks && options.ranks->size() > 1 && c.include_fast_ft)
    throw Error("include_fast_ft: fast finetune trains in one process; run the sensitivity analysis without ranks");
  std::unique_ptr<DataReader> random = quant::random_data_reader(model.ir(), c);  // UseRandomData
  return accuracy::analyze_sensitivity(model.ir(), random ? *random : reader, c, options, log);
}

}  // namespace onnxptq
