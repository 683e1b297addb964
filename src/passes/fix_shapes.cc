// fix_shapes: dynamic input dims made fixed, then every tensor's shape stored (Quark's
// convert_dynamic_to_fixed and fix_shapes tools, its FixShapes option), the shapes taken from one
// run of the engine rather than ONNX Runtime.
#include <random>
#include <set>

#include "engine/session.h"
#include "onnxptq/error.h"
#include "passes/model_format.h"

namespace onnxptq::passes {
namespace {

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  size_t b = s.find_last_not_of(" \t");
  return s.substr(a, b - a + 1);
}

std::string names_of(const std::vector<ir::Value*>& values) {
  std::string out;
  for (const ir::Value* v : values) out += (out.empty() ? "" : ", ") + v->name();
  return out;
}

// The fixed shape `dims` on a graph input or output; Error where the model says otherwise.
void fix_interface(ir::Value* v, const std::vector<int64_t>& dims, const char* kind) {
  const ir::ValueType& t = v->type;
  std::string where = std::string(kind) + " '" + v->name() + "'";
  if (!t.is_tensor()) throw Error("fix_shapes: " + where + " is not a tensor");
  if (t.has_shape) {
    if (t.shape.size() != dims.size())
      throw Error("fix_shapes: " + where + " is given " + ir::dims_to_string(dims) + " (rank " +
                  std::to_string(dims.size()) + "); the model says " + t.to_string());
    for (size_t i = 0; i < dims.size(); ++i)
      if (t.shape[i].has_value && t.shape[i].value != dims[i])
        throw Error("fix_shapes: " + where + " is given " + ir::dims_to_string(dims) + "; the model fixes dim " +
                    std::to_string(i) + " to " + std::to_string(t.shape[i].value) + " (" + t.to_string() + ")");
  }
  v->type = ir::ValueType::tensor(t.elem_type, dims);
}

}  // namespace

std::map<std::string, std::vector<int64_t>> parse_fix_shapes(const std::string& text, const std::string& what) {
  std::map<std::string, std::vector<int64_t>> shapes;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(';', start);
    if (end == std::string::npos) end = text.size();
    std::string item = trim(text.substr(start, end - start));
    start = end + 1;
    if (item.empty()) {
      if (end == text.size()) break;
      continue;
    }
    size_t colon = item.rfind(':');
    std::string name = colon == std::string::npos ? "" : trim(item.substr(0, colon));
    std::string shape = colon == std::string::npos ? "" : trim(item.substr(colon + 1));
    std::string bad = what + ": '" + item + "'" + (name.empty() ? "" : " for '" + name + "'") +
                      " is not NAME:[d1,d2,...] with whole dims of 1 or more";
    if (colon == std::string::npos || name.empty() || shape.size() < 2 || shape.front() != '[' || shape.back() != ']')
      throw Error(bad);
    std::vector<int64_t> dims;
    std::string body = shape.substr(1, shape.size() - 2);
    size_t p = 0;
    while (!trim(body).empty() && p <= body.size()) {
      size_t comma = body.find(',', p);
      if (comma == std::string::npos) comma = body.size();
      std::string d = trim(body.substr(p, comma - p));
      p = comma + 1;
      if (d.empty() || d.size() > 15 || d.find_first_not_of("0123456789") != std::string::npos || std::stoll(d) < 1)
        throw Error(bad);
      dims.push_back(std::stoll(d));
      if (comma == body.size()) break;
    }
    if (!shapes.emplace(name, dims).second) throw Error(what + ": '" + name + "' is given twice");
  }
  if (shapes.empty()) throw Error(what + ": no NAME:[d1,d2,...] given");
  return shapes;
}

void fix_shapes(ir::Model& model, const std::map<std::string, std::vector<int64_t>>& shapes, PassContext& context) {
  ir::Graph& g = *model.graph;
  std::map<std::string, std::vector<int64_t>> outputs_given;
  for (const auto& [name, dims] : shapes) {
    ir::Value* v = g.find_value(name);
    if (v && g.is_input(v) && !v->has_initializer()) {
      fix_interface(v, dims, "input");
    } else if (v && g.is_output(v)) {
      fix_interface(v, dims, "output");
      outputs_given[name] = dims;
    } else {
      throw Error("fix_shapes: '" + name + "' is neither an input nor an output of the model (inputs: " +
                  names_of(g.inputs()) + "; outputs: " + names_of(g.outputs()) + ")");
    }
  }
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::map<std::string, ir::Tensor> feeds;
  for (const ir::Value* v : g.fed_inputs()) {
    std::optional<std::vector<int64_t>> dims = v->type.is_tensor() ? v->type.static_shape() : std::nullopt;
    if (!dims)
      throw Error("fix_shapes: input '" + v->name() + "' is " + v->type.to_string() + ", not fixed: give its shape (" +
                  v->name() + ":[d1,d2,...])");
    ir::Tensor t(v->type.elem_type, *dims);  // zeros: valid indices and sizes for integer inputs
    if (v->type.elem_type == ir::DataType::Float)
      for (float& x : t.mutable_values<float>()) x = uniform(rng);
    feeds[v->name()] = std::move(t);
  }
  std::map<std::string, ir::ValueType> seen;
  auto record = [&](const std::string& name, const ir::Tensor& t) {
    seen[name] = ir::ValueType::tensor(t.dtype(), t.dims());
  };
  engine::SessionOptions options;
  options.optimize = false;  // every node output as ONNX defines it
  options.constant_transform = [&](const std::string& name, ir::Tensor& t) { record(name, t); };
  engine::Session session(model, options);
  engine::TensorObserver observe = [&](const std::string& name, const ir::Tensor& t) { record(name, t); };
  session.run_for_hooks(feeds, {&observe});

  size_t stored = 0;
  for (ir::Node* node : g.topological_order()) {
    if (node->op_type == "NonMaxSuppression" || node->op_type == "NonZero")
      context.log.push_back("warning: fix_shapes: the shapes after " + node->op_type + " '" + node->name +
                            "' depend on the data; those stored are of one random sample");
    for (ir::Value* v : node->outputs()) {
      if (!v || v->name().empty()) continue;
      auto it = seen.find(v->name());
      if (it == seen.end()) continue;
      auto given = outputs_given.find(v->name());
      if (given != outputs_given.end() && *it->second.static_shape() != given->second)
        throw Error("fix_shapes: output '" + v->name() + "' is given " + ir::dims_to_string(given->second) +
                    "; with the inputs fixed the model computes " + ir::dims_to_string(*it->second.static_shape()));
      v->type = it->second;
      if (!g.is_input(v) && !g.is_output(v) && !v->has_initializer()) g.add_value_info(v);
      ++stored;
    }
  }
  context.log.push_back("fix_shapes: " + std::to_string(shapes.size() - outputs_given.size()) + " inputs fixed, " +
                        std::to_string(stored) + " tensor shapes stored");
}

}  // namespace onnxptq::passes
