// libonnx's shape inference, version converter and checker run on onnxptq's IR (through protobuf).
#include "passes/onnx_bridge.h"

#include <onnx/checker.h>
#include <onnx/common/version.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <exception>
#include <map>
#include <utility>
#include <vector>

#include "onnxptq/error.h"

namespace onnxptq::passes {
namespace {

// Initializers above this size travel to libonnx as typed graph inputs: no ONNX pass we call
// needs a large tensor's values, and the protobuf must stay under 2 GB.
constexpr size_t kInlineBytes = 256 * 1024;

struct Lifted {
  std::string name;
  bool was_input;
};

struct ForLibonnx {
  onnx::ModelProto proto;
  std::vector<Lifted> lifted;
};

// libonnx's messages start with its source location; keep the first line only.
std::string first_line(const std::exception& e) {
  std::string text = e.what();
  size_t nl = text.find('\n');
  return nl == std::string::npos ? text : text.substr(0, nl);
}

ForLibonnx to_libonnx(const ir::Model& model) {
  ForLibonnx r;
  ir::Model copy = ir::clone_model(model);
  ir::Graph& g = *copy.graph;
  std::vector<ir::Value*> large;
  for (ir::Value* v : g.initializers())
    if (v->initializer().byte_size() > kInlineBytes) large.push_back(v);
  for (ir::Value* v : large) {
    v->type = ir::ValueType::tensor(v->initializer().dtype(), v->initializer().dims());
    bool was_input = g.is_input(v);
    g.remove_initializer(v);
    if (!was_input) g.add_input(v);
    r.lifted.push_back({v->name(), was_input});
  }
  if (!r.proto.ParseFromString(ir::serialize_model(copy)))
    throw Error("cannot hand the model to libonnx: its protobuf does not parse back");
  return r;
}

// The libonnx model back in our IR, large initializers restored (sharing the original's storage).
ir::Model from_libonnx(const onnx::ModelProto& proto, const std::vector<Lifted>& lifted, const ir::Model& original) {
  std::string bytes;
  if (!proto.SerializeToString(&bytes)) throw Error("libonnx returned a model that does not serialize");
  ir::Model out = ir::parse_model(bytes, original.path.empty() ? "." : original.path.parent_path(), "libonnx's result");
  out.path = original.path;
  out.uses_external_data = original.uses_external_data;
  for (const Lifted& l : lifted) {
    ir::Value* v = out.graph->find_value(l.name);
    const ir::Value* from = original.graph->find_value(l.name);
    if (!v || !from || !from->has_initializer()) continue;
    if (!l.was_input && out.graph->is_input(v)) out.graph->remove_input(v);
    out.graph->set_initializer(v, from->initializer());
  }
  return out;
}

// The rank of `v` where it is known (an initializer's, or its type's), else -1.
int64_t known_rank(const ir::Value* v) {
  if (!v) return -1;
  if (v->has_initializer()) return static_cast<int64_t>(v->initializer().dims().size());
  return v->type.is_tensor() && v->type.has_shape ? static_cast<int64_t>(v->type.shape.size()) : -1;
}

// libonnx 1.12's inference of convolutions and pools divides by the strides and indexes the
// strides and dilations by the weight's spatial rank without checking either (a SIGFPE or a
// SIGSEGV, not an exception): what it relies on is checked here first, naming the node.
void check_conv_pool_geometry(const ir::Graph& graph) {
  // The index of the weight among the inputs, or none for the pools.
  static const std::map<std::string, int, std::less<>> kOps = {
      {"Conv", 1},     {"ConvTranspose", 1}, {"ConvInteger", 1}, {"QLinearConv", 3},
      {"MaxPool", -1}, {"AveragePool", -1},  {"LpPool", -1},     {"MaxUnpool", -1}};
  for (const auto& node : graph.nodes()) {
    for (const ir::Graph* sub : node->subgraphs()) check_conv_pool_geometry(*sub);
    auto op = kOps.find(node->op_type);
    if (!node->domain.empty() || op == kOps.end()) continue;
    for (const char* name : {"strides", "dilations", "kernel_shape"})
      if (const ir::Attribute* a = node->find_attribute(name))
        for (int64_t v : a->ints)
          if (v < 1)
            throw Error(node->describe() + ": " + name + " " + ir::dims_to_string(a->ints) + " must be positive");
    if (op->second < 0 || node->inputs().size() <= static_cast<size_t>(op->second)) continue;
    const ir::Value* x = node->inputs()[0];
    const ir::Value* w = node->inputs()[static_cast<size_t>(op->second)];
    int64_t x_rank = known_rank(x), w_rank = known_rank(w);
    if (x_rank >= 0 && w_rank >= 0 && x_rank != w_rank)
      throw Error(node->describe() + ": weight '" + w->name() + "' has rank " + std::to_string(w_rank) +
                  " and input '" + x->name() + "' rank " + std::to_string(x_rank) + ": they must be equal");
  }
}

}  // namespace

ir::Model onnx_infer_shapes(const ir::Model& model) {
  check_conv_pool_geometry(*model.graph);
  ForLibonnx m = to_libonnx(model);
  try {
    onnx::shape_inference::InferShapes(m.proto, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(/*check_type=*/false, /*error_mode=*/0,
                                                                   /*data_prop=*/true));
  } catch (const std::exception& e) {
    throw Error("ONNX shape inference: " + first_line(e));
  }
  return from_libonnx(m.proto, m.lifted, model);
}

ir::Model onnx_convert_version(const ir::Model& model, int64_t target) {
  int64_t from = model.opset("");
  std::string what = "opset upgrade " + std::to_string(from) + " -> " + std::to_string(target);
  int64_t highest = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map().at(onnx::ONNX_DOMAIN).second;
  if (target > highest)
    throw Error(what + ": libonnx " + std::string(onnx::LAST_RELEASE_VERSION) + " converts up to opset " +
                std::to_string(highest));
  check_conv_pool_geometry(*model.graph);
  ForLibonnx m = to_libonnx(model);
  // The result is held to the checker when the original passes it: a model that is already
  // invalid (an unnamed graph, say) is converted as it is.
  bool checkable = true;
  try {
    onnx::checker::check_model(m.proto);
  } catch (const std::exception&) {
    checkable = false;
  }
  onnx::ModelProto converted;
  try {
    converted = onnx::version_conversion::ConvertVersion(m.proto, static_cast<int>(target));
  } catch (const std::exception& e) {
    throw Error(what + " (libonnx's version converter): " + first_line(e));
  }
  try {
    if (checkable) onnx::checker::check_model(converted);
  } catch (const std::exception& e) {
    throw Error(what + ": libonnx's checker rejects the result: " + first_line(e));
  }
  return from_libonnx(converted, m.lifted, model);
}

void onnx_check_model(const ir::Model& model) {
  check_conv_pool_geometry(*model.graph);
  ForLibonnx m = to_libonnx(model);
  try {
    onnx::checker::check_model(m.proto);
    onnx::shape_inference::InferShapes(m.proto, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(/*check_type=*/true, /*error_mode=*/1));
  } catch (const std::exception& e) {
    throw Error("libonnx's checker: " + first_line(e));
  }
}

}  // namespace onnxptq::passes
