// Row reductions of 2-D register tiles on NVPTX: when each row lies within
// a warp, sum/max/min along an axis combine per thread and through
// shfl.sync.bfly, broadcasting the result back reads registers, and nothing
// touches shared memory; rows spread over warps add one exchange of the
// warps' parts through a small scratch area. Everything assembles.
#include <random>
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

constexpr const char* kNoSharedMemory = R"(
CHECK-NOT: .shared
CHECK-NOT: bar.sync
)";

DeviceCode compile(const Kernel& kernel, uint64_t facts, int num_warps = 4) {
  CompileOptions options;
  options.num_warps = num_warps;
  options.specialization.multiple_of_16 = facts;
  absl::StatusOr<DeviceCode> code = compile_ptx(kernel, options);
  EXPECT_TRUE(code.ok()) << code.status();
  if (!code.ok()) return {};
  EXPECT_TRUE(ptxas_accepts_if_present(code->binary)) << kernel.name() << " facts " << facts;
  return *code;
}

Value reduce(int combiner, const Value& x, int axis) {
  if (combiner == 0) return sum(x, axis);
  return combiner == 1 ? max(x, axis) : min(x, axis);
}

// out = x - 2 * red(x, axis) broadcast back, and the reduced tile into r,
// on a [br, bc] tile of `d` at the start of x.
Kernel reduce_broadcast_kernel(DType d, int br, int bc, int axis, int combiner) {
  KernelBuilder k("reduce_broadcast");
  Value x = k.arg(ptr(d), "x"), out = k.arg(ptr(d), "out"), r = k.arg(ptr(d), "r");
  Value offs = expand_dims(k.arange(0, br), 1) * bc + expand_dims(k.arange(0, bc), 0);  // [br, bc] i32
  Value v = load(x + offs);                                                             // [br, bc]
  Value red = reduce(combiner, v, axis);                                                // [bc] or [br]
  store(out + offs, v - expand_dims(red, axis) * k.constant(2, d));
  store(r + k.arange(0, axis == 0 ? bc : br), red);
  absl::StatusOr<Kernel> kernel = k.build();
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return *kernel;
}

class PtxSlice : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_tool(TESSEL_FILECHECK)) GTEST_SKIP() << "FileCheck not found (it comes with llvm-19-dev)";
  }
};

TEST_F(PtxSlice, RowSoftmaxRunsInRegistersAndShuffles) {
  // Measured before slice layouts (commit 45cf1c9): 8320 bytes of shared
  // memory per program, 70 st.shared, 146 ld.shared and 25 bar.sync; now
  // none. With nothing known, a [32, 32] tile one element per step over 128
  // threads gives each thread 8 rows, each over all 32 lanes: 8 * 5
  // shuffles per reduction. With x, y aligned and cols divisible by 16, rows
  // at a runtime stride still load in runs of four (ld.global.v4): each
  // thread holds 2 rows, each over 8 lanes: 2 * 3 shuffles per reduction.
  absl::StatusOr<Kernel> softmax = samples::row_softmax_kernel();
  ASSERT_TRUE(softmax.ok()) << softmax.status();
  for (auto [facts, shuffles, vectors] :
       {std::tuple{uint64_t{1 | 2 | 8}, 2 * 2 * 3, true}, std::tuple{uint64_t{0}, 2 * 8 * 5, false}}) {
    SCOPED_TRACE(::testing::Message() << "facts " << facts);
    DeviceCode code = compile(*softmax, facts);
    EXPECT_EQ(code.shared_bytes, 0);
    EXPECT_EQ(file_check(code.binary, kNoSharedMemory), 0);
    EXPECT_EQ(count(code.binary, "shfl.sync.bfly.b32"), shuffles);
    EXPECT_EQ(count(code.binary, "ld.global.v4.b32") > 0, vectors);
    EXPECT_EQ(count(code.binary, "st.global.v4.b32") > 0, vectors);
    EXPECT_EQ(file_check(code.binary, R"(
CHECK: ld.global
CHECK: shfl.sync.bfly.b32
CHECK: ex2.approx.ftz.f32
CHECK: shfl.sync.bfly.b32
CHECK: st.global
)"),
              0);
  }
}

TEST_F(PtxSlice, RowsOfAWarpEachCombineWithShufflesOnly) {
  // Rows of 1024 in runs of four, one warp per row: each thread holds 32
  // elements of one row, so each reduction is one butterfly of 5 shuffles.
  // Before rows were kept within warps (commit 29c1b18) each thread held
  // parts of all four rows, spread over all four warps: 2 * 4 * 5 shuffles
  // and 2 KiB of shared memory to combine the warps' parts.
  absl::StatusOr<Kernel> wide = samples::row_softmax_kernel(4, 1024);
  ASSERT_TRUE(wide.ok()) << wide.status();
  DeviceCode code = compile(*wide, 1 | 2 | 8);
  EXPECT_EQ(code.shared_bytes, 0);
  EXPECT_EQ(file_check(code.binary, kNoSharedMemory), 0);
  EXPECT_EQ(count(code.binary, "shfl.sync.bfly.b32"), 2 * 5);
  EXPECT_EQ(count(code.binary, "ld.global.v4.b32"), 8);
}

TEST_F(PtxSlice, RowsSpreadOverWarpsMeetInAScratchArea) {
  // Two rows of 1024 over four warps: two warps per row keep every thread
  // busy. Lanes combine by shuffles (5 per reduction), after which every
  // lane of a warp holds its warp's part; the first lane of each of the four
  // warps writes it to 4 bytes of shared memory, which the second reduction
  // reuses.
  absl::StatusOr<Kernel> two = samples::row_softmax_kernel(2, 1024);
  ASSERT_TRUE(two.ok()) << two.status();
  DeviceCode code = compile(*two, 1 | 2 | 8);
  EXPECT_EQ(code.shared_bytes, 4 * 4);
  EXPECT_EQ(count(code.binary, "shfl.sync.bfly.b32"), 2 * 5);
  EXPECT_EQ(file_check(code.binary, "CHECK: shfl.sync.bfly.b32\nCHECK: st.shared\nCHECK: bar.sync\nCHECK: ld.shared\n"),
            0);
}

// out = x - sum(x, 1) broadcast back, on a [4, 64, 2] tile of `d`: the
// middle axis, whose positions a flat layout spreads over every warp.
Kernel middle_axis_kernel(DType d) {
  KernelBuilder k("middle_axis");
  Value x = k.arg(ptr(d), "x"), out = k.arg(ptr(d), "out");
  Value offs = expand_dims(expand_dims(k.arange(0, 4), 1), 2) * 128 +
               expand_dims(expand_dims(k.arange(0, 64), 0), 2) * 2 +
               expand_dims(expand_dims(k.arange(0, 2), 0), 1);  // [4, 64, 2] i32
  Value v = load(x + offs);
  store(out + offs, v - expand_dims(sum(v, 1), 1));
  absl::StatusOr<Kernel> kernel = k.build();
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return *kernel;
}

TEST_F(PtxSlice, AcrossWarpsOneCopyPerWarp) {
  // [4, 64, 2] over 128 threads, one element per step: each thread holds
  // parts of four positions, each spread over 16 lanes of every warp. After
  // the shuffles those lanes hold the same sums, so one of them writes
  // them: 8 copies (4 warps x 2 positions a warp holds) x 4 partial sums,
  // in f32 whatever the tile's dtype.
  for (DType d : {f32, f16}) {
    SCOPED_TRACE(d.name());
    DeviceCode code = compile(middle_axis_kernel(d), 0);
    EXPECT_EQ(count(code.binary, "shfl.sync.bfly.b32"), 4 * 4);
    EXPECT_EQ(code.shared_bytes, 8 * 4 * 4);
  }
}

Kernel column_sums_kernel(DType d) {
  KernelBuilder k("column_sums");
  Value x = k.arg(ptr(d), "x"), out = k.arg(ptr(d), "out");
  Value offs = expand_dims(k.arange(0, 4), 1) * 32 + expand_dims(k.arange(0, 32), 0);  // [4, 32] i32
  Value v = load(x + offs);
  store(out + offs, v - expand_dims(sum(v, 0), 0));
  absl::StatusOr<Kernel> kernel = k.build();
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return *kernel;
}

TEST_F(PtxSlice, AcrossWarpsOnlyWhereTheScratchAreaIsNoLargerThanTheTile) {
  // [4, 32] over 128 threads, an element each: a column's four elements lie
  // in one lane of each warp, so every thread writes its part: 128 sums. In
  // f32 that is the tile's own 512 bytes; in f16 (summed in f32) twice the
  // tile, so the reduction goes through the tile's buffer instead.
  DeviceCode f32_code = compile(column_sums_kernel(f32), 0);
  EXPECT_EQ(f32_code.shared_bytes, 128 * 4);
  EXPECT_EQ(count(f32_code.binary, "st.shared.b16"), 0);
  DeviceCode f16_code = compile(column_sums_kernel(f16), 0);
  EXPECT_GE(f16_code.shared_bytes, 4 * 32 * 2);
  EXPECT_EQ(file_check(f16_code.binary, "CHECK: st.shared.b16\nCHECK: bar.sync\nCHECK: ld.shared.b16\n"), 0);
}

TEST_F(PtxSlice, EveryDtypeAndCombinerReducesRowsWithoutSharedMemory) {
  for (DType d : {i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64}) {
    for (int combiner = 0; combiner < 3; ++combiner) {
      SCOPED_TRACE(::testing::Message() << d.name() << " combiner " << combiner);
      DeviceCode code = compile(reduce_broadcast_kernel(d, 32, 32, 1, combiner), 0);
      EXPECT_EQ(code.shared_bytes, 0);
      // The reduced rows are stored from their slice: duplicates write the same value.
      EXPECT_EQ(file_check(code.binary, kNoSharedMemory), 0);
      EXPECT_EQ(file_check(code.binary, "CHECK: shfl.sync.bfly.b32\n"), 0);
    }
  }
}

TEST_F(PtxSlice, RandomBlocksAlongEitherAxisAssemble) {
  // Shuffles, thread-local combines and the shared-memory fallback, over
  // 1, 4, 8 and 12 warps: the IR verifies and ptxas takes every variant.
  std::mt19937 gen(std::random_device{}());
  for (int trial = 0; trial < 12; ++trial) {
    int log_rows = static_cast<int>(gen() % 8);
    int br = 1 << log_rows, bc = 1 << (gen() % (13 - log_rows)), axis = static_cast<int>(gen() % 2);
    int warps = std::vector<int>{1, 4, 8, 12}[gen() % 4];
    SCOPED_TRACE(::testing::Message() << br << "x" << bc << " axis " << axis << " warps " << warps);
    compile(reduce_broadcast_kernel(trial % 2 ? f32 : i32, br, bc, axis, static_cast<int>(gen() % 3)), 0, warps);
  }
}

TEST_F(PtxSlice, EveryReductionStartsFromItsIdentity) {
  // Rows of one element, each held by one thread: the row's max still
  // meets -inf, as the buffer path's loop (and the host) start from it, so
  // that a row of NaN alone gives -inf on every target.
  DeviceCode code = compile(reduce_broadcast_kernel(f64, 16, 1, 1, 1), 0);
  EXPECT_EQ(file_check(code.binary, "CHECK: max.f64 {{.*}}0dFFF0000000000000\n"), 0);
  DeviceCode sums = compile(reduce_broadcast_kernel(f32, 16, 1, 1, 0), 0);
  EXPECT_EQ(file_check(sums.binary, "CHECK: add.rn.f32 {{.*}}0f00000000\n"), 0);
}

TEST_F(PtxSlice, ColumnsHeldByOneThreadNeedNoShuffle) {
  // [4, 256] over 128 threads, one element per step: each column lies in
  // one thread, so a sum along axis 0 is a thread's own.
  DeviceCode code = compile(reduce_broadcast_kernel(f32, 4, 256, 0, 0), 0);
  EXPECT_EQ(code.shared_bytes, 0);
  EXPECT_EQ(file_check(code.binary, "CHECK-NOT: shfl\nCHECK-NOT: .shared\nCHECK: add.rn.f32\n"), 0);
}

TEST_F(PtxSlice, OneWarpWholeTileSoftmaxNeedsNoSharedMemory) {
  // The 1-D softmax's whole-row max and sum: a butterfly over one warp
  // leaves every lane the result. With four warps their partial results
  // meet in a small scratch area (no tile buffers either way).
  absl::StatusOr<Kernel> softmax = samples::softmax_kernel();
  ASSERT_TRUE(softmax.ok()) << softmax.status();
  DeviceCode one = compile(*softmax, 1 | 2 | 8, 1);
  EXPECT_EQ(one.shared_bytes, 0);
  EXPECT_EQ(file_check(one.binary, kNoSharedMemory), 0);
  EXPECT_EQ(file_check(one.binary, "CHECK-COUNT-5: shfl.sync.bfly.b32\n"), 0);
  DeviceCode four = compile(*softmax, 1 | 2 | 8, 4);
  EXPECT_EQ(four.shared_bytes, 0);
  EXPECT_EQ(file_check(four.binary, "CHECK: .shared {{.*}}tessel_scratch\nCHECK: bar.sync\n"), 0);
}

TEST_F(PtxSlice, ARowIndexBroadcastToTwoWidthsIsComputedInBoth) {
  // rows [16, 1] takes one slice layout, of the [16, 256] tiles' or of the
  // [16, 8] ones'; the other broadcasts compute its elements again, and
  // neither the row index nor a pointer tile goes through shared memory.
  KernelBuilder k("two_widths");
  Value x = k.arg(ptr(f32), "x"), y = k.arg(ptr(f32), "y"), out = k.arg(ptr(f32), "out");
  Value rows = expand_dims(k.arange(0, 16), 1);                         // [16, 1] i32
  Value cols = expand_dims(k.arange(0, 256), 0);                        // [1, 256] i32
  store(y + rows * 256 + cols, load(x + rows * 256 + cols) * 2.0f);     // [16, 256] f32
  Value first = broadcast_to(expand_dims(k.arange(0, 8), 0), {16, 8});  // [16, 8] i32
  store(out + rows * 8 + first, cast(first + rows, f32));
  absl::StatusOr<Kernel> kernel = k.build();
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  DeviceCode code = compile(*kernel, 0);
  EXPECT_EQ(code.shared_bytes, 0);
  EXPECT_EQ(file_check(code.binary, kNoSharedMemory), 0);
}

}  // namespace
}  // namespace tessel
