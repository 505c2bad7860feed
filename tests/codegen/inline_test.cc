// Tiles computed inline on the host (Lowering::plan_inline): chains of
// elementwise ops, views and loads run in the loop of the store or
// reduction they feed, without changing what a kernel computes.
#include <regex>
#include <vector>

#include "codegen/compiler.h"
#include "samples/kernels.h"
#include "tests/codegen/host_test_util.h"

namespace tessel::testing {
namespace {

// The stack buffers of at least `elements` elements (of 4 bytes) in the
// host code of `kernel`.
int tile_buffers(const Kernel& kernel, int64_t elements) {
  CompileArtifacts artifacts;
  absl::StatusOr<DeviceCode> code = tessel::compile(kernel, {}, &artifacts);
  EXPECT_TRUE(code.ok()) << code.status();
  const std::regex buffer(R"(alloca \[(\d+) x (float|i32)\])");
  int n = 0;
  for (auto it = std::sregex_iterator(artifacts.llvm.begin(), artifacts.llvm.end(), buffer);
       it != std::sregex_iterator(); ++it) {
    if (std::stoll((*it)[1]) >= elements) ++n;
  }
  return n;
}

// A layer norm and an RMS norm keep no [4, 1024] tile in memory: their
// loads, centering and scaling run in the loops of their reductions and
// store. A softmax keeps one, its exponentials, which its sum and its
// division both read (computing them twice would cost more than storing
// them).
TEST(HostInline, RowKernelsKeepOnlyWhatIsCostlyToRecompute) {
  const samples::RowBlock block = samples::row_block(1024);
  ASSERT_EQ(block.rows * block.cols, 4096);
  for (samples::RowOp op : {samples::RowOp::kSoftmax, samples::RowOp::kLayerNorm, samples::RowOp::kRmsNorm}) {
    SCOPED_TRACE(samples::row_op_name(op));
    absl::StatusOr<Kernel> kernel = samples::row_kernel(op, block, f32);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_EQ(tile_buffers(*kernel, 4096), op == samples::RowOp::kSoftmax ? 1 : 0);
  }
}

// A load computed where it is read would see a store between the two: the
// load stays where it is.
TEST(HostInline, LoadsStayBeforeStoresThatFollowThem) {
  constexpr int kN = 64;
  KernelBuilder k("load_then_overwrite");
  Value x = k.arg(ptr(f32), "x"), y = k.arg(ptr(f32), "y");
  Value i = k.arange(0, kN);
  Value v = load(x + i) * 2.0f;
  store(x + i, k.zeros({kN}, f32));
  store(y + i, v);
  std::vector<float> xs(kN), ys(kN, -1.0f);
  for (int j = 0; j < kN; ++j) xs[j] = static_cast<float>(j);
  TESSEL_ASSERT_OK(run(k, {1}, xs.data(), ys.data()));
  for (int j = 0; j < kN; ++j) {
    EXPECT_EQ(xs[j], 0.0f) << j;
    EXPECT_EQ(ys[j], 2.0f * j) << j;
  }
}

// The same across a loop whose body stores, and an atomic.
TEST(HostInline, LoadsStayBeforeLoopsAndAtomicsThatWrite) {
  constexpr int kN = 32;
  KernelBuilder k("load_then_loop");
  Value x = k.arg(ptr(i32), "x"), y = k.arg(ptr(i32), "y");
  Value i = k.arange(0, kN);
  Value before_loop = load(x + i);
  k.for_range(0, 3, 1, [&](Value) { store(x + i, load(x + i) + 1); });
  Value before_atomic = load(x + i);
  atomic_add(x + i, 10);
  store(y + i, before_loop);
  store(y + kN + i, before_atomic);
  std::vector<int32_t> xs(kN), ys(2 * kN, -1);
  for (int j = 0; j < kN; ++j) xs[j] = 100 * j;
  TESSEL_ASSERT_OK(run(k, {1}, xs.data(), ys.data()));
  for (int j = 0; j < kN; ++j) {
    EXPECT_EQ(xs[j], 100 * j + 13) << j;
    EXPECT_EQ(ys[j], 100 * j) << j;
    EXPECT_EQ(ys[kN + j], 100 * j + 3) << j;
  }
}

// Values read inside a loop's body, and loop-carried tiles, come from
// buffers; chains through a transpose, a broadcast, a reshape that keeps
// only the element order and views that add dimensions of size 1 compute
// each element where it is stored.
TEST(HostInline, ChainsThroughViewsAndLoops) {
  constexpr int kR = 8, kC = 16;
  KernelBuilder k("views");
  Value x = k.arg(ptr(f32), "x"), y = k.arg(ptr(f32), "y");
  Value r = k.arange(0, kR), c = k.arange(0, kC);
  Value offs = expand_dims(r, 1) * kC + expand_dims(c, 0);  // [8, 16]
  Value t = trans(load(x + offs));                          // [16, 8]
  Value scaled = reshape(t * 2.0f, {4, 32});                // row-major order kept
  Value row = reshape(load(x + c), {1, 1, kC});             // [1, 1, 16]
  Value total = k.for_range(0, 2, 1, {k.zeros({kR, kC}, f32)}, [&](Value, std::span<const Value> acc) {
    return std::vector<Value>{acc[0] + reshape(row, {1, kC}) + 1.0f};
  })[0];
  store(y + reshape(expand_dims(r, 1) * kC + expand_dims(c, 0), {4, 32}), scaled);
  store(y + kR * kC + offs, total);
  std::vector<float> xs(kR * kC), ys(2 * kR * kC, -1.0f);
  for (int j = 0; j < kR * kC; ++j) xs[j] = static_cast<float>(j);
  TESSEL_ASSERT_OK(run(k, {1}, xs.data(), ys.data()));
  for (int j = 0; j < kR * kC; ++j) {
    const int tr = j / kR, tc = j % kR;  // element j of the transpose, row-major
    EXPECT_EQ(ys[j], 2.0f * xs[tc * kC + tr]) << j;
    EXPECT_EQ(ys[kR * kC + j], 2.0f * (xs[j % kC] + 1.0f)) << j;
  }
}

// Index tiles made before a loop (a strip's column indices) are computed
// again inside its body rather than read from a buffer, and their offsets
// add in 64 bits: the body's loads of a row are vector loads, not gathers.
// The sums agree with a plain loop's.
TEST(HostInline, IndexTilesAreRecomputedInLoops) {
  const samples::RowBlock block{.rows = 32, .cols = 128};
  absl::StatusOr<Kernel> kernel = samples::matrix_reduce_kernel(0, samples::Reduction::kSum, block);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  CompileArtifacts artifacts;
  ASSERT_TRUE(tessel::compile(*kernel, {}, &artifacts).ok());
  EXPECT_EQ(artifacts.llvm.find("gather"), std::string::npos);
  EXPECT_NE(artifacts.llvm.find("masked.load.v"), std::string::npos);

  constexpr int kRows = 100, kCols = 300;  // neither a multiple of the block
  std::vector<float> x(kRows * kCols), out(kCols, -1.0f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
  absl::StatusOr<Function> fn = host().compile(*kernel);
  ASSERT_TRUE(fn.ok()) << fn.status();
  TESSEL_ASSERT_OK(fn->launch({.grid = (kCols + block.cols - 1) / block.cols}, x.data(), out.data(), kRows, kCols));
  for (int c = 0; c < kCols; ++c) {
    float want = 0;
    for (int r = 0; r < kRows; ++r) want += x[r * kCols + c];
    EXPECT_EQ(out[c], want) << c;  // small integers: exact in any order
  }
}

}  // namespace
}  // namespace tessel::testing
