// One value (a tensor name) for every sample of a fast finetune: held in memory, or with a
// spill directory (Quark's MemOptLevel 2 and CacheDir) written to a file there and read back a
// sample at a time, so that memory does not grow with the number of samples. The file is
// unlinked as soon as it is created: nothing is left behind, even when the process dies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "calib/data_reader.h"
#include "ir/tensor.h"

namespace onnxptq::finetune {

class SampleStore {
 public:
  // `samples` tensors, each set once; with `spill`, kept in a file in that directory.
  explicit SampleStore(size_t samples, const std::optional<std::filesystem::path>& spill = std::nullopt);
  ~SampleStore();
  SampleStore(const SampleStore&) = delete;
  SampleStore& operator=(const SampleStore&) = delete;

  size_t size() const { return entries_.size(); }
  bool spilled() const { return fd_ >= 0; }

  // Sets sample i (numeric tensors only when spilled); samples may be set from several threads.
  void set(size_t i, const ir::Tensor& value);
  // Adds a sample at the end (not while other threads use the store).
  void push_back(const ir::Tensor& value);
  // Sample i: the tensor held, or read back from the file. Error if it was never set.
  ir::Tensor get(size_t i) const;
  const std::vector<int64_t>& dims(size_t i) const;

 private:
  struct Entry {
    bool stored = false;
    ir::DataType dtype = ir::DataType::Float;
    std::vector<int64_t> dims;
    uint64_t offset = 0, bytes = 0;  // in the file, when spilled
    ir::Tensor held;                 // when not
  };
  std::vector<Entry> entries_;
  int fd_ = -1;
  std::filesystem::path path_;
  std::mutex mutex_;  // entries_' fields and the file's end
  uint64_t end_ = 0;
};

using SharedStore = std::shared_ptr<SampleStore>;

// The model inputs of a finetune, one store per input name.
using SampleInputs = std::map<std::string, SharedStore>;

// Up to `max_samples` samples of `reader` as stores (in memory, or spilled to `spill`), read one
// at a time. Error when a sample gives other input names than the first.
SampleInputs read_samples(DataReader& reader, size_t max_samples,
                          const std::optional<std::filesystem::path>& spill = std::nullopt);
// The same from feeds in memory.
SampleInputs stores_of(const std::vector<Feed>& feeds,
                       const std::optional<std::filesystem::path>& spill = std::nullopt);

// Sample i of every input: a feed.
Feed feed_of(const SampleInputs& inputs, size_t i);

// The number of samples in `inputs` (0 when there is no input).
size_t sample_count(const SampleInputs& inputs);

}  // namespace onnxptq::finetune
