#include "tools/evaluate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ir/float16.h"
#include "ir/npy.h"
#include "onnxptq/error.h"

// stb_image, static to this file as in calib/image_reader.cc, so no two copies can clash.
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_ONLY_JPEG
#define STBI_ONLY_PNG
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#include <stb/stb_image.h>
#pragma GCC diagnostic pop

namespace onnxptq::tools {

namespace {

namespace fs = std::filesystem;

template <class T>
void append_as_double(const ir::Tensor& t, std::vector<double>& out) {
  for (T v : t.values<T>()) out.push_back(static_cast<double>(v));
}

std::vector<double> as_doubles(const ir::Tensor& t) {
  std::vector<double> out;
  out.reserve(static_cast<size_t>(t.size()));
  switch (t.dtype()) {
    case ir::DataType::Float:
      append_as_double<float>(t, out);
      break;
    case ir::DataType::Double:
      append_as_double<double>(t, out);
      break;
    case ir::DataType::Int8:
      append_as_double<int8_t>(t, out);
      break;
    case ir::DataType::UInt8:
      append_as_double<uint8_t>(t, out);
      break;
    case ir::DataType::Int16:
      append_as_double<int16_t>(t, out);
      break;
    case ir::DataType::UInt16:
      append_as_double<uint16_t>(t, out);
      break;
    case ir::DataType::Int32:
      append_as_double<int32_t>(t, out);
      break;
    case ir::DataType::UInt32:
      append_as_double<uint32_t>(t, out);
      break;
    case ir::DataType::Int64:
      append_as_double<int64_t>(t, out);
      break;
    case ir::DataType::UInt64:
      append_as_double<uint64_t>(t, out);
      break;
    case ir::DataType::Bool:
      append_as_double<bool>(t, out);
      break;
    case ir::DataType::Float16:
      for (uint16_t v : t.values<uint16_t>()) out.push_back(ir::half_to_float(v));
      break;
    case ir::DataType::BFloat16:
      for (uint16_t v : t.values<uint16_t>()) out.push_back(ir::bfloat16_to_float(v));
      break;
    default:
      throw Error("cannot compare " + std::string(ir::data_type_name(t.dtype())) + " results");
  }
  return out;
}

bool is_result_file(const fs::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".npy" || ext == ".png" || ext == ".jpg" || ext == ".jpeg";
}

std::vector<std::string> result_files(const fs::path& folder) {
  if (!fs::is_directory(folder)) throw Error("results folder '" + folder.string() + "' does not exist");
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(folder))
    if (entry.is_regular_file() && is_result_file(entry.path())) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

nlohmann::json metrics_json(const ResultMetrics& m) {
  return {{"cosine", number(m.cosine)}, {"l2", number(m.l2)}, {"psnr", number(m.psnr)}};
}

}  // namespace

ResultMetrics compare_results(const ir::Tensor& baseline, const ir::Tensor& quantized) {
  if (baseline.dims() != quantized.dims())
    throw Error("baseline shape " + ir::dims_to_string(baseline.dims()) + " differs from quantized shape " +
                ir::dims_to_string(quantized.dims()));
  std::vector<double> a = as_doubles(baseline), b = as_doubles(quantized);
  double dot = 0, aa = 0, bb = 0, sq = 0;
  double max_a = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < a.size(); ++i) {
    dot += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
    double d = a[i] - b[i];
    sq += d * d;
    max_a = std::max(max_a, a[i]);
  }
  ResultMetrics m;
  double norms = std::sqrt(aa) * std::sqrt(bb);
  m.cosine = norms > 0 ? dot / norms : std::numeric_limits<double>::quiet_NaN();
  m.l2 = std::sqrt(sq);
  double mse = a.empty() ? 0.0 : sq / static_cast<double>(a.size());
  m.psnr = 20 * std::log10(max_a) - 10 * std::log10(std::max(mse, 1e-10));
  return m;
}

ir::Tensor load_result(const fs::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  if (ext == ".npy") return ir::load_npy(path);
  if (ext != ".png" && ext != ".jpg" && ext != ".jpeg")
    throw Error(path.string() + ": not a result file (.npy, .png, .jpg)");
  int width = 0, height = 0, channels = 0;
  stbi_uc* data = stbi_load(path.c_str(), &width, &height, &channels, 0);
  if (!data) throw Error(path.string() + ": cannot decode the image: " + stbi_failure_reason());
  ir::Tensor t = ir::Tensor::from_values<uint8_t>(
      {height, width, channels},
      std::span<const uint8_t>(data, static_cast<size_t>(width) * static_cast<size_t>(height) * channels));
  stbi_image_free(data);
  return t;
}

EvaluateReport evaluate_folders(const fs::path& baseline, const fs::path& quantized) {
  std::vector<std::string> names = result_files(baseline);
  std::vector<std::string> others = result_files(quantized);
  if (names.empty()) throw Error("baseline folder '" + baseline.string() + "' has no .npy, .png or .jpg file");
  for (const std::string& name : names)
    if (!std::binary_search(others.begin(), others.end(), name))
      throw Error("'" + name + "' is in the baseline folder '" + baseline.string() + "' but not in '" +
                  quantized.string() + "'");
  for (const std::string& name : others)
    if (!std::binary_search(names.begin(), names.end(), name))
      throw Error("'" + name + "' is in the quantized folder '" + quantized.string() + "' but not in '" +
                  baseline.string() + "'");
  EvaluateReport report;
  for (const std::string& name : names) {
    ResultMetrics m;
    try {
      m = compare_results(load_result(baseline / name), load_result(quantized / name));
    } catch (const Error& e) {
      throw Error(name + ": " + e.what());
    }
    report.files.push_back({name, m});
    report.average.cosine += m.cosine;
    report.average.l2 += m.l2;
    report.average.psnr += m.psnr;
  }
  double n = static_cast<double>(report.files.size());
  report.average.cosine /= n;
  report.average.l2 /= n;
  report.average.psnr /= n;
  return report;
}

std::string format_report(const EvaluateReport& report) {
  size_t width = 7;  // "average"
  for (const auto& f : report.files) width = std::max(width, f.file.size());
  std::ostringstream out;
  auto line = [&](const std::string& name, const std::string& a, const std::string& b, const std::string& c) {
    out << name << std::string(width + 2 - name.size(), ' ') << a
        << std::string(14 - std::min<size_t>(a.size(), 13), ' ') << b
        << std::string(14 - std::min<size_t>(b.size(), 13), ' ') << c << "\n";
  };
  auto fmt = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return std::string(buf);
  };
  line("file", "cosine", "L2 loss", "PSNR (dB)");
  for (const auto& f : report.files) line(f.file, fmt(f.metrics.cosine), fmt(f.metrics.l2), fmt(f.metrics.psnr));
  line("average", fmt(report.average.cosine), fmt(report.average.l2), fmt(report.average.psnr));
  return out.str();
}

nlohmann::json report_json(const EvaluateReport& report) {
  nlohmann::json files = nlohmann::json::array();
  for (const auto& f : report.files) {
    nlohmann::json j = metrics_json(f.metrics);
    j["file"] = f.file;
    files.push_back(j);
  }
  return {{"files", files}, {"average", metrics_json(report.average)}};
}

}  // namespace onnxptq::tools
