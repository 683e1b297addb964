#include "ir/bytes.h"

#include <cstdint>
#include <cstring>

namespace onnxptq {

namespace {

// Data aligned to a cache line: a 64-byte vector load (AVX-512) of an element run starting there
// never spans two lines (std::make_shared<std::byte[]> puts the data after its control block,
// 16-byte aligned, which split three loads in four). One allocation, with the control block, as
// make_shared makes it: an aligned operator new and a separate block made a chain of 80 tiny
// convolutions 8 % slower.
constexpr size_t kAlignment = 64;

}  // namespace

Bytes Bytes::zeros(size_t size) {
  Bytes b = uninitialized(size);
  if (size) std::memset(const_cast<std::byte*>(b.data_), 0, size);
  return b;
}

Bytes Bytes::uninitialized(size_t size) {
  Bytes b;
  auto storage = std::make_shared_for_overwrite<std::byte[]>(size + kAlignment - 1);
  const auto address = reinterpret_cast<uintptr_t>(storage.get());
  b.data_ = storage.get() + ((kAlignment - address % kAlignment) % kAlignment);
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
