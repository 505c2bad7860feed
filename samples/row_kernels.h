// The samples' elementwise, row-wise and copy kernels: vector add,
// softmaxes, norms, prefix sums and recurrences, sorts, a router's top k,
// reductions over one axis, and TMA tile copies. Their exponentials take
// the fast form (MathForm::kFast, the GPU's exp2 unit), as Triton's tl.exp
// does, and the softmaxes divide by the row's sum in the fast form
// (div.full.f32), as Triton's `/` does, so that the benchmarks compare like
// with like.
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
#include "base/float8.h"
#include "base/status.h"
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
// columns alone, and the rows' indices.
struct RowTile {
  Value offs, mask, col, col_mask;
  Value row;  // [BR] i32: the rows' indices
};
inline RowTile row_tile(KernelBuilder& k, const Value& rows, const Value& cols, RowBlock block) {
  Value r = k.program_id() * block.rows + k.arange(0, block.rows);  // [BR] i32
  Value c = k.arange(0, block.cols);                                  // [BC] i32
  Value inside = c < cols;                                            // [BC] i1
  return {expand_dims(r, 1) * cols + expand_dims(c, 0), expand_dims(r < rows, 1) & expand_dims(inside, 0), c, inside,
          r};
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

// The largest magnitude a row quantized to `to` (i8 or f8e4m3) maps to.
inline float quantized_limit(DType to) { return to == i8 ? 127.0f : 448.0f; }

// Per-token (per-row) dynamic quantization, the activations' half of a
// W8A8 GEMM: each row of x (f32 or bf16) divided by its scale, the row's
// largest magnitude over quantized_limit(to) (1 for a row of zeros),
// rounded to `to` (i8: halfway cases away from zero; f8e4m3: to nearest
// even), the scale stored beside it: args x, q, scales (f32 [rows]),
// rows, cols. q * scale is x within half a step of `to`; a GEMM with
// GemmConfig::row_scales takes the scales back.
inline absl::Status check_quantized_types(const char* kernel, DType from, DType to) {
  if (!(to == i8 || to == f8e4m3) || !(from == f32 || from == bf16)) {
    return absl::InvalidArgumentError(
        absl::StrCat(kernel, ": quantizes f32 or bf16 rows to i8 or f8e4m3, got ", from.name(), " to ", to.name()));
  }
  return absl::OkStatus();
}
// v [R, C] f32 quantized row by row: each row over its scale, rounded to
// `to`; and the scales [R].
struct QuantizedTile {
  Value q, scale;
};
inline QuantizedTile quantize_tile(const Value& v, DType to) {
  Value amax = max(abs(v), 1);  // [R]
  Value scale = where(amax > 0.0f, amax / quantized_limit(to), 1.0f);
  Value scaled = v / expand_dims(scale, 1);
  return {cast(to == i8 ? round(scaled) : scaled, to), scale};
}

inline absl::StatusOr<Kernel> quantize_rows_kernel(RowBlock block, DType from, DType to) {
  TESSEL_RETURN_IF_ERROR(check_quantized_types("quantize_rows_kernel", from, to));
  KernelBuilder k("quantize_rows");
  Value x = k.arg(ptr(from), "x"), q = k.arg(ptr(to), "q"), scales = k.arg(ptr(f32), "scales");
  Value rows = k.arg(i32, "rows"), cols = k.arg(i32, "cols");
  RowTile t = row_tile(k, rows, cols, block);
  QuantizedTile out = quantize_tile(load_f32(x + t.offs, t.mask, 0.0f), to);
  store(q + t.offs, out.q, t.mask);
  store(scales + t.row, out.scale, t.row < rows);
  return k.build();
}

// Per-token-group quantization, the activations' half of a block-scaled
// GEMM (DeepSeek-V3's 1 x 128 groups): quantize_rows_kernel's arithmetic on
// each group of block.cols consecutive elements of a row (the last group
// of a row what is left of it), the scales stored group by group: args x,
// q, scales (f32 [ceil(cols / block.cols), rows]: the layout of
// GemmConfig::block_scales's a_blocks where block.cols is 128), rows,
// cols. block.rows groups per program, a power of two block.cols wide.
inline absl::StatusOr<Kernel> quantize_groups_kernel(RowBlock block, DType from, DType to) {
  TESSEL_RETURN_IF_ERROR(check_quantized_types("quantize_groups_kernel", from, to));
  KernelBuilder k("quantize_groups");
  Value x = k.arg(ptr(from), "x"), q = k.arg(ptr(to), "q"), scales = k.arg(ptr(f32), "scales");
  Value rows = k.arg(i32, "rows"), cols = k.arg(i32, "cols");
  Value groups = cdiv(cols, block.cols);                                      // a row's
  Value index = k.program_id() * block.rows + k.arange(0, block.rows);        // [BR] i32: row * groups + group
  Value row = index / groups, first = index % groups * block.cols;            // [BR] i32
  Value c = expand_dims(first, 1) + expand_dims(k.arange(0, block.cols), 0);  // [BR, BC] i32: columns
  Value mask = expand_dims(index < rows * groups, 1) & (c < cols);
  Value offs = expand_dims(row, 1) * cols + c;
  QuantizedTile out = quantize_tile(load_f32(x + offs, mask, 0.0f), to);
  store(q + offs, out.q, mask);
  store(scales + index % groups * rows + row, out.scale, index < rows * groups);
  return k.build();
}

// The kernels' arithmetic on the host: the scale of values whose largest
// magnitude is `amax`, and a value over it rounded to `to`, as stored.
inline float quantized_scale(float amax, DType to) { return amax > 0 ? amax / quantized_limit(to) : 1.0f; }
inline uint8_t quantized_byte(float v, DType to) {
  return to == i8 ? static_cast<uint8_t>(static_cast<int8_t>(std::clamp(std::round(v), -128.0f, 127.0f)))
                  : float_to_float8(v, Float8::kE4M3);
}

// quantize_rows_kernel's arithmetic on the host for one row of `cols`
// values: each over the row's scale, rounded to `to`, as stored into `q`;
// returns the scale.
inline float quantize_row_reference(const float* x, int64_t cols, DType to, uint8_t* q) {
  float amax = 0;
  for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::abs(x[c]));
  const float scale = quantized_scale(amax, to);
  for (int64_t c = 0; c < cols; ++c) q[c] = quantized_byte(x[c] / scale, to);
  return scale;
}

// Weights w [rows, cols] quantized per `block` x `block` block on the host,
// as checkpoints ship DeepSeek-V3's: each block over its largest magnitude
// / quantized_limit(to) (1 for a block of zeros), rounded as
// quantize_row_reference rounds, into q [rows, cols]; returns the scales
// [ceil(rows / block), ceil(cols / block)], row-major (with block 128, the
// b_blocks of GemmConfig::block_scales).
inline std::vector<float> quantize_blocks_reference(const float* w, int64_t rows, int64_t cols, DType to, uint8_t* q,
                                                    int64_t block = 128) {
  const int64_t block_rows = (rows + block - 1) / block, block_cols = (cols + block - 1) / block;
  std::vector<float> scales(block_rows * block_cols);
  for (int64_t br = 0; br < block_rows; ++br) {
    for (int64_t bc = 0; bc < block_cols; ++bc) {
      const int64_t r_end = std::min(rows, (br + 1) * block), c_end = std::min(cols, (bc + 1) * block);
      float amax = 0;
      for (int64_t r = br * block; r < r_end; ++r) {
        for (int64_t c = bc * block; c < c_end; ++c) amax = std::max(amax, std::abs(w[r * cols + c]));
      }
      const float scale = quantized_scale(amax, to);
      scales[br * block_cols + bc] = scale;
      for (int64_t r = br * block; r < r_end; ++r) {
        for (int64_t c = bc * block; c < c_end; ++c) q[r * cols + c] = quantized_byte(w[r * cols + c] / scale, to);
      }
    }
  }
  return scales;
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

// Rotary position embeddings (RoPE) as Llama applies them to queries and
// keys: y = x * cos + rotate_half(x) * sin, where rotate_half(x) is
// concat(-x2, x1) of x's halves along the head dimension. x and y are
// [rows, block.cols] (a row per token and head, row r of token r / heads),
// cos and sin [tokens, block.cols] (a row per position, its halves equal,
// as the models' tables hold them). block.rows rows per program; f32
// arithmetic, rounded once to the dtype. rotate_half's halves come from
// lanes of the same warp where the rows are held in 16-byte runs (aligned
// rows of 64 or 128): no shared memory. Args x, y, cos, sin, rows, heads.
inline absl::StatusOr<Kernel> rope_kernel(RowBlock block, DType d = f32) {
  const int dim = block.cols;
  if (dim < 2 || dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("rope_kernel: the head dimension must be even, not ", dim));
  }
  KernelBuilder k("rope");
  Value x = k.arg(ptr(d), "x"), y = k.arg(ptr(d), "y"), cos = k.arg(ptr(d), "cos"), sin = k.arg(ptr(d), "sin");
  Value rows = k.arg(i32, "rows"), heads = k.arg(i32, "heads");
  Value r = k.program_id() * block.rows + k.arange(0, block.rows);  // [BR] i32
  Value c = expand_dims(k.arange(0, dim), 0);                       // [1, D] i32
  Value mask = expand_dims(r < rows, 1) & (c < dim);                // [BR, D] i1
  Value offs = expand_dims(r, 1) * dim + c, at = expand_dims(r / heads, 1) * dim + c;
  Value v = load_f32(x + offs, mask, 0.0f);  // [BR, D] f32
  auto [v1, v2] = split(v, 1);               // [BR, D/2] each
  Value rotated = concat(-v2, v1, 1);
  store_as(y + offs, v * load_f32(cos + at, mask, 0.0f) + rotated * load_f32(sin + at, mask, 0.0f), mask);
  return k.build();
}
// One row of rope_kernel's result in double.
inline std::vector<double> rope_reference(const float* x, const float* cos, const float* sin, int64_t dim) {
  std::vector<double> out(dim);
  const int64_t half = dim / 2;
  for (int64_t j = 0; j < dim; ++j) {
    const double rotated = j < half ? -double{x[j + half]} : double{x[j - half]};
    out[j] = double{x[j]} * cos[j] + rotated * sin[j];
  }
  return out;
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

}  // namespace samples
