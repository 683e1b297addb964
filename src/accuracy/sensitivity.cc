#include "accuracy/sensitivity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "accuracy/downstream.h"
#include "calib/progress_reader.h"
#include "engine/kernel.h"
#include "engine/session.h"
#include "finetune/fast_finetune.h"
#include "onnxptq/error.h"
#include "quant/quantize.h"
#include "quant/simulate.h"

namespace onnxptq::accuracy {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// A reference row counts as a probability distribution when it sums to 1 within this.
constexpr double kProbabilitySumTolerance = 1e-3;
// KL divergence terms use max(x, this) for the quantized probability.
constexpr double kKlFloor = 1e-12;

}  // namespace

void OutputError::add(const ir::Tensor& reference, const ir::Tensor& value, const std::string& what) {
  if (reference.dims() != value.dims())
    throw Error(what + ": the output has shape " + ir::dims_to_string(value.dims()) + ", the float model's " +
                ir::dims_to_string(reference.dims()));
  ir::Tensor a = reference.dtype() == ir::DataType::Float ? reference : engine::as_float32(reference);
  ir::Tensor b = value.dtype() == ir::DataType::Float ? value : engine::as_float32(value);
  std::span<const float> x = a.values<float>(), y = b.values<float>();
  for (size_t i = 0; i < x.size(); ++i) {
    double d = static_cast<double>(x[i]) - y[i];
    signal_ += static_cast<double>(x[i]) * x[i];
    noise_ += d * d;
    dot_ += static_cast<double>(x[i]) * y[i];
    value_energy_ += static_cast<double>(y[i]) * y[i];
  }
  count_ += x.size();
  // KL divergence over the last axis, while every reference row is a distribution.
  size_t row = reference.dims().empty() ? 1 : static_cast<size_t>(reference.dims().back());
  for (size_t start = 0; probabilities_ && row > 0 && start + row <= x.size(); start += row) {
    double sum = 0, kl = 0;
    for (size_t i = start; i < start + row; ++i) {
      if (!(x[i] >= 0)) probabilities_ = false;
      sum += x[i];
      if (x[i] > 0) kl += x[i] * std::log(x[i] / std::max<double>(y[i], kKlFloor));
    }
    if (std::abs(sum - 1) > kProbabilitySumTolerance) probabilities_ = false;
    kl_sum_ += kl;
    ++kl_rows_;
  }
}

double OutputError::sqnr_db() const {
  if (std::isnan(noise_)) return -kInfinity;  // a NaN is the worst error
  if (noise_ == 0) return kInfinity;
  return 10 * std::log10(signal_ / noise_);
}

OutputMetrics OutputError::metrics() const {
  OutputMetrics m;
  m.sqnr_db = sqnr_db();
  m.cosine = signal_ > 0 && value_energy_ > 0 ? dot_ / std::sqrt(signal_ * value_energy_) : std::nan("");
  m.rmse = count_ ? std::sqrt(noise_ / static_cast<double>(count_)) : 0;
  if (probabilities_ && kl_rows_) m.kl = kl_sum_ / static_cast<double>(kl_rows_);
  return m;
}

ReferenceOutputs reference_outputs(const ir::Model& model, DataReader& reader, size_t output_index, size_t max_samples,
                                   int threads) {
  size_t outputs = model.graph->outputs().size();
  if (output_index >= outputs)
    throw Error("output index " + std::to_string(output_index) + ": the model has " + std::to_string(outputs) +
                " output" + (outputs == 1 ? "" : "s"));
  engine::SessionOptions options;
  options.threads = threads;
  engine::Session session(model, options);
  ReferenceOutputs r;
  r.output_index = output_index;
  while (max_samples == 0 || r.feeds.size() < max_samples) {
    std::optional<Feed> feed = reader.next();
    if (!feed) break;
    try {
      r.outputs.push_back(std::move(session.run(*feed).at(output_index)));
    } catch (const Error& e) {
      throw Error("sample " + std::to_string(r.feeds.size()) + " of " + reader.describe() + ": " + e.what(), e.kind());
    }
    r.feeds.push_back(std::move(*feed));
  }
  if (r.feeds.empty()) throw Error(reader.describe() + " gave no sample to measure the output error on");
  return r;
}

ReferenceOutputs prepared_reference_outputs(const ir::Model& prepared, DataReader& reader,
                                            const quant::QuantConfig& config, size_t output_index, size_t max_samples,
                                            int threads) {
  reader.rewind();
  std::unique_ptr<DataReader> adapted = quant::adapted_reader(reader, prepared, config);
  return reference_outputs(prepared, adapted ? *adapted : reader, output_index, max_samples, threads);
}

OutputMetrics compare_to_reference(const ReferenceOutputs& reference,
                                   const std::function<std::vector<ir::Tensor>(const Feed&)>& run,
                                   const std::string& what) {
  OutputError error;
  for (size_t i = 0; i < reference.feeds.size(); ++i)
    error.add(reference.outputs[i], run(reference.feeds[i]).at(reference.output_index),
              what + "sample " + std::to_string(i));
  return error.metrics();
}

quant::Plan plan_of_node(const quant::Plan& plan, const ir::Graph& graph, const std::string& node_name, NodePart part) {
  const ir::Node* node = nullptr;
  for (const auto& n : graph.nodes())
    if (n->name == node_name) node = n.get();
  if (!node) throw Error("node '" + node_name + "' is not in the model");
  quant::Plan sub;
  auto take = [&](const std::string& name) {
    const quant::TensorPlan* t = plan.find(name);
    if (!t || sub.find(name)) return;
    bool activation = t->role == quant::Role::Activation;
    if ((part == NodePart::Weight && activation) || (part == NodePart::Activations && !activation)) return;
    quant::TensorPlan copy = *t;
    if (activation && !copy.shared_from.empty()) {
      const quant::TensorPlan& provider = plan.provider(name);
      copy.type = provider.type;
      copy.params = provider.params;
      copy.pos = provider.pos;
      copy.shared_from.clear();
    }
    sub.index[name] = sub.tensors.size();
    sub.tensors.push_back(std::move(copy));
    if (plan.removed_activations.count(name)) sub.removed_activations.insert(name);
  };
  for (const ir::Value* v : node->inputs())
    if (v) take(v->name());
  for (const ir::Value* v : node->outputs()) {
    if (!v) continue;
    take(v->name());
    // An activation removed after this node: the node writes its output, whose Q/DQ clips.
    for (const ir::Use& use : v->uses())
      if (const ir::Value* out = use.node->output(0))
        if (plan.removed_activations.count(out->name())) take(out->name());
  }
  sub.quantized_nodes = {node_name};
  return sub;
}

OutputMetrics simulated_error(const ir::Model& model, const quant::Plan& plan, const quant::QuantConfig& config,
                              const ReferenceOutputs& reference, int threads) {
  if (plan.tensors.empty()) return {};
  quant::Simulation simulation(model, plan, config, threads);
  return compare_to_reference(reference, [&](const Feed& feed) { return simulation.run(feed); });
}

LeftFloatPlan left_float_plans(const ir::Model& float_model, const std::optional<ir::Model>& prepared,
                               DataReader& reader, const quant::QuantConfig& config, quant::RangeCache& ranges) {
  auto nameable = std::make_shared<std::set<std::string>>();
  for (const auto& n : (prepared ? *prepared : float_model).graph->nodes()) nameable->insert(n->name);
  return [&float_model, &prepared, &reader, &config, &ranges,
          nameable](const std::string& node) -> std::optional<std::pair<ir::Model, quant::Plan>> {
    if (!nameable->count(node)) return std::nullopt;
    quant::QuantConfig without = config;
    without.nodes_to_exclude.push_back(node);
    quant::QuantizeResult q;
    if (prepared) q.prepared = ir::clone_model(*prepared);
    reader.rewind();
    quant::quantize_prepared(q, float_model, reader, without, {}, &ranges, /*with_export=*/false,
                             finetune::post_quantization_refiner(without));
    return std::pair{q.prepared ? std::move(*q.prepared) : ir::clone_model(float_model), std::move(q.plan)};
  };
}

std::vector<NodeSensitivity> analyze_nodes(const ir::Model& model, const quant::Plan& plan,
                                           const quant::QuantConfig& config, const ReferenceOutputs& reference,
                                           int threads, bool split, const LeftFloatPlan& left_float,
                                           const std::function<void(const std::string&)>& log,
                                           const ProgressFunction& progress) {
  // Per node: the plan of the node alone, then (split, with a weight) of its activations and of
  // its weight. Without a weight, the activations are the whole error: no second plan for them.
  // A plan of the same tensors as one before (a Relu's output, which is also the activations of
  // the node reading it, when enable_dpu leaves no Q/DQ between a node and its activation) is
  // measured once.
  std::vector<std::vector<quant::Plan>> groups(plan.quantized_nodes.size());
  std::map<std::string, std::pair<size_t, size_t>> measure_of;  // tensors -> group, index
  std::vector<std::vector<std::pair<size_t, size_t>>> parts(plan.quantized_nodes.size());
  std::vector<bool> weighted;
  for (size_t i = 0; i < plan.quantized_nodes.size(); ++i) {
    const std::string& name = plan.quantized_nodes[i];
    auto add = [&](quant::Plan p) {
      std::vector<std::string> names;
      for (const quant::TensorPlan& t : p.tensors) names.push_back(t.name);
      std::sort(names.begin(), names.end());
      std::string key;
      for (const std::string& n : names) key += n + '\n';
      key += '\n';
      for (const std::string& n : p.removed_activations) key += n + '\n';
      auto [it, fresh] = measure_of.try_emplace(key, i, groups[i].size());
      if (fresh) groups[i].push_back(std::move(p));
      parts[i].push_back(it->second);
    };
    quant::Plan alone = plan_of_node(plan, *model.graph, name, NodePart::All);
    bool w = false;
    for (const quant::TensorPlan& t : alone.tensors) w = w || t.role != quant::Role::Activation;
    weighted.push_back(w);
    add(std::move(alone));
    if (split && w) {
      add(plan_of_node(plan, *model.graph, name, NodePart::Activations));
      add(plan_of_node(plan, *model.graph, name, NodePart::Weight));
    }
  }
  auto start = std::chrono::steady_clock::now();
  DownstreamStats stats;
  std::vector<std::vector<OutputMetrics>> measured =
      downstream_errors(model, groups, config, reference, threads, &stats, progress);
  if (log) {
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::ostringstream line;
    line << std::fixed << std::setprecision(1) << "measured " << groups.size() << " nodes (" << measure_of.size()
         << " plans) from their downstream regions in " << seconds << " s: " << describe(stats);
    log(line.str());
  }
  auto result = [&](size_t i, size_t part) { return measured[parts[i][part].first][parts[i][part].second]; };
  std::vector<NodeSensitivity> nodes;
  for (size_t i = 0; i < plan.quantized_nodes.size(); ++i) {
    if (left_float && progress) progress({"sensitivity, left float", "nodes", i, plan.quantized_nodes.size()});
    NodeSensitivity s;
    s.node = plan.quantized_nodes[i];
    for (const auto& n : model.graph->nodes())
      if (n->name == s.node) s.op_type = n->op_type;
    s.alone = result(i, 0);
    if (split) {
      s.activations = weighted[i] ? result(i, 1) : s.alone;
      s.weight = weighted[i] ? result(i, 2) : OutputMetrics{};
    }
    if (left_float && std::isfinite(s.alone.sqnr_db))
      if (auto without = left_float(s.node))
        s.left_float = simulated_error(without->first, without->second, config, reference, threads);
    nodes.push_back(std::move(s));
  }
  if (left_float && progress)
    progress({"sensitivity, left float", "nodes", plan.quantized_nodes.size(), plan.quantized_nodes.size()});
  std::stable_sort(nodes.begin(), nodes.end(), [](const NodeSensitivity& a, const NodeSensitivity& b) {
    return a.alone.sqnr_db < b.alone.sqnr_db;
  });
  return nodes;
}

namespace {

nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

nlohmann::json metrics_json(const std::optional<OutputMetrics>& m) {
  if (!m) return nullptr;
  return {{"sqnr_db", number(m->sqnr_db)},
          {"cosine", number(m->cosine)},
          {"rmse", number(m->rmse)},
          {"kl", m->kl ? number(*m->kl) : nlohmann::json(nullptr)}};
}

std::string text(double v, int precision = 2) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::ostringstream out;
  out << std::fixed << std::setprecision(precision) << v;
  return out.str();
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace

SensitivityReport analyze_sensitivity(const ir::Model& model, DataReader& reader, const quant::QuantConfig& config,
                                      const SensitivityOptions& o, const std::function<void(const std::string&)>& log) {
  if (o.samples == 0) throw Error("sensitivity: measuring needs at least 1 sample");
  std::optional<ir::Model> prepared = quant::prepare_float_model(model, reader, config, log);
  quant::RangeCache ranges;
  quant::QuantizeResult q;
  if (prepared) q.prepared = ir::clone_model(*prepared);
  reader.rewind();
  // Progress counts the calibration's samples; the later reads (references, left-float plans) not.
  std::unique_ptr<DataReader> counted;
  if (o.progress) counted = calib::make_progress_reader(reader, o.progress, config.calib.max_samples);
  quant::quantize_prepared(q, model, counted ? *counted : reader, config, log, &ranges, /*with_export=*/false,
                           finetune::post_quantization_refiner(config, log));
  const ir::Model& float_prepared = prepared ? *prepared : model;
  ReferenceOutputs reference =
      prepared_reference_outputs(float_prepared, reader, config, o.output_index, o.samples, o.threads);
  const ir::Model& simulated = q.prepared ? *q.prepared : model;
  SensitivityReport r;
  r.samples = reference.feeds.size();
  r.output_index = o.output_index;
  r.whole_model = simulated_error(simulated, q.plan, config, reference, o.threads);
  LeftFloatPlan left_float;
  if (o.left_float) left_float = left_float_plans(model, prepared, reader, config, ranges);
  if (log)
    log("measuring " + std::to_string(q.plan.quantized_nodes.size()) + " quantized nodes on " +
        std::to_string(r.samples) + " samples");
  r.nodes = analyze_nodes(simulated, q.plan, config, reference, o.threads, o.split, left_float, log, o.progress);
  return r;
}

nlohmann::json sensitivity_json(const SensitivityReport& report) {
  nlohmann::json j;
  j["output_index"] = report.output_index;
  j["samples"] = report.samples;
  j["whole_model"] = metrics_json(report.whole_model);
  j["nodes"] = nlohmann::json::array();
  for (const NodeSensitivity& s : report.nodes)
    j["nodes"].push_back({{"node", s.node},
                          {"op_type", s.op_type},
                          {"alone", metrics_json(s.alone)},
                          {"weight", metrics_json(s.weight)},
                          {"activations", metrics_json(s.activations)},
                          {"left_float", metrics_json(s.left_float)}});
  return j;
}

std::string sensitivity_csv(const std::vector<NodeSensitivity>& nodes) {
  std::ostringstream out;
  out << "node,op_type";
  for (const char* m : {"alone", "weight", "activations", "left_float"})
    for (const char* k : {"sqnr_db", "cosine", "rmse", "kl"}) out << "," << m << "_" << k;
  out << "\n";
  auto row = [&](const std::optional<OutputMetrics>& m) {
    if (!m) {
      out << ",,,,";
      return;
    }
    out << "," << text(m->sqnr_db, 6) << "," << text(m->cosine, 9) << "," << text(m->rmse, 9) << ","
        << (m->kl ? text(*m->kl, 9) : "");
  };
  for (const NodeSensitivity& s : nodes) {
    out << csv_field(s.node) << "," << csv_field(s.op_type);
    row(s.alone);
    row(s.weight);
    row(s.activations);
    row(s.left_float);
    out << "\n";
  }
  return out.str();
}

std::string sensitivity_html(const SensitivityReport& report, const std::string& title) {
  const std::vector<NodeSensitivity>& nodes = report.nodes;
  const OutputMetrics& whole_model = report.whole_model;
  bool split = false, left_float = false;
  for (const NodeSensitivity& s : nodes) {
    split = split || s.weight.has_value();
    left_float = left_float || s.left_float.has_value();
  }
  // Bars show the error as dB below a ceiling: a longer bar is a larger error (lower SQNR).
  constexpr double kCeilingDb = 60, kScale = 6;  // px per dB
  constexpr int kRow = 26, kBar = 7;
  // Labels right-aligned before the bars, wide enough for the longest (about 7 px a character).
  size_t longest = 0;
  for (const NodeSensitivity& s : nodes) longest = std::max(longest, s.node.size() + s.op_type.size() + 2);
  const int kLabel = static_cast<int>(std::clamp<size_t>(longest * 7, 120, 900));
  auto bar_length = [&](double sqnr) {
    if (std::isnan(sqnr) || sqnr == -kInfinity) return kCeilingDb * kScale;
    return std::clamp(kCeilingDb - sqnr, 0.0, kCeilingDb) * kScale;
  };
  std::ostringstream svg;
  int height = static_cast<int>(nodes.size()) * kRow + 40;
  int width = kLabel + static_cast<int>(kCeilingDb * kScale) + 120;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  for (int db = 0; db <= kCeilingDb; db += 10) {
    double x = kLabel + (kCeilingDb - db) * kScale;
    svg << "<line x1=\"" << x << "\" y1=\"20\" x2=\"" << x << "\" y2=\"" << height - 10
        << "\" stroke=\"#ddd\"/><text x=\"" << x << "\" y=\"14\" text-anchor=\"middle\" fill=\"#666\">" << db
        << " dB</text>\n";
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeSensitivity& s = nodes[i];
    int y = 24 + static_cast<int>(i) * kRow;
    svg << "<text x=\"" << kLabel - 6 << "\" y=\"" << y + 14 << "\" text-anchor=\"end\">" << html_escape(s.node)
        << " <tspan fill=\"#888\">" << html_escape(s.op_type) << "</tspan></text>\n";
    struct Part {
      std::optional<OutputMetrics> metrics;
      const char* color;
      const char* name;
    };
    const Part parts[] = {
        {s.alone, "#c0392b", "alone"}, {s.weight, "#2e86c1", "weight"}, {s.activations, "#27ae60", "activations"}};
    for (size_t p = 0; p < 3; ++p) {
      if (!parts[p].metrics) continue;
      double sqnr = parts[p].metrics->sqnr_db;
      svg << "<rect x=\"" << kLabel << "\" y=\"" << y + static_cast<int>(p) * kBar << "\" width=\"" << bar_length(sqnr)
          << "\" height=\"" << kBar - 1 << "\" fill=\"" << parts[p].color << "\"><title>" << html_escape(s.node) << " "
          << parts[p].name << ": " << text(sqnr) << " dB</title></rect>\n";
    }
    svg << "<text x=\"" << kLabel + bar_length(s.alone.sqnr_db) + 6 << "\" y=\"" << y + 10 << "\">"
        << text(s.alone.sqnr_db, 1) << " dB</text>\n";
  }
  svg << "</svg>\n";

  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Sensitivity: " << html_escape(title)
       << "</title>\n<style>body{font-family:sans-serif;margin:24px;color:#222}table{border-collapse:collapse;"
          "font-size:13px}td,th{padding:2px 10px;border-bottom:1px solid #eee;text-align:right}"
          "td:first-child,th:first-child{text-align:left}.key span{display:inline-block;width:12px;height:12px;"
          "margin:0 4px 0 14px}</style></head><body>\n";
  html << "<h1>Quantization sensitivity</h1>\n<p>" << html_escape(title) << "</p>\n";
  html << "<p>Whole model quantized: output SQNR <b>" << text(whole_model.sqnr_db) << " dB</b>, cosine "
       << text(whole_model.cosine, 5);
  if (whole_model.kl) html << ", KL " << text(*whole_model.kl, 5);
  html << ".</p>\n<p>Each node alone quantized, worst first; a longer bar is a larger error at the output "
          "(the bar ends at the SQNR on the axis).</p>\n<p class=\"key\"><span style=\"background:#c0392b\"></span>"
          "node alone";
  if (split)
    html << "<span style=\"background:#2e86c1\"></span>its weight only<span style=\"background:#27ae60\">"
            "</span>its activations only";
  html << "</p>\n" << svg.str();
  auto cell = [](const std::optional<OutputMetrics>& m) { return "<td>" + (m ? text(m->sqnr_db) : "") + "</td>"; };
  html << "<h2>Table</h2>\n<table><tr><th>node</th><th>op</th><th>alone dB</th>"
       << (split ? "<th>weight dB</th><th>activations dB</th>" : "") << (left_float ? "<th>all but this, dB</th>" : "")
       << "<th>alone cosine</th></tr>\n";
  for (const NodeSensitivity& s : nodes) {
    html << "<tr><td>" << html_escape(s.node) << "</td><td>" << html_escape(s.op_type) << "</td><td>"
         << text(s.alone.sqnr_db) << "</td>";
    if (split) html << cell(s.weight) << cell(s.activations);
    if (left_float) html << cell(s.left_float);
    html << "<td>" << text(s.alone.cosine, 5) << "</td></tr>\n";
  }
  html << "</table>\n</body></html>\n";
  return html.str();
}

}  // namespace onnxptq::accuracy
