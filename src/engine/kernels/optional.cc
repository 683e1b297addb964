// The optional ops: Optional, OptionalHasElement and OptionalGetElement
// (https://onnx.ai/onnx/operators/onnx__Optional.html and the pages of the other two). Opset 18
// lets the last two take a tensor or a sequence as well (an element that is there) and
// OptionalHasElement an omitted input (one that is not); the kernels accept that at every opset.
#include "engine/kernel.h"

namespace onnxptq::engine {
namespace {

// An optional holding the input, or an empty one without it (its element type is the `type`
// attribute's, which the engine needs no further: an empty optional holds nothing to check).
class OptionalKernel : public ValueKernel {
 public:
  void run_values(const RunContext&, std::span<const Value* const> in, std::span<Value> out) const override {
    if (in.empty() || !in[0]) {
      out[0] = Value::none();
      return;
    }
    if (in[0]->is_optional()) throw Error("the input is already an optional: " + in[0]->describe());
    out[0] = Value::some(*in[0]);
  }
};

class OptionalHasElementKernel : public ValueKernel {
 public:
  void run_values(const RunContext&, std::span<const Value* const> in, std::span<Value> out) const override {
    bool has = !in.empty() && in[0] && (!in[0]->is_optional() || in[0]->has_element());
    Tensor t(DataType::Bool, {});
    t.mutable_values<bool>()[0] = has;
    out[0] = std::move(t);
  }
};

class OptionalGetElementKernel : public ValueKernel {
 public:
  void run_values(const RunContext&, std::span<const Value* const> in, std::span<Value> out) const override {
    const Value& v = *in[0];
    if (!v.is_optional()) {
      out[0] = v;
      return;
    }
    if (!v.has_element()) throw Error("the optional input is empty: there is no element to get");
    out[0] = v.element();
  }
};

}  // namespace

void register_optional_kernels(KernelRegistry& r) {
  r.add("", "Optional", 15, kLatestOpset, kernel_factory<OptionalKernel>());
  r.add("", "OptionalHasElement", 15, kLatestOpset, kernel_factory<OptionalHasElementKernel>());
  r.add("", "OptionalGetElement", 15, kLatestOpset, kernel_factory<OptionalGetElementKernel>());
}

}  // namespace onnxptq::engine
