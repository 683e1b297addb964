#include "ir/bytes.h"

#include <cstring>

namespace onnxptq {

Bytes Bytes::zeros(size_t size) {
  Bytes b;
  auto storage = std::make_shared<std::byte[]>(size);  // value-initialised: zeros
  b.data_ = storage.get();
  b.size_ = size;
  b.owner_ = std::move(storage);
  b.writable_ = true;
  return b;
}

Bytes Bytes::uninitialized(size_t size) {
  Bytes b;
  auto storage = std::make_shared_for_overwrite<std::byte[]>(size);
  b.data_ = storage.get();
  b.size_ = size;
  b.owner_ = std::move(storage);
  b.writable_ = true;
  return b;
}

Bytes Bytes::copy_of(const void* data, size_t size) {
  Bytes b = uninitialized(size);
  if (size) std::memcpy(const_cast<std::byte*>(b.data_), data, size);
  return b;
}

Bytes Bytes::adopt(std::string&& data) {
  Bytes b;
  auto storage = std::make_shared<std::string>(std::move(data));
  b.data_ = reinterpret_cast<const std::byte*>(storage->data());
  b.size_ = storage->size();
  b.owner_ = std::move(storage);
  b.writable_ = true;
  return b;
}

Bytes Bytes::view(std::shared_ptr<const void> owner, const std::byte* data, size_t size) {
  Bytes b;
  b.owner_ = std::move(owner);
  b.data_ = data;
  b.size_ = size;
  return b;
}

std::byte* Bytes::mutable_data() {
  if (!writable_ || owner_.use_count() > 1) *this = copy_of(data_, size_);
  return const_cast<std::byte*>(data_);
}

}  // namespace onnxptq
