// The CPU attention kernels: paged attention that reads the KV cache in place through the block
// table (no gather, no padding; prefill chunks and decodes in one call), and reshape_and_cache.
//
// Semantics are those of kernels/reference.py (the specification). Cache layout:
// [num_blocks, block_size, num_kv_heads, head_size]; slot = block * block_size + offset.
//
// Work is split into items, run by OpenMP threads that each take the next one when free
// (heaviest first, but a request's query chunks of one kv head one after the other, so that the
// keys and values they all read stay in cache), all in fp32 (bf16 / fp16 keys and values are
// widened as they are loaded; the prefill path widens its key and value tiles into buffers
// first). A decode (one query token) is an item per range of kv heads (all of them when there are
// enough decodes to keep every thread busy): it reads each cache block's rows for its heads in one
// run, keys then values, and takes the softmax over its whole context at once. Attention is
// memory-bound there, and long runs are what the prefetchers follow (one head's 16 rows of a
// block, 3 KB apart, they did not: 1.6x slower). Query chunks are items
// (request, kv head, tile of query tokens) holding their tokens' rows times the query heads of the
// kv head (grouped-query attention shares each key between them); they walk the keys 16 at a time
// with an online softmax, scores from a dot product per key for a few rows, else with the rows side
// by side in vector lanes (32 rows with AVX-512, 16 with AVX2, 8 with SSE): each key or value element is
// broadcast against the lanes, blocked so that 16 vectors of multiply-adds stay in registers (12 with
// AVX2; a prompt's attention 20% faster than 16 rows and 4 vectors at a time, on an AMD EPYC Zen 5),
// and the softmax steps a span of four tiles at once, in base 2.
// Loops are plain C++ written for the compiler's vectorizer (built with -O3 -march=native on the
// machine that runs it).
//
// Built and loaded by kernels/cpu_kernels.py; the ops are torch.ops.enginetui_cpu.*.

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#if defined(__AVX512BF16__)
#include <immintrin.h>
#endif

namespace {

// Vectors are the CPU's widest registers: 16 fp32 lanes (512 bits) with AVX-512, 8 (256 bits) with
// AVX / AVX2, else 4 (SSE). Never wider: GCC keeps arrays of wider vector-extension values on the
// stack (an AVX2 build of 512-bit vectors ran a prompt's attention 10-14x and decodes 1.6-2.1x slower).
#if defined(__AVX512F__)
constexpr int kW = 16;  // fp32 lanes in a vector
#elif defined(__AVX__)
constexpr int kW = 8;
#else
constexpr int kW = 4;
#endif
constexpr int64_t kKeyTile = 16;  // keys per inner step; a tile never crosses a cache block
static_assert(kKeyTile % kW == 0, "a key tile's scores are whole vectors");
constexpr int64_t kLanes = kW;    // query rows side by side in one vector
constexpr int64_t kDotRows = 3;   // items of at most this many rows (short chunks) take a dot product per key
static_assert(kDotRows <= kLanes, "the dot path keeps its rows side by side in one vector's lanes");
// The lanes path's register blocking: independent vectors of multiply-adds enough to cover the
// FMA units' latency (K x 2 accumulators: 16 of the 32 registers with AVX-512, 12 of the 16
// elsewhere, with the two query vectors and a broadcast the rest), and rows per item in two groups
// of kLanes (every key and value element read serves twice the multiply-adds). On an AMD EPYC Zen 4,
// the AVX2 build's prompt attention ran 23% faster with 12 accumulators than with 8 (a 1,536-token
// prompt 41 -> 32 ms a layer); 24 with AVX-512 gained nothing there.
#if defined(__AVX512F__)
constexpr int kScoreKeys = 8;      // keys scored at once
constexpr int kValueChannels = 8;  // value channels accumulated at once
#else
constexpr int kScoreKeys = 6;
constexpr int kValueChannels = 6;
#endif
constexpr int kRestBlock = 4;  // then blocks of this many, for the keys of a tile and the channels left over
constexpr int kLaneGroups = 2;     // vectors of kLanes rows per item
constexpr int64_t kItemRows = kLanes * kLaneGroups;  // query rows per lanes-path item: 32 with AVX-512, 16 with AVX2
// The lanes path takes a softmax step (a rescale of the outputs so far, their max and sum) per span
// of this many key tiles, and accumulates the span's values in one pass per block of channels: the
// step's cost, and each pass's loads and stores of its accumulators, shared by 64 keys instead of 16.
// A 1,536-token prompt's attention 8-9% faster on an AMD EPYC Zen 4 (eight tiles: 1% more).
constexpr int kSpanTiles = 4;
constexpr int64_t kSpanKeys = kKeyTile * kSpanTiles;  // keys per span, at most
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// A decode asks for the rows of the cache block this many ahead of the one it reads, a few rows at
// a time as it reads: a steady stream of requests the memory keeps in flight, where the whole next
// block asked for at once left the reads to stall behind a burst of them. The rows go into L2, not
// L1 (prefetch_block): a request into L1 holds one of L1's few miss buffers until its line arrives,
// which capped a core's stream well below what it reads otherwise, and four blocks ahead (192 KB of
// a decode's 12 heads) stay well inside L2. docs/speed.md has the figures.
constexpr int64_t kPrefetchBlocks = 4;

template <typename T>
inline float to_float(T x) {
  return static_cast<float>(x);
}

// kW floats / int32s as one value (GCC / Clang vector extensions: one register).
using vf = float __attribute__((vector_size(4 * kW)));
using vi = int32_t __attribute__((vector_size(4 * kW)));
using vf_unaligned = float __attribute__((vector_size(4 * kW), aligned(4), may_alias));  // to load / store rows

using vu16 = uint16_t __attribute__((vector_size(2 * kW), aligned(2), may_alias));  // kW bf16 bit patterns
using vu = uint32_t __attribute__((vector_size(4 * kW)));
using vu_unaligned = uint32_t __attribute__((vector_size(4 * kW), aligned(2), may_alias));  // 2 kW bf16 bit patterns

inline vf loadv(const float* p) { return *reinterpret_cast<const vf_unaligned*>(p); }
// kW bf16 values widened to fp32: a bf16 is the top half of the fp32 with the same value.
inline vf loadv(const c10::BFloat16* p) {
  const vu wide = __builtin_convertvector(*reinterpret_cast<const vu16*>(p), vu) << 16;
  return reinterpret_cast<vf>(wide);
}
inline vf loadv(const c10::Half* p) {
  vf v;
  for (int i = 0; i < kW; ++i) v[i] = static_cast<float>(p[i]);
  return v;
}

// Lane order: how the dot products and decode outputs hold a row's channels. Runs of 2 kW channels
// (a run: two vectors); in a bf16 run the kW even channels come first, then the kW odd ones: that is
// how one load of 2 kW bf16 widens to two fp32 vectors with a shift and a mask, no shuffle (shuffles
// share one port, and widening in order made bf16 decodes compute-bound). Other dtypes, and the
// channels past the last whole run, keep their order. Queries are put in lane order, outputs taken
// out of it.
template <typename T>
constexpr bool kPairs = std::is_same_v<T, c10::BFloat16>;

constexpr int64_t kRun = 2 * kW;  // channels in a run
inline int64_t whole_runs(int64_t d) { return d - d % kRun; }

template <typename T>
inline int64_t lane_index(int64_t c, int64_t d) {
  if (!kPairs<T> || c >= whole_runs(d)) return c;
  const int64_t r = c % kRun;
  return c - r + (r % 2) * kW + r / 2;
}

// Channels [c, c + kRun) of a row as two fp32 vectors, in lane order.
template <typename T>
inline void load_run(const T* p, vf& lo, vf& hi) {
  if constexpr (kPairs<T>) {
    const vu w = *reinterpret_cast<const vu_unaligned*>(p);  // bf16 2i in the low half of word i
    lo = reinterpret_cast<vf>(w << 16);
    hi = reinterpret_cast<vf>(w & 0xFFFF0000u);
  } else {
    lo = loadv(p);
    hi = loadv(p + kW);
  }
}

// Dot products of bf16 rows in bf16 (AVX512-BF16's vdpbf16ps: pairs multiplied exactly, summed in
// fp32), where the CPU has it: no widening, half the instructions of the fp32 products.
#if defined(__AVX512BF16__)
constexpr bool kHaveBf16Dot = true;
#else
constexpr bool kHaveBf16Dot = false;
#endif
template <typename T>
constexpr bool kBf16Dot = kHaveBf16Dot && std::is_same_v<T, c10::BFloat16>;

// How dot4 takes a query row: the bf16 row itself under kBf16Dot, else fp32 in lane order.
template <typename T>
using DotQuery = std::conditional_t<kBf16Dot<T>, c10::BFloat16, float>;

// A query row as dot4 takes it (unscaled: dot4 scales the scores).
template <typename T>
inline void to_dot_query(const T* src, int64_t d, DotQuery<T>* dst) {
  if constexpr (kBf16Dot<T>) {
    std::copy_n(src, d, dst);
  } else {
    for (int64_t c = 0; c < d; ++c) dst[lane_index<T>(c, d)] = to_float(src[c]);
  }
}

// dst = src (lane order) * scale.
template <typename T>
inline void from_lanes(const float* src, float scale, int64_t d, T* dst) {
  for (int64_t c = 0; c < d; ++c) dst[c] = static_cast<T>(src[lane_index<T>(c, d)] * scale);
}
inline void storev(float* p, vf v) { *reinterpret_cast<vf_unaligned*>(p) = v; }
// x in every lane. Written x - 0, which is x for every x (0 + x is not, for x = -0): the compiler
// then broadcasts x as it is, where 0 + x cost an add and a shuffle per broadcast (prompt attention
// 5-13% faster on an AMD EPYC Zen 5).
inline vf splat(float x) { return x - vf{}; }
inline vf vmax(vf a, vf b) { return a > b ? a : b; }

// exp(x) for x <= 0 (scores minus their running max): Cephes' expf polynomial after x = n ln2 + r,
// about 1 ulp. Below the smallest normal result it returns exactly 0 (so exp(-inf) is 0).
__attribute__((always_inline)) inline vf vexp(vf x) {
  const vf xc = vmax(x, splat(-87.0f));
  const vf t = xc * 1.44269504088896341f + 0.5f;
  vi n = __builtin_convertvector(t, vi);  // truncates toward zero; make it floor
  n -= (__builtin_convertvector(n, vf) > t) ? 1 : 0;
  const vf fn = __builtin_convertvector(n, vf);
  vf r = xc - fn * 0.693359375f;
  r = r + fn * 2.12194440e-4f;
  vf p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const vf scale = reinterpret_cast<vf>((n + 127) << 23);  // 2^n
  return x < -87.0f ? splat(0.0f) : p * scale;
}

// 2^x for x <= 0 (scores in log2 units minus their running max): x = n + r with n the nearest integer
// (|r| <= 1/2, found by adding and taking away 1.5 * 2^23), a degree-6 polynomial for 2^r (relative
// error 2e-9 on [-1/2, 1/2], so float rounding sets the error), times 2^n built in the exponent bits.
// Below the smallest normal result it returns exactly 0 (so 2^-inf is 0). Fewer operations than vexp:
// no reduction by ln 2 in two parts, no floor (a 1,536-token prompt's attention 7% faster on an AMD
// EPYC Zen 4 than with vexp; the lanes path takes its scores in log2 units, scaled in the query).
__attribute__((always_inline)) inline vf vexp2(vf x) {
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer, kept in the low bits
  const vf xc = vmax(x, splat(-126.0f));
  const vf t = xc + kRound;
  const vf r = xc - (t - kRound);
  vf p = splat(1.537071014940132e-4f);
  p = p * r + 1.3399853069521862e-3f;
  p = p * r + 9.618373264047856e-3f;
  p = p * r + 5.550329023389121e-2f;
  p = p * r + 2.4022648461939694e-1f;
  p = p * r + 6.931472055824733e-1f;
  p = p * r + 1.0f;
  const vi bits = reinterpret_cast<vi>(t) - reinterpret_cast<vi>(splat(kRound));  // n
  const vf scale = reinterpret_cast<vf>((bits + 127) << 23);  // 2^n
  return x < -126.0f ? splat(0.0f) : p * scale;
}

// Lane permutations of one or two vectors by constant indices (the second vector's lanes are kW to 2 kW - 1).
#if defined(__clang__)
#define SHUFFLE2(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define SHUFFLE2(a, b, ...) __builtin_shuffle(a, b, vi{__VA_ARGS__})
#endif

// The sums of four vectors' lanes, out[j] the sum of aj's: a pairwise tree shared by the four.
inline void hsum4(vf a0, vf a1, vf a2, vf a3, float out[4]) {
#if defined(__AVX512F__)
  const vf x = SHUFFLE2(a0, a1, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
               SHUFFLE2(a0, a1, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  const vf y = SHUFFLE2(a2, a3, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
               SHUFFLE2(a2, a3, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
  const vf z = SHUFFLE2(x, y, 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
               SHUFFLE2(x, y, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
  const vf u = z + SHUFFLE2(z, z, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
  const vf v = u + SHUFFLE2(u, u, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
  for (int j = 0; j < 4; ++j) out[j] = v[4 * j];
#elif defined(__AVX__)
  const vf x = SHUFFLE2(a0, a1, 0, 1, 2, 3, 8, 9, 10, 11) + SHUFFLE2(a0, a1, 4, 5, 6, 7, 12, 13, 14, 15);
  const vf y = SHUFFLE2(a2, a3, 0, 1, 2, 3, 8, 9, 10, 11) + SHUFFLE2(a2, a3, 4, 5, 6, 7, 12, 13, 14, 15);
  const vf z = SHUFFLE2(x, y, 0, 1, 4, 5, 8, 9, 12, 13) + SHUFFLE2(x, y, 2, 3, 6, 7, 10, 11, 14, 15);
  const vf v = z + SHUFFLE2(z, z, 1, 0, 3, 2, 5, 4, 7, 6);
  for (int j = 0; j < 4; ++j) out[j] = v[2 * j];
#else
  const vf x = SHUFFLE2(a0, a1, 0, 1, 4, 5) + SHUFFLE2(a0, a1, 2, 3, 6, 7);
  const vf y = SHUFFLE2(a2, a3, 0, 1, 4, 5) + SHUFFLE2(a2, a3, 2, 3, 6, 7);
  const vf v = SHUFFLE2(x, y, 0, 2, 4, 6) + SHUFFLE2(x, y, 1, 3, 5, 7);
  for (int j = 0; j < 4; ++j) out[j] = v[j];
#endif
}

// The sum of a vector's lanes.
inline float hsum(vf a) {
  float out[4];
  hsum4(a, vf{}, vf{}, vf{}, out);
  return out[0];
}

// The largest lane of a vector.
inline float hmax(vf a) {
#if defined(__AVX512F__)
  a = vmax(a, SHUFFLE2(a, a, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7));
  a = vmax(a, SHUFFLE2(a, a, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11));
  a = vmax(a, SHUFFLE2(a, a, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13));
  a = vmax(a, SHUFFLE2(a, a, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14));
#elif defined(__AVX__)
  a = vmax(a, SHUFFLE2(a, a, 4, 5, 6, 7, 0, 1, 2, 3));
  a = vmax(a, SHUFFLE2(a, a, 2, 3, 0, 1, 6, 7, 4, 5));
  a = vmax(a, SHUFFLE2(a, a, 1, 0, 3, 2, 5, 4, 7, 6));
#else
  a = vmax(a, SHUFFLE2(a, a, 2, 3, 0, 1));
  a = vmax(a, SHUFFLE2(a, a, 1, 0, 3, 2));
#endif
  return a[0];
}

// The lane numbers 0 .. kW - 1.
inline vf iota() {
  vf v;
  for (int i = 0; i < kW; ++i) v[i] = static_cast<float>(i);
  return v;
}

struct Item {
  int32_t req;        // request index
  int32_t kv_head;    // kv head index (decode items: the first of their range)
  int32_t kv_end;     // decode items: one past their last kv head; others: kv_head + 1
  int32_t row_begin;  // first row of the request's (query token x grouped head) rows for this kv head
  int32_t row_end;    // one past the last; row i is token i / group, query head kv_head * group + i % group
  bool decode;        // a request's single query token over kv heads [kv_head, kv_end): run_item_decode
  int64_t cost;       // rows x keys, to run heavy items first
  int64_t group_cost; // the cost of the heaviest item of its request and kv head (a decode item's own)
};

template <typename T>
struct Problem {
  const T* query;              // [num_tokens, num_heads, head_size] with the strides below
  int64_t q_tok_stride;        // elements between query tokens
  int64_t q_head_stride;       // elements between query heads
  const T* key_cache;          // [num_blocks, block_size, num_kv_heads, head_size], contiguous
  const T* value_cache;        // same shape as key_cache
  const int64_t* qsl;          // [num_reqs + 1] query start of each request
  const int64_t* seq_lens;     // [num_reqs] context length including the new tokens
  const int32_t* block_table;  // [num_reqs, bt_stride] physical block ids
  int64_t bt_stride;           // block table row length
  int64_t num_heads;           // query heads
  int64_t num_kv_heads;        // key / value heads
  int64_t head_size;           // channels per head
  int64_t block_size;          // tokens per cache block
  float scale;                 // softmax scale
  T* out;                      // [num_tokens, num_heads, head_size] with the strides below
  int64_t o_tok_stride;        // elements between output tokens
  int64_t o_head_stride;       // elements between output heads
};

// Per-thread buffers, sized for the largest item.
template <typename T>
struct Scratch {
  std::vector<float> q;    // lanes path: [head_size, kItemRows] queries, rows in lanes
  std::vector<DotQuery<T>> dq;  // dot / decode: [rows, head_size] query rows as dot4 takes them
  std::vector<float> acc;  // unnormalized outputs: dot / decode [rows, head_size]; lanes path [head_size, kItemRows]
  std::vector<float> s;    // scores, then probabilities, key-major with rows in lanes: lanes path [kSpanKeys, kItemRows],
                           // dot path [kKeyTile, kLanes]; decode: [heads] 1 / sum
  std::vector<float> ctx;  // decode: [num_heads, ctx_stride] scores, then probabilities, of the whole context
  std::vector<float> keys; // lanes path, bf16 / fp16: [kKeyTile, head_size] the key tile widened to fp32
  std::vector<float> vals; // lanes path, bf16 / fp16: [kSpanKeys, head_size] the span's value tiles widened to fp32
  Scratch(int64_t d, int64_t heads, int64_t ctx_stride)
      : q(kItemRows * d),
        dq(std::max(kLanes, heads) * d),
        acc(std::max(kItemRows, heads) * d),
        s(std::max(kSpanKeys * kItemRows, heads)),
        ctx(heads * ctx_stride),
        keys(kKeyTile * d), vals(kSpanKeys * d) {}
};

// Prefetch the rows of a key tile and its value tile into the cache.
template <typename T>
inline void prefetch_tile(const T* k, const T* v, int64_t tok_stride, int64_t nv, int64_t d) {
  constexpr int64_t kLine = 64 / sizeof(T);  // elements per cache line
  for (int64_t n = 0; n < nv; ++n) {
    for (int64_t c = 0; c < d; c += kLine) {
      __builtin_prefetch(k + n * tok_stride + c);
      __builtin_prefetch(v + n * tok_stride + c);
    }
  }
}

// Where an item's rows and keys are.
template <typename T>
struct ItemView {
  int64_t rows;       // rows in the item
  int64_t group;      // query heads per kv head
  int64_t q_start;    // the request's first query token (row of `query`)
  int64_t first_pos;  // absolute position of the request's query 0 (its keys before it are history)
  int64_t kv_end;     // keys [0, kv_end) are visible to some row of the item
  int64_t tok_stride; // elements between tokens in the cache
  int64_t block_elems;  // elements per cache block
  const int32_t* blocks;  // the request's block table row

  ItemView(const Problem<T>& p, const Item& it) {
    rows = it.row_end - it.row_begin;
    group = p.num_heads / p.num_kv_heads;
    q_start = p.qsl[it.req];
    first_pos = p.seq_lens[it.req] - (p.qsl[it.req + 1] - q_start);
    kv_end = first_pos + (it.row_end - 1) / group + 1;
    tok_stride = p.num_kv_heads * p.head_size;
    block_elems = p.block_size * tok_stride;
    blocks = p.block_table + static_cast<int64_t>(it.req) * p.bt_stride;
  }
  int64_t token(const Item& it, int64_t i) const { return (it.row_begin + i) / group; }  // of row i, in the request
  int64_t head(const Item& it, int64_t i) const { return it.kv_head * group + (it.row_begin + i) % group; }
  int64_t pos(const Item& it, int64_t i) const { return first_pos + token(it, i); }
  // Offset of key/value `n` for this kv head in the cache.
  int64_t key_offset(const Problem<T>& p, const Item& it, int64_t n) const {
    return blocks[n / p.block_size] * block_elems + (n % p.block_size) * tok_stride + it.kv_head * p.head_size;
  }
  // Keys in the tile that starts at key n0: up to kKeyTile, never past its block or kv_end.
  int64_t tile_len(const Problem<T>& p, int64_t n0) const {
    return std::min({kKeyTile, p.block_size - n0 % p.block_size, kv_end - n0});
  }
  // Ask for the keys and values of the tile after the one at n0 (of nv keys) while this one is
  // computed: cache rows are strided, and the hardware prefetcher alone falls behind (decodes run
  // about 1.5x faster with this).
  void prefetch_next(const Problem<T>& p, const Item& it, int64_t n0, int64_t nv) const {
    const int64_t next = n0 + nv;
    if (next < kv_end) {
      const int64_t off = key_offset(p, it, next);
      prefetch_tile(p.key_cache + off, p.value_cache + off, tok_stride, tile_len(p, next), p.head_size);
    }
  }
};

// Rows [0, nv) of a key tile as fp32 rows, `stride` elements apart: the cache itself for fp32, else
// widened into `buf` a vector at a time. (The lanes path reads keys one element at a time; widening
// each element there costs four instructions where a vector costs two.)
template <typename T>
inline const float* widened_rows(const T* src, int64_t tok_stride, int64_t nv, int64_t d, float* buf, int64_t& stride) {
  if constexpr (std::is_same_v<T, float>) {
    stride = tok_stride;
    return src;
  } else {
    const int64_t dw = d - d % kW;
    for (int64_t n = 0; n < nv; ++n) {
      const T* row = src + n * tok_stride;
      float* dst = buf + n * d;
      for (int64_t c = 0; c < dw; c += kW) storev(dst + c, loadv(row + c));
      for (int64_t c = dw; c < d; ++c) dst[c] = to_float(row[c]);
    }
    stride = d;
    return buf;
  }
}

// acc[lane0 + j] += sum_n s[n][lane0 + j] * v_n for j < R: R rows' accumulators in registers per
// vector of channels, each value row loaded once for all R rows.
template <int R, typename T>
inline void accumulate_values(const float* s, int64_t lane0, const T* v, int64_t v_stride, int64_t nv, int64_t d,
                              float* acc) {
  int64_t c0 = 0;
  for (; c0 + kW <= d; c0 += kW) {
    vf a[R];
    for (int j = 0; j < R; ++j) a[j] = loadv(acc + (lane0 + j) * d + c0);
    for (int64_t n = 0; n < nv; ++n) {
      const vf vn = loadv(v + n * v_stride + c0);
      for (int j = 0; j < R; ++j) a[j] += s[n * kLanes + lane0 + j] * vn;
    }
    for (int j = 0; j < R; ++j) storev(acc + (lane0 + j) * d + c0, a[j]);
  }
  if (c0 < d) {  // head sizes that are not a multiple of kW
    for (int j = 0; j < R; ++j) {
      float* aj = acc + (lane0 + j) * d;
      for (int64_t n = 0; n < nv; ++n) {
        const float pj = s[n * kLanes + lane0 + j];
        const T* vn = v + n * v_stride;
        for (int64_t c = c0; c < d; ++c) aj[c] += pj * to_float(vn[c]);
      }
    }
  }
}

template <typename T>
inline void accumulate_values_rows(const float* s, int64_t rows, const T* v, int64_t v_stride, int64_t nv, int64_t d,
                                   float* acc) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) accumulate_values<4, T>(s, r, v, v_stride, nv, d, acc);
  switch (rows - r) {
    case 3: accumulate_values<3, T>(s, r, v, v_stride, nv, d, acc); break;
    case 2: accumulate_values<2, T>(s, r, v, v_stride, nv, d, acc); break;
    case 1: accumulate_values<1, T>(s, r, v, v_stride, nv, d, acc); break;
    default: break;
  }
}

// Normalize and store the item's outputs: row i's channel c is acc[i * row_stride + c * channel_stride]
// (rows one after the other in the dot path; rows in lanes, transposed, in the lanes path).
template <typename T>
void store_rows(const Problem<T>& p, const Item& it, const ItemView<T>& view, const float* acc, int64_t row_stride,
                int64_t channel_stride, const float* l) {
  const int64_t d = p.head_size;
  for (int64_t i = 0; i < view.rows; ++i) {
    T* dst = p.out + (view.q_start + view.token(it, i)) * p.o_tok_stride + view.head(it, i) * p.o_head_stride;
    const float inv = 1.0f / l[i];
    const float* a = acc + i * row_stride;
    for (int64_t c = 0; c < d; ++c) dst[c] = static_cast<T>(a[c * channel_stride] * inv);
  }
}

// The scores of K keys (rows `ks` apart) for an item's rows in lanes: s[j] = sum_c k_j[c] * qt[c],
// kLaneGroups vectors of lanes per key, K x kLaneGroups independent multiply-adds in registers.
template <int K>
inline void lane_scores(const float* qt, const float* k, int64_t ks, int64_t d, float* s) {
  vf a[K][kLaneGroups] = {};
  for (int64_t c = 0; c < d; ++c) {
    vf qc[kLaneGroups];
    for (int g = 0; g < kLaneGroups; ++g) qc[g] = loadv(qt + c * kItemRows + g * kLanes);
    for (int j = 0; j < K; ++j) {
      const vf kj = splat(k[j * ks + c]);
      for (int g = 0; g < kLaneGroups; ++g) a[j][g] += kj * qc[g];
    }
  }
  for (int j = 0; j < K; ++j)
    for (int g = 0; g < kLaneGroups; ++g) storev(s + j * kItemRows + g * kLanes, a[j][g]);
}

// accT[c] += sum_n v_n[c] * p_n (kLaneGroups vectors of the rows in lanes) for the CH channels from
// c0, n over the nt tiles of a span (tile t: nvt[t] value rows at vt[t], vst[t] elements apart; their
// probabilities one after the other in s): CH x kLaneGroups accumulators in registers, each
// probability vector loaded once for all of them.
template <int CH>
inline void accumulate_values_lanes(const float* s, const float* const* vt, const int64_t* vst, const int64_t* nvt,
                                    int nt, int64_t c0, float* acct) {
  vf a[CH][kLaneGroups];
  for (int j = 0; j < CH; ++j)
    for (int g = 0; g < kLaneGroups; ++g) a[j][g] = loadv(acct + (c0 + j) * kItemRows + g * kLanes);
  for (int t = 0; t < nt; ++t) {
    const float* v = vt[t];
    const int64_t vs = vst[t], nv = nvt[t];
    for (int64_t n = 0; n < nv; ++n) {
      vf pn[kLaneGroups];
      for (int g = 0; g < kLaneGroups; ++g) pn[g] = loadv(s + n * kItemRows + g * kLanes);
      const float* vn = v + n * vs + c0;
      for (int j = 0; j < CH; ++j) {
        const vf vj = splat(vn[j]);
        for (int g = 0; g < kLaneGroups; ++g) a[j][g] += vj * pn[g];
      }
    }
    s += nv * kItemRows;
  }
  for (int j = 0; j < CH; ++j)
    for (int g = 0; g < kLaneGroups; ++g) storev(acct + (c0 + j) * kItemRows + g * kLanes, a[j][g]);
}

// Many rows (prefill chunks): up to kItemRows rows side by side in vector lanes. Scores of a key for
// all rows are kLaneGroups vectors (key element broadcast times the transposed queries), the online
// softmax runs on the lanes, and so do the outputs (accumulated transposed, [head_size, rows]); no
// key or value tile is ever transposed.
template <typename T>
void run_item_lanes(const Problem<T>& p, const Item& it, Scratch<T>& w) {
  const ItemView<T> view(p, it);
  const int64_t d = p.head_size, rows = view.rows;
  float* qt = w.q.data();  // [d, kItemRows]
  const float q_scale = p.scale * 1.44269504088896341f;  // scores in log2 units: the softmax takes 2^x
  std::fill_n(qt, d * kItemRows, 0.0f);
  vf pos[kLaneGroups];  // each lane's absolute position; padding lanes copy the last row's
  for (int64_t i = 0; i < kItemRows; ++i) {
    pos[i / kLanes][i % kLanes] = static_cast<float>(view.pos(it, std::min(i, rows - 1)));
    if (i >= rows) continue;
    const T* src = p.query + (view.q_start + view.token(it, i)) * p.q_tok_stride + view.head(it, i) * p.q_head_stride;
    for (int64_t c = 0; c < d; ++c) qt[c * kItemRows + i] = to_float(src[c]) * q_scale;
  }
  const int64_t earliest = view.pos(it, 0);  // the position of the item's first (earliest) row
  vf m[kLaneGroups], l[kLaneGroups];  // each lane's running max and sum of exp
  for (int g = 0; g < kLaneGroups; ++g) m[g] = splat(kNegInf), l[g] = vf{};
  float* acct = w.acc.data();  // [d, kItemRows] unnormalized outputs, rows in lanes
  std::fill_n(acct, d * kItemRows, 0.0f);
  float* s = w.s.data();  // [kSpanKeys, kItemRows]

  int64_t span = 0;  // keys in the span
  for (int64_t n0 = 0; n0 < view.kv_end; n0 += span) {
    // Scores of up to kSpanTiles tiles, then one softmax step and one pass over the values for all of them.
    const float* vt[kSpanTiles];  // each tile's values as fp32 rows
    int64_t vst[kSpanTiles];      // elements between those rows
    int64_t nvt[kSpanTiles];      // keys in each tile
    int nt = 0;                   // tiles in the span
    span = 0;
    for (; nt < kSpanTiles && n0 + span < view.kv_end; ++nt) {
      const int64_t t0 = n0 + span, nv = view.tile_len(p, t0);
      const int64_t off = view.key_offset(p, it, t0);
      view.prefetch_next(p, it, t0, nv);
      int64_t ks;
      const float* k = widened_rows(p.key_cache + off, view.tok_stride, nv, d, w.keys.data(), ks);
      float* st = s + span * kItemRows;
      int64_t n = 0;
      for (; n + kScoreKeys <= nv; n += kScoreKeys) lane_scores<kScoreKeys>(qt, k + n * ks, ks, d, st + n * kItemRows);
      for (; n + kRestBlock <= nv; n += kRestBlock)
        lane_scores<kRestBlock>(qt, k + n * ks, ks, d, st + n * kItemRows);
      for (; n < nv; ++n) lane_scores<1>(qt, k + n * ks, ks, d, st + n * kItemRows);
      vt[nt] = widened_rows(p.value_cache + off, view.tok_stride, nv, d, w.vals.data() + span * d, vst[nt]);
      nvt[nt] = nv;
      span += nv;
    }

    // Causal mask and online softmax, lanes at once (every lane sees key 0, so maxima are finite).
    const bool masked = n0 + span - 1 > earliest;  // some key of the span is after some row
    for (int g = 0; g < kLaneGroups; ++g) {
      float* sg = s + g * kLanes;
      vf mx = splat(kNegInf);
      if (masked) {
        for (int64_t n = 0; n < span; ++n) {
          const vf sn = pos[g] < static_cast<float>(n0 + n) ? splat(kNegInf) : loadv(sg + n * kItemRows);
          storev(sg + n * kItemRows, sn);
          mx = vmax(mx, sn);
        }
      } else {
        for (int64_t n = 0; n < span; ++n) mx = vmax(mx, loadv(sg + n * kItemRows));
      }
      const vf m_new = vmax(m[g], mx);
      const vf alpha = vexp2(m[g] - m_new);  // 0 on the first span
      m[g] = m_new;
      l[g] *= alpha;
      for (int64_t n = 0; n < span; ++n) {
        const vf pn = vexp2(loadv(sg + n * kItemRows) - m_new);
        storev(sg + n * kItemRows, pn);
        l[g] += pn;
      }
      float* ag = acct + g * kLanes;
      for (int64_t c = 0; c < d; ++c) storev(ag + c * kItemRows, loadv(ag + c * kItemRows) * alpha);
    }
    int64_t c0 = 0;
    for (; c0 + kValueChannels <= d; c0 += kValueChannels)
      accumulate_values_lanes<kValueChannels>(s, vt, vst, nvt, nt, c0, acct);
    for (; c0 + kRestBlock <= d; c0 += kRestBlock)
      accumulate_values_lanes<kRestBlock>(s, vt, vst, nvt, nt, c0, acct);
    for (; c0 < d; ++c0) accumulate_values_lanes<1>(s, vt, vst, nvt, nt, c0, acct);
  }
  float sums[kItemRows];
  for (int g = 0; g < kLaneGroups; ++g) storev(sums + g * kLanes, l[g]);
  store_rows(p, it, view, acct, 1, kItemRows, sums);
}

// The scores of one query row (to_dot_query) against four keys: dot products times `scale`.
template <typename T>
inline void dot4(const DotQuery<T>* qi, const T* const kn[4], int64_t d, float scale, float out[4]) {
  const int64_t runs = whole_runs(d), dw = d - d % kW;
  vf a[4] = {};
  int64_t c = 0;
  if constexpr (kBf16Dot<T>) {
#if defined(__AVX512BF16__)
    for (; c < runs; c += kRun) {
      const __m512bh q = reinterpret_cast<__m512bh>(_mm512_loadu_si512(qi + c));
      for (int j = 0; j < 4; ++j) {
        const __m512bh k = reinterpret_cast<__m512bh>(_mm512_loadu_si512(kn[j] + c));
        a[j] = reinterpret_cast<vf>(_mm512_dpbf16_ps(reinterpret_cast<__m512>(a[j]), q, k));
      }
    }
#endif
  } else {
    for (; c < runs; c += kRun) {
      const vf q0 = loadv(qi + c), q1 = loadv(qi + c + kW);
      for (int j = 0; j < 4; ++j) {
        vf lo, hi;
        load_run(kn[j] + c, lo, hi);
        a[j] += q0 * lo + q1 * hi;
      }
    }
  }
  for (; c < dw; c += kW) {
    const vf qc = loadv(qi + c);
    for (int j = 0; j < 4; ++j) a[j] += qc * loadv(kn[j] + c);
  }
  float sums[4];
  hsum4(a[0], a[1], a[2], a[3], sums);
  for (int j = 0; j < 4; ++j) {
    float tail = 0.0f;
    for (int64_t t = dw; t < d; ++t) tail += to_float(qi[t]) * to_float(kn[j][t]);
    out[j] = (sums[j] + tail) * scale;
  }
}

// Few rows (short chunks): a dot product per key and row, four keys at a time.
template <typename T>
void run_item_dot(const Problem<T>& p, const Item& it, Scratch<T>& w) {
  const ItemView<T> view(p, it);
  const int64_t d = p.head_size, rows = view.rows;
  DotQuery<T>* q = w.dq.data();  // [rows, d]
  int64_t pos[kLanes];
  for (int64_t i = 0; i < rows; ++i) {
    pos[i] = view.pos(it, i);
    const T* src = p.query + (view.q_start + view.token(it, i)) * p.q_tok_stride + view.head(it, i) * p.q_head_stride;
    to_dot_query(src, d, q + i * d);
  }
  float m[kLanes], l[kLanes];
  std::fill_n(m, rows, kNegInf);
  std::fill_n(l, rows, 0.0f);
  float* acc = w.acc.data();
  std::fill_n(acc, rows * d, 0.0f);
  float* s = w.s.data();  // [kKeyTile, kLanes]

  int64_t nv = 0;
  for (int64_t n0 = 0; n0 < view.kv_end; n0 += nv) {
    nv = view.tile_len(p, n0);
    const int64_t off = view.key_offset(p, it, n0);
    view.prefetch_next(p, it, n0, nv);
    const T* k = p.key_cache + off;
    const int64_t ks = view.tok_stride;
    for (int64_t i = 0; i < rows; ++i) {
      const DotQuery<T>* qi = q + i * d;
      const int64_t visible = std::clamp<int64_t>(pos[i] - n0 + 1, 0, nv);  // keys n < visible
      alignas(64) float si[kKeyTile];
      for (int64_t n = 0; n < visible; n += 4) {  // four keys at a time (past `visible`: repeats, unused)
        const T* kn[4];
        for (int j = 0; j < 4; ++j) kn[j] = k + std::min(n + j, visible - 1) * ks;
        float four[4];
        dot4(qi, kn, d, p.scale, four);
        for (int j = 0; j < 4 && n + j < kKeyTile; ++j) si[n + j] = four[j];
      }
      constexpr int kTileVecs = kKeyTile / kW;  // vectors of a tile's scores
      vf sv[kTileVecs];
      vf mx = splat(kNegInf);
      for (int t = 0; t < kTileVecs; ++t) {  // masked keys: -inf
        sv[t] = iota() + static_cast<float>(t * kW) < static_cast<float>(visible) ? loadv(si + t * kW) : splat(kNegInf);
        mx = vmax(mx, sv[t]);
      }
      float sum = 0.0f;
      if (visible > 0) {
        const float m_new = std::max(m[i], hmax(mx));
        const float alpha = vexp(splat(m[i] - m_new))[0];  // 0 on the first tile
        if (alpha != 1.0f) {
          float* a = acc + i * d;
#pragma omp simd
          for (int64_t c = 0; c < d; ++c) a[c] *= alpha;
        }
        m[i] = m_new;
        l[i] *= alpha;
        for (int t = 0; t < kTileVecs; ++t) {
          sv[t] = vexp(sv[t] - m_new);
          for (int j = 0; j < kW; ++j) sum += sv[t][j];
        }
      } else {
        for (int t = 0; t < kTileVecs; ++t) sv[t] = vf{};
      }
      l[i] += sum;
      for (int64_t n = 0; n < nv; ++n) s[n * kLanes + i] = sv[n / kW][n % kW];  // rows side by side, as the lanes path
    }
    accumulate_values_rows(s, rows, p.value_cache + off, view.tok_stride, nv, d, acc);
  }
  store_rows(p, it, view, acc, d, 1, l);
}

// acc += sum_n w[n] * v_n: one output row in lane order, up to four vectors of channels in registers.
template <typename T>
inline void accumulate_weighted(const float* w, const T* v, int64_t v_stride, int64_t nv, int64_t d, float* acc) {
  int64_t c0 = 0;
  for (; c0 + 2 * kRun <= d; c0 += 2 * kRun) {
    vf a0 = loadv(acc + c0), a1 = loadv(acc + c0 + kW), a2 = loadv(acc + c0 + 2 * kW), a3 = loadv(acc + c0 + 3 * kW);
    for (int64_t n = 0; n < nv; ++n) {
      const T* vn = v + n * v_stride + c0;
      const float wn = w[n];
      vf x0, x1, x2, x3;
      load_run(vn, x0, x1);
      load_run(vn + kRun, x2, x3);
      a0 += wn * x0;
      a1 += wn * x1;
      a2 += wn * x2;
      a3 += wn * x3;
    }
    storev(acc + c0, a0), storev(acc + c0 + kW, a1), storev(acc + c0 + 2 * kW, a2), storev(acc + c0 + 3 * kW, a3);
  }
  for (; c0 + kRun <= whole_runs(d); c0 += kRun) {
    vf a0 = loadv(acc + c0), a1 = loadv(acc + c0 + kW);
    for (int64_t n = 0; n < nv; ++n) {
      vf x0, x1;
      load_run(v + n * v_stride + c0, x0, x1);
      a0 += w[n] * x0;
      a1 += w[n] * x1;
    }
    storev(acc + c0, a0), storev(acc + c0 + kW, a1);
  }
  for (; c0 + kW <= d; c0 += kW) {
    vf a = loadv(acc + c0);
    for (int64_t n = 0; n < nv; ++n) a += w[n] * loadv(v + n * v_stride + c0);
    storev(acc + c0, a);
  }
  for (; c0 < d; ++c0) {
    for (int64_t n = 0; n < nv; ++n) acc[c0] += w[n] * to_float(v[n * v_stride + c0]);
  }
}

// Prefetch rows [0, nv) of a cache block, `width` elements each (a range of kv heads), into L2
// (locality 2: prefetcht1; see kPrefetchBlocks).
template <typename T>
inline void prefetch_block(const T* src, int64_t tok_stride, int64_t nv, int64_t width) {
  constexpr int64_t kLine = 64 / sizeof(T);  // elements per cache line
  for (int64_t n = 0; n < nv; ++n) {
    for (int64_t c = 0; c < width; c += kLine) __builtin_prefetch(src + n * tok_stride + c, 0, 2);
  }
}

// Ask for the first cache block of a decode item's heads (keys or values, by `cache`). (Asking for
// the first kPrefetchBlocks at once was no faster.)
template <typename T>
inline void prefetch_first_block(const Problem<T>& p, const Item& it, const T* cache) {
  const int64_t tok_stride = p.num_kv_heads * p.head_size;
  const int32_t first = p.block_table[static_cast<int64_t>(it.req) * p.bt_stride];
  prefetch_block(cache + first * p.block_size * tok_stride + it.kv_head * p.head_size, tok_stride,
                 std::min(p.block_size, p.seq_lens[it.req]), (it.kv_end - it.kv_head) * p.head_size);
}

// Decodes: one query token over a range of kv heads. The item walks the request's blocks twice,
// keys then values, reading each block row's heads of the range together: memory in long runs,
// which the prefetchers follow, unlike a head's 16 strided rows. Scores of the whole context are
// kept, so the softmax runs once per head with no rescaling per tile. `next`: the decode item this
// thread runs after this one (or null), whose first key block the last value block asks for.
template <typename T>
void run_item_decode(const Problem<T>& p, const Item& it, Scratch<T>& w, int64_t ctx_stride, const Item* next) {
  const int64_t d = p.head_size, group = p.num_heads / p.num_kv_heads;
  const int64_t kv0 = it.kv_head, num_kv = it.kv_end - it.kv_head, heads = num_kv * group;
  const int64_t ctx = p.seq_lens[it.req], token = p.qsl[it.req];
  const int64_t tok_stride = p.num_kv_heads * d, block_elems = p.block_size * tok_stride, width = num_kv * d;
  const int32_t* blocks = p.block_table + static_cast<int64_t>(it.req) * p.bt_stride;
  const int64_t num_blocks = (ctx + p.block_size - 1) / p.block_size;
  auto rows_of = [&](const T* cache, int64_t b) { return cache + blocks[b] * block_elems + kv0 * d; };
  auto block_len = [&](int64_t b) { return std::min(p.block_size, ctx - b * p.block_size); };

  // Each pass's first block is asked for ahead too, while other work runs: keys before the query is
  // set up, values before the softmax (1-5% faster decodes on an AMD EPYC Zen 5, most for short
  // contexts, where the first block is a larger part of the reading).
  prefetch_first_block(p, it, p.key_cache);
  DotQuery<T>* q = w.dq.data();  // [heads, d], query head kv0 * group + h in row h
  for (int64_t h = 0; h < heads; ++h) {
    const T* src = p.query + token * p.q_tok_stride + (kv0 * group + h) * p.q_head_stride;
    to_dot_query(src, d, q + h * d);
  }
  float* sc = w.ctx.data();  // [heads, ctx_stride]

  const auto ahead = [&](int64_t b) { return b + kPrefetchBlocks < num_blocks; };  // a block to ask for

  // Keys: every score of the context, four rows of the block at a time, every head of those rows
  // before the next four (the rows are read in order: 6-11% faster decodes on an AMD EPYC Zen 5 than
  // a head's 16 rows at a time, 3 KB apart). The same four rows of the block kPrefetchBlocks ahead
  // are asked for meanwhile.
  for (int64_t b = 0; b < num_blocks; ++b) {
    const int64_t nv = block_len(b);
    const T* k = rows_of(p.key_cache, b);
    const T* k_ahead = ahead(b) ? rows_of(p.key_cache, b + kPrefetchBlocks) : nullptr;
    const int64_t nv_ahead = ahead(b) ? block_len(b + kPrefetchBlocks) : 0;
    for (int64_t n = 0; n < nv; n += 4) {  // four keys at a time (past the block's end: repeats, unused)
      if (n < nv_ahead) prefetch_block(k_ahead + n * tok_stride, tok_stride, std::min<int64_t>(4, nv_ahead - n), width);
      for (int64_t g = 0; g < num_kv; ++g) {
        const T* kn[4];
        for (int r = 0; r < 4; ++r) kn[r] = k + std::min<int64_t>(n + r, nv - 1) * tok_stride + g * d;
        for (int64_t j = 0; j < group; ++j) {
          const int64_t h = g * group + j;
          float* sh = sc + h * ctx_stride + b * p.block_size;
          float four[4];
          dot4(q + h * d, kn, d, p.scale, four);
          for (int r = 0; r < 4 && n + r < nv; ++r) sh[n + r] = four[r];
        }
      }
    }
  }

  prefetch_first_block(p, it, p.value_cache);
  // Softmax per head, over the whole context at once; `inv` keeps each head's 1 / sum of exp.
  float* inv = w.s.data();  // [heads]
  const int64_t cw = ctx - ctx % kW;
  for (int64_t h = 0; h < heads; ++h) {
    float* sh = sc + h * ctx_stride;
    vf mv = splat(kNegInf);
    for (int64_t n = 0; n < cw; n += kW) mv = vmax(mv, loadv(sh + n));
    float m = hmax(mv);
    for (int64_t n = cw; n < ctx; ++n) m = std::max(m, sh[n]);
    vf lv{};
    for (int64_t n = 0; n < cw; n += kW) {
      const vf e = vexp(loadv(sh + n) - m);
      storev(sh + n, e);
      lv += e;
    }
    float total = hsum(lv);
    for (int64_t n = cw; n < ctx; ++n) {
      sh[n] = vexp(splat(sh[n] - m))[0];
      total += sh[n];
    }
    inv[h] = 1.0f / total;
  }

  // Values: the probability-weighted sum, a head's rows of a block at a time; the same head's rows
  // of the block kPrefetchBlocks ahead are asked for before them.
  float* acc = w.acc.data();  // [heads, d], lane order
  std::fill_n(acc, heads * d, 0.0f);
  for (int64_t b = 0; b < num_blocks; ++b) {
    const int64_t nv = block_len(b);
    const T* v = rows_of(p.value_cache, b);
    const T* v_ahead = ahead(b) ? rows_of(p.value_cache, b + kPrefetchBlocks) : nullptr;
    const int64_t nv_ahead = ahead(b) ? block_len(b + kPrefetchBlocks) : 0;
    if (b + 1 == num_blocks && next != nullptr) prefetch_first_block(p, *next, p.key_cache);
    for (int64_t g = 0; g < num_kv; ++g) {
      if (nv_ahead > 0) prefetch_block(v_ahead + g * d, tok_stride, nv_ahead, d);
      for (int64_t j = 0; j < group; ++j) {
        const int64_t h = g * group + j;
        accumulate_weighted(sc + h * ctx_stride + b * p.block_size, v + g * d, tok_stride, nv, d, acc + h * d);
      }
    }
  }
  for (int64_t h = 0; h < heads; ++h) {
    T* dst = p.out + token * p.o_tok_stride + (kv0 * group + h) * p.o_head_stride;
    from_lanes(acc + h * d, inv[h], d, dst);
  }
}

template <typename T>
void attention(const Problem<T>& p, int64_t num_reqs) {
  const int64_t group = p.num_heads / p.num_kv_heads;
  const int threads_max = at::get_num_threads();
  int64_t num_decodes = 0, max_ctx = 0;
  for (int64_t r = 0; r < num_reqs; ++r) {
    if (p.qsl[r + 1] - p.qsl[r] == 1) ++num_decodes, max_ctx = std::max(max_ctx, p.seq_lens[r]);
  }
  // A decode's kv heads in as few ranges as keep every thread busy (about four items per thread).
  const int64_t ranges = num_decodes == 0 ? 1
                         : std::clamp<int64_t>((4 * threads_max + num_decodes - 1) / num_decodes, 1, p.num_kv_heads);
  const int64_t per_range = (p.num_kv_heads + ranges - 1) / ranges;
  std::vector<Item> items;
  for (int64_t r = 0; r < num_reqs; ++r) {
    const int64_t q_len = p.qsl[r + 1] - p.qsl[r];
    const int64_t first_pos = p.seq_lens[r] - q_len;
    if (q_len == 1) {
      for (int64_t g = 0; g < p.num_kv_heads; g += per_range) {
        const int64_t g1 = std::min(p.num_kv_heads, g + per_range);
        items.push_back({static_cast<int32_t>(r), static_cast<int32_t>(g), static_cast<int32_t>(g1), 0,
                         static_cast<int32_t>(group), true, (g1 - g) * group * p.seq_lens[r],
                         (g1 - g) * group * p.seq_lens[r]});
      }
      continue;
    }
    const int64_t rows = q_len * group;
    // Small groups of rows keep together (dot path); everything else in lane-wide items.
    const int64_t width = rows <= kDotRows ? rows : kItemRows;
    const int64_t heaviest = std::min(rows, width) * (first_pos + q_len);  // the last rows see every key
    for (int64_t r0 = 0; r0 < rows; r0 += width) {
      const int64_t r1 = std::min(rows, r0 + width);
      for (int64_t g = 0; g < p.num_kv_heads; ++g) {
        items.push_back({static_cast<int32_t>(r), static_cast<int32_t>(g), static_cast<int32_t>(g + 1),
                         static_cast<int32_t>(r0), static_cast<int32_t>(r1), false,
                         (r1 - r0) * (first_pos + (r1 - 1) / group + 1), heaviest});
      }
    }
  }
  // Heaviest first, but a request's chunk items of one kv head together (they read the same keys and
  // values, which then stay in the cores' caches): ordered by the group's heaviest item, then their own.
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    if (a.group_cost != b.group_cost) return a.group_cost > b.group_cost;
    if (a.req != b.req) return a.req < b.req;
    if (a.kv_head != b.kv_head) return a.kv_head < b.kv_head;
    return a.cost > b.cost;
  });
  const int64_t num_items = static_cast<int64_t>(items.size());
  const int threads = static_cast<int>(std::min<int64_t>(threads_max, num_items));
  const int64_t ctx_stride = (max_ctx + 15) / 16 * 16;  // decode scores of a head, padded to whole vectors
  const int64_t decode_heads = per_range * group;
  // Items are handed out in order, heaviest first, to whichever thread is free; each thread claims
  // its next item before it runs the current one, so a decode can ask for the next decode's first
  // key block while it finishes (3-8% faster decodes on an AMD EPYC Zen 5, most for short contexts).
  std::atomic<int64_t> claimed{0};
#pragma omp parallel num_threads(threads) if (threads > 1)
  {
    Scratch<T> scratch(p.head_size, decode_heads, ctx_stride);
    int64_t k = claimed.fetch_add(1);
    while (k < num_items) {
      const int64_t after = claimed.fetch_add(1);
      const Item& it = items[k];
      k = after;
      if (it.decode) {
        const Item* next = after < num_items && items[after].decode ? &items[after] : nullptr;
        run_item_decode(p, it, scratch, ctx_stride, next);
      } else if (it.row_end - it.row_begin <= kDotRows) {
        run_item_dot(p, it, scratch);
      } else {
        run_item_lanes(p, it, scratch);
      }
    }
  }
}

std::vector<int64_t> as_int64(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.dim() == 1 && (t.scalar_type() == at::kInt || t.scalar_type() == at::kLong),
              name, " must be a 1-D int32 or int64 tensor");
  at::Tensor c = t.contiguous();
  std::vector<int64_t> v(c.numel());
  if (c.scalar_type() == at::kInt) {
    std::copy_n(c.data_ptr<int32_t>(), c.numel(), v.data());
  } else {
    std::copy_n(c.data_ptr<int64_t>(), c.numel(), v.data());
  }
  return v;
}

template <typename T>
Problem<T> make_problem(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                        const at::Tensor& block_table, double scale, at::Tensor& out) {
  Problem<T> p{};
  p.query = reinterpret_cast<const T*>(query.const_data_ptr());
  p.q_tok_stride = query.stride(0);
  p.q_head_stride = query.stride(1);
  p.key_cache = reinterpret_cast<const T*>(key_cache.const_data_ptr());
  p.value_cache = reinterpret_cast<const T*>(value_cache.const_data_ptr());
  p.block_table = block_table.const_data_ptr<int32_t>();
  p.bt_stride = block_table.stride(0);
  p.num_heads = query.size(1);
  p.num_kv_heads = key_cache.size(2);
  p.head_size = query.size(2);
  p.block_size = key_cache.size(1);
  p.scale = static_cast<float>(scale);
  p.out = reinterpret_cast<T*>(out.data_ptr());
  p.o_tok_stride = out.stride(0);
  p.o_head_stride = out.stride(1);
  return p;
}

void paged_attention(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                     const at::Tensor& query_start_loc, const at::Tensor& seq_lens, const at::Tensor& block_table,
                     double scale, at::Tensor out) {
  TORCH_CHECK(query.dim() == 3 && out.dim() == 3 && key_cache.dim() == 4, "query/out must be 3-D, caches 4-D");
  TORCH_CHECK(query.stride(2) == 1 && out.stride(2) == 1, "query and out need contiguous head_size");
  TORCH_CHECK(key_cache.is_contiguous() && value_cache.is_contiguous() && key_cache.sizes() == value_cache.sizes(),
              "key and value caches must be contiguous and of the same shape");
  TORCH_CHECK(query.scalar_type() == key_cache.scalar_type() && query.scalar_type() == value_cache.scalar_type() &&
                  query.scalar_type() == out.scalar_type(),
              "query, caches and out must share a dtype");
  TORCH_CHECK(query.sizes() == out.sizes(), "out must have the query's shape");
  TORCH_CHECK(query.size(2) == key_cache.size(3), "query and cache head sizes differ");
  TORCH_CHECK(query.size(1) % key_cache.size(2) == 0, "num_heads must be a multiple of num_kv_heads");
  TORCH_CHECK(block_table.dim() == 2 && block_table.scalar_type() == at::kInt && block_table.stride(1) == 1,
              "block_table must be a 2-D int32 tensor with contiguous rows");
  const std::vector<int64_t> qsl = as_int64(query_start_loc, "query_start_loc");
  const std::vector<int64_t> lens = as_int64(seq_lens, "seq_lens");
  const int64_t num_reqs = static_cast<int64_t>(lens.size());
  TORCH_CHECK(static_cast<int64_t>(qsl.size()) == num_reqs + 1, "query_start_loc must have num_reqs + 1 entries");
  TORCH_CHECK(qsl[num_reqs] <= query.size(0), "query_start_loc runs past the query");
  TORCH_CHECK(block_table.size(0) >= num_reqs, "block_table has fewer rows than requests");
  const int64_t block_size = key_cache.size(1), num_blocks = key_cache.size(0);
  for (int64_t r = 0; r < num_reqs; ++r) {
    const int64_t q_len = qsl[r + 1] - qsl[r];
    TORCH_CHECK(q_len >= 0 && q_len <= lens[r], "request ", r, ": query length must be in [0, seq_len]");
    const int64_t used = (lens[r] + block_size - 1) / block_size;
    TORCH_CHECK(used <= block_table.size(1), "request ", r, ": seq_len needs more blocks than block_table has");
    const int32_t* ids = block_table.const_data_ptr<int32_t>() + r * block_table.stride(0);
    for (int64_t b = 0; b < used; ++b) {
      TORCH_CHECK(ids[b] >= 0 && ids[b] < num_blocks, "request ", r, ": block id ", ids[b], " is not in the cache");
    }
  }
  if (num_reqs == 0 || qsl[num_reqs] == 0) return;
  switch (query.scalar_type()) {
    case at::kFloat: {
      auto p = make_problem<float>(query, key_cache, value_cache, block_table, scale, out);
      p.qsl = qsl.data(), p.seq_lens = lens.data();
      attention(p, num_reqs);
      break;
    }
    case at::kBFloat16: {
      auto p = make_problem<c10::BFloat16>(query, key_cache, value_cache, block_table, scale, out);
      p.qsl = qsl.data(), p.seq_lens = lens.data();
      attention(p, num_reqs);
      break;
    }
    case at::kHalf: {
      auto p = make_problem<c10::Half>(query, key_cache, value_cache, block_table, scale, out);
      p.qsl = qsl.data(), p.seq_lens = lens.data();
      attention(p, num_reqs);
      break;
    }
    default:
      TORCH_CHECK(false, "paged_attention supports float32, bfloat16 and float16, got ", query.scalar_type());
  }
}

template <typename S, typename D>
void copy_rows(const at::Tensor& src, at::Tensor& cache, const int64_t* slots, int64_t num_tokens) {
  const int64_t heads = src.size(1), d = src.size(2);
  const int64_t tok_stride = src.stride(0), head_stride = src.stride(1);
  const S* s = reinterpret_cast<const S*>(src.const_data_ptr());
  D* c = reinterpret_cast<D*>(cache.data_ptr());
  const int64_t row = heads * d;
  const int threads = num_tokens * row >= (1 << 16) ? at::get_num_threads() : 1;
#pragma omp parallel for num_threads(threads) if (threads > 1)
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int64_t slot = slots[t];
    if (slot < 0) continue;  // padding token: not written
    for (int64_t h = 0; h < heads; ++h) {
      const S* from = s + t * tok_stride + h * head_stride;
      D* to = c + slot * row + h * d;
      if constexpr (std::is_same_v<S, D>) {
        std::memcpy(to, from, d * sizeof(D));
      } else {
#pragma omp simd
        for (int64_t k = 0; k < d; ++k) to[k] = static_cast<D>(static_cast<float>(from[k]));
      }
    }
  }
}

template <typename S>
void copy_rows_to(const at::Tensor& src, at::Tensor& cache, const int64_t* slots, int64_t num_tokens) {
  switch (cache.scalar_type()) {
    case at::kFloat: return copy_rows<S, float>(src, cache, slots, num_tokens);
    case at::kBFloat16: return copy_rows<S, c10::BFloat16>(src, cache, slots, num_tokens);
    case at::kHalf: return copy_rows<S, c10::Half>(src, cache, slots, num_tokens);
    default: TORCH_CHECK(false, "reshape_and_cache: cache dtype must be float32, bfloat16 or float16");
  }
}

void reshape_and_cache(const at::Tensor& key, const at::Tensor& value, at::Tensor key_cache, at::Tensor value_cache,
                       const at::Tensor& slot_mapping) {
  TORCH_CHECK(key.dim() == 3 && value.sizes() == key.sizes(), "key and value must be [num_tokens, kv_heads, head]");
  TORCH_CHECK(key.stride(2) == 1 && value.stride(2) == 1, "key and value need contiguous head_size");
  TORCH_CHECK(key_cache.is_contiguous() && value_cache.is_contiguous() && key_cache.dim() == 4 &&
                  key_cache.sizes() == value_cache.sizes() && key_cache.scalar_type() == value_cache.scalar_type(),
              "caches must be contiguous, 4-D and alike");
  TORCH_CHECK(key_cache.size(2) == key.size(1) && key_cache.size(3) == key.size(2), "cache and key shapes differ");
  TORCH_CHECK(key.scalar_type() == value.scalar_type(), "key and value must share a dtype");
  const std::vector<int64_t> slots = as_int64(slot_mapping, "slot_mapping");
  const int64_t num_tokens = static_cast<int64_t>(slots.size());
  TORCH_CHECK(num_tokens <= key.size(0), "slot_mapping is longer than key");
  const int64_t num_slots = key_cache.size(0) * key_cache.size(1);
  for (int64_t s : slots) TORCH_CHECK(s < num_slots, "slot ", s, " is past the cache's ", num_slots, " slots");
  auto write = [&](const at::Tensor& src, at::Tensor& cache) {
    switch (src.scalar_type()) {
      case at::kFloat: return copy_rows_to<float>(src, cache, slots.data(), num_tokens);
      case at::kBFloat16: return copy_rows_to<c10::BFloat16>(src, cache, slots.data(), num_tokens);
      case at::kHalf: return copy_rows_to<c10::Half>(src, cache, slots.data(), num_tokens);
      default: TORCH_CHECK(false, "reshape_and_cache: key dtype must be float32, bfloat16 or float16");
    }
  };
  write(key, key_cache);
  write(value, value_cache);
}

}  // namespace

TORCH_LIBRARY(enginetui_cpu, m) {
  m.def("paged_attention(Tensor query, Tensor key_cache, Tensor value_cache, Tensor query_start_loc, "
        "Tensor seq_lens, Tensor block_table, float scale, Tensor(a!) out) -> ()");
  m.def("reshape_and_cache(Tensor key, Tensor value, Tensor(a!) key_cache, Tensor(b!) value_cache, "
        "Tensor slot_mapping) -> ()");
}

TORCH_LIBRARY_IMPL(enginetui_cpu, CPU, m) {
  m.impl("paged_attention", &paged_attention);
  m.impl("reshape_and_cache", &reshape_and_cache);
}
