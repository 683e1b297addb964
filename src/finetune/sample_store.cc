#include "finetune/sample_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "onnxptq/error.h"

namespace onnxptq::finetune {
namespace {

std::atomic<uint64_t> file_counter{0};

[[noreturn]] void io_error(const std::string& what, const std::filesystem::path& path) {
  throw Error("fast finetune cache: " + what + " " + path.string() + ": " + std::strerror(errno));
}

}  // namespace

SampleStore::SampleStore(size_t samples, const std::optional<std::filesystem::path>& spill) : entries_(samples) {
  if (!spill) return;
  path_ = *spill / ("onnxptq-finetune-" + std::to_string(::getpid()) + "-" + std::to_string(file_counter++) + ".bin");
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd_ < 0) io_error("cannot create", path_);
  ::unlink(path_.c_str());  // the open descriptor keeps the data until it is closed
}

SampleStore::~SampleStore() {
  if (fd_ >= 0) ::close(fd_);
}

void SampleStore::set(size_t i, const ir::Tensor& value) {
  if (i >= entries_.size())
    throw Error("fast finetune cache: sample " + std::to_string(i) + " of " + std::to_string(entries_.size()));
  if (fd_ < 0) {
    std::lock_guard lock(mutex_);
    Entry& e = entries_[i];
    e = {true, value.dtype(), value.dims(), 0, 0, value};
    return;
  }
  if (value.dtype() == ir::DataType::String) throw Error("fast finetune cache: string tensors are not spilled");
  const uint64_t bytes = value.byte_size();
  uint64_t offset;
  {
    std::lock_guard lock(mutex_);
    offset = end_;
    end_ += bytes;
  }
  const std::byte* data = value.bytes().data();
  for (uint64_t done = 0; done < bytes;) {
    ssize_t n = ::pwrite(fd_, data + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) io_error("cannot write", path_);
    done += static_cast<uint64_t>(n);
  }
  std::lock_guard lock(mutex_);
  entries_[i] = {true, value.dtype(), value.dims(), offset, bytes, {}};
}

void SampleStore::push_back(const ir::Tensor& value) {
  entries_.emplace_back();
  set(entries_.size() - 1, value);
}

ir::Tensor SampleStore::get(size_t i) const {
  if (i >= entries_.size() || !entries_[i].stored)
    throw Error("fast finetune cache: sample " + std::to_string(i) + " was never stored");
  const Entry& e = entries_[i];
  if (fd_ < 0) return e.held;
  ir::Tensor t = ir::Tensor::uninitialized(e.dtype, e.dims);
  std::byte* data = t.mutable_bytes();
  for (uint64_t done = 0; done < e.bytes;) {
    ssize_t n = ::pread(fd_, data + done, e.bytes - done, static_cast<off_t>(e.offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) io_error("cannot read", path_);
    done += static_cast<uint64_t>(n);
  }
  return t;
}

const std::vector<int64_t>& SampleStore::dims(size_t i) const {
  if (i >= entries_.size() || !entries_[i].stored)
    throw Error("fast finetune cache: sample " + std::to_string(i) + " was never stored");
  return entries_[i].dims;
}

SampleInputs read_samples(DataReader& reader, size_t max_samples, const std::optional<std::filesystem::path>& spill) {
  SampleInputs inputs;
  for (size_t i = 0; i < max_samples; ++i) {
    std::optional<Feed> feed = reader.next();
    if (!feed) break;
    if (i == 0)
      for (const auto& [name, value] : *feed) inputs[name] = std::make_shared<SampleStore>(0, spill);
    if (feed->size() != inputs.size())
      throw Error("fast finetune: sample " + std::to_string(i) + " gives " + std::to_string(feed->size()) +
                  " inputs, the first gives " + std::to_string(inputs.size()));
    for (const auto& [name, value] : *feed) {
      auto it = inputs.find(name);
      if (it == inputs.end())
        throw Error("fast finetune: sample " + std::to_string(i) + " gives input '" + name +
                    "', which the first does not");
      it->second->push_back(value);
    }
  }
  return inputs;
}

SampleInputs stores_of(const std::vector<Feed>& feeds, const std::optional<std::filesystem::path>& spill) {
  class Feeds : public DataReader {
   public:
    explicit Feeds(const std::vector<Feed>& feeds) : feeds_(feeds) {}
    std::optional<Feed> next() override {
      return next_ < feeds_.size() ? std::optional<Feed>(feeds_[next_++]) : std::nullopt;
    }
    std::string describe() const override { return "feeds"; }

   private:
    const std::vector<Feed>& feeds_;
    size_t next_ = 0;
  } reader(feeds);
  return read_samples(reader, feeds.size(), spill);
}

Feed feed_of(const SampleInputs& inputs, size_t i) {
  Feed feed;
  for (const auto& [name, store] : inputs) feed[name] = store->get(i);
  return feed;
}

size_t sample_count(const SampleInputs& inputs) { return inputs.empty() ? 0 : inputs.begin()->second->size(); }

}  // namespace onnxptq::finetune
