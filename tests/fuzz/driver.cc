// The main of every fuzz target: runs libFuzzer's entry point (LLVMFuzzerTestOneInput) without
// libFuzzer, so the targets build with g++, in the release build (a crash ends the run) and in
// the sanitizer build (so does any memory error or undefined behaviour). First every file given (the
// seed corpus, whose crashes-turned-regression-tests run this way), then for --seconds a seeded
// mutation loop over them. The sanitizers end the process on the first report; the input being
// run is written to a file before each call, so a crash leaves its reproducer behind.
//
//   fuzz_TARGET [--runs N] [--seconds N] [--seed S] [--out DIR] FILE_OR_FOLDER...
//
// --runs bounds the mutated inputs (the same seed gives the same inputs on any machine), --seconds
// the time; the loop ends at the first bound reached.
//   fuzz_TARGET CRASH_FILE      reruns one input
#include <sanitizer/common_interface_defs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

// A single allocation over 2 GB from an input of a few kilobytes is a missing size check: ASAN
// reports it with its stack instead of the machine running out of memory. So is a process that
// grows past 4 GB. handle_abort: a target's own check (abort) gets a stack and the reproducer too.
#ifdef __SANITIZE_ADDRESS__
extern "C" const char* __asan_default_options() {
  return "max_allocation_size_mb=2048:hard_rss_limit_mb=4096:handle_abort=1";
}
extern "C" const char* __ubsan_default_options() { return "print_stacktrace=1"; }
#endif

namespace {

using Bytes = std::vector<uint8_t>;

constexpr unsigned kTimeoutSeconds = 30;  // one input running longer is a finding (a hang)
std::string g_reproduce;                  // the command that reruns the input being run

void print_reproduce() { fprintf(stderr, "fuzz: reproduce with: %s\n", g_reproduce.c_str()); }

void on_timeout(int) {
  static const char message[] = "fuzz: timeout: one input ran too long\n";
  (void)!write(STDERR_FILENO, message, sizeof message - 1);
  print_reproduce();  // not async-signal-safe, but the process ends here anyway
  _exit(70);
}

Bytes read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

void write_file(const fs::path& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// Runs one input; an exception other than the target's expected ones is a finding.
void run(const Bytes& input, const std::string& reproduce) {
  g_reproduce = reproduce;
  alarm(kTimeoutSeconds);
  try {
    LLVMFuzzerTestOneInput(input.data(), input.size());
  } catch (const std::exception& e) {
    fprintf(stderr, "fuzz: uncaught exception: %s\n", e.what());
    print_reproduce();
    exit(1);
  }
  alarm(0);
}

// Numbers at the edges of the integer types, and decimal ones for text headers.
constexpr uint64_t kInteresting[] = {0, 1, 2, 0x7f, 0x80, 0xff, 0x7fff, 0x8000, 0xffff, 0x7fffffff, 0x80000000,
                                     0xffffffff, 0x100000000, 0x7fffffffffffffff, 0x8000000000000000,
                                     0xffffffffffffffff};
const char* const kInterestingText[] = {"0", "-1", "1", "65536", "2147483648", "4294967296",
                                        "9223372036854775807", "18446744073709551616", "-9223372036854775808"};

class Mutator {
 public:
  Mutator(const std::vector<Bytes>& corpus, uint64_t seed, size_t max_size)
      : corpus_(corpus), rng_(seed), max_size_(max_size) {}

  // A corpus entry with one to four mutations.
  Bytes next() {
    Bytes b = corpus_[below(corpus_.size())];
    for (size_t n = 1 + below(4); n > 0; --n) mutate(b);
    if (b.size() > max_size_) b.resize(max_size_);
    return b;
  }

 private:
  size_t below(size_t n) { return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

  void mutate(Bytes& b) {
    const Bytes& other = corpus_[below(corpus_.size())];
    size_t at = below(b.size());
    switch (below(9)) {
      case 0:  // flip a bit
        if (!b.empty()) b[at] ^= uint8_t(1u << below(8));
        break;
      case 1:  // a random byte
        if (!b.empty()) b[at] = uint8_t(below(256));
        break;
      case 2: {  // an interesting integer, 1 to 8 bytes little-endian
        uint64_t v = kInteresting[below(std::size(kInteresting))];
        for (size_t i = 0, width = size_t{1} << below(4); i < width && at + i < b.size(); ++i)
          b[at + i] = uint8_t(v >> (8 * i));
        break;
      }
      case 3: {  // an interesting decimal in place of a run of digits
        auto digit = [](uint8_t c) { return c >= '0' && c <= '9'; };
        auto start = std::find_if(b.begin() + at, b.end(), digit);
        if (start == b.end()) break;
        auto end = std::find_if_not(start, b.end(), digit);
        std::string text = kInterestingText[below(std::size(kInterestingText))];
        b.insert(b.erase(start, end), text.begin(), text.end());
        break;
      }
      case 4:  // erase a range
        b.erase(b.begin() + at, b.begin() + at + below(std::min<size_t>(b.size() - at, 16) + 1));
        break;
      case 5: {  // insert random bytes
        Bytes r(1 + below(8));
        for (uint8_t& c : r) c = uint8_t(below(256));
        b.insert(b.begin() + at, r.begin(), r.end());
        break;
      }
      case 6:  // truncate
        b.resize(at);
        break;
      case 7: {  // splice: this one's head, another's tail
        size_t from = below(other.size());
        b.resize(at);
        b.insert(b.end(), other.begin() + from, other.end());
        break;
      }
      default: {  // a chunk of another entry over this one
        size_t from = below(other.size()), n = std::min({other.size() - from, b.size() - at, 1 + below(64)});
        std::copy_n(other.begin() + from, n, b.begin() + at);
        break;
      }
    }
  }

  const std::vector<Bytes>& corpus_;
  std::mt19937_64 rng_;
  size_t max_size_;
};

int usage(const char* program) {
  fprintf(stderr, "usage: %s [--runs N] [--seconds N] [--seed S] [--out DIR] FILE_OR_FOLDER...\n", program);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 0;
  uint64_t runs_wanted = 0;
  uint64_t seed = 1;
  fs::path out = ".";
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 < argc && a == "--seconds") {
      seconds = std::stod(argv[++i]);
    } else if (i + 1 < argc && a == "--runs") {
      runs_wanted = std::stoull(argv[++i]);
    } else if (i + 1 < argc && a == "--seed") {
      seed = std::stoull(argv[++i]);
    } else if (i + 1 < argc && a == "--out") {
      out = argv[++i];
    } else if (a.starts_with("-")) {
      return usage(argv[0]);
    } else if (fs::is_directory(a)) {
      for (const auto& e : fs::directory_iterator(a))
        if (e.is_regular_file()) files.push_back(e.path());
    } else {
      files.push_back(a);
    }
  }
  if (files.empty()) return usage(argv[0]);
  std::sort(files.begin(), files.end());
#ifdef __SANITIZE_ADDRESS__
  __sanitizer_set_death_callback(print_reproduce);
#endif
  signal(SIGALRM, on_timeout);

  std::vector<Bytes> corpus;
  size_t largest = 0;
  for (const fs::path& f : files) {
    corpus.push_back(read_file(f));
    largest = std::max(largest, corpus.back().size());
    run(corpus.back(), std::string(argv[0]) + " " + f.string());
  }
  fprintf(stderr, "fuzz: %zu corpus files ran\n", files.size());
  if (seconds <= 0 && runs_wanted == 0) return 0;

  fs::create_directories(out);
  fs::path current = out / ("crash-" + fs::path(argv[0]).filename().string());
  std::string reproduce = std::string(argv[0]) + " " + current.string();
  Mutator mutator(corpus, seed, std::max<size_t>(2 * largest, 4096));
  fprintf(stderr, "fuzz: mutating (seed %llu, at most %llu inputs and %g s); an input that ends this process stays in %s\n",
          static_cast<unsigned long long>(seed), static_cast<unsigned long long>(runs_wanted), seconds, current.c_str());
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds > 0 ? seconds : 1e9);
  size_t runs = 0;
  for (; (runs_wanted == 0 || runs < runs_wanted) && std::chrono::steady_clock::now() < end; ++runs) {
    Bytes input = mutator.next();
    write_file(current, input);
    run(input, reproduce);
  }
  fs::remove(current);  // nothing crashed
  fprintf(stderr, "fuzz: %zu mutated inputs ran, no finding\n", runs);
  return 0;
}
