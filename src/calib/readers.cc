// The built-in calibration readers: a folder of .npy/.npz files, and seeded random data.
#include <algorithm>
#include <cmath>
#include <limits>

#include "calib/data_reader.h"
#include "ir/float16.h"
#include "ir/npy.h"
#include "onnxptq/error.h"

void onnxptq::DataReader::rewind() { throw Error(describe() + " cannot start over"); }

namespace onnxptq::calib {

namespace {

namespace fs = std::filesystem;

std::string input_names(const std::vector<const ir::Value*>& inputs) {
  std::string names;
  for (const ir::Value* v : inputs) names += (names.empty() ? "" : ", ") + v->name();
  return names;
}

}  // namespace

std::vector<fs::path> folder_files(const fs::path& folder, const std::function<bool(const fs::path&)>& wanted) {
  std::error_code ec;
  if (!fs::is_directory(folder, ec))
    throw Error(folder.string() + (fs::exists(folder, ec) ? ": not a folder" : ": no such folder"));
  std::vector<fs::path> files;
  fs::directory_iterator it(folder, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (!wanted(it->path())) continue;
    fs::file_status status = it->status(ec);
    if (ec) throw Error(it->path().string() + ": cannot read this calibration sample: " + ec.message());
    if (fs::is_regular_file(status)) files.push_back(it->path());
  }
  if (ec) throw Error(folder.string() + ": cannot list the folder: " + ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

namespace {

class NpyFolderReader : public DataReader {
 public:
  NpyFolderReader(const fs::path& folder, const std::vector<const ir::Value*>& inputs) : folder_(folder) {
    files_ = folder_files(folder, [](const fs::path& p) { return p.extension() == ".npy" || p.extension() == ".npz"; });
    if (files_.empty()) throw Error(folder.string() + ": no .npy or .npz files in the folder");
    for (const ir::Value* v : inputs) names_.push_back(v->name());
    all_names_ = input_names(inputs);
  }

  std::optional<Feed> next() override {
    if (index_ >= files_.size()) return std::nullopt;
    const fs::path& file = files_[index_++];
    if (file.extension() == ".npz") {
      Feed feed;
      for (auto& [key, tensor] : load_npz(file)) feed[key] = std::move(tensor);
      return feed;
    }
    if (names_.size() != 1)
      throw Error(file.string() + ": an .npy sample can only feed a model with one input; this model has " +
                  std::to_string(names_.size()) + " (" + all_names_ + "): use .npz files with one array per input");
    return Feed{{names_[0], ir::load_npy(file)}};
  }
  std::optional<size_t> size() const override { return files_.size(); }
  bool can_rewind() const override { return true; }
  void rewind() override { index_ = 0; }
  std::string describe() const override {
    return "folder " + folder_.string() + " (" + std::to_string(files_.size()) + " files)";
  }

 private:
  fs::path folder_;
  std::vector<fs::path> files_;
  std::vector<std::string> names_;
  std::string all_names_;
  size_t index_ = 0;
};

// The seeds' stand-ins for dimensions the model leaves open.
int64_t default_dim(size_t index, size_t rank) {
  if (index == 0) return 1;
  if (rank == 4) return index == 1 ? 3 : 32;
  if (rank == 2 && index == 1) return 16;
  return 1;
}

// The values of an integer type, from its lowest to its highest (long double holds them all).
std::optional<std::pair<long double, long double>> integer_limits(ir::DataType type) {
  auto of = [](auto zero) {
    using T = decltype(zero);
    return std::pair<long double, long double>(std::numeric_limits<T>::lowest(), std::numeric_limits<T>::max());
  };
  switch (type) {
    case ir::DataType::Int8:
      return of(int8_t{});
    case ir::DataType::UInt8:
      return of(uint8_t{});
    case ir::DataType::Int16:
      return of(int16_t{});
    case ir::DataType::UInt16:
      return of(uint16_t{});
    case ir::DataType::Int32:
      return of(int32_t{});
    case ir::DataType::UInt32:
      return of(uint32_t{});
    case ir::DataType::Int64:
      return of(int64_t{});
    case ir::DataType::UInt64:
      return of(uint64_t{});
    default:
      return std::nullopt;
  }
}

class RandomReader : public DataReader {
 public:
  RandomReader(const std::vector<const ir::Value*>& inputs, RandomReaderOptions options) : options_(std::move(options)) {
    for (const auto& [name, dims] : options_.shapes)
      if (std::none_of(inputs.begin(), inputs.end(), [&](const ir::Value* v) { return v->name() == name; }))
        throw Error("random data: no model input is named '" + name + "' (inputs: " + input_names(inputs) + ")");
    for (const auto& [name, range] : options_.ranges) {
      if (std::none_of(inputs.begin(), inputs.end(), [&](const ir::Value* v) { return v->name() == name; }))
        throw Error("random data: no model input is named '" + name + "' (inputs: " + input_names(inputs) + ")");
      if (!(range.first <= range.second) || !std::isfinite(range.first) || !std::isfinite(range.second))
        throw Error("random data range for '" + name + "' must be finite [low, high] with low <= high");
    }
    for (const ir::Value* v : inputs) {
      Slot slot{v->name(), v->type.elem_type, {}};
      if (!v->type.is_tensor()) throw Error("random data: input '" + v->name() + "' is not a tensor");
      auto range = options_.ranges.find(v->name());
      if (auto limits = integer_limits(slot.type); limits && range != options_.ranges.end()) {
        const long double first = std::ceil(static_cast<long double>(range->second.first)),
                          last = std::floor(static_cast<long double>(range->second.second));
        if (first > last || first < limits->first || last > limits->second)
          throw Error("random data range for '" + v->name() + "' must hold a whole number and stay within " +
                      std::string(ir::data_type_name(slot.type)));
      }
      auto given = options_.shapes.find(v->name());
      if (given != options_.shapes.end()) {
        slot.dims = given->second;
        if (v->type.has_shape) {
          bool fits = slot.dims.size() == v->type.shape.size();
          for (size_t i = 0; fits && i < slot.dims.size(); ++i)
            fits = !v->type.shape[i].has_value || v->type.shape[i].value == slot.dims[i];
          if (!fits)
            throw Error("random data shape " + ir::dims_to_string(slot.dims) + " for '" + v->name() +
                        "' does not fit the model's " + v->type.to_string());
        }
      } else if (v->type.has_shape) {
        for (size_t i = 0; i < v->type.shape.size(); ++i) {
          const ir::Dim& d = v->type.shape[i];
          slot.dims.push_back(d.has_value && d.value > 0 ? d.value : default_dim(i, v->type.shape.size()));
        }
      } else {
        throw Error("random data: input '" + v->name() + "' has no known rank; give its shape");
      }
      slots_.push_back(std::move(slot));
    }
  }

  std::optional<Feed> next() override {
    if (produced_ >= options_.count) return std::nullopt;
    // Each sample has its own stream, so sample k is the same whatever was read before it.
    uint64_t stream = splitmix64(options_.seed * kGolden + produced_++);
    Feed feed;
    for (const Slot& s : slots_) {
      feed[s.name] = make(s, stream);
      stream = splitmix64(stream);  // the next input's
    }
    return feed;
  }
  std::optional<size_t> size() const override { return options_.count; }
  bool can_rewind() const override { return true; }
  void rewind() override { produced_ = 0; }
  std::string describe() const override { return "random data (seed " + std::to_string(options_.seed) + ")"; }

 private:
  struct Slot {
    std::string name;
    ir::DataType type;
    std::vector<int64_t> dims;
  };

  // SplitMix64 (Steele, Lea and Flood 2014): draw i of a stream is a mix of stream + (i + 1) *
  // kGolden, so the values need no sequential state; the loop vectorises, and a sample of millions
  // of values costs a small part of one inference (std::mt19937_64 cost 10 ms an image of 640x640).
  static constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;
  static constexpr uint64_t splitmix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

  // `digits`: the precision of the type values from [0, 1) end in, so that none rounds to 1.
  template <class T>
  static void fill(ir::Tensor& t, uint64_t stream, const std::pair<double, double>* range,
                   int digits = std::numeric_limits<T>::digits) {
    auto values = t.mutable_values<T>();
    const size_t n = values.size();
    T* out = values.data();
    if constexpr (std::is_floating_point_v<T>) {
      // The top `digits` bits over 2^digits: uniform in [0, 1) and exact.
      const double low = range ? range->first : 0.0, span = range ? range->second - range->first : 1.0;
      const int drop = 64 - digits;
      const double unit = std::ldexp(1.0, -digits);
#pragma omp simd
      for (size_t i = 0; i < n; ++i) {
        const double u = static_cast<double>(splitmix64(stream + (i + 1) * kGolden) >> drop) * unit;
        out[i] = static_cast<T>(low + span * u);
      }
    } else {
      if (!range) return;  // as the seeds: integers from [0, 1) are all 0
      // (The constructor checked that [first, last] holds values of T.)
      const long double first = std::ceil(static_cast<long double>(range->first)),
                        last = std::floor(static_cast<long double>(range->second));
      // Lemire's multiply-shift into [first, last]: its bias, span / 2^64, is far below anything a
      // calibration could see. The span fits 64 bits: no double range holds all 2^64 values.
      const uint64_t low =
          first < 0 ? static_cast<uint64_t>(static_cast<int64_t>(first)) : static_cast<uint64_t>(first);
      const uint64_t span = static_cast<uint64_t>(last - first) + 1;
      for (size_t i = 0; i < n; ++i) {
        const auto wide = static_cast<unsigned __int128>(splitmix64(stream + (i + 1) * kGolden)) * span;
        out[i] = static_cast<T>(low + static_cast<uint64_t>(wide >> 64));
      }
    }
  }

  ir::Tensor make(const Slot& s, uint64_t stream) {
    auto it = options_.ranges.find(s.name);
    const std::pair<double, double>* range = it == options_.ranges.end() ? nullptr : &it->second;
    ir::Tensor t(s.type, s.dims);
    if (s.type == ir::DataType::Bool) return t;  // all false
    if (s.type == ir::DataType::Float16) {
      ir::Tensor f(ir::DataType::Float, s.dims);
      // [0, 1) in float16's 11 digits (none rounds to 1); a range given holds its ends.
      fill<float>(f, stream, range, range ? std::numeric_limits<float>::digits : 11);
      ir::Tensor h(ir::DataType::Float16, s.dims);
      auto src = f.values<float>();
      auto dst = h.mutable_values<uint16_t>();
      for (size_t i = 0; i < src.size(); ++i) dst[i] = ir::float_to_half(src[i]);
      return h;
    }
    if (s.type != ir::DataType::Float && s.type != ir::DataType::Double && !integer_limits(s.type))
      throw Error("random data: input '" + s.name + "' is " + std::string(ir::data_type_name(s.type)) +
                  ", which the random reader does not make");
    ir::visit_type<ir::TypeSet::Numeric>(s.type, "random data",
                                         [&](auto zero) { fill<decltype(zero)>(t, stream, range); });
    return t;
  }

  RandomReaderOptions options_;
  std::vector<Slot> slots_;
  size_t produced_ = 0;
};

// Samples [begin, end) of another reader; it starts the source over (when it can) each time it
// starts, so two subsets of one source may be read in turns.
class SubsetReader : public DataReader {
 public:
  SubsetReader(DataReader& source, size_t begin, size_t end) : source_(source), begin_(begin), end_(end) {}

  std::optional<Feed> next() override {
    if (position_ == 0 && !at_begin_) {
      // Another reader of the same source may have moved it.
      if (source_.can_rewind()) source_.rewind();
      for (; position_ < begin_; ++position_)
        if (!source_.next()) return std::nullopt;
      at_begin_ = true;
    }
    if (position_ >= end_) return std::nullopt;
    std::optional<Feed> feed = source_.next();
    if (feed) ++position_;
    return feed;
  }
  std::optional<size_t> size() const override {
    std::optional<size_t> n = source_.size();
    if (!n) return std::nullopt;
    return std::min(*n, end_) - std::min(*n, begin_);
  }
  bool can_rewind() const override { return source_.can_rewind(); }
  void rewind() override {
    position_ = 0;
    at_begin_ = false;
  }
  std::string describe() const override {
    return "samples " + std::to_string(begin_) + ".." + std::to_string(end_ - 1) + " of " + source_.describe();
  }

 private:
  DataReader& source_;
  size_t begin_, end_;
  size_t position_ = 0;
  bool at_begin_ = false;  // position_ counts from the source's start
};

}  // namespace

std::unique_ptr<DataReader> make_npy_folder_reader(const fs::path& folder, const std::vector<const ir::Value*>& inputs) {
  return std::make_unique<NpyFolderReader>(folder, inputs);
}

std::unique_ptr<DataReader> make_random_reader(const std::vector<const ir::Value*>& inputs,
                                               const RandomReaderOptions& options) {
  return std::make_unique<RandomReader>(inputs, options);
}

std::unique_ptr<DataReader> make_subset_reader(DataReader& source, size_t begin, size_t end) {
  if (begin >= end) throw Error("an empty subset of " + source.describe());
  return std::make_unique<SubsetReader>(source, begin, end);
}

}  // namespace onnxptq::calib
