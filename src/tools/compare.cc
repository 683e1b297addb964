#include "tools/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engine/block_quantizer.h"
#include "engine/kernel.h"
#include "engine/session.h"
#include "onnxptq/error.h"

namespace onnxptq::tools {

namespace {

bool is_op(const ir::Node* node, const char* op) {
  return node && node->op_type == op &&
         (node->domain.empty() || node->domain == "ai.onnx" || node->domain == "com.microsoft");
}

// A quantized activation: the float model's tensor and the quantized model's dequantized copy.
struct Pair {
  std::string float_name;
  std::string quantized_name;
};

// Every QuantizeLinear on a computed tensor whose output a DequantizeLinear reads, and every
// block fake quantization (Quark's BFPQuantizeDequantize / MXQuantizeDequantize) of one. A graph
// output keeps its name on the DequantizeLinear's output, its producer writing
// "<name>_QuantizeLinear_Input" (ORT's naming).
std::vector<Pair> quantized_activations(const ir::Model& float_model, const ir::Model& quantized_model) {
  const std::string suffix = "_QuantizeLinear_Input";
  std::vector<Pair> pairs;
  for (const auto& node : quantized_model.graph->nodes()) {
    const bool block = engine::is_block_quantize_node(*node);
    if (!block && !is_op(node.get(), "QuantizeLinear")) continue;
    const ir::Value* x = node->input(0);
    const ir::Value* q = node->output(0);
    if (!x || !q || x->has_initializer() || (x->producer() && x->producer()->op_type == "Constant")) continue;
    const ir::Value* dq = block ? q : nullptr;
    for (const ir::Use& use : q->uses())
      if (!dq && is_op(use.node, "DequantizeLinear") && use.input == 0 && use.node->output(0)) {
        dq = use.node->output(0);
        break;
      }
    if (!dq) continue;
    std::string name = x->name();
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      name.resize(name.size() - suffix.size());
    if (!float_model.graph->find_value(name)) continue;
    if (std::any_of(pairs.begin(), pairs.end(), [&](const Pair& p) { return p.float_name == name; })) continue;
    pairs.push_back({name, dq->name()});
  }
  return pairs;
}

struct Sums {
  double aa = 0, bb = 0, ab = 0, dd = 0, max_error = 0;
  size_t elements = 0;
};

ir::Tensor float_copy(const ir::Tensor& t) {
  if (t.dtype() == ir::DataType::Float)
    return ir::Tensor(t.dtype(), t.dims(), ir::Bytes::copy_of(t.bytes().data(), t.byte_size()));
  return engine::as_float32(t);  // a new tensor already
}

std::string number(double v, const char* format) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

nlohmann::json json_number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

}  // namespace

std::vector<TensorError> compare_models(const ir::Model& float_model, const ir::Model& quantized_model,
                                        DataReader& reader, int threads) {
  std::vector<Pair> pairs = quantized_activations(float_model, quantized_model);
  if (pairs.empty())
    throw Error(
        "the quantized model has no QuantizeLinear/DequantizeLinear pair or block quantization on a tensor of the "
        "float model");
  engine::SessionOptions float_options, quantized_options;
  float_options.threads = quantized_options.threads = threads;
  std::map<std::string, size_t> float_index, quantized_index;
  for (size_t i = 0; i < pairs.size(); ++i) {
    float_options.visible.insert(pairs[i].float_name);
    quantized_options.visible.insert(pairs[i].quantized_name);
    float_index[pairs[i].float_name] = i;
    quantized_index[pairs[i].quantized_name] = i;
  }
  engine::Session float_session(float_model, float_options);
  engine::Session quantized_session(quantized_model, quantized_options);

  std::vector<Sums> sums(pairs.size());
  size_t sample = 0;
  for (std::optional<Feed> feed = reader.next(); feed; feed = reader.next(), ++sample) {
    std::vector<std::optional<ir::Tensor>> reference(pairs.size());
    engine::TensorObserver keep = [&](const std::string& name, const ir::Tensor& t) {
      auto it = float_index.find(name);
      if (it != float_index.end()) reference[it->second] = float_copy(t);
    };
    engine::TensorObserver compare = [&](const std::string& name, const ir::Tensor& t) {
      auto it = quantized_index.find(name);
      if (it == quantized_index.end() || !reference[it->second]) return;
      const ir::Tensor& a = *reference[it->second];
      if (a.dims() != t.dims())
        throw Error("tensor '" + pairs[it->second].float_name + "': float shape " + ir::dims_to_string(a.dims()) +
                    ", quantized shape " + ir::dims_to_string(t.dims()));
      ir::Tensor b = t.dtype() == ir::DataType::Float ? t : engine::as_float32(t);
      auto av = a.values<float>();
      auto bv = b.values<float>();
      Sums& s = sums[it->second];
      for (size_t i = 0; i < av.size(); ++i) {
        double x = av[i], y = bv[i], d = x - y;
        s.aa += x * x;
        s.bb += y * y;
        s.ab += x * y;
        s.dd += d * d;
        s.max_error = std::max(s.max_error, std::abs(d));
      }
      s.elements += av.size();
    };
    try {
      float_session.run_for_hooks(*feed, {&keep});
      quantized_session.run_for_hooks(*feed, {&compare});
    } catch (const Error& e) {
      throw Error("sample " + std::to_string(sample) + " of " + reader.describe() + ": " + e.what());
    }
  }
  if (sample == 0) throw Error(reader.describe() + " gave no sample");

  std::vector<TensorError> out;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const Sums& s = sums[i];
    if (!s.elements) continue;  // not computed as a float tensor in one of the models
    TensorError e;
    e.tensor = pairs[i].float_name;
    if (const ir::Node* p = float_model.graph->find_value(e.tensor)->producer()) {
      e.producer = p->name;
      e.op_type = p->op_type;
    }
    e.sqnr = s.dd > 0 ? 10 * std::log10(s.aa / s.dd) : std::numeric_limits<double>::infinity();
    double norms = std::sqrt(s.aa) * std::sqrt(s.bb);
    e.cosine = norms > 0 ? s.ab / norms : std::numeric_limits<double>::quiet_NaN();
    e.max_error = s.max_error;
    e.elements = s.elements;
    out.push_back(e);
  }
  // Worst first; NaN (a zero signal with some error) counts as worst.
  std::stable_sort(out.begin(), out.end(), [](const TensorError& a, const TensorError& b) {
    double x = std::isnan(a.sqnr) ? -std::numeric_limits<double>::infinity() : a.sqnr;
    double y = std::isnan(b.sqnr) ? -std::numeric_limits<double>::infinity() : b.sqnr;
    return x < y;
  });
  return out;
}

std::string format_comparison(const std::vector<TensorError>& errors, size_t limit) {
  size_t n = limit ? std::min(limit, errors.size()) : errors.size();
  size_t width = 6, op_width = 7;
  for (size_t i = 0; i < n; ++i) {
    width = std::max(width, errors[i].tensor.size());
    op_width = std::max(op_width, errors[i].op_type.size());
  }
  std::ostringstream out;
  auto pad = [](const std::string& s, size_t w) { return s + std::string(w > s.size() ? w - s.size() : 0, ' '); };
  out << pad("tensor", width + 2) << pad("op type", op_width + 2) << pad("SQNR (dB)", 12) << pad("cosine", 12)
      << "max error\n";
  for (size_t i = 0; i < n; ++i) {
    const TensorError& e = errors[i];
    out << pad(e.tensor, width + 2) << pad(e.op_type, op_width + 2) << pad(number(e.sqnr, "%.2f"), 12)
        << pad(number(e.cosine, "%.6f"), 12) << number(e.max_error, "%.6g") << "\n";
  }
  if (n < errors.size()) out << "(" << errors.size() - n << " more)\n";
  return out.str();
}

nlohmann::json comparison_json(const std::vector<TensorError>& errors) {
  nlohmann::json out = nlohmann::json::array();
  for (const TensorError& e : errors)
    out.push_back({{"tensor", e.tensor},
                   {"producer", e.producer},
                   {"op_type", e.op_type},
                   {"sqnr", json_number(e.sqnr)},
                   {"cosine", json_number(e.cosine)},
                   {"max_error", json_number(e.max_error)},
                   {"elements", e.elements}});
  return out;
}

std::string comparison_csv(const std::vector<TensorError>& errors) {
  // Names may hold commas or quotes: quoted as RFC 4180 says.
  auto quoted = [](const std::string& s) {
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  std::ostringstream out;
  out << "tensor,producer,op_type,sqnr,cosine,max_error,elements\n";
  for (const TensorError& e : errors)
    out << quoted(e.tensor) << "," << quoted(e.producer) << "," << quoted(e.op_type) << "," << number(e.sqnr, "%.17g")
        << "," << number(e.cosine, "%.17g") << "," << number(e.max_error, "%.17g") << "," << e.elements << "\n";
  return out.str();
}

}  // namespace onnxptq::tools
