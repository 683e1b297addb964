// The one exception type of onnxptq: a message a user can act on, on one line, and its kind.
#pragma once

#include <stdexcept>
#include <string>

namespace onnxptq {

enum class ErrorKind {
  bad_input,    // a file, a model, an option or calibration data is wrong: the caller can fix it
  unsupported,  // valid, but asks for something onnxptq does not do (an option refused by name)
  internal,     // a defect of onnxptq
};

// The command line prints "error: <what()>" and exits 2 (bad input), 3 (unsupported) or 1
// (internal); Python raises onnxptq.Error, onnxptq.UnsupportedError or onnxptq.InternalError.
// Messages name the file, node, op and tensor concerned.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, ErrorKind kind = ErrorKind::bad_input)
      : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// An Error of kind unsupported: `throw unsupported("... is not built yet")`.
inline Error unsupported(const std::string& message) { return Error(message, ErrorKind::unsupported); }

}  // namespace onnxptq
