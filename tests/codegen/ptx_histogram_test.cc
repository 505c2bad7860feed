// histogram on NVPTX: the counted tile stays in registers, each thread adds
// its elements to their bins with shared-memory atomics (no global ones),
// and the program meets twice: after zeroing the bins and after counting.
// Assembles.
#include <string>
#include <tuple>
#include <vector>

#include "codegen/compiler.h"
#include "dsl/ops.h"
#include "gtest/gtest.h"
#include "samples/moe.h"
#include "tests/codegen/ptx_test_util.h"

namespace tessel {
namespace {

TEST(PtxHistogram, CountsWithSharedAtomicsBetweenTwoBarriers) {
  // x [1024] i32 over 128 threads: 8 slots each, 8 atomics each.
  KernelBuilder k("histogram");
  Value x = k.arg(ptr(i32), "x"), out = k.arg(ptr(i32), "out");
  Value v = load(x + k.arange(0, 1024));
  store(out + k.arange(0, 64), histogram(v, 64, v != 7));
  const std::string ptx = ptx_of(k.build(), 4);
  EXPECT_EQ(count(ptx, "atom.shared.add.u32") + count(ptx, "red.shared.add.u32"), 8) << ptx;
  EXPECT_EQ(count(ptx, "atom.global") + count(ptx, "red.global"), 0);
  EXPECT_EQ(count(ptx, "bar.sync"), 2);
  expect_ptxas_accepts(ptx);
}

// Every path assembles: a tile in registers, masked; one too large for
// registers (counted from its buffer by a loop over the program's threads);
// a row argmax's positions (a slice, read in the planned layout); and
// counts summed in a loop and added to memory by atomics.
TEST(PtxHistogram, EveryPathAssembles) {
  for (const auto& [rows, cols, warps] :
       std::vector<std::tuple<int, int, int>>{{4, 32, 1}, {32, 128, 1}, {16, 48, 8}}) {
    SCOPED_TRACE(::testing::Message() << rows << "x" << cols << ", " << warps << " warps");
    KernelBuilder k("histograms");
    Value x = k.arg(ptr(u8), "x"), n = k.arg(i32, "n"), out = k.arg(ptr(i32), "out");
    Value offs = expand_dims(k.arange(0, rows), 1) * cols + expand_dims(k.arange(0, cols), 0);
    Value block = load(x + offs);  // [rows, cols] u8
    Value bins = k.arange(0, 100);
    store(out + bins, histogram(block, 100, block != 3));
    store(out + 100 + bins, histogram(argmax(block, 1), 100));
    Var sum = k.var(k.zeros({100}, i32));
    k.for_range(0, n, rows * cols, [&](Value i) { sum = sum + histogram(load(x + i + offs), 100); });
    atomic_add(out + 200 + bins, sum, MemoryOrder::kRelaxed);
    expect_ptxas_accepts(ptx_of(k.build(), warps));
  }
}

// The MoE token permutation's three kernels (histogram, cumsum, argsort,
// gather, cummax, loops over blocks) at the shapes of the GPU test.
TEST(PtxHistogram, TheMoeAlignmentAssembles) {
  for (const auto& [experts, block, chunk, warps] :
       std::vector<std::tuple<int, int, int, int>>{{8, 16, 256, 4}, {64, 64, 1024, 8}, {256, 128, 1024, 8}}) {
    SCOPED_TRACE(::testing::Message() << experts << " experts, blocks of " << block << ", chunks of " << chunk);
    absl::StatusOr<samples::MoeAlignKernels> kernels = samples::moe_align_kernels(experts, block, chunk);
    ASSERT_TRUE(kernels.ok()) << kernels.status();
    for (const Kernel& kernel : {kernels->count, kernels->place, kernels->scatter}) {
      SCOPED_TRACE(kernel.name());
      expect_ptxas_accepts(ptx_of(kernel, warps));
    }
  }
}

}  // namespace
}  // namespace tessel
