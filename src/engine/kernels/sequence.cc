// The sequence ops: SequenceEmpty, SequenceConstruct, SequenceInsert, SequenceAt, SequenceErase,
// SequenceLength, SplitToSequence, ConcatFromSequence and SequenceMap
// (https://onnx.ai/onnx/operators/, each op's page). A sequence is immutable: an op that changes
// one makes a new sequence sharing the tensors' data.
#include "engine/kernels/sequence.h"

#include <cstring>

#include "ir/data_type.h"

namespace onnxptq::engine {
namespace sequence {
namespace {

int64_t product(const std::vector<int64_t>& dims, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to; ++i) n *= dims[i];
  return n;
}

// Bytes of one element, or 0 for strings; Error for types packed below a byte.
size_t element_bytes(DataType dtype, std::string_view op) {
  if (dtype == DataType::String) return 0;
  int bits = ir::data_type_bits(dtype);
  if (bits <= 0 || bits % 8 != 0)
    throw Error(std::string(op) + " does not support " + std::string(ir::data_type_name(dtype)) + " tensors");
  return static_cast<size_t>(bits / 8);
}

// Copies `rows` rows of `count` elements from `src` (row stride `src_stride`) to `dst` (row
// stride `dst_stride`), element offsets in elements.
void copy_rows(const Tensor& src, int64_t src_offset, int64_t src_stride, Tensor& dst, int64_t dst_offset,
               int64_t dst_stride, int64_t rows, int64_t count, size_t width) {
  if (count == 0) return;
  if (width == 0) {
    const auto& from = src.string_values();
    auto& to = dst.mutable_string_values();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < count; ++i) to[dst_offset + r * dst_stride + i] = from[src_offset + r * src_stride + i];
    return;
  }
  const std::byte* from = src.bytes().data();
  std::byte* to = dst.mutable_bytes();
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(to + (dst_offset + r * dst_stride) * width, from + (src_offset + r * src_stride) * width,
                static_cast<size_t>(count) * width);
}

Tensor empty_like_type(DataType dtype, std::vector<int64_t> dims) {
  return dtype == DataType::String ? Tensor(dtype, std::move(dims)) : Tensor::uninitialized(dtype, std::move(dims));
}

}  // namespace

Tensor slice_axis(const Tensor& t, int64_t axis, int64_t begin, int64_t end, bool drop_axis) {
  const std::vector<int64_t>& dims = t.dims();
  size_t width = element_bytes(t.dtype(), "slicing");
  int64_t outer = product(dims, 0, axis), inner = product(dims, axis + 1, dims.size()), len = dims[axis];
  std::vector<int64_t> out_dims = dims;
  if (drop_axis)
    out_dims.erase(out_dims.begin() + axis);
  else
    out_dims[axis] = end - begin;
  Tensor out = empty_like_type(t.dtype(), out_dims);
  copy_rows(t, begin * inner, len * inner, out, 0, (end - begin) * inner, outer, (end - begin) * inner, width);
  return out;
}

Tensor concat_axis(std::span<const Tensor* const> parts, int64_t axis, bool new_axis, std::string_view op) {
  if (parts.empty()) throw Error(std::string(op) + ": there is nothing to join");
  const Tensor& first = *parts[0];
  size_t width = element_bytes(first.dtype(), op);
  std::vector<int64_t> dims = first.dims();
  if (new_axis)
    dims.insert(dims.begin() + axis, 0);
  else
    dims[axis] = 0;
  for (const Tensor* p : parts) {
    bool same = p->dtype() == first.dtype() && p->rank() == first.rank();
    for (size_t d = 0; same && d < first.rank(); ++d)
      same = p->dims()[d] == first.dims()[d] || (!new_axis && static_cast<int64_t>(d) == axis);
    if (!same)
      throw Error(std::string(op) + ": cannot join a " + std::string(ir::data_type_name(p->dtype())) + " tensor " +
                  ir::dims_to_string(p->dims()) + " with a " + std::string(ir::data_type_name(first.dtype())) +
                  " tensor " + ir::dims_to_string(first.dims()) +
                  (new_axis ? "" : " along axis " + std::to_string(axis)));
    dims[axis] += new_axis ? 1 : p->dims()[axis];
  }
  ir::checked_element_count(dims, std::string(op) + " output");
  int64_t outer = product(dims, 0, axis), inner = product(dims, axis + 1, dims.size()), total = dims[axis];
  Tensor out = empty_like_type(first.dtype(), dims);
  int64_t at = 0;
  for (const Tensor* p : parts) {
    int64_t len = new_axis ? 1 : p->dims()[axis];
    copy_rows(*p, 0, len * inner, out, at * inner, total * inner, outer, len * inner, width);
    at += len;
  }
  return out;
}

int64_t read_position(const Tensor& t, int64_t size, int64_t last) {
  if (t.size() != 1 || (t.dtype() != DataType::Int64 && t.dtype() != DataType::Int32))
    throw Error("the position must be one int32 or int64 value, got a " + std::string(ir::data_type_name(t.dtype())) +
                " tensor " + ir::dims_to_string(t.dims()));
  int64_t p = t.dtype() == DataType::Int64 ? t.values<int64_t>()[0] : t.values<int32_t>()[0];
  if (p < -size || p > last)
    throw Error("position " + std::to_string(p) + " is out of range [" + std::to_string(-size) + ", " +
                std::to_string(last) + "] for a sequence of " + std::to_string(size) + " tensors");
  return p < 0 ? p + size : p;
}

}  // namespace sequence

namespace {

using sequence::read_position;

// A tensor for a sequence of `elem_type` (Undefined: any).
void check_item_type(DataType elem_type, const Tensor& t) {
  if (elem_type != DataType::Undefined && t.dtype() != elem_type)
    throw Error("a " + std::string(ir::data_type_name(t.dtype())) + " tensor cannot join a sequence of " +
                std::string(ir::data_type_name(elem_type)) + " tensors");
}

class SequenceEmptyKernel : public ValueKernel {
 public:
  explicit SequenceEmptyKernel(const KernelInfo& info)
      : dtype_(static_cast<DataType>(info.node.attr_int("dtype", static_cast<int64_t>(DataType::Float)))) {
    if (dtype_ == DataType::Undefined || !ir::data_type_is_known(static_cast<int32_t>(dtype_)))
      throw Error("dtype " + std::to_string(static_cast<int>(dtype_)) + " is not a tensor element type");
  }
  void run_values(const RunContext&, std::span<const Value* const>, std::span<Value> out) const override {
    out[0] = Value::sequence(dtype_, {});
  }

 private:
  DataType dtype_;
};

class SequenceConstructKernel : public ValueKernel {
 public:
  void run_values(const RunContext&, std::span<const Value* const> in, std::span<Value> out) const override {
    if (in.empty()) throw Error("SequenceConstruct needs at least one tensor");
    std::vector<Tensor> items;
    for (const Value* v : in) {
      if (!v) throw Error("SequenceConstruct inputs cannot be omitted");
      if (!items.empty()) check_item_type(items[0].dtype(), v->tensor());
      items.push_back(v->tensor());
    }
    DataType type = items[0].dtype();
    out[0] = Value::sequence(type, std::move(items));
  }
};

class SequenceInsertKernel : public ValueKernel {
 public:
  void run_values(const RunContext&, std::span<const Value* const> in, std::span<Value> out) const override {
    const Value& seq = *in[0];
    const Tensor& t = in[1]->tensor();
    check_item_type(seq.elem_type(), t);
    std::vector<Tensor> items = seq.items();
    int64_t n = static_cast<int64_t>(items.size());
    int64_t at = in.size() > 2 && in[2] ? read_position(in[2]->tensor(), n, n) : n;  // default: the back
    items.insert(items.begin() + at, t);
    out[0] = Value::sequence(t.dtype(), std::move(items));
  }
};

class SequenceAtKernel : public ValueKernel {
 public:
  void run_values(const RunContext&, std::span<const Value* const> in, std::span<Value> out) const override {
    const std::vector<Tensor>& items = in[0]->items();
    int64_t n = static_cast<int64_t>(items.size());
    out[0] = items[read_position(in[1]->tensor(), n, n - 1)];
  }
};

class SequenceEraseKernel : public ValueKernel {
 public:
  void run_values(const RunContext&, std::span<const Value* const> in, std::span<Value> out) const override {
    std::vector<Tensor> items = in[0]->items();
    int64_t n = static_cast<int64_t>(items.size());
    if (n == 0) throw Error("cannot erase from an empty sequence");
    int64_t at = in.size() > 1 && in[1] ? read_position(in[1]->tensor(), n, n - 1) : n - 1;  // default: the back
    items.erase(items.begin() + at);
    out[0] = Value::sequence(in[0]->elem_type(), std::move(items));
  }
};

class SequenceLengthKernel : public ValueKernel {
 public:
  void run_values(const RunContext&, std::span<const Value* const> in, std::span<Value> out) const override {
    out[0] = Tensor::from_values<int64_t>({}, std::vector<int64_t>{static_cast<int64_t>(in[0]->items().size())});
  }
};

// Without `split`, parts of one element along the axis (squeezed away unless keepdims); a scalar
// split gives parts of that size (the last may be smaller); a 1-D split gives the sizes.
class SplitToSequenceKernel : public ValueKernel {
 public:
  explicit SplitToSequenceKernel(const KernelInfo& info)
      : axis_(info.node.attr_int("axis", 0)), keepdims_(info.node.attr_int("keepdims", 1) != 0) {}
  void run_values(const RunContext&, std::span<const Value* const> in, std::span<Value> out) const override {
    const Tensor& x = in[0]->tensor();
    int64_t axis = normalize_axis(axis_, static_cast<int64_t>(x.rank()));
    if (x.rank() == 0) throw Error("cannot split a scalar");
    int64_t len = x.dims()[axis];
    std::vector<int64_t> sizes;
    bool drop = false;
    if (in.size() < 2 || !in[1]) {
      sizes.assign(len, 1);
      drop = !keepdims_;
    } else if (in[1]->tensor().rank() == 0) {
      int64_t size = read_int64s(in[1]->tensor(), "split")[0];
      if (size <= 0) throw Error("split " + std::to_string(size) + " must be positive");
      for (int64_t at = 0; at < len; at += size) sizes.push_back(std::min(size, len - at));
    } else {
      sizes = read_int64s(in[1]->tensor(), "split");
      int64_t sum = 0;
      for (int64_t s : sizes) {
        if (s < 0) throw Error("split sizes must not be negative, got " + std::to_string(s));
        sum += s;
      }
      if (sum != len)
        throw Error("split sizes add up to " + std::to_string(sum) + ", the axis has " + std::to_string(len));
    }
    std::vector<Tensor> items;
    int64_t at = 0;
    for (int64_t s : sizes) {
      items.push_back(sequence::slice_axis(x, axis, at, at + s, drop));
      at += s;
    }
    out[0] = Value::sequence(x.dtype(), std::move(items));
  }

 private:
  int64_t axis_;
  bool keepdims_;
};

class ConcatFromSequenceKernel : public ValueKernel {
 public:
  explicit ConcatFromSequenceKernel(const KernelInfo& info) : new_axis_(info.node.attr_int("new_axis", 0) != 0) {
    const ir::Attribute* axis = info.node.find_attribute("axis");
    if (!axis) throw Error("ConcatFromSequence needs the axis attribute");
    axis_ = axis->i;
  }
  void run_values(const RunContext&, std::span<const Value* const> in, std::span<Value> out) const override {
    const std::vector<Tensor>& items = in[0]->items();
    if (items.empty()) throw Error("cannot concatenate an empty sequence");
    // With new_axis the axis may also be one past the last (ConcatFromSequence's docs: [-r-1, r]).
    int64_t rank = static_cast<int64_t>(items[0].rank()) + (new_axis_ ? 1 : 0);
    int64_t axis = normalize_axis(axis_, rank);
    std::vector<const Tensor*> parts;
    for (const Tensor& t : items) parts.push_back(&t);
    out[0] = sequence::concat_axis(parts, axis, new_axis_, "ConcatFromSequence");
  }

 private:
  int64_t axis_ = 0;
  bool new_axis_;
};

// The body runs once per position of the sequences: on their tensors at that position and on the
// tensor inputs as they are; each output collects one tensor per run.
class SequenceMapKernel : public ValueKernel {
 public:
  explicit SequenceMapKernel(const KernelInfo& info) : own_inputs_(info.input_count()) {
    const ir::Attribute* body = info.node.find_attribute("body");
    if (!body || !body->g) throw Error("SequenceMap needs a body graph");
    if (body->g->inputs().size() != own_inputs_ || body->g->outputs().size() != info.node.outputs().size())
      throw Error("the body has " + std::to_string(body->g->inputs().size()) + " inputs and " +
                  std::to_string(body->g->outputs().size()) + " outputs, the node " + std::to_string(own_inputs_) +
                  " and " + std::to_string(info.node.outputs().size()));
    for (const ir::Value* v : body->g->outputs())
      output_types_.push_back(v->type.is_tensor() ? v->type.elem_type : DataType::Undefined);
    body_ = info.compile_subgraph(*body->g, info.implicit_inputs);
  }
  void run_values(const RunContext& ctx, std::span<const Value* const> in, std::span<Value> out) const override {
    int64_t n = static_cast<int64_t>(in[0]->items().size());
    for (size_t i = 1; i < own_inputs_; ++i)
      if (in[i] && in[i]->is_sequence() && static_cast<int64_t>(in[i]->items().size()) != n)
        throw Error("input " + std::to_string(i) + " has " + std::to_string(in[i]->items().size()) +
                    " tensors, the first sequence " + std::to_string(n));
    std::vector<std::vector<Tensor>> results(out.size());
    std::vector<Value> args(own_inputs_);
    std::vector<const Value*> arg_ptrs(own_inputs_);
    for (int64_t k = 0; k < n; ++k) {
      for (size_t i = 0; i < own_inputs_; ++i) {
        if (!in[i]) throw Error("SequenceMap inputs cannot be omitted");
        arg_ptrs[i] = in[i]->is_sequence() ? &(args[i] = in[i]->items()[k]) : in[i];
      }
      std::vector<Value> step = body_->run(ctx, in.subspan(own_inputs_), arg_ptrs);
      for (size_t o = 0; o < out.size(); ++o) results[o].push_back(step[o].tensor());
    }
    for (size_t o = 0; o < out.size(); ++o) {
      DataType type = results[o].empty() ? output_types_[o] : results[o][0].dtype();
      for (const Tensor& t : results[o]) check_item_type(type, t);
      out[o] = Value::sequence(type, std::move(results[o]));
    }
  }

 private:
  size_t own_inputs_;
  std::vector<DataType> output_types_;
  std::unique_ptr<GraphRunner> body_;
};

}  // namespace

void register_sequence_kernels(KernelRegistry& r) {
  r.add("", "SequenceEmpty", 11, kLatestOpset, kernel_factory<SequenceEmptyKernel>());
  r.add("", "SequenceConstruct", 11, kLatestOpset, kernel_factory<SequenceConstructKernel>());
  r.add("", "SequenceInsert", 11, kLatestOpset, kernel_factory<SequenceInsertKernel>());
  r.add("", "SequenceAt", 11, kLatestOpset, kernel_factory<SequenceAtKernel>());
  r.add("", "SequenceErase", 11, kLatestOpset, kernel_factory<SequenceEraseKernel>());
  r.add("", "SequenceLength", 11, kLatestOpset, kernel_factory<SequenceLengthKernel>());
  r.add("", "SplitToSequence", 11, kLatestOpset, kernel_factory<SplitToSequenceKernel>());
  r.add("", "ConcatFromSequence", 11, kLatestOpset, kernel_factory<ConcatFromSequenceKernel>());
  r.add("", "SequenceMap", 17, kLatestOpset, kernel_factory<SequenceMapKernel>());
}

}  // namespace onnxptq::engine
