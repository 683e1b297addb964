// Running a model on the CPU: a schedule built once (topological order, one kernel per node,
// constants prepared once, buffers freed after their last use), then runs that can be watched
// (observers see every tensor once) and altered (fake quantization replaces a tensor right after
// it is produced).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "engine/extrema.h"
#include "engine/value.h"
#include "ir/model.h"

namespace onnxptq::engine {

using ir::Tensor;

// Sees a tensor (graph input or node output) once per run, right after it is produced (and
// after any transform). Must not keep references to the tensor past the call.
using TensorObserver = std::function<void(const std::string& name, const Tensor& value)>;
// May change or replace a tensor right after it is produced, before anything uses it.
using TensorTransform = std::function<void(const std::string& name, Tensor& value)>;
// Sees a visible float tensor (SessionOptions::visible; float32, float16 or bfloat16) with the
// extrema of its finite values, right after it is produced (after `observe`). A kernel that
// writes its output in one sweep takes them as it writes, while each block is in cache; for the
// others the engine reads the tensor once more.
using ExtremaObserver = std::function<void(const std::string& name, const Tensor& value, Extrema extrema)>;
// Told the wall time of each node of the graph the session runs (its own copy: a FusedConv for a
// Conv and its activation, the Transposes of the channels-last pass) right after the node ran.
// The nodes of If, Loop and Scan bodies count in their parent's time and are not told apart.
using NodeTimer = std::function<void(const ir::Node& node, double seconds)>;

struct SessionOptions {
  // Threads a run may use; 0 means every hardware thread.
  int threads = 0;
  // Applied once to every constant (initializer, or a Constant node's value) when the session is
  // built, before kernels prepare them: fake quantization of weights.
  TensorTransform constant_transform;
  // Speed rewrites on the session's own copy of the model (a Conv and the activation after it run
  // as one primitive; convolutions and the ops between them run channels-last). A tensor fused
  // away, or kept only in the engine's own layout, is seen by no observer or transform: name the
  // tensors those need in `visible` (graph inputs and outputs always are), or turn `optimize` off.
  // Tensors the engine makes for itself (NHWC copies) are never shown to hooks.
  bool optimize = true;
  std::unordered_set<std::string> visible;
  // For hooks that treat every element alike whatever its position (per-tensor statistics,
  // per-tensor fake quantization): a visible tensor may then be shown in the engine's own order
  // (channels-last: the same elements, dims permuted) instead of being kept in ONNX order just
  // for them, so the channels-last pass runs as if the tensor were not visible.
  bool hooks_ignore_layout = false;
};

struct RunHooks {
  const TensorObserver* observe = nullptr;
  const TensorTransform* transform = nullptr;
  const ExtremaObserver* observe_extrema = nullptr;
  const NodeTimer* time_node = nullptr;
};

// Ops whose output differs from run to run: a session never computes them ahead of time, even
// from constant inputs.
bool is_nondeterministic(const ir::Node& node);

class GraphExecutor;

class Session {
 public:
  // Error naming the node, op type and opset when a node has no kernel or bad attributes. The
  // session runs its own copy of the model (sharing tensor storage), so the model may change or
  // go away afterwards.
  explicit Session(const ir::Model& model, SessionOptions options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Graph inputs that must be fed (initializers listed as inputs are optional overrides).
  const std::vector<const ir::Value*>& inputs() const { return inputs_; }
  const std::vector<const ir::Value*>& outputs() const { return outputs_; }
  // The threads a run uses (SessionOptions::threads, the hardware threads for 0).
  int threads() const { return options_.threads; }

  // Runs once; returns the graph outputs in order. Thread-safe: several runs may go at once.
  // Error for a missing or unknown input, or one whose type or shape contradicts the model.
  // Error for an output that is not a tensor (a sequence or an optional).
  std::vector<Tensor> run(const std::map<std::string, Tensor>& feeds, const RunHooks& hooks = {}) const;
  // For the hooks alone (calibration, shapes): the outputs, of any kind, are not returned.
  void run_for_hooks(const std::map<std::string, Tensor>& feeds, const RunHooks& hooks) const;
  // The same for models whose inputs or outputs may be sequences or optionals (engine/value.h).
  std::vector<Value> run_values(const std::map<std::string, Value>& feeds, const RunHooks& hooks = {}) const;

 private:
  ir::Model model_;
  SessionOptions options_;
  std::vector<const ir::Value*> inputs_;
  std::vector<const ir::Value*> outputs_;
  std::unique_ptr<GraphExecutor> main_;
};

}  // namespace onnxptq::engine
