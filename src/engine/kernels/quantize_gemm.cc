// The exact integer matrix product behind the integer convolutions and matrix products:
// C (int32) = A (int16) x B (int16). Values are zero-point-free 8-bit numbers, so a pair of
// products fits in int32 and PMADDWD (two int16 products summed into one int32 lane) is exact.
// A is packed as (k, k+1) pairs, B in panels of 16 columns of (k, k+1) pairs; AVX512-VNNI and
// AVX2 kernels (chosen at run time) and a plain one compute the same integers.
#include <algorithm>
#include <cstring>
#include <vector>

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#endif

#include "engine/kernels/quantize.h"
#include "engine/parallel.h"

namespace onnxptq::engine {
namespace {

constexpr int64_t kPanel = 16;  // columns of B per panel
constexpr int kRows = 8;        // rows of A per kernel call (enough independent VNNI chains)

// A's row m as int32 pairs (A[m][2p] in the low half, A[m][2p+1] in the high one).
void pack_a(const int16_t* A, int64_t M, int64_t K, int64_t pairs, int32_t* out) {
  for (int64_t m = 0; m < M; ++m) {
    const int16_t* a = A + m * K;
    for (int64_t p = 0; p < pairs; ++p) {
      auto lo = static_cast<uint16_t>(a[2 * p]);
      auto hi = static_cast<uint16_t>(2 * p + 1 < K ? a[2 * p + 1] : 0);
      out[m * pairs + p] = static_cast<int32_t>(static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16));
    }
  }
}

// Columns [n0, n0 + nb) of B as [pairs][kPanel][2], zero-padded.
void pack_b(const int16_t* B, int64_t N, int64_t K, int64_t pairs, int64_t n0, int64_t nb, int16_t* out) {
  for (int64_t p = 0; p < pairs; ++p) {
    const int16_t* r0 = B + 2 * p * N + n0;
    const int16_t* r1 = 2 * p + 1 < K ? r0 + N : nullptr;
    int16_t* o = out + p * kPanel * 2;
#if defined(__SSE2__)
    if (nb == kPanel && r1) {
      // Interleave two rows of 16 values: (r0[j], r1[j]) pairs.
      for (int h = 0; h < 2; ++h) {
        __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r0 + 8 * h));
        __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r1 + 8 * h));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(o + 16 * h), _mm_unpacklo_epi16(a, b));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(o + 16 * h + 8), _mm_unpackhi_epi16(a, b));
      }
      continue;
    }
#endif
    for (int64_t j = 0; j < kPanel; ++j) {
      o[2 * j] = j < nb ? r0[j] : int16_t{0};
      o[2 * j + 1] = j < nb && r1 ? r1[j] : int16_t{0};
    }
  }
}

// c[r][j] = sum over pairs of a[r] . b[j] for R rows and one panel.
template <int R>
void kernel_plain(const int32_t* a, int64_t pairs, const int16_t* b, int32_t* c) {
  for (int r = 0; r < R; ++r) {
    for (int64_t j = 0; j < kPanel; ++j) c[r * kPanel + j] = 0;
    for (int64_t p = 0; p < pairs; ++p) {
      int32_t av = a[r * pairs + p];
      auto lo = static_cast<int16_t>(av & 0xFFFF), hi = static_cast<int16_t>(static_cast<uint32_t>(av) >> 16);
      const int16_t* bp = b + p * kPanel * 2;
      for (int64_t j = 0; j < kPanel; ++j) c[r * kPanel + j] += lo * bp[2 * j] + hi * bp[2 * j + 1];
    }
  }
}

#if defined(__GNUC__) && defined(__x86_64__)
template <int R>
__attribute__((target("avx2"))) void kernel_avx2(const int32_t* a, int64_t pairs, const int16_t* b, int32_t* c) {
  __m256i acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (int64_t p = 0; p < pairs; ++p) {
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + p * kPanel * 2));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + p * kPanel * 2 + 16));
    for (int r = 0; r < R; ++r) {
      const __m256i av = _mm256_set1_epi32(a[r * pairs + p]);
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(av, b0));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(av, b1));
    }
  }
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + r * kPanel), acc[r][0]);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + r * kPanel + 8), acc[r][1]);
  }
}

// The same with AVX512-VNNI: one VPDPWSSD (pairs multiplied and accumulated) per row and pair.
template <int R>
__attribute__((target("avx512f,avx512vnni"))) void kernel_vnni(const int32_t* a, int64_t pairs, const int16_t* b,
                                                                int32_t* c) {
  __m512i acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_si512();
  for (int64_t p = 0; p < pairs; ++p) {
    const __m512i bv = _mm512_loadu_si512(b + p * kPanel * 2);
    for (int r = 0; r < R; ++r) acc[r] = _mm512_dpwssd_epi32(acc[r], _mm512_set1_epi32(a[r * pairs + p]), bv);
  }
  for (int r = 0; r < R; ++r) _mm512_storeu_si512(c + r * kPanel, acc[r]);
}

bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
}
bool has_vnni() {
  static const bool yes = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vnni");
  return yes;
}
#endif

template <int R>
void kernel(const int32_t* a, int64_t pairs, const int16_t* b, int32_t* c) {
#if defined(__GNUC__) && defined(__x86_64__)
  if (has_vnni()) return kernel_vnni<R>(a, pairs, b, c);
  if (has_avx2()) {
    // Four rows at most: two accumulators per row fill the 16 YMM registers.
    if constexpr (R > 4) {
      kernel_avx2<4>(a, pairs, b, c);
      return kernel_avx2<R - 4>(a + 4 * pairs, pairs, b, c + 4 * kPanel);
    } else {
      return kernel_avx2<R>(a, pairs, b, c);
    }
  }
#endif
  kernel_plain<R>(a, pairs, b, c);
}

void kernel_rows(int rows, const int32_t* a, int64_t pairs, const int16_t* b, int32_t* c) {
  switch (rows) {
    case 8: return kernel<8>(a, pairs, b, c);
    case 7: return kernel<7>(a, pairs, b, c);
    case 6: return kernel<6>(a, pairs, b, c);
    case 5: return kernel<5>(a, pairs, b, c);
    case 4: return kernel<4>(a, pairs, b, c);
    case 3: return kernel<3>(a, pairs, b, c);
    case 2: return kernel<2>(a, pairs, b, c);
    default: return kernel<1>(a, pairs, b, c);
  }
}

}  // namespace

void gemm_s16(int threads, int64_t M, int64_t N, int64_t K, const int16_t* A, const int16_t* B, int32_t* C) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    std::fill(C, C + M * N, 0);
    return;
  }
  int64_t pairs = (K + 1) / 2;
  std::vector<int32_t> a(M * pairs);
  pack_a(A, M, K, pairs, a.data());
  int64_t panels = (N + kPanel - 1) / kPanel;
  int64_t work = std::max<int64_t>(1, M * K * kPanel);
  parallel_for(threads, panels, std::max<int64_t>(1, (1 << 20) / work), [&](int64_t begin, int64_t end) {
    std::vector<int16_t> b(pairs * kPanel * 2);
    int32_t c[kRows * kPanel];
    for (int64_t panel = begin; panel < end; ++panel) {
      int64_t n0 = panel * kPanel, nb = std::min(kPanel, N - n0);
      pack_b(B, N, K, pairs, n0, nb, b.data());
      for (int64_t m0 = 0; m0 < M; m0 += kRows) {
        int rows = static_cast<int>(std::min<int64_t>(kRows, M - m0));
        kernel_rows(rows, a.data() + m0 * pairs, pairs, b.data(), c);
        for (int r = 0; r < rows; ++r) std::memcpy(C + (m0 + r) * N + n0, c + r * kPanel, nb * sizeof(int32_t));
      }
    }
  });
}

}  // namespace onnxptq::engine
