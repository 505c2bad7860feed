// Reductions along one axis of 2-D register tiles, broadcast back, on the
// device under test (cuda:0, or the device TESSEL_GPU_TEST_DEVICE names,
// e.g. host:1) against host:2 with the same random inputs: random block
// shapes (rows inside a warp take warp shuffles, rows over warps or over
// several slots of a thread take shared memory), random matrix sizes (not
// powers of two, so masks cut blocks), 1, 4, 8 and 12 warps. Per block, out =
// 2 * x - red(x, axis) broadcast back and the reduced tile are stored;
// integers and max/min agree exactly, f32 sums within a tolerance. The row
// softmax sample agrees too.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "dsl/ops.h"
#include "gtest/gtest.h"
#include "runtime/device.h"
#include "samples/kernels.h"
#include "tests/gpu/gpu_test_util.h"

namespace tessel::gpu_test {
namespace {

enum Combiner { kSum, kMax, kMin };

Value reduce(Combiner c, const Value& x, int axis) {
  if (c == kSum) return sum(x, axis);
  return c == kMax ? max(x, axis) : min(x, axis);
}

// The value masked-off elements read: the combiner's identity.
template <class T>
T identity(Combiner c) {
  if (c == kSum) return T(0);
  if constexpr (std::is_floating_point_v<T>) return c == kMax ? -INFINITY : INFINITY;
  return c == kMax ? std::numeric_limits<T>::min() : std::numeric_limits<T>::max();
}

// Program (i, j) takes block [br, bc] at (i * br, j * bc) of x [rows, cols]
// and writes out = 2 * x - red(x, axis) broadcast back there, and red into
// partial: [rows, grid_cols] for axis 1, [grid_rows, cols] for axis 0.
template <class T>
Kernel block_reduce_kernel(DType d, int br, int bc, int axis, Combiner c) {
  KernelBuilder k("block_reduce");
  Value x = k.arg(ptr(d), "x"), out = k.arg(ptr(d), "out"), partial = k.arg(ptr(d), "partial");
  Value rows = k.arg(i32, "rows"), cols = k.arg(i32, "cols");
  Value r = k.program_id(0) * br + k.arange(0, br);                   // [br] i32
  Value cs = k.program_id(1) * bc + k.arange(0, bc);                  // [bc] i32
  Value offs = expand_dims(r, 1) * cols + expand_dims(cs, 0);         // [br, bc] i32
  Value mask = expand_dims(r < rows, 1) & expand_dims(cs < cols, 0);  // [br, bc] i1
  Value v = load(x + offs, mask, identity<T>(c));                     // [br, bc]
  Value red = reduce(c, v, axis);                                     // [bc] or [br]
  store(out + offs, v * k.constant(2, d) - expand_dims(red, axis), mask);
  if (axis == 1) {
    store(partial + r * k.num_programs(1) + k.program_id(1), red, r < rows);
  } else {
    store(partial + k.program_id(0) * cols + cs, red, cs < cols);
  }
  absl::StatusOr<Kernel> kernel = k.build();
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return *kernel;
}

class SliceReduce : public gpu_test::AgreeTest {
 protected:
  // out and partial from `kernel` on each device, with NaN or all-ones poison first.
  template <class T>
  std::vector<std::pair<std::vector<T>, std::vector<T>>> run(const Kernel& kernel, int num_warps,
                                                             const std::vector<T>& x, Grid grid, int64_t partial_count,
                                                             int rows, int cols) {
    std::vector<std::pair<std::vector<T>, std::vector<T>>> results;
    const T poison_value = std::is_floating_point_v<T> ? T(NAN) : T(-1);
    for (const Device& dev : devices_) {
      CompileOptions options;
      options.num_warps = num_warps;
      absl::StatusOr<Function> fn = dev.compile(kernel, options);
      EXPECT_TRUE(fn.ok()) << fn.status();
      absl::StatusOr<Buffer> bx = upload(dev, x), bout = dev.allocate(x.size() * sizeof(T)),
                             bpartial = dev.allocate(partial_count * sizeof(T));
      EXPECT_TRUE(fn.ok() && bx.ok() && bout.ok() && bpartial.ok());
      if (!fn.ok() || !bx.ok() || !bout.ok() || !bpartial.ok()) return {};
      EXPECT_TRUE(poison<T>(dev, *bout, x.size(), poison_value).ok());
      EXPECT_TRUE(poison<T>(dev, *bpartial, partial_count, poison_value).ok());
      absl::Status s = fn->launch({.grid = grid, .num_warps = num_warps}, *bx, *bout, *bpartial, rows, cols);
      EXPECT_TRUE(s.ok()) << s;
      EXPECT_TRUE(dev.synchronize().ok());
      absl::StatusOr<std::vector<T>> out = download<T>(dev, *bout, x.size());
      absl::StatusOr<std::vector<T>> partial = download<T>(dev, *bpartial, partial_count);
      EXPECT_TRUE(out.ok() && partial.ok());
      if (!out.ok() || !partial.ok()) return {};
      results.emplace_back(*std::move(out), *std::move(partial));
    }
    return results;
  }

  // Blocks of [br, block_cols] of a random [rows, cols] matrix reduced by
  // `c` along `axis` on `num_warps` warps, on each device.
  template <class T>
  void agree(Rng& rng, DType d, const BlockCase& shape, Combiner c) {
    const auto [br, block_cols, axis, num_warps, rows, cols] = shape;
    SCOPED_TRACE(::testing::Message() << d.name() << " block " << br << "x" << block_cols << " axis " << axis
                                      << " combiner " << c << " warps " << num_warps << " matrix " << rows << "x"
                                      << cols);
    const Grid grid((rows + br - 1) / br, (cols + block_cols - 1) / block_cols);
    const int64_t partial_count = axis == 1 ? int64_t{rows} * grid.dims[1] : int64_t{grid.dims[0]} * cols;
    std::vector<T> x(size_t{1} * rows * cols);
    for (T& v : x) v = static_cast<T>(std::is_floating_point_v<T> ? rng.uniform(-1, 1) : rng.uniform_int(-1000, 1000));
    auto results =
        run<T>(block_reduce_kernel<T>(d, br, block_cols, axis, c), num_warps, x, grid, partial_count, rows, cols);
    ASSERT_EQ(results.size(), 2u);
    if (std::is_floating_point_v<T> && c == kSum) {
      // Up to 4096 terms below 1 in magnitude, summed in other orders (the
      // block sums of vector_access_test need 1e-4 for 1024).
      EXPECT_TRUE(all_close(results[0].first, results[1].first, 5e-4)) << "out";
      EXPECT_TRUE(all_close(results[0].second, results[1].second, 5e-4)) << "partial";
    } else {
      EXPECT_TRUE(bit_equal(results[0].first, results[1].first)) << "out";
      EXPECT_TRUE(bit_equal(results[0].second, results[1].second)) << "partial";
    }
  }

  template <class T>
  void agree_on_random_shapes(DType d) {
    Rng rng;
    TESSEL_TRACE_SEED(rng);
    for (int trial = 0; trial < 24; ++trial) {
      // Blocks of up to 4096 elements (up to 32 per thread with 4 warps), their
      // sides often not powers of two.
      agree<T>(rng, d, random_block_case(rng), static_cast<Combiner>(rng.uniform_int(0, 2)));
    }
  }
};

// Lines too long for registers (more than 64 elements a thread) and fewer
// than the threads reduce over shared memory in segments.
TEST_F(SliceReduce, LongLinesReduceInSegments) {
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  for (const BlockCase& shape :
       std::vector<BlockCase>{{.br = 2, .bc = 1200, .axis = 1, .num_warps = 1, .rows = 5, .cols = 2401},
                              {.br = 1200, .bc = 2, .axis = 0, .num_warps = 1, .rows = 2401, .cols = 3},
                              {.br = 1, .bc = 2400, .axis = 1, .num_warps = 1, .rows = 3, .cols = 2400}}) {
    for (Combiner c : {kSum, kMax, kMin}) {
      agree<float>(rng, f32, shape, c);
      agree<int32_t>(rng, i32, shape, c);
    }
  }
}

TEST_F(SliceReduce, F32AlongEachAxisAgreesWithTheHost) { agree_on_random_shapes<float>(f32); }

TEST_F(SliceReduce, I32AlongEachAxisAgreesWithTheHost) { agree_on_random_shapes<int32_t>(i32); }

TEST_F(SliceReduce, RowSoftmaxAgreesWithTheHost) {
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  for (auto [br, bc] :
       {std::pair{samples::kRowSoftmaxRows, samples::kRowSoftmaxCols}, std::pair{8, 128}, std::pair{4, 1024}}) {
    absl::StatusOr<Kernel> kernel = samples::row_softmax_kernel(br, bc);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    const int rows = rng.uniform_int(1, 500), cols = rng.uniform_int(1, bc);
    SCOPED_TRACE(::testing::Message() << "block " << br << "x" << bc << " matrix " << rows << "x" << cols);
    std::vector<float> x(size_t{1} * rows * cols);
    for (float& v : x) v = rng.uniform(-5, 5);
    std::vector<std::vector<float>> outs;
    for (const Device& dev : devices_) {
      absl::StatusOr<Function> fn = dev.compile(*kernel);
      ASSERT_TRUE(fn.ok()) << fn.status();
      absl::StatusOr<Buffer> bx = upload(dev, x), by = dev.allocate(x.size() * sizeof(float));
      ASSERT_TRUE(bx.ok() && by.ok());
      ASSERT_TRUE(poison<float>(dev, *by, x.size(), NAN).ok());
      ASSERT_TRUE(fn->launch({.grid = (rows + br - 1) / br}, *bx, *by, rows, cols).ok());
      ASSERT_TRUE(dev.synchronize().ok());
      absl::StatusOr<std::vector<float>> got = download<float>(dev, *by, x.size());
      ASSERT_TRUE(got.ok());
      outs.push_back(*std::move(got));
    }
    EXPECT_TRUE(all_close(outs[0], outs[1], 1e-5)) << "device under test against host:2";
  }
}

}  // namespace
}  // namespace tessel::gpu_test
