// Reading ONNX models: protobuf into the IR, with external data and the checks that turn a
// bad file into one clear error.
#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <map>
#include <optional>
#include <set>

#include "ir/file_io.h"
#include "ir/model.h"
#include "onnxptq/error.h"

namespace onnxptq::ir {
namespace {

// Everything the conversion needs to know about where the model came from.
struct LoadContext {
  std::string display_name;  // the model file as the user named it
  std::filesystem::path base_dir;
  std::map<std::filesystem::path, std::shared_ptr<const MappedFile>> data_files;
  bool used_external_data = false;
  int64_t default_opset = 0;  // of the default domain; 0 when not imported

  [[noreturn]] void fail(const std::string& what) const { throw Error(display_name + ": " + what); }
};

// --------------------------------------------------------------- diagnosing unparsable bytes

bool read_varint(const std::byte* data, size_t size, size_t& pos, uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos >= size) return false;
    auto b = static_cast<uint8_t>(data[pos++]);
    value |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

// Walks the top-level fields of a ModelProto: a field running past the end of the file means
// it is truncated; a field number ModelProto does not have means it is no ONNX model at all.
std::optional<std::string> framing_problem(const std::byte* data, size_t size) {
  static const std::set<uint64_t> kModelFields = {1, 2, 3, 4, 5, 6, 7, 8, 14, 20, 25};
  size_t pos = 0;
  while (pos < size) {
    size_t field_start = pos;
    uint64_t tag = 0;
    if (!read_varint(data, size, pos, tag))
      return "the file is truncated (it ends inside a field header at byte " + std::to_string(field_start) + ")";
    uint64_t field = tag >> 3, wire_type = tag & 7;
    if (!kModelFields.count(field) || wire_type > 5 || wire_type == 3 || wire_type == 4)
      return "not an ONNX model (bytes at offset " + std::to_string(field_start) +
             " are not a field of an ONNX ModelProto)";
    uint64_t length = 0;
    switch (wire_type) {
      case 0:
        if (!read_varint(data, size, pos, length)) return "the file is truncated (it ends inside a number)";
        continue;
      case 1: length = 8; break;
      case 5: length = 4; break;
      case 2:
        if (!read_varint(data, size, pos, length)) return "the file is truncated (it ends inside a length)";
        break;
    }
    if (length > size - pos)
      return "the file is truncated: field " + std::to_string(field) + " at byte " +
             std::to_string(field_start) + " needs " + std::to_string(length) + " bytes, only " +
             std::to_string(size - pos) + " remain";
    pos += length;
  }
  return std::nullopt;
}

const char* const kCorrupt = "not a valid ONNX model: the protobuf data inside it is corrupt";

// --------------------------------------------------------------- tensors

Bytes external_bytes(const onnx::TensorProto& proto, size_t expected, LoadContext& ctx) {
  std::string location;
  std::optional<uint64_t> offset, length;
  for (const auto& entry : proto.external_data()) {
    try {
      if (entry.key() == "location") location = entry.value();
      else if (entry.key() == "offset") offset = std::stoull(entry.value());
      else if (entry.key() == "length") length = std::stoull(entry.value());
    } catch (const std::exception&) {
      ctx.fail("tensor '" + proto.name() + "': external data " + entry.key() + " '" + entry.value() +
               "' is not a number");
    }
  }
  if (location.empty()) ctx.fail("tensor '" + proto.name() + "' has external data without a location");
  // Bytes from memory (Model::from_bytes without a folder) have nowhere to look.
  if (ctx.base_dir.empty())
    ctx.fail("tensor '" + proto.name() + "' stores its data in the external file '" + location +
             "', but the model has no folder to read it from (load the model with its external data)");
  std::filesystem::path relative(location);
  bool escapes = relative.is_absolute();
  for (const auto& part : relative) escapes = escapes || part == "..";
  if (escapes)
    ctx.fail("tensor '" + proto.name() + "': external data location '" + location +
             "' is outside the model's folder");
  std::filesystem::path file = ctx.base_dir / relative;
  auto& mapped = ctx.data_files[file];
  if (!mapped) {
    // A symbolic link may lead out of the folder as '..' would: compare the real paths.
    std::error_code ec;
    std::filesystem::path real = std::filesystem::canonical(file, ec);
    if (ec == std::errc::no_such_file_or_directory)
      ctx.fail("tensor '" + proto.name() + "' stores its data in '" + location +
               "', which does not exist (looked for " + file.string() + ")");
    if (ec) ctx.fail("tensor '" + proto.name() + "': external data " + file.string() + ": " + ec.message());
    std::filesystem::path folder = std::filesystem::canonical(ctx.base_dir, ec);
    if (std::mismatch(folder.begin(), folder.end(), real.begin(), real.end()).first != folder.end())
      ctx.fail("tensor '" + proto.name() + "': external data location '" + location + "' leads to " +
               real.string() + ", outside the model's folder");
    mapped = MappedFile::open(file);
  }
  uint64_t start = offset.value_or(0);
  uint64_t count = length.value_or(expected);
  if (count != expected)
    ctx.fail("tensor '" + proto.name() + "': external data length " + std::to_string(count) +
             " does not fit its shape (" + std::to_string(expected) + " bytes expected)");
  if (start > mapped->size() || count > mapped->size() - start)
    ctx.fail("external data file '" + location + "' is too short: it has " + std::to_string(mapped->size()) +
             " bytes, tensor '" + proto.name() + "' needs bytes " + std::to_string(start) + " to " +
             std::to_string(start + count));
  ctx.used_external_data = true;
  const std::byte* at = mapped->data() + start;
  // Typed access needs aligned data; a misaligned tensor is copied out of the mapping.
  if (reinterpret_cast<uintptr_t>(at) % 8 != 0) return Bytes::copy_of(at, count);
  return Bytes::view(mapped, at, count);
}

// The typed repeated fields of TensorProto, in the width each data type keeps there.
template <class Field, class Element>
Bytes narrow_into_bytes(const Field& field, size_t count) {
  Bytes out = Bytes::zeros(count * sizeof(Element));
  auto* dst = reinterpret_cast<Element*>(out.mutable_data());
  for (size_t i = 0; i < count; ++i) dst[i] = static_cast<Element>(field.Get(static_cast<int>(i)));
  return out;
}

Tensor tensor_from_proto(onnx::TensorProto& proto, LoadContext& ctx) {
  const std::string what = "tensor '" + proto.name() + "'";
  if (!data_type_is_known(proto.data_type()) || proto.data_type() == 0)
    ctx.fail(what + " has unknown data type " + std::to_string(proto.data_type()));
  auto dtype = static_cast<DataType>(proto.data_type());
  std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
  for (int64_t d : dims)
    if (d < 0) ctx.fail(what + " has a negative dimension in " + dims_to_string(dims));
  if (proto.has_segment()) ctx.fail(what + " is segmented, which ONNX no longer allows");
  const int64_t count = checked_element_count(dims, what + ": shape");
  const size_t expected = data_type_bytes(dtype, count);

  Tensor tensor;
  if (dtype == DataType::String) {
    if (proto.string_data_size() != count)
      ctx.fail(what + " has " + std::to_string(proto.string_data_size()) + " strings for shape " +
               dims_to_string(dims));
    std::vector<std::string> strings(proto.string_data().begin(), proto.string_data().end());
    tensor = Tensor::from_strings(std::move(dims), std::move(strings));
  } else {
    Bytes data;
    if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
      data = external_bytes(proto, expected, ctx);
    } else if (proto.has_raw_data()) {
      if (proto.raw_data().size() != expected)
        ctx.fail(what + " has " + std::to_string(proto.raw_data().size()) + " bytes of raw data for shape " +
                 dims_to_string(dims) + " of " + std::string(data_type_name(dtype)) + " (" +
                 std::to_string(expected) + " bytes expected)");
      std::string raw;
      proto.mutable_raw_data()->swap(raw);  // take the bytes without copying them
      data = Bytes::adopt(std::move(raw));
    } else {
      switch (dtype) {
        case DataType::Float:
        case DataType::Complex64:
          if (static_cast<size_t>(proto.float_data_size()) != expected / 4)
            ctx.fail(what + " has " + std::to_string(proto.float_data_size()) + " values in float_data, " +
                     std::to_string(expected / 4) + " expected");
          data = Bytes::copy_of(proto.float_data().data(), expected);
          break;
        case DataType::Double:
        case DataType::Complex128:
          if (static_cast<size_t>(proto.double_data_size()) != expected / 8)
            ctx.fail(what + " has " + std::to_string(proto.double_data_size()) + " values in double_data, " +
                     std::to_string(expected / 8) + " expected");
          data = Bytes::copy_of(proto.double_data().data(), expected);
          break;
        case DataType::Int64:
          if (proto.int64_data_size() != count)
            ctx.fail(what + " has " + std::to_string(proto.int64_data_size()) + " values in int64_data, " +
                     std::to_string(count) + " expected");
          data = Bytes::copy_of(proto.int64_data().data(), expected);
          break;
        case DataType::UInt32:
        case DataType::UInt64: {
          if (proto.uint64_data_size() != count)
            ctx.fail(what + " has " + std::to_string(proto.uint64_data_size()) + " values in uint64_data, " +
                     std::to_string(count) + " expected");
          data = dtype == DataType::UInt64 ? Bytes::copy_of(proto.uint64_data().data(), expected)
                                           : narrow_into_bytes<decltype(proto.uint64_data()), uint32_t>(
                                                 proto.uint64_data(), static_cast<size_t>(count));
          break;
        }
        default: {
          // Everything of 32 bits or less but float: one int32_data entry per element, or per
          // byte for the packed 4-bit types; float16/bfloat16 keep their bit pattern there.
          int width = data_type_bits(dtype);
          size_t entries = width == 4 ? expected : static_cast<size_t>(count);
          if (static_cast<size_t>(proto.int32_data_size()) != entries)
            ctx.fail(what + " has " + std::to_string(proto.int32_data_size()) + " values in int32_data, " +
                     std::to_string(entries) + " expected");
          const auto& field = proto.int32_data();
          if (dtype == DataType::Bool) {
            data = Bytes::zeros(entries);
            auto* dst = reinterpret_cast<uint8_t*>(data.mutable_data());
            for (size_t i = 0; i < entries; ++i) dst[i] = field.Get(static_cast<int>(i)) != 0;
          } else if (width == 32) {
            data = Bytes::copy_of(field.data(), expected);
          } else if (width == 16) {
            data = narrow_into_bytes<decltype(field), uint16_t>(field, entries);
          } else {
            data = narrow_into_bytes<decltype(field), uint8_t>(field, entries);
          }
        }
      }
    }
    tensor = Tensor(dtype, std::move(dims), std::move(data));
  }
  tensor.name = proto.name();
  tensor.doc_string = proto.doc_string();
  return tensor;
}

// --------------------------------------------------------------- types

// ONNX's own names of types (onnx/defs/data_type_utils.cc): "tensor(float)", "seq(tensor(int64))".
std::string type_name(const onnx::TypeProto& proto) {
  auto elem = [](int32_t t) { return std::string(data_type_name(static_cast<DataType>(t))); };
  switch (proto.value_case()) {
    case onnx::TypeProto::kTensorType:
      return "tensor(" + elem(proto.tensor_type().elem_type()) + ")";
    case onnx::TypeProto::kSequenceType:
      return "seq(" + type_name(proto.sequence_type().elem_type()) + ")";
    case onnx::TypeProto::kOptionalType:
      return "optional(" + type_name(proto.optional_type().elem_type()) + ")";
    case onnx::TypeProto::kMapType:
      return "map(" + elem(proto.map_type().key_type()) + "," + type_name(proto.map_type().value_type()) + ")";
    case onnx::TypeProto::kSparseTensorType:
      return "sparse_tensor(" + elem(proto.sparse_tensor_type().elem_type()) + ")";
    default:
      return "(unknown)";
  }
}

ValueType type_from_proto(const onnx::TypeProto& proto) {
  ValueType type;
  if (proto.value_case() == onnx::TypeProto::kTensorType) {
    type.kind = ValueType::Kind::Tensor;
    const auto& t = proto.tensor_type();
    type.elem_type = static_cast<DataType>(t.elem_type());
    type.denotation = proto.denotation();
    type.has_shape = t.has_shape();
    for (const auto& d : t.shape().dim()) {
      Dim dim;
      dim.has_value = d.has_dim_value();
      dim.value = d.dim_value();
      dim.param = d.dim_param();
      dim.denotation = d.denotation();
      type.shape.push_back(std::move(dim));
    }
  } else if (proto.value_case() != onnx::TypeProto::VALUE_NOT_SET || proto.has_denotation()) {
    type.kind = ValueType::Kind::Other;
    type.other = proto.SerializeAsString();
    type.other_name = type_name(proto);
  }
  return type;
}

void apply_value_info(const onnx::ValueInfoProto& info, Value* value) {
  if (info.has_type()) value->type = type_from_proto(info.type());
  if (!info.doc_string().empty()) value->doc_string = info.doc_string();
}

// --------------------------------------------------------------- graphs

void graph_from_proto(onnx::GraphProto& proto, Graph& graph, LoadContext& ctx);

Attribute attribute_from_proto(onnx::AttributeProto& proto, Graph& graph, LoadContext& ctx) {
  Attribute a;
  a.name = proto.name();
  a.type = static_cast<AttrType>(proto.type());
  a.ref_attr_name = proto.ref_attr_name();
  a.doc_string = proto.doc_string();
  a.f = proto.f();
  a.i = proto.i();
  a.s = proto.s();
  if (proto.has_t()) a.t = tensor_from_proto(*proto.mutable_t(), ctx);
  if (proto.has_g()) {
    a.g = std::make_unique<Graph>(&graph);
    graph_from_proto(*proto.mutable_g(), *a.g, ctx);
  }
  a.floats.assign(proto.floats().begin(), proto.floats().end());
  a.ints.assign(proto.ints().begin(), proto.ints().end());
  a.strings.assign(proto.strings().begin(), proto.strings().end());
  for (auto& t : *proto.mutable_tensors()) a.tensors.push_back(tensor_from_proto(t, ctx));
  for (auto& g : *proto.mutable_graphs()) {
    a.graphs.push_back(std::make_unique<Graph>(&graph));
    graph_from_proto(g, *a.graphs.back(), ctx);
  }
  if (proto.has_sparse_tensor()) a.serialized.push_back(proto.sparse_tensor().SerializeAsString());
  for (const auto& s : proto.sparse_tensors()) a.serialized.push_back(s.SerializeAsString());
  if (proto.has_tp()) a.serialized.push_back(proto.tp().SerializeAsString());
  for (const auto& t : proto.type_protos()) a.serialized.push_back(t.SerializeAsString());
  // The type names the field that holds the value, which is what everything after reads.
  bool holds_value = a.type == AttrType::Graph          ? proto.has_g()
                     : a.type == AttrType::Tensor       ? proto.has_t()
                     : a.type == AttrType::SparseTensor ? proto.has_sparse_tensor()
                     : a.type == AttrType::TypeProto    ? proto.has_tp()
                                                        : true;
  if (!holds_value)
    ctx.fail("attribute '" + a.name + "' is of type " + onnx::AttributeProto::AttributeType_Name(proto.type()) +
             " but holds no such value");
  return a;
}

std::string describe_node_proto(const onnx::NodeProto& n) {
  std::string op = n.domain().empty() || n.domain() == "ai.onnx" ? n.op_type() : n.domain() + "." + n.op_type();
  return "node '" + n.name() + "' (" + op + ")";
}

// A node is checked against its op's schema, as ONNX Runtime checks it: an attribute the op does
// not define (a name garbled in the file, "strid*s", would otherwise leave the op running with its
// default), and the count of inputs and outputs with every required input given (kernels index
// them). Only for the opsets libonnx's schemas know.
void check_against_schema(const onnx::NodeProto& node, const LoadContext& ctx) {
  if (!(node.domain().empty() || node.domain() == "ai.onnx") || ctx.default_opset == 0) return;
  static const int64_t known = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map().at(onnx::ONNX_DOMAIN).second;
  // Past the opsets libonnx knows, its newest schema still says which inputs are required (the
  // later versions of ops have added optional inputs and attributes): only that is checked there.
  const bool newer = ctx.default_opset > known;
  const onnx::OpSchema* schema =
      onnx::OpSchemaRegistry::Schema(node.op_type(), static_cast<int>(newer ? known : ctx.default_opset));
  if (!schema) return;  // an unknown op is the engine's to report, with its opset
  const std::string op = node.op_type() + "-" + std::to_string(schema->SinceVersion());
  const auto& formals = schema->inputs();
  if (node.input_size() < schema->min_input())
    ctx.fail(describe_node_proto(node) + " has " + std::to_string(node.input_size()) + " inputs; " + op +
             " needs at least " + std::to_string(schema->min_input()));
  for (int i = 0; i < node.input_size() && static_cast<size_t>(i) < formals.size(); ++i)
    if (node.input(i).empty() && formals[i].GetOption() == onnx::OpSchema::Single)
      ctx.fail(describe_node_proto(node) + ": input " + std::to_string(i) + " (" + formals[i].GetName() +
               ") is required");
  if (newer) return;
  for (const auto& attr : node.attribute()) {
    if (schema->attributes().count(attr.name())) continue;
    std::string defined;
    for (const auto& [name, _] : schema->attributes()) defined += (defined.empty() ? "" : ", ") + name;
    ctx.fail(describe_node_proto(node) + " has attribute '" + attr.name() + "', which " + op +
             " does not define (it has: " + (defined.empty() ? "none" : defined) + ")");
  }
  auto range = [](int lo, int hi) {
    return hi == lo ? std::to_string(lo) : std::to_string(lo) + " to " + (hi == INT_MAX ? "any" : std::to_string(hi));
  };
  if (node.input_size() > schema->max_input())
    ctx.fail(describe_node_proto(node) + " has " + std::to_string(node.input_size()) + " inputs; " + op + " takes " +
             range(schema->min_input(), schema->max_input()));
  if (node.output_size() < schema->min_output() || node.output_size() > schema->max_output())
    ctx.fail(describe_node_proto(node) + " has " + std::to_string(node.output_size()) + " outputs; " + op +
             " makes " + range(schema->min_output(), schema->max_output()));
}

void graph_from_proto(onnx::GraphProto& proto, Graph& graph, LoadContext& ctx) {
  graph.name = proto.name();
  graph.doc_string = proto.doc_string();
  const std::string where = graph.parent() ? "subgraph '" + graph.name + "'" : "graph '" + graph.name + "'";

  // 1. Every value this graph defines: its inputs, initializers and node outputs. They all
  //    exist before any node is read, since subgraphs may use values defined further down.
  for (const auto& info : proto.input()) {
    Value* v = graph.find_value(info.name());
    if (!v) v = graph.add_value(info.name());
    else if (graph.is_input(v)) ctx.fail(where + " has two inputs named '" + info.name() + "'");
    apply_value_info(info, v);
    for (const Dim& d : v->type.shape)
      if (d.has_value && d.value < 0)
        ctx.fail(where + ": input '" + info.name() + "' has a negative dimension (" + std::to_string(d.value) + ")");
    graph.add_input(v);
  }
  for (auto& t : *proto.mutable_initializer()) {
    if (t.name().empty()) ctx.fail(where + " has an initializer without a name");
    Value* v = graph.find_value(t.name());
    if (!v) v = graph.add_value(t.name());
    else if (v->has_initializer()) ctx.fail(where + " has two initializers named '" + t.name() + "'");
    graph.set_initializer(v, tensor_from_proto(t, ctx));
  }
  for (const auto& s : proto.sparse_initializer()) graph.sparse_initializers.push_back(s.SerializeAsString());
  std::map<std::string, const onnx::NodeProto*> produced_by;
  for (const auto& n : proto.node())
    for (const auto& out : n.output()) {
      if (out.empty()) continue;
      auto [it, fresh] = produced_by.emplace(out, &n);
      if (!fresh)
        ctx.fail("value '" + out + "' is produced twice, by " + describe_node_proto(*it->second) + " and by " +
                 describe_node_proto(n));
      if (graph.find_value(out))
        ctx.fail(describe_node_proto(n) + " produces '" + out + "', which is already a graph input or initializer");
      graph.add_value(out);
    }

  // 2. Nodes, their attributes (and subgraphs), inputs and outputs.
  for (auto& np : *proto.mutable_node()) {
    check_against_schema(np, ctx);
    Node* node = graph.add_node(np.op_type(), {}, {}, np.name(), np.domain());
    node->doc_string = np.doc_string();
    for (auto& attr : *np.mutable_attribute()) node->attributes.push_back(attribute_from_proto(attr, graph, ctx));
    for (int i = 0; i < np.input_size(); ++i) {
      const std::string& in = np.input(i);
      Value* v = nullptr;
      if (!in.empty() && !(v = graph.lookup(in)))
        ctx.fail(describe_node_proto(np) + ": input '" + in +
                 "' is not produced by any node, nor a graph input or initializer");
      graph.set_node_input(node, static_cast<size_t>(i), v);
    }
    for (int i = 0; i < np.output_size(); ++i)
      graph.set_node_output(node, static_cast<size_t>(i), np.output(i).empty() ? nullptr : graph.find_value(np.output(i)));
  }

  // 3. Outputs and the value_info annotations.
  for (const auto& info : proto.output()) {
    Value* v = graph.lookup(info.name());
    if (!v) ctx.fail(where + ": output '" + info.name() + "' is not produced by any node, nor a graph input or initializer");
    if (v->graph() == &graph) apply_value_info(info, v);
    graph.add_output(v);
  }
  for (const auto& info : proto.value_info()) {
    Value* v = graph.find_value(info.name());
    if (!v) v = graph.add_value(info.name());  // annotates nothing, but is kept as it was
    apply_value_info(info, v);
    graph.add_value_info(v);
  }
  for (const auto& a : proto.quantization_annotation()) graph.quantization_annotation.push_back(a.SerializeAsString());

  graph.topological_order();  // throws on a cycle
}

Model model_from_proto(onnx::ModelProto& proto, LoadContext& ctx) {
  if (!proto.has_graph()) ctx.fail("not an ONNX model: it has no graph");
  Model model;
  model.ir_version = proto.ir_version();
  for (const auto& op : proto.opset_import()) {
    model.opset_import.push_back({op.domain(), op.version()});
    if (op.domain().empty() || op.domain() == "ai.onnx") ctx.default_opset = op.version();
  }
  model.producer_name = proto.producer_name();
  model.producer_version = proto.producer_version();
  model.domain = proto.domain();
  model.model_version = proto.model_version();
  model.doc_string = proto.doc_string();
  for (const auto& p : proto.metadata_props()) model.metadata_props.emplace_back(p.key(), p.value());
  for (const auto& f : proto.functions()) model.functions.push_back(f.SerializeAsString());
  for (const auto& t : proto.training_info()) model.training_info.push_back(t.SerializeAsString());
  try {
    graph_from_proto(*proto.mutable_graph(), *model.graph, ctx);
  } catch (const Error& e) {
    std::string message = e.what();
    if (message.rfind(ctx.display_name + ": ", 0) == 0) throw;
    ctx.fail(message);  // errors raised by the IR itself get the file name too
  }
  model.uses_external_data = ctx.used_external_data;
  return model;
}

bool parse_proto(onnx::ModelProto& proto, google::protobuf::io::ZeroCopyInputStream& stream) {
  google::protobuf::io::CodedInputStream coded(&stream);
  coded.SetTotalBytesLimit(INT_MAX);
  return proto.ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage();
}

}  // namespace

Model parse_model(std::string_view bytes, const std::filesystem::path& base_dir, const std::string& display_name) {
  LoadContext ctx{display_name, base_dir, {}, false};
  if (bytes.empty()) ctx.fail("the file is empty");
  if (bytes.size() > static_cast<size_t>(INT_MAX)) ctx.fail("over 2 GB: a protobuf message cannot be this large");
  if (auto problem = framing_problem(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()))
    ctx.fail(*problem);
  onnx::ModelProto proto;
  google::protobuf::io::ArrayInputStream stream(bytes.data(), static_cast<int>(bytes.size()));
  if (!parse_proto(proto, stream)) ctx.fail(kCorrupt);
  return model_from_proto(proto, ctx);
}

Model load_model(const std::filesystem::path& path) {
  LoadContext ctx{path.string(), path.has_parent_path() ? path.parent_path() : ".", {}, false};
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) ctx.fail("no such file");
  if (std::filesystem::is_directory(path, ec)) ctx.fail("is a directory, not a model file");
  {
    // Bytes cut at a field boundary can still parse, as a smaller model: the framing is
    // checked first. Only field headers are read, so few pages of the mapping are touched.
    auto file = MappedFile::open(path);
    if (file->size() == 0) ctx.fail("the file is empty");
    if (auto problem = framing_problem(file->data(), file->size())) ctx.fail(*problem);
  }
  onnx::ModelProto proto;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) ctx.fail("cannot open: " + errno_text());
  google::protobuf::io::FileInputStream stream(fd);  // streams the file: no second copy in memory
  stream.SetCloseOnDelete(true);
  if (!parse_proto(proto, stream)) ctx.fail(kCorrupt);
  Model model = model_from_proto(proto, ctx);
  model.path = path;
  return model;
}

}  // namespace onnxptq::ir

namespace onnxptq {

namespace ir {
namespace {

DataValue data_from_sequence(onnx::SequenceProto& proto, const onnx::TypeProto& type, LoadContext& ctx) {
  DataValue v;
  v.kind = DataValue::Kind::Sequence;
  const onnx::TypeProto& elem = type.sequence_type().elem_type();
  if (elem.has_tensor_type()) v.elem_type = static_cast<DataType>(elem.tensor_type().elem_type());
  if (proto.sequence_values_size() || proto.map_values_size() || proto.optional_values_size() ||
      proto.sparse_tensor_values_size())
    ctx.fail("only sequences of tensors are supported");
  for (onnx::TensorProto& t : *proto.mutable_tensor_values()) {
    DataValue item;
    item.tensor = tensor_from_proto(t, ctx);
    v.elements.push_back(std::move(item));
  }
  return v;
}

DataValue data_from_optional(onnx::OptionalProto& proto, const onnx::TypeProto& type, LoadContext& ctx) {
  DataValue v;
  v.kind = DataValue::Kind::Optional;
  const onnx::TypeProto& elem = type.optional_type().elem_type();
  if (proto.has_tensor_value()) {
    DataValue item;
    item.tensor = tensor_from_proto(*proto.mutable_tensor_value(), ctx);
    v.elements.push_back(std::move(item));
  } else if (proto.has_sequence_value()) {
    v.elements.push_back(data_from_sequence(*proto.mutable_sequence_value(), elem, ctx));
  } else if (proto.has_map_value() || proto.has_optional_value() || proto.has_sparse_tensor_value()) {
    ctx.fail("only optionals of tensors and sequences are supported");
  }
  return v;
}

}  // namespace

DataValue load_data_value(const std::filesystem::path& path, const ValueType& declared) {
  DataValue v;
  if (declared.kind != ValueType::Kind::Other) {
    v.tensor = load_tensor(path);
    return v;
  }
  LoadContext ctx{path.string(), path.has_parent_path() ? path.parent_path() : ".", {}, false};
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) ctx.fail("no such file");
  onnx::TypeProto type;
  if (!type.ParseFromString(declared.other)) ctx.fail("the declared type cannot be read");
  auto file = MappedFile::open(path);
  auto size = static_cast<int>(file->size());
  if (type.has_sequence_type()) {
    onnx::SequenceProto proto;
    if (!proto.ParseFromArray(file->data(), size)) ctx.fail("not a serialized ONNX sequence (SequenceProto)");
    return data_from_sequence(proto, type, ctx);
  }
  if (type.has_optional_type()) {
    onnx::OptionalProto proto;
    if (!proto.ParseFromArray(file->data(), size)) ctx.fail("not a serialized ONNX optional (OptionalProto)");
    return data_from_optional(proto, type, ctx);
  }
  ctx.fail("values of type " + declared.to_string() + " are not supported");
}

}  // namespace ir

Tensor load_tensor(const std::filesystem::path& path) {
  ir::LoadContext ctx{path.string(), path.has_parent_path() ? path.parent_path() : ".", {}, false};
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) ctx.fail("no such file");
  auto file = ir::MappedFile::open(path);
  onnx::TensorProto proto;
  if (!proto.ParseFromArray(file->data(), static_cast<int>(file->size())))
    ctx.fail("not a serialized ONNX tensor (TensorProto)");
  return ir::tensor_from_proto(proto, ctx);
}

}  // namespace onnxptq
