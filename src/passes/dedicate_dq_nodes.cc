// Quark's DedicateDQNode post-process (its Optimize.dedicate_dq_node): one DequantizeLinear per reader.
#include <algorithm>
#include <map>

#include "passes/dedicate.h"

namespace onnxptq::passes {
namespace {

// Quark's QUANT_OP_TYPES / DEQUANT_OP_TYPES, with the custom ops of its earlier releases.
bool is_dequantize(const ir::Node& n) {
  return n.op_type == "DequantizeLinear" || n.op_type == "ExtendedDequantizeLinear" ||
         n.op_type == "VitisDequantizeLinear";
}
bool is_quantize(const ir::Node& n) {
  return n.op_type == "QuantizeLinear" || n.op_type == "ExtendedQuantizeLinear" || n.op_type == "VitisQuantizeLinear";
}

// A copy of `node` reading `inputs`, writing a new value named after its output with `postfix`.
ir::Node* copy_node(ir::Graph& graph, const ir::Node& node, std::vector<ir::Value*> inputs,
                    const std::string& postfix) {
  ir::Value* out = graph.add_unique_value(node.output(0)->name() + postfix);
  out->type = node.output(0)->type;
  ir::Node* copy =
      graph.add_node(node.op_type, std::move(inputs), {out}, graph.fresh_name(node.name + postfix), node.domain);
  for (const ir::Attribute& a : node.attributes) copy->attributes.push_back(ir::clone_attribute(a, graph));
  return copy;
}

}  // namespace

bool dedicate_dq_nodes(ir::Model& model, PassContext& context) {
  ir::Graph& graph = *model.graph;
  std::vector<ir::Node*> nodes;
  std::map<const ir::Node*, size_t> position;  // readers in file order, as Quark lists them
  for (const auto& n : graph.nodes()) {
    position[n.get()] = nodes.size();
    nodes.push_back(n.get());
  }
  size_t copies = 0;
  for (ir::Node* dq : nodes) {
    if (!is_dequantize(*dq) || !dq->output(0) || !dq->input(0)) continue;
    ir::Value* out = dq->output(0);
    std::vector<ir::Node*> readers;
    for (const ir::Use& u : out->uses())
      if (u.node->graph() == &graph && std::find(readers.begin(), readers.end(), u.node) == readers.end())
        readers.push_back(u.node);
    std::sort(readers.begin(), readers.end(),
              [&](const ir::Node* a, const ir::Node* b) { return position[a] < position[b]; });
    // A graph output counts as the first reader: it keeps the original.
    if (graph.is_output(out)) readers.insert(readers.begin(), nullptr);
    ir::Node* q = dq->input(0)->producer();
    if (readers.size() < 2 || !q || !is_quantize(*q)) continue;
    bool copy_q = q->input(0) && q->input(0)->has_initializer();  // a weight's pair: its quantize too
    for (size_t k = 1; k < readers.size(); ++k) {
      std::string postfix = "_" + std::to_string(k);
      std::vector<ir::Value*> dq_inputs = dq->inputs();
      if (copy_q) dq_inputs[0] = copy_node(graph, *q, q->inputs(), postfix)->output(0);
      ir::Value* own = copy_node(graph, *dq, dq_inputs, postfix)->output(0);
      ir::Node* reader = readers[k];
      for (size_t i = 0; i < reader->inputs().size(); ++i)
        if (reader->input(i) == out) graph.set_node_input(reader, i, own);
      copies += copy_q ? 2 : 1;
    }
  }
  if (copies == 0) return false;
  graph.sort_nodes();
  context.log.push_back("DedicateDQNode: " + std::to_string(copies) + " quantize/dequantize copies, one per reader");
  return true;
}

}  // namespace onnxptq::passes
