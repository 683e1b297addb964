// Files: read-only memory maps (external data, model bytes) and outputs written to a temporary
// file beside the target, renamed into place only when complete.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>

#include "onnxptq/files.h"

namespace onnxptq::ir {

class MappedFile {
 public:
  // Error naming the file when it is missing, a directory or unreadable.
  static std::shared_ptr<const MappedFile> open(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  MappedFile() = default;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

class AtomicFile {
 public:
  explicit AtomicFile(std::filesystem::path target);
  ~AtomicFile();  // removes the temporary file unless committed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  int fd() const { return fd_; }
  void write(const void* data, size_t size);
  // Closes and renames the temporary file to the target.
  void commit();
  const std::filesystem::path& target() const { return target_; }

 private:
  std::filesystem::path target_;
  std::filesystem::path temp_;
  int fd_ = -1;
  bool committed_ = false;
};

// write_text_file and check_output_path (onnxptq/files.h) belong here too.
using onnxptq::check_output_path;
using onnxptq::write_text_file;

// Error "WHAT: no such file" or "WHAT: not a file" (a folder) unless `path` is a regular file.
void require_file(const std::filesystem::path& path, const std::string& what);

// A new folder under the system's temporary folder, removed with all it holds when this goes.
class TemporaryFolder {
 public:
  // Error naming the place when it cannot be made.
  explicit TemporaryFolder(const std::string& prefix);
  ~TemporaryFolder();
  TemporaryFolder(const TemporaryFolder&) = delete;
  TemporaryFolder& operator=(const TemporaryFolder&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// "cannot read 'x': No such file or directory"-style text for the last errno.
std::string errno_text();

}  // namespace onnxptq::ir
