// The elementwise family: registration of its parts and the broadcast plan they share.
#include "engine/kernels/elementwise.h"

namespace onnxptq::engine {
namespace elementwise {

BroadcastPlan broadcast_plan(const std::vector<const std::vector<int64_t>*>& shapes) {
  BroadcastPlan p;
  p.inputs = static_cast<int>(shapes.size());
  if (p.inputs < 1 || p.inputs > kMaxBroadcastInputs) throw Error("broadcast of " + std::to_string(p.inputs) + " inputs");
  size_t rank = 0;
  for (const auto* s : shapes) rank = std::max(rank, s->size());
  auto dim_of = [&](int k, size_t axis) {  // input k's dim at output axis, right-aligned
    const std::vector<int64_t>& s = *shapes[k];
    return axis < rank - s.size() ? int64_t{1} : s[axis - (rank - s.size())];
  };
  p.out_dims.assign(rank, 1);
  for (size_t axis = 0; axis < rank; ++axis) {
    for (int k = 0; k < p.inputs; ++k) {
      int64_t d = dim_of(k, axis);
      if (d == 1) continue;
      if (p.out_dims[axis] != 1 && p.out_dims[axis] != d) {
        std::string list;
        for (const auto* s : shapes) list += (list.empty() ? "" : " and ") + ir::dims_to_string(*s);
        throw Error("shapes " + list + " cannot be broadcast");
      }
      p.out_dims[axis] = d;
    }
  }
  p.total = ir::element_count(p.out_dims);
  if (p.total == 0) return p;

  // Collapse: drop size-1 axes, merge neighbours where every input repeats or moves alike.
  std::vector<int64_t> dims;
  std::vector<unsigned> repeats;  // bit k set: input k repeats along the axis
  for (size_t axis = 0; axis < rank; ++axis) {
    if (p.out_dims[axis] == 1) continue;
    unsigned mask = 0;
    for (int k = 0; k < p.inputs; ++k)
      if (dim_of(k, axis) == 1) mask |= 1u << k;
    if (!dims.empty() && repeats.back() == mask) {
      dims.back() *= p.out_dims[axis];
    } else {
      dims.push_back(p.out_dims[axis]);
      repeats.push_back(mask);
    }
  }
  if (dims.empty()) return p;  // one element: every input is read at offset 0

  size_t n = dims.size();
  p.inner = dims[n - 1];
  p.outer_dims.assign(dims.begin(), dims.end() - 1);
  for (int k = 0; k < p.inputs; ++k) {
    bool repeat = repeats[n - 1] >> k & 1;
    p.inner_step[k] = repeat ? 0 : 1;
    int64_t stride = repeat ? 1 : p.inner;
    p.outer_strides[k].assign(n - 1, 0);
    for (size_t j = n - 1; j-- > 0;) {
      if (repeats[j] >> k & 1) continue;
      p.outer_strides[k][j] = stride;
      stride *= dims[j];
    }
  }
  return p;
}

std::string type_name(DataType t) { return std::string(ir::data_type_name(t)); }

const Tensor& required_input(std::span<const Tensor* const> in, size_t i, const char* name) {
  if (i >= in.size() || !in[i]) throw Error(std::string("input ") + std::to_string(i) + " (" + name + ") is missing");
  return *in[i];
}

void check_same_type(std::span<const Tensor* const> in, size_t count) {
  for (size_t i = 1; i < count && i < in.size(); ++i)
    if (in[i] && in[0] && in[i]->dtype() != in[0]->dtype())
      throw Error("input " + std::to_string(i) + " is " + type_name(in[i]->dtype()) + ", input 0 is " +
                  type_name(in[0]->dtype()) + ": they must have the same element type");
}

}  // namespace elementwise

void register_elementwise_kernels(KernelRegistry& r) {
  elementwise::register_binary(r);
  elementwise::register_variadic(r);
  elementwise::register_unary(r);
  elementwise::register_cast(r);
}

}  // namespace onnxptq::engine
