// The samples' kernels, built in one place: the samples run them, the GPU
// suites run them on cuda:0 and the host to compare, the GPU benchmark times
// them. Each returns the builder's result. Their exponentials take the fast
// form (MathForm::kFast, the GPU's exp2 unit), as Triton's tl.exp does, and
// the softmaxes divide by the row's sum in the fast form (div.full.f32), as
// Triton's `/` does, so that the benchmarks compare like with like.
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
#include "dsl/builder.h"
#include "dsl/ops.h"
#include "tessel/tessel.h"

namespace samples {

using namespace tessel;  // NOLINT: kernels read like the DSL's documentation

inline constexpr int kAddBlock = 1024;

// z = x + y over n floats, one block of kAddBlock per program, masked past n.
inline absl::StatusOr<Kernel> vector_add_kernel(std::string name = "vector_add") {
  KernelBuilder k(std::move(name));
  Value x = k.arg(ptr(f32), "x"), y = k.arg(ptr(f32), "y"), z = k.arg(ptr(f32), "z");
  Value n = k.arg(i32, "n");
  Value offs = k.program_id() * kAddBlock + k.arange(0, kAddBlock);  // [kAddBlock] i32
  Value mask = offs < n;                                             // [kAddBlock] i1
  store(z + offs, load(x + offs, mask, 0.0) + load(y + offs, mask, 0.0), mask);
  return k.build();
}

inline constexpr int kSoftmaxBlock = 1024;  // cols <= kSoftmaxBlock

// Row softmax of an f32 [rows, cols] matrix, persistent over rows, with the
// row's maximum subtracted for stability (a reduction, then a second one).
inline absl::StatusOr<Kernel> softmax_kernel() {
  KernelBuilder k("softmax");
  Value x = k.arg(ptr(f32), "x"), y = k.arg(ptr(f32), "y");
  Value rows = k.arg(i32, "rows"), cols = k.arg(i32, "cols");
  k.for_each_tile(rows, [&](Value row) {
    Value offs = k.arange(0, kSoftmaxBlock);                 // [B] i32
    Value mask = offs < cols;                                // [B] i1
    Value v = load(x + row * cols + offs, mask, -INFINITY);  // [B] f32
    Value e = exp(v - max(v, 0), MathForm::kFast);           // [B] f32
    store(y + row * cols + offs, div(e, sum(e, 0), MathForm::kFast), mask);
  });
  return k.build();
}

inline constexpr int kRowSoftmaxRows = 32, kRowSoftmaxCols = 32;  // cols <= block_cols

// --- Row-wise kernels over a [rows, cols] matrix of f32, or of bf16 (bf16 in
// and out, f32 arithmetic): softmax, layer norm, RMS norm. Each program
// takes block_rows rows of block_cols columns (a power of two, at least
// cols), masked past the matrix's edges; a row's statistics are reductions
// along axis 1 broadcast back along it, which stay in registers (and, with
// a row per warp or less, within a warp).
struct RowBlock {
  int rows = 4;
  int cols = 1024;
  int warps = 4;
};

// The block a row kernel takes for rows of `cols` elements: about 32
// elements per thread, as many rows per program as keep a row within a
// warp or two, at most 16 warps.
inline RowBlock row_block(int cols) {
  RowBlock b;
  b.cols = 16;
  while (b.cols < cols) b.cols *= 2;
  b.rows = std::max(1, 4096 / b.cols);
  b.warps = std::clamp(b.rows * b.cols / 1024, 1, 16);
  return b;
}

// The [block.rows, block.cols] offsets of the program's rows (row r at
// r * cols), the mask of what lies inside the matrix and that of the
// columns alone.
struct RowTile {
  Value offs, mask, col, col_mask;
};
inline RowTile row_tile(KernelBuilder& k, const Value& rows, const Value& cols, RowBlock block) {
  Value r = k.program_id() * block.rows + k.arange(0, block.rows);  // [BR] i32
  Value c = k.arange(0, block.cols);                                  // [BC] i32
  Value inside = c < cols;                                            // [BC] i1
  return {expand_dims(r, 1) * cols + expand_dims(c, 0), expand_dims(r < rows, 1) & expand_dims(inside, 0), c, inside};
}

// Loads as f32 (bf16 widened), `other` where the mask is off.
inline Value load_f32(const Value& p, const Value& mask, float other) {
  Value v = load(p, mask, other);
  return v.type().dtype() == f32 ? v : cast(v, f32);
}
inline void store_as(const Value& p, const Value& v, const Value& mask) {
  DType d = p.type().dtype();
  store(p, d == f32 ? v : cast(v, d), mask);
}

// Row softmax with the row's maximum subtracted for stability (a
// reduction, then a second one): args x, y, rows, cols.
inline absl::StatusOr<Kernel> row_softmax_kernel(int block_rows = kRowSoftmaxRows, int block_cols = kRowSoftmaxCols,
                                                 DType d = f32) {
  KernelBuilder k("row_softmax");
  Value x = k.arg(ptr(d), "x"), y = k.arg(ptr(d), "y");
  Value rows = k.arg(i32, "rows"), cols = k.arg(i32, "cols");
  RowTile t = row_tile(k, rows, cols, {.rows = block_rows, .cols = block_cols});
  Value v = load_f32(x + t.offs, t.mask, -INFINITY);              // [BR, BC] f32
  Value e = exp(v - expand_dims(max(v, 1), 1), MathForm::kFast);  // [BR, BC] f32
  store_as(y + t.offs, div(e, expand_dims(sum(e, 1), 1), MathForm::kFast), t.mask);
  return k.build();
}

inline constexpr float kNormEps = 1e-5f;

// Layer norm: (x - mean) / sqrt(var + eps) * w + b per row, mean and
// variance in f32 over the row, w and b of the matrix's dtype: args x, y,
// w, b, rows, cols.
inline absl::StatusOr<Kernel> layer_norm_kernel(RowBlock block, DType d = f32) {
  KernelBuilder k("layer_norm");
  Value x = k.arg(ptr(d), "x"), y = k.arg(ptr(d), "y"), w = k.arg(ptr(d), "w"), b = k.arg(ptr(d), "b");
  Value rows = k.arg(i32, "rows"), cols = k.arg(i32, "cols");
  RowTile t = row_tile(k, rows, cols, block);
  Value v = load_f32(x + t.offs, t.mask, 0.0f);  // [BR, BC] f32
  // The weights load before the statistics, so that their latency hides
  // behind the reductions, and widen after them, so that 16-bit weights
  // hold half the registers across them.
  Value scale = load(w + t.col, t.col_mask, 0.0f), shift = load(b + t.col, t.col_mask, 0.0f);  // [BC]
  Value centered = where(t.mask, v - expand_dims(sum(v, 1) / cols, 1), 0.0f);
  Value rstd = rsqrt(sum(centered * centered, 1) / cols + kNormEps);  // [BR] f32
  store_as(y + t.offs,
           centered * expand_dims(rstd, 1) * expand_dims(cast(scale, f32), 0) + expand_dims(cast(shift, f32), 0),
           t.mask);
  return k.build();
}

// RMS norm: x / sqrt(mean(x^2) + eps) * w per row, w of the matrix's
// dtype: args x, y, w, rows, cols.
inline absl::StatusOr<Kernel> rms_norm_kernel(RowBlock block, DType d = f32) {
  KernelBuilder k("rms_norm");
  Value x = k.arg(ptr(d), "x"), y = k.arg(ptr(d), "y"), w = k.arg(ptr(d), "w");
  Value rows = k.arg(i32, "rows"), cols = k.arg(i32, "cols");
  RowTile t = row_tile(k, rows, cols, block);
  Value v = load_f32(x + t.offs, t.mask, 0.0f);                 // [BR, BC] f32
  Value rstd = rsqrt(sum(v * v, 1) / cols + kNormEps);           // [BR] f32
  Value scale = expand_dims(load_f32(w + t.col, t.col_mask, 0.0f), 0);
  store_as(y + t.offs, v * expand_dims(rstd, 1) * scale, t.mask);
  return k.build();
}

// Prefix sums along each row, in f32: args x, y, rows, cols.
inline absl::StatusOr<Kernel> row_cumsum_kernel(RowBlock block, DType d = f32) {
  KernelBuilder k("row_cumsum");
  Value x = k.arg(ptr(d), "x"), y = k.arg(ptr(d), "y");
  Value rows = k.arg(i32, "rows"), cols = k.arg(i32, "cols");
  RowTile t = row_tile(k, rows, cols, block);
  store_as(y + t.offs, cumsum(load_f32(x + t.offs, t.mask, 0.0f), 1), t.mask);
  return k.build();
}

// A linear recurrence along each row, in f32: y_j = w_j y_(j-1) + x_j
// (y_0 = x_0), the decays w one row of the matrix's dtype (a state-space
// model's scan with a decay per position): args x, y, w, rows, cols. The
// maps y -> w y + x compose in order, so associative_scan over the pairs
// (w, x) gives each prefix's map.
inline absl::StatusOr<Kernel> row_recurrence_kernel(RowBlock block, DType d = f32) {
  KernelBuilder k("row_recurrence");
  Value x = k.arg(ptr(d), "x"), y = k.arg(ptr(d), "y"), w = k.arg(ptr(d), "w");
  Value rows = k.arg(i32, "rows"), cols = k.arg(i32, "cols");
  RowTile t = row_tile(k, rows, cols, block);
  Value decay = broadcast_to(expand_dims(load_f32(w + t.col, t.col_mask, 1.0f), 0), {block.rows, block.cols});
  std::vector<Value> maps = associative_scan(
      {decay, load_f32(x + t.offs, t.mask, 0.0f)}, 1, [](std::span<const Value> first, std::span<const Value> then) {
        return std::vector<Value>{first[0] * then[0], then[0] * first[1] + then[1]};
      });
  store_as(y + t.offs, maps[1], t.mask);
  return k.build();
}

// Each row in ascending order, sorted in f32 (exact for bf16 too):
// args x, y, rows, cols. Elements past the row read +inf, which sorts after
// every number, so the row's own come first.
inline absl::StatusOr<Kernel> row_sort_kernel(RowBlock block, DType d = f32) {
  KernelBuilder k("row_sort");
  Value x = k.arg(ptr(d), "x"), y = k.arg(ptr(d), "y");
  Value rows = k.arg(i32, "rows"), cols = k.arg(i32, "cols");
  RowTile t = row_tile(k, rows, cols, block);
  store_as(y + t.offs, sort(load_f32(x + t.offs, t.mask, INFINITY), 1), t.mask);
  return k.build();
}

// A mixture-of-experts router: per token (row) of `experts` logits, the
// softmax's k largest probabilities, largest first, and their experts:
// args x [rows, experts] (f32 or bf16), weights [rows, k] f32, ids
// [rows, k] i32, rows. The order comes from the logits (the softmax keeps
// it, and rounding cannot tie two of them), ties to the lower expert.
inline absl::StatusOr<Kernel> router_top_k_kernel(int block_rows, int experts, int k, DType d = f32) {
  KernelBuilder kb("router_top_k");
  Value x = kb.arg(ptr(d), "x"), weights = kb.arg(ptr(f32), "weights"), ids = kb.arg(ptr(i32), "ids");
  Value rows = kb.arg(i32, "rows");
  Value r = expand_dims(kb.program_id() * block_rows + kb.arange(0, block_rows), 1);                 // [BR, 1] i32
  Value logits = load_f32(x + r * experts + expand_dims(kb.arange(0, experts), 0), r < rows, 0.0f);  // [BR, E]
  Value e = exp(logits - expand_dims(max(logits, 1), 1), MathForm::kFast);                           // [BR, E]
  Value p = div(e, expand_dims(sum(e, 1), 1), MathForm::kFast);                                      // [BR, E]
  Value first = broadcast_to(expand_dims(kb.arange(0, k), 0), {block_rows, k});                      // [BR, K]
  Value picked = gather(argsort(logits, 1, /*descending=*/true), first, 1);                          // [BR, K] i32
  store(ids + r * k + first, picked, r < rows);
  store(weights + r * k + first, gather(p, picked, 1), r < rows);
  return kb.build();
}

// One token's top k experts (the stable order of its logits, descending)
// and their softmax weights, in double.
struct RouterPick {
  std::vector<int32_t> ids;
  std::vector<double> weights;
};
inline RouterPick router_reference(const float* logits, int experts, int k) {
  std::vector<int32_t> order(experts);
  for (int e = 0; e < experts; ++e) order[e] = e;
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  double m = -INFINITY, sum = 0;
  for (int e = 0; e < experts; ++e) m = std::max(m, double{logits[e]});
  for (int e = 0; e < experts; ++e) sum += std::exp(logits[e] - m);
  RouterPick pick;
  for (int i = 0; i < k; ++i) {
    pick.ids.push_back(order[i]);
    pick.weights.push_back(std::exp(logits[order[i]] - m) / sum);
  }
  return pick;
}

// The row kernels by name, for the samples, the tests and the benchmark.
enum class RowOp { kSoftmax, kLayerNorm, kRmsNorm, kCumsum, kRecurrence, kSort };
inline const char* row_op_name(RowOp op) {
  static constexpr const char* kNames[] = {"softmax", "layer_norm", "rms_norm", "cumsum", "recurrence", "sort"};
  return kNames[static_cast<int>(op)];
}
inline absl::StatusOr<Kernel> row_kernel(RowOp op, RowBlock block, DType d) {
  switch (op) {
    case RowOp::kSoftmax:
      return row_softmax_kernel(block.rows, block.cols, d);
    case RowOp::kLayerNorm:
      return layer_norm_kernel(block, d);
    case RowOp::kRmsNorm:
      return rms_norm_kernel(block, d);
    case RowOp::kCumsum:
      return row_cumsum_kernel(block, d);
    case RowOp::kRecurrence:
      return row_recurrence_kernel(block, d);
    case RowOp::kSort:
      return row_sort_kernel(block, d);
  }
  return absl::InvalidArgumentError("not a row kernel");
}
// Launches a row kernel on x, y (and the weights its op reads).
template <class Buf>
absl::Status launch_row_kernel(const Function& fn, const LaunchConfig& config, RowOp op, const Buf& x, const Buf& y,
                               const Buf& w, const Buf& b, int rows, int cols) {
  switch (op) {
    case RowOp::kSoftmax:
    case RowOp::kCumsum:
    case RowOp::kSort:
      return fn.launch(config, x, y, rows, cols);
    case RowOp::kLayerNorm:
      return fn.launch(config, x, y, w, b, rows, cols);
    case RowOp::kRmsNorm:
    case RowOp::kRecurrence:
      return fn.launch(config, x, y, w, rows, cols);
  }
  return absl::InvalidArgumentError("not a row kernel");
}
// One row of the op's result in double, from the inputs the kernel read.
inline std::vector<double> row_reference(RowOp op, const float* row, const float* w, const float* b, int64_t cols) {
  std::vector<double> out(cols);
  if (op == RowOp::kCumsum) {
    double s = 0;
    for (int64_t j = 0; j < cols; ++j) out[j] = s += row[j];
    return out;
  }
  if (op == RowOp::kRecurrence) {
    double h = 0;
    for (int64_t j = 0; j < cols; ++j) out[j] = h = w[j] * h + row[j];
    return out;
  }
  if (op == RowOp::kSort) {
    out.assign(row, row + cols);
    std::sort(out.begin(), out.end());
    return out;
  }
  if (op == RowOp::kSoftmax) {
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < cols; ++j) m = std::max(m, double{row[j]});
    for (int64_t j = 0; j < cols; ++j) s += std::exp(row[j] - m);
    for (int64_t j = 0; j < cols; ++j) out[j] = std::exp(row[j] - m) / s;
    return out;
  }
  double mean = 0, sq = 0;
  for (int64_t j = 0; j < cols; ++j) mean += row[j] / double(cols);
  for (int64_t j = 0; j < cols; ++j) {
    double v = op == RowOp::kLayerNorm ? row[j] - mean : row[j];
    sq += v * v / double(cols);
  }
  const double rstd = 1 / std::sqrt(sq + kNormEps);
  for (int64_t j = 0; j < cols; ++j) {
    out[j] = op == RowOp::kLayerNorm ? (row[j] - mean) * rstd * w[j] + b[j] : row[j] * rstd * w[j];
  }
  return out;
}

// Sums or maxima of a [rows, cols] matrix (f32 or bf16, accumulated and
// written in f32) along `axis`. Axis 1: each row's, block.rows rows per
// program, the row in registers (block.cols at least cols). Axis 0: each
// column's, block.cols columns per program, over the rows in blocks of
// block.rows, each block reduced along axis 0 and combined into a
// loop-carried [block.cols] tile. Args x, out, rows, cols.
enum class Reduction { kSum, kMax };
inline absl::StatusOr<Kernel> matrix_reduce_kernel(int axis, Reduction how, RowBlock block, DType d = f32) {
  KernelBuilder k(std::string(axis == 0 ? "column_" : "row_") + (how == Reduction::kSum ? "sum" : "max"));
  Value x = k.arg(ptr(d), "x"), out = k.arg(ptr(f32), "out");
  Value rows = k.arg(i32, "rows"), cols = k.arg(i32, "cols");
  const float identity = how == Reduction::kSum ? 0.0f : -INFINITY;
  auto reduce = [&](const Value& v, int along) { return how == Reduction::kSum ? sum(v, along) : max(v, along); };
  if (axis == 1) {
    RowTile t = row_tile(k, rows, cols, block);
    Value r = k.program_id() * block.rows + k.arange(0, block.rows);
    store(out + r, reduce(load_f32(x + t.offs, t.mask, identity), 1), r < rows);
    return k.build();
  }
  Value c = k.program_id() * block.cols + k.arange(0, block.cols);  // [BC] i32
  Value inside = c < cols;
  Var acc = k.var(k.full({block.cols}, identity, f32));
  k.for_range(0, rows, block.rows, [&](Value first) {
    Value r = first + k.arange(0, block.rows);  // [BR] i32
    Value mask = expand_dims(r < rows, 1) & expand_dims(inside, 0);
    Value part = reduce(load_f32(x + expand_dims(r, 1) * cols + expand_dims(c, 0), mask, identity), 0);
    acc = how == Reduction::kSum ? acc + part : maximum(acc, part);
  });
  store(out + c, acc, inside);
  return k.build();
}

inline constexpr int kCopyBM = 64, kCopyBN = 128;

// Persistent TMA copy of a bf16 [m, n] matrix in [bm, bn] boxes; boxes past
// the edges read zeros and are clipped on store.
inline absl::StatusOr<Kernel> tile_copy_kernel(int bm = kCopyBM, int bn = kCopyBN, std::string name = "tile_copy") {
  KernelBuilder k(std::move(name));
  Value src = k.tensor_map(bf16, {bm, bn}, "src");  // by-value descriptors
  Value dst = k.tensor_map(bf16, {bm, bn}, "dst");
  Value m = k.arg(i32, "m"), n = k.arg(i32, "n");
  Value tiles_n = cdiv(n, bn);
  k.for_each_tile(cdiv(m, bm) * tiles_n, [&](Value t) {
    Value row = t / tiles_n * bm, col = t % tiles_n * bn;
    tma_store(dst, {row, col}, tma_load(src, {row, col}));  // [bm, bn] bf16, smem
  });
  return k.build();
}

// dst[n, m] = src[m, n]: a [kCopyBM, kCopyBN] box in, its transpose out.
inline absl::StatusOr<Kernel> tile_transpose_kernel() {
  KernelBuilder k("tile_transpose");
  Value src = k.tensor_map(bf16, {kCopyBM, kCopyBN}, "src");
  Value dst = k.tensor_map(bf16, {kCopyBN, kCopyBM}, "dst");
  Value m = k.arg(i32, "m"), n = k.arg(i32, "n");
  Value tiles_n = cdiv(n, kCopyBN);
  k.for_each_tile(cdiv(m, kCopyBM) * tiles_n, [&](Value t) {
    Value row = t / tiles_n * kCopyBM, col = t % tiles_n * kCopyBN;
    Value tile = tma_load(src, {row, col});   // [BM, BN] bf16, smem
    tma_store(dst, {col, row}, trans(tile));  // [BN, BM] bf16
  });
  return k.build();
}

// One K step of a GEMM: acc + a @ b. With `promote`, the step's product is
// summed from zero and then added to acc in f32, instead of being summed
// into acc on the tensor cores: Hopper's fp8 products sum there with fewer
// bits than f32 as the sum grows (about 2^-12 of sum |a b| at K = 1000), so
// a sum over all of K loses bits that one step's does not.
inline Value gemm_step(const Value& a, const Value& b, const Value& acc, bool promote,
                       Precision precision = Precision::kIeee) {
  if (!promote) return dot(a, b, acc, precision);
  return acc + dot(a, b, splat(0.0f, acc.type().shape()), precision);
}

// How far a GEMM's f32 sum of `in` operands may be from the exact one, as a
// share of the sum of its terms' magnitudes: f32 accumulation's; for fp8
// the tensor cores', which keep fewer bits, within each K step (gemm_step's
// promotion) or over all of K (fast accumulation).
inline double gemm_sum_tolerance(DType in, bool fast_accum) {
  if (!in.is_float8()) return 1e-5;
  return std::ldexp(1.0, fast_accum ? -11 : -13);
}

// --- The tensor-core GEMM: C [M, N] (f32, or bf16 rounded once) = A [M, K]
// @ B, with A and B bf16, f16, fp8 (e4m3 or e5m2, per-tensor scales applied
// to the f32 sum) or f32 (multiplied as tf32) in swizzled TMA boxes of rows
// spanning 128 bytes (BK = 128 / element size) or whole panels of them, B
// given as N x K (K-major, read through trans) or as K x N (MN-major:
// wgmma's transpose bit, 16-bit types only), A as M x K or K x M the same
// way, persistent over output tiles taken in groups of `group_m` tile rows
// (consecutive programs share B's tiles and then A's in L2). On sm_90a the
// dot runs on wgmma with the accumulator in registers, and the K loop is
// software-pipelined.
struct GemmConfig {
  int64_t bm = 128, bn = 128, bk = 64;
  DType in = bf16;
  std::optional<DType> in_b = std::nullopt;  // B's dtype where it is not `in`: with fp8, the other fp8 kind
  DType out = f32;
  bool b_nk = true;  // B stored N x K (else K x N)
  bool a_mk = true;  // A stored M x K (else K x M)
  int stages = 0;    // of the K loop's pipeline (LoopOptions::stages)
  Swizzle swizzle = Swizzle::k128B;  // of A's and B's boxes, and C's where a row of C's box suits it (out_swizzle)
  int group_m = 8;                   // tile rows per group of the tile order
  // The epilogue: C = gelu(A @ B + bias) with bias [N] of dtype `in`, taken
  // by the kernel as a last argument; else C = A @ B.
  bool bias_gelu = false;
  // C = scale_a * scale_b * (A @ B), the scales f32 scalars in device memory
  // (per-tensor scales of fp8 operands), taken by the kernel after `bias`.
  bool scaled = false;
  bool tf32 = false;  // f32 operands multiplied as tf32 (Precision::kTf32)
  // fp8 only: the tensor cores' own running sum over all of K, which keeps
  // fewer bits than f32 as it grows (cuBLAS's fast accumulation). Without
  // it each K step's product is added to an f32 accumulator (gemm_step).
  bool fast_accum = false;
  // The persistent loop warp-specialized (LoopOptions::warp_specialize):
  // each of two consumer warpgroups computes whole bm x bn tiles, and a
  // producer warpgroup loads for both; the program takes 12 warps.
  bool warp_specialize = false;
  // With warp_specialize: both consumer warpgroups take every tile, bm / 2
  // rows each, each stage loaded once for both (LoopOptions::cooperative).
  bool cooperative = false;
  // Split-K: each output tile's K range is cut into `split_k` parts, each a
  // program's own work (split_k times the tiles to spread over the SMs),
  // and the programs add their partial tiles into C with tma_reduce: C
  // must be f32 and zero before the launch (splitk_finish_kernel rounds it
  // to `out` and zeroes it again), and the epilogue must be linear (scales,
  // not bias + GELU). For shapes with fewer tiles than SMs and a long K.
  int split_k = 1;
  // Stream-K: the programs share the K steps of the last tiles evenly
  // instead of taking them a whole tile at a time, so no SM idles through a
  // last, partial wave. Of T tiles over P programs, the first T - S are
  // whole tiles as usual, where S = T when T <= P, else the last wave's
  // T % P where that is at least half a wave, else it and a whole wave
  // before it (so that no program's share is a sliver; 0 when P divides
  // T); program v's share of the S tiles' steps is [v I / P,
  // (v + 1) I / P) of their I = S * ceil(K / BK) steps, at most a segment
  // a tile it touches. A segment short of a whole tile adds its partial
  // tile into a workspace slot with tma_reduce (f32) and counts its steps
  // into the slot's counter (acq_rel); the segment that completes the
  // count reads the sum, runs the epilogue and stores C, and leaves slot
  // and counter zero for the next launch. The kernel takes the slots as a
  // map and a pointer and the counters after the other arguments
  // (gemm_workspace makes them, zero, for a shape and a grid: launch on
  // GemmWorkspace::programs programs). Not with split_k or warp_specialize.
  bool stream_k = false;
  // 2-program clusters (KernelBuilder::cluster): the two programs of a
  // cluster take two tiles that share an operand's tile and load it once
  // for both, half each (tma_multicast). With cluster_m = 2, two tiles one
  // above the other share B's (B's map box is then half as tall along N,
  // or along K where B is K x N); with cluster_n = 2, two tiles side by
  // side share A's (A's box halved along M, or K where A is K x M). The
  // tile order walks pairs of tiles; a pair past C's edge computes zeros
  // that its store drops. At most one of them is 2; not with split_k or
  // stream_k.
  int cluster_m = 1, cluster_n = 1;
  // Grouped (an MoE layer's experts over its choices' rows in expert order,
  // as MoeAlign groups them in blocks of bm): B is [groups, N, K], N x K per
  // group (a 3-D map), and A's block of rows i is multiplied by group
  // groups[i]'s B. The kernel takes, after the scales (scale_b then one
  // per group), groups [M / bm] and total [1] (i32: the rows in use, a
  // multiple of bm; tiles past it run no K step and store zeros), M being
  // the rows A and C hold. B as N x K and A as M x K only; not with
  // split_k, stream_k or clusters.
  bool grouped = false;
  // C's rows multiplied last by row_scales [M] (f32, taken after the
  // grouping's arguments): an MoE layer's router weights.
  bool row_scales = false;

  DType b_type() const { return in_b.value_or(in); }
  int cluster() const { return cluster_m * cluster_n; }
  // The boxes of A's and B's maps, outermost first, as stored.
  Shape a_box() const {
    const int64_t parts = cluster_n;
    return a_mk ? Shape{bm / parts, bk} : Shape{bk / parts, bm};
  }
  Shape b_box() const {
    const int64_t parts = cluster_m;
    if (grouped) return {1, bn, bk};
    return b_nk ? Shape{bn / parts, bk} : Shape{bk / parts, bn};
  }
  // The swizzle of a bm x bn box of `t` (C's, or stream-K's f32 slots): the
  // widest, up to `swizzle`, whose panels a row of it fills or is one of;
  // none where no swizzle suits it (152 bf16 columns: 304 bytes).
  Swizzle out_swizzle(DType t) const {
    for (Swizzle s = swizzle; s != Swizzle::kNone; s = static_cast<Swizzle>(static_cast<int>(s) - 1)) {
      const int64_t row = bn * t.bytes(), width = swizzle_bytes(s);
      if (row <= width || row % width == 0) return s;
    }
    return Swizzle::kNone;
  }
};

// GELU in its tanh form, x/2 (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715
// x^3), taken from h = x/2 (which the GEMM's epilogue gets from the
// accumulator in one fused multiply-add, with the bias row halved before
// the K loop): h + h tanh(u), u = h (2c + 8c 0.044715 h^2) with c =
// sqrt(2/pi); five multiplies and fused multiply-adds an element, and tanh
// in its fast form: one tanh.approx on NVIDIA (absolute error 2^-16.9 on an
// H200), the accurate tanh on the host. (Written as x sigmoid(2u) = x / (1 +
// exp(-2u)) it took an exponential, a division and a clamp of u, whose exp
// overflowed into the division's slow path.)
inline Value gelu_of_half(const Value& h) {
  constexpr double kC = 0.7978845608028654;  // sqrt(2/pi)
  Value u = h * fma(h * h, 8 * 0.044715 * kC, 2 * kC);
  return fma(h, tanh(u, MathForm::kFast), h);
}
// The same in double, for references.
inline double gelu_reference(double x) { return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }

inline absl::StatusOr<Kernel> gemm_kernel(const GemmConfig& g, std::string name = "gemm") {
  if (g.split_k < 1) {
    return absl::InvalidArgumentError(absl::StrCat("gemm_kernel: split_k must be >= 1, got ", g.split_k));
  }
  if (g.split_k > 1 && g.out != f32) {
    return absl::InvalidArgumentError(absl::StrCat("gemm_kernel: split_k = ", g.split_k,
                                                   " adds partial tiles into C, which must then be f32, got ",
                                                   g.out.name()));
  }
  if (g.stream_k && (g.split_k > 1 || g.warp_specialize)) {
    return absl::InvalidArgumentError(absl::StrCat("gemm_kernel: stream_k takes neither split_k (got ", g.split_k,
                                                   ") nor warp_specialize (got ", g.warp_specialize, ")"));
  }
  if (g.cluster_m < 1 || g.cluster_n < 1 || g.cluster() > 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("gemm_kernel: clusters of 1 or 2 tiles are supported, got ", g.cluster_m, " x ", g.cluster_n));
  }
  if (g.cluster() > 1 && (g.split_k > 1 || g.stream_k)) {
    return absl::InvalidArgumentError(absl::StrCat("gemm_kernel: a cluster of ", g.cluster(),
                                                   " takes neither split_k (got ", g.split_k, ") nor stream_k (got ",
                                                   g.stream_k, ")"));
  }
  if (g.grouped && (!g.a_mk || !g.b_nk || g.split_k > 1 || g.stream_k || g.cluster() > 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gemm_kernel: a grouped GEMM takes A as M x K and B as N x K per group, without split_k, stream_k or "
        "clusters; got A ",
        g.a_mk ? "M x K" : "K x M", ", B ", g.b_nk ? "N x K" : "K x N", ", split_k ", g.split_k, ", stream_k ",
        g.stream_k, ", clusters of ", g.cluster()));
  }
  if (g.split_k > 1 && g.bias_gelu) {
    return absl::InvalidArgumentError(absl::StrCat("gemm_kernel: split_k = ", g.split_k,
                                                   " sums partial tiles, so the epilogue must be linear; bias + GELU "
                                                   "is not"));
  }
  KernelBuilder k(std::move(name));
  if (g.cluster() > 1) k.cluster(g.cluster());
  Value a = k.tensor_map(g.in, g.a_box(), "a", g.swizzle);                    // A [M, K] (or [K, M])
  Value b = k.tensor_map(g.b_type(), g.b_box(), "b", g.swizzle);              // B [N, K] (or [K, N])
  Value c = k.tensor_map(g.out, {g.bm, g.bn}, "c", g.out_swizzle(g.out));     // C [M, N]
  Value m = k.arg(i32, "m"), n = k.arg(i32, "n"), kdim = k.arg(i32, "k");
  Value bias = g.bias_gelu ? k.arg(ptr(g.in), "bias") : Value();
  Value scale_a = g.scaled ? k.arg(ptr(f32), "scale_a") : Value();
  Value scale_b = g.scaled ? k.arg(ptr(f32), "scale_b") : Value();
  Value groups = g.grouped ? k.arg(ptr(i32), "groups") : Value();             // [M / BM] i32
  Value used = g.grouped ? load(k.arg(ptr(i32), "total")) : Value();          // the rows in use
  Value row_scales = g.row_scales ? k.arg(ptr(f32), "row_scales") : Value();  // [M] f32
  Value slots =
      g.stream_k ? k.tensor_map(f32, {g.bm, g.bn}, "slots", g.out_swizzle(f32)) : Value();  // [S * BM, BN] f32
  Value slot_ptr = g.stream_k ? k.arg(ptr(f32), "slot_ptr") : Value();                     // the same memory
  Value counts = g.stream_k ? k.arg(ptr(i32), "counts") : Value();                          // [S] i32
  // The tile order walks units of cluster_m x cluster_n tiles.
  Value tiles_m = cdiv(cdiv(m, g.bm), g.cluster_m), tiles_n = cdiv(cdiv(n, g.bn), g.cluster_n);
  Value per_group = tiles_n * g.group_m;
  Value tiles = tiles_m * tiles_n;
  Value work = g.split_k > 1 ? tiles * g.split_k : tiles;
  // Stream-K: `whole` tiles, then `shared` ones, whose steps [lo, hi) are
  // this program's, from the shared tile first_slot on.
  Value steps_per_tile, programs, whole, lo, hi, first_slot;
  if (g.stream_k) {
    steps_per_tile = cdiv(kdim, g.bk);
    programs = k.num_programs();
    Value rest = tiles % programs;
    Value shared = select(tiles <= programs, tiles,
                          select(rest * 2 >= programs, rest, select(rest == 0, 0, rest + programs)));
    whole = tiles - shared;  // a multiple of P: work w >= whole is this program's share
    Value steps = cast(shared * steps_per_tile, i64), p = cast(programs, i64), v = cast(k.program_id(), i64);
    // (In i64: v * steps may pass 2^31 where K is long.)
    lo = cast(v * steps / p, i32);
    hi = cast((v + 1) * steps / p, i32);
    first_slot = lo / steps_per_tile;
    Value segments = cdiv(cdiv(cast(steps, i32), programs), steps_per_tile) + 1;
    work = whole + select(shared > 0, segments * programs, 0);
  }
  // With split_k, program work w is part w / tiles of tile w % tiles: the
  // programs running at once share their K range (and A's and B's tiles in L2).
  // With stream_k, work w >= whole is segment (w - whole) / P of this
  // program's share; its bounds come from outside the loop, so that
  // computing the next tile's ahead costs no more than the plain GEMM's.
  k.for_each_tile(work, [&](Value w) {
    Value t = g.split_k > 1 ? w % tiles : w;
    Value k_lo = k.constant(0, i32), k_hi = kdim;
    if (g.split_k > 1) {
      Value span = cdiv(cdiv(kdim, g.bk), g.split_k) * g.bk;  // whole BK blocks
      k_lo = w / tiles * span;
      k_hi = minimum(k_lo + span, kdim);
    }
    Value slot, first, last, is_whole;  // stream-K: the segment's tile among the shared, its steps [first, last)
    if (g.stream_k) {
      slot = first_slot + maximum(w - whole, 0) / programs;
      Value base = slot * steps_per_tile;
      first = maximum(lo, base);
      last = minimum(hi, base + steps_per_tile);
      Value whole_tile = w < whole;
      t = select(whole_tile, w, whole + slot);
      k_lo = select(whole_tile, 0, (first - base) * g.bk);
      k_hi = select(whole_tile, kdim, select(first < last, minimum((last - base) * g.bk, kdim), k_lo));
      is_whole = whole_tile | ((first == base) & (last == base + steps_per_tile));
    }
    Value first_m = t / per_group * g.group_m;
    Value group_rows = minimum(tiles_m - first_m, g.group_m);
    Value unit_row = first_m + t % per_group % group_rows, unit_col = t % per_group / group_rows;
    // A cluster's programs take the unit's tiles by rank.
    Value row = (g.cluster_m > 1 ? unit_row * g.cluster_m + k.cluster_rank() : unit_row) * g.bm;
    Value col = (g.cluster_n > 1 ? unit_col * g.cluster_n + k.cluster_rank() : unit_col) * g.bn;
    // A grouped tile's group; one past the rows in use runs no K step.
    Value group;
    if (g.grouped) {
      Value live = row < used;
      group = load(groups + row / g.bm, live, 0);
      k_hi = select(live, k_hi, k_lo);
    }
    // The epilogue's operands are read before the K loop, which hides their latency.
    Value scale = g.scaled ? load(scale_a) * load(g.grouped ? scale_b + group : scale_b) : Value();  // f32
    Value row_scale;                                                                                 // [BM] f32
    if (g.row_scales) {
      Value rows = row + k.arange(0, g.bm);
      row_scale = load(row_scales + rows, rows < m, 0.0f);
    }
    Value half_bias;                                                     // [BN] f32, bias / 2
    if (g.bias_gelu) {
      Value cols = col + k.arange(0, g.bn);  // [BN] i32
      half_bias = cast(load(bias + cols, cols < n, 0.0), f32) * 0.5;
    }
    Var acc = k.var(k.zeros({g.bm, g.bn}, f32));  // [BM, BN] f32, registers
    k.for_range(k_lo, k_hi, g.bk,
                [&](Value kk) {
                  // An operand the cluster's two tiles share comes once for both.
                  auto load_a = [&](const std::vector<Operand>& at) {
                    return g.cluster_n > 1 ? tma_multicast(a, at) : tma_load(a, at);
                  };
                  auto load_b = [&](const std::vector<Operand>& at) {
                    return g.cluster_m > 1 ? tma_multicast(b, at) : tma_load(b, at);
                  };
                  Value at = g.a_mk ? load_a({row, kk}) : trans(load_a({kk, row}));  // [BM, BK], smem
                  Value bt = g.grouped ? trans(reshape(load_b({group, col, kk}), {g.bn, g.bk}))
                             : g.b_nk  ? trans(load_b({col, kk}))
                                       : load_b({kk, col});  // [BK, BN], smem
                  acc = gemm_step(at, bt, acc, g.in.is_float8() && !g.fast_accum,
                                  g.tf32 ? Precision::kTf32 : Precision::kIeee);
                },
                {.stages = g.stages});
    auto epilogue = [&](Value out) {  // [BM, BN] f32, registers
      if (g.bias_gelu) {
        // h = (out + bias) / 2 in one fused multiply-add; see gelu_of_half.
        Value hb = expand_dims(half_bias, 0);  // [1, BN]
        out = gelu_of_half(g.scaled ? fma(out, scale * 0.5, hb) : fma(out, 0.5, hb));
      } else if (g.scaled) {
        out = out * scale;
      }
      if (g.row_scales) out = out * expand_dims(row_scale, 1);
      if (g.split_k > 1) {
        tma_reduce(AtomicOp::kAdd, c, {row, col}, out);
      } else {
        tma_store(c, {row, col}, g.out == f32 ? out : cast(out, g.out));
      }
    };
    if (!g.stream_k) {
      epilogue(acc);
      return;
    }
    // A part of a shared tile: add it to the tile's slot; the part that
    // completes the tile's count finishes it.
    Var sum = k.var(acc), done = k.var(is_whole);
    k.if_((!is_whole) & (first < last), [&] {
      tma_reduce(AtomicOp::kAdd, slots, {slot * g.bm, 0}, acc);
      Value taken = last - first;
      k.if_(atomic_add(counts + slot, taken) + taken == steps_per_tile, [&] {
        Value at = slot_ptr + (slot * g.bm + expand_dims(k.arange(0, g.bm), 1)) * g.bn +
                   expand_dims(k.arange(0, g.bn), 0);  // [BM, BN]
        sum = load(at);
        store(at, k.zeros({g.bm, g.bn}, f32));
        store(counts + slot, k.constant(0, i32));
        done = true;
      });
    });
    k.if_(done, [&] { epilogue(sum); });
  }, {.warp_specialize = g.warp_specialize, .cooperative = g.cooperative});
  return k.build();
}

// A GEMM in the form of Triton's matmul tutorial: every operand through
// pointers, no tensor maps, so any row stride serves. One program per C
// tile in the grouped order, A's and B's tiles loaded in a K loop with
// masks at the matrices' edges; the loop issues each step's loads an
// iteration ahead (codegen/prefetch.h). A is [M, K] and B [N, K], both
// row-major, C [M, N] of `out`; args a, b, c, m, n, k; launch on
// pointer_gemm_grid programs.
struct PointerGemmConfig {
  int64_t bm = 128, bn = 128, bk = 64;
  DType in = bf16, out = bf16;
  int group_m = 8;
  int stages = 0;  // the K loop's LoopOptions::stages: 1 loads each step in its own iteration
  // The tutorial's loop literally: pointer tiles stepped by BK each
  // iteration (a_ptrs += BLOCK_K) and masks against what K has left, where
  // the default computes them from the induction variable. tessel turns
  // the steps into the same addresses (close_stepped_carried, dsl/passes.h).
  bool stepped = false;
};
inline absl::StatusOr<Kernel> pointer_gemm_kernel(const PointerGemmConfig& g, std::string name = "pointer_gemm") {
  KernelBuilder k(std::move(name));
  Value a = k.arg(ptr(g.in), "a"), b = k.arg(ptr(g.in), "b"), c = k.arg(ptr(g.out), "c");
  Value m = k.arg(i32, "m"), n = k.arg(i32, "n"), kdim = k.arg(i32, "k");
  Value tiles_m = cdiv(m, g.bm), tiles_n = cdiv(n, g.bn);
  Value t = k.program_id(), per_group = tiles_n * g.group_m;
  Value first_m = t / per_group * g.group_m, group_rows = minimum(tiles_m - first_m, g.group_m);
  Value rows = (first_m + t % per_group % group_rows) * g.bm + k.arange(0, g.bm);  // [BM] i32
  Value cols = t % per_group / group_rows * g.bn + k.arange(0, g.bn);              // [BN] i32
  Value a_rows = expand_dims(rows * kdim, 1), b_rows = expand_dims(cols * kdim, 1);
  Value a_in = expand_dims(rows < m, 1), b_in = expand_dims(cols < n, 1);
  Var acc = k.var(k.zeros({g.bm, g.bn}, f32));  // [BM, BN] f32
  if (g.stepped) {
    Value ks = expand_dims(k.arange(0, g.bk), 0);  // [1, BK] i32
    Var pa = k.var(a + a_rows + ks), pb = k.var(b + b_rows + ks);
    k.for_range(0, cdiv(kdim, g.bk), 1,
                [&](Value kk) {
                  Value left = kdim - kk * g.bk;
                  Value at = load(pa, a_in & (ks < left), 0.0);  // [BM, BK]
                  Value bt = load(pb, b_in & (ks < left), 0.0);  // [BN, BK]
                  acc = dot(at, trans(bt), acc);
                  pa = pa + g.bk;
                  pb = pb + g.bk;
                },
                {.stages = g.stages});
  } else {
    k.for_range(0, kdim, g.bk,
                [&](Value kk) {
                  Value ks = expand_dims(kk + k.arange(0, g.bk), 0);          // [1, BK] i32
                  Value at = load(a + a_rows + ks, a_in & (ks < kdim), 0.0);  // [BM, BK]
                  Value bt = load(b + b_rows + ks, b_in & (ks < kdim), 0.0);  // [BN, BK]
                  acc = dot(at, trans(bt), acc);
                },
                {.stages = g.stages});
  }
  store(c + expand_dims(rows * n, 1) + expand_dims(cols, 0), cast(acc, g.out),
        expand_dims(rows < m, 1) & expand_dims(cols < n, 0));
  return k.build();
}
inline int64_t pointer_gemm_grid(const PointerGemmConfig& g, int64_t m, int64_t n) {
  return ((m + g.bm - 1) / g.bm) * ((n + g.bn - 1) / g.bn);
}

// The three maps gemm_kernel(g) takes, on `device`: over A [m, k] (or [k, m]
// without g.a_mk), B [n, k] (or [k, n] without g.b_nk; [groups, n, k] where
// g.grouped) and C [m, n].
struct GemmMaps {
  TensorMap a, b, c;
};
inline absl::StatusOr<GemmMaps> gemm_maps(const Device& device, const GemmConfig& g, const Buffer& a, const Buffer& b,
                                          const Buffer& c, int64_t m, int64_t n, int64_t k, int64_t groups = 1) {
  absl::StatusOr<TensorMap> am = device.tensor_map(g.in, a, g.a_mk ? Shape{m, k} : Shape{k, m}, g.a_box(), g.swizzle);
  if (!am.ok()) return am.status();
  const Shape b_shape = g.grouped ? Shape{groups, n, k} : g.b_nk ? Shape{n, k} : Shape{k, n};
  absl::StatusOr<TensorMap> bm = device.tensor_map(g.b_type(), b, b_shape, g.b_box(), g.swizzle);
  if (!bm.ok()) return bm.status();
  absl::StatusOr<TensorMap> cm = device.tensor_map(g.out, c, {m, n}, {g.bm, g.bn}, g.out_swizzle(g.out));
  if (!cm.ok()) return cm.status();
  return GemmMaps{*am, *bm, *cm};
}

// The bm x bn tiles of an m x n C.
inline int64_t gemm_tiles(const GemmConfig& g, int64_t m, int64_t n) {
  return (m + g.bm - 1) / g.bm * ((n + g.bn - 1) / g.bn);
}

// The units of work gemm_kernel(g) spreads over its programs for an m x n
// C: its tiles, each split_k times; with clusters, a program's share of a
// cluster's unit of tiles (so the programs that have work).
inline int64_t gemm_work(const GemmConfig& g, int64_t m, int64_t n) {
  if (g.cluster() > 1) {
    const int64_t rows = ((m + g.bm - 1) / g.bm + g.cluster_m - 1) / g.cluster_m;
    const int64_t cols = ((n + g.bn - 1) / g.bn + g.cluster_n - 1) / g.cluster_n;
    return rows * cols * g.cluster();
  }
  return gemm_tiles(g, m, n) * g.split_k;
}

// The grid for gemm_kernel(g) at m x n on `programs` programs at most (a
// device's compute units): no more programs than have work, in whole
// clusters.
inline int gemm_grid(const GemmConfig& g, int64_t m, int64_t n, int programs) {
  const int c = g.cluster();
  return static_cast<int>(std::max<int64_t>(std::min<int64_t>(gemm_work(g, m, n), programs) / c * c, c));
}

// Tile widths fitted to an m x n C on `programs` programs, for tiles of bm
// rows: the `count` multiples of 8 from 128 to `widest` whose tiles take each
// program the least time, counted as the rounds of tiles it runs times the
// width (a round's time grows with it), the wider first where equal. At
// 3000 x 5000 on 132 programs, 128-row tiles 152 wide make 792 tiles, six
// whole waves (6 x 152 against 4 x 256 for 480 tiles of 256: the fourth
// round of those is two thirds full), and 232 wide 528, four. (Two
// warpgroups keep at most 160 columns of 256 rows in registers.) None
// where a size or `programs` is not positive.
inline std::vector<int64_t> fitted_widths(int64_t m, int64_t n, int64_t bm, int64_t programs, size_t count,
                                          int64_t widest = 256) {
  if (m <= 0 || n <= 0 || bm <= 0 || programs <= 0) return {};  // no tiles to fit
  std::vector<std::pair<int64_t, int64_t>> by_cost;             // (rounds * width, -width)
  const int64_t rows = (m + bm - 1) / bm;
  for (int64_t bn = 128; bn <= widest; bn += 8) {
    const int64_t tiles = rows * ((n + bn - 1) / bn);
    by_cost.emplace_back((tiles + programs - 1) / programs * bn, -bn);
  }
  std::sort(by_cost.begin(), by_cost.end());
  std::vector<int64_t> widths;
  for (size_t i = 0; i < by_cost.size() && i < count; ++i) widths.push_back(-by_cost[i].second);
  return widths;
}

// The shared tiles (and so the workspace slots) of a stream-K GEMM
// (GemmConfig::stream_k) of an m x n C on `programs` programs.
inline int64_t gemm_stream_k_slots(const GemmConfig& g, int64_t m, int64_t n, int64_t programs) {
  const int64_t tiles = gemm_tiles(g, m, n);
  if (tiles <= programs) return tiles;
  const int64_t rest = tiles % programs;
  return rest == 0 || rest * 2 >= programs ? rest : rest + programs;
}

// A stream-K GEMM's workspace for an m x n C on `programs` programs: an f32
// bm x bn slot and an i32 counter per shared tile, all zero before the first
// launch (the kernel leaves them zero), the map over the slots that the
// kernel takes, and the grid to launch on (the shares depend on it).
struct GemmWorkspace {
  Buffer tiles, counts;
  TensorMap map;
  int programs = 0;
};
inline absl::StatusOr<GemmWorkspace> gemm_workspace(const Device& device, const GemmConfig& g, int64_t m, int64_t n,
                                                    int programs) {
  if (programs < 1) {
    return absl::InvalidArgumentError(absl::StrCat("gemm_workspace: programs must be >= 1, got ", programs));
  }
  const int64_t slots = std::max<int64_t>(gemm_stream_k_slots(g, m, n, programs), 1);
  const std::vector<float> zeros(slots * g.bm * g.bn, 0.0f);
  absl::StatusOr<Buffer> tiles = device.allocate(zeros.size() * 4);
  if (!tiles.ok()) return tiles.status();
  absl::StatusOr<Buffer> counts = device.allocate(slots * 4);
  if (!counts.ok()) return counts.status();
  if (absl::Status s = device.copy_to_device(*tiles, zeros.data(), zeros.size() * 4); !s.ok()) return s;
  if (absl::Status s = device.copy_to_device(*counts, zeros.data(), slots * 4); !s.ok()) return s;
  absl::StatusOr<TensorMap> map =
      device.tensor_map(f32, *tiles, {slots * g.bm, g.bn}, {g.bm, g.bn}, g.out_swizzle(f32));
  if (!map.ok()) return map.status();
  return GemmWorkspace{*std::move(tiles), *std::move(counts), *map, programs};
}

// A grouped GEMM's rows (GemmConfig::grouped): each block's group and the
// rows in use; and C's row scales where GemmConfig::row_scales.
struct GemmRows {
  Buffer groups, total, scales;
};

// gemm_kernel(g)'s arguments: the maps and the problem's sizes, then `bias`
// where g.bias_gelu, the scales where g.scaled, `rows`' buffers where
// g.grouped or g.row_scales, and the workspace where g.stream_k. They point
// into `maps` and `ws`, which must outlive them.
inline std::vector<KernelArg> gemm_args(const GemmConfig& g, const GemmMaps& maps, int64_t m, int64_t n, int64_t k,
                                        const Buffer& bias, const Buffer& scale_a, const Buffer& scale_b,
                                        const GemmWorkspace* ws = nullptr, const GemmRows* rows = nullptr) {
  std::vector<KernelArg> args = {maps.a, maps.b, maps.c, static_cast<int32_t>(m), static_cast<int32_t>(n),
                                 static_cast<int32_t>(k)};
  if (g.bias_gelu) args.push_back(bias);
  if (g.scaled) args.insert(args.end(), {scale_a, scale_b});
  if (g.grouped && rows != nullptr) args.insert(args.end(), {rows->groups, rows->total});
  if (g.row_scales && rows != nullptr) args.push_back(rows->scales);
  if (g.stream_k && ws != nullptr) args.insert(args.end(), {ws->map, ws->tiles, ws->counts});
  return args;
}

// After a split-K GEMM (GemmConfig::split_k): dst [count] = acc [count] (C,
// f32) rounded to `out`, and acc zeroed for the next split-K GEMM, so that a
// workspace zeroed once stays ready.
inline constexpr int kFinishBlock = 2048;
inline absl::StatusOr<Kernel> splitk_finish_kernel(DType out) {
  KernelBuilder k("splitk_finish");
  Value acc = k.arg(ptr(f32), "acc"), dst = k.arg(ptr(out), "dst");
  Value count = k.arg(i32, "count");
  k.for_each_tile(cdiv(count, kFinishBlock), [&](Value t) {
    Value offs = t * kFinishBlock + k.arange(0, kFinishBlock);  // [B] i32
    Value mask = offs < count;
    store(dst + offs, cast(load(acc + offs, mask, 0.0f), out), mask);
    store(acc + offs, k.zeros({kFinishBlock}, f32), mask);
  });
  return k.build();
}

// The main sample's GEMM (samples/matmul.cc), which the GPU benchmarks time
// too: 128 x 256 x 64 tiles, 3 stages, C in bf16, on two warpgroups.
inline constexpr GemmConfig kMatmul = {.bm = 128, .bn = 256, .bk = 64, .out = bf16, .stages = 3};
inline constexpr int kMatmulWarps = 8;
// The other configuration the sample lets the autotuner consider: 128 x 128
// tiles, 4 stages (faster where 128 x 256 tiles leave SMs idle).
inline constexpr GemmConfig kMatmulNarrow = {.bm = 128, .bn = 128, .bk = 64, .out = bf16, .stages = 4};
// And warp-specialized (ping-pong): two consumer warpgroups on 128 x 128
// tiles of their own, one's epilogue under the other's products, and a
// producer warpgroup: 12 warps.
inline constexpr GemmConfig kMatmulPingPong = {
    .bm = 128, .bn = 128, .bk = 64, .out = bf16, .stages = 4, .warp_specialize = true};
inline constexpr int kMatmulPingPongWarps = 12;
inline absl::StatusOr<Kernel> matmul_kernel(std::string name = "matmul") { return gemm_kernel(kMatmul, std::move(name)); }
// The sample's GEMM on AMD GPUs (gfx942): tiles that fit in 64 KiB of LDS,
// on four wavefronts; no pipeline (AMD has no asynchronous TMA).
inline constexpr GemmConfig kMatmulAmd = {.bm = 64, .bn = 64, .bk = 64, .out = bf16, .stages = 1};
inline constexpr int kMatmulAmdWarps = 4;

// --- Attention forward (flash attention): O = softmax(Q K^T * scale) V for
// each of `heads` heads, Q, K, V and O [heads, len, d] row-major. Each
// program takes [bm, d] blocks of one head's queries and walks that head's
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
        Value h = t / blocks;
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
          Value s = dot(qt, trans(reshape(tma_load(kt, {h, j, 0}), {c.bn, c.d})), k.zeros({c.bm, c.bn}, f32));
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
          acc = dot(cast(p, c.in), reshape(tma_load(v, {h, j, 0}), {c.bn, c.d}), acc * expand_dims(alpha, 1));
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

// The attention kernel's maps of Q, K, V and O [heads, len, d] in `q`,
// `k`, `v` and `o`.
struct AttnMaps {
  TensorMap q, k, v, o;
};
inline absl::StatusOr<AttnMaps> attention_maps(const Device& device, const AttnConfig& c, const Buffer& q,
                                               const Buffer& k, const Buffer& v, const Buffer& o, int64_t heads,
                                               int64_t len) {
  const std::vector<int64_t> shape = {heads, len, c.d};
  auto map = [&](DType dtype, const Buffer& buf, int64_t rows) {
    return device.tensor_map(dtype, buf, shape, {1, rows, c.d}, Swizzle::k128B);
  };
  absl::StatusOr<TensorMap> qm = map(c.in, q, c.bm), km = map(c.in, k, c.bn), vm = map(c.in, v, c.bn),
                            om = map(c.out, o, c.bm);
  for (const absl::StatusOr<TensorMap>* m : {&qm, &km, &vm, &om}) {
    if (!m->ok()) return m->status();
  }
  return AttnMaps{*qm, *km, *vm, *om};
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
// so that the heads the running programs add into stay in L2.
inline absl::StatusOr<Kernel> attention_bwd_kernel(const AttnBwdConfig& c, std::string name = "attention_bwd") {
  // A program's block is n rows (its keys in the first loop, its queries in
  // the second); each loop steps over the other side m rows at a time.
  const int64_t n = c.block, m = attention_bwd_step(c);
  if (m % 16 != 0 || n % m != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention_bwd_kernel: step (", m, ") must be a multiple of 16 dividing the block (", n, ")"));
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
  k.for_each_tile(heads * blocks, [&](Value t) {
    // With the split and the mask, a key block's work shrinks with its row:
    // even heads take their blocks longest first, odd ones shortest first,
    // so that the programs, which take tiles round-robin, get even shares.
    Value h = t / blocks, b = t % blocks;
    Value b0 = (c.split && c.causal ? select(h % 2 == 0, b, blocks - 1 - b) : b) * n;
    // Per query row from `row` (rows past `len` read the next head's or
    // zeros; their columns are masked): its log2-sum-exp and D.
    auto row_stats = [&](Value lse_map, Value delta_map, Value row) {
      return std::pair{tma_load(lse_map, {h * len + row}), tma_load(delta_map, {h * len + row})};
    };
    {  // dK and dV of keys b0 .. b0 + n
      Value kb = box(kt, n, h, b0), vb = box(v, n, h, b0);
      Value key = expand_dims(b0 + k.arange(0, n), 1);  // [n, 1]
      Var dkb = k.var(k.zeros({n, c.d}, f32)), dvb = k.var(k.zeros({n, c.d}, f32));
      // Every query of a step from `whole` to `full` sees every key of the
      // block, so only the steps before (the block's diagonal, under the
      // mask) and after (past `len`) mask. (A branch in the second loop
      // measured slower than its select.)
      Value whole = c.causal ? b0 + n : Value(k.constant(0, i32));
      Value full = len / static_cast<int32_t>(m) * static_cast<int32_t>(m);
      k.for_range(c.causal ? b0 : Value(k.constant(0, i32)), len, m,
                  [&](Value i0) {
                    Value qb = box(q_step, m, h, i0), dob = box(dout_step, m, h, i0);
                    auto [lse_i, d_i] = row_stats(lse_step, delta_step, i0);
                    Value st = dot(kb, trans(qb), k.zeros({n, m}, f32));  // S^T [keys, queries]
                    Var pt = k.var(exp2(fma(st, log2_scale, expand_dims(-lse_i, 0)), MathForm::kFast));
                    k.if_((i0 < whole) | (i0 >= full), [&] {
                      Value query = expand_dims(i0 + k.arange(0, m), 0);  // [1, m]
                      Value seen = query < len;
                      if (c.causal) seen = seen & (key <= query);
                      pt = select(seen, Value(pt), 0.0f);
                    });
                    dvb = dot(cast(pt, c.in), dob, dvb);
                    Value dpt = dot(vb, trans(dob), k.zeros({n, m}, f32));  // dP^T
                    Value dst = cast(pt * (dpt - expand_dims(d_i, 0)), c.in);  // dS^T
                    dkb = dot(dst, qb, dkb);
                    if (c.split) {
                      Value share = dot(trans(dst), kb, k.zeros({m, c.d}, f32));  // of dQ / scale
                      tma_reduce(AtomicOp::kAdd, dq, {h, i0, 0}, reshape(share, {1, m, c.d}));
                    }
                  },
                  {.stages = c.stages});
      store_block(dk, h, b0, dkb * scale);
      store_block(dv, h, b0, dvb);
    }
    if (c.split) return;
    {  // dQ of queries b0 .. b0 + n
      Value qb = box(q, n, h, b0), dob = box(dout, n, h, b0);
      auto [lse_i, d_i] = row_stats(lse, delta, b0);
      Value query = expand_dims(b0 + k.arange(0, n), 1);  // [n, 1]
      Var dqb = k.var(k.zeros({n, c.d}, f32));
      k.for_range(0, c.causal ? minimum(len, b0 + n) : len, m,
                  [&](Value j0) {
                    Value kb = box(k_step, m, h, j0), vb = box(v_step, m, h, j0);
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
    }
  });
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
  // In AttnBwdMaps' order.
  std::vector<absl::StatusOr<TensorMap>> made;
  auto rows = [&](const Buffer* b, DType dtype, int64_t r) {
    made.push_back(device.tensor_map(dtype, *b, {heads, len, c.d}, {1, r, c.d}, Swizzle::k128B));
  };
  for (int64_t r : {c.block, attention_bwd_step(c)}) {
    for (int i = 0; i < 4; ++i) rows(buffers[i], c.in, r);
  }
  if (c.split) {
    rows(buffers[4], f32, attention_bwd_step(c));
  } else {
    rows(buffers[4], c.out, c.block);
  }
  for (int i = 5; i < 7; ++i) rows(buffers[i], c.out, c.block);
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
// configuration's types but the log2-sum-exp ([heads, len] f32): the
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
  const int64_t tiles = heads * ((len + c.block - 1) / c.block);
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

// --- Triggered all-gather. The gathered buffer is i32 [world * rows, cols]:
// rank r's shard is rows [r * rows, (r + 1) * rows), written by r's producer
// and carried to every peer by a plan with a waves() schedule.
inline constexpr int kAgBM = 32, kAgBN = 64, kAgCheckBlock = 1024;

// What element `index` of the gathered buffer holds in `epoch`: an element
// left from an older epoch or copied to the wrong place differs from it.
inline int32_t allgather_value(uint64_t epoch, int64_t index) {
  return static_cast<int32_t>(((epoch & 0xFF) << 24) | (static_cast<uint64_t>(index) & 0xFFFFFF));
}

// Persistent over the shard's [kAgBM, kAgBN] tiles in row-major order. A
// batch holds W waves of tiles, as waves(view, world, {kAgBM, kAgBN}, P,
// kRowMajor, W) numbers them: a program publishes batch first_batch + t /
// (P * W) after its last tile in it. So that benchmarks can make the
// producer as slow as the transfer it overlaps, each element first goes
// through `rounds` multiply-adds and as many that undo them (work on the
// chip, in registers), and each tile is written `passes` times, the last
// pass with the final values (work on the GPU's memory, which the transfer
// shares). With `defer`, every publish but a program's last leaves the
// system-scope fence to the rank's next publish (TriggeredView::publish).
// Without `publishes`, the same work with no publish at all (the view is
// not read): what the producer costs a program that hands nothing off.
inline absl::StatusOr<Kernel> allgather_producer_kernel(bool publishes = true) {
  // x * kMix + kStep, undone by (x - kStep) * kUnmix (mod 2^32).
  constexpr int32_t kMix = -1640531535, kUnmix = 244002641, kStep = 12345;
  KernelBuilder k(publishes ? "allgather_producer" : "allgather_producer_alone");
  TriggeredView view = k.triggered_view("plan");
  Value buf = k.arg(ptr(i32), "buf");
  Value rank = k.arg(i32, "rank"), rows = k.arg(i32, "rows"), cols = k.arg(i32, "cols");
  Value epoch = k.arg(i32, "epoch"), first_batch = k.arg(i32, "first_batch"), passes = k.arg(i32, "passes");
  Value rounds = k.arg(i32, "rounds"), waves_per_batch = k.arg(i32, "waves_per_batch");
  Value defer = k.arg(i1, "defer");
  Value tiles_n = cdiv(cols, kAgBN), num_tiles = cdiv(rows, kAgBM) * tiles_n;
  k.for_each_tile(num_tiles, [&](Value t) {
    Value r = expand_dims(t / tiles_n * kAgBM + k.arange(0, kAgBM), 1);  // [BM, 1] i32
    Value c = expand_dims(t % tiles_n * kAgBN + k.arange(0, kAgBN), 0);  // [1, BN] i32
    Value index = (rank * rows + r) * cols + c;                           // [BM, BN] i32
    Value value = ((epoch & 0xFF) << 24) | (index & 0xFFFFFF);            // [BM, BN] i32
    auto write = [&](Value v) {
      k.for_range(0, passes, 1, [&](Value pass) {
        store(buf + index, v + (pass - (passes - 1)), (r < rows) & (c < cols));
      });
    };
    // Without rounds the values are written as computed: through the two
    // empty loops the write passes measured 17 % slower.
    k.if_(
        rounds > 0,
        [&] {
          Var x = k.var(value);
          k.for_range(0, rounds, 1, [&](Value) { x = x * kMix + kStep; });
          k.for_range(0, rounds, 1, [&](Value) { x = (x - kStep) * kUnmix; });
          write(x);
        },
        [&] { write(value); });
    if (!publishes) return;
    Value wave = t / k.num_programs();
    k.if_((wave % waves_per_batch == waves_per_batch - 1) | (t + k.num_programs() >= num_tiles),
          [&] { view.publish(first_batch + wave / waves_per_batch, defer & (t + k.num_programs() < num_tiles)); });
  });
  return k.build();
}

// Waits for every batch (its own ones read ready, the others arrival), then
// counts elements of the gathered buffer that differ from allgather_value.
inline absl::StatusOr<Kernel> allgather_check_kernel() {
  KernelBuilder k("allgather_check");
  TriggeredView view = k.triggered_view("plan");
  Value buf = k.arg(ptr(i32), "buf");
  Value total = k.arg(i32, "total"), batches = k.arg(i32, "batches"), epoch = k.arg(i32, "epoch");
  Value errors = k.arg(ptr(i32), "errors");
  k.for_range(0, batches, 1, [&](Value b) { view.wait(b); });
  k.for_each_tile(cdiv(total, kAgCheckBlock), [&](Value block) {
    Value offs = block * kAgCheckBlock + k.arange(0, kAgCheckBlock);  // [B] i32
    Value mask = offs < total;                                         // [B] i1
    Value v = load(buf + offs, mask, 0);                               // [B] i32
    Value bad = (v != (((epoch & 0xFF) << 24) | (offs & 0xFFFFFF))) & mask;
    atomic_add(errors, sum(cast(bad, i32), 0));
  });
  return k.build();
}

}  // namespace samples
