// Linear layers of a few rows (decode steps of 1-8 requests): out[M, N] = x[M, K] @ w[N, K]^T (+ bias,
// then relu if asked), float32 or bfloat16 (summed in float32, rounded once: bf16 pairs by AVX512-BF16's
// dot product where the CPU has it), for the weight as the model holds it (row-major [out, in]).
//
// Such a GEMM is bound by reading the weight once: every weight row is loaded into registers once and
// multiplied there with all M input rows. Each thread takes one contiguous range of output features, so
// it reads one linear run of the weight; blocks of R weight rows keep R x M independent accumulators in
// flight (FMA latency), sized to the vector registers.
//
// Semantics are torch.nn.functional.linear's (in bfloat16 up to its rounding). Built with the attention kernels by kernels/cpu_kernels.py
// (the op is torch.ops.enginetui_cpu.skinny_linear); core/worker/cpu_linear.py decides where it runs.

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif



namespace {

// The CPU's widest vectors, never wider (GCC would keep arrays of wider ones on the stack).
#if defined(__AVX512F__)
constexpr int kLanes = 16;
constexpr int kAccumulators = 24;  // of 32 vector registers: the rest hold input rows or weight rows, and one more
#elif defined(__AVX__)
constexpr int kLanes = 8;
constexpr int kAccumulators = 8;  // of 16
#else
constexpr int kLanes = 4;
constexpr int kAccumulators = 8;
#endif
constexpr int kMaxRows = 8;
// Bytes of float32 weight a thread asks for ahead of its loads, over its R rows together (R streams, more than the hardware
// prefetchers follow at full speed), into L2 only: a request into L1 holds one of L1's few miss buffers until its line
// arrives, which slowed the stream (the hardware moves the lines from L2 to L1 in time). docs/speed.md has the figures.
constexpr int kPrefetchL2Bytes = 32768;

typedef float vfloat __attribute__((vector_size(kLanes * sizeof(float))));

inline vfloat load(const float* p) {
  vfloat v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// A load kept in a register: GCC would otherwise fold it into each multiply-add that uses it, loading it again for
// every accumulator (the load ports, not the multiply-adds, then bound a block of many rows).
template <typename V>
inline V in_register(V v) {
  asm("" : "+v"(v));
  return v;
}

inline float lane_sum(vfloat v) {
#if defined(__AVX512F__)
  return _mm512_reduce_add_ps(v);
#else
  float s = 0.f;
  for (int i = 0; i < kLanes; ++i) s += v[i];
  return s;
#endif
}

// The weight rows of a block: as many as keep R x M accumulators in the vector registers, at most 8.
template <int M>
constexpr int block_rows() {
  return std::max(1, std::min(8, kAccumulators / M));
}

// Weight rows [n, n + R) against every input row.
template <int M, int R>
inline void weight_rows(const float* x, int64_t ldx, const float* w, int64_t K, int64_t n, const float* bias, bool relu,
                        float* out, int64_t ldo) {
  vfloat acc[R][M];
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < M; ++m) acc[r][m] = vfloat{};
  constexpr int64_t far = kPrefetchL2Bytes / R / sizeof(float) / kLanes * kLanes;
  const float* wn = w + n * K;
  int64_t k = 0;
  for (; k + kLanes <= K; k += kLanes) {
    for (int r = 0; r < R; ++r) {
      __builtin_prefetch(wn + r * K + k + far, 0, 2);
    }
    if constexpr (M <= R) {  // the input rows stay in registers, each weight row loaded in turn
      vfloat xv[M];
      for (int m = 0; m < M; ++m) xv[m] = in_register(load(x + m * ldx + k));
      for (int r = 0; r < R; ++r) {
        const vfloat wv = in_register(load(wn + r * K + k));
        for (int m = 0; m < M; ++m) acc[r][m] += wv * xv[m];
      }
    } else {  // the weight rows stay in registers, each input row loaded in turn
      vfloat wv[R];
      for (int r = 0; r < R; ++r) wv[r] = in_register(load(wn + r * K + k));
      for (int m = 0; m < M; ++m) {
        const vfloat xv = in_register(load(x + m * ldx + k));
        for (int r = 0; r < R; ++r) acc[r][m] += wv[r] * xv;
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int m = 0; m < M; ++m) {
      float s = lane_sum(acc[r][m]);
      for (int64_t kk = k; kk < K; ++kk) s += wn[r * K + kk] * x[m * ldx + kk];
      if (bias != nullptr) s += bias[n + r];
      out[m * ldo + n + r] = relu ? std::max(s, 0.f) : s;
    }
  }
}

using bf16 = c10::BFloat16;

// bf16 streams fewer weight rows at once than float32, each asked for further ahead: a bf16 row is half the bytes,
// so R interleaved rows crowd the same pages with more streams than the prefetchers follow (from memory on an AMX
// Xeon, R = 8 read 15-20 GB/s where one or two rows read 21-25). One input row sums U runs of 32 in flight instead.
template <int M>
constexpr int bf16_block_rows() {
  return M == 1 ? 1 : 2;
}
template <int M>
constexpr int bf16_unroll() {
  return M == 1 ? 8 : M <= 3 ? 2 : 1;
}
constexpr int kPrefetchBf16RowBytes = 16384;

// Weight rows [n, n + R) against every input row: each row's bf16 pairs against every input row's, summed in float32.
template <int M, int R>
inline void weight_rows(const bf16* x, int64_t ldx, const bf16* w, int64_t K, int64_t n, const bf16* bias, bool relu,
                        bf16* out, int64_t ldo) {
  float sums[R][M] = {};
  const bf16* wn = w + n * K;
  int64_t k = 0;
#if defined(__AVX512BF16__)
  constexpr int U = bf16_unroll<M>();
  constexpr int64_t far = kPrefetchBf16RowBytes / sizeof(bf16);
  __m512 acc[R][M][U];
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < M; ++m)
      for (int u = 0; u < U; ++u) acc[r][m][u] = _mm512_setzero_ps();
  auto step = [&](int64_t kk, int u) {
    __m512bh xv[M];
    for (int m = 0; m < M; ++m) xv[m] = in_register(reinterpret_cast<__m512bh>(_mm512_loadu_si512(x + m * ldx + kk)));
    for (int r = 0; r < R; ++r) {
      const __m512bh wv = in_register(reinterpret_cast<__m512bh>(_mm512_loadu_si512(wn + r * K + kk)));
      for (int m = 0; m < M; ++m) acc[r][m][u] = _mm512_dpbf16_ps(acc[r][m][u], wv, xv[m]);
    }
  };
  for (; k + 32 * U <= K; k += 32 * U) {
    for (int r = 0; r < R; ++r)
      for (int u = 0; u < U; ++u) __builtin_prefetch(wn + r * K + k + 32 * u + far, 0, 2);
    for (int u = 0; u < U; ++u) step(k + 32 * u, u);
  }
  for (; k + 32 <= K; k += 32) step(k, 0);
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < M; ++m) {
      __m512 total = acc[r][m][0];
      for (int u = 1; u < U; ++u) total = _mm512_add_ps(total, acc[r][m][u]);
      sums[r][m] = _mm512_reduce_add_ps(total);
    }
#endif
  for (int r = 0; r < R; ++r) {
    for (int m = 0; m < M; ++m) {
      float s = sums[r][m];
      for (int64_t kk = k; kk < K; ++kk) s += float(wn[r * K + kk]) * float(x[m * ldx + kk]);
      if (bias != nullptr) s += float(bias[n + r]);
      out[m * ldo + n + r] = bf16(relu ? std::max(s, 0.f) : s);
    }
  }
}

template <int M, typename T>
void skinny(const T* x, int64_t ldx, const T* w, int64_t N, int64_t K, const T* bias, bool relu, T* out, int64_t ldo) {
  constexpr int R = std::is_same_v<T, bf16> ? bf16_block_rows<M>() : block_rows<M>();
  const int64_t blocks = N / R;
  // grain: about 64 KiB of weight per task, so that small layers stay on one thread
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 14) / (R * K));
  at::parallel_for(0, blocks, grain, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) weight_rows<M, R>(x, ldx, w, K, b * R, bias, relu, out, ldo);
  });
  for (int64_t n = blocks * R; n < N; ++n) weight_rows<M, 1>(x, ldx, w, K, n, bias, relu, out, ldo);
}

template <typename T>
void skinny_rows(int64_t M, const T* x, int64_t ldx, const T* w, int64_t N, int64_t K, const T* b, bool relu, T* out) {
  switch (M) {
    case 1: skinny<1>(x, ldx, w, N, K, b, relu, out, N); break;
    case 2: skinny<2>(x, ldx, w, N, K, b, relu, out, N); break;
    case 3: skinny<3>(x, ldx, w, N, K, b, relu, out, N); break;
    case 4: skinny<4>(x, ldx, w, N, K, b, relu, out, N); break;
    case 5: skinny<5>(x, ldx, w, N, K, b, relu, out, N); break;
    case 6: skinny<6>(x, ldx, w, N, K, b, relu, out, N); break;
    case 7: skinny<7>(x, ldx, w, N, K, b, relu, out, N); break;
    default: skinny<8>(x, ldx, w, N, K, b, relu, out, N); break;
  }
}

at::Tensor skinny_linear(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                         bool relu) {
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2, "skinny_linear: x [M, K] and weight [N, K]");
  const auto dtype = x.scalar_type();
  TORCH_CHECK((dtype == at::kFloat || dtype == at::kBFloat16) && weight.scalar_type() == dtype,
              "skinny_linear: float32 or bfloat16, x and weight alike");
  const int64_t M = x.size(0), K = x.size(1), N = weight.size(0);
  TORCH_CHECK(weight.size(1) == K, "skinny_linear: x has ", K, " features, the weight ", weight.size(1));
  TORCH_CHECK(M >= 1 && M <= kMaxRows, "skinny_linear: 1 to ", kMaxRows, " rows, got ", M);
  TORCH_CHECK(x.stride(1) == 1 && weight.is_contiguous(), "skinny_linear: rows must be contiguous");
  const bool has_bias = bias.has_value() && bias->defined();
  if (has_bias)
    TORCH_CHECK(bias->scalar_type() == dtype && bias->is_contiguous() && bias->numel() == N,
                "skinny_linear: bias [N] of x's dtype");
  at::Tensor out = at::empty({M, N}, x.options());
  if (dtype == at::kFloat) {
    skinny_rows<float>(M, x.data_ptr<float>(), x.stride(0), weight.data_ptr<float>(), N, K,
                       has_bias ? bias->data_ptr<float>() : nullptr, relu, out.data_ptr<float>());
  } else {
    skinny_rows<bf16>(M, x.data_ptr<bf16>(), x.stride(0), weight.data_ptr<bf16>(), N, K,
                      has_bias ? bias->data_ptr<bf16>() : nullptr, relu, out.data_ptr<bf16>());
  }
  return out;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(enginetui_cpu, m) {
  m.def("skinny_linear(Tensor x, Tensor weight, Tensor? bias, bool relu) -> Tensor");
}

TORCH_LIBRARY_IMPL(enginetui_cpu, CPU, m) { m.impl("skinny_linear", &skinny_linear); }
