#include "small_inputs.h"

#include <algorithm>

namespace onnxptq::fuzz {

std::optional<std::map<std::string, std::vector<int64_t>>> small_input_shapes(const ir::Model& model) {
  constexpr int64_t kMaxElements = 4096;
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const ir::Value* input : model.graph->fed_inputs()) {
    if (!input->type.has_shape) return std::nullopt;
    std::vector<int64_t>& dims = shapes[input->name()];
    int64_t elements = 1;
    for (const ir::Dim& d : input->type.shape) {
      dims.push_back(d.has_value ? d.value : 1);
      if (dims.back() > kMaxElements) return std::nullopt;
      elements *= std::max<int64_t>(dims.back(), 1);
      if (elements > kMaxElements) return std::nullopt;
    }
  }
  return shapes;
}

}  // namespace onnxptq::fuzz
