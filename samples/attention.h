// The samples' attention kernels: flash attention's forward pass and its
// backward pass, with the maps, launches and references they take.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "dsl/builder.h"
#include "dsl/ops.h"
#include "samples/maps.h"
#include "samples/row_kernels.h"
#include "tessel/tessel.h"

namespace samples {

using namespace tessel;  // NOLINT: kernels read like the DSL's documentation

// --- Attention forward (flash attention): O = softmax(Q K^T * scale) V for
// each of `heads` heads, Q, K, V and O [heads, len, d] row-major (K and V
// [heads / group, len, d] where query heads share KV heads in groups). Each
// program takes [bm, d] blocks of one head's queries and walks its KV head's
// keys in [bn, d] blocks, keeping the row softmax online (a running maximum
// m and sum l, the output rescaled as m grows). On sm_90a both dots run on
// wgmma: S = Q K^T from shared memory, and P V with P (S's exponentials
// rounded to `in`) taken from the registers S was computed in; S, P, m and
// l never leave registers. The key blocks that every query of the block
// sees in full run first, without masks; the rest (the last, ragged block;
// with `causal`, the blocks across the diagonal) after them, masked. With
// `causal` the query blocks of even heads are taken last first, the longest
// first, and those of odd heads first first.
struct AttnConfig {
  int64_t d = 64;              // head dimension
  int64_t group = 1;           // query heads per KV head (grouped-query attention): K and V [heads / group, len, d]
  int64_t bm = 128, bn = 128;  // query rows per program, keys per step
  DType in = bf16;             // Q, K and V: bf16 or f16
  DType out = bf16;            // O
  bool causal = false;         // query i sees keys 0..i
  int stages = 2;              // of the key loops' pipelines
  // Warp-specialized (12 warps): two consumer warpgroups take query blocks
  // of bm = 64 rows in turn, and a producer warpgroup loads their keys
  // and values (LoopOptions::warp_specialize), in one key loop that masks
  // the blocks past those every query sees.
  bool warp_specialize = false;
  // With warp_specialize: both consumer warpgroups take each query block
  // (bm = 128, 64 rows each), every key and value block loaded once for
  // both (LoopOptions::cooperative).
  bool cooperative = false;
  // Warps of a program that is not warp-specialized: 0 for one warpgroup
  // per 64 query rows; 4 puts a 128-row block on one warpgroup (twice the
  // registers a thread, programs half as large: two of them share an SM,
  // one's softmax under the other's products).
  int warps = 0;
  // Also writes each query's log2-sum-exp, log2 sum_j exp(q k_j * scale)
  // (f32 [heads, len], the kernel's last argument): what the backward pass
  // (attention_bwd_kernel) recomputes P from.
  bool lse = false;
};
inline int attention_warps(const AttnConfig& c) {
  return c.warp_specialize ? 12 : c.warps > 0 ? c.warps : static_cast<int>(c.bm / 16);
}
// The configuration the benchmark found fastest on one H200 at most
// shapes (within 2.4 % of the fastest at the others): 128 query rows a
// program, with a deep key pipeline. For d <= 64, 64 keys a step: in four
// stages on two warpgroups, or with the mask in three on one warpgroup
// (two programs to an SM; 20-36 % less time than on two warpgroups at len
// 1024 and 4096); else 128 in three, warp-specialized (cooperative: a
// producer warpgroup loads each key and value block once for both).
inline AttnConfig attention_config(int64_t d, bool causal = false) {
  if (d <= 64 && causal) return {.d = d, .bn = 64, .causal = true, .stages = 3, .warps = 4};
  if (d <= 64) return {.d = d, .bn = 64, .causal = causal, .stages = 4};
  return {.d = d, .bn = 128, .causal = causal, .stages = 3, .warp_specialize = true, .cooperative = true};
}

inline absl::StatusOr<Kernel> attention_kernel(const AttnConfig& c, std::string name = "attention") {
  KernelBuilder k(std::move(name));
  Value q = k.tensor_map(c.in, {1, c.bm, c.d}, "q", Swizzle::k128B);
  Value kt = k.tensor_map(c.in, {1, c.bn, c.d}, "k", Swizzle::k128B);
  Value v = k.tensor_map(c.in, {1, c.bn, c.d}, "v", Swizzle::k128B);
  Value o = k.tensor_map(c.out, {1, c.bm, c.d}, "o", Swizzle::k128B);
  Value len = k.arg(i32, "len"), heads = k.arg(i32, "heads");
  Value scale = k.arg(f32, "scale");
  Value lse = c.lse ? k.arg(ptr(f32), "lse") : Value();
  Value log2_scale = scale * static_cast<float>(M_LOG2E);  // exp(x * scale) = exp2(x * log2_scale)
  Value blocks = cdiv(len, c.bm);
  k.for_each_tile(
      heads * blocks,
      [&](Value t) {
        Value h = t / blocks, kv = c.group == 1 ? h : h / c.group;  // the query head, its KV head
        // With the mask, a block's work grows with its row: even heads take
        // their blocks longest first, odd ones shortest first, so that the
        // programs, which take tiles round-robin, get even shares.
        Value b = t % blocks;
        Value row = (c.causal ? select(h % 2 == 0, blocks - 1 - b, b) : b) * c.bm;
        Value qt = reshape(tma_load(q, {h, row, 0}), {c.bm, c.d});  // [bm, d], shared memory
        Var m = k.var(k.full({c.bm}, -INFINITY, f32));              // [bm] running maximum
        Var l = k.var(k.zeros({c.bm}, f32));                        // [bm] running sum
        Var acc = k.var(k.zeros({c.bm, c.d}, f32));                 // [bm, d], registers
        Value full = (c.causal ? row : len) / c.bn * c.bn;
        auto step = [&](Value j, bool masked) {
          Value s = dot(qt, trans(reshape(tma_load(kt, {kv, j, 0}), {c.bn, c.d})), k.zeros({c.bm, c.bn}, f32));
          auto mask = [&] {
            Value key = expand_dims(j + k.arange(0, c.bn), 0);  // [1, bn]
            Value seen = key < len;
            if (c.causal) seen = seen & (key <= expand_dims(row + k.arange(0, c.bm), 1));
            return select(seen, s, -INFINITY);
          };
          if (masked && c.warp_specialize) {
            // One loop: only the blocks past `full` mask.
            Var kept = k.var(s);
            k.if_(j + c.bn > full, [&] { kept = mask(); });
            s = kept;
          } else if (masked) {
            s = mask();
          }
          Value m_new = maximum(m, max(s, 1));
          Value m_scaled = m_new * log2_scale;
          Value p = exp2(fma(s, log2_scale, expand_dims(-m_scaled, 1)), MathForm::kFast);  // [bm, bn] f32
          Value alpha = exp2(m * log2_scale - m_scaled, MathForm::kFast);                  // [bm]
          l = l * alpha + sum(p, 1);
          acc = dot(cast(p, c.in), reshape(tma_load(v, {kv, j, 0}), {c.bn, c.d}), acc * expand_dims(alpha, 1));
          m = m_new;
        };
        // Keys below `full` are seen by every query of the block. (The
        // producer of a warp-specialized loop runs one key loop.)
        Value end = c.causal ? minimum(len, row + c.bm) : len;
        if (c.warp_specialize) {
          k.for_range(0, end, c.bn, [&](Value j) { step(j, true); }, {.stages = c.stages});
        } else {
          k.for_range(0, full, c.bn, [&](Value j) { step(j, false); }, {.stages = c.stages});
          k.for_range(full, end, c.bn, [&](Value j) { step(j, true); }, {.stages = c.stages});
        }
        tma_store(o, {h, row, 0}, reshape(cast(acc * expand_dims(1.0f / l, 1), c.out), {1, c.bm, c.d}));
        if (c.lse) {
          Value query = row + k.arange(0, c.bm);
          store(lse + h * len + query, m * log2_scale + log2(l), query < len);
        }
      },
      {.warp_specialize = c.warp_specialize, .cooperative = c.cooperative});
  return k.build();
}

// OK where `heads` query heads share KV heads in groups of `group`, else
// the error, named for `who`.
inline absl::Status check_kv_groups(const char* who, int64_t heads, int64_t group) {
  if (group >= 1 && heads % group == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(who, ": ", heads, " query heads do not share KV heads in groups of ", group));
}

// The attention kernel's maps of Q and O [heads, len, d] and K and V
// [heads / c.group, len, d] in `q`, `k`, `v` and `o`.
struct AttnMaps {
  TensorMap q, k, v, o;
};
// (`encode` makes them: samples/maps.h.)
inline absl::StatusOr<AttnMaps> attention_maps(const MapEncoder& encode, const AttnConfig& c, const Buffer& q,
                                               const Buffer& k, const Buffer& v, const Buffer& o, int64_t heads,
                                               int64_t len) {
  TESSEL_RETURN_IF_ERROR(check_kv_groups("attention", heads, c.group));
  auto map = [&](DType dtype, const Buffer& buf, int64_t maps_heads, int64_t rows) {
    return encode(dtype, buf, {maps_heads, len, c.d}, {1, rows, c.d}, Swizzle::k128B);
  };
  const int64_t kv_heads = heads / c.group;
  absl::StatusOr<TensorMap> qm = map(c.in, q, heads, c.bm), km = map(c.in, k, kv_heads, c.bn),
                            vm = map(c.in, v, kv_heads, c.bn), om = map(c.out, o, heads, c.bm);
  for (const absl::StatusOr<TensorMap>* m : {&qm, &km, &vm, &om}) {
    if (!m->ok()) return m->status();
  }
  return AttnMaps{*qm, *km, *vm, *om};
}
inline absl::StatusOr<AttnMaps> attention_maps(const Device& device, const AttnConfig& c, const Buffer& q,
                                               const Buffer& k, const Buffer& v, const Buffer& o, int64_t heads,
                                               int64_t len) {
  return attention_maps(device_maps(device), c, q, k, v, o, heads, len);
}
// The [bm, d] query blocks of all heads: the persistent loop's tiles.
inline int64_t attention_tiles(const AttnConfig& c, int64_t heads, int64_t len) {
  return heads * ((len + c.bm - 1) / c.bm);
}
// How attention_kernel(c), compiled to `fn` with attention_warps(c) warps,
// runs over `heads` heads of `len` rows: as many programs as fit on the
// device at once (Function::persistent_grid), at most one a query block.
inline absl::StatusOr<LaunchConfig> attention_launch(const Function& fn, const AttnConfig& c, int64_t heads,
                                                     int64_t len, const Stream* stream = nullptr) {
  absl::StatusOr<int> programs = fn.persistent_grid();
  if (!programs.ok()) return programs.status();
  return LaunchConfig{.grid = static_cast<int>(std::min<int64_t>(attention_tiles(c, heads, len), *programs)),
                      .num_warps = attention_warps(c),
                      .stream = stream};
}
// Launches it with its arguments in the kernel's order (`lse`: the
// log2-sum-exp's f32 [heads, len] where the kernel has AttnConfig::lse).
inline absl::Status launch_attention(const Function& fn, const LaunchConfig& config, const AttnMaps& maps,
                                     int64_t heads, int64_t len, float scale, const Buffer* lse = nullptr) {
  const int32_t n = static_cast<int32_t>(len), h = static_cast<int32_t>(heads);
  if (lse != nullptr) return fn.launch(config, maps.q, maps.k, maps.v, maps.o, n, h, scale, *lse);
  return fn.launch(config, maps.q, maps.k, maps.v, maps.o, n, h, scale);
}

// softmax(Q K^T * scale) V of query `i` of one head (Q, K, V [len, d]
// row-major, as doubles) into out[0, d); with `causal`, over keys 0..i.
inline void attention_row(const double* q, const double* k, const double* v, int64_t len, int64_t d, double scale,
                          bool causal, int64_t i, double* out) {
  const int64_t keys = causal ? i + 1 : len;
  std::vector<double> s(keys);
  double top = -INFINITY, total = 0;
  for (int64_t j = 0; j < keys; ++j) {
    s[j] = 0;
    for (int64_t c = 0; c < d; ++c) s[j] += q[i * d + c] * k[j * d + c];
    top = std::max(top, s[j] *= scale);
  }
  for (int64_t j = 0; j < keys; ++j) total += s[j] = std::exp(s[j] - top);
  for (int64_t c = 0; c < d; ++c) out[c] = 0;
  for (int64_t j = 0; j < keys; ++j) {
    for (int64_t c = 0; c < d; ++c) out[c] += s[j] / total * v[j * d + c];
  }
}

// --- Attention's backward pass. Given dO, the gradient of a loss with
// respect to O = softmax(Q K^T * scale) V, it computes dQ, dK and dV, each
// [heads, len, d]. Per query i and key j, with P = softmax(S * scale) from
// the forward's log2-sum-exp (AttnConfig::lse) and D_i = sum_c dO_ic O_ic:
//   dV = P^T dO,  dS = P * (dO V^T - D),  dQ = dS K * scale,  dK = dS^T Q * scale.
// Two kernels, attention_bwd_delta_kernel for D, then attention_bwd_kernel;
// with `split`, a third (attention_bwd_dq_kernel) for dQ.
// compile_attention_bwd, plan_attention_bwd and launch_attention_bwd run
// them.
struct AttnBwdConfig {
  int64_t d = 64;      // head dimension
  int64_t group = 1;   // query heads per KV head: K, V, dK and dV [heads / group, len, d]
  int64_t block = 64;  // query and key rows per block: one warpgroup per 64
  int64_t step = 0;    // rows of each loop step (0: the block's), dividing the block
  DType in = bf16;     // Q, K, V, O and dO: bf16 or f16
  DType out = bf16;    // dQ, dK and dV
  bool causal = false;
  int stages = 2;    // of the loops' pipelines
  int programs = 1;  // to run at once on one SM (CompileOptions::min_programs)
  // FlashAttention-2's split of the work: the key loop adds each step's
  // share of dQ (dS K, dS staged from the registers' dS^T) into an f32
  // accumulator through the copy engine, and a third kernel scales and
  // casts it; five products a pair of blocks instead of seven. Needs the
  // step to be the block or 64 (a 64-row share on two warpgroups splits d).
  bool split = false;
};
inline int attention_bwd_warps(const AttnBwdConfig& c) { return static_cast<int>(c.block / 16); }
// The rows of each loop step.
inline int64_t attention_bwd_step(const AttnBwdConfig& c) { return c.step > 0 ? c.step : c.block; }
// How to compile attention_bwd_kernel(c).
inline CompileOptions attention_bwd_options(const AttnBwdConfig& c) {
  CompileOptions o;
  o.num_warps = attention_bwd_warps(c);
  o.min_programs = c.programs;
  return o;
}
// The configuration the benchmark found fastest on one H200 for sequences
// of `len` rows (0: not known). At d = 64, the split with 128-row blocks
// and three stages, 12-26 % faster than the seven-product kernel at every
// length, masked or not. At d = 128, 128-row blocks on two warpgroups
// stepped through 64 rows at a time with three stages: the split from len
// 8192 without the mask and above it with the mask (4 % less time at len
// 8192, 5-8 % at 16384), the seven-product kernel below (the split takes
// 0.5-7 % more time at len 1024 and 4096, and 3 % more at 8192 masked).
inline AttnBwdConfig attention_bwd_config(int64_t d, bool causal = false, int64_t len = 0) {
  if (d <= 64) return {.d = d, .block = 128, .step = 128, .causal = causal, .stages = 3, .split = true};
  return {.d = d, .block = 128, .step = 64, .causal = causal, .stages = 3, .split = len > (causal ? 8192 : 4096)};
}

// The backward's kernels over rows of [rows, d] tensors take
// kAttnDeltaRows rows a tile: tile t's row indices [R], its elements'
// offsets [R, d] and which of them lie inside.
inline constexpr int kAttnDeltaRows = 32;
struct AttnRowTile {
  Value r, offs, inside;
};
inline AttnRowTile attention_row_tile(KernelBuilder& k, int64_t d, Value t, Value rows) {
  Value r = t * kAttnDeltaRows + k.arange(0, kAttnDeltaRows);
  Value offs = expand_dims(r, 1) * static_cast<int32_t>(d) + expand_dims(k.arange(0, d), 0);
  return {r, offs, offs < rows * static_cast<int32_t>(d)};
}

// D [rows] (f32) = the row sums of dO * O, both [rows, d] of c.in; with
// c.split, dQ's accumulator (f32 [rows, d]) cleared too.
inline absl::StatusOr<Kernel> attention_bwd_delta_kernel(const AttnBwdConfig& c) {
  KernelBuilder k("attention_bwd_delta");
  Value dout = k.arg(ptr(c.in), "dout"), out = k.arg(ptr(c.in), "o"), delta = k.arg(ptr(f32), "delta");
  std::optional<Value> dq_acc;
  if (c.split) dq_acc = k.arg(ptr(f32), "dq_acc");
  Value rows = k.arg(i32, "rows");
  k.for_each_tile(cdiv(rows, kAttnDeltaRows), [&](Value t) {
    const auto [r, offs, inside] = attention_row_tile(k, c.d, t, rows);
    Value prod = cast(load(dout + offs, inside, 0), f32) * cast(load(out + offs, inside, 0), f32);
    store(delta + r, sum(prod, 1), r < rows);
    if (dq_acc) store(*dq_acc + offs, k.zeros({kAttnDeltaRows, c.d}, f32), inside);
  });
  return k.build();
}

// With c.split: dQ (c.out) = its accumulator (f32) * scale, both [rows, d].
inline absl::StatusOr<Kernel> attention_bwd_dq_kernel(const AttnBwdConfig& c) {
  KernelBuilder k("attention_bwd_dq");
  Value dq_acc = k.arg(ptr(f32), "dq_acc"), dq = k.arg(ptr(c.out), "dq");
  Value scale = k.arg(f32, "scale"), rows = k.arg(i32, "rows");
  k.for_each_tile(cdiv(rows, kAttnDeltaRows), [&](Value t) {
    const auto [r, offs, inside] = attention_row_tile(k, c.d, t, rows);
    store(dq + offs, cast(load(dq_acc + offs, inside, 0.0f) * scale, c.out), inside);
  });
  return k.build();
}

// Each program takes key block b of a head for dK and dV (a loop over the
// query blocks that see it) and query block b for dQ (a loop over the key
// blocks it sees): S and dP are recomputed in both, so that every product
// takes its first operand from registers and nothing is added atomically.
// S^T and dP^T are computed as [keys, queries] in the first loop, so that
// P^T and dS^T are already in the layout their products read. With
// c.split there is no second loop: the first adds dS K into `dq` (then
// dQ's f32 accumulator). Programs take a head's blocks one after another,
// so that the heads the running programs add into stay in L2. With
// grouped heads a program's key block is one of a KV head's: its first
// loop walks the query steps of each head of the group in turn (one loop
// and one pipeline over them all), summing their shares of dK and dV in
// registers; without the split, dQ's blocks then come in a second pass over
// the query heads' blocks (inside a loop over the group, ptxas spilled
// 452 bytes at d = 128, against 4 this way).
inline absl::StatusOr<Kernel> attention_bwd_kernel(const AttnBwdConfig& c, std::string name = "attention_bwd") {
  // A program's block is n rows (its keys in the first loop, its queries in
  // the second); each loop steps over the other side m rows at a time.
  const int64_t n = c.block, m = attention_bwd_step(c);
  if (m % 16 != 0 || n % m != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention_bwd_kernel: step (", m, ") must be a multiple of 16 dividing the block (", n, ")"));
  }
  if (c.group < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention_bwd_kernel: group (query heads per KV head) must be positive, got ", c.group));
  }
  if (c.split && m != n && m != 64) {
    return absl::InvalidArgumentError(absl::StrCat("attention_bwd_kernel: split needs the step (", m,
                                                   ") to be 64 or the block (", n,
                                                   "): dQ's share of a step is its rows, 64 a warpgroup"));
  }
  KernelBuilder k(std::move(name));
  auto map = [&](DType dtype, int64_t rows, const char* arg) {
    return k.tensor_map(dtype, {1, rows, c.d}, arg, Swizzle::k128B);
  };
  Value q = map(c.in, n, "q"), kt = map(c.in, n, "k"), v = map(c.in, n, "v"), dout = map(c.in, n, "dout");
  Value q_step = map(c.in, m, "q_step"), k_step = map(c.in, m, "k_step"), v_step = map(c.in, m, "v_step"),
        dout_step = map(c.in, m, "dout_step");
  Value dq = c.split ? map(f32, m, "dq_acc") : map(c.out, n, "dq");
  Value dk = map(c.out, n, "dk"), dv = map(c.out, n, "dv");
  Value len = k.arg(i32, "len"), heads = k.arg(i32, "heads");
  Value scale = k.arg(f32, "scale");
  // The rows' statistics, [heads * len] f32, read a block or a step at a
  // time by the copy engine, so that the first loop's pipeline fetches them
  // ahead with Q and dO.
  Value lse = k.tensor_map(f32, {n}, "lse"), delta = k.tensor_map(f32, {n}, "delta");
  Value lse_step = k.tensor_map(f32, {m}, "lse_step"), delta_step = k.tensor_map(f32, {m}, "delta_step");
  Value log2_scale = scale * static_cast<float>(M_LOG2E);
  Value blocks = cdiv(len, n);
  auto box = [&](Value map, int64_t rows, Value h, Value row) {
    return reshape(tma_load(map, {h, row, 0}), {rows, c.d});
  };
  auto store_block = [&](Value map, Value h, Value row, Value x) {
    tma_store(map, {h, row, 0}, reshape(cast(x, c.out), {1, n, c.d}));
  };
  // Per query row of head h from `row` (rows past `len` read the next
  // head's or zeros; their columns are masked): its log2-sum-exp and D.
  auto row_stats = [&](Value lse_map, Value delta_map, Value h, Value row) {
    return std::pair{tma_load(lse_map, {h * len + row}), tma_load(delta_map, {h * len + row})};
  };
  // dQ of queries b0 .. b0 + n of head h (of KV head kvh).
  auto dq_block = [&](Value h, Value kvh, Value b0) {
    Value qb = box(q, n, h, b0), dob = box(dout, n, h, b0);
    auto [lse_i, d_i] = row_stats(lse, delta, h, b0);
    Value query = expand_dims(b0 + k.arange(0, n), 1);  // [n, 1]
    Var dqb = k.var(k.zeros({n, c.d}, f32));
    k.for_range(0, c.causal ? minimum(len, b0 + n) : len, m,
                [&](Value j0) {
                  Value kb = box(k_step, m, kvh, j0), vb = box(v_step, m, kvh, j0);
                  Value key = expand_dims(j0 + k.arange(0, m), 0);  // [1, m]
                  Value seen = key < len;
                  if (c.causal) seen = seen & (key <= query);
                  Value s = dot(qb, trans(kb), k.zeros({n, m}, f32));
                  Value p = select(seen, exp2(fma(s, log2_scale, expand_dims(-lse_i, 1)), MathForm::kFast), 0.0f);
                  Value dp = dot(dob, trans(vb), k.zeros({n, m}, f32));
                  dqb = dot(cast(p * (dp - expand_dims(d_i, 1)), c.in), kb, dqb);
                },
                {.stages = c.stages});
    store_block(dq, h, b0, dqb * scale);
  };
  k.for_each_tile(heads / c.group * blocks, [&](Value t) {
    // With the split and the mask, a key block's work shrinks with its row:
    // even heads take their blocks longest first, odd ones shortest first,
    // so that the programs, which take tiles round-robin, get even shares.
    Value kvh = t / blocks, b = t % blocks;  // the KV head (the query head without groups)
    Value b0 = (c.split && c.causal ? select(kvh % 2 == 0, b, blocks - 1 - b) : b) * n;
    {  // dK and dV of keys b0 .. b0 + n
      Value kb = box(kt, n, kvh, b0), vb = box(v, n, kvh, b0);
      Value key = expand_dims(b0 + k.arange(0, n), 1);  // [n, 1]
      Var dkb = k.var(k.zeros({n, c.d}, f32)), dvb = k.var(k.zeros({n, c.d}, f32));
      // Every query of a step from `whole` to `full` sees every key of the
      // block, so only the steps before (the block's diagonal, under the
      // mask) and after (past `len`) mask. (A branch in the second loop
      // measured slower than its select.)
      Value whole = c.causal ? b0 + n : Value(k.constant(0, i32));
      Value full = len / static_cast<int32_t>(m) * static_cast<int32_t>(m);
      Value first = c.causal ? b0 : Value(k.constant(0, i32));
      // The step of query head h from row i0.
      auto step = [&](Value h, Value i0) {
        Value qb = box(q_step, m, h, i0), dob = box(dout_step, m, h, i0);
        auto [lse_i, d_i] = row_stats(lse_step, delta_step, h, i0);
        Value st = dot(kb, trans(qb), k.zeros({n, m}, f32));  // S^T [keys, queries]
        Var pt = k.var(exp2(fma(st, log2_scale, expand_dims(-lse_i, 0)), MathForm::kFast));
        k.if_((i0 < whole) | (i0 >= full), [&] {
          Value query = expand_dims(i0 + k.arange(0, m), 0);  // [1, m]
          Value seen = query < len;
          if (c.causal) seen = seen & (key <= query);
          pt = select(seen, Value(pt), 0.0f);
        });
        dvb = dot(cast(pt, c.in), dob, dvb);
        Value dpt = dot(vb, trans(dob), k.zeros({n, m}, f32));     // dP^T
        Value dst = cast(pt * (dpt - expand_dims(d_i, 0)), c.in);  // dS^T
        dkb = dot(dst, qb, dkb);
        if (c.split) {
          Value share = dot(trans(dst), kb, k.zeros({m, c.d}, f32));  // of dQ / scale
          tma_reduce(AtomicOp::kAdd, dq, {h, i0, 0}, reshape(share, {1, m, c.d}));
        }
      };
      if (c.group == 1) {
        k.for_range(first, len, m, [&](Value i0) { step(kvh, i0); }, {.stages = c.stages});
      } else {  // u counts the steps of the group's heads, one head's after another
        Value steps = cdiv(len - first, m);
        k.for_range(k.constant(0, i32), steps * static_cast<int32_t>(c.group), 1,
                    [&](Value u) {
                      Value g = u / steps;
                      step(kvh * static_cast<int32_t>(c.group) + g, first + (u - g * steps) * static_cast<int32_t>(m));
                    },
                    {.stages = c.stages});
      }
      store_block(dk, kvh, b0, dkb * scale);
      store_block(dv, kvh, b0, dvb);
    }
    if (c.split || c.group > 1) return;
    dq_block(kvh, kvh, b0);
  });
  // With groups, the query blocks' dQ in a second pass over the tiles.
  if (!c.split && c.group > 1) {
    k.for_each_tile(heads * blocks, [&](Value t) {
      Value h = t / blocks;
      dq_block(h, h / static_cast<int32_t>(c.group), t % blocks * n);
    });
  }
  return k.build();
}

// The backward kernel's maps: Q, K, V and dO [heads, len, d] in boxes of a
// block's rows and of a step's, dQ, dK and dV in a block's (with c.split,
// dQ's f32 accumulator in a step's), and the forward's log2-sum-exp and D
// [heads, len] in both.
struct AttnBwdMaps {
  TensorMap q, k, v, dout, q_step, k_step, v_step, dout_step, dq, dk, dv, lse, delta, lse_step, delta_step;
};
inline absl::StatusOr<AttnBwdMaps> attention_bwd_maps(const Device& device, const AttnBwdConfig& c,
                                                      const std::vector<const Buffer*>& buffers, int64_t heads,
                                                      int64_t len) {
  if (buffers.size() != 9) {
    return absl::InvalidArgumentError(
        "attention_bwd_maps: needs Q, K, V, dO, dQ (or its accumulator), dK, dV, the log2-sum-exp and D");
  }
  TESSEL_RETURN_IF_ERROR(check_kv_groups("attention backward", heads, c.group));
  // In AttnBwdMaps' order; K, V, dK and dV (buffers 1, 2, 5 and 6) of the
  // KV heads.
  std::vector<absl::StatusOr<TensorMap>> made;
  auto rows = [&](int i, DType dtype, int64_t r) {
    const int64_t of = i == 1 || i == 2 || i == 5 || i == 6 ? heads / c.group : heads;
    made.push_back(device.tensor_map(dtype, *buffers[i], {of, len, c.d}, {1, r, c.d}, Swizzle::k128B));
  };
  for (int64_t r : {c.block, attention_bwd_step(c)}) {
    for (int i = 0; i < 4; ++i) rows(i, c.in, r);
  }
  if (c.split) {
    rows(4, f32, attention_bwd_step(c));
  } else {
    rows(4, c.out, c.block);
  }
  for (int i = 5; i < 7; ++i) rows(i, c.out, c.block);
  for (int64_t r : {c.block, attention_bwd_step(c)}) {
    for (int i = 7; i < 9; ++i) made.push_back(device.tensor_map(f32, *buffers[i], {heads * len}, {r}));
  }
  std::vector<TensorMap> maps;
  for (absl::StatusOr<TensorMap>& m : made) {
    if (!m.ok()) return m.status();
    maps.push_back(*std::move(m));
  }
  return AttnBwdMaps{maps[0], maps[1], maps[2],  maps[3],  maps[4],  maps[5],  maps[6], maps[7],
                     maps[8], maps[9], maps[10], maps[11], maps[12], maps[13], maps[14]};
}

// The backward pass's kernels for `c`, compiled for one device.
struct AttnBwdKernels {
  AttnBwdConfig config;
  Function delta, grads;
  std::optional<Function> dq;  // with c.split
};
inline absl::StatusOr<AttnBwdKernels> compile_attention_bwd(const Device& device, const AttnBwdConfig& c) {
  CompileOptions rows;
  rows.num_warps = 4;
  auto build = [&](absl::StatusOr<Kernel> kernel, const CompileOptions& options) -> absl::StatusOr<Function> {
    if (!kernel.ok()) return kernel.status();
    return device.compile(*kernel, options);
  };
  absl::StatusOr<Function> delta = build(attention_bwd_delta_kernel(c), rows);
  if (!delta.ok()) return delta.status();
  absl::StatusOr<Function> grads = build(attention_bwd_kernel(c), attention_bwd_options(c));
  if (!grads.ok()) return grads.status();
  AttnBwdKernels out{c, *std::move(delta), *std::move(grads), std::nullopt};
  if (c.split) {
    absl::StatusOr<Function> dq = build(attention_bwd_dq_kernel(c), rows);
    if (!dq.ok()) return dq.status();
    out.dq = *std::move(dq);
  }
  return out;
}

// What a backward pass reads and writes, all [heads, len, d] of the
// configuration's types (K, V, dK and dV [heads / group, len, d]) but the
// log2-sum-exp ([heads, len] f32): the
// forward's inputs, its output and log2-sum-exp (AttnConfig::lse), dO, and
// the gradients.
struct AttnBwdBuffers {
  const Buffer *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr, *lse = nullptr, *dout = nullptr;
  const Buffer *dq = nullptr, *dk = nullptr, *dv = nullptr;
};
// A backward pass bound to its buffers: its tensor maps, its launches and
// its workspace (D, and with c.split dQ's f32 accumulator), made once and
// launched as often as wanted (launch_attention_bwd).
struct AttnBwdPlan {
  AttnBwdBuffers io;
  int64_t heads = 0, len = 0;
  float scale = 0;
  Buffer delta, dq_acc;  // D [heads, len] f32; dQ's accumulator [heads, len, d] f32
  AttnBwdMaps maps;
  LaunchConfig rows, grads;  // the kernels over rows (D's, dQ's) and the gradients'
};
inline absl::StatusOr<AttnBwdPlan> plan_attention_bwd(const Device& device, const AttnBwdKernels& kernels,
                                                      const AttnBwdBuffers& io, int64_t heads, int64_t len, float scale,
                                                      const Stream* stream = nullptr) {
  const AttnBwdConfig& c = kernels.config;
  for (const Buffer* b : {io.q, io.k, io.v, io.o, io.lse, io.dout, io.dq, io.dk, io.dv}) {
    if (b == nullptr) {
      return absl::InvalidArgumentError("plan_attention_bwd: needs every buffer: q, k, v, o, lse, dout, dq, dk and dv");
    }
  }
  if (heads <= 0 || len <= 0 || heads * len > INT32_MAX / c.d) {
    return absl::InvalidArgumentError(absl::StrCat("plan_attention_bwd: ", heads, " heads of ", len,
                                                   " rows: both must be positive, with fewer than 2^31 elements"));
  }
  const int64_t rows = heads * len;
  absl::StatusOr<Buffer> delta = device.allocate(rows * 4);
  if (!delta.ok()) return delta.status();
  Buffer dq_acc;
  if (c.split) {
    absl::StatusOr<Buffer> acc = device.allocate(rows * c.d * 4);
    if (!acc.ok()) return acc.status();
    dq_acc = *std::move(acc);
  }
  absl::StatusOr<AttnBwdMaps> maps = attention_bwd_maps(
      device, c, {io.q, io.k, io.v, io.dout, c.split ? &dq_acc : io.dq, io.dk, io.dv, io.lse, &*delta}, heads, len);
  if (!maps.ok()) return maps.status();
  // Persistent, at most one program a block.
  absl::StatusOr<int> programs = kernels.grads.persistent_grid();
  if (!programs.ok()) return programs.status();
  const int64_t tiles = heads / c.group * ((len + c.block - 1) / c.block);
  const int64_t row_tiles = (rows + kAttnDeltaRows - 1) / kAttnDeltaRows;
  return AttnBwdPlan{io,
                     heads,
                     len,
                     scale,
                     *std::move(delta),
                     std::move(dq_acc),
                     *std::move(maps),
                     {.grid = static_cast<int>(std::min<int64_t>(row_tiles, int64_t{device.num_compute_units()} * 8)),
                      .num_warps = 4,
                      .stream = stream},
                     {.grid = static_cast<int>(std::min<int64_t>(tiles, *programs)),
                      .num_warps = attention_bwd_warps(c),
                      .stream = stream}};
}
// D (and the accumulator cleared), the gradients, then with c.split dQ:
// on the plan's stream, in order.
inline absl::Status launch_attention_bwd(const AttnBwdKernels& kernels, const AttnBwdPlan& p) {
  const AttnBwdMaps& m = p.maps;
  const int32_t rows = static_cast<int32_t>(p.heads * p.len);
  absl::Status s = kernels.dq ? kernels.delta.launch(p.rows, *p.io.dout, *p.io.o, p.delta, p.dq_acc, rows)
                              : kernels.delta.launch(p.rows, *p.io.dout, *p.io.o, p.delta, rows);
  if (!s.ok()) return s;
  s = kernels.grads.launch(p.grads, m.q, m.k, m.v, m.dout, m.q_step, m.k_step, m.v_step, m.dout_step, m.dq, m.dk, m.dv,
                           static_cast<int32_t>(p.len), static_cast<int32_t>(p.heads), p.scale, m.lse, m.delta,
                           m.lse_step, m.delta_step);
  if (!s.ok() || !kernels.dq) return s;
  return kernels.dq->launch(p.rows, p.dq_acc, *p.io.dq, p.scale, rows);
}

}  // namespace samples
