// The samples' kernels (samples/*.cc), rebuilt here so the GPU suites can run
// them on cuda:0 and on the host with the same inputs.
#pragma once

#include <cmath>

#include "absl/status/statusor.h"
#include "dsl/builder.h"
#include "dsl/ops.h"

namespace tessel::gpu_test {

inline constexpr int kAddBlock = 1024;

// z = x + y over n floats, masked past n.
inline absl::StatusOr<Kernel> vector_add_kernel(std::string name = "vector_add") {
  KernelBuilder k(std::move(name));
  Value x = k.arg(ptr(f32), "x"), y = k.arg(ptr(f32), "y"), z = k.arg(ptr(f32), "z");
  Value n = k.arg(i32, "n");
  Value offs = k.program_id() * kAddBlock + k.arange(0, kAddBlock);  // [kAddBlock] i32
  Value mask = offs < n;                                             // [kAddBlock] i1
  store(z + offs, load(x + offs, mask, 0.0) + load(y + offs, mask, 0.0), mask);
  return k.build();
}

// y += x over n i32s: integer, so any number of repeats has one exact answer.
inline absl::StatusOr<Kernel> accumulate_kernel() {
  KernelBuilder k("accumulate");
  Value x = k.arg(ptr(i32), "x"), y = k.arg(ptr(i32), "y");
  Value n = k.arg(i32, "n");
  Value offs = k.program_id() * kAddBlock + k.arange(0, kAddBlock);  // [kAddBlock] i32
  Value mask = offs < n;                                             // [kAddBlock] i1
  store(y + offs, load(y + offs, mask, 0) + load(x + offs, mask, 0), mask);
  return k.build();
}

inline constexpr int kSoftmaxBlock = 1024;  // cols <= kSoftmaxBlock

// Row softmax of an f32 [rows, cols] matrix, persistent over rows.
inline absl::StatusOr<Kernel> softmax_kernel() {
  KernelBuilder k("softmax");
  Value x = k.arg(ptr(f32), "x"), y = k.arg(ptr(f32), "y");
  Value rows = k.arg(i32, "rows"), cols = k.arg(i32, "cols");
  k.for_each_tile(rows, [&](Value row) {
    Value offs = k.arange(0, kSoftmaxBlock);                 // [B] i32
    Value mask = offs < cols;                                // [B] i1
    Value v = load(x + row * cols + offs, mask, -INFINITY);  // [B] f32
    Value e = exp(v - max(v, 0));                            // [B] f32
    store(y + row * cols + offs, e / sum(e, 0), mask);
  });
  return k.build();
}

inline constexpr int kCopyBM = 64, kCopyBN = 128;

// Persistent TMA copy of a bf16 [m, n] matrix in [kCopyBM, kCopyBN] boxes.
inline absl::StatusOr<Kernel> tile_copy_kernel() {
  KernelBuilder k("tile_copy");
  Value src = k.tensor_map(bf16, {kCopyBM, kCopyBN}, "src");
  Value dst = k.tensor_map(bf16, {kCopyBM, kCopyBN}, "dst");
  Value m = k.arg(i32, "m"), n = k.arg(i32, "n");
  Value tiles_n = cdiv(n, kCopyBN);
  k.for_each_tile(cdiv(m, kCopyBM) * tiles_n, [&](Value t) {
    Value row = t / tiles_n * kCopyBM, col = t % tiles_n * kCopyBN;
    tma_store(dst, {row, col}, tma_load(src, {row, col}));  // [BM, BN] bf16, smem
  });
  return k.build();
}

// dst[n, m] = src[m, n] through [kCopyBM, kCopyBN] -> [kCopyBN, kCopyBM] boxes.
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

inline constexpr int kMmBM = 64, kMmBN = 64, kMmBK = 32;

// Persistent C = A @ B, bf16 inputs, f32 accumulation and output.
inline absl::StatusOr<Kernel> matmul_kernel() {
  KernelBuilder k("matmul");
  Value a = k.tensor_map(bf16, {kMmBM, kMmBK}, "a");
  Value b = k.tensor_map(bf16, {kMmBK, kMmBN}, "b");
  Value c = k.tensor_map(f32, {kMmBM, kMmBN}, "c");
  Value m = k.arg(i32, "m"), n = k.arg(i32, "n"), kdim = k.arg(i32, "k");
  Value tiles_n = cdiv(n, kMmBN);
  k.for_each_tile(cdiv(m, kMmBM) * tiles_n, [&](Value t) {
    Value row = t / tiles_n * kMmBM, col = t % tiles_n * kMmBN;
    Var acc = k.var(k.zeros({kMmBM, kMmBN}, f32));  // [BM, BN] f32
    k.for_range(0, kdim, kMmBK, [&](Value kk) {
      Value at = tma_load(a, {row, kk});  // [BM, BK] bf16, smem
      Value bt = tma_load(b, {kk, col});  // [BK, BN] bf16, smem
      acc = dot(at, bt, acc);
    });
    tma_store(c, {row, col}, acc);
  });
  return k.build();
}

}  // namespace tessel::gpu_test
