// An ONNX model, loaded from a file and saved to one. Copies share the model (it is immutable
// through this API).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
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

class Model {
 public:
  // Error (bad input) naming the file for a missing, truncated or invalid model; external
  // data files beside it are mapped, not read.
  static Model load(const std::filesystem::path& path);

  // Written to a temporary file beside `path`, then renamed: never half-written. With
  // `external_data` (or when the model would not fit in 2 GB) the weights go to one data file
  // beside it.
  void save(const std::filesystem::path& path, bool external_data = false) const;

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
