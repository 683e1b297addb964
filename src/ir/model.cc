#include "ir/model.h"

namespace onnxptq::ir {
namespace {

bool same_domain(std::string_view a, std::string_view b) {
  auto canonical = [](std::string_view d) { return d == "ai.onnx" ? std::string_view() : d; };
  return canonical(a) == canonical(b);
}

}  // namespace

int64_t Model::opset(std::string_view domain_name) const {
  for (const OpsetId& id : opset_import)
    if (same_domain(id.domain, domain_name)) return id.version;
  return 0;
}

void Model::set_opset(std::string_view domain_name, int64_t version) {
  for (OpsetId& id : opset_import)
    if (same_domain(id.domain, domain_name)) {
      id.version = version;
      return;
    }
  opset_import.push_back({std::string(domain_name), version});
}

}  // namespace onnxptq::ir
