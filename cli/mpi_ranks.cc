#include "cli/mpi_ranks.h"

#include <climits>
#include <cstdlib>
#include <set>
#include <vector>

#include "onnxptq/error.h"

#ifdef ONNXPTQ_WITH_MPI
#include <mpi.h>
#endif

namespace onnxptq::cli {
namespace {

std::shared_ptr<SampleRanks>& ranks_slot() {
  static std::shared_ptr<SampleRanks> ranks;
  return ranks;
}

#ifdef ONNXPTQ_WITH_MPI
// MPI_COMM_WORLD as SampleRanks: the statistics' sizes, then their bytes, gathered on every rank
// (MPI_Allgather, MPI_Allgatherv; MPI 3.1, sections 5.7 and 5.7.1). Called from the main thread
// only (MPI_THREAD_FUNNELED).
class MpiRanks : public SampleRanks {
 public:
  MpiRanks() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  std::vector<std::string> all_gather(const std::string& mine) override {
    long long own = static_cast<long long>(mine.size());
    std::vector<long long> sizes(static_cast<size_t>(size_));
    check(MPI_Allgather(&own, 1, MPI_LONG_LONG, sizes.data(), 1, MPI_LONG_LONG, MPI_COMM_WORLD), "MPI_Allgather");
    // MPI counts are ints: the bytes of every rank together stay under 2 GB.
    std::vector<int> counts, displacements;
    long long total = 0;
    for (long long n : sizes) {
      if (total + n > INT_MAX)
        throw Error("calibration over " + std::to_string(size_) + " ranks: their statistics together exceed 2 GB");
      counts.push_back(static_cast<int>(n));
      displacements.push_back(static_cast<int>(total));
      total += n;
    }
    std::string all(static_cast<size_t>(total), '\0');
    check(MPI_Allgatherv(mine.data(), static_cast<int>(own), MPI_BYTE, all.data(), counts.data(), displacements.data(),
                         MPI_BYTE, MPI_COMM_WORLD),
          "MPI_Allgatherv");
    std::vector<std::string> out;
    for (int r = 0; r < size_; ++r) out.push_back(all.substr(static_cast<size_t>(displacements[r]), counts[r]));
    return out;
  }

 private:
  static void check(int status, const char* call) {
    if (status != MPI_SUCCESS) throw Error(std::string(call) + " failed (MPI error " + std::to_string(status) + ")");
  }
  int rank_ = 0, size_ = 1;
};

bool mpi_started = false;
#endif

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : 0;
}

}  // namespace

int launcher_ranks() {
  int n = env_int("OMPI_COMM_WORLD_SIZE");
  if (n <= 0) n = env_int("PMI_SIZE");
  return n > 0 ? n : 1;
}

void start_ranks(const std::string& command) {
  const int n = launcher_ranks();
  if (n <= 1) return;
  static const std::set<std::string> sharing = {"calibrate", "quantize", "sensitivity"};
  if (!sharing.count(command))
    throw Error("onnxptq " + command + " does not share its work over MPI ranks, and " + std::to_string(n) +
                " processes were started: run it without mpirun (calibrate, quantize and sensitivity share samples)");
#ifdef ONNXPTQ_WITH_MPI
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
    throw Error("MPI_Init_thread failed: cannot join the other " + std::to_string(n - 1) + " ranks");
  mpi_started = true;
  ranks_slot() = std::make_shared<MpiRanks>();
#else
  throw Error("this onnxptq was built without MPI (libopenmpi-dev was not found), and " + std::to_string(n) +
              " processes were started: each would calibrate every sample alone; rebuild with MPI, or run "
              "calibrate --shard i/N --save-stats in each job and merge-stats");
#endif
}

std::shared_ptr<SampleRanks> command_ranks() { return ranks_slot(); }

int command_rank() { return ranks_slot() ? ranks_slot()->rank() : 0; }

void finish_ranks() {
#ifdef ONNXPTQ_WITH_MPI
  if (mpi_started) MPI_Finalize();
  mpi_started = false;
#endif
}

void abort_ranks(int code) {
#ifdef ONNXPTQ_WITH_MPI
  if (mpi_started) MPI_Abort(MPI_COMM_WORLD, code);
#endif
  (void)code;
}

}  // namespace onnxptq::cli
