// The kernel interface of the engine, and the registry keyed by (domain, op type, opset range).
//
// A kernel's life has three steps: it is built once per node (read and check attributes, prepare
// constant inputs such as reordered weights), then `run` is called once per inference as a const
// call, from possibly several threads at once. Errors are thrown as onnxptq::Error with a message
// about the data ("inputs [2,3] and [4] cannot be broadcast"); the engine adds the node, op type
// and opset in front.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "engine/parallel.h"
#include "engine/value.h"
#include "ir/graph.h"
#include "ir/tensor.h"
#include "onnxptq/error.h"

namespace onnxptq::engine {

using ir::DataType;
using ir::Tensor;

class Kernel;
class GraphRunner;
class ExtremaSink;
struct RunHooks;

// What a kernel learns when it is built.
struct KernelInfo {
  const ir::Node& node;
  int64_t opset;  // version of the node's domain imported by the model
  // One entry per input of the node: the value when it is a constant tensor (an initializer, or a
  // Constant folded by the engine), else nullptr. Omitted optional inputs are nullptr too.
  std::vector<const Tensor*> constant_inputs;
  // Element types and shapes as known before running (may be unknown: Kind::None).
  std::vector<ir::ValueType> input_types;
  // Names of the values from enclosing graphs used by this node's subgraphs (If/Loop/Scan): at run
  // time they follow the node's own inputs, in this order.
  std::vector<std::string> implicit_inputs;
  // Compiles a subgraph of this node; `outer_names` are the enclosing values it may read, which
  // are passed to GraphRunner::run in the same order.
  std::function<std::unique_ptr<GraphRunner>(const ir::Graph&, const std::vector<std::string>& outer_names)>
      compile_subgraph;
  // The threads the session runs with (RunContext::threads), for what a kernel prepares when it
  // is built (a oneDNN primitive splits its work for one thread count); 0: not known.
  int threads = 0;

  size_t input_count() const { return node.inputs().size(); }
  bool has_input(size_t i) const { return node.input(i) != nullptr; }
  const Tensor* constant(size_t i) const { return i < constant_inputs.size() ? constant_inputs[i] : nullptr; }
  int prepared_threads() const { return threads > 0 ? threads : hardware_threads(); }
};

// Passed to every run: nothing per-run lives in the kernel itself.
struct RunContext {
  int threads = 1;  // threads the kernel may use (parallel_for in engine/parallel.h)
  // Set when the run wants the finite extrema of output 0: a kernel that writes that output as
  // float32 in one sweep of its final values may take them as it writes (parallel_write in
  // engine/extrema.h); the engine reads the output again when the sink is left empty.
  ExtremaSink* output_extrema = nullptr;
  // The run's hooks (engine/session.h), which a subgraph's runner passes on to the values of its
  // body: observers and transforms see If branches and Loop/Scan bodies too, a body value once per
  // iteration under its own name.
  const RunHooks* hooks = nullptr;
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  // inputs[i] is nullptr for an omitted optional input; inputs past the node's own are the
  // implicit inputs (see KernelInfo). Each outputs[i] is to be assigned by the kernel (outputs of
  // the node that are omitted may be left alone).
  virtual void run(const RunContext& ctx, std::span<const Tensor* const> inputs, std::span<Tensor> outputs) const = 0;
};

// The kernel of an op whose inputs or outputs may be sequences or optionals (engine/value.h), or
// that passes any value along (Identity, If, Loop, Scan): the engine calls run_values, with
// every input and output as a Value. Other kernels see tensors only; a sequence or optional
// given to one is an error naming the input.
class ValueKernel : public Kernel {
 public:
  // inputs[i] is nullptr for an omitted optional input; implicit inputs follow, as for Kernel.
  virtual void run_values(const RunContext& ctx, std::span<const Value* const> inputs,
                          std::span<Value> outputs) const = 0;
  // For callers with tensors only: run_values on them (an output that is not a tensor is an error).
  void run(const RunContext& ctx, std::span<const Tensor* const> inputs, std::span<Tensor> outputs) const final;
};

// A compiled graph, for the kernels of If, Loop, Scan and SequenceMap.
class GraphRunner {
 public:
  virtual ~GraphRunner() = default;
  // `outer` are the enclosing values named when compiled; `inputs` the subgraph's own inputs
  // (nullptr: not given). Returns the subgraph's outputs in order.
  virtual std::vector<Value> run(const RunContext& ctx, std::span<const Value* const> outer,
                                 std::span<const Value* const> inputs) const = 0;
};

using KernelFactory = std::function<std::unique_ptr<Kernel>(const KernelInfo&)>;

class KernelRegistry {
 public:
  // Every kernel of the engine (families register themselves in registry.cc).
  static const KernelRegistry& instance();

  // Opsets `since` to `until` inclusive of `domain` ("" is the default ONNX domain).
  void add(std::string domain, std::string op_type, int since, int until, KernelFactory make);
  // nullptr when no kernel covers this op at this opset.
  const KernelFactory* find(std::string_view domain, std::string_view op_type, int64_t opset) const;
  // Whether the op is known at any opset (to tell "unknown op" from "unsupported opset").
  bool knows(std::string_view domain, std::string_view op_type) const;
  // "Add", "com.microsoft.QLinearAdd", ... sorted, each once.
  std::vector<std::string> op_types() const;

 private:
  struct Entry {
    std::string domain;
    std::string op_type;
    int since;
    int until;
    KernelFactory make;
  };
  std::vector<Entry> entries_;
};

// Opset bound for "every later version" in KernelRegistry::add.
inline constexpr int kLatestOpset = 1000;

// Kernels register in families; each family file defines one of these.
void register_basic_kernels(KernelRegistry& registry);       // Identity, Constant, If, ...
void register_elementwise_kernels(KernelRegistry& registry);  // unary and binary maths, logic, Where, Cast
void register_shape_kernels(KernelRegistry& registry);        // Reshape, Transpose, Slice, Gather, ...
void register_reduce_kernels(KernelRegistry& registry);       // ReduceX, ArgMax, Softmax, TopK, ...
void register_norm_pool_kernels(KernelRegistry& registry);    // pools, normalizations
void register_linear_kernels(KernelRegistry& registry);       // Conv, ConvTranspose, Gemm, MatMul, MatMulNBits
void register_recurrent_kernels(KernelRegistry& registry);    // LSTM, GRU, RNN, com.amd.quark ExtendedLSTM
void register_quantize_kernels(KernelRegistry& registry);     // Q/DQ, QLinear*, *Integer
void register_detection_kernels(KernelRegistry& registry);    // NonMaxSuppression, RoiAlign
void register_signal_kernels(KernelRegistry& registry);       // windows, DFT, STFT, MelWeightMatrix
void register_random_kernels(KernelRegistry& registry);       // Bernoulli, RandomUniformLike
void register_text_kernels(KernelRegistry& registry);         // StringNormalizer, TfIdfVectorizer
void register_loop_scan_kernels(KernelRegistry& registry);    // Loop, Scan
void register_sequence_kernels(KernelRegistry& registry);     // Sequence*, SplitToSequence, ConcatFromSequence
void register_optional_kernels(KernelRegistry& registry);     // Optional, OptionalHasElement, OptionalGetElement

// A factory for kernel class K, built from the KernelInfo when K takes one.
template <class K>
KernelFactory kernel_factory() {
  return [](const KernelInfo& info) -> std::unique_ptr<Kernel> {
    if constexpr (std::is_constructible_v<K, const KernelInfo&>) return std::make_unique<K>(info);
    else return std::make_unique<K>();
  };
}

// Small helpers shared by kernels.

// Normalises a possibly negative axis against `rank`; Error if out of range.
int64_t normalize_axis(int64_t axis, int64_t rank, std::string_view what = "axis");

// NumPy-style broadcast of two shapes; Error naming both when they do not broadcast.
std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

// Kernels that compute in float32 take float16, bfloat16 and double through these: the tensor as
// float32 (the same data when it already is), and a float32 result converted to `type`.
Tensor as_float32(const Tensor& t);
Tensor float32_as(const Tensor& t, DataType type);

// Reads a 1-D (or scalar) int64/int32 tensor as int64 values (shapes, axes, pads, ...).
std::vector<int64_t> read_int64s(const Tensor& t, std::string_view what);

}  // namespace onnxptq::engine
