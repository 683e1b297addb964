#include "quant/quarot.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <span>
#include <sstream>

#include "engine/session.h"
#include "onnxptq/error.h"
#include "onnxptq/files.h"

namespace onnxptq::quant {
namespace {

struct Pair {
  std::vector<std::string> prev_nodes, next_nodes;
  std::string norm_node;
};

// R1_pairs of the JSON file; Error naming the file and what is wrong.
std::vector<Pair> read_pairs(const std::string& path) {
  const std::string what = "RConfigPath " + path + ": ";
  const std::string text = read_text_file(path, "RConfigPath " + path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(what + "not JSON (" + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("R1_pairs")) throw Error(what + "expected an object with R1_pairs");
  for (const auto& [key, value] : j.items())
    if (key != "R1_pairs")
      throw Error(what + "key '" + key + "': onnxptq, as Quark's ONNX QuaRot, rotates R1_pairs only");
  const nlohmann::json& list = j["R1_pairs"];
  if (!list.is_array() || list.empty()) throw Error(what + "R1_pairs must be a non-empty list");
  std::vector<Pair> pairs;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = what + "R1_pairs[" + std::to_string(i) + "] ";
    const nlohmann::json& p = list[i];
    if (!p.is_object()) throw Error(at + "is not an object");
    Pair pair;
    for (const auto& [key, value] : p.items()) {
      if (key == "norm_node") {
        if (!value.is_string() && !value.is_null()) throw Error(at + "norm_node must be a node name");
        if (value.is_string()) pair.norm_node = value.get<std::string>();
      } else if (key == "prev_nodes" || key == "next_nodes") {
        if (!value.is_array()) throw Error(at + key + " must be a list of node names");
        for (const auto& name : value) {
          if (!name.is_string()) throw Error(at + key + " must be a list of node names");
          (key == "prev_nodes" ? pair.prev_nodes : pair.next_nodes).push_back(name.get<std::string>());
        }
      } else {
        throw Error(at + "has key '" + key + "' (known: prev_nodes, next_nodes, norm_node)");
      }
    }
    pairs.push_back(std::move(pair));
  }
  return pairs;
}

// The float32 initializer input `index` of `node`, made the node's own (copied when another
// node, or the graph's interface, also has it), or Error naming the node.
ir::Value* own_weight(ir::Graph& graph, ir::Node* node, size_t index, const std::string& what) {
  ir::Value* v = index < node->inputs().size() ? node->input(index) : nullptr;
  if (!v || !v->has_initializer())
    throw Error(what + ": input " + std::to_string(index) + " is not a constant (QuaRot rotates constant weights)");
  if (v->initializer().dtype() != ir::DataType::Float)
    throw Error(what + ": weight '" + v->name() + "' is " + std::string(ir::data_type_name(v->initializer().dtype())) +
                ", QuaRot rotates float weights");
  if (v->uses().size() == 1 && !graph.is_output(v) && !graph.is_input(v)) return v;
  ir::Value* copy = graph.add_unique_value(v->name() + "_rotated");
  graph.set_initializer(copy, v->initializer());
  graph.set_node_input(node, index, copy);
  return copy;
}

// Each vector of n values along `axis` (0 or 1) of the 2-D weight `v`: scaled element by element
// by `scale` when given, then rotated (hadamard_rotate).
void rotate_along(ir::Value* v, int axis, int64_t n, const std::vector<double>& signs, const std::vector<double>* scale,
                  const std::string& what) {
  const ir::Tensor& t = v->initializer();
  if (t.dims().size() != 2 || t.dims()[static_cast<size_t>(axis)] != n)
    throw Error(what + ": weight '" + v->name() + "' has dims " + ir::dims_to_string(t.dims()) + ", expected " +
                std::to_string(n) + " (RMatrixDim) along axis " + std::to_string(axis) + " of a 2-D weight");
  const int64_t rows = t.dims()[0], cols = t.dims()[1];
  std::vector<float> w(t.values<float>().begin(), t.values<float>().end());
  const int64_t count = axis == 1 ? rows : cols;
  std::vector<double> fiber(static_cast<size_t>(n));
  for (int64_t f = 0; f < count; ++f) {
    auto at = [&](int64_t i) -> float& { return axis == 1 ? w[f * cols + i] : w[i * cols + f]; };
    for (int64_t i = 0; i < n; ++i) fiber[i] = at(i) * (scale ? (*scale)[i] : 1.0);
    hadamard_rotate(fiber.data(), n, signs);
    for (int64_t i = 0; i < n; ++i) at(i) = static_cast<float>(fiber[i]);
  }
  v->graph()->set_initializer(v, ir::Tensor::from_values<float>(t.dims(), w));
}

// A bias of n values (any shape whose size is n and whose last dimension is n), rotated.
void rotate_bias(ir::Value* v, int64_t n, const std::vector<double>& signs, const std::string& what) {
  const ir::Tensor& t = v->initializer();
  if (t.size() != n || t.dims().empty() || t.dims().back() != n)
    throw Error(what + ": bias '" + v->name() + "' has dims " + ir::dims_to_string(t.dims()) + ", expected " +
                std::to_string(n) + " values along its last axis (a bias that broadcasts otherwise does not rotate)");
  std::vector<double> b(t.values<float>().begin(), t.values<float>().end());
  hadamard_rotate(b.data(), n, signs);
  v->graph()->set_initializer(v, ir::Tensor::from_values<float>(t.dims(), std::vector<float>(b.begin(), b.end())));
}

bool default_domain(const ir::Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

// Gemm's B axis that holds the stream's channels: `input` side (the channels B multiplies) or
// output side; Error for transA.
int gemm_axis(const ir::Node& gemm, bool input_side, const std::string& what) {
  if (gemm.attr_int("transA", 0) != 0) throw Error(what + ": a Gemm with transA 1 (QuaRot takes transA 0)");
  const bool trans_b = gemm.attr_int("transB", 0) != 0;
  return input_side != trans_b ? 0 : 1;  // B [K, N]; transposed [N, K]
}

class Rotation {
 public:
  Rotation(ir::Graph& graph, const RotationOptions& o, std::string file)
      : graph_(graph), n_(o.matrix_dim), file_(std::move(file)) {
    if (o.random) signs_ = random_signs(n_);
    for (const auto& node : graph.nodes())
      if (!node->name.empty()) by_name_.emplace(node->name, node.get());
  }

  ir::Node* node(const std::string& name, const std::string& at) {
    auto it = by_name_.find(name);
    if (it == by_name_.end()) throw Error(at + "names '" + name + "', which is no node of the model's graph");
    return it->second;
  }

  // The scale of an RMS norm, set to ones; returns its values.
  std::vector<double> take_norm_scale(ir::Node* norm, const std::string& what) {
    size_t index = 1;
    if (norm->op_type == "Mul" && default_domain(*norm)) {
      const bool first = norm->input(0) && norm->input(0)->has_initializer();
      const bool second = norm->inputs().size() > 1 && norm->input(1) && norm->input(1)->has_initializer();
      if (first == second)
        throw Error(what + ": a Mul norm_node multiplies by one constant scale (an RMS norm's last step)");
      index = first ? 0 : 1;
    } else if (norm->op_type == "LayerNormalization") {
      throw Error(what +
                  ": LayerNormalization subtracts the mean, which the rotation does not keep; QuaRot's R1 "
                  "takes RMS norms (SimplifiedLayerNormalization, RMSNormalization, or a decomposed one's Mul)");
    } else if (!(norm->op_type == "SimplifiedLayerNormalization" && norm->domain == "com.microsoft") &&
               !(norm->op_type == "RMSNormalization" && default_domain(*norm))) {
      throw Error(what + ": a " + norm->op_type +
                  " is not an RMS norm (SimplifiedLayerNormalization, RMSNormalization, or a Mul by its scale)");
    } else if (norm->inputs().size() > 2 && norm->input(2)) {
      throw Error(what + ": the norm has a bias, which QuaRot's R1 does not fold");
    }
    ir::Value* scale = own_weight(graph_, norm, index, what);
    const ir::Tensor& t = scale->initializer();
    if (t.size() != n_ || t.dims().empty() || t.dims().back() != n_)
      throw Error(what + ": scale '" + scale->name() + "' has dims " + ir::dims_to_string(t.dims()) + ", expected " +
                  std::to_string(n_) + " (RMatrixDim) values");
    std::vector<double> gamma(t.values<float>().begin(), t.values<float>().end());
    graph_.set_initializer(
        scale, ir::Tensor::from_values<float>(t.dims(), std::vector<float>(static_cast<size_t>(t.size()), 1.0f)));
    return gamma;
  }

  // A writer: its output becomes output R.
  void rotate_output(ir::Node* node, const std::string& what) {
    if (node->op_type == "Gather" && default_domain(*node)) {
      if (node->attr_int("axis", 0) != 0)
        throw Error(what + ": a Gather along axis other than 0 is no embedding lookup");
      rotate_along(own_weight(graph_, node, 0, what), 1, n_, signs_, nullptr, what);
      return;
    }
    if (node->op_type == "MatMul" && default_domain(*node)) {
      rotate_along(own_weight(graph_, node, 1, what), 1, n_, signs_, nullptr, what);
      // A bias added after it: the constant of the one Add that reads its output.
      ir::Value* out = node->output(0);
      if (out && out->uses().size() == 1 && !graph_.is_output(out)) {
        ir::Node* add = out->uses()[0].node;
        if (add->op_type == "Add" && default_domain(*add) && add->inputs().size() == 2) {
          const size_t other = add->input(0) == out ? 1 : 0;
          if (add->input(other) && add->input(other)->has_initializer())
            rotate_bias(own_weight(graph_, add, other, what + " (its bias Add '" + add->name + "')"), n_, signs_, what);
        }
      }
      return;
    }
    if (node->op_type == "Gemm" && default_domain(*node)) {
      rotate_along(own_weight(graph_, node, 1, what), gemm_axis(*node, false, what), n_, signs_, nullptr, what);
      if (node->inputs().size() > 2 && node->input(2)) rotate_bias(own_weight(graph_, node, 2, what), n_, signs_, what);
      return;
    }
    throw Error(what + ": a " + node->op_type + " (prev_nodes are MatMul, Gemm or an embedding's Gather)");
  }

  // A reader: its input's rotation is undone (W becomes R^T W), its norm's scale taken first.
  void unrotate_input(ir::Node* node, const std::vector<double>* gamma, const std::string& what) {
    int axis = 0;
    if (node->op_type == "Gemm" && default_domain(*node))
      axis = gemm_axis(*node, true, what);
    else if (!(node->op_type == "MatMul" && default_domain(*node)))
      throw Error(what + ": a " + node->op_type + " (next_nodes are MatMul or Gemm)");
    rotate_along(own_weight(graph_, node, 1, what), axis, n_, signs_, gamma, what);
  }

  QuaRotResult run(const std::vector<Pair>& pairs) {
    QuaRotResult r;
    std::set<const ir::Node*> rotated_out, rotated_in;
    for (size_t i = 0; i < pairs.size(); ++i) {
      const Pair& p = pairs[i];
      const std::string at = "RConfigPath " + file_ + ": R1_pairs[" + std::to_string(i) + "] ";
      std::vector<double> gamma;
      if (!p.norm_node.empty()) {
        gamma = take_norm_scale(node(p.norm_node, at + "norm_node "), at + "norm_node '" + p.norm_node + "'");
        ++r.norms;
      }
      for (const std::string& name : p.prev_nodes) {
        ir::Node* n = node(name, at + "prev_nodes ");
        if (!rotated_out.insert(n).second) throw Error(at + "prev_nodes names '" + name + "' a second time");
        rotate_output(n, at + "prev_nodes '" + name + "'");
      }
      for (const std::string& name : p.next_nodes) {
        ir::Node* n = node(name, at + "next_nodes ");
        if (!rotated_in.insert(n).second) throw Error(at + "next_nodes names '" + name + "' a second time");
        unrotate_input(n, gamma.empty() ? nullptr : &gamma, at + "next_nodes '" + name + "'");
      }
      ++r.pairs;
    }
    r.rotated_out = rotated_out.size();
    r.rotated_in = rotated_in.size();
    return r;
  }

 private:
  ir::Graph& graph_;
  int64_t n_;
  std::string file_;
  std::vector<double> signs_;
  std::map<std::string, ir::Node*> by_name_;
};

}  // namespace

void hadamard_rotate(double* v, int64_t n, const std::vector<double>& signs) {
  if (!signs.empty())
    for (int64_t i = 0; i < n; ++i) v[i] *= signs[static_cast<size_t>(i)];
  for (int64_t h = 1; h < n; h *= 2)  // the fast Walsh-Hadamard transform: H v in Sylvester's order
    for (int64_t i = 0; i < n; i += 2 * h)
      for (int64_t j = i; j < i + h; ++j) {
        const double a = v[j], b = v[j + h];
        v[j] = a + b;
        v[j + h] = a - b;
      }
  const double norm = 1.0 / std::sqrt(static_cast<double>(n));
  for (int64_t i = 0; i < n; ++i) v[i] *= norm;
}

std::vector<double> random_signs(int64_t n) {
  std::mt19937 rng(20240400);  // fixed: the same rotation every run
  std::vector<double> s(static_cast<size_t>(n));
  for (double& e : s) e = (rng() & 1u) ? 1.0 : -1.0;
  return s;
}

void check_rotation_kept_function(const ir::Model& rotated, const Feed& feed, const std::vector<ir::Tensor>& before,
                                  const RotationOptions& options, int threads) {
  engine::SessionOptions so;
  so.threads = threads;
  const std::vector<ir::Tensor> after = engine::Session(rotated, so).run(feed);
  for (size_t o = 0; o < before.size() && o < after.size(); ++o) {
    if (before[o].dtype() != ir::DataType::Float || after[o].dtype() != ir::DataType::Float) continue;
    std::span<const float> a = before[o].values<float>(), b = after[o].values<float>();
    if (a.size() != b.size() || a.empty()) continue;
    double lo = INFINITY, hi = -INFINITY, worst = 0;
    for (size_t i = 0; i < a.size(); ++i)
      if (std::isfinite(a[i])) {
        lo = std::min(lo, double{a[i]});
        hi = std::max(hi, double{a[i]});
      }
    for (size_t i = 0; i < a.size(); ++i)
      if (std::isfinite(a[i])) worst = std::max(worst, std::abs(double{a[i]} - double{b[i]}));
    const double range = std::max(hi - lo, 1e-30);
    if (!(worst <= 1e-3 * range)) {
      std::ostringstream text;
      text << "RConfigPath " << options.config_path << ": the rotated model's output '"
           << rotated.graph->outputs()[o]->name() << "' differs from the float model's by " << std::setprecision(3)
           << worst / range
           << " of its range on the first calibration sample: the R1_pairs miss a node that reads or writes the "
              "rotated stream, or name one that does not";
      throw Error(text.str());
    }
  }
}

QuaRotResult rotate_r1(ir::Model& model, const RotationOptions& options,
                       const std::function<void(const std::string&)>& log) {
  const std::vector<Pair> pairs = read_pairs(options.config_path);
  Rotation rotation(*model.graph, options, options.config_path);
  const QuaRotResult r = rotation.run(pairs);
  if (log)
    log("QuaRot: R1 rotation (" + std::string(options.random ? "random " : "") + "Hadamard " +
        std::to_string(options.matrix_dim) + ") of " + std::to_string(r.pairs) + " pairs: the outputs of " +
        std::to_string(r.rotated_out) + " nodes rotated, the inputs of " + std::to_string(r.rotated_in) +
        " restored, " + std::to_string(r.norms) + " norms' scales folded into them");
  return r;
}

}  // namespace onnxptq::quant
