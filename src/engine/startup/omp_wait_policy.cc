// Linked into onnxptq's executables (the command, the tests), not into the library: OpenMP threads
// spin only briefly (GOMP_SPINCOUNT=1000) before they sleep while they wait for work.
//
// GNU libgomp reads GOMP_SPINCOUNT once, when it is loaded, and by default a thread that finishes
// its share of a parallel loop spins 300,000 times before sleeping. On a machine whose cores are
// busy with other work (a compiler, another model) the spinning threads take the cores the working
// ones need, and every parallel loop waits for time slices. Threads that never spin
// (OMP_WAIT_POLICY=passive) pay a futex wake-up at every parallel loop instead, which on a quiet
// machine made models of many small layers 1.5 to 3 times slower (EfficientNet-B0, MobileNetV2);
// a short spin covers the gap between one layer's loop and the next and costs little beside other
// work (docs/benchmarks.md, "A busy machine"). A user's own OMP_WAIT_POLICY or GOMP_SPINCOUNT is
// kept.
//
// The variable has to be in the environment before libgomp initialises, which is before main.
// Functions in the executable's .preinit_array run first (System V ABI, "Initialization and
// Termination Functions"), but a setenv there is lost: the C library's own initialiser, which runs
// after them, points `environ` back at the array the kernel passed. So the function executes the
// program again, unchanged but for the one variable: a few milliseconds once per process. Under
// Valgrind (its preload library in LD_PRELOAD) /proc/self/exe would name Valgrind itself, so the
// program runs on as it is there. The ABI forbids the section in shared objects, hence a file of
// its own.
#include <unistd.h>

#include <cstring>

namespace {

bool has_entry(char** envp, const char* prefix) {
  for (char** e = envp; *e; ++e)
    if (std::strncmp(*e, prefix, std::strlen(prefix)) == 0) return true;
  return false;
}

bool under_valgrind(char** envp) {
  for (char** e = envp; *e; ++e)
    if (std::strncmp(*e, "LD_PRELOAD=", 11) == 0 && std::strstr(*e, "vgpreload")) return true;
  return false;
}

void prefer_short_omp_spin(int, char** argv, char** envp) {
  if (!argv || !envp || has_entry(envp, "OMP_WAIT_POLICY=") || has_entry(envp, "GOMP_SPINCOUNT=") ||
      under_valgrind(envp))
    return;
  // Static storage: the C library is not initialised yet, so no allocation.
  static char* with_policy[4096];
  size_t n = 0;
  while (envp[n]) ++n;
  if (n + 2 > sizeof(with_policy) / sizeof(with_policy[0])) return;
  std::memcpy(with_policy, envp, n * sizeof(char*));
  static char policy[] = "GOMP_SPINCOUNT=1000";
  with_policy[n] = policy;
  with_policy[n + 1] = nullptr;
  execve("/proc/self/exe", argv, with_policy);
  // execve returned: no /proc (a minimal chroot); the program runs on with libgomp's default.
}

[[gnu::section(".preinit_array"), gnu::used]] void (*const preinit_entry)(int, char**, char**) = prefer_short_omp_spin;

}  // namespace
