#include "ir/model.h"

namespace onnxptq::ir {
namespace {

bool same_domain(std::string_view a, std::string_view b) {
  auto canonical = [](std::string_view d) { return d == "ai.onnx" ? std::string_view() : d; };
  return canonical(a) == canonical(b);
}

void clone_graph(const Graph& from, Graph& to);

}  // namespace

Attribute clone_attribute(const Attribute& a, Graph& owner) {
  Attribute c;
  c.name = a.name;
  c.type = a.type;
  c.ref_attr_name = a.ref_attr_name;
  c.doc_string = a.doc_string;
  c.f = a.f;
  c.i = a.i;
  c.s = a.s;
  c.t = a.t;
  c.floats = a.floats;
  c.ints = a.ints;
  c.strings = a.strings;
  c.tensors = a.tensors;
  c.serialized = a.serialized;
  if (a.g) {
    c.g = std::make_unique<Graph>(&owner);
    clone_graph(*a.g, *c.g);
  }
  for (const auto& g : a.graphs) {
    c.graphs.push_back(std::make_unique<Graph>(&owner));
    clone_graph(*g, *c.graphs.back());
  }
  return c;
}

namespace {

// Values are created in the order the file would list them, so the copy saves identically.
void clone_graph(const Graph& from, Graph& to) {
  to.name = from.name;
  to.doc_string = from.doc_string;
  to.sparse_initializers = from.sparse_initializers;
  to.quantization_annotation = from.quantization_annotation;
  auto copy_of = [&](const Value* v) -> Value* {
    if (!v) return nullptr;
    if (v->graph() != &from) return to.lookup(v->name());  // from an enclosing graph
    Value* c = to.find_value(v->name());
    if (!c) {
      c = to.add_value(v->name());
      c->type = v->type;
      c->doc_string = v->doc_string;
    }
    return c;
  };
  for (const Value* v : from.inputs()) to.add_input(copy_of(v));
  for (const Value* v : from.initializers()) to.set_initializer(copy_of(v), v->initializer());
  // Outputs of nodes first (subgraphs may use them), then the nodes themselves.
  for (const auto& n : from.nodes())
    for (const Value* v : n->outputs()) copy_of(v);
  for (const auto& n : from.nodes()) {
    std::vector<Value*> inputs, outputs;
    for (const Value* v : n->inputs()) inputs.push_back(v ? (v->graph() == &from ? copy_of(v) : to.lookup(v->name())) : nullptr);
    for (const Value* v : n->outputs()) outputs.push_back(copy_of(v));
    Node* c = to.add_node(n->op_type, std::move(inputs), std::move(outputs), n->name, n->domain);
    c->doc_string = n->doc_string;
    for (const Attribute& a : n->attributes) c->attributes.push_back(clone_attribute(a, to));
  }
  for (const Value* v : from.outputs()) to.add_output(v->graph() == &from ? copy_of(v) : to.lookup(v->name()));
  for (const Value* v : from.value_info()) to.add_value_info(copy_of(v));
}

}  // namespace

Model clone_model(const Model& model) {
  Model c;
  c.ir_version = model.ir_version;
  c.opset_import = model.opset_import;
  c.producer_name = model.producer_name;
  c.producer_version = model.producer_version;
  c.domain = model.domain;
  c.model_version = model.model_version;
  c.doc_string = model.doc_string;
  c.metadata_props = model.metadata_props;
  c.functions = model.functions;
  c.training_info = model.training_info;
  c.path = model.path;
  c.uses_external_data = model.uses_external_data;
  clone_graph(*model.graph, *c.graph);
  return c;
}

int64_t Model::opset(std::string_view domain_name) const {
  for (const OpsetId& id : opset_import)
    if (same_domain(id.domain, domain_name)) return id.version;
  return 0;
}

void Model::set_opset(std::string_view domain_name, int64_t version) {
  for (OpsetId& id : opset_import)
    if (same_domain(id.domain, domain_name)) {
      id.version = version;
      return;
    }
  opset_import.push_back({std::string(domain_name), version});
}

}  // namespace onnxptq::ir
