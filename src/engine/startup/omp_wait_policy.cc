// Linked into onnxptq's executables (the command, the tests), not into the library: before any
// shared library initialises, OpenMP threads are told to sleep, not spin, while they wait for work.
//
// GNU libgomp reads OMP_WAIT_POLICY once, when it is loaded, and by default a thread that
// finishes its share of a parallel loop spins for a while before sleeping. On a machine whose
// cores are busy with other work (a compiler, another model) the spinning threads take the cores
// the working ones need, and every parallel loop waits for time slices: the PP-OCRv4 detector ran
// 2.2x slower spinning than sleeping beside two compilers (docs/benchmarks.md, "A busy machine").
// A user's own OMP_WAIT_POLICY or GOMP_SPINCOUNT is kept.
//
// Functions in the executable's .preinit_array run before the initialisers of the shared
// libraries it loads (System V ABI, "Initialization and Termination Functions"), so libgomp sees
// the variable; the ABI forbids the section in shared objects, hence a file of its own.
#include <cstdlib>

namespace {

void prefer_passive_omp_wait(int, char**, char**) {
  if (!std::getenv("OMP_WAIT_POLICY") && !std::getenv("GOMP_SPINCOUNT")) setenv("OMP_WAIT_POLICY", "passive", 0);
}

[[gnu::section(".preinit_array"), gnu::used]] void (*const preinit_entry)(int, char**, char**) = prefer_passive_omp_wait;

}  // namespace
