// libonnx's shape inference, version converter and checker run on onnxptq's IR (through protobuf).
#include "passes/onnx_bridge.h"

#include <onnx/checker.h>
#include <onnx/common/version.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <exception>
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

}  // namespace

ir::Model onnx_infer_shapes(const ir::Model& model) {
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
