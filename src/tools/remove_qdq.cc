// remove_qdq (vai_q_onnx's tool): every DequantizeLinear(QuantizeLinear(x)) whose quantized value
// only that DequantizeLinear reads becomes x, and a FixNeuron(x) becomes x; dequantized weights
// without a QuantizeLinear (stored integers) stay, as in vai_q_onnx.
#include <set>

#include "onnxptq/error.h"
#include "passes/rewrite.h"
#include "quant/qdq_nodes.h"
#include "tools/convert.h"

namespace onnxptq::tools {

namespace {

// Makes the readers of `out` (written by `node`) read `x` instead and removes `node`; a graph
// output keeps its name through its producer or, failing that, an Identity.
void bypass(ir::Graph& g, ir::Node* node, ir::Value* x) {
  if (passes::bypass_node(g, node, x)) return;
  ir::Value* out = node->output(0);
  std::string name = node->name;
  g.remove_node(node);
  g.add_node("Identity", {x}, {out}, name.empty() ? "" : g.fresh_name(name + "_Identity"));
}

}  // namespace

ir::Model remove_qdq(const ir::Model& model, ConvertResult& result) {
  ir::Model m = ir::clone_model(model);
  ir::Graph& g = *m.graph;
  size_t quantize_nodes = 0, removed = 0;
  std::set<const ir::Node*> gone;  // dequantize nodes removed ahead of the loop, still in its list
  for (ir::Node* n : passes::nodes_in_order(g)) {
    if (gone.count(n)) continue;
    if (n->op_type == "FixNeuron") {
      ++quantize_nodes;
      bypass(g, n, n->input(0));
      ++removed;
      continue;
    }
    if (!is_quantize_node(*n)) continue;
    ++quantize_nodes;
    ir::Node* dq = single_dequantize_reader(n->output(0));
    if (!dq) continue;
    ir::Value* q = n->output(0);
    gone.insert(dq);
    bypass(g, dq, n->input(0));  // the readers of the dequantized value read x (or its new name)
    g.remove_node(n);
    g.remove_value(q);
    ++removed;
  }
  if (quantize_nodes == 0)
    throw Error("the model has no QuantizeLinear or FixNeuron node: there is no quantize/dequantize pair to remove");
  remove_unused_initializers(g);
  g.sort_nodes();
  result.changed = removed;
  result.log.push_back("removed " + std::to_string(removed) + " quantize/dequantize pairs; " +
                       std::to_string(quantize_nodes - removed) +
                       " quantize nodes kept (their value has other readers than one dequantize node)");
  return m;
}

}  // namespace onnxptq::tools
