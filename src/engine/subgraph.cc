#include "engine/subgraph.h"

#include <unordered_map>
#include <unordered_set>

#include "onnxptq/error.h"

namespace onnxptq::engine {

ir::Model extract_model(const ir::Model& model, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs) {
  const ir::Graph& g = *model.graph;
  auto value_of = [&](const std::string& name, const char* what) {
    const ir::Value* v = g.find_value(name);
    if (!v) throw Error(std::string("extract: the ") + what + " '" + name + "' is not a value of the model");
    return v;
  };
  std::unordered_set<std::string> given;
  for (const std::string& name : inputs) given.insert(value_of(name, "input")->name());

  // Walk back from the outputs to the given values and the constants.
  std::unordered_set<const ir::Node*> kept;
  std::unordered_set<const ir::Value*> seen;
  std::vector<const ir::Value*> stack;
  for (const std::string& name : outputs) stack.push_back(value_of(name, "output"));
  while (!stack.empty()) {
    const ir::Value* v = stack.back();
    stack.pop_back();
    if (!seen.insert(v).second || given.count(v->name())) continue;
    const ir::Node* producer = v->producer();
    if (!producer) {
      if (v->has_initializer()) continue;
      throw Error("extract: the value '" + v->name() + "' is needed and is a graph input, not one of the inputs given");
    }
    if (!kept.insert(producer).second) continue;
    for (const ir::Value* in : producer->inputs())
      if (in) stack.push_back(in);
    for (const ir::Value* in : g.implicit_inputs(producer)) stack.push_back(in);
  }
  for (const ir::Node* n : kept)
    for (const ir::Value* out : n->outputs())
      if (out && given.count(out->name()))
        throw Error("extract: the input '" + out->name() + "' is also computed by " + n->describe() +
                    ", which the outputs need");

  ir::Model part;
  part.ir_version = model.ir_version;
  part.opset_import = model.opset_import;
  part.producer_name = model.producer_name;
  part.producer_version = model.producer_version;
  part.domain = model.domain;
  part.model_version = model.model_version;
  part.functions = model.functions;  // nodes may call them
  part.path = model.path;
  part.uses_external_data = model.uses_external_data;
  ir::Graph& to = *part.graph;
  to.name = g.name;
  auto copy_of = [&](const ir::Value* v) -> ir::Value* {
    if (!v) return nullptr;
    if (ir::Value* c = to.find_value(v->name())) return c;
    ir::Value* c = to.add_value(v->name());
    c->type = v->type;
    c->doc_string = v->doc_string;
    if (v->has_initializer() && !given.count(v->name())) to.set_initializer(c, v->initializer());
    return c;
  };
  for (const std::string& name : inputs)
    if (!to.find_value(name)) to.add_input(copy_of(g.find_value(name)));
  for (const ir::Node* n : g.topological_order()) {
    if (!kept.count(n)) continue;
    std::vector<ir::Value*> ins, outs;
    for (const ir::Value* v : n->inputs()) ins.push_back(copy_of(v));
    for (const ir::Value* v : g.implicit_inputs(n)) copy_of(v);  // before the subgraphs that read them
    for (const ir::Value* v : n->outputs()) outs.push_back(copy_of(v));
    ir::Node* c = to.add_node(n->op_type, std::move(ins), std::move(outs), n->name, n->domain);
    c->doc_string = n->doc_string;
    for (const ir::Attribute& a : n->attributes) c->attributes.push_back(ir::clone_attribute(a, to));
  }
  for (const std::string& name : outputs) to.add_output(copy_of(g.find_value(name)));
  for (const ir::Value* v : g.value_info())
    if (ir::Value* c = to.find_value(v->name())) to.add_value_info(c);
  return part;
}

}  // namespace onnxptq::engine
