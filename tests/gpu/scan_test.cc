// Scans along one axis of 2-D register tiles on the device under test
// (cuda:0, or the device TESSEL_GPU_TEST_DEVICE names, e.g. host:1) against
// host:2 with the same random inputs: random block shapes (rows within a
// warp scan with shuffles alone, lines over warps exchange the warps'
// totals; tiles some threads hold nothing of, or too large for registers,
// scan in shared memory, in segments where lines are fewer than threads), random
// matrix sizes (masks cut blocks), 1, 4, 8 and 12 warps, each combiner, both
// directions. Integers, max and min agree bit for bit; f32 sums and
// products within a tolerance (the GPU combines in another order).
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "dsl/ops.h"
#include "gtest/gtest.h"
#include "runtime/device.h"
#include "tests/gpu/gpu_test_util.h"

namespace tessel::gpu_test {
namespace {

enum Combiner { kSum, kProd, kMax, kMin };

Value scan(Combiner c, const Value& x, int axis, bool reverse) {
  switch (c) {
    case kSum:
      return cumsum(x, axis, reverse);
    case kProd:
      return cumprod(x, axis, reverse);
    case kMax:
      return cummax(x, axis, reverse);
    case kMin:
      return cummin(x, axis, reverse);
  }
  return Value();
}

// What masked-off elements read: the combiner's identity, so that they
// change no prefix of the elements in the matrix.
template <class T>
T identity(Combiner c) {
  if (c == kSum) return T(0);
  if (c == kProd) return T(1);
  if constexpr (std::is_floating_point_v<T>) return c == kMax ? -INFINITY : INFINITY;
  return c == kMax ? std::numeric_limits<T>::min() : std::numeric_limits<T>::max();
}

// Program (i, j) scans block [br, bc] at (i * br, j * bc) of x [rows, cols]
// along `axis` into out.
template <class T>
Kernel block_scan_kernel(DType d, int br, int bc, int axis, Combiner c, bool reverse) {
  KernelBuilder k("block_scan");
  Value x = k.arg(ptr(d), "x"), out = k.arg(ptr(d), "out");
  Value rows = k.arg(i32, "rows"), cols = k.arg(i32, "cols");
  Value r = k.program_id(0) * br + k.arange(0, br);
  Value cs = k.program_id(1) * bc + k.arange(0, bc);
  Value offs = expand_dims(r, 1) * cols + expand_dims(cs, 0);
  Value mask = expand_dims(r < rows, 1) & expand_dims(cs < cols, 0);
  store(out + offs, scan(c, load(x + offs, mask, identity<T>(c)), axis, reverse), mask);
  absl::StatusOr<Kernel> kernel = k.build();
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return *kernel;
}

class Scan : public AgreeTest {
 protected:
  template <class T>
  void agree_on_random_shapes(DType d) {
    Rng rng;
    TESSEL_TRACE_SEED(rng);
    for (int trial = 0; trial < 32; ++trial) {
      // Blocks of up to 4096 elements, their sides often not powers of two:
      // up to 128 per thread with one warp (over 64 the block stays in
      // shared memory).
      const auto [br, bc, axis, num_warps, rows, cols] = random_block_case(rng);
      const auto c = static_cast<Combiner>(rng.uniform_int(0, 3));
      const bool reverse = rng.uniform_int(0, 1) == 1;
      SCOPED_TRACE(::testing::Message() << d.name() << " block " << br << "x" << bc << " axis " << axis << " combiner "
                                        << c << (reverse ? " reversed" : "") << " warps " << num_warps << " matrix "
                                        << rows << "x" << cols);
      std::vector<T> x(size_t{1} * rows * cols);
      for (T& v : x) {
        if constexpr (std::is_floating_point_v<T>)
          v = c == kProd ? rng.uniform(0.99f, 1.01f) : rng.uniform(-1, 1);
        else
          v = static_cast<T>(c == kProd ? rng.uniform_int(-3, 3) : rng.uniform_int(-1000, 1000));
      }
      const Kernel kernel = block_scan_kernel<T>(d, br, bc, axis, c, reverse);
      std::vector<std::vector<T>> outs;
      for (const Device& dev : devices_) {
        CompileOptions options;
        options.num_warps = num_warps;
        absl::StatusOr<Function> fn = dev.compile(kernel, options);
        ASSERT_TRUE(fn.ok()) << fn.status();
        absl::StatusOr<Buffer> bx = upload(dev, x), bout = dev.allocate(x.size() * sizeof(T));
        ASSERT_TRUE(bx.ok() && bout.ok());
        ASSERT_TRUE(poison<T>(dev, *bout, x.size(), std::is_floating_point_v<T> ? T(NAN) : T(-1)).ok());
        const Grid grid((rows + br - 1) / br, (cols + bc - 1) / bc);
        absl::Status s = fn->launch({.grid = grid, .num_warps = num_warps}, *bx, *bout, rows, cols);
        ASSERT_TRUE(s.ok()) << s;
        ASSERT_TRUE(dev.synchronize().ok());
        absl::StatusOr<std::vector<T>> got = download<T>(dev, *bout, x.size());
        ASSERT_TRUE(got.ok());
        outs.push_back(*std::move(got));
      }
      if (std::is_floating_point_v<T> && (c == kSum || c == kProd)) {
        // Up to 4096 terms summed (or multiplied) in another order.
        EXPECT_TRUE(all_close(outs[0], outs[1], 3e-3));
      } else {
        EXPECT_TRUE(bit_equal(outs[0], outs[1]));
      }
    }
  }
};

// Stream compaction (docs/examples.md): one program walks x in blocks,
// places each positive element at the count so far plus its block's
// cumsum, and carries the count to the next block.
TEST_F(Scan, CompactionInALoopAgreesWithTheHost) {
  constexpr int kBlock = 1024;
  KernelBuilder k("compact");
  Value x = k.arg(ptr(f32), "x"), out = k.arg(ptr(f32), "out"), count = k.arg(ptr(i32), "count");
  Value n = k.arg(i32, "n");
  Var kept = k.var(k.constant(0, i32));
  k.for_range(0, cdiv(n, kBlock), 1, [&](Value block) {
    Value i = block * kBlock + k.arange(0, kBlock);
    Value v = load(x + i, i < n, 0.0f);
    Value ones = cast(v > 0.0f, i32);
    store(out + (kept + cumsum(ones, 0) - 1), v, v > 0.0f);
    kept = kept + sum(ones, 0);
  });
  store(count, kept);
  absl::StatusOr<Kernel> kernel = k.build();
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  const int total = rng.uniform_int(1, 5000);
  SCOPED_TRACE(::testing::Message() << total << " elements");
  std::vector<float> xs(total);
  for (float& v : xs) v = rng.uniform(-1, 1);
  std::vector<std::vector<float>> outs;
  std::vector<std::vector<int32_t>> counts;
  for (const Device& dev : devices_) {
    absl::StatusOr<Function> fn = dev.compile(*kernel);
    ASSERT_TRUE(fn.ok()) << fn.status();
    absl::StatusOr<Buffer> bx = upload(dev, xs), bout = dev.allocate(xs.size() * sizeof(float)),
                           bcount = dev.allocate(sizeof(int32_t));
    ASSERT_TRUE(bx.ok() && bout.ok() && bcount.ok());
    ASSERT_TRUE(poison<float>(dev, *bout, xs.size(), NAN).ok());
    ASSERT_TRUE(fn->launch({.grid = 1}, *bx, *bout, *bcount, total).ok());
    ASSERT_TRUE(dev.synchronize().ok());
    absl::StatusOr<std::vector<float>> got = download<float>(dev, *bout, xs.size());
    absl::StatusOr<std::vector<int32_t>> n_got = download<int32_t>(dev, *bcount, 1);
    ASSERT_TRUE(got.ok() && n_got.ok());
    outs.push_back(*std::move(got));
    counts.push_back(*std::move(n_got));
  }
  EXPECT_EQ(counts[0], counts[1]);
  EXPECT_TRUE(bit_equal(outs[0], outs[1]));
}

TEST_F(Scan, F32AlongEachAxisAgreesWithTheHost) { agree_on_random_shapes<float>(f32); }

TEST_F(Scan, I32AlongEachAxisAgreesWithTheHost) { agree_on_random_shapes<int32_t>(i32); }

}  // namespace
}  // namespace tessel::gpu_test
