// Makes the users of equal initializers (same type, shape and bytes) share one of them.
#include <cstring>
#include <functional>
#include <string_view>
#include <unordered_map>

#include "passes/optimize.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {
namespace {

bool same_tensor(const ir::Tensor& a, const ir::Tensor& b) {
  if (a.dtype() != b.dtype() || a.dims() != b.dims()) return false;
  if (a.dtype() == ir::DataType::String) return a.string_values() == b.string_values();
  return a.byte_size() == b.byte_size() && std::memcmp(a.bytes().data(), b.bytes().data(), a.byte_size()) == 0;
}

size_t hash_of(const ir::Tensor& t) {
  size_t h = std::hash<size_t>()(static_cast<size_t>(t.dtype()));
  for (int64_t d : t.dims()) h = h * 31 + std::hash<int64_t>()(d);
  if (t.dtype() == ir::DataType::String) {
    for (const std::string& s : t.string_values()) h = h * 31 + std::hash<std::string>()(s);
  } else {
    h = h * 31 +
        std::hash<std::string_view>()(std::string_view(reinterpret_cast<const char*>(t.bytes().data()), t.byte_size()));
  }
  return h;
}

}  // namespace

// Initializers that are graph inputs (overridable at run time) or graph outputs keep their own
// value. The first in file order is kept, so the result does not depend on hashing.
bool dedupe_initializers(ir::Model& model, PassContext& context) {
  ir::Graph& graph = *model.graph;
  std::unordered_multimap<size_t, ir::Value*> kept;
  size_t removed = 0, shared_bytes = 0;
  std::vector<ir::Value*> initializers = graph.initializers();
  for (ir::Value* v : initializers) {
    if (graph.is_input(v) || graph.is_output(v)) continue;
    size_t h = hash_of(v->initializer());
    ir::Value* same = nullptr;
    for (auto [it, end] = kept.equal_range(h); it != end && !same; ++it)
      if (same_tensor(it->second->initializer(), v->initializer())) same = it->second;
    if (!same) {
      kept.emplace(h, v);
      continue;
    }
    shared_bytes += v->initializer().byte_size();
    graph.replace_uses(v, same);
    graph.remove_value(v);
    ++removed;
  }
  if (removed)
    context.log.push_back("dedupe_initializers: " + std::to_string(removed) + " duplicates removed (" +
                          std::to_string(shared_bytes) + " bytes)");
  return removed > 0;
}

}  // namespace onnxptq::passes
