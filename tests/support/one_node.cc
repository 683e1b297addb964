#include "support/one_node.h"

#include <map>

#include "engine/session.h"
#include "onnxptq/error.h"

namespace onnxptq::testing {

std::vector<ir::Tensor> run_node(const std::string& op, const std::string& domain, int64_t opset,
                                 const std::vector<NodeInput>& inputs, std::vector<ir::Attribute> attrs, size_t outputs,
                                 int threads) {
  ir::Model m;
  m.set_opset("", opset);
  if (!domain.empty()) m.set_opset(domain, 1);
  ir::Graph& g = *m.graph;
  std::vector<ir::Value*> ins;
  std::map<std::string, ir::Tensor> feeds;
  for (const NodeInput& in : inputs) {
    if (in.name.empty()) {
      ins.push_back(nullptr);
      continue;
    }
    ir::Value* v = g.add_value(in.name);
    if (in.constant) {
      g.set_initializer(v, in.value);
    } else {
      v->type = ir::ValueType::tensor(in.value.dtype(), in.value.dims());
      g.add_input(v);
      feeds[in.name] = in.value;
    }
    ins.push_back(v);
  }
  std::vector<ir::Value*> outs;
  for (size_t i = 0; i < outputs; ++i) outs.push_back(g.add_value(i == 0 ? "y" : "y" + std::to_string(i)));
  ir::Node* n = g.add_node(op, ins, outs, "n0", domain);
  for (ir::Attribute& a : attrs) n->set_attribute(std::move(a));
  for (ir::Value* y : outs) g.add_output(y);
  engine::SessionOptions options;
  options.threads = threads;
  engine::Session session(m, options);
  return session.run(feeds);
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace onnxptq::testing
