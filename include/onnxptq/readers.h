// Calibration data readers: the built-in ones (folders of .npy/.npz files or of images, seeded
// random data) and one over a function of your own. Each gives samples for a model's inputs.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "onnxptq/data_reader.h"
#include "onnxptq/model.h"

namespace onnxptq {

// A folder of .npy or .npz files, one sample a file, in file-name order: an .npz holds one array
// per model input, keyed by input name; an .npy is the one input of a single-input model.
std::unique_ptr<DataReader> npy_folder_reader(const std::filesystem::path& folder, const Model& model);

// A folder of images (JPEG, PNG, BMP) preprocessed as `spec` says, e.g.
// "resize=256,crop=224,order=rgb,scale=0.0039215686,mean=0.485:0.456:0.406,std=0.229:0.224:0.225,layout=nchw"
// (docs/calibration-data.md).
std::unique_ptr<DataReader> image_folder_reader(const std::filesystem::path& folder, const Model& model,
                                                const std::string& spec);

// The seeds' random data reader: `count` seeded samples; shapes from `shapes` (by input name) or
// the model (dynamic dimensions filled as the seeds do), values uniform in [0, 1) or in `ranges`.
struct RandomData {
  size_t count = 1;
  uint32_t seed = 0;
  std::map<std::string, std::vector<int64_t>> shapes{};
  std::map<std::string, std::pair<double, double>> ranges{};
};
std::unique_ptr<DataReader> random_reader(const Model& model, const RandomData& data = {});

// Samples from a function of yours: `next` gives one feed at a time and nothing at the end;
// with `rewind`, the reader can start over (methods that read the data twice need it; without,
// the samples of the first pass are kept for the second).
class CallbackReader : public DataReader {
 public:
  CallbackReader(std::function<std::optional<Feed>()> next, std::string description, std::function<void()> rewind = {},
                 std::optional<size_t> size = std::nullopt);
  std::optional<Feed> next() override;
  std::optional<size_t> size() const override { return size_; }
  bool can_rewind() const override { return true; }
  void rewind() override;
  std::string describe() const override { return description_; }

 private:
  std::function<std::optional<Feed>()> next_;
  std::function<void()> rewind_;
  std::string description_;
  std::optional<size_t> size_;
  std::vector<Feed> kept_;  // without rewind: the samples read, replayed after a rewind
  size_t replayed_ = 0;
  bool replaying_ = false;
  bool done_ = false;
};

}  // namespace onnxptq
