// associative_scan on NVPTX: rows within a warp scan with shuffles alone
// (no shared memory, no barrier); rows over several warps meet once
// through shared memory, forwards and in reverse; tiles whose threads do
// not all hold elements take the buffer path. Each assembles.
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "codegen/compiler.h"
#include "dsl/ops.h"
#include "gtest/gtest.h"
#include "samples/kernels.h"
#include "tests/codegen/ptx_test_util.h"

namespace tessel {
namespace {

// h = a h + b along the rows of [rows, cols] f32 tiles, over `warps` warps,
// the pointers 16-byte aligned (as a launch with aligned buffers
// specializes it), so that each thread holds runs of four elements.
DeviceCode recurrence_code(int rows, int cols, int warps, bool reverse) {
  KernelBuilder k("recurrence");
  Value a = k.arg(ptr(f32), "a"), b = k.arg(ptr(f32), "b"), h = k.arg(ptr(f32), "h");
  Value offs = expand_dims(k.arange(0, rows), 1) * cols + expand_dims(k.arange(0, cols), 0);
  std::vector<Value> r = associative_scan(
      {load(a + offs), load(b + offs)}, 1,
      [](std::span<const Value> first, std::span<const Value> then) {
        return std::vector<Value>{first[0] * then[0], then[0] * first[1] + then[1]};
      },
      reverse);
  store(h + offs, r[1]);
  absl::StatusOr<Kernel> kernel = k.build();
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  CompileOptions options;
  options.num_warps = warps;
  options.specialization.multiple_of_16 = 0b111;
  absl::StatusOr<DeviceCode> code = compile_ptx(*kernel, options);
  EXPECT_TRUE(code.ok()) << code.status();
  return code.ok() ? *std::move(code) : DeviceCode();
}

std::string recurrence_ptx(int rows, int cols, int warps, bool reverse) {
  return recurrence_code(rows, cols, warps, reverse).binary;
}

TEST(PtxScanFn, RowsWithinAWarpUseShufflesAlone) {
  for (bool reverse : {false, true}) {
    const std::string ptx = recurrence_ptx(4, 1024, 4, reverse);
    EXPECT_GT(count(ptx, "shfl.sync.bfly.b32"), 0) << ptx;
    EXPECT_EQ(count(ptx, "st.shared"), 0);
    EXPECT_EQ(count(ptx, "bar.sync"), 0);
    expect_ptxas_accepts(ptx);
  }
}

TEST(PtxScanFn, RowsOverWarpsMeetOnce) {
  // [2, 2048] over 256 threads: a row over 4 warps, 16 elements a thread
  // in 4 rounds; each round's (a, b) total and flag cross the warps.
  for (bool reverse : {false, true}) {
    const std::string ptx = recurrence_ptx(2, 2048, 8, reverse);
    EXPECT_EQ(count(ptx, "bar.sync"), 1) << ptx;
    EXPECT_GT(count(ptx, "st.shared.u64") + count(ptx, "st.shared.b64"), 0);
    expect_ptxas_accepts(ptx);
  }
}

TEST(PtxScanFn, ALongRowMeetsOnceInRegisters) {
  // [1, 8192] over 128 threads: 64 elements a thread in 16 runs of four, a
  // butterfly of 5 levels per run over the runs' (a, b) totals. After it
  // every lane of a warp holds the warp's totals, so one lane per warp
  // writes them: 4 warps x 16 runs x (a, b) x 8 bytes.
  const DeviceCode code = recurrence_code(1, 8192, 4, false);
  EXPECT_EQ(count(code.binary, "shfl.sync.bfly.b32"), 16 * 5 * 2);
  EXPECT_EQ(count(code.binary, "bar.sync"), 1);
  EXPECT_EQ(code.shared_bytes, 4 * 16 * 2 * 8);
  expect_ptxas_accepts(code.binary);
}

TEST(PtxScanFn, OtherTilesScanInSegmentsOverBuffers) {
  // [8, 8] over 128 threads: half the threads hold nothing. [1, 4096] over
  // 32: 128 elements a thread, too many for registers. Each line in
  // segments over the threads: their totals meet once, then each segment
  // is scanned again after the ones before it.
  for (const auto& [rows, cols, warps] : std::vector<std::tuple<int, int, int>>{{8, 8, 4}, {1, 4096, 1}}) {
    SCOPED_TRACE(::testing::Message() << rows << "x" << cols);
    const std::string ptx = recurrence_ptx(rows, cols, warps, false);
    EXPECT_EQ(count(ptx, "shfl.sync"), 0);
    EXPECT_GE(count(ptx, "bar.sync"), 2);
    expect_ptxas_accepts(ptx);
  }
}

// The row recurrence sample compiles at row_block's blocks for every row
// length the row kernels' tests take, unspecialized (the variant every
// Function compiles first): where its scan leaves registers, the products
// nothing reads take no buffer, so rows of 16384 fit in shared memory.
TEST(PtxScanFn, TheRowRecurrenceFitsAtEveryRowLength) {
  for (int cols : {768, 1000, 1024, 4096, 8192, 16384}) {
    for (DType d : {f32, bf16}) {
      SCOPED_TRACE(::testing::Message() << cols << " " << d.name());
      const samples::RowBlock block = samples::row_block(cols);
      CompileOptions options;
      options.num_warps = block.warps;
      absl::StatusOr<DeviceCode> code = compile_ptx(*samples::row_recurrence_kernel(block, d), options);
      EXPECT_TRUE(code.ok()) << code.status();
    }
  }
}

}  // namespace
}  // namespace tessel
