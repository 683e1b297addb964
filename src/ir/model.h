// A whole ONNX model: the main graph and the model-level fields around it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "onnxptq/model.h"
#include "onnxptq/tensor_files.h"

namespace onnxptq::ir {

struct OpsetId {
  std::string domain;  // "" (or "ai.onnx") is the default domain
  int64_t version = 0;
};

class Model {
 public:
  Model() : graph(std::make_unique<Graph>()) {}

  int64_t ir_version = 8;
  std::vector<OpsetId> opset_import;
  std::string producer_name;
  std::string producer_version;
  std::string domain;
  int64_t model_version = 0;
  std::string doc_string;
  std::vector<std::pair<std::string, std::string>> metadata_props;
  // Kept for round trips: serialized FunctionProto and TrainingInfoProto messages.
  std::vector<std::string> functions;
  std::vector<std::string> training_info;
  std::unique_ptr<Graph> graph;

  // Where the model was loaded from (empty for a model built in memory), and whether some of
  // its tensors came from external data files.
  std::filesystem::path path;
  bool uses_external_data = false;

  // The opset imported for `domain` ("" and "ai.onnx" are the same), or 0 if none.
  int64_t opset(std::string_view domain_name) const;
  // Sets (or adds) the import of `domain_name`.
  void set_opset(std::string_view domain_name, int64_t version);
};

// A deep copy of the model whose tensors share storage with the original (copy-on-write), so
// rewriting the copy never touches the original and copying costs no tensor bytes.
Model clone_model(const Model& model);
// A deep copy of an attribute; its subgraphs, if any, belong to `owner`.
Attribute clone_attribute(const Attribute& a, Graph& owner);

// Reads a model and the external data files it refers to. Error (naming the file and what is
// wrong) for a missing or unreadable file, data that is not an ONNX model, a truncated file,
// missing or short external data, a node input nothing produces, or a cycle.
Model load_model(const std::filesystem::path& path);

// Parses a model held in memory; external data is looked up relative to `base_dir` (empty:
// external data is an Error).
Model parse_model(std::string_view bytes, const std::filesystem::path& base_dir,
                  const std::string& display_name = "model");

// load_tensor (a serialized onnx.TensorProto, onnxptq/tensor_files.h) and the save options
// (onnxptq/model.h) belong here too.
using onnxptq::load_tensor;
using onnxptq::SaveOptions;

// A value of the ONNX backend test data (input_N.pb, output_N.pb) of the model's type `declared`:
// a serialized onnx.TensorProto for a tensor, an onnx.SequenceProto of tensors for a sequence, an
// onnx.OptionalProto (of a tensor or such a sequence) for an optional.
struct DataValue {
  enum class Kind { Tensor, Sequence, Optional };
  Kind kind = Kind::Tensor;
  Tensor tensor;                             // Kind::Tensor
  DataType elem_type = DataType::Undefined;  // Kind::Sequence: the declared element type, when known
  std::vector<DataValue> elements;           // Kind::Sequence: its tensors; Kind::Optional: none or one
};
// Error naming the file when it is missing or does not hold what `declared` says.
DataValue load_data_value(const std::filesystem::path& path, const ValueType& declared);

// Writes the model (and its data file) through temporary files renamed into place, so a
// failure leaves no half-written output.
void save_model(const Model& model, const std::filesystem::path& path, const SaveOptions& options = {});

// The model as protobuf bytes, every tensor inside (Error if over 2 GB).
std::string serialize_model(const Model& model);

}  // namespace onnxptq::ir
