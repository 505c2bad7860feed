// The samples' kernels (samples/kernels.h) for the GPU suites, which run
// them on cuda:0 and on the host with the same inputs, plus one of their own.
#pragma once

#include "absl/status/statusor.h"
#include "dsl/builder.h"
#include "dsl/ops.h"
#include "samples/kernels.h"

namespace tessel::gpu_test {

using samples::kAddBlock;
using samples::kCopyBM;
using samples::kCopyBN;
using samples::kMatmul;
using samples::kMatmulWarps;
using samples::matmul_kernel;
using samples::kSoftmaxBlock;
using samples::softmax_kernel;
using samples::tile_copy_kernel;
using samples::tile_transpose_kernel;
using samples::vector_add_kernel;

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

}  // namespace tessel::gpu_test
