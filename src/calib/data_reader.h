// Calibration data: the reader protocol of the seeds (get_next gives one feed, or nothing at the
// end), and the built-in readers.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace onnxptq::calib {

// One sample: a tensor for each model input, by name.
using Feed = std::map<std::string, ir::Tensor>;

class DataReader {
 public:
  virtual ~DataReader() = default;
  // The next sample, or nothing at the end.
  virtual std::optional<Feed> next() = 0;
  // How many samples there are, when known in advance.
  virtual std::optional<size_t> size() const { return std::nullopt; }
  // Readers that can start over say so; methods needing several passes use it.
  virtual bool can_rewind() const { return false; }
  virtual void rewind();
  // For messages: "folder calib/ (200 files)".
  virtual std::string describe() const = 0;
};

// A folder of .npy or .npz files, one sample a file, in file-name order. An .npz holds one array
// per model input, keyed by input name; an .npy is the one input of a single-input model.
std::unique_ptr<DataReader> make_npy_folder_reader(const std::filesystem::path& folder,
                                                   const std::vector<const ir::Value*>& inputs);

// The random data reader of the seeds: one sample (or `count`), seeded. Shapes come from
// `shapes` (by input name) where given, else from the model with dynamic dimensions filled as the
// seeds do (batch 1; channels 3 and 32x32 images for rank 4; 16 for the second dimension of rank
// 2; 1 elsewhere). Values are uniform in [0, 1) for floats (integers: 0), or in the [low, high]
// of `ranges` for the inputs named there (integers drawn from the integer range).
struct RandomReaderOptions {
  uint32_t seed = 0;
  size_t count = 1;
  std::map<std::string, std::vector<int64_t>> shapes;
  std::map<std::string, std::pair<double, double>> ranges;
};
std::unique_ptr<DataReader> make_random_reader(const std::vector<const ir::Value*>& inputs,
                                               const RandomReaderOptions& options);

// The members of an .npz archive (stored or deflated), by array name.
std::map<std::string, ir::Tensor> load_npz(const std::filesystem::path& path);

}  // namespace onnxptq::calib
