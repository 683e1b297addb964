// Merging what workers and ranks kept of each tensor, and its bytes between ranks and in shard files.
#include "calib/stats_bytes.h"
#include "calib/tensor_stats_detail.h"

namespace onnxptq::calib {

void merge_worker_stats(TensorStats& into, TensorStats& from) {
  into.seen = into.seen || from.seen;
  into.minmax.merge(from.minmax);
  into.best_pos.merge(from.best_pos);
  if (into.grid.empty())
    into.grid = std::move(from.grid);
  else
    into.grid.merge(from.grid);
  from.grid = GridHistogram();
  if (into.error_sums.size() < from.error_sums.size()) into.error_sums.resize(from.error_sums.size());
  for (size_t c = 0; c < from.error_sums.size(); ++c) into.error_sums[c].merge(from.error_sums[c]);
}

std::vector<TensorStats> merge_workers(std::vector<std::vector<TensorStats>>& workers, size_t tensors) {
  std::vector<TensorStats> merged(tensors);
  for (size_t i = 0; i < tensors; ++i)
    for (auto& w : workers) merge_worker_stats(merged[i], w[i]);
  if (workers.size() == 1)
    for (size_t i = 0; i < tensors; ++i) merged[i].early = std::move(workers[0][i].early);
  return merged;
}

namespace {

void write_tensor(const TensorStats& t, StatsWriter& out) {
  out.u8(t.seen);
  out.f64(t.minmax.min);
  out.f64(t.minmax.max);
  out.f64(t.minmax.max_abs);
  out.varint(t.minmax.per_sample.size());
  for (const auto& [sample, r] : t.minmax.per_sample) {
    out.varint(sample);
    out.f64(r.lo);
    out.f64(r.hi);
  }
  out.varint(t.best_pos.size());
  for (const auto& [sample, pos] : t.best_pos) {
    out.varint(sample);
    out.i64(pos);
  }
  t.grid.write(out);
  out.varint(t.error_sums.size());
  for (const ExactSum& e : t.error_sums) e.write(out);
}

TensorStats read_tensor(StatsReader& in) {
  TensorStats t;
  const uint8_t seen = in.u8();
  if (seen > 1) in.fail("a tensor's flag " + std::to_string(seen));
  t.seen = seen;
  t.minmax.min = in.f64();
  t.minmax.max = in.f64();
  t.minmax.max_abs = in.f64();
  for (size_t n = in.count(17); n > 0; --n) {
    const size_t sample = in.varint();
    Range r;
    r.lo = in.f64();
    r.hi = in.f64();
    if (!t.minmax.per_sample.emplace(sample, r).second) in.fail("sample " + std::to_string(sample) + " twice");
  }
  for (size_t n = in.count(9); n > 0; --n) {
    const size_t sample = in.varint();
    const int64_t pos = in.i64();
    if (pos < -2000 || pos > 2000) in.fail("a power-of-two position " + std::to_string(pos));
    if (!t.best_pos.emplace(sample, static_cast<int>(pos)).second)
      in.fail("sample " + std::to_string(sample) + " twice");
  }
  t.grid = GridHistogram::read(in);
  t.error_sums.resize(in.count());
  for (ExactSum& e : t.error_sums) e = ExactSum::read(in);
  return t;
}

}  // namespace

void write_share_stats(const ShareStats& share, StatsWriter& out) {
  out.varint(share.samples);
  out.varint(share.skipped.size());
  for (size_t s : share.skipped) out.varint(s);
  out.varint(share.stats.size());
  for (const TensorStats& t : share.stats) write_tensor(t, out);
}

ShareStats read_share_stats(StatsReader& in, size_t tensors) {
  ShareStats share;
  share.samples = in.varint();
  share.skipped.resize(in.count());
  for (size_t& s : share.skipped) s = in.varint();
  const size_t n = in.count();
  if (n != tensors) in.fail(std::to_string(n) + " tensors where " + std::to_string(tensors) + " were calibrated");
  share.stats.reserve(n);
  for (size_t i = 0; i < n; ++i) share.stats.push_back(read_tensor(in));
  if (!in.at_end()) in.fail("bytes after the last tensor");
  return share;
}

}  // namespace onnxptq::calib
