// The enable_dpu pass lists in vai_q_onnx's order, their option keys, and the helpers the SimulateDPU passes share.
#include "passes/dpu.h"

#include <cmath>

#include "passes/optimize.h"
#include "passes/rewrite.h"

namespace onnxptq::passes {

const std::vector<PassInfo>& dpu_pre_calibration_passes() {
  static const std::vector<PassInfo> passes = {
      {"fuse_instance_norm", "the decomposed instance norm into InstanceNormalization (vai_q_onnx's FuseInstanceNorm)",
       fuse_instance_norm},
      {"convert_bn_to_conv", "BatchNormalization on a 4-D input into a 1x1 depthwise Conv", convert_bn_to_conv},
      {"convert_reduce_mean_to_global_avg_pool", "ReduceMean over axes [2,3] into GlobalAveragePool",
       convert_reduce_mean_to_global_avg_pool},
      {"split_large_kernel_pool", "a GlobalAveragePool over more than 512 elements into AveragePool then GAP",
       split_large_kernel_pool},
      {"convert_split_to_slice", "Split with explicit sizes into one Slice per output", convert_split_to_slice},
      {"fuse_l2_norm", "x * 1/sqrt(max(sum(x*x), eps)) into LpNormalization(p=2)", fuse_l2_norm},
  };
  return passes;
}

const std::vector<PassInfo>& dpu_post_calibration_passes() {
  static const std::vector<PassInfo> passes = {
      {"convert_clip_to_relu", "Clip with min 0 into Relu (the calibrated range bounds it)", convert_clip_to_relu},
  };
  return passes;
}

const std::vector<PassInfo>& dpu_simulation_passes() {
  static const std::vector<PassInfo> passes = {
      {"convert_leaky_relu_to_dpu_version", "LeakyRelu alpha rounded to a multiple of 1/256",
       convert_leaky_relu_to_dpu_version},
      {"convert_sigmoid_to_hard_sigmoid", "Sigmoid into HardSigmoid(alpha=1/6)", convert_sigmoid_to_hard_sigmoid},
      {"convert_hard_sigmoid_to_dpu_version", "HardSigmoid(1/6, 0.5) times (2731/16384)/(1/6)",
       convert_hard_sigmoid_to_dpu_version},
      {"convert_avg_pool_to_dpu_version", "square average pools times the DPU's divisor factor",
       convert_avg_pool_to_dpu_version},
      {"convert_reduce_mean_to_dpu_version", "ReduceMean times the DPU's divisor factor",
       convert_reduce_mean_to_dpu_version},
      {"convert_softmax_to_dpu_version", "Softmax into the DPU's bfloat16 exp-polynomial subgraph",
       convert_softmax_to_dpu_version},
      {"convert_instance_norm_to_dpu_version", "InstanceNormalization into com.amd.quark ExtendedInstanceNormalization",
       convert_instance_norm_to_dpu_version},
      {"convert_clip_to_dpu_version", "Clip bounds rounded to integers in [-128, 127]", convert_clip_to_dpu_version},
  };
  return passes;
}

const std::vector<DpuPassOption>& dpu_pass_options() {
  static const std::vector<DpuPassOption> options = {
      {"fuse_instance_norm", "FuseInstanceNorm", false},
      {"convert_bn_to_conv", "ConvertBNToConv", true},
      {"convert_reduce_mean_to_global_avg_pool", "ConvertReduceMeanToGlobalAvgPool", true},
      {"split_large_kernel_pool", "SplitLargeKernelPool", true},
      {"convert_split_to_slice", "ConvertSplitToSlice", true},
      {"fuse_l2_norm", "FuseL2Norm", false},
      {"convert_clip_to_relu", "ConvertClipToRelu", false},
      {"convert_leaky_relu_to_dpu_version", "ConvertLeakyReluToDPUVersion", true},
      {"convert_sigmoid_to_hard_sigmoid", "ConvertSigmoidToHardSigmoid", true},
      {"convert_hard_sigmoid_to_dpu_version", "ConvertHardSigmoidToDPUVersion", true},
      {"convert_avg_pool_to_dpu_version", "ConvertAvgPoolToDPUVersion", true},
      {"convert_reduce_mean_to_dpu_version", "ConvertReduceMeanToDPUVersion", true},
      {"convert_softmax_to_dpu_version", "ConvertSoftmaxToDPUVersion", false},
      {"convert_instance_norm_to_dpu_version", "ConvertInstanceNormToDPUVersion", false},
      {"convert_clip_to_dpu_version", "ConvertClipToDPUVersion", false},
  };
  return options;
}

std::vector<std::string> run_dpu_passes(const std::vector<PassInfo>& passes, ir::Model& model,
                                        const std::map<std::string, bool>& switches, PassContext& context) {
  std::vector<std::string> changed;
  for (const PassInfo& pass : passes) {
    bool on = false;
    for (const DpuPassOption& o : dpu_pass_options())
      if (std::string(o.pass) == pass.name) {
        auto it = switches.find(o.option);
        on = it != switches.end() ? it->second : o.default_value;
      }
    if (on && pass.run(model, context)) changed.push_back(pass.name);
  }
  return changed;
}

double dpu_division_factor(int64_t count) {
  double rec = static_cast<double>(count);
  int64_t n_max = 7 + static_cast<int64_t>(std::ceil(std::log2(rec)));
  double best_diff = 0, best_c = 0, best_power = 1;
  for (int64_t n = 0; n < n_max; ++n) {
    double power = std::ldexp(1.0, static_cast<int>(n));
    double c = std::nearbyint(power / rec);  // Python's round: half to even
    double diff = std::fabs(c / power - 1.0 / rec);
    if (n == 0 || diff < best_diff) best_diff = diff, best_c = c, best_power = power;  // the first minimum
  }
  return best_c / best_power * rec;
}

double dpu_avg_pool_factor(int64_t kh, int64_t kw) {
  if (kh > 255 || kw > 255) return 1.0;
  if (kh == 3 && kw == 3) return 9.0 * 7.0 / 64.0;
  if (kh == 5 && kw == 5) return 25.0 * 10.0 / 256.0;
  if (kh == 6 && kw == 6) return 36.0 * 7.0 / 256.0;
  if (kh == 7 && kw == 7) return 49.0 * 21.0 / 1024.0;
  if (kh == 14 && kw == 14) return 196.0 * 21.0 / 4096.0;
  return dpu_division_factor(kh * kw);
}

void insert_dpu_scale(ir::Node* node, float k) {
  ir::Graph& graph = *node->graph();
  ir::Value* out = node->output(0);
  if (node->name.empty()) node->name = out->name();
  ir::Value* unscaled = graph.add_unique_value(out->name() + "_Mul");
  unscaled->type = out->type;
  graph.set_node_output(node, 0, unscaled);
  ir::Value* scale = graph.add_unique_value(out->name() + "_Scale");
  scale->type = ir::ValueType::tensor(ir::DataType::Float, {});
  ir::Node* constant = graph.add_node("Constant", {}, {scale}, graph.fresh_name(out->name() + "_Scale"));
  constant->set_attribute(ir::Attribute::of_tensor("value", ir::Tensor::from_values<float>({}, std::vector<float>{k})));
  graph.add_node("Mul", {unscaled, scale}, {out}, graph.fresh_name(out->name() + "_Mul"));
}

bool has_dpu_scale(const ir::Node* node, float k) {
  const ir::Value* out = node->output(0);
  if (!out || out->uses().size() != 1 || out->graph()->is_output(out)) return false;
  const ir::Node* mul = out->uses()[0].node;
  if (!is_op(mul, "Mul") || mul->inputs().size() != 2) return false;
  const ir::Tensor* c = float_constant_of(mul->input(1 - out->uses()[0].input));
  return c && c->size() == 1 && c->values<float>()[0] == k;
}

void remove_unused_constant(ir::Graph& graph, ir::Value* value) {
  if (!value || value->graph() != &graph || !value->uses().empty() || graph.is_output(value)) return;
  if (value->has_initializer()) {
    graph.remove_input(value);
    graph.remove_value(value);
    return;
  }
  ir::Node* producer = value->producer();
  if (!is_op(producer, "Constant") && !is_op(producer, "Identity")) return;
  if (producer->outputs().size() != 1 || (is_op(producer, "Identity") && !constant_of(producer->input(0)))) return;
  ir::Value* source = producer->input(0);
  graph.remove_node(producer);
  graph.remove_value(value);
  remove_unused_constant(graph, source);
}

std::optional<std::vector<int64_t>> constant_ints(const ir::Value* value) {
  const ir::Tensor* t = constant_of(value);
  if (!t) return std::nullopt;
  if (t->dtype() == ir::DataType::Int64)
    return std::vector<int64_t>(t->values<int64_t>().begin(), t->values<int64_t>().end());
  if (t->dtype() == ir::DataType::Int32)
    return std::vector<int64_t>(t->values<int32_t>().begin(), t->values<int32_t>().end());
  return std::nullopt;
}

}  // namespace onnxptq::passes
