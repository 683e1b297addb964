// An ONNX model, loaded from a file and saved to one. Copies share the model (it is immutable
// through this API).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "onnxptq/data_type.h"

namespace onnxptq {

namespace ir {
class Model;  // the library's graph form, not part of the API
}

// A graph input or output: its name, element type and dims (-1 where a dimension is not fixed).
struct ValueInfo {
  std::string name;
  DataType dtype = DataType::Undefined;
  std::vector<int64_t> dims;
};

// Where Model::save puts the tensors (onnx.save_model's external data arguments).
struct SaveOptions {
  enum class ExternalData {
    Auto,    // in a data file when the model was loaded with one or would not fit in 2 GB
    Always,  // in a data file
    Never,   // in the model file (Error past 2 GB)
  };
  ExternalData external_data = ExternalData::Auto;
  // With a data file: tensors smaller than this many bytes stay inside the model file.
  size_t external_threshold = 1024;
  // The data file's name, beside the model; "" for "<model file name>.data". One data file
  // holds every tensor written out (ONNX Runtime's all_tensors_to_one_file).
  std::string data_file_name{};
};

class Model {
 public:
  // Error (bad input) naming the file for a missing, truncated or invalid model; external
  // data files beside it are mapped, not read.
  static Model load(const std::filesystem::path& path);
  // A serialized onnx.ModelProto held in memory (onnx's SerializeToString), checked as load
  // checks a file. External data is read relative to `base_dir`; with none, a tensor stored
  // outside the bytes is an Error naming it. `name` stands for the model in messages.
  static Model from_bytes(std::string_view bytes, const std::filesystem::path& base_dir = {},
                          const std::string& name = "model bytes");

  // Written to a temporary file beside `path`, then renamed: never half-written. With
  // `external_data` (or when the model would not fit in 2 GB) the weights go to one data file
  // beside it.
  void save(const std::filesystem::path& path, bool external_data = false) const;
  // The same with the data file's options. Error for a data_file_name that is not a plain file
  // name.
  void save(const std::filesystem::path& path, const SaveOptions& options) const;
  // The model as a serialized onnx.ModelProto, every tensor inside (onnx.load_from_string
  // reads it). Error past protobuf's 2 GB limit.
  std::string to_bytes() const;

  // The inputs a run must feed (initializers listed as inputs are left out) and the outputs.
  std::vector<ValueInfo> inputs() const;
  std::vector<ValueInfo> outputs() const;
  // The opset of the default domain.
  int64_t opset() const;

  // For the library's own use.
  explicit Model(std::shared_ptr<const ir::Model> model);
  const ir::Model& ir() const { return *model_; }

 private:
  std::shared_ptr<const ir::Model> model_;
};

}  // namespace onnxptq
