// Einsum, with NumPy's rules: explicit ("ij,jk->ik") or implicit output (labels seen once, in
// ASCII order, after the ellipsis axes), "..." broadcast from the right, repeated labels take a
// diagonal, axes of size 1 broadcast. Evaluated as: per operand, diagonals and sums over labels
// nothing else needs; then operands contracted left to right, each pair as a transpose to
// [batch, M, K] x [batch, K, N] and a batched matrix product; then a final transpose.
#include <map>
#include <set>

#include "engine/kernels/linear.h"

namespace onnxptq::engine::linear {
namespace {

constexpr int kEllipsisLabel = 128;  // ellipsis axis j is label 128 + j; letters are their ASCII code

struct Term {
  std::vector<int> letters;
  int ellipsis_at = -1;  // position of "..." among the letters, or -1
};

Term parse_term(const std::string& text, const std::string& equation) {
  Term t;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      t.letters.push_back(c);
    } else if (c == '.' && text.compare(i, 3, "...") == 0 && t.ellipsis_at < 0) {
      t.ellipsis_at = static_cast<int>(t.letters.size());
      i += 2;
    } else {
      throw Error("equation '" + equation + "': unexpected '" + std::string(1, c) + "' in term '" + text + "'");
    }
  }
  return t;
}

// An operand during evaluation: dense row-major data with one label per axis.
template <class T>
struct Operand {
  std::vector<T> data;
  std::vector<int> labels;
  std::vector<int64_t> dims;
};

// out[i] = in[sum_d index_d(i) * strides[d]] over `dims` in row-major order.
template <class T>
std::vector<T> gather(const T* in, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  int64_t count = ir::element_count(dims);
  std::vector<T> out(static_cast<size_t>(count));
  if (count == 0) return out;
  if (dims.empty()) {
    out[0] = in[0];
    return out;
  }
  size_t r = dims.size();
  int64_t inner = dims[r - 1], inner_stride = strides[r - 1];
  std::vector<int64_t> pos(r - 1, 0);
  int64_t offset = 0;
  for (int64_t o = 0; o < count; o += inner) {
    const T* src = in + offset;
    T* dst = out.data() + o;
    for (int64_t j = 0; j < inner; ++j) dst[j] = src[j * inner_stride];
    for (size_t d = r - 1; d-- > 0;) {
      offset += strides[d];
      if (++pos[d] < dims[d]) break;
      offset -= strides[d] * dims[d];
      pos[d] = 0;
    }
  }
  return out;
}

std::vector<int64_t> dense_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size());
  for (int64_t i = static_cast<int64_t>(dims.size()) - 1, acc = 1; i >= 0; --i) {
    s[i] = acc;
    acc *= dims[i];
  }
  return s;
}

// The operand with its axes in `order` (a permutation of its labels).
template <class T>
Operand<T> permute(Operand<T> op, const std::vector<int>& order) {
  if (order == op.labels) return op;
  std::vector<int64_t> strides = dense_strides(op.dims), dims, picked;
  for (int l : order) {
    size_t i = std::find(op.labels.begin(), op.labels.end(), l) - op.labels.begin();
    dims.push_back(op.dims[i]);
    picked.push_back(strides[i]);
  }
  return {gather(op.data.data(), dims, picked), order, dims};
}

// Sums the operand over the labels for which `drop` is true.
template <class T, class Drop>
Operand<T> sum_out(Operand<T> op, Drop&& drop) {
  std::vector<int> kept, gone;
  for (int l : op.labels) (drop(l) ? gone : kept).push_back(l);
  if (gone.empty()) return op;
  std::vector<int> order = kept;
  order.insert(order.end(), gone.begin(), gone.end());
  op = permute(std::move(op), order);
  std::vector<int64_t> kept_dims(op.dims.begin(), op.dims.begin() + kept.size());
  int64_t outer = ir::element_count(kept_dims), inner = ir::element_count(op.dims) / std::max<int64_t>(outer, 1);
  if (outer == 0) inner = 0;
  std::vector<T> sums(static_cast<size_t>(outer));
  for (int64_t i = 0; i < outer; ++i) {
    Accumulator<T> acc{};
    const T* p = op.data.data() + i * inner;
    for (int64_t j = 0; j < inner; ++j) acc += static_cast<Accumulator<T>>(p[j]);
    sums[i] = static_cast<T>(acc);
  }
  return {std::move(sums), kept, kept_dims};
}

template <class T>
void batched_matmul(int threads, const T* a, const T* b, T* c, int64_t batch, int64_t m, int64_t k, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    matmul_f32(threads, a, b, c, batch, m, k, n);
  } else {
    for (int64_t i = 0; i < batch; ++i) matmul_reference(a + i * m * k, k, 1, b + i * k * n, n, 1, c + i * m * n, m, n, k);
  }
}

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

class EinsumKernel : public Kernel {
 public:
  explicit EinsumKernel(const KernelInfo& info) : equation_(info.node.attr_string("equation", "")) {
    std::string eq;
    for (char c : equation_)
      if (c != ' ') eq += c;
    if (eq.empty()) throw Error("equation is missing or empty");
    size_t arrow = eq.find("->");
    std::string lhs = eq.substr(0, arrow);
    for (size_t start = 0;;) {
      size_t comma = lhs.find(',', start);
      terms_.push_back(parse_term(lhs.substr(start, comma - start), equation_));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (arrow != std::string::npos) {
      output_ = parse_term(eq.substr(arrow + 2), equation_);
      explicit_output_ = true;
      std::set<int> seen;
      for (int l : output_.letters) {
        if (!seen.insert(l).second)
          throw Error("equation '" + equation_ + "': label '" + std::string(1, char(l)) + "' appears twice in the output");
        bool in_input = false;
        for (const Term& t : terms_) in_input = in_input || contains(t.letters, l);
        if (!in_input)
          throw Error("equation '" + equation_ + "': output label '" + std::string(1, char(l)) + "' is in no input");
      }
    }
    if (info.input_count() != terms_.size())
      throw Error("equation '" + equation_ + "' has " + std::to_string(terms_.size()) + " inputs, the node " +
                  std::to_string(info.input_count()));
  }

  void run(const RunContext& ctx, std::span<const Tensor* const> in, std::span<Tensor> out) const override {
    size_t count = terms_.size();
    DataType type = in[0]->dtype();
    for (size_t i = 0; i < count; ++i)
      if (in[i]->dtype() != type)
        throw Error("inputs must have one element type, got " + std::string(ir::data_type_name(type)) + " and " +
                    std::string(ir::data_type_name(in[i]->dtype())));
    switch (type) {
      case DataType::Float16:
      case DataType::BFloat16: {
        std::vector<Tensor> f(count);
        std::vector<const Tensor*> p(count);
        for (size_t i = 0; i < count; ++i) p[i] = &(f[i] = as_float32(*in[i]));
        out[0] = float32_as(compute<float>(ctx, p), type);
        return;
      }
      case DataType::Float: out[0] = compute<float>(ctx, in); return;
      case DataType::Double: out[0] = compute<double>(ctx, in); return;
      case DataType::Int8: out[0] = compute<int8_t>(ctx, in); return;
      case DataType::UInt8: out[0] = compute<uint8_t>(ctx, in); return;
      case DataType::Int16: out[0] = compute<int16_t>(ctx, in); return;
      case DataType::UInt16: out[0] = compute<uint16_t>(ctx, in); return;
      case DataType::Int32: out[0] = compute<int32_t>(ctx, in); return;
      case DataType::UInt32: out[0] = compute<uint32_t>(ctx, in); return;
      case DataType::Int64: out[0] = compute<int64_t>(ctx, in); return;
      case DataType::UInt64: out[0] = compute<uint64_t>(ctx, in); return;
      default: throw Error("Einsum does not take " + std::string(ir::data_type_name(type)));
    }
  }

 private:
  template <class T>
  Tensor compute(const RunContext& ctx, std::span<const Tensor* const> in) const {
    size_t count = terms_.size();
    // Labels of every axis, with the ellipsis axes numbered from the right.
    size_t ellipsis_rank = 0;
    std::vector<std::vector<int>> labels(count);
    for (size_t i = 0; i < count; ++i) {
      const Term& t = terms_[i];
      int64_t extra = static_cast<int64_t>(in[i]->rank()) - static_cast<int64_t>(t.letters.size());
      if (extra < 0 || (t.ellipsis_at < 0 && extra != 0))
        throw Error("equation '" + equation_ + "': input " + std::to_string(i) + " of shape " +
                    ir::dims_to_string(in[i]->dims()) + " does not have the " + std::to_string(t.letters.size()) +
                    " axes its term names");
      ellipsis_rank = std::max<size_t>(ellipsis_rank, extra);
    }
    for (size_t i = 0; i < count; ++i) {
      const Term& t = terms_[i];
      size_t extra = in[i]->rank() - t.letters.size();
      for (size_t j = 0; j < t.letters.size(); ++j) {
        if (static_cast<int>(j) == t.ellipsis_at)
          for (size_t e = 0; e < extra; ++e) labels[i].push_back(kEllipsisLabel + static_cast<int>(ellipsis_rank - extra + e));
        labels[i].push_back(t.letters[j]);
      }
      if (t.ellipsis_at == static_cast<int>(t.letters.size()))
        for (size_t e = 0; e < extra; ++e) labels[i].push_back(kEllipsisLabel + static_cast<int>(ellipsis_rank - extra + e));
    }
    std::vector<int> out_labels = output_labels(labels, ellipsis_rank);

    // The size of each label; size 1 broadcasts.
    std::map<int, int64_t> size;
    for (size_t i = 0; i < count; ++i)
      for (size_t d = 0; d < labels[i].size(); ++d) {
        int64_t n = in[i]->dims()[d];
        auto [it, added] = size.emplace(labels[i][d], n);
        if (added || it->second == n || n == 1) continue;
        if (it->second == 1) it->second = n;
        else
          throw Error("equation '" + equation_ + "': " + label_name(labels[i][d]) + " has size " + std::to_string(it->second) +
                      " and " + std::to_string(n));
      }

    // Per operand: diagonals, axes broadcast away, sums over labels nothing else needs.
    std::vector<Operand<T>> ops(count);
    for (size_t i = 0; i < count; ++i) {
      std::vector<int64_t> strides = dense_strides(in[i]->dims());
      Operand<T>& op = ops[i];
      std::vector<int64_t> picked;
      for (size_t d = 0; d < labels[i].size(); ++d) {
        int l = labels[i][d];
        int64_t n = in[i]->dims()[d];
        auto at = std::find(op.labels.begin(), op.labels.end(), l);
        if (at != op.labels.end()) {  // repeated label: walk the diagonal
          size_t j = at - op.labels.begin();
          if (op.dims[j] != n)
            throw Error("equation '" + equation_ + "': " + label_name(l) + " repeats in input " + std::to_string(i) +
                        " with sizes " + std::to_string(op.dims[j]) + " and " + std::to_string(n));
          picked[j] += strides[d];
          continue;
        }
        if (n == 1 && size[l] != 1) continue;  // broadcast: the axis is dropped
        op.labels.push_back(l);
        op.dims.push_back(n);
        picked.push_back(strides[d]);
      }
      op.data = gather(in[i]->values<T>().data(), op.dims, picked);
      op = sum_out(std::move(op), [&](int l) {
        if (contains(out_labels, l)) return false;
        for (size_t j = 0; j < count; ++j)
          if (j != i && contains(labels[j], l)) return false;
        return true;
      });
    }

    // Contract left to right.
    Operand<T> acc = std::move(ops[0]);
    for (size_t i = 1; i < count; ++i) {
      Operand<T>& b = ops[i];
      auto keep = [&](int l) {  // still needed once operand i is folded in
        if (contains(out_labels, l)) return true;
        for (size_t j = i + 1; j < count; ++j)
          if (contains(ops[j].labels, l)) return true;
        return false;
      };
      acc = sum_out(std::move(acc), [&](int l) { return !keep(l) && !contains(b.labels, l); });
      b = sum_out(std::move(b), [&](int l) { return !keep(l) && !contains(acc.labels, l); });
      std::vector<int> batch, ms, ks, ns;
      for (int l : acc.labels)
        (contains(b.labels, l) ? (keep(l) ? batch : ks) : ms).push_back(l);
      for (int l : b.labels)
        if (!contains(acc.labels, l)) ns.push_back(l);
      auto cat = [](std::vector<int> x, const std::vector<int>& y, const std::vector<int>& z) {
        x.insert(x.end(), y.begin(), y.end());
        x.insert(x.end(), z.begin(), z.end());
        return x;
      };
      Operand<T> a2 = permute(std::move(acc), cat(batch, ms, ks));
      Operand<T> b2 = permute(std::move(b), cat(batch, ks, ns));
      auto extent = [&](const std::vector<int>& ls) {
        int64_t e = 1;
        for (int l : ls) e *= size[l];
        return e;
      };
      int64_t nb = extent(batch), m = extent(ms), k = extent(ks), n = extent(ns);
      Operand<T> c;
      c.labels = cat(batch, ms, ns);
      for (int l : c.labels) c.dims.push_back(size[l]);
      c.data.assign(static_cast<size_t>(nb * m * n), T{});
      if (nb * m * n > 0 && k > 0) batched_matmul<T>(ctx.threads, a2.data.data(), b2.data.data(), c.data.data(), nb, m, k, n);
      acc = std::move(c);
    }
    acc = sum_out(std::move(acc), [&](int l) { return !contains(out_labels, l); });
    acc = permute(std::move(acc), out_labels);
    std::vector<int64_t> out_dims;
    for (int l : out_labels) out_dims.push_back(size[l]);
    return Tensor::from_values<T>(out_dims, acc.data);
  }

  std::vector<int> output_labels(const std::vector<std::vector<int>>& labels, size_t ellipsis_rank) const {
    std::vector<int> out;
    if (explicit_output_) {
      if (output_.ellipsis_at < 0 && ellipsis_rank > 0)
        throw Error("equation '" + equation_ + "': the inputs have ellipsis axes but the output has no '...'");
      for (size_t j = 0; j <= output_.letters.size(); ++j) {
        if (static_cast<int>(j) == output_.ellipsis_at)
          for (size_t e = 0; e < ellipsis_rank; ++e) out.push_back(kEllipsisLabel + static_cast<int>(e));
        if (j < output_.letters.size()) out.push_back(output_.letters[j]);
      }
      return out;
    }
    std::map<int, int> seen;  // letters by ASCII code
    for (const auto& ls : labels)
      for (int l : ls) ++seen[l];
    for (size_t e = 0; e < ellipsis_rank; ++e) out.push_back(kEllipsisLabel + static_cast<int>(e));
    for (auto [l, n] : seen)
      if (l < kEllipsisLabel && n == 1) out.push_back(l);
    return out;
  }

  static std::string label_name(int l) {
    return l >= kEllipsisLabel ? "ellipsis axis " + std::to_string(l - kEllipsisLabel) : "label '" + std::string(1, char(l)) + "'";
  }

  std::string equation_;
  std::vector<Term> terms_;
  Term output_;
  bool explicit_output_ = false;
};

}  // namespace

void register_einsum_kernels(KernelRegistry& r) { r.add("", "Einsum", 12, kLatestOpset, kernel_factory<EinsumKernel>()); }

}  // namespace onnxptq::engine::linear
