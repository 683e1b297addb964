// Splitting work over threads. The engine uses OpenMP, the runtime oneDNN uses too, so kernels
// and oneDNN primitives share one pool of threads instead of competing.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <thread>
#include <vector>

namespace onnxptq::engine {

// Calls fn(begin, end) over [0, n) in up to `threads` contiguous chunks of at least `min_chunk`
// items. fn must not throw: check inputs before splitting work.
template <class F>
void parallel_for(int threads, int64_t n, int64_t min_chunk, F&& fn) {
  int64_t chunks = std::min<int64_t>(threads, n / std::max<int64_t>(min_chunk, 1));
  if (chunks <= 1) {
    if (n > 0) fn(int64_t{0}, n);
    return;
  }
#pragma omp parallel for num_threads(static_cast<int>(chunks)) schedule(static, 1)
  for (int64_t c = 0; c < chunks; ++c) fn(n * c / chunks, n * (c + 1) / chunks);
}

// The sum of fn(begin, end) (a double) over [0, n) cut into chunks of `chunk` items, run on up to
// `threads` threads and added in chunk order: the total is the same for any thread count.
template <class F>
double parallel_sum(int threads, int64_t n, int64_t chunk, F&& fn) {
  if (n <= chunk) return n > 0 ? fn(int64_t{0}, n) : 0.0;
  const int64_t chunks = (n + chunk - 1) / chunk;
  std::vector<double> partial(static_cast<size_t>(chunks));
  parallel_for(threads, chunks, 1, [&](int64_t first, int64_t last) {
    for (int64_t c = first; c < last; ++c) partial[static_cast<size_t>(c)] = fn(c * chunk, std::min(n, (c + 1) * chunk));
  });
  double sum = 0;
  for (double p : partial) sum += p;
  return sum;
}

// fn(i) for every i in [0, n), on `workers` threads of their own (the caller's among them), each
// taking the next index as it finishes one: samples run through a session, say, whose runs may
// differ in length. The error of the first index that failed is thrown once all are done.
template <class F>
void for_each_on_workers(size_t n, int workers, F&& fn) {
  if (workers <= 1 || n <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::vector<std::exception_ptr> errors(n);
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) {
      try {
        fn(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  std::vector<std::thread> threads;
  for (int w = 1; w < workers; ++w) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

// The most threads a session (or a calibration's workers) may be given: thread counts are user
// input, and a hundred thousand threads exhaust the process before any work is done.
constexpr int kMaxThreads = 1024;

// The cores this process can run on (its CPU affinity, within a cgroup CPU quota), as the default
// thread count of a session.
int hardware_threads();

}  // namespace onnxptq::engine
