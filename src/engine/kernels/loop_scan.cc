// Loop and Scan: a body graph run once per iteration, as If runs its branches (compiled by the
// session, the enclosing values it reads passed after the node's own inputs), with values carried
// from one iteration to the next and per-iteration outputs stacked along a new axis
// (https://onnx.ai/onnx/operators/onnx__Loop.html, onnx__Scan.html).
#include <algorithm>

#include "engine/kernels/sequence.h"

namespace onnxptq::engine {
namespace {

using sequence::concat_axis;
using sequence::slice_axis;

const ir::Graph& body_of(const KernelInfo& info) {
  const ir::Attribute* body = info.node.find_attribute("body");
  if (!body || !body->g) throw Error(info.node.op_type + " needs a body graph");
  return *body->g;
}

// One bool of a tensor (a condition: shape [] or [1]).
bool read_condition(const Value& v, std::string_view what) {
  const Tensor& t = v.tensor();
  if (t.size() != 1 || t.dtype() != DataType::Bool)
    throw Error(std::string(what) + " must be one bool, got a " + std::string(ir::data_type_name(t.dtype())) +
                " tensor " + ir::dims_to_string(t.dims()));
  return t.values<bool>()[0];
}

// Per-iteration tensors of a scan output stacked along `axis` (in reverse order when `reverse`).
// With no iteration, an empty tensor of the body output's declared type and shape, where known.
Tensor stack(const std::vector<Tensor>& parts, int64_t axis, bool reverse, const ir::ValueType& declared) {
  if (parts.empty()) {
    std::vector<int64_t> dims = declared.static_shape().value_or(std::vector<int64_t>{});
    dims.insert(dims.begin() + std::min<int64_t>(axis, static_cast<int64_t>(dims.size())), 0);
    DataType type =
        declared.is_tensor() && declared.elem_type != DataType::Undefined ? declared.elem_type : DataType::Float;
    return Tensor(type, dims);
  }
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : parts) ptrs.push_back(&t);
  if (reverse) std::reverse(ptrs.begin(), ptrs.end());
  return concat_axis(ptrs, axis, true, "stacking the scan outputs");
}

// Loop: `for (i = 0; i < M && cond; ++i) cond, v... , scan... = body(i, cond, v...)`, M and
// cond each optional; the final v and the stacked scan outputs are the node's outputs.
// Loop-carried values may be sequences and optionals (opset 13 and 16); scan outputs are tensors.
// The body's condition ends the loop even without the cond input, as in ONNX Runtime (loop.cc)
// and ONNX's reference implementation, where the operator's docs call it ignored.
class LoopKernel : public ValueKernel {
 public:
  explicit LoopKernel(const KernelInfo& info) : own_inputs_(info.input_count()) {
    const ir::Graph& body = body_of(info);
    if (own_inputs_ < 2) throw Error("Loop needs the inputs M and cond (each may be left empty)");
    carried_ = own_inputs_ - 2;
    if (body.inputs().size() != carried_ + 2)
      throw Error("the body has " + std::to_string(body.inputs().size()) + " inputs, Loop gives it " +
                  std::to_string(carried_ + 2) + " (iteration number, condition and " + std::to_string(carried_) +
                  " loop-carried values)");
    if (body.outputs().size() < carried_ + 1 || info.node.outputs().size() != body.outputs().size() - 1)
      throw Error("the body has " + std::to_string(body.outputs().size()) + " outputs, Loop " +
                  std::to_string(info.node.outputs().size()) + " (the body needs one more: the condition)");
    for (size_t k = carried_ + 1; k < body.outputs().size(); ++k) scan_types_.push_back(body.outputs()[k]->type);
    body_ = info.compile_subgraph(body, info.implicit_inputs);
  }

  void run_values(const RunContext& ctx, std::span<const Value* const> in, std::span<Value> out) const override {
    const bool has_trip_count = in[0] != nullptr, has_cond = in[1] != nullptr;  // M omitted: no bound
    int64_t trip_count = 0;
    if (has_trip_count) {
      const Tensor& m = in[0]->tensor();
      if (m.size() != 1 || m.dtype() != DataType::Int64)
        throw Error("M must be one int64, got a " + std::string(ir::data_type_name(m.dtype())) + " tensor " +
                    ir::dims_to_string(m.dims()));
      trip_count = m.values<int64_t>()[0];
    }
    bool cond = has_cond ? read_condition(*in[1], "cond") : true;

    std::vector<Value> carried;
    for (size_t k = 0; k < carried_; ++k) {
      if (!in[2 + k]) throw Error("loop-carried input " + std::to_string(k) + " cannot be omitted");
      carried.push_back(*in[2 + k]);
    }
    std::vector<std::vector<Tensor>> scans(scan_types_.size());
    std::vector<const Value*> args(carried_ + 2);
    for (int64_t i = 0; (!has_trip_count || i < trip_count) && cond; ++i) {
      Value iteration = Tensor::from_values<int64_t>({}, std::vector<int64_t>{i});
      Tensor cond_tensor(DataType::Bool, {});
      cond_tensor.mutable_values<bool>()[0] = cond;
      Value cond_in = std::move(cond_tensor);
      args[0] = &iteration;
      args[1] = &cond_in;
      for (size_t k = 0; k < carried_; ++k) args[2 + k] = &carried[k];
      std::vector<Value> results = body_->run(ctx, in.subspan(own_inputs_), args);
      cond = read_condition(results[0], "the body's condition output");
      for (size_t k = 0; k < carried_; ++k) carried[k] = std::move(results[1 + k]);
      for (size_t k = 0; k < scans.size(); ++k) scans[k].push_back(results[1 + carried_ + k].tensor());
    }
    for (size_t k = 0; k < carried_; ++k) out[k] = std::move(carried[k]);
    for (size_t k = 0; k < scans.size(); ++k) out[carried_ + k] = stack(scans[k], 0, false, scan_types_[k]);
  }

 private:
  size_t own_inputs_;
  size_t carried_ = 0;
  std::vector<ir::ValueType> scan_types_;
  std::unique_ptr<GraphRunner> body_;
};

// The attribute `name` as one entry per item (default 0), each checked by `check`.
std::vector<int64_t> per_item(const ir::Node& node, const char* name, size_t count) {
  const ir::Attribute* a = node.find_attribute(name);
  if (!a) return std::vector<int64_t>(count, 0);
  if (a->ints.size() != count)
    throw Error(std::string(name) + " has " + std::to_string(a->ints.size()) + " entries, expected " +
                std::to_string(count));
  return a->ints;
}

// Scan (opset 9 on): states carried through the iterations, the scan inputs cut along their
// axes (read backwards where a direction is 1), the body's scan outputs stacked along their
// axes (written backwards where a direction is 1). Opset 8's form has a batch axis in front of
// every input and output, and optional sequence lengths per batch entry: it runs the same loop
// on each entry.
class ScanKernel : public ValueKernel {
 public:
  explicit ScanKernel(const KernelInfo& info) : opset8_(info.opset < 9) {
    const ir::Graph& body = body_of(info);
    const ir::Attribute* n = info.node.find_attribute("num_scan_inputs");
    if (!n || n->i < 1) throw Error("Scan needs num_scan_inputs of at least 1");
    first_ = opset8_ ? 1 : 0;  // opset 8: sequence_lens first
    own_inputs_ = info.input_count();
    scan_inputs_ = static_cast<size_t>(n->i);
    if (own_inputs_ < first_ + scan_inputs_)
      throw Error("num_scan_inputs is " + std::to_string(scan_inputs_) + ", the node has " +
                  std::to_string(own_inputs_ - first_) + " inputs");
    states_ = own_inputs_ - first_ - scan_inputs_;
    if (body.inputs().size() != states_ + scan_inputs_)
      throw Error("the body has " + std::to_string(body.inputs().size()) + " inputs, Scan gives it " +
                  std::to_string(states_ + scan_inputs_));
    if (body.outputs().size() != info.node.outputs().size() || body.outputs().size() < states_)
      throw Error("the body has " + std::to_string(body.outputs().size()) + " outputs, the node " +
                  std::to_string(info.node.outputs().size()));
    scan_outputs_ = body.outputs().size() - states_;
    for (size_t k = states_; k < body.outputs().size(); ++k) scan_types_.push_back(body.outputs()[k]->type);
    if (opset8_) {
      input_directions_ = per_item(info.node, "directions", scan_inputs_);
      input_axes_.assign(scan_inputs_, 0);
      output_axes_.assign(scan_outputs_, 0);
      output_directions_.assign(scan_outputs_, 0);
    } else {
      input_axes_ = per_item(info.node, "scan_input_axes", scan_inputs_);
      input_directions_ = per_item(info.node, "scan_input_directions", scan_inputs_);
      output_axes_ = per_item(info.node, "scan_output_axes", scan_outputs_);
      output_directions_ = per_item(info.node, "scan_output_directions", scan_outputs_);
    }
    for (int64_t d : input_directions_)
      if (d != 0 && d != 1) throw Error("scan directions must be 0 or 1, got " + std::to_string(d));
    for (int64_t d : output_directions_)
      if (d != 0 && d != 1) throw Error("scan output directions must be 0 or 1, got " + std::to_string(d));
    body_ = info.compile_subgraph(body, info.implicit_inputs);
  }

  void run_values(const RunContext& ctx, std::span<const Value* const> in, std::span<Value> out) const override {
    std::span<const Value* const> outer = in.subspan(own_inputs_);
    std::vector<Value> states;
    std::vector<Tensor> scans;
    for (size_t k = 0; k < states_ + scan_inputs_; ++k) {
      const Value* v = in[first_ + k];
      if (!v) throw Error("Scan input " + std::to_string(first_ + k) + " cannot be omitted");
      if (k < states_)
        states.push_back(*v);
      else
        scans.push_back(v->tensor());
    }
    if (!opset8_) {
      Result r = scan(ctx, outer, std::move(states), scans, -1);
      for (size_t k = 0; k < states_; ++k) out[k] = std::move(r.states[k]);
      for (size_t k = 0; k < scan_outputs_; ++k) out[states_ + k] = std::move(r.scans[k]);
      return;
    }
    run_batched(ctx, outer, in[0], states, scans, out);
  }

 private:
  struct Result {
    std::vector<Value> states;
    std::vector<Tensor> scans;
  };

  // The scan itself; `length` < 0: the inputs' length along their axes, which must agree.
  Result scan(const RunContext& ctx, std::span<const Value* const> outer, std::vector<Value> states,
              const std::vector<Tensor>& inputs, int64_t length) const {
    std::vector<int64_t> axes(scan_inputs_);
    int64_t len = -1;
    for (size_t k = 0; k < scan_inputs_; ++k) {
      const Tensor& x = inputs[k];
      if (x.rank() == 0) throw Error("scan input " + std::to_string(k) + " is a scalar: there is nothing to scan");
      axes[k] = normalize_axis(input_axes_[k], static_cast<int64_t>(x.rank()), "scan_input_axes entry");
      int64_t n = x.dims()[axes[k]];
      if (len >= 0 && n != len)
        throw Error("scan input " + std::to_string(k) + " has " + std::to_string(n) + " steps along axis " +
                    std::to_string(axes[k]) + ", the first " + std::to_string(len));
      len = n;
    }
    if (length >= 0) len = std::min(len, length);
    std::vector<std::vector<Tensor>> parts(scan_outputs_);
    std::vector<Value> slices(scan_inputs_);
    std::vector<const Value*> args(states_ + scan_inputs_);
    for (int64_t i = 0; i < len; ++i) {
      for (size_t k = 0; k < states_; ++k) args[k] = &states[k];
      for (size_t k = 0; k < scan_inputs_; ++k) {
        int64_t at = input_directions_[k] ? len - 1 - i : i;
        slices[k] = slice_axis(inputs[k], axes[k], at, at + 1, true);
        args[states_ + k] = &slices[k];
      }
      std::vector<Value> results = body_->run(ctx, outer, args);
      for (size_t k = 0; k < states_; ++k) states[k] = std::move(results[k]);
      for (size_t k = 0; k < scan_outputs_; ++k) parts[k].push_back(results[states_ + k].tensor());
    }
    Result r{std::move(states), {}};
    for (size_t k = 0; k < scan_outputs_; ++k) {
      int64_t rank = parts[k].empty() ? static_cast<int64_t>(scan_types_[k].shape.size()) : parts[k][0].rank();
      int64_t axis = normalize_axis(output_axes_[k], rank + 1, "scan_output_axes entry");
      r.scans.push_back(stack(parts[k], axis, output_directions_[k] != 0, scan_types_[k]));
    }
    return r;
  }

  // Opset 8: the scan of each batch entry (its sequence length, or all of it), the outputs
  // stacked along the batch axis, scan outputs padded with zeros to the longest.
  void run_batched(const RunContext& ctx, std::span<const Value* const> outer, const Value* sequence_lens,
                   const std::vector<Value>& states, const std::vector<Tensor>& scans, std::span<Value> out) const {
    int64_t batch = -1;
    auto check_batch = [&](const Tensor& t, const std::string& what) {
      if (t.rank() == 0) throw Error(what + " has no batch axis");
      if (batch >= 0 && t.dims()[0] != batch)
        throw Error(what + " has batch size " + std::to_string(t.dims()[0]) + ", expected " + std::to_string(batch));
      batch = t.dims()[0];
    };
    for (size_t k = 0; k < states.size(); ++k) check_batch(states[k].tensor(), "state " + std::to_string(k));
    for (size_t k = 0; k < scans.size(); ++k) {
      check_batch(scans[k], "scan input " + std::to_string(k));
      if (scans[k].rank() < 2) throw Error("scan input " + std::to_string(k) + " has no sequence axis");
    }
    int64_t max_len = scans[0].dims()[1];
    std::vector<int64_t> lengths(batch, max_len);
    if (sequence_lens) {
      lengths = read_int64s(sequence_lens->tensor(), "sequence_lens");
      if (static_cast<int64_t>(lengths.size()) != batch)
        throw Error("sequence_lens has " + std::to_string(lengths.size()) + " entries, the batch " +
                    std::to_string(batch));
      for (int64_t l : lengths)
        if (l < 0 || l > max_len)
          throw Error("sequence length " + std::to_string(l) + " is out of range [0, " + std::to_string(max_len) + "]");
    }
    std::vector<std::vector<Tensor>> state_parts(states_), scan_parts(scan_outputs_);
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<Value> entry_states;
      for (const Value& s : states) entry_states.push_back(slice_axis(s.tensor(), 0, b, b + 1, true));
      std::vector<Tensor> entry_scans;
      for (const Tensor& x : scans) {
        // A shorter sequence is its first `length` steps, read backwards where asked.
        Tensor whole = slice_axis(x, 0, b, b + 1, true);
        entry_scans.push_back(slice_axis(whole, 0, 0, lengths[b], false));
      }
      Result r = scan(ctx, outer, std::move(entry_states), entry_scans, lengths[b]);
      for (size_t k = 0; k < states_; ++k) state_parts[k].push_back(r.states[k].tensor());
      for (size_t k = 0; k < scan_outputs_; ++k) {
        Tensor t = std::move(r.scans[k]);
        if (t.dims()[0] < max_len) {
          std::vector<int64_t> pad_dims = t.dims();
          pad_dims[0] = max_len - t.dims()[0];
          Tensor pad(t.dtype(), pad_dims);
          const Tensor* both[] = {&t, &pad};
          t = concat_axis(both, 0, false, "padding the scan outputs");
        }
        scan_parts[k].push_back(std::move(t));
      }
    }
    for (size_t k = 0; k < states_; ++k) out[k] = stack(state_parts[k], 0, false, ir::ValueType{});
    for (size_t k = 0; k < scan_outputs_; ++k) out[states_ + k] = stack(scan_parts[k], 0, false, ir::ValueType{});
  }

  bool opset8_;
  size_t first_ = 0;
  size_t own_inputs_ = 0;
  size_t scan_inputs_ = 0;
  size_t states_ = 0;
  size_t scan_outputs_ = 0;
  std::vector<int64_t> input_axes_, input_directions_, output_axes_, output_directions_;
  std::vector<ir::ValueType> scan_types_;
  std::unique_ptr<GraphRunner> body_;
};

}  // namespace

void register_loop_scan_kernels(KernelRegistry& r) {
  r.add("", "Loop", 1, kLatestOpset, kernel_factory<LoopKernel>());
  r.add("", "Scan", 8, kLatestOpset, kernel_factory<ScanKernel>());
}

}  // namespace onnxptq::engine
