// The processes mpirun started (MPI), sharing the calibration samples of calibrate, quantize and
// sensitivity (onnxptq/sample_ranks.h). MPI starts only when a launcher started more than one
// process; built without MPI, onnxptq refuses to run under such a launcher rather than have each
// process do all the work.
#pragma once

#include <memory>
#include <string>

#include "onnxptq/sample_ranks.h"

namespace onnxptq::cli {

// The processes a launcher says it started: OMPI_COMM_WORLD_SIZE (OpenMPI's mpirun), PMI_SIZE
// (MPICH's, Slurm's srun); 1 without one.
int launcher_ranks();

// Under a launcher of more than one process, starts MPI for `command` (Error for a command that
// does not share samples, or when onnxptq was built without MPI). Nothing otherwise.
void start_ranks(const std::string& command);

// The ranks, or null when this process is alone.
std::shared_ptr<SampleRanks> command_ranks();

// This process's rank (0 when alone): only rank 0 writes files and prints.
int command_rank();

// Ends MPI normally (MPI_Finalize), when started.
void finish_ranks();

// After an error on this rank: ends every rank with `code` (MPI_Abort), so that no other rank
// waits for this one; returns when MPI was not started.
void abort_ranks(int code);

}  // namespace onnxptq::cli
