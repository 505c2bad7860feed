// reduce with a combine function on NVPTX: rows within a warp reduce with
// shuffles alone (no shared memory, no barrier); a whole tile and rows
// spread over warps meet once through shared memory. Each assembles.
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "codegen/compiler.h"
#include "dsl/ops.h"
#include "gtest/gtest.h"
#include "tests/codegen/ptx_test_util.h"

namespace tessel {
namespace {

std::vector<Value> argmax_combine(std::span<const Value> a, std::span<const Value> b) {
  Value take_b = (b[0] > a[0]) | ((b[0] == a[0]) & (b[1] < a[1]));
  return {where(take_b, b[0], a[0]), where(take_b, b[1], a[1])};
}

// Rows of `cols` (f32) over `warps` warps: each row's largest value and its
// lowest position.
std::string argmax_rows_ptx(int rows, int cols, int warps) {
  KernelBuilder k("argmax_rows");
  Value x = k.arg(ptr(f32), "x"), best = k.arg(ptr(f32), "best"), at = k.arg(ptr(i32), "at");
  Value r = expand_dims(k.arange(0, rows), 1), c = expand_dims(k.arange(0, cols), 0);
  Value v = load(x + r * cols + c);  // [rows, cols] f32
  std::vector<Value> out = reduce({v, broadcast_to(c, {rows, cols})}, 1, argmax_combine);
  store(best + k.arange(0, rows), out[0]);
  store(at + k.arange(0, rows), out[1]);
  return ptx_of(k.build(), warps);
}

TEST(PtxReduceFn, RowsWithinAWarpUseShufflesAlone) {
  // [16, 64] over 128 threads: a row over a warp's 32 lanes, two elements
  // each, four rows a thread: 4 rows x 5 levels x (value, index).
  const std::string ptx = argmax_rows_ptx(16, 64, 4);
  EXPECT_EQ(count(ptx, "shfl.sync.bfly.b32"), 40) << ptx;
  EXPECT_EQ(count(ptx, "st.shared"), 0);
  EXPECT_EQ(count(ptx, "bar.sync"), 0);
  expect_ptxas_accepts(ptx);
}

TEST(PtxReduceFn, RowsOverWarpsMeetOnce) {
  // [2, 2048] over 256 threads: a row over 4 warps.
  const std::string ptx = argmax_rows_ptx(2, 2048, 8);
  EXPECT_EQ(count(ptx, "bar.sync"), 1) << ptx;
  EXPECT_GT(count(ptx, "st.shared.u64") + count(ptx, "st.shared.b64"), 0);
  expect_ptxas_accepts(ptx);
}

TEST(PtxReduceFn, TilesSmallerThanTheProgramAssemble) {
  // [2, 8] and [1, 24] over 128 threads: threads without an element carry
  // a flag saying so across the shuffles. [3, 40]: a row over 64 threads
  // (two warps), 40 of them holding an element, the warps' parts meeting in
  // shared memory, one copy per warp.
  for (const auto& [rows, cols] : std::vector<std::pair<int, int>>{{2, 8}, {1, 24}, {3, 40}}) {
    SCOPED_TRACE(::testing::Message() << rows << "x" << cols);
    const std::string ptx = argmax_rows_ptx(rows, cols, 4);
    EXPECT_GT(count(ptx, "shfl.sync.bfly.b32"), 0);
    expect_ptxas_accepts(ptx);
  }
}

TEST(PtxReduceFn, AWholeTileMeetsOnce) {
  KernelBuilder k("xor_all");
  Value x = k.arg(ptr(u32), "x"), out = k.arg(ptr(u32), "out");
  store(out, reduce(load(x + k.arange(0, 1024)), 0, [](const Value& a, const Value& b) { return a ^ b; }));
  const std::string ptx = ptx_of(k.build(), 4);
  EXPECT_EQ(count(ptx, "shfl.sync.bfly.b32"), 5);
  EXPECT_EQ(count(ptx, "bar.sync"), 1);
  expect_ptxas_accepts(ptx);
}

// Over 12 warps (not a power of two) the warps' parts meet as over 8 or
// 16: one 64-bit word per warp, written by its first lane, and every thread
// reads all twelve.
TEST(PtxReduceFn, AWholeTileOverTwelveWarpsReadsEveryWarp) {
  KernelBuilder k("xor_all");
  Value x = k.arg(ptr(u32), "x"), out = k.arg(ptr(u32), "out");
  store(out, reduce(load(x + k.arange(0, 3072)), 0, [](const Value& a, const Value& b) { return a ^ b; }));
  absl::StatusOr<Kernel> kernel = k.build();
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  CompileOptions options;
  options.num_warps = 12;
  absl::StatusOr<DeviceCode> code = compile_ptx(*kernel, options);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(code->shared_bytes, 12 * 8);
  EXPECT_EQ(count(code->binary, "ld.shared"), 12) << code->binary;
  expect_ptxas_accepts(code->binary);
}

// A tile too large for registers (128 elements a thread) reduces in
// segments over the threads, by a combine function or a named reduction:
// each thread combines its own, the program meets, each combines the
// segments' totals, and the program meets again before the totals' area
// is reused; both forms meet as often.
TEST(PtxReduceFn, LargeTilesReduceInSegments) {
  std::vector<int> barriers;
  for (bool named : {false, true}) {
    KernelBuilder k("xor_all");
    Value x = k.arg(ptr(u32), "x"), out = k.arg(ptr(u32), "out");
    Value v = load(x + k.arange(0, 4096));
    store(out, named ? sum(v, 0) : reduce(v, 0, [](const Value& a, const Value& b) { return a ^ b; }));
    const std::string ptx = ptx_of(k.build(), 1);
    EXPECT_EQ(count(ptx, "shfl.sync"), 0);
    barriers.push_back(count(ptx, "bar.sync"));
    EXPECT_GE(barriers.back(), 3);
    expect_ptxas_accepts(ptx);
  }
  EXPECT_EQ(barriers[0], barriers[1]);
}

}  // namespace
}  // namespace tessel
