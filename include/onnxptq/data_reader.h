// The calibration data protocol of the seeds: a reader gives one feed at a time (input name to
// tensor), or nothing at the end; it may know its length and may start over. Implement it to
// feed onnxptq from anywhere; the built-in readers (folders of .npy/.npz or images, random
// data) implement it too.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "onnxptq/tensor.h"

namespace onnxptq {

// One sample: a tensor for each model input, by name.
using Feed = std::map<std::string, Tensor>;

class DataReader {
 public:
  virtual ~DataReader() = default;
  // The next sample, or nothing at the end.
  virtual std::optional<Feed> next() = 0;
  // How many samples there are, when known in advance.
  virtual std::optional<size_t> size() const { return std::nullopt; }
  // Readers that can start over say so; methods needing several passes use it.
  virtual bool can_rewind() const { return false; }
  // Starts over; the default refuses (Error naming the reader).
  virtual void rewind();
  // For messages: "folder calib/ (200 files)".
  virtual std::string describe() const = 0;
};

}  // namespace onnxptq
