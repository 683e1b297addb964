// The enable_dpu graph rewrites (vai_q_onnx 1.16's optimize.py) and the SimulateDPU transforms
// (its simulate_dpu.py), one file each, the lists that run them in vai_q_onnx's order, and the
// helpers they share.
//
// Where they run (quant::quantize_static with enable_dpu, as in vai_q_onnx 1.16's quantize_static):
// - Node filter: as vai_q_onnx, the rewrites (but not the two fusions, fuse_instance_norm
//   and fuse_l2_norm, which match any nodes) touch only nodes passing PassContext::should_quantize
//   (op_types_to_quantize, nodes_to_quantize, nodes_to_exclude; ConvertHardSigmoidToDPUVersion uses
//   the name filters only). A default PassContext has empty filters: every node that matches.
// - The pre-calibration rewrites run in the preparation (quant::prepare_float_model), so
//   `onnxptq calibrate` sees the same model.
// - SimulateDPU runs in vai_q_onnx on the quantized QDQ graph. Here the transforms rewrite the
//   float graph (the constants go into float ops) after calibration and after the plan is made,
//   before its parameters: every rewritten node keeps its output name, so the plan's tensors all
//   still exist and the calibrated range of a tensor still applies to it (vai_q_onnx's Q on "<out>"
//   keeps the position calibrated on the unscaled value and quantizes the scaled one). The
//   "<out>_Mul" values that insert_dpu_scale makes between an op and its Mul are not in the plan:
//   they stay float, as in vai_q_onnx. Run before calibration, the ranges would be measured on the
//   DPU versions instead (LeakyRelu slope, HardSigmoid in place of Sigmoid, scaled pools).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "passes/pass.h"

namespace onnxptq::passes {

// optimize.py's rewrites: before calibration; convert_clip_to_relu after it.
bool fuse_instance_norm(ir::Model& model, PassContext& context);
bool convert_reduce_mean_to_global_avg_pool(ir::Model& model, PassContext& context);
bool split_large_kernel_pool(ir::Model& model, PassContext& context);
bool convert_split_to_slice(ir::Model& model, PassContext& context);
bool fuse_l2_norm(ir::Model& model, PassContext& context);
bool convert_clip_to_relu(ir::Model& model, PassContext& context);
// SimulateDPU (simulate_dpu.py).
bool convert_leaky_relu_to_dpu_version(ir::Model& model, PassContext& context);
bool convert_sigmoid_to_hard_sigmoid(ir::Model& model, PassContext& context);
bool convert_hard_sigmoid_to_dpu_version(ir::Model& model, PassContext& context);
bool convert_avg_pool_to_dpu_version(ir::Model& model, PassContext& context);
bool convert_reduce_mean_to_dpu_version(ir::Model& model, PassContext& context);
bool convert_softmax_to_dpu_version(ir::Model& model, PassContext& context);
bool convert_instance_norm_to_dpu_version(ir::Model& model, PassContext& context);
bool convert_clip_to_dpu_version(ir::Model& model, PassContext& context);

// vai_q_onnx's order: fuse_instance_norm, convert_bn_to_conv (optimize.h),
// convert_reduce_mean_to_global_avg_pool, split_large_kernel_pool, convert_split_to_slice,
// fuse_l2_norm. Run each once, if its option is on.
const std::vector<PassInfo>& dpu_pre_calibration_passes();
// convert_clip_to_relu, after calibration and before quantization.
const std::vector<PassInfo>& dpu_post_calibration_passes();
// vai_q_onnx's order: leaky relu, sigmoid, hard sigmoid, avg pool, reduce mean, softmax, then
// Quark's instance norm and clip. Run each
// once: the scaling ones are not idempotent in vai_q_onnx (a second run would scale twice); here a
// node whose output already goes only to a Mul by its factor is left alone.
const std::vector<PassInfo>& dpu_simulation_passes();

// The extra_options key that switches a pass of the lists above, and its default with enable_dpu
// (vai_q_onnx 1.16's); the SimulateDPU ones are also under the master switch SimulateDPU (True).
struct DpuPassOption {
  const char* pass;    // "convert_split_to_slice"
  const char* option;  // "ConvertSplitToSlice"
  bool default_value;
};
const std::vector<DpuPassOption>& dpu_pass_options();

// Runs the passes of `passes` (one of the lists above) in order, each once, whose option is on:
// `switches` maps an option key ("ConvertSplitToSlice") to on/off; a key not in it has its
// default. Returns the names of the passes that changed the model.
std::vector<std::string> run_dpu_passes(const std::vector<PassInfo>& passes, ir::Model& model,
                                        const std::map<std::string, bool>& switches, PassContext& context);

// The DPU versions of the pools and of ReduceMean: the factor by which the DPU's shift-based
// division by `count` differs from a true division: c/2^n * count with
// c = round_half_even(2^n / count) for the first n in [0, 7 + ceil(log2 count)) that minimises
// |c/2^n - 1/count|. In double, as Python computes it.
double dpu_division_factor(int64_t count);
// ConvertAvgPoolToDPUVersion: the factor of an average pool with a kh x kw kernel (the special
// cases, then the rule above).
double dpu_avg_pool_factor(int64_t kh, int64_t kw);

// vai_q_onnx's insert_mul: `node`'s output 0 "<out>" becomes "<out>_Mul", read by a new
// Mul("<out>_Mul", Constant "<out>_Scale" = k) named "<out>_Mul" that writes "<out>" (so every
// reader, and a graph output, sees the scaled value). An unnamed node gets its output's name.
void insert_dpu_scale(ir::Node* node, float k);
// Whether `node`'s output 0 already goes only to a Mul by the scalar constant k (the pass ran).
bool has_dpu_scale(const ir::Node* node, float k);

// Removes a constant that a rewrite stopped reading: an initializer (and its graph input entry) or
// a Constant node's output, when nothing else reads it. An Identity of a constant goes too.
void remove_unused_constant(ir::Graph& graph, ir::Value* value);
// A constant integer tensor's values (int64 or int32), or nullopt.
std::optional<std::vector<int64_t>> constant_ints(const ir::Value* value);

}  // namespace onnxptq::passes
