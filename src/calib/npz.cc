// .npz archives: a zip of .npy members (numpy.savez stores them, savez_compressed deflates them).
#include <zlib.h>

#include <cstring>

#include "calib/data_reader.h"
#include "ir/file_io.h"
#include "ir/npy.h"
#include "onnxptq/error.h"

namespace onnxptq::calib {
namespace {

uint64_t read_le(const std::byte* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

struct Archive {
  const std::byte* data;
  size_t size;
  std::string name;

  [[noreturn]] void fail(const std::string& what) const { throw Error(name + ": " + what); }
  const std::byte* at(uint64_t offset, uint64_t length) const {
    if (offset > size || length > size - offset) fail("not a valid .npz file (a zip record runs past the end)");
    return data + offset;
  }
};

std::string inflate_raw(const std::byte* in, size_t in_size, size_t out_size, const Archive& archive) {
  // Deflate expands at most 1032 times (zlib's technical details): a member claiming more is
  // corrupt, and is refused before its claimed size is allocated.
  if (out_size / 1032 > in_size + 1) archive.fail("a compressed member is corrupt (it claims " + std::to_string(out_size) + " bytes from " + std::to_string(in_size) + ")");
  std::string out(out_size, '\0');
  z_stream z{};
  if (inflateInit2(&z, -MAX_WBITS) != Z_OK) archive.fail("cannot start zlib");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<std::byte*>(in));
  z.avail_in = static_cast<uInt>(in_size);
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out_size);
  int status = inflate(&z, Z_FINISH);
  inflateEnd(&z);
  if (status != Z_STREAM_END || z.total_out != out_size) archive.fail("a compressed member is corrupt");
  return out;
}

}  // namespace

std::map<std::string, ir::Tensor> load_npz(const std::filesystem::path& path) {
  ir::require_file(path, path.string());
  auto file = ir::MappedFile::open(path);
  Archive zip{file->data(), file->size(), path.string()};

  // The end-of-central-directory record sits in the last 64 KiB + 22 bytes.
  if (zip.size < 22) zip.fail("not an .npz file (too short for a zip archive)");
  size_t eocd = std::string::npos;
  size_t lowest = zip.size > 65557 ? zip.size - 65557 : 0;
  for (size_t p = zip.size - 22 + 1; p-- > lowest;)
    if (read_le(zip.data + p, 4) == 0x06054b50) {
      eocd = p;
      break;
    }
  if (eocd == std::string::npos) zip.fail("not an .npz file (no zip directory)");
  uint64_t entries = read_le(zip.data + eocd + 10, 2);
  uint64_t cd_offset = read_le(zip.data + eocd + 16, 4);
  if (cd_offset == 0xffffffff || entries == 0xffff) {  // zip64: the locator precedes the record
    if (eocd < 20 || read_le(zip.data + eocd - 20, 4) != 0x07064b50) zip.fail("not a valid .npz file (zip64)");
    uint64_t record = read_le(zip.data + eocd - 20 + 8, 8);
    const std::byte* r = zip.at(record, 56);
    if (read_le(r, 4) != 0x06064b50) zip.fail("not a valid .npz file (zip64 record)");
    entries = read_le(r + 32, 8);
    cd_offset = read_le(r + 48, 8);
  }

  std::map<std::string, ir::Tensor> arrays;
  uint64_t pos = cd_offset;
  for (uint64_t e = 0; e < entries; ++e) {
    const std::byte* h = zip.at(pos, 46);
    if (read_le(h, 4) != 0x02014b50) zip.fail("not a valid .npz file (bad directory entry)");
    uint64_t method = read_le(h + 10, 2);
    uint64_t compressed = read_le(h + 20, 4), size = read_le(h + 24, 4);
    uint64_t name_len = read_le(h + 28, 2), extra_len = read_le(h + 30, 2), comment_len = read_le(h + 32, 2);
    uint64_t local = read_le(h + 42, 4);
    std::string member(reinterpret_cast<const char*>(zip.at(pos + 46, name_len)), name_len);
    // Zip64 sizes and offset, for the fields marked 0xffffffff, in this order.
    const std::byte* extra = zip.at(pos + 46 + name_len, extra_len);
    for (uint64_t x = 0; x + 4 <= extra_len;) {
      uint64_t id = read_le(extra + x, 2), len = read_le(extra + x + 2, 2);
      if (id == 1) {
        uint64_t k = x + 4;
        auto next = [&](uint64_t& field) {
          if (field != 0xffffffff) return;
          if (k + 8 > x + 4 + len) zip.fail("not a valid .npz file (zip64 field)");
          field = read_le(extra + k, 8);
          k += 8;
        };
        next(size);
        next(compressed);
        next(local);
      }
      x += 4 + len;
    }
    pos += 46 + name_len + extra_len + comment_len;

    const std::byte* l = zip.at(local, 30);
    if (read_le(l, 4) != 0x04034b50) zip.fail("not a valid .npz file (bad member header)");
    uint64_t data_at = local + 30 + read_le(l + 26, 2) + read_le(l + 28, 2);
    const std::byte* payload = zip.at(data_at, compressed);
    std::string label = path.string() + ":" + member;
    if (member.size() < 4 || member.compare(member.size() - 4, 4, ".npy") != 0) continue;
    std::string key = member.substr(0, member.size() - 4);
    if (method == 0) {
      if (compressed != size) zip.fail("member '" + member + "' has inconsistent sizes");
      arrays[key] = ir::parse_npy(payload, size, label);
    } else if (method == 8) {
      std::string bytes = inflate_raw(payload, compressed, size, zip);
      arrays[key] = ir::parse_npy(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size(), label);
    } else {
      zip.fail("member '" + member + "' uses zip compression method " + std::to_string(method) +
               " (only stored and deflated members are read)");
    }
  }
  return arrays;
}

}  // namespace onnxptq::calib
