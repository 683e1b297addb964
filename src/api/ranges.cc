// The JSON of ranges that `onnxptq calibrate` writes and `quantize --ranges` / SaveAndRestore read.
#include "api/ranges.h"

#include <nlohmann/json.hpp>
#include <set>

#include "onnxptq/error.h"
#include "quant/config.h"

namespace onnxptq {

namespace {

using json = nlohmann::json;

const json& member(const json& j, const std::string& key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) throw Error(where + "has no \"" + key + "\"");
  return *it;
}

double number(const json& v, const std::string& what) {
  if (!v.is_number()) throw Error(what + ": expected a number, got " + v.dump());
  return v.get<double>();
}

std::string text(const json& v, const std::string& what) {
  if (!v.is_string()) throw Error(what + ": expected a string, got " + v.dump());
  return v.get<std::string>();
}

uint64_t count(const json& v, const std::string& what) {
  if (!v.is_number_unsigned()) throw Error(what + ": expected a count, got " + v.dump());
  return v.get<uint64_t>();
}

void only_keys(const json& j, const std::set<std::string>& keys, const std::string& where) {
  for (const auto& [key, value] : j.items())
    if (!keys.count(key)) throw Error(where + "unknown key \"" + key + "\"");
}

}  // namespace

std::string Calibration::to_json() const {
  nlohmann::ordered_json j;
  j["method"] = method;
  j["activation_type"] = activation_type;
  j["samples"] = samples;
  j["skipped_samples"] = skipped_samples;
  j["passes"] = passes;
  nlohmann::ordered_json ranges = nlohmann::ordered_json::object();
  for (const TensorRange& t : tensors) {
    nlohmann::ordered_json e;
    e["min"] = t.min;
    e["max"] = t.max;
    if (t.pos) e["pos"] = *t.pos;
    if (t.mean) e["mean"] = *t.mean;
    if (t.std) e["std"] = *t.std;
    ranges[t.tensor] = e;
  }
  j["tensors"] = ranges;
  j["non_finite_tensors"] = non_finite_tensors;
  return j.dump(2);
}

Calibration Calibration::from_json(const std::string& input) {
  json j = json::parse(input, nullptr, false);
  if (j.is_discarded()) throw Error("not JSON");
  if (!j.is_object()) throw Error("expected a JSON object of ranges, got " + std::string(j.type_name()));
  if (j.contains("tensors_range"))
    throw Error("Quark's SaveAndRestore file (\"tensors_range\"): onnxptq reads the JSON `onnxptq calibrate` writes");
  only_keys(j, {"method", "activation_type", "samples", "skipped_samples", "passes", "tensors", "non_finite_tensors"},
            "");
  Calibration c;
  c.method = text(member(j, "method", ""), "method");
  calib::parse_method(c.method);  // Error naming the known ones
  c.activation_type = text(member(j, "activation_type", ""), "activation_type");
  quant::parse_quant_type(c.activation_type);
  if (j.contains("samples")) c.samples = count(j["samples"], "samples");
  if (j.contains("passes")) c.passes = static_cast<int>(count(j["passes"], "passes"));
  if (j.contains("skipped_samples")) {
    if (!j["skipped_samples"].is_array()) throw Error("skipped_samples: expected a list of sample indices");
    for (const json& i : j["skipped_samples"]) c.skipped_samples.push_back(count(i, "skipped_samples"));
  }
  if (j.contains("non_finite_tensors")) {
    if (!j["non_finite_tensors"].is_array()) throw Error("non_finite_tensors: expected a list of tensor names");
    for (const json& name : j["non_finite_tensors"]) c.non_finite_tensors.push_back(text(name, "non_finite_tensors"));
  }
  const json& tensors = member(j, "tensors", "");
  if (!tensors.is_object()) throw Error("tensors: expected {tensor name: {\"min\", \"max\"}}, got " + tensors.dump());
  for (const auto& [name, e] : tensors.items()) {
    const std::string what = "tensors['" + name + "']";
    if (!e.is_object()) throw Error(what + ": expected {\"min\", \"max\"}, got " + e.dump());
    only_keys(e, {"min", "max", "pos", "mean", "std"}, what + ": ");
    TensorRange t{name,
                  number(member(e, "min", what + " "), what + ".min"),
                  number(member(e, "max", what + " "), what + ".max"),
                  std::nullopt,
                  std::nullopt,
                  std::nullopt};
    if (t.min > t.max) throw Error(what + ": min " + e["min"].dump() + " is above max " + e["max"].dump());
    if (e.contains("pos")) {
      if (!e["pos"].is_number_integer()) throw Error(what + ".pos: expected an integer, got " + e["pos"].dump());
      t.pos = e["pos"].get<int>();
    }
    if (e.contains("mean")) t.mean = number(e["mean"], what + ".mean");
    if (e.contains("std")) t.std = number(e["std"], what + ".std");
    c.tensors.push_back(std::move(t));
  }
  return c;
}

namespace api {

Calibration calibration_of(const calib::CalibrationResult& r, calib::Method method, ir::DataType activation_type) {
  Calibration out;
  out.method = calib::method_name(method);
  out.activation_type = quant::quant_type_name(activation_type);
  out.samples = r.samples;
  out.skipped_samples = r.skipped;
  out.passes = r.passes;
  for (const auto& [name, t] : r.ranges) {
    TensorRange range{name, t.lo, t.hi, t.pos, std::nullopt, std::nullopt};
    if (method == calib::Method::Distribution) {
      range.mean = t.mean;
      range.std = t.std;
    }
    out.tensors.push_back(std::move(range));
  }
  out.non_finite_tensors = r.non_finite;
  return out;
}

quant::KnownRanges known_ranges_of(const Calibration& c, std::string source) {
  quant::KnownRanges k;
  k.source = std::move(source);
  k.method = calib::parse_method(c.method);
  k.activation_type = quant::parse_quant_type(c.activation_type);
  k.result.samples = c.samples;
  k.result.skipped = c.skipped_samples;
  k.result.passes = c.passes;
  k.result.non_finite = c.non_finite_tensors;
  for (const TensorRange& t : c.tensors) {
    calib::TensorRange& r = k.result.ranges[t.tensor];
    r.lo = t.min;
    r.hi = t.max;
    r.pos = t.pos;
    r.mean = t.mean.value_or(0);
    r.std = t.std.value_or(0);
  }
  return k;
}

}  // namespace api
}  // namespace onnxptq
