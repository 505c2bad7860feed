// associative_scan on the device under test (cuda:0, or the device
// TESSEL_GPU_TEST_DEVICE names, e.g. host:1) against host:2 with the same
// random inputs, on random block shapes (sides often not powers of two),
// either axis, both directions, 1, 4, 8 and 12 warps: a linear recurrence in
// wrapping i32 (its combine does not commute, so an order the device got
// wrong shows), a running argmax with the lowest position on ties, and a
// sum restarted at flags over integer-valued floats (exact). All three are
// exact, so the results agree bit for bit.
#include <cstdint>
#include <span>
#include <tuple>
#include <vector>

#include "dsl/ops.h"
#include "gtest/gtest.h"
#include "runtime/device.h"
#include "tests/gpu/gpu_test_util.h"

namespace tessel::gpu_test {
namespace {

// Program p scans block p of a, b ([br, bc] i32) and x ([br, bc] f32) along
// `axis` into ints (the recurrence's h, then the argmax's positions) and
// floats (the restarted sums), each block in place.
Kernel block_scan_fn_kernel(int br, int bc, int axis, bool reverse) {
  KernelBuilder k("block_scan_fn");
  Value a = k.arg(ptr(i32), "a"), b = k.arg(ptr(i32), "b"), x = k.arg(ptr(f32), "x");
  Value ints = k.arg(ptr(i32), "ints"), floats = k.arg(ptr(f32), "floats");
  Value p = k.program_id(0);
  Value rows = expand_dims(k.arange(0, br), 1), cols = expand_dims(k.arange(0, bc), 0);
  Value at = p * (br * bc) + rows * bc + cols;
  Value va = load(a + at), vb = load(b + at), vx = load(x + at);
  std::vector<Value> h = associative_scan(
      {va, vb}, axis,
      [](std::span<const Value> first, std::span<const Value> then) {
        return std::vector<Value>{first[0] * then[0], then[0] * first[1] + then[1]};
      },
      reverse);
  store(ints + 2 * p * (br * bc) + rows * bc + cols, h[1]);
  Value pos = broadcast_to(axis == 0 ? rows : cols, {br, bc});
  std::vector<Value> best = associative_scan(
      {vb, pos}, axis,
      [](std::span<const Value> first, std::span<const Value> then) {
        Value take = (then[0] > first[0]) | ((then[0] == first[0]) & (then[1] < first[1]));
        return std::vector<Value>{where(take, then[0], first[0]), where(take, then[1], first[1])};
      },
      reverse);
  store(ints + (2 * p + 1) * (br * bc) + rows * bc + cols, best[1]);
  std::vector<Value> sums = associative_scan(
      {va == 0, vx}, axis,
      [](std::span<const Value> first, std::span<const Value> then) {
        return std::vector<Value>{first[0] | then[0], where(then[0], then[1], first[1] + then[1])};
      },
      reverse);
  store(floats + at, sums[1]);
  absl::StatusOr<Kernel> kernel = k.build();
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return *kernel;
}

class ScanFn : public AgreeTest {
 protected:
  // Three programs' random blocks of [br, bc] scanned along `axis` on
  // `warps` warps, on the device under test and host:2.
  void Agree(Rng& rng, int br, int bc, int axis, int warps, bool reverse) {
    SCOPED_TRACE(::testing::Message() << "block " << br << "x" << bc << " axis " << axis << " warps " << warps
                                      << (reverse ? " reverse" : ""));
    constexpr int kPrograms = 3;
    const size_t n = size_t{kPrograms} * br * bc;
    std::vector<int32_t> a(n), b(n);
    std::vector<float> x(n);
    for (int32_t& v : a) v = rng.uniform_int(0, 6);   // 0 restarts the sums
    for (int32_t& v : b) v = rng.uniform_int(-5, 5);  // many ties
    for (float& v : x) v = static_cast<float>(rng.uniform_int(-100, 100));
    const Kernel kernel = block_scan_fn_kernel(br, bc, axis, reverse);
    std::vector<std::vector<int32_t>> ints;
    std::vector<std::vector<float>> floats;
    for (const Device& dev : devices_) {
      CompileOptions options;
      options.num_warps = warps;
      absl::StatusOr<Function> fn = dev.compile(kernel, options);
      ASSERT_TRUE(fn.ok()) << fn.status();
      absl::StatusOr<Buffer> ba = upload(dev, a), bb = upload(dev, b), bx = upload(dev, x),
                             bints = upload(dev, std::vector<int32_t>(2 * n)), bfloats = dev.allocate(n * 4);
      ASSERT_TRUE(ba.ok() && bb.ok() && bx.ok() && bints.ok() && bfloats.ok());
      absl::Status s = fn->launch({.grid = Grid(kPrograms), .num_warps = warps}, *ba, *bb, *bx, *bints, *bfloats);
      ASSERT_TRUE(s.ok()) << s;
      ASSERT_TRUE(dev.synchronize().ok());
      absl::StatusOr<std::vector<int32_t>> gi = download<int32_t>(dev, *bints, 2 * n);
      absl::StatusOr<std::vector<float>> gf = download<float>(dev, *bfloats, n);
      ASSERT_TRUE(gi.ok() && gf.ok());
      ints.push_back(*std::move(gi));
      floats.push_back(*std::move(gf));
    }
    EXPECT_EQ(ints[0], ints[1]);
    EXPECT_EQ(floats[0], floats[1]);
  }
};

TEST_F(ScanFn, BlocksAgreeWithTheHost) {
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  for (int trial = 0; trial < 24; ++trial) {
    const BlockCase shape = random_block_case(rng);
    Agree(rng, shape.br, shape.bc, shape.axis, shape.num_warps, rng.uniform_int(0, 1) == 1);
  }
}

// Lines too long for registers (more than 64 elements a thread) scan over
// shared memory in segments, one per thread, each after the segments
// before it; a few lines share the threads.
TEST_F(ScanFn, LongLinesScanInSegments) {
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  for (const auto& [rows, cols, warps] : std::vector<std::tuple<int, int, int>>{{1, 2400, 1}, {3, 800, 1}}) {
    for (bool reverse : {false, true}) Agree(rng, rows, cols, 1, warps, reverse);
  }
}

}  // namespace
}  // namespace tessel::gpu_test
