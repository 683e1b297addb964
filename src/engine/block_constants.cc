#include "engine/block_quantizer.h"
#include "engine/fusion.h"

namespace onnxptq::engine {

int fold_block_quantized_constants(ir::Graph& graph, const std::function<bool(const ir::Value*)>& visible) {
  std::vector<ir::Node*> foldable;
  for (const auto& n : graph.nodes()) {
    const bool block = is_block_quantize_node(*n);
    const ir::Value* x = n->input(0);
    const ir::Value* y = n->output(0);
    if (block && n->inputs().size() == 1 && x && x->has_initializer() && !graph.is_input(x) && y &&
        n->outputs().size() == 1 && !visible(y) && !graph.is_output(y))
      foldable.push_back(n.get());
  }
  for (ir::Node* n : foldable) {
    ir::Tensor folded = BlockQuantizer(*n)(n->input(0)->initializer(), 1);
    ir::Value* y = n->output(0);
    graph.remove_node(n);
    y->type = ir::ValueType::tensor(folded.dtype(), folded.dims());
    graph.set_initializer(y, std::move(folded));
  }
  return static_cast<int>(foldable.size());
}

}  // namespace onnxptq::engine
