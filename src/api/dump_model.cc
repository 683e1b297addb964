// dump_model (tools/dump_model.h) over the public types.
#include "onnxptq/dump_model.h"

#include "ir/model.h"
#include "tools/dump_model.h"

namespace onnxptq {

DumpResult dump_model(const Model& model, DataReader& reader, const DumpOptions& options) {
  return tools::dump_model(model.ir(), reader, options);
}

}  // namespace onnxptq
