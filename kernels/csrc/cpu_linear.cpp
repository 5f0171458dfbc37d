// Linear layers of a few rows (decode steps of 1-8 requests): out[M, N] = x[M, K] @ w[N, K]^T (+ bias,
// then relu if asked), float32, for the weight as the model holds it (row-major [out, in]).
//
// Such a GEMM is bound by reading the weight once: every weight row is loaded into registers once and
// multiplied there with all M input rows. Each thread takes one contiguous range of output features, so
// it reads one linear run of the weight; blocks of R weight rows keep R x M independent accumulators in
// flight (FMA latency), sized to the vector registers.
//
// Semantics are torch.nn.functional.linear's. Built with the attention kernels by kernels/cpu_kernels.py
// (the op is torch.ops.enginetui_cpu.skinny_linear); core/worker/cpu_linear.py decides where it runs.

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>



namespace {

#if defined(__AVX512F__)
constexpr int kLanes = 16;
constexpr int kAccumulators = 16;  // of 32 vector registers: the rest hold the input rows and a weight row
#else
constexpr int kLanes = 8;
constexpr int kAccumulators = 8;  // of 16
#endif
constexpr int kMaxRows = 8;
// floats ahead of the loads each weight row is prefetched: R rows side by side are R streams, more than the
// hardware prefetchers follow at full speed (512 bytes ahead measured best of 0 / 256 / 512 / 1024)
constexpr int kPrefetchAhead = 128;

typedef float vfloat __attribute__((vector_size(kLanes * sizeof(float))));

inline vfloat load(const float* p) {
  vfloat v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline float lane_sum(vfloat v) {
  float s = 0.f;
  for (int i = 0; i < kLanes; ++i) s += v[i];
  return s;
}

// Weight rows [n, n + R) against every input row.
template <int M, int R>
inline void weight_rows(const float* x, int64_t ldx, const float* w, int64_t K, int64_t n, const float* bias, bool relu,
                        float* out, int64_t ldo) {
  vfloat acc[R][M];
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < M; ++m) acc[r][m] = vfloat{};
  const float* wn = w + n * K;
  int64_t k = 0;
  for (; k + kLanes <= K; k += kLanes) {
    for (int r = 0; r < R; ++r) __builtin_prefetch(wn + r * K + k + kPrefetchAhead, 0, 0);
    vfloat xv[M];
    for (int m = 0; m < M; ++m) xv[m] = load(x + m * ldx + k);
    for (int r = 0; r < R; ++r) {
      const vfloat wv = load(wn + r * K + k);
      for (int m = 0; m < M; ++m) acc[r][m] += wv * xv[m];
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

template <int M>
void skinny(const float* x, int64_t ldx, const float* w, int64_t N, int64_t K, const float* bias, bool relu, float* out,
            int64_t ldo) {
  constexpr int R = std::max(1, std::min(8, kAccumulators / M));
  const int64_t blocks = N / R;
  // grain: about 64 KiB of weight per task, so that small layers stay on one thread
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 14) / (R * K));
  at::parallel_for(0, blocks, grain, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) weight_rows<M, R>(x, ldx, w, K, b * R, bias, relu, out, ldo);
  });
  for (int64_t n = blocks * R; n < N; ++n) weight_rows<M, 1>(x, ldx, w, K, n, bias, relu, out, ldo);
}

at::Tensor skinny_linear(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                         bool relu) {
  TORCH_CHECK(x.dim() == 2 && weight.dim() == 2, "skinny_linear: x [M, K] and weight [N, K]");
  TORCH_CHECK(x.scalar_type() == at::kFloat && weight.scalar_type() == at::kFloat, "skinny_linear: float32 only");
  const int64_t M = x.size(0), K = x.size(1), N = weight.size(0);
  TORCH_CHECK(weight.size(1) == K, "skinny_linear: x has ", K, " features, the weight ", weight.size(1));
  TORCH_CHECK(M >= 1 && M <= kMaxRows, "skinny_linear: 1 to ", kMaxRows, " rows, got ", M);
  TORCH_CHECK(x.stride(1) == 1 && weight.is_contiguous(), "skinny_linear: rows must be contiguous");
  const float* b = nullptr;
  if (bias.has_value() && bias->defined()) {
    TORCH_CHECK(bias->scalar_type() == at::kFloat && bias->is_contiguous() && bias->numel() == N,
                "skinny_linear: bias [N] float32");
    b = bias->data_ptr<float>();
  }
  at::Tensor out = at::empty({M, N}, x.options());
  const float* xp = x.data_ptr<float>();
  const float* wp = weight.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const int64_t ldx = x.stride(0);
  switch (M) {
    case 1: skinny<1>(xp, ldx, wp, N, K, b, relu, op, N); break;
    case 2: skinny<2>(xp, ldx, wp, N, K, b, relu, op, N); break;
    case 3: skinny<3>(xp, ldx, wp, N, K, b, relu, op, N); break;
    case 4: skinny<4>(xp, ldx, wp, N, K, b, relu, op, N); break;
    case 5: skinny<5>(xp, ldx, wp, N, K, b, relu, op, N); break;
    case 6: skinny<6>(xp, ldx, wp, N, K, b, relu, op, N); break;
    case 7: skinny<7>(xp, ldx, wp, N, K, b, relu, op, N); break;
    default: skinny<8>(xp, ldx, wp, N, K, b, relu, op, N); break;
  }
  return out;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(enginetui_cpu, m) {
  m.def("skinny_linear(Tensor x, Tensor weight, Tensor? bias, bool relu) -> Tensor");
}

TORCH_LIBRARY_IMPL(enginetui_cpu, CPU, m) { m.impl("skinny_linear", &skinny_linear); }
