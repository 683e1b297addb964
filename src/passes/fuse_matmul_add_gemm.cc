// Turns MatMul(A, B) + C into Gemm(A, B, C) where A is 2-D, B a 2-D constant and C a constant row.
#include <unordered_set>

#include "passes/optimize.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {

// Gemm only multiplies 2-D matrices, so A's rank must be known to be 2 (shape inference runs
// first); C must broadcast along rows only ([N], [1, N] or a single value) so that the Add's
// output shape is the MatMul's.
bool fuse_matmul_add_gemm(ir::Model& model, PassContext& context) {
  ir::Graph& graph = *model.graph;
  if (model.opset("") < 7) return false;  // Gemm broadcasts C without an attribute from opset 7
  size_t fused = 0;
  std::unordered_set<const ir::Node*> removed;  // later entries of the snapshot that are gone
  for (ir::Node* matmul : nodes_in_order(graph)) {
    if (removed.count(matmul)) continue;
    if (!is_op(matmul, "MatMul") || !matmul->output(0) || !matmul->input(0)) continue;
    const ir::ValueType& a = matmul->input(0)->type;
    if (!a.is_tensor() || !a.has_shape || a.shape.size() != 2 || a.elem_type != ir::DataType::Float) continue;
    const ir::Tensor* b = float_constant_of(matmul->input(1));
    if (!b || b->rank() != 2) continue;
    ir::Node* add = single_user(matmul->output(0), "Add");
    if (!add || !add->output(0) || add->input(0) == add->input(1)) continue;
    ir::Value* c = add->input(add->input(0) == matmul->output(0) ? 1 : 0);
    const ir::Tensor* c_value = float_constant_of(c);
    int64_t n = b->dims()[1];
    if (!c_value || c_value->rank() > 2 ||
        !(c_value->size() == 1 || (c_value->size() == n && c_value->dims().back() == n)))
      continue;
    // Before the Add: every input of the pair is produced by then.
    ir::Node* gemm = graph.insert_node_before(add, "Gemm", {matmul->input(0), matmul->input(1), c}, {}, matmul->name);
    ir::Value* inner = matmul->output(0);
    ir::Value* out = add->output(0);
    removed.insert(add);
    graph.remove_node(add);
    graph.remove_node(matmul);
    graph.remove_value(inner);
    graph.set_node_output(gemm, 0, out);
    ++fused;
  }
  if (fused) context.log.push_back("fuse_matmul_add_gemm: " + std::to_string(fused) + " MatMul + Add to Gemm");
  return fused > 0;
}

}  // namespace onnxptq::passes
