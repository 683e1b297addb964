#include "quant/smooth_quant.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include "engine/kernel.h"
#include "engine/parallel.h"
#include "engine/session.h"
#include "onnxptq/error.h"
#include "qmath/params.h"

namespace onnxptq::quant {
namespace {

// Rows of each input kept for SmoothAlpha "auto" (from the first samples): enough to rank the
// grid's alphas, few enough that the search's products stay cheap.
constexpr int64_t kSearchRows = 256;
// No channel scale below this (Intel Neural Compressor's floor): a channel that is zero in every
// sample or every weight row keeps a usable scale.
constexpr double kSmallestScale = 1e-5;

bool default_domain(const ir::Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

// One input and the MatMuls reading it as A.
struct Group {
  ir::Value* input = nullptr;
  std::vector<ir::Node*> matmuls;
  std::vector<std::vector<float>> weights;  // each MatMul's B as float, [channels, n] row-major
  int64_t channels = 0;
  std::vector<double> activation_max;  // a_j over the calibration samples
  std::vector<float> rows;             // up to kSearchRows rows of the input, channels each
};

std::vector<float> float_values(const ir::Tensor& t) {
  ir::Tensor f = engine::as_float32(t);
  return {f.values<float>().begin(), f.values<float>().end()};
}

// The largest |value| of each row of a [channels, n] weight, over every weight of the group.
std::vector<double> weight_row_max(const Group& g) {
  std::vector<double> w(static_cast<size_t>(g.channels), 0.0);
  for (const std::vector<float>& b : g.weights) {
    const size_t n = b.size() / w.size();
    for (size_t j = 0; j < w.size(); ++j)
      for (size_t k = 0; k < n; ++k) w[j] = std::max(w[j], static_cast<double>(std::abs(b[j * n + k])));
  }
  return w;
}

std::vector<double> channel_scales(const Group& g, const std::vector<double>& w, double alpha) {
  std::vector<double> s(w.size(), 1.0);
  for (size_t j = 0; j < s.size(); ++j) {
    const double a = g.activation_max[j];
    if (a > 0 && w[j] > 0) s[j] = std::max(std::pow(a, alpha) / std::pow(w[j], 1 - alpha), kSmallestScale);
  }
  return s;
}

// The symmetric integer bound of the type the search quantizes with: a 16-bit type's, else 8 bits'.
double symmetric_bound(ir::DataType t) {
  const bool wide = t == ir::DataType::Int16 || t == ir::DataType::UInt16;
  return wide ? 32767.0 : 127.0;
}

// x rounded to the symmetric grid of `scale` and bound `q`.
inline float fake_symmetric(float x, float scale, float q) {
  return std::clamp(std::nearbyint(x / scale), -q, q) * scale;
}

// SmoothAlpha "auto"'s measure for `s`: the squared error, over the kept rows and every MatMul of
// the group, of the product of the fake-quantized smoothed input (per tensor, its calibrated
// largest |x / s|) and smoothed weight (per column with per_channel, else per tensor) against the
// float product.
double smoothed_error(const Group& g, const std::vector<double>& s, const QuantConfig& config, int threads) {
  const auto k = static_cast<size_t>(g.channels);
  const size_t rows = g.rows.size() / k;
  double x_max = 0;
  for (size_t j = 0; j < k; ++j) x_max = std::max(x_max, g.activation_max[j] / s[j]);
  const auto qa = static_cast<float>(symmetric_bound(config.activation_type));
  const auto qw = static_cast<float>(symmetric_bound(config.weight_type));
  const float x_scale = x_max > 0 ? static_cast<float>(x_max) / qa : 1.0f;
  std::vector<float> xq(g.rows.size());
  for (size_t r = 0; r < rows; ++r)
    for (size_t j = 0; j < k; ++j)
      xq[r * k + j] = fake_symmetric(static_cast<float>(g.rows[r * k + j] / s[j]), x_scale, qa);
  double error = 0;
  for (const std::vector<float>& b : g.weights) {
    const size_t n = b.size() / k;
    std::vector<float> wq(b.size());
    std::vector<float> column_max(config.per_channel ? n : 1, 0.0f);
    for (size_t j = 0; j < k; ++j)
      for (size_t c = 0; c < n; ++c) {
        float& top = column_max[config.per_channel ? c : 0];
        top = std::max(top, std::abs(static_cast<float>(b[j * n + c] * s[j])));
      }
    for (size_t j = 0; j < k; ++j)
      for (size_t c = 0; c < n; ++c) {
        const float top = column_max[config.per_channel ? c : 0];
        wq[j * n + c] = fake_symmetric(static_cast<float>(b[j * n + c] * s[j]), top > 0 ? top / qw : 1.0f, qw);
      }
    error += engine::parallel_sum(threads, static_cast<int64_t>(rows), 8, [&](int64_t r0, int64_t r1) {
      double sum = 0;
      std::vector<float> exact(n), quantized(n);
      for (auto r = static_cast<size_t>(r0); r < static_cast<size_t>(r1); ++r) {
        std::fill(exact.begin(), exact.end(), 0.0f);
        std::fill(quantized.begin(), quantized.end(), 0.0f);
        for (size_t j = 0; j < k; ++j) {
          const float x = g.rows[r * k + j], x_q = xq[r * k + j];
          const float *w = b.data() + j * n, *w_q = wq.data() + j * n;
#pragma omp simd
          for (size_t c = 0; c < n; ++c) {
            exact[c] += x * w[c];
            quantized[c] += x_q * w_q[c];
          }
        }
        for (size_t c = 0; c < n; ++c) sum += static_cast<double>(quantized[c] - exact[c]) * (quantized[c] - exact[c]);
      }
      return sum;
    });
  }
  return error;
}

// The alphas SmoothAlphaRange spans: min, min + step, ... up to max.
std::vector<double> alpha_grid(const SmoothQuantOptions& o) {
  std::vector<double> grid;
  for (int i = 0;; ++i) {
    const double a = o.alpha_min + i * o.alpha_step;
    if (a > o.alpha_max + 1e-9) break;
    grid.push_back(std::min(a, o.alpha_max));
  }
  return grid;
}

// A float initializer of `channels` values along the last axis (shape [C] or [1, ..., 1, C]).
bool per_channel_constant(const ir::Value* v, int64_t channels) {
  if (!v || !v->has_initializer() || v->initializer().dtype() != ir::DataType::Float) return false;
  const std::vector<int64_t>& d = v->initializer().dims();
  return !d.empty() && d.back() == channels && v->initializer().size() == channels;
}

// Where a group's 1/s can go instead of a Mul: constants of the node that makes the input, each
// scaled along its axis of the input's channels (`row`: the elements one channel's factor
// covers in a row-major walk, 0 meaning consecutive elements cycle through the channels).
struct Fold {
  ir::Node* node = nullptr;
  std::vector<std::pair<size_t, size_t>> inputs;  // (input index, row)
  std::string what;                               // for the log
};

// The input's producer, when it is linear in its output channels with constant parameters and
// only the group reads the input: a LayerNormalization over the last axis (scale, bias), a
// MatMul with a constant 2-D B (B's columns), a Gemm with a constant B and a per-column or no C
// (B's columns or rows, C), a Mul by a per-channel constant, or an Add of a per-channel
// constant after one of these MatMuls or Gemms (both). Empty when the input has none.
std::vector<Fold> foldable_producer(const ir::Graph& graph, const Group& g) {
  if (graph.is_output(g.input) || g.input->uses().size() != g.matmuls.size()) return {};
  ir::Node* p = g.input->producer();
  if (!p || !default_domain(*p) || p->output(0) != g.input) return {};
  const int64_t c = g.channels;
  if (p->op_type == "LayerNormalization") {
    const auto shape = g.input->type.static_shape();
    const int64_t axis = p->attr_int("axis", -1);
    if (!(axis == -1 || (shape && axis == static_cast<int64_t>(shape->size()) - 1))) return {};
    Fold f{p, {}, "LayerNormalization"};
    for (size_t i = 1; i < 3 && i < p->inputs().size(); ++i) {
      if (!p->input(i)) continue;
      if (!per_channel_constant(p->input(i), c)) return {};
      f.inputs.push_back({i, 1});
    }
    return p->input(1) ? std::vector<Fold>{f} : std::vector<Fold>{};
  }
  if (p->op_type == "Mul" && p->inputs().size() == 2) {
    for (size_t i = 0; i < 2; ++i)
      if (per_channel_constant(p->input(i), c) && p->input(1 - i) && !p->input(1 - i)->has_initializer())
        return {Fold{p, {{i, 1}}, "Mul"}};
    return {};
  }
  // A linear layer: its weight's output columns are the channels.
  auto linear = [&](ir::Node* n) -> std::optional<Fold> {
    if (!n || !default_domain(*n)) return std::nullopt;
    const ir::Value* b = n->inputs().size() > 1 ? n->input(1) : nullptr;
    if (!b || !b->has_initializer() || b->initializer().dtype() != ir::DataType::Float ||
        b->initializer().dims().size() != 2 || n->input(0)->has_initializer())
      return std::nullopt;
    const std::vector<int64_t>& d = b->initializer().dims();
    if (n->op_type == "MatMul" && d[1] == c) return Fold{n, {{1, 0}}, "MatMul"};
    if (n->op_type != "Gemm" || n->attr_int("transA", 0) != 0) return std::nullopt;
    const bool trans_b = n->attr_int("transB", 0) != 0;
    if ((trans_b ? d[0] : d[1]) != c) return std::nullopt;
    Fold f{n, {{1, trans_b ? static_cast<size_t>(d[1]) : 0}}, "Gemm"};
    if (n->inputs().size() > 2 && n->input(2)) {
      if (!per_channel_constant(n->input(2), c)) return std::nullopt;
      f.inputs.push_back({2, 1});
    }
    return f;
  };
  if (std::optional<Fold> f = linear(p)) return {*f};
  if (p->op_type == "Add" && p->inputs().size() == 2) {
    for (size_t i = 0; i < 2; ++i) {
      ir::Value* before = p->input(1 - i);
      if (!per_channel_constant(p->input(i), c) || !before || graph.is_output(before) || before->uses().size() != 1)
        continue;
      if (std::optional<Fold> f = linear(before->producer()); f && before->producer()->output(0) == before)
        return {*f, Fold{p, {{i, 1}}, "Add"}};
    }
  }
  return {};
}

// `v` (an initializer) multiplied element by element by `factor`, one per channel: element i
// takes factor[(i / row) % channels], or factor[i % channels] when row is 0; in place when only
// `reader` reads it, else as a copy `reader` reads.
void scale_initializer(ir::Graph& graph, ir::Node* reader, size_t index, const std::vector<double>& factor,
                       size_t row) {
  ir::Value* v = reader->input(index);
  std::vector<float> values = float_values(v->initializer());
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = static_cast<float>(values[i] * factor[(row == 0 ? i : i / row) % factor.size()]);
  ir::Tensor t = ir::Tensor::from_values<float>(v->initializer().dims(), values);
  if (v->uses().size() == 1 && !graph.is_output(v) && !graph.is_input(v)) {
    graph.set_initializer(v, std::move(t));
    return;
  }
  ir::Value* copy = graph.add_unique_value(v->name() + "_smooth");
  graph.set_initializer(copy, std::move(t));
  graph.set_node_input(reader, index, copy);
}

}  // namespace

SmoothQuantResult smooth_quant(ir::Model& model, calib::DataReader& reader, const QuantConfig& config,
                               const std::function<bool(const ir::Node&)>& quantizable,
                               const std::function<void(const std::string&)>& log) {
  ir::Graph& graph = *model.graph;
  std::vector<Group> groups;
  std::map<const ir::Value*, size_t> group_of;
  for (ir::Node* n : graph.topological_order()) {
    if (n->op_type != "MatMul" || !default_domain(*n) || !quantizable(*n) || n->inputs().size() != 2) continue;
    ir::Value *a = n->input(0), *b = n->input(1);
    if (!a || !b || a->has_initializer() || !b->has_initializer() || b->initializer().dims().size() != 2 ||
        b->initializer().dtype() != ir::DataType::Float)
      continue;
    auto [at, added] = group_of.try_emplace(a, groups.size());
    if (added) groups.push_back({a, {}, {}, b->initializer().dims()[0], {}, {}});
    if (groups[at->second].channels == b->initializer().dims()[0]) groups[at->second].matmuls.push_back(n);
  }
  SmoothQuantResult result;
  if (groups.empty()) {
    if (log) log("SmoothQuant: no MatMul with a constant weight to smooth");
    return result;
  }

  engine::SessionOptions so;
  so.threads = config.calib.threads;
  so.hooks_ignore_layout = true;
  for (const Group& g : groups) so.visible.insert(g.input->name());
  engine::Session session(model, so);
  std::map<std::string, Group*> by_name;
  for (Group& g : groups) {
    g.activation_max.assign(static_cast<size_t>(g.channels), 0.0);
    by_name[g.input->name()] = &g;
  }
  const bool search = !config.smooth.alpha.has_value();
  engine::TensorObserver observe = [&](const std::string& name, const ir::Tensor& t) {
    auto it = by_name.find(name);
    if (it == by_name.end()) return;
    Group& g = *it->second;
    const std::vector<float> x = float_values(t);
    const auto k = static_cast<size_t>(g.channels);
    if (t.dims().empty() || t.dims().back() != g.channels)
      throw Error("SmoothQuant: MatMul input '" + name + "' has dims " + ir::dims_to_string(t.dims()) +
                  ", its weight " + std::to_string(k) + " rows");
    for (size_t i = 0; i < x.size(); ++i)
      if (std::isfinite(x[i]))
        g.activation_max[i % k] = std::max(g.activation_max[i % k], static_cast<double>(std::abs(x[i])));
    if (search) {
      const size_t kept = g.rows.size(), room = static_cast<size_t>(kSearchRows) * k - kept;
      g.rows.insert(g.rows.end(), x.begin(), x.begin() + static_cast<std::ptrdiff_t>(std::min(room, x.size())));
      for (size_t i = kept; i < g.rows.size(); ++i)
        if (!std::isfinite(g.rows[i])) g.rows[i] = 0;
    }
  };
  size_t samples = 0;
  while (config.calib.max_samples == 0 || samples < config.calib.max_samples) {
    std::optional<Feed> feed = reader.next();
    if (!feed) break;
    session.run_for_hooks(*feed, {&observe});
    ++samples;
  }
  if (samples == 0) throw Error("SmoothQuant: the calibration data has no sample");

  const int threads = config.calib.threads > 0 ? config.calib.threads : engine::hardware_threads();
  for (Group& g : groups) {
    for (const ir::Node* m : g.matmuls) g.weights.push_back(float_values(m->input(1)->initializer()));
    const std::vector<double> w = weight_row_max(g);
    double alpha = config.smooth.alpha.value_or(0);
    if (search) {
      double best = INFINITY;
      for (double a : alpha_grid(config.smooth)) {
        const double e = smoothed_error(g, channel_scales(g, w, a), config, threads);
        if (e < best) {
          best = e;
          alpha = a;
        }
      }
    }
    result.alpha[g.input->name()] = alpha;
    const std::vector<double> s = channel_scales(g, w, alpha);
    std::vector<double> inverse(s.size());
    for (size_t j = 0; j < s.size(); ++j) inverse[j] = 1.0 / s[j];
    const std::vector<Fold> folds = config.smooth.folding ? foldable_producer(graph, g) : std::vector<Fold>{};
    if (!folds.empty()) {
      for (const Fold& f : folds)
        for (const auto& [index, row] : f.inputs) scale_initializer(graph, f.node, index, inverse, row);
      ++result.folded_into[folds.front().what];
      ++result.folded;
    } else {
      ir::Value* smoothed = graph.add_unique_value(g.input->name() + "_smooth");
      ir::Value* factor = graph.add_unique_value(g.input->name() + "_smooth_scale");
      std::vector<float> f(inverse.begin(), inverse.end());
      graph.set_initializer(factor, ir::Tensor::from_values<float>({g.channels}, f));
      graph.insert_node_before(g.matmuls.front(), "Mul", {g.input, factor}, {smoothed},
                               graph.fresh_name(g.input->name() + "_SmoothQuant_Mul"));
      for (ir::Node* m : g.matmuls) graph.set_node_input(m, 0, smoothed);
      ++result.inserted;
    }
    for (ir::Node* m : g.matmuls) scale_initializer(graph, m, 1, s, m->input(1)->initializer().dims()[1]);
    ++result.inputs;
    result.matmuls += g.matmuls.size();
  }
  if (log) {
    std::ostringstream line;
    line << "SmoothQuant: " << result.matmuls << " MatMuls on " << result.inputs << " inputs, " << result.folded
         << " folded";
    if (!result.folded_into.empty()) {
      const char* separator = " (";
      for (const auto& [op, count] : result.folded_into) {
        line << separator << count << " into " << op;
        separator = ", ";
      }
      line << ")";
    }
    line << ", " << result.inserted << " Mul nodes inserted";
    if (search) {
      double lo = INFINITY, hi = -INFINITY;
      for (const auto& [name, a] : result.alpha) {
        lo = std::min(lo, a);
        hi = std::max(hi, a);
      }
      line << ", alpha " << lo << " to " << hi << " (auto)";
    } else {
      line << ", alpha " << *config.smooth.alpha;
    }
    log(line.str());
  }
  return result;
}

}  // namespace onnxptq::quant
