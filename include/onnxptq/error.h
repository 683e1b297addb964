// The one exception type of onnxptq: a message a user can act on, on one line.
#pragma once

#include <stdexcept>
#include <string>

namespace onnxptq {

// Bad input (a file, a model, an option, calibration data). The command line prints
// "error: <what()>" and exits 2. Messages name the file, node, op and tensor concerned.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace onnxptq
