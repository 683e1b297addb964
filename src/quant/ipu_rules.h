// The NPU's shift constraints of vai_q_onnx's IPULimitationCheck (refine.py) on one node, over any graph that can
// say where power-of-two positions are: the plan (ipu_limitation.cc) or an exported model (tools/check_npu.cc).
#pragma once

#include <climits>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace onnxptq::quant {

// Where positions live. A slot is one position that several tensors may share (a parameter
// provider of the plan; a scale initializer of an exported model): changing it changes them all.
class PositionView {
 public:
  virtual ~PositionView() = default;
  // The slot of the position `value` is read with (vai: the Q/DQ/FixNeuron writing it), "" if none.
  virtual std::string read_slot(const ir::Value* value) const = 0;
  // The slot of the position `value` is written with (vai: the Q/DQ/FixNeuron reading it), "" if none.
  virtual std::string write_slot(const ir::Value* value) const = 0;
  // The position of a slot, if it has one (per-channel or float parameters have none).
  virtual std::optional<int> pos(const std::string& slot) const = 0;
  // Whether `consumer` is an activation fused into its producer beyond vai_q_onnx's annotation rule
  // (the plan: a Relu/Clip it removed).
  virtual bool fused_activation(const ir::Node& consumer) const { return false; }
};

// The order of vai_q_onnx's adjust_quantize_info (refine.py).
enum class IpuRule {
  AdjustShiftRead,
  AdjustShiftWrite,
  AdjustShiftCut,
  AdjustShiftBias,
  AdjustHardSigmoid,
  AdjustShiftSwish,
  AlignConcat,
  AlignPool,
  AlignPad,    // Quark's power-of-two refinement only (its adjust_quantize_info): Pad like the pools
  AlignSlice,  // likewise Slice
};
inline constexpr IpuRule kIpuRules[] = {IpuRule::AdjustShiftRead, IpuRule::AdjustShiftWrite,  IpuRule::AdjustShiftCut,
                                        IpuRule::AdjustShiftBias, IpuRule::AdjustHardSigmoid, IpuRule::AdjustShiftSwish,
                                        IpuRule::AlignConcat,     IpuRule::AlignPool};
// Quark's alignments that vai_q_onnx's IPULimitationCheck does not have, after its rules; no NPU constraint, so the
// checker (tools/check_npu.cc) does not look for them.
inline constexpr IpuRule kQuarkAlignRules[] = {IpuRule::AlignPad, IpuRule::AlignSlice};
const char* ipu_rule_name(IpuRule rule);

inline constexpr int kNoBound = INT_MAX;

// One quantity a rule bounds, e.g. shift_cut = wpos + ipos - opos in [0, 16].
struct IpuConstraint {
  std::string quantity;  // "shift_cut = wpos + ipos - opos"
  std::string terms;     // the positions it was computed from: "wpos 9, ipos 7, opos -1"
  int value = 0;
  int lo = 0, hi = 0;  // allowed interval, kNoBound / -kNoBound for none
  bool holds() const { return value >= lo && value <= hi; }
};

struct IpuPositionChange {
  std::string slot;
  int from = 0, to = 0;
};

// A rule evaluated on a node: its constraints, and the changes vai_q_onnx's correction makes (in order;
// none when every constraint holds).
struct IpuRuleCheck {
  std::vector<IpuConstraint> constraints;
  std::vector<IpuPositionChange> changes;
};

// Which activations count as fused into a Conv/Add/... that writes them (vai_q_onnx's "needs annotation":
// Relu and Clip(0, 6) always, LeakyRelu and PRelu with RemoveQDQConvLeakyRelu / RemoveQDQConvPRelu).
struct IpuAnnotation {
  bool relu = true;
  bool clip = true;
  bool leaky_relu = false;
  bool prelu = false;
  bool gelu = false;           // RemoveQDQConvGelu (Quark)
  bool instance_norm = false;  // RemoveQDQInstanceNorm (Quark): InstanceNormalization an annotated producer
};

// `rule` on `node` with the positions of `view`; nothing when the rule does not apply to the node
// or a position it needs is missing (vai_q_onnx skips the node then).
std::optional<IpuRuleCheck> ipu_check_node(IpuRule rule, const ir::Node& node, const PositionView& view,
                                           const IpuAnnotation& annotation);

// HardSigmoid(alpha = 1/6, beta = 0.5), the DPU's hard sigmoid (vai_q_onnx's ConvertHardSigmoidToDPUVersion:
// |delta| < 1e-6, beta may be absent); any op type (AdjustShiftSwish's test looks only at the attributes).
bool is_dpu_hard_sigmoid(const ir::Node& node);

}  // namespace onnxptq::quant
