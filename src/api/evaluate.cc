// Quark's evaluate tool (tools/evaluate.h) over the public types.
#include "onnxptq/evaluate.h"

#include <nlohmann/json.hpp>

#include "tools/evaluate.h"

namespace onnxptq {

std::string EvaluateReport::to_table() const { return tools::format_report(*this); }

std::string EvaluateReport::to_json() const { return tools::report_json(*this).dump(2); }

EvaluateReport evaluate_folders(const std::filesystem::path& baseline, const std::filesystem::path& quantized) {
  return tools::evaluate_folders(baseline, quantized);
}

}  // namespace onnxptq
