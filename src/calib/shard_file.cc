#include "calib/shard_file.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "onnxptq/error.h"

namespace onnxptq::calib {

namespace {

constexpr const char* kMagic = "onnxptq calibration shard\n";

uint64_t fnv1a(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64 (Fowler, Noll, Vo; IETF draft-eastlake-fnv)
  for (char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string hex(uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

}  // namespace

std::string model_digest(const std::string& serialized_model) { return hex(fnv1a(serialized_model)); }

std::string statistics_digest(const std::string& statistics) { return hex(fnv1a(statistics)); }

std::string write_shard_file(const ShardFile& file) {
  const ShardHeader& h = file.header;
  nlohmann::json j = {
      {"version", h.version},
      {"model", h.model},
      {"options", nlohmann::json::parse(h.options)},
      {"activation_type", h.activation_type},
      {"tensors", h.tensors},
      {"shard", h.shard},
      {"shards", h.shards},
      {"samples", h.samples},
      {"pass", h.pass},
      {"merged", h.merged},
      {"first_pass", h.first_pass},
      {"statistics_bytes", file.statistics.size()},
      {"statistics_digest", hex(fnv1a(file.statistics))},
  };
  return kMagic + j.dump() + "\n" + file.statistics;
}

ShardFile read_shard_file(const std::string& bytes, const std::string& name) {
  const std::string magic = kMagic;
  if (bytes.compare(0, magic.size(), magic) != 0)
    throw Error(name + ": not a calibration shard file (written by onnxptq calibrate --save-stats)");
  const size_t end = bytes.find('\n', magic.size());
  if (end == std::string::npos) throw Error(name + ": the shard file ends in its header: truncated?");
  ShardFile file;
  ShardHeader& h = file.header;
  try {
    const nlohmann::json j = nlohmann::json::parse(bytes.substr(magic.size(), end - magic.size()));
    h.version = j.at("version").get<int>();
    if (h.version != kShardFileVersion)
      throw Error(name + ": a shard file of version " + std::to_string(h.version) + "; this onnxptq reads version " +
                  std::to_string(kShardFileVersion));
    h.model = j.at("model").get<std::string>();
    h.options = j.at("options").dump();
    h.activation_type = j.at("activation_type").get<std::string>();
    h.tensors = j.at("tensors").get<std::vector<std::string>>();
    h.shard = j.at("shard").get<size_t>();
    h.shards = j.at("shards").get<size_t>();
    h.samples = j.at("samples").get<size_t>();
    h.pass = j.at("pass").get<int>();
    h.merged = j.at("merged").get<bool>();
    h.first_pass = j.at("first_pass").get<std::string>();
    file.statistics = bytes.substr(end + 1);
    if (file.statistics.size() != j.at("statistics_bytes").get<size_t>())
      throw Error(name + ": " + std::to_string(file.statistics.size()) + " bytes of statistics where the header says " +
                  std::to_string(j.at("statistics_bytes").get<size_t>()) + ": truncated or appended to");
    if (hex(fnv1a(file.statistics)) != j.at("statistics_digest").get<std::string>())
      throw Error(name + ": the statistics do not match their digest: the file is corrupt");
  } catch (const nlohmann::json::exception& e) {
    throw Error(name + ": a shard file's header: " + e.what());
  }
  if (h.pass != 1 && h.pass != 2) throw Error(name + ": pass " + std::to_string(h.pass) + " (1 or 2)");
  if (h.shards == 0 || h.shard >= h.shards)
    throw Error(name + ": shard " + std::to_string(h.shard) + " of " + std::to_string(h.shards));
  return file;
}

void check_same_calibration(const ShardHeader& first, const ShardHeader& h, const std::string& name,
                            const std::string& first_name) {
  auto differs = [&](const std::string& what) {
    throw Error(name + ": " + what + ", unlike " + first_name + ": not shards of one calibration");
  };
  if (h.model != first.model) differs("another model (digest " + h.model + ")");
  if (h.options != first.options) differs("other calibration options (" + h.options + ")");
  if (h.activation_type != first.activation_type) differs("another activation type (" + h.activation_type + ")");
  if (h.tensors != first.tensors) differs("other tensors");
  if (h.shards != first.shards) differs("one of " + std::to_string(h.shards) + " shards");
  if (h.samples != first.samples) differs(std::to_string(h.samples) + " samples in all");
}

std::vector<size_t> check_shards(const std::vector<ShardFile>& files, const std::vector<std::string>& names) {
  if (files.empty()) throw Error("merge-stats: no shard file given");
  const ShardHeader& first = files[0].header;
  std::vector<size_t> order(first.shards, SIZE_MAX);
  for (size_t k = 0; k < files.size(); ++k) {
    const ShardHeader& h = files[k].header;
    if (h.merged)
      throw Error(names[k] + ": the merged first pass of " + std::to_string(h.shards) +
                  " shards, not a shard: give it with --first-pass");
    check_same_calibration(first, h, names[k], names[0]);
    if (h.pass != first.pass || h.first_pass != first.first_pass)
      throw Error(names[k] + ": " +
                  (h.pass != first.pass ? (h.pass == 1 ? "a first pass" : "a second pass")
                                        : "a second pass on another first pass") +
                  ", unlike " + names[0] + ": not shards of one calibration");
    if (order[h.shard] != SIZE_MAX)
      throw Error(names[k] + ": shard " + std::to_string(h.shard) + " of " + std::to_string(h.shards) +
                  " again (also " + names[order[h.shard]] + ")");
    order[h.shard] = k;
  }
  for (size_t s = 0; s < order.size(); ++s)
    if (order[s] == SIZE_MAX)
      throw Error("merge-stats: shard " + std::to_string(s) + " of " + std::to_string(first.shards) + " is missing (" +
                  std::to_string(files.size()) + " files given)");
  return order;
}

}  // namespace onnxptq::calib
