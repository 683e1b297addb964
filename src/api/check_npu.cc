// The NPU's shift constraints on a written model (tools/check_npu.h) over the public types.
#include "onnxptq/check_npu.h"

#include <nlohmann/json.hpp>

#include "ir/model.h"
#include "tools/check_npu.h"

namespace onnxptq {

std::string NpuCheck::to_text() const { return tools::format_npu_check(*this); }

std::string NpuCheck::to_json() const { return tools::npu_check_json(*this).dump(2); }

NpuCheck check_npu(const Model& model) { return tools::check_npu(model.ir()); }

}  // namespace onnxptq
