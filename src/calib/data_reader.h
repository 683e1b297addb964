// The built-in calibration data readers (the protocol itself is public: onnxptq/data_reader.h).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "onnxptq/data_reader.h"

namespace onnxptq::calib {

using onnxptq::DataReader;
using onnxptq::Feed;

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

// Samples begin..end-1 of `source` (fewer when it has fewer), which must outlive the result; the
// source is started over at each start of the subset, so it must be able to (can_rewind) unless
// the subset begins at 0 and is read once. Error when begin >= end.
std::unique_ptr<DataReader> make_subset_reader(DataReader& source, size_t begin, size_t end);

// Image preprocessing for the image folder reader, in the order it is applied: decode (grayscale is
// repeated to 3 channels, alpha is dropped), resize, center crop, channel order, then for each
// channel c of the tensor x = (x * scale - mean[c]) / stddev[c] on the 0..255 pixel values, then
// layout. The result is a float32 tensor [1,3,H,W] (nchw) or [1,H,W,3] (nhwc).
struct ImageSpec {
  enum class Resize { None, ShorterSide, Exact };
  enum class Order { RGB, BGR };
  enum class Layout { NCHW, NHWC };
  Resize resize = Resize::None;
  int64_t resize_shorter = 0;  // Resize::ShorterSide: the shorter side becomes this, aspect kept
  int64_t resize_height = 0;   // Resize::Exact
  int64_t resize_width = 0;
  std::optional<std::pair<int64_t, int64_t>> crop;  // center crop (height, width)
  Order order = Order::RGB;
  double scale = 1.0;
  // Per channel of the tensor, in its channel order (B, G, R for order=bgr).
  std::array<double, 3> mean{0.0, 0.0, 0.0};
  std::array<double, 3> stddev{1.0, 1.0, 1.0};
  Layout layout = Layout::NCHW;

  // The command-line form with every key, which parse_image_spec reads back to the same spec.
  std::string to_string() const;
};

// "resize=256,crop=224,order=rgb,scale=1/255,mean=0.485:0.456:0.406,std=0.229:0.224:0.225,layout=nchw":
// comma-separated KEY=VALUE, any subset, each key at most once (docs/calibration-data.md).
ImageSpec parse_image_spec(const std::string& text);
// The same keys in a JSON object: {"resize": 256, "crop": [224, 224], "mean": [0.485, 0.456, 0.406], ...}.
ImageSpec image_spec_from_json(const nlohmann::json& json);

// A folder of JPEG, PNG and BMP images (by extension, any case), one sample each in file-name
// order, for a model with one image input; the produced shape is checked against the input's
// known dimensions (before reading any image when the spec fixes the size).
std::unique_ptr<DataReader> make_image_folder_reader(const std::filesystem::path& folder,
                                                     const std::vector<const ir::Value*>& inputs,
                                                     const ImageSpec& spec);

// The files of `folder` whose names `wanted` accepts, in name order; Error naming the folder when
// it is missing, and naming an accepted entry that cannot be read (a link loop, a dangling link).
// Entries that are not regular files (folders) are left out.
std::vector<std::filesystem::path> folder_files(const std::filesystem::path& folder,
                                                const std::function<bool(const std::filesystem::path&)>& wanted);

// The members of an .npz archive (stored or deflated), by array name.
std::map<std::string, ir::Tensor> load_npz(const std::filesystem::path& path);

}  // namespace onnxptq::calib
