#include "ir/npy.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "ir/file_io.h"
#include "onnxptq/error.h"

namespace onnxptq::ir {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

struct NpyType {
  const char* code;  // without the byte-order character
  DataType type;
};
constexpr NpyType kTypes[] = {
    {"f4", DataType::Float}, {"f8", DataType::Double}, {"f2", DataType::Float16}, {"i1", DataType::Int8},
    {"u1", DataType::UInt8}, {"i2", DataType::Int16},  {"u2", DataType::UInt16},  {"i4", DataType::Int32},
    {"u4", DataType::UInt32}, {"i8", DataType::Int64}, {"u8", DataType::UInt64},  {"b1", DataType::Bool},
};

// The value of `key` in the header's Python dict literal, as written there.
std::string header_field(const std::string& header, const std::string& key, const std::string& name) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) throw Error(name + ": not a valid .npy file (no '" + key + "' in the header)");
  at = header.find(':', at);
  size_t start = header.find_first_not_of(' ', at + 1);
  if (at == std::string::npos || start == std::string::npos) throw Error(name + ": not a valid .npy file (bad header)");
  char open = header[start];
  size_t end = open == '\'' ? header.find('\'', start + 1) + 1
               : open == '(' ? header.find(')', start) + 1
                             : header.find_first_of(",}", start);
  // end <= start: a missing closing quote or bracket, or nothing before the next ',' ("'descr': ,").
  if (end == std::string::npos || end <= start)
    throw Error(name + ": not a valid .npy file (bad '" + key + "' in the header)");
  return header.substr(start, end - start);
}

std::vector<int64_t> parse_shape(const std::string& text, const std::string& name) {
  std::vector<int64_t> dims;
  std::string inner = text.substr(1, text.size() - 2);
  size_t pos = 0;
  while (pos < inner.size()) {
    size_t comma = inner.find(',', pos);
    std::string item = inner.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    item.erase(std::remove(item.begin(), item.end(), ' '), item.end());
    if (!item.empty()) {
      if (item.find_first_not_of("0123456789") != std::string::npos)
        throw Error(name + ": not a valid .npy file (shape " + text + ")");
      // 18 digits stay below int64's limit; the element count is checked below.
      if (item.size() > 18) throw Error(name + ": shape " + text + " is too large");
      dims.push_back(std::stoll(item));
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return dims;
}

// Fortran order is C order of the reversed shape; reversing the axes back is a transpose.
Bytes reverse_axes(const std::byte* src, const std::vector<int64_t>& dims, size_t width) {
  size_t rank = dims.size();
  int64_t count = element_count(dims);
  Bytes out = Bytes::uninitialized(static_cast<size_t>(count) * width);
  std::byte* dst = out.mutable_data();
  std::vector<int64_t> index(rank, 0);
  // Stride in the Fortran-ordered source of each C-order axis.
  std::vector<int64_t> stride(rank, 1);
  for (size_t a = 1; a < rank; ++a) stride[a] = stride[a - 1] * dims[a - 1];
  for (int64_t i = 0; i < count; ++i) {
    int64_t from = 0;
    for (size_t a = 0; a < rank; ++a) from += index[a] * stride[a];
    std::memcpy(dst + i * width, src + from * width, width);
    for (size_t a = rank; a-- > 0;) {
      if (++index[a] < dims[a]) break;
      index[a] = 0;
    }
  }
  return out;
}

Tensor parse(const std::byte* data, size_t size, const std::string& name, std::shared_ptr<const void> owner) {
  if (size < 10 || std::memcmp(data, kMagic, 6) != 0) throw Error(name + ": not a .npy file");
  auto major = static_cast<uint8_t>(data[6]);
  size_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len = static_cast<uint8_t>(data[8]) | static_cast<size_t>(static_cast<uint8_t>(data[9])) << 8;
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) throw Error(name + ": truncated .npy header");
    for (int i = 0; i < 4; ++i) header_len |= static_cast<size_t>(static_cast<uint8_t>(data[8 + i])) << (8 * i);
    header_start = 12;
  } else {
    throw Error(name + ": unsupported .npy format version " + std::to_string(major));
  }
  if (header_start + header_len > size) throw Error(name + ": truncated .npy header");
  std::string header(reinterpret_cast<const char*>(data + header_start), header_len);

  std::string descr = header_field(header, "descr", name);
  if (descr.front() != '\'') throw Error(name + ": not a valid .npy file (descr " + descr + ")");
  descr = descr.substr(1, descr.size() - 2);  // strip quotes
  if (descr.size() != 3) throw Error(name + ": unsupported .npy dtype '" + descr + "'");
  char order = descr[0];
  const NpyType* type = nullptr;
  for (const NpyType& t : kTypes)
    if (descr.compare(1, 2, t.code) == 0) type = &t;
  if (!type || (order != '<' && order != '>' && order != '|' && order != '='))
    throw Error(name + ": unsupported .npy dtype '" + descr + "' (numbers and bools only)");
  bool fortran = header_field(header, "fortran_order", name) == "True";
  std::string shape = header_field(header, "shape", name);
  if (shape.front() != '(') throw Error(name + ": not a valid .npy file (shape " + shape + ")");
  std::vector<int64_t> dims = parse_shape(shape, name);

  size_t width = static_cast<size_t>(data_type_bits(type->type) / 8);
  size_t need = static_cast<size_t>(checked_element_count(dims, name + ": shape")) * width;
  size_t offset = header_start + header_len;
  if (size - offset < need)
    throw Error(name + ": truncated: shape " + dims_to_string(dims) + " of " + std::string(data_type_name(type->type)) +
                " needs " + std::to_string(need) + " bytes of data, the file has " + std::to_string(size - offset));
  const std::byte* src = data + offset;
  bool swap = order == '>' && width > 1;
  bool aligned = reinterpret_cast<uintptr_t>(src) % 8 == 0;
  Bytes bytes;
  if (fortran && dims.size() > 1) {
    bytes = reverse_axes(src, dims, width);
  } else if (owner && aligned && !swap) {
    bytes = Bytes::view(std::move(owner), src, need);
  } else {
    bytes = Bytes::copy_of(src, need);
  }
  if (swap) {
    std::byte* p = bytes.mutable_data();
    for (size_t i = 0; i < need; i += width) std::reverse(p + i, p + i + width);
  }
  return Tensor(type->type, std::move(dims), std::move(bytes));
}

}  // namespace

Tensor parse_npy(const std::byte* data, size_t size, const std::string& display_name) {
  return parse(data, size, display_name, nullptr);
}

std::string npy_bytes(const Tensor& tensor) {
  const char* code = nullptr;
  for (const NpyType& t : kTypes)
    if (t.type == tensor.dtype()) code = t.code;
  if (!code) throw Error("a " + std::string(data_type_name(tensor.dtype())) + " tensor cannot be written as .npy");
  std::string descr = std::string(data_type_bits(tensor.dtype()) == 8 ? "|" : "<") + code;
  std::string shape = "(";
  // Spelled as numpy spells it ("(2, 3)", "(3,)", "()"), so the files are byte-identical.
  for (size_t i = 0; i < tensor.rank(); ++i)
    shape += std::to_string(tensor.dims()[i]) + (tensor.rank() == 1 ? "," : i + 1 < tensor.rank() ? ", " : "");
  shape += ")";
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // Magic, version, length field, then the header padded with spaces and a newline so the data
  // starts at a multiple of 64 bytes. Version 2 only when the header outgrows 16 bits.
  auto pad = [&](size_t prefix) {
    std::string h = header;
    h.append((64 - (prefix + h.size() + 1) % 64) % 64, ' ');
    return h + '\n';
  };
  bool v2 = pad(10).size() > 65535;
  header = pad(v2 ? 12 : 10);
  std::string out(kMagic, 6);
  out += static_cast<char>(v2 ? 2 : 1);
  out += '\0';
  size_t len = header.size();
  for (size_t i = 0; i < (v2 ? 4u : 2u); ++i) out += static_cast<char>((len >> (8 * i)) & 0xff);
  out += header;
  out.append(reinterpret_cast<const char*>(tensor.bytes().data()), tensor.byte_size());
  return out;
}

}  // namespace onnxptq::ir

namespace onnxptq {

Tensor load_npy(const std::filesystem::path& path) {
  ir::require_file(path, path.string());
  auto file = ir::MappedFile::open(path);
  return ir::parse(file->data(), file->size(), path.string(), file);
}

void save_npy(const Tensor& tensor, const std::filesystem::path& path) {
  std::string bytes = ir::npy_bytes(tensor);
  ir::AtomicFile file(path);
  file.write(bytes.data(), bytes.size());
  file.commit();
}

}  // namespace onnxptq
