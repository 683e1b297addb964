// dump_model over the IR (onnxptq/dump_model.h is the public API over it).
#pragma once

#include "ir/model.h"
#include "onnxptq/dump_model.h"

namespace onnxptq::tools {

using onnxptq::DumpOptions;
using onnxptq::DumpResult;

DumpResult dump_model(const ir::Model& model, DataReader& reader, const DumpOptions& options);

}  // namespace onnxptq::tools
