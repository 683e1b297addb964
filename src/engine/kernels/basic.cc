// Identity, Constant, Dropout (inference) and If.
#include "engine/kernel.h"

namespace onnxptq::engine {
namespace {

// Any value passes: a tensor, a sequence or an optional (opset 14 and 16 widened its types).
class IdentityKernel : public ValueKernel {
 public:
  void run_values(const RunContext&, std::span<const Value* const> in, std::span<Value> out) const override {
    out[0] = *in[0];  // shares the data: copy-on-write keeps the input intact
  }
};

class ConstantKernel : public Kernel {
 public:
  explicit ConstantKernel(const KernelInfo& info) {
    const ir::Node& n = info.node;
    if (n.attributes.size() != 1) throw Error("Constant needs exactly one value attribute");
    const ir::Attribute& a = n.attributes[0];
    if (a.name == "value") value_ = a.t;
    else if (a.name == "value_float") value_ = Tensor::from_values<float>({}, std::vector<float>{a.f});
    else if (a.name == "value_floats") value_ = Tensor::from_values<float>({static_cast<int64_t>(a.floats.size())}, a.floats);
    else if (a.name == "value_int") value_ = Tensor::from_values<int64_t>({}, std::vector<int64_t>{a.i});
    else if (a.name == "value_ints") value_ = Tensor::from_values<int64_t>({static_cast<int64_t>(a.ints.size())}, a.ints);
    else if (a.name == "value_string") value_ = Tensor::from_strings({}, {a.s});
    else if (a.name == "value_strings") value_ = Tensor::from_strings({static_cast<int64_t>(a.strings.size())}, a.strings);
    else throw unsupported("Constant attribute '" + a.name + "' is not supported");
    value_.name.clear();
  }
  void run(const RunContext&, std::span<const Tensor* const>, std::span<Tensor> out) const override { out[0] = value_; }

 private:
  Tensor value_;
};

// Inference-mode Dropout: the data passes unchanged, the optional mask is all true.
class DropoutKernel : public Kernel {
 public:
  explicit DropoutKernel(const KernelInfo& info) : opset_(info.opset) {}
  void run(const RunContext&, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    bool training = opset_ >= 12 && in.size() > 2 && in[2] && in[2]->values<bool>()[0];
    float ratio = opset_ >= 12 && in.size() > 1 && in[1] ? as_float32(*in[1]).values<float>()[0] : 0.0f;
    // Training-mode Dropout drops at random: only its ratio-0 case is defined without a generator.
    if (training && ratio != 0.0f)
      throw Error("training_mode is true with ratio " + std::to_string(ratio) +
                  ": random dropout is not supported (the engine runs inference)");
    out[0] = *in[0];
    if (out.size() > 1) {
      Tensor mask(DataType::Bool, in[0]->dims());
      for (bool& m : mask.mutable_values<bool>()) m = true;
      out[1] = std::move(mask);
    }
  }

 private:
  int64_t opset_;
};

// The branches' outputs may be sequences and optionals too (opset 13 and 16).
class IfKernel : public ValueKernel {
 public:
  explicit IfKernel(const KernelInfo& info) : own_inputs_(info.input_count()) {
    const ir::Attribute* then_branch = info.node.find_attribute("then_branch");
    const ir::Attribute* else_branch = info.node.find_attribute("else_branch");
    if (!then_branch || !then_branch->g || !else_branch || !else_branch->g)
      throw Error("If needs then_branch and else_branch graphs");
    then_ = info.compile_subgraph(*then_branch->g, info.implicit_inputs);
    else_ = info.compile_subgraph(*else_branch->g, info.implicit_inputs);
  }
  void run_values(const RunContext& ctx, std::span<const Value* const> in, std::span<Value> out) const override {
    const Tensor& cond = in[0]->tensor();
    if (cond.size() != 1 || cond.dtype() != DataType::Bool)
      throw Error("the condition must be one bool, got " + std::string(ir::data_type_name(cond.dtype())) +
                  ir::dims_to_string(cond.dims()));
    const GraphRunner& branch = cond.values<bool>()[0] ? *then_ : *else_;
    std::vector<Value> results = branch.run(ctx, in.subspan(own_inputs_), {});
    if (results.size() != out.size())
      throw Error("the branch gives " + std::to_string(results.size()) + " outputs, the node has " +
                  std::to_string(out.size()));
    for (size_t i = 0; i < out.size(); ++i) out[i] = std::move(results[i]);
  }

 private:
  size_t own_inputs_;
  std::unique_ptr<GraphRunner> then_, else_;
};

}  // namespace

void register_basic_kernels(KernelRegistry& r) {
  r.add("", "Identity", 1, kLatestOpset, kernel_factory<IdentityKernel>());
  r.add("", "Constant", 1, kLatestOpset, kernel_factory<ConstantKernel>());
  r.add("", "Dropout", 1, kLatestOpset, kernel_factory<DropoutKernel>());
  r.add("", "If", 1, kLatestOpset, kernel_factory<IfKernel>());
}

}  // namespace onnxptq::engine
