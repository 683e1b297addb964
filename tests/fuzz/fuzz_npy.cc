// Fuzz target: bytes -> the .npy readers (from memory and from a file, which maps the data) and
// the .npz reader. A tensor read must hold exactly the bytes its shape needs.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "calib/data_reader.h"
#include "ir/npy.h"
#include "onnxptq/error.h"

using namespace onnxptq;

namespace {

void check(const ir::Tensor& t, const char* reader) {
  if (t.dtype() != ir::DataType::String && t.byte_size() != ir::data_type_bytes(t.dtype(), t.size())) {
    fprintf(stderr, "fuzz_npy: %s gave a tensor %s of %zu bytes\n", reader, ir::dims_to_string(t.dims()).c_str(),
            t.byte_size());
    abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("onnxptq_fuzz_npy_" + std::to_string(getpid()));
  std::ofstream(file, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), size);

  try {
    check(ir::parse_npy(reinterpret_cast<const std::byte*>(data), size, "fuzz input"), "parse_npy");
  } catch (const Error&) {
  }
  try {
    check(ir::load_npy(file), "load_npy");
  } catch (const Error&) {
  }
  try {
    for (const auto& [name, t] : calib::load_npz(file)) check(t, "load_npz");
  } catch (const Error&) {
  }
  std::filesystem::remove(file);
  return 0;
}
