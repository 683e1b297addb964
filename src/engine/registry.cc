#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <thread>

#include "engine/kernel.h"
#include "engine/parallel.h"
#include "ir/float16.h"

namespace onnxptq::engine {
namespace {

bool same_domain(std::string_view a, std::string_view b) {
  auto canonical = [](std::string_view d) { return d == "ai.onnx" ? std::string_view() : d; };
  return canonical(a) == canonical(b);
}

}  // namespace

const KernelRegistry& KernelRegistry::instance() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    register_basic_kernels(r);
    register_elementwise_kernels(r);
    register_shape_kernels(r);
    register_reduce_kernels(r);
    register_norm_pool_kernels(r);
    register_linear_kernels(r);
    register_recurrent_kernels(r);
    register_quantize_kernels(r);
    register_detection_kernels(r);
    register_signal_kernels(r);
    register_random_kernels(r);
    register_text_kernels(r);
    register_loop_scan_kernels(r);
    register_sequence_kernels(r);
    register_optional_kernels(r);
    return r;
  }();
  return registry;
}

void KernelRegistry::add(std::string domain, std::string op_type, int since, int until, KernelFactory make) {
  entries_.push_back({std::move(domain), std::move(op_type), since, until, std::move(make)});
}

void ValueKernel::run(const RunContext& ctx, std::span<const Tensor* const> inputs, std::span<Tensor> outputs) const {
  std::vector<Value> in_values(inputs.size());
  std::vector<const Value*> in(inputs.size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i]) in[i] = &(in_values[i] = *inputs[i]);
  std::vector<Value> out(outputs.size());
  run_values(ctx, in, out);
  for (size_t i = 0; i < outputs.size(); ++i) outputs[i] = out[i].tensor();
}

const KernelFactory* KernelRegistry::find(std::string_view domain, std::string_view op_type, int64_t opset) const {
  for (const Entry& e : entries_)
    if (e.op_type == op_type && same_domain(e.domain, domain) && opset >= e.since && opset <= e.until) return &e.make;
  return nullptr;
}

bool KernelRegistry::knows(std::string_view domain, std::string_view op_type) const {
  return std::any_of(entries_.begin(), entries_.end(),
                     [&](const Entry& e) { return e.op_type == op_type && same_domain(e.domain, domain); });
}

std::vector<std::string> KernelRegistry::op_types() const {
  std::set<std::string> names;
  for (const Entry& e : entries_) names.insert(e.domain.empty() ? e.op_type : e.domain + "." + e.op_type);
  return {names.begin(), names.end()};
}

namespace {

// Cores a cgroup v2 CPU quota grants ("max PERIOD" or "QUOTA PERIOD" in cpu.max, QUOTA/PERIOD
// rounded up), or 0 without one: a container limited to 2 CPUs on a 64-core host.
int cgroup_cpu_limit() {
  std::ifstream in("/sys/fs/cgroup/cpu.max");
  std::string quota;
  double period = 0;
  if (!(in >> quota >> period) || quota == "max" || period <= 0) return 0;
  const double cores = std::ceil(std::strtod(quota.c_str(), nullptr) / period);
  return cores >= 1 && cores < kMaxThreads ? static_cast<int>(cores) : 0;
}

}  // namespace

int hardware_threads() {
  // The cores this process may run on (taskset, numactl, a container's cpuset), not every core
  // the machine has: threads beyond them only wait for each other.
  int cores = static_cast<int>(std::thread::hardware_concurrency());
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) cores = CPU_COUNT(&set);
  if (int limit = cgroup_cpu_limit(); limit > 0) cores = std::min(cores, limit);
  return std::max(1, cores);
}

int64_t normalize_axis(int64_t axis, int64_t rank, std::string_view what) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    throw Error(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      throw Error("shapes " + ir::dims_to_string(a) + " and " + ir::dims_to_string(b) + " cannot be broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Tensor as_float32(const Tensor& t) {
  if (t.dtype() == DataType::Float) return t;
  Tensor out = Tensor::uninitialized(DataType::Float, t.dims());
  auto dst = out.mutable_values<float>();
  switch (t.dtype()) {
    case DataType::Float16: ir::half_to_float(t.values<uint16_t>().data(), dst.data(), dst.size()); break;
    case DataType::BFloat16: ir::bfloat16_to_float(t.values<uint16_t>().data(), dst.data(), dst.size()); break;
    case DataType::Double: {
      auto src = t.values<double>();
      for (size_t i = 0; i < dst.size(); ++i) dst[i] = static_cast<float>(src[i]);
      break;
    }
    default: throw Error("cannot compute " + std::string(ir::data_type_name(t.dtype())) + " as float");
  }
  return out;
}

Tensor float32_as(const Tensor& t, DataType type) {
  if (type == DataType::Float) return t;
  Tensor out = Tensor::uninitialized(type, t.dims());
  auto src = t.values<float>();
  switch (type) {
    case DataType::Float16: ir::float_to_half(src.data(), out.mutable_values<uint16_t>().data(), src.size()); break;
    case DataType::BFloat16: ir::float_to_bfloat16(src.data(), out.mutable_values<uint16_t>().data(), src.size()); break;
    case DataType::Double: {
      auto dst = out.mutable_values<double>();
      for (size_t i = 0; i < src.size(); ++i) dst[i] = src[i];
      break;
    }
    default: throw Error("cannot store float results as " + std::string(ir::data_type_name(type)));
  }
  return out;
}

std::vector<int64_t> read_int64s(const Tensor& t, std::string_view what) {
  if (t.rank() > 1) throw Error(std::string(what) + " must be a 1-D tensor, got shape " + ir::dims_to_string(t.dims()));
  if (t.dtype() == DataType::Int64) {
    auto v = t.values<int64_t>();
    return {v.begin(), v.end()};
  }
  if (t.dtype() == DataType::Int32) {
    auto v = t.values<int32_t>();
    return {v.begin(), v.end()};
  }
  throw Error(std::string(what) + " must be int64 or int32, got " + std::string(ir::data_type_name(t.dtype())));
}

}  // namespace onnxptq::engine
