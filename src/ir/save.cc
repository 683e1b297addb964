// Writing ONNX models: the IR into protobuf, tensors inline or in one external data file.
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <onnx/onnx_pb.h>

#include <climits>

#include "ir/file_io.h"
#include "ir/model.h"
#include "onnxptq/error.h"

namespace onnxptq::ir {
namespace {

// Protobuf refuses messages of 2 GiB and more; keep a margin for everything but tensor data.
constexpr size_t kInlineLimit = (size_t{2} << 30) - (size_t{64} << 20);
constexpr size_t kDataAlignment = 64;

// Where tensor bytes go: inline (raw_data), or appended to the external data file.
struct TensorSink {
  AtomicFile* data_file = nullptr;  // null: everything inline
  std::string location;             // the data file's name, relative to the model
  size_t threshold = 0;
  size_t offset = 0;
};

void tensor_to_proto(const Tensor& tensor, onnx::TensorProto& proto, TensorSink& sink) {
  proto.set_data_type(static_cast<int32_t>(tensor.dtype()));
  for (int64_t d : tensor.dims()) proto.add_dims(d);
  if (!tensor.name.empty()) proto.set_name(tensor.name);
  if (!tensor.doc_string.empty()) proto.set_doc_string(tensor.doc_string);
  if (tensor.dtype() == DataType::String) {
    for (const auto& s : tensor.string_values()) proto.add_string_data(s);
    return;
  }
  const Bytes& bytes = tensor.bytes();
  if (sink.data_file && bytes.size() >= sink.threshold && bytes.size() > 0) {
    size_t padding = (kDataAlignment - sink.offset % kDataAlignment) % kDataAlignment;
    static const char zeros[kDataAlignment] = {};
    sink.data_file->write(zeros, padding);
    sink.offset += padding;
    sink.data_file->write(bytes.data(), bytes.size());
    proto.set_data_location(onnx::TensorProto::EXTERNAL);
    auto add = [&](const char* key, const std::string& value) {
      auto* entry = proto.add_external_data();
      entry->set_key(key);
      entry->set_value(value);
    };
    add("location", sink.location);
    add("offset", std::to_string(sink.offset));
    add("length", std::to_string(bytes.size()));
    sink.offset += bytes.size();
    return;
  }
  proto.set_raw_data(bytes.data(), bytes.size());
}

void type_to_proto(const ValueType& type, onnx::TypeProto& proto) {
  if (type.kind == ValueType::Kind::Other) {
    proto.ParseFromString(type.other);
    return;
  }
  if (!type.denotation.empty()) proto.set_denotation(type.denotation);
  auto* t = proto.mutable_tensor_type();
  t->set_elem_type(static_cast<int32_t>(type.elem_type));
  if (!type.has_shape) return;
  auto* shape = t->mutable_shape();
  for (const Dim& d : type.shape) {
    auto* dim = shape->add_dim();
    if (d.has_value) dim->set_dim_value(d.value);
    else if (!d.param.empty()) dim->set_dim_param(d.param);
    if (!d.denotation.empty()) dim->set_denotation(d.denotation);
  }
}

void value_info_to_proto(const Value& value, onnx::ValueInfoProto& proto) {
  proto.set_name(value.name());
  if (value.type.kind != ValueType::Kind::None) type_to_proto(value.type, *proto.mutable_type());
  if (!value.doc_string.empty()) proto.set_doc_string(value.doc_string);
}

void graph_to_proto(const Graph& graph, onnx::GraphProto& proto, TensorSink& sink);

void attribute_to_proto(const Attribute& a, onnx::AttributeProto& proto, TensorSink& sink) {
  proto.set_name(a.name);
  proto.set_type(static_cast<onnx::AttributeProto::AttributeType>(a.type));
  if (!a.ref_attr_name.empty()) proto.set_ref_attr_name(a.ref_attr_name);
  if (!a.doc_string.empty()) proto.set_doc_string(a.doc_string);
  switch (a.type) {
    case AttrType::Float: proto.set_f(a.f); break;
    case AttrType::Int: proto.set_i(a.i); break;
    case AttrType::String: proto.set_s(a.s); break;
    case AttrType::Tensor: tensor_to_proto(a.t, *proto.mutable_t(), sink); break;
    case AttrType::Graph: graph_to_proto(*a.g, *proto.mutable_g(), sink); break;
    case AttrType::Floats: for (float f : a.floats) proto.add_floats(f); break;
    case AttrType::Ints: for (int64_t i : a.ints) proto.add_ints(i); break;
    case AttrType::Strings: for (const auto& s : a.strings) proto.add_strings(s); break;
    case AttrType::Tensors: for (const auto& t : a.tensors) tensor_to_proto(t, *proto.add_tensors(), sink); break;
    case AttrType::Graphs: for (const auto& g : a.graphs) graph_to_proto(*g, *proto.add_graphs(), sink); break;
    case AttrType::SparseTensor: proto.mutable_sparse_tensor()->ParseFromString(a.serialized.at(0)); break;
    case AttrType::SparseTensors: for (const auto& s : a.serialized) proto.add_sparse_tensors()->ParseFromString(s); break;
    case AttrType::TypeProto: proto.mutable_tp()->ParseFromString(a.serialized.at(0)); break;
    case AttrType::TypeProtos: for (const auto& s : a.serialized) proto.add_type_protos()->ParseFromString(s); break;
    case AttrType::Undefined: break;
  }
}

void graph_to_proto(const Graph& graph, onnx::GraphProto& proto, TensorSink& sink) {
  if (!graph.name.empty()) proto.set_name(graph.name);
  if (!graph.doc_string.empty()) proto.set_doc_string(graph.doc_string);
  for (const auto& node : graph.nodes()) {
    auto* np = proto.add_node();
    for (Value* v : node->inputs()) np->add_input(v ? v->name() : "");
    for (Value* v : node->outputs()) np->add_output(v ? v->name() : "");
    if (!node->name.empty()) np->set_name(node->name);
    np->set_op_type(node->op_type);
    if (!node->domain.empty()) np->set_domain(node->domain);
    if (!node->doc_string.empty()) np->set_doc_string(node->doc_string);
    for (const auto& a : node->attributes) attribute_to_proto(a, *np->add_attribute(), sink);
  }
  for (const Value* v : graph.initializers()) tensor_to_proto(v->initializer(), *proto.add_initializer(), sink);
  for (const auto& s : graph.sparse_initializers) proto.add_sparse_initializer()->ParseFromString(s);
  for (const Value* v : graph.inputs()) value_info_to_proto(*v, *proto.add_input());
  for (const Value* v : graph.outputs()) value_info_to_proto(*v, *proto.add_output());
  for (const Value* v : graph.value_info()) value_info_to_proto(*v, *proto.add_value_info());
  for (const auto& s : graph.quantization_annotation) proto.add_quantization_annotation()->ParseFromString(s);
}

void model_to_proto(const Model& model, onnx::ModelProto& proto, TensorSink& sink) {
  proto.set_ir_version(model.ir_version);
  for (const auto& op : model.opset_import) {
    auto* id = proto.add_opset_import();
    if (!op.domain.empty()) id->set_domain(op.domain);
    id->set_version(op.version);
  }
  if (!model.producer_name.empty()) proto.set_producer_name(model.producer_name);
  if (!model.producer_version.empty()) proto.set_producer_version(model.producer_version);
  if (!model.domain.empty()) proto.set_domain(model.domain);
  if (model.model_version) proto.set_model_version(model.model_version);
  if (!model.doc_string.empty()) proto.set_doc_string(model.doc_string);
  for (const auto& [key, value] : model.metadata_props) {
    auto* p = proto.add_metadata_props();
    p->set_key(key);
    p->set_value(value);
  }
  for (const auto& f : model.functions) proto.add_functions()->ParseFromString(f);
  for (const auto& t : model.training_info) proto.add_training_info()->ParseFromString(t);
  graph_to_proto(*model.graph, *proto.mutable_graph(), sink);
}

size_t graph_tensor_bytes(const Graph& graph);

size_t attribute_tensor_bytes(const Attribute& a) {
  size_t total = a.t.byte_size();
  for (const auto& t : a.tensors) total += t.byte_size();
  if (a.g) total += graph_tensor_bytes(*a.g);
  for (const auto& g : a.graphs) total += graph_tensor_bytes(*g);
  return total;
}

// Bytes of tensor data the model holds (initializers and constants, subgraphs included).
size_t graph_tensor_bytes(const Graph& graph) {
  size_t total = 0;
  for (const Value* v : graph.initializers()) total += v->initializer().byte_size();
  for (const auto& node : graph.nodes())
    for (const auto& a : node->attributes) total += attribute_tensor_bytes(a);
  return total;
}

void write_proto(const onnx::ModelProto& proto, AtomicFile& file) {
  if (proto.ByteSizeLong() > static_cast<size_t>(INT_MAX))
    throw Error("cannot write '" + file.target().string() + "': the model is over 2 GB; save it with external data");
  google::protobuf::io::FileOutputStream stream(file.fd());
  if (!proto.SerializeToZeroCopyStream(&stream) || !stream.Flush())
    throw Error("cannot write '" + file.target().string() + "': " + errno_text());
}

}  // namespace

std::string serialize_model(const Model& model) {
  onnx::ModelProto proto;
  TensorSink inline_only;
  model_to_proto(model, proto, inline_only);
  if (proto.ByteSizeLong() > static_cast<size_t>(INT_MAX))
    throw Error("the model is over 2 GB and cannot be held in one protobuf message");
  return proto.SerializeAsString();
}

void save_model(const Model& model, const std::filesystem::path& path, const SaveOptions& options) {
  bool external = options.external_data == SaveOptions::ExternalData::Always;
  if (options.external_data == SaveOptions::ExternalData::Auto)
    external = model.uses_external_data || graph_tensor_bytes(*model.graph) > kInlineLimit;

  onnx::ModelProto proto;
  TensorSink sink;
  std::optional<AtomicFile> data_file;
  if (external) {
    sink.location = options.data_file_name.empty() ? path.filename().string() + ".data" : options.data_file_name;
    data_file.emplace(path.parent_path().empty() ? std::filesystem::path(sink.location)
                                                 : path.parent_path() / sink.location);
    sink.data_file = &*data_file;
    sink.threshold = options.external_threshold;
  }
  model_to_proto(model, proto, sink);
  AtomicFile model_file(path);
  write_proto(proto, model_file);
  if (data_file) data_file->commit();
  model_file.commit();
}

}  // namespace onnxptq::ir
