// Shared, copy-on-write byte storage for tensor data: owned memory, a std::string taken
// over from a parsed protobuf without copying, or a view into a memory-mapped file.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace onnxptq {

class Bytes {
 public:
  Bytes() = default;

  static Bytes zeros(size_t size);
  // Storage whose contents are undefined until written: for outputs a kernel fills entirely.
  static Bytes uninitialized(size_t size);
  static Bytes copy_of(const void* data, size_t size);
  static Bytes adopt(std::string&& data);
  // A read-only view of `size` bytes at `data`, kept alive by `owner` (e.g. a file mapping).
  static Bytes view(std::shared_ptr<const void> owner, const std::byte* data, size_t size);

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // Writable bytes; copies first when the storage is shared with another Bytes or is a view.
  std::byte* mutable_data();

  // True when both refer to the same storage (a cheap test, not a comparison of contents).
  bool same_storage(const Bytes& other) const { return data_ == other.data_ && size_ == other.size_; }

 private:
  std::shared_ptr<const void> owner_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
  bool writable_ = false;
};

}  // namespace onnxptq
