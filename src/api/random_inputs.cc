// The ONNX Runtime oracle's seeded inputs (tools/random_inputs.h) for a public Model.
#include "onnxptq/random_inputs.h"

#include "ir/model.h"
#include "tools/random_inputs.h"

namespace onnxptq {

Feed random_inputs(const Model& model, uint32_t seed, const std::map<std::string, std::vector<int64_t>>& shapes) {
  return tools::random_inputs(model.ir().graph->fed_inputs(), seed, shapes);
}

std::vector<int64_t> parse_dims(const std::string& text, const std::string& what) {
  return tools::parse_dims(text, what);
}

}  // namespace onnxptq
