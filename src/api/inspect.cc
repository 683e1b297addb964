// `onnxptq inspect`'s summary of a model (tools/inspect.h) as text.
#include "onnxptq/inspect.h"

#include "ir/model.h"
#include "tools/inspect.h"

namespace onnxptq {

std::string inspect_json(const Model& model) { return tools::inspect_model(model.ir()).dump(2); }

std::string inspect_text(const Model& model) { return tools::format_inspection(tools::inspect_model(model.ir())); }

}  // namespace onnxptq
