// The image folder calibration reader: decoding (stb_image), the preprocessing of ImageSpec, and
// the spec's command-line and JSON forms.
//
// Resizing is PIL's bilinear resampling (Image.resize(size, Image.BILINEAR), which torchvision's
// Resize applies to PIL images): a separable triangle filter over sample centres at
// (i + 0.5) * in / out, widened by the shrink factor when downscaling (so it averages, as an
// antialiasing filter), and plain half-pixel bilinear interpolation with clamped edges when
// upscaling. Along the width first, then the height, in double with float32 between the passes, as
// PIL does for float ("F") images (the test compares with PIL); PIL on an 8-bit image rounds to
// whole levels after each pass, which differs by about one level at most. (stb_image_resize, also
// in libstb-dev, is not used: these few lines give PIL's results to the last bit, edges included.)
// The shorter-side size (int(S * long / short)) and the center crop offsets (round half to even of
// (size - crop) / 2) are torchvision's Resize(int) and CenterCrop.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

#include "calib/data_reader.h"
#include "onnxptq/error.h"

// stb_image, compiled here with its functions static to this file, so no other copy of stb in a
// program (Debian's libstb, a test's stb_image_write) can clash with it.
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_ONLY_JPEG
#define STBI_ONLY_PNG
#define STBI_ONLY_BMP
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#include <stb/stb_image.h>
#pragma GCC diagnostic pop

namespace onnxptq::calib {

namespace {

namespace fs = std::filesystem;

constexpr const char* kSpecKeys = "resize, crop, order, scale, mean, std, layout";

[[noreturn]] void spec_fail(const std::string& key, const std::string& value, const std::string& why) {
  throw Error("image spec: " + key + "=" + value + ": " + why);
}

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    size_t end = s.find(sep, start);
    parts.push_back(trim(s.substr(start, end == std::string::npos ? std::string::npos : end - start)));
    if (end == std::string::npos) return parts;
    start = end + 1;
  }
}

std::optional<double> to_double(const std::string& s) {
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

// A finite number, or a fraction of two ("1/255").
double spec_number(const std::string& key, const std::string& text, const std::string& shown) {
  size_t slash = text.find('/');
  std::optional<double> v = to_double(trim(text.substr(0, slash)));
  if (v && slash != std::string::npos) {
    std::optional<double> d = to_double(trim(text.substr(slash + 1)));
    v = d && *d != 0 ? std::optional<double>(*v / *d) : std::nullopt;
  }
  if (!v || !std::isfinite(*v)) spec_fail(key, shown, "'" + text + "' is not a number");
  return *v;
}

int64_t spec_size(const std::string& key, const std::string& text, const std::string& shown) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v <= 0)
    spec_fail(key, shown, "'" + text + "' is not a size (a whole number above 0)");
  return v;
}

// "HxW" as (height, width), or "S" as (S, S).
std::pair<int64_t, int64_t> spec_height_width(const std::string& key, const std::string& text, const std::string& shown) {
  std::vector<std::string> parts = split(lower(text), 'x');
  if (parts.size() == 1) {
    int64_t s = spec_size(key, parts[0], shown);
    return {s, s};
  }
  if (parts.size() != 2) spec_fail(key, shown, "give S or HxW (height x width)");
  return {spec_size(key, parts[0], shown), spec_size(key, parts[1], shown)};
}

std::array<double, 3> spec_channels(const std::string& key, const std::string& text, const std::string& shown) {
  std::vector<std::string> parts = split(text, ':');
  if (parts.size() != 1 && parts.size() != 3)
    spec_fail(key, shown, std::to_string(parts.size()) + " values; give 1 or 3 (one per channel, separated by ':')");
  std::array<double, 3> v{};
  for (size_t c = 0; c < 3; ++c) v[c] = spec_number(key, parts[parts.size() == 1 ? 0 : c], shown);
  return v;
}

bool is_spec_key(const std::string& key) {
  static const std::set<std::string> keys{"resize", "crop", "order", "scale", "mean", "std", "layout"};
  return keys.count(key) > 0;
}

// Sets one key from its text; `shown` is the value as the user wrote it, for messages.
void spec_set(ImageSpec& spec, const std::string& key, const std::string& text, const std::string& shown) {
  const std::string word = lower(text);
  if (key == "resize") {
    if (word == "none") {
      spec.resize = ImageSpec::Resize::None;
    } else if (word.find('x') != std::string::npos) {
      spec.resize = ImageSpec::Resize::Exact;
      std::tie(spec.resize_height, spec.resize_width) = spec_height_width(key, text, shown);
    } else {
      spec.resize = ImageSpec::Resize::ShorterSide;
      spec.resize_shorter = spec_size(key, text, shown);
    }
  } else if (key == "crop") {
    if (word == "none")
      spec.crop.reset();
    else
      spec.crop = spec_height_width(key, text, shown);
  } else if (key == "order") {
    if (word == "rgb")
      spec.order = ImageSpec::Order::RGB;
    else if (word == "bgr")
      spec.order = ImageSpec::Order::BGR;
    else
      spec_fail(key, shown, "give rgb or bgr");
  } else if (key == "scale") {
    spec.scale = spec_number(key, text, shown);
    if (spec.scale == 0) spec_fail(key, shown, "the scale must not be 0");
  } else if (key == "mean") {
    spec.mean = spec_channels(key, text, shown);
  } else if (key == "std") {
    spec.stddev = spec_channels(key, text, shown);
    for (double s : spec.stddev)
      if (!(s > 0)) spec_fail(key, shown, "std values must be above 0");
  } else if (key == "layout") {
    if (word == "nchw")
      spec.layout = ImageSpec::Layout::NCHW;
    else if (word == "nhwc")
      spec.layout = ImageSpec::Layout::NHWC;
    else
      spec_fail(key, shown, "give nchw or nhwc");
  }
}

std::string number_text(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, end);
}

// ---- decoding and preprocessing ----

// An image as float pixel values, rows of interleaved R, G, B.
struct Image {
  int64_t height = 0;
  int64_t width = 0;
  std::vector<float> pixels;
};

// PIL's precompute_coeffs for the bilinear filter: for each output index, the first input index
// and the normalised weights of the inputs from there.
struct Taps {
  std::vector<int64_t> first;
  std::vector<std::vector<double>> weights;
};

Taps bilinear_taps(int64_t in_size, int64_t out_size) {
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double filterscale = std::max(scale, 1.0);
  const double support = 1.0 * filterscale;  // the triangle's support is 1 input pixel
  Taps taps;
  for (int64_t i = 0; i < out_size; ++i) {
    const double center = (static_cast<double>(i) + 0.5) * scale;
    // Truncation towards zero, as PIL's (int) casts.
    int64_t lo = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5), 0);
    int64_t hi = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5), in_size);
    std::vector<double> w;
    double total = 0;
    for (int64_t x = lo; x < hi; ++x) {
      double t = std::abs((static_cast<double>(x) - center + 0.5) * (1.0 / filterscale));
      w.push_back(t < 1 ? 1 - t : 0);
      total += w.back();
    }
    if (total != 0)
      for (double& v : w) v /= total;
    taps.first.push_back(lo);
    taps.weights.push_back(std::move(w));
  }
  return taps;
}

Image resize_width(const Image& in, int64_t width) {
  if (width == in.width) return in;
  Taps taps = bilinear_taps(in.width, width);
  Image out{in.height, width, std::vector<float>(static_cast<size_t>(in.height * width * 3))};
  for (int64_t y = 0; y < in.height; ++y)
    for (int64_t x = 0; x < width; ++x)
      for (int64_t c = 0; c < 3; ++c) {
        double sum = 0;
        const std::vector<double>& w = taps.weights[x];
        for (size_t k = 0; k < w.size(); ++k) sum += in.pixels[((y * in.width) + taps.first[x] + k) * 3 + c] * w[k];
        out.pixels[(y * width + x) * 3 + c] = static_cast<float>(sum);
      }
  return out;
}

Image resize_height(const Image& in, int64_t height) {
  if (height == in.height) return in;
  Taps taps = bilinear_taps(in.height, height);
  Image out{height, in.width, std::vector<float>(static_cast<size_t>(height * in.width * 3))};
  for (int64_t y = 0; y < height; ++y)
    for (int64_t x = 0; x < in.width; ++x)
      for (int64_t c = 0; c < 3; ++c) {
        double sum = 0;
        const std::vector<double>& w = taps.weights[y];
        for (size_t k = 0; k < w.size(); ++k) sum += in.pixels[((taps.first[y] + k) * in.width + x) * 3 + c] * w[k];
        out.pixels[(y * in.width + x) * 3 + c] = static_cast<float>(sum);
      }
  return out;
}

// torchvision's CenterCrop offset: int(round((size - crop) / 2.0)), Python rounding half to even.
int64_t crop_offset(int64_t size, int64_t crop) {
  int64_t d = size - crop;
  int64_t half = d / 2;
  return d % 2 == 0 || half % 2 == 0 ? half : half + 1;
}

// Stand-ins for a height and width the spec does not fix.
constexpr int64_t kAnyHeight = -1;
constexpr int64_t kAnyWidth = -2;

std::string shape_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? "," : "") +
         (dims[i] >= 0 ? std::to_string(dims[i]) : std::string(dims[i] == kAnyHeight ? "H" : "W"));
  return s + "]";
}

std::string size_text(int64_t height, int64_t width) {
  return "width " + std::to_string(width) + ", height " + std::to_string(height);
}

std::vector<int64_t> tensor_dims(const ImageSpec& spec, int64_t height, int64_t width) {
  if (spec.layout == ImageSpec::Layout::NCHW) return {1, 3, height, width};
  return {1, height, width, 3};
}

bool fits(const std::vector<int64_t>& dims, const ir::ValueType& type) {
  if (!type.has_shape) return true;
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] >= 0 && type.shape[i].has_value && type.shape[i].value != dims[i]) return false;
  return true;
}

bool is_image_file(const fs::path& p) {
  std::string ext = lower(p.extension().string());
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png" || ext == ".bmp";
}

class ImageFolderReader : public DataReader {
 public:
  ImageFolderReader(const fs::path& folder, const std::vector<const ir::Value*>& inputs, const ImageSpec& spec)
      : folder_(folder), spec_(spec) {
    if (inputs.size() != 1) {
      std::string names;
      for (const ir::Value* v : inputs) names += (names.empty() ? "" : ", ") + v->name();
      throw Error(folder.string() + ": an image folder feeds a model with one input; this model has " +
                  std::to_string(inputs.size()) + " (" + names + ")");
    }
    input_ = inputs[0];
    const ir::ValueType& type = input_->type;
    if (!type.is_tensor() || type.elem_type != ir::DataType::Float)
      throw Error("model input '" + input_->name() + "' is " + type.to_string() +
                  "; the image reader makes float tensors");
    if (type.has_shape && type.shape.size() != 4)
      throw Error("model input '" + input_->name() + "' is " + type.to_string() + "; the image reader makes rank-4 " +
                  shape_text(tensor_dims(spec_, kAnyHeight, kAnyWidth)) + " tensors");
    // The size is known from the spec when it crops or resizes exactly; else each image's is checked.
    int64_t height = kAnyHeight, width = kAnyWidth;
    if (spec_.crop && spec_.resize == ImageSpec::Resize::Exact &&
        (spec_.crop->first > spec_.resize_height || spec_.crop->second > spec_.resize_width))
      throw Error("image spec: crop=" + std::to_string(spec_.crop->first) + "x" + std::to_string(spec_.crop->second) +
                  " is larger than resize=" + std::to_string(spec_.resize_height) + "x" +
                  std::to_string(spec_.resize_width));
    if (spec_.crop) {
      std::tie(height, width) = *spec_.crop;
    } else if (spec_.resize == ImageSpec::Resize::Exact) {
      height = spec_.resize_height;
      width = spec_.resize_width;
    }
    std::vector<int64_t> dims = tensor_dims(spec_, height, width);
    if (!fits(dims, type))
      throw Error("image spec gives " + shape_text(dims) + " but model input '" + input_->name() + "' is " +
                  type.to_string());

    files_ = folder_files(folder, is_image_file);
    if (files_.empty()) throw Error(folder.string() + ": no .jpg, .jpeg, .png or .bmp files in the folder");
  }

  std::optional<Feed> next() override {
    if (index_ >= files_.size()) return std::nullopt;
    return Feed{{input_->name(), read(files_[index_++])}};
  }
  std::optional<size_t> size() const override { return files_.size(); }
  bool can_rewind() const override { return true; }
  void rewind() override { index_ = 0; }
  std::string describe() const override {
    return "image folder " + folder_.string() + " (" + std::to_string(files_.size()) + " images)";
  }

 private:
  Image decode(const fs::path& file) const {
    int width = 0, height = 0, channels = 0;
    // 3 channels asked for: stb repeats grey and drops alpha.
    stbi_uc* data = stbi_load(file.c_str(), &width, &height, &channels, 3);
    if (!data) throw Error(file.string() + ": cannot decode the image: " + stbi_failure_reason());
    Image image{height, width, std::vector<float>(data, data + static_cast<size_t>(width) * height * 3)};
    stbi_image_free(data);
    return image;
  }

  ir::Tensor read(const fs::path& file) const {
    Image image = decode(file);
    const int64_t decoded_height = image.height, decoded_width = image.width;
    int64_t height = image.height, width = image.width;
    if (spec_.resize == ImageSpec::Resize::Exact) {
      height = spec_.resize_height;
      width = spec_.resize_width;
    } else if (spec_.resize == ImageSpec::Resize::ShorterSide) {
      if (width <= height) {
        height = spec_.resize_shorter * height / width;
        width = spec_.resize_shorter;
      } else {
        width = spec_.resize_shorter * width / height;
        height = spec_.resize_shorter;
      }
    }
    image = resize_height(resize_width(image, width), height);

    int64_t top = 0, left = 0;
    if (spec_.crop) {
      auto [crop_height, crop_width] = *spec_.crop;
      if (crop_height > height || crop_width > width)
        throw Error(file.string() + ": the image (" + (spec_.resize == ImageSpec::Resize::None ? "" : "after resize: ") +
                    size_text(height, width) + ") is smaller than crop=" + std::to_string(crop_height) + "x" +
                    std::to_string(crop_width));
      top = crop_offset(height, crop_height);
      left = crop_offset(width, crop_width);
      height = crop_height;
      width = crop_width;
    }

    std::vector<int64_t> dims = tensor_dims(spec_, height, width);
    if (!fits(dims, input_->type))
      throw Error(file.string() + ": the image (" + size_text(decoded_height, decoded_width) + ") gives " + shape_text(dims) + " but model input '" + input_->name() + "' is " +
                  input_->type.to_string() + "; set resize or crop in the image spec");

    ir::Tensor tensor = ir::Tensor::uninitialized(ir::DataType::Float, dims);
    std::span<float> out = tensor.mutable_values<float>();
    const bool nchw = spec_.layout == ImageSpec::Layout::NCHW;
    for (int64_t c = 0; c < 3; ++c) {
      const int64_t source = spec_.order == ImageSpec::Order::RGB ? c : 2 - c;
      const double scale = spec_.scale, mean = spec_.mean[c], stddev = spec_.stddev[c];
      for (int64_t y = 0; y < height; ++y)
        for (int64_t x = 0; x < width; ++x) {
          const double v = image.pixels[((top + y) * image.width + left + x) * 3 + source];
          const size_t at = nchw ? (c * height + y) * width + x : (y * width + x) * 3 + c;
          out[at] = static_cast<float>((v * scale - mean) / stddev);
        }
    }
    return tensor;
  }

  fs::path folder_;
  ImageSpec spec_;
  const ir::Value* input_ = nullptr;
  std::vector<fs::path> files_;
  size_t index_ = 0;
};

}  // namespace

std::string ImageSpec::to_string() const {
  std::string s = "resize=";
  if (resize == Resize::None) s += "none";
  if (resize == Resize::ShorterSide) s += std::to_string(resize_shorter);
  if (resize == Resize::Exact) s += std::to_string(resize_height) + "x" + std::to_string(resize_width);
  s += ",crop=" + (crop ? std::to_string(crop->first) + "x" + std::to_string(crop->second) : std::string("none"));
  s += std::string(",order=") + (order == Order::RGB ? "rgb" : "bgr");
  s += ",scale=" + number_text(scale);
  s += ",mean=" + number_text(mean[0]) + ":" + number_text(mean[1]) + ":" + number_text(mean[2]);
  s += ",std=" + number_text(stddev[0]) + ":" + number_text(stddev[1]) + ":" + number_text(stddev[2]);
  s += std::string(",layout=") + (layout == Layout::NCHW ? "nchw" : "nhwc");
  return s;
}

ImageSpec parse_image_spec(const std::string& text) {
  ImageSpec spec;
  if (trim(text).empty()) return spec;
  std::set<std::string> seen;
  for (const std::string& item : split(text, ',')) {
    size_t eq = item.find('=');
    if (eq == std::string::npos)
      throw Error("image spec: '" + item + "' is not KEY=VALUE (keys: " + kSpecKeys + ")");
    std::string key = lower(trim(item.substr(0, eq)));
    std::string value = trim(item.substr(eq + 1));
    if (!is_spec_key(key))
      throw Error("image spec: unknown key '" + key + "' in '" + item + "' (keys: " + kSpecKeys + ")");
    if (!seen.insert(key).second) throw Error("image spec: '" + key + "' is given twice");
    spec_set(spec, key, value, value);
  }
  return spec;
}

ImageSpec image_spec_from_json(const nlohmann::json& json) {
  if (!json.is_object()) throw Error("image spec: a JSON object is needed, not " + json.dump());
  ImageSpec spec;
  for (const auto& [key, value] : json.items()) {
    if (!is_spec_key(key)) throw Error("image spec: unknown key '" + key + "' (keys: " + kSpecKeys + ")");
    std::string text;
    if (value.is_string()) {
      text = value.get<std::string>();
    } else if (value.is_number()) {
      text = value.dump();
    } else if (value.is_array() && !value.empty() &&
               std::all_of(value.begin(), value.end(), [](const nlohmann::json& e) { return e.is_number(); })) {
      const char* sep = key == "resize" || key == "crop" ? "x" : ":";
      for (const nlohmann::json& e : value) text += (text.empty() ? "" : sep) + e.dump();
    } else {
      spec_fail(key, value.dump(), "give a string, a number or a list of numbers");
    }
    spec_set(spec, key, text, value.dump());
  }
  return spec;
}

std::unique_ptr<DataReader> make_image_folder_reader(const fs::path& folder, const std::vector<const ir::Value*>& inputs,
                                                     const ImageSpec& spec) {
  return std::make_unique<ImageFolderReader>(folder, inputs, spec);
}

}  // namespace onnxptq::calib
