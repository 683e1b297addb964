// Calibration over several processes (data parallelism): each process, a rank, runs a contiguous
// share of the calibration samples with its own threads, and after each pass over the data the
// ranks' statistics are merged as the threads' are, so the ranges are the bytes one process
// gives. The `onnxptq` command implements this over MPI (mpirun -np N); implement it to use
// another transport. Statistics files of shares run apart (calibrate_shard, merge_shards) need
// no transport at all.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace onnxptq {

class SampleRanks {
 public:
  virtual ~SampleRanks() = default;
  virtual int rank() const = 0;  // this process, 0 <= rank() < size()
  virtual int size() const = 0;  // the processes sharing the samples
  // Every rank's bytes, in rank order, on every rank (MPI_Allgatherv); each rank gives its own.
  // Every rank calls it the same number of times, in the same order.
  virtual std::vector<std::string> all_gather(const std::string& mine) = 0;
};

// The samples of rank `rank` of `ranks` out of `samples`: [begin, end), contiguous and in rank
// order, sizes differing by at most one (the first `samples % ranks` ranks take one more).
struct SampleShare {
  size_t begin = 0;
  size_t end = 0;
};
SampleShare sample_share(size_t samples, int rank, int ranks);

}  // namespace onnxptq
