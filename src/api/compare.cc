// The comparison of a quantized model with its float model (tools/compare.h) over the public types.
#include "onnxptq/compare.h"

#include <nlohmann/json.hpp>

#include "ir/model.h"
#include "tools/compare.h"

namespace onnxptq {

std::string ModelComparison::to_table(size_t limit) const { return tools::format_comparison(tensors, limit); }

std::string ModelComparison::to_json() const { return tools::comparison_json(tensors).dump(2); }

std::string ModelComparison::to_csv() const { return tools::comparison_csv(tensors); }

ModelComparison compare_models(const Model& float_model, const Model& quantized_model, DataReader& reader,
                               int threads) {
  return {tools::compare_models(float_model.ir(), quantized_model.ir(), reader, threads)};
}

}  // namespace onnxptq
