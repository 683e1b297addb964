// The built-in calibration readers: a folder of .npy/.npz files, and seeded random data.
#include <algorithm>
#include <cmath>
#include <random>

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

class NpyFolderReader : public DataReader {
 public:
  NpyFolderReader(const fs::path& folder, const std::vector<const ir::Value*>& inputs) : folder_(folder) {
    std::error_code ec;
    if (!fs::is_directory(folder, ec)) throw Error(folder.string() + ": no such folder");
    for (const auto& entry : fs::directory_iterator(folder))
      if (entry.is_regular_file() && (entry.path().extension() == ".npy" || entry.path().extension() == ".npz"))
        files_.push_back(entry.path());
    if (files_.empty()) throw Error(folder.string() + ": no .npy or .npz files in the folder");
    std::sort(files_.begin(), files_.end());
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
    std::mt19937_64 rng(options_.seed * 0x9E3779B97F4A7C15ULL + produced_++);
    Feed feed;
    for (const Slot& s : slots_) feed[s.name] = make(s, rng);
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

  template <class T>
  void fill(ir::Tensor& t, std::mt19937_64& rng, const std::pair<double, double>* range) {
    auto values = t.mutable_values<T>();
    if constexpr (std::is_floating_point_v<T>) {
      std::uniform_real_distribution<double> u(range ? range->first : 0.0, range ? range->second : 1.0);
      for (T& v : values) v = static_cast<T>(u(rng));
    } else {
      if (!range) return;  // as the seeds: integers from [0, 1) are all 0
      std::uniform_int_distribution<int64_t> u(static_cast<int64_t>(std::ceil(range->first)),
                                               static_cast<int64_t>(std::floor(range->second)));
      for (T& v : values) v = static_cast<T>(u(rng));
    }
  }

  ir::Tensor make(const Slot& s, std::mt19937_64& rng) {
    auto it = options_.ranges.find(s.name);
    const std::pair<double, double>* range = it == options_.ranges.end() ? nullptr : &it->second;
    ir::Tensor t(s.type, s.dims);
    switch (s.type) {
      case ir::DataType::Float: fill<float>(t, rng, range); break;
      case ir::DataType::Double: fill<double>(t, rng, range); break;
      case ir::DataType::Int8: fill<int8_t>(t, rng, range); break;
      case ir::DataType::UInt8: fill<uint8_t>(t, rng, range); break;
      case ir::DataType::Int16: fill<int16_t>(t, rng, range); break;
      case ir::DataType::UInt16: fill<uint16_t>(t, rng, range); break;
      case ir::DataType::Int32: fill<int32_t>(t, rng, range); break;
      case ir::DataType::UInt32: fill<uint32_t>(t, rng, range); break;
      case ir::DataType::Int64: fill<int64_t>(t, rng, range); break;
      case ir::DataType::UInt64: fill<uint64_t>(t, rng, range); break;
      case ir::DataType::Bool: break;  // all false
      case ir::DataType::Float16: {
        ir::Tensor f(ir::DataType::Float, s.dims);
        fill<float>(f, rng, range);
        ir::Tensor h(ir::DataType::Float16, s.dims);
        auto src = f.values<float>();
        auto dst = h.mutable_values<uint16_t>();
        for (size_t i = 0; i < src.size(); ++i) dst[i] = ir::float_to_half(src[i]);
        return h;
      }
      default:
        throw Error("random data: input '" + s.name + "' is " + std::string(ir::data_type_name(s.type)) +
                    ", which the random reader does not make");
    }
    return t;
  }

  RandomReaderOptions options_;
  std::vector<Slot> slots_;
  size_t produced_ = 0;
};

}  // namespace

std::unique_ptr<DataReader> make_npy_folder_reader(const fs::path& folder, const std::vector<const ir::Value*>& inputs) {
  return std::make_unique<NpyFolderReader>(folder, inputs);
}

std::unique_ptr<DataReader> make_random_reader(const std::vector<const ir::Value*>& inputs,
                                               const RandomReaderOptions& options) {
  return std::make_unique<RandomReader>(inputs, options);
}

}  // namespace onnxptq::calib
