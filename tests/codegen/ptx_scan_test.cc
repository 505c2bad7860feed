// Scans of register tiles on NVPTX: rows that lie within a warp scan per
// thread and through shfl.sync.bfly without touching shared memory; lines
// over several warps add one exchange of the warps' totals; a tile whose
// threads do not all hold elements takes the buffer path. Sorts of
// power-of-two lines held by every thread run their network in registers,
// with shuffles within a warp and shared memory between warps; other sorts
// run it over a shared-memory buffer. Everything assembles.
#include <string>

#include "codegen/compiler.h"
#include "dsl/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/codegen/ptx_test_util.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// x [rows, cols] (row-major, at the start of x) scanned along `axis` into out.
Kernel scan_kernel(DType d, int rows, int cols, int axis, bool reverse) {
  KernelBuilder k("scan");
  Value x = k.arg(ptr(d), "x"), out = k.arg(ptr(d), "out");
  Value offs = expand_dims(k.arange(0, rows), 1) * cols + expand_dims(k.arange(0, cols), 0);
  store(out + offs, cumsum(load(x + offs), axis, reverse));
  absl::StatusOr<Kernel> kernel = k.build();
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return *kernel;
}

std::string ptx_of(const Kernel& kernel) {
  CompileOptions options;
  options.num_warps = 4;
  absl::StatusOr<DeviceCode> code = compile_ptx(kernel, options);
  EXPECT_TRUE(code.ok()) << code.status();
  return code.ok() ? code->binary : "";
}

TEST(PtxScan, RowsWithinAWarpShuffleAndNeedNoSharedMemory) {
  // [4, 1024] f32 over 128 threads: a warp per row.
  const std::string ptx = ptx_of(scan_kernel(f32, 4, 1024, 1, false));
  EXPECT_THAT(ptx, HasSubstr("shfl.sync.bfly.b32"));
  EXPECT_THAT(ptx, Not(HasSubstr("st.shared")));
  EXPECT_THAT(ptx, Not(HasSubstr("bar.sync")));
  expect_ptxas_accepts(ptx);
}

TEST(PtxScan, LinesOverWarpsExchangeTheirTotalsOnce) {
  // [1, 1024] i32 in reverse: the row spans the four warps.
  const std::string ptx = ptx_of(scan_kernel(i32, 1, 1024, 1, true));
  EXPECT_THAT(ptx, HasSubstr("shfl.sync.bfly.b32"));
  EXPECT_THAT(ptx, HasSubstr("st.shared"));
  int barriers = 0;
  for (size_t p = ptx.find("bar.sync"); p != std::string::npos; p = ptx.find("bar.sync", p + 1)) ++barriers;
  EXPECT_EQ(barriers, 1);
  expect_ptxas_accepts(ptx);
}

TEST(PtxScan, SmallTilesTakeTheBufferPath) {
  // [8, 8] over 128 threads: half the threads hold nothing.
  const std::string ptx = ptx_of(scan_kernel(bf16, 8, 8, 0, false));
  EXPECT_THAT(ptx, Not(HasSubstr("shfl.sync")));
  EXPECT_THAT(ptx, HasSubstr("bar.sync"));
  expect_ptxas_accepts(ptx);
}

// x [rows, cols] sorted (or argsorted) along its rows into out.
Kernel row_sort_kernel(DType d, int rows, int cols, bool positions) {
  KernelBuilder k("row_sort");
  Value x = k.arg(ptr(d), "x"), out = k.arg(ptr(positions ? i32 : d), "out");
  Value offs = expand_dims(k.arange(0, rows), 1) * cols + expand_dims(k.arange(0, cols), 0);
  Value v = load(x + offs);
  store(out + offs, positions ? argsort(v, 1) : sort(v, 1));
  absl::StatusOr<Kernel> kernel = k.build();
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return *kernel;
}

int count(const std::string& ptx, const std::string& what) {
  int n = 0;
  for (size_t p = ptx.find(what); p != std::string::npos; p = ptx.find(what, p + 1)) ++n;
  return n;
}

TEST(PtxSort, RowsWithinAWarpSortInRegisters) {
  // [4, 256] f32 over 128 threads: a warp per row, 8 consecutive elements a
  // thread. Of the 36 steps, the 15 over lanes shuffle, 8 slots each.
  const std::string ptx = ptx_of(row_sort_kernel(f32, 4, 256, false));
  EXPECT_EQ(count(ptx, "shfl.sync.bfly.b32"), 15 * 8);
  EXPECT_THAT(ptx, HasSubstr("min.u32"));
  EXPECT_THAT(ptx, Not(HasSubstr("st.shared")));
  EXPECT_THAT(ptx, Not(HasSubstr("bar.sync")));
  expect_ptxas_accepts(ptx);
  // argsort's keys carry the position: 64 bits, two shuffles each.
  const std::string positions = ptx_of(row_sort_kernel(bf16, 4, 256, true));
  EXPECT_EQ(count(positions, "shfl.sync.bfly.b32"), 2 * 15 * 8);
  EXPECT_THAT(positions, HasSubstr("min.u64"));
  EXPECT_THAT(positions, Not(HasSubstr("bar.sync")));
  expect_ptxas_accepts(positions);
}

TEST(PtxSort, LinesOverWarpsExchangeThroughSharedMemory) {
  // [1, 1024] i32 over four warps: position bits 8 and 9 lie in the warp
  // index, so three steps go through shared memory.
  const std::string ptx = ptx_of(row_sort_kernel(i32, 1, 1024, false));
  EXPECT_THAT(ptx, HasSubstr("shfl.sync.bfly.b32"));
  EXPECT_THAT(ptx, HasSubstr("st.shared"));
  EXPECT_GE(count(ptx, "bar.sync"), 3);
  EXPECT_LE(count(ptx, "bar.sync"), 6);
  expect_ptxas_accepts(ptx);
}

// A sort of lines held by fewer threads than the program has runs its
// network over a shared-memory buffer: its 21 steps (64 elements: 6 * 7 /
// 2) in loops, not unrolled, each ending at a barrier.
TEST(PtxSort, ItsStepsLoopAndMeetAtBarriers) {
  KernelBuilder k("sort");
  Value x = k.arg(ptr(f32), "x");
  store(x + k.arange(0, 64), sort(load(x + k.arange(0, 64)), 0, /*descending=*/true));
  absl::StatusOr<Kernel> kernel = k.build();
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const std::string ptx = ptx_of(*kernel);
  EXPECT_THAT(ptx, HasSubstr("st.shared.f32"));
  int barriers = 0;
  for (size_t p = ptx.find("bar.sync"); p != std::string::npos; p = ptx.find("bar.sync", p + 1)) ++barriers;
  EXPECT_GE(barriers, 2);
  EXPECT_LE(barriers, 6);
  expect_ptxas_accepts(ptx);
}

}  // namespace
}  // namespace tessel
