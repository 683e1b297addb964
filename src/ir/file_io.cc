#include "ir/file_io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>

#include "onnxptq/error.h"

namespace onnxptq::ir {

std::string errno_text() { return std::strerror(errno); }

std::shared_ptr<const MappedFile> MappedFile::open(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open '" + path.string() + "': " + errno_text());
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error("cannot read '" + path.string() + "': not a regular file");
  }
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ > 0) {
    void* p = mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      std::string why = errno_text();
      ::close(fd);
      throw Error("cannot read '" + path.string() + "': " + why);
    }
    file->data_ = static_cast<const std::byte*>(p);
  }
  ::close(fd);  // the mapping stays valid
  return file;
}

MappedFile::~MappedFile() {
  if (data_) munmap(const_cast<std::byte*>(data_), size_);
}

AtomicFile::AtomicFile(std::filesystem::path target) : target_(std::move(target)) {
  // The temporary file is renamed over the target: a device or a pipe would be replaced by it.
  std::error_code ec;
  auto status = std::filesystem::status(target_, ec);
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
    throw Error("cannot write '" + target_.string() + "': it exists and is not a regular file");
  std::filesystem::path dir = target_.has_parent_path() ? target_.parent_path() : ".";
  std::random_device entropy;
  for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
    temp_ = dir / ("." + target_.filename().string() + ".tmp" + std::to_string(entropy() % 1000000));
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ < 0 && errno != EEXIST) break;
  }
  if (fd_ < 0) throw Error("cannot write '" + target_.string() + "': " + errno_text());
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_.c_str());
}

void AtomicFile::write(const void* data, size_t size) {
  auto p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd_, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error("cannot write '" + target_.string() + "': " + errno_text());
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  if (::close(fd_) != 0) {
    fd_ = -1;
    throw Error("cannot write '" + target_.string() + "': " + errno_text());
  }
  fd_ = -1;
  if (std::rename(temp_.c_str(), target_.c_str()) != 0)
    throw Error("cannot write '" + target_.string() + "': " + errno_text());
  committed_ = true;
}

void require_file(const std::filesystem::path& path, const std::string& what) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status)) throw Error(what + ": no such file");
  if (!std::filesystem::is_regular_file(status)) throw Error(what + ": not a file");
}

TemporaryFolder::TemporaryFolder(const std::string& prefix) {
  std::error_code ec;
  const std::filesystem::path temp = std::filesystem::temp_directory_path(ec);
  if (ec) throw Error("cannot make a temporary folder: the temporary directory (TMPDIR) " + ec.message());
  std::string pattern = (temp / (prefix + "-XXXXXX")).string();
  if (!mkdtemp(pattern.data())) throw Error("cannot make a temporary folder " + pattern + ": " + errno_text());
  path_ = pattern;
}

TemporaryFolder::~TemporaryFolder() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace onnxptq::ir

namespace onnxptq {

void check_output_path(const std::filesystem::path& input, const std::filesystem::path& output,
                       const std::string& option) {
  std::error_code ec;
  if (std::filesystem::equivalent(input, output, ec))
    throw Error(option + " '" + output.string() + "' is the input model " + input.string() +
                ", which is never modified");
  auto status = std::filesystem::status(output, ec);
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
    throw Error(option + " '" + output.string() + "' exists and is not a regular file");
}

std::string read_text_file(const std::filesystem::path& path, const std::string& what) {
  ir::require_file(path, what);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(what + ": cannot read the file");
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) throw Error(what + ": cannot read the file");
  return text;
}

void write_text_file(const std::filesystem::path& path, const std::string& text) {
  ir::AtomicFile file(path);
  file.write(text.data(), text.size());
  file.commit();
}

}  // namespace onnxptq
