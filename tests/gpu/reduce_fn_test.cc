// reduce with a combine function on the device under test (cuda:0, or the
// device TESSEL_GPU_TEST_DEVICE names, e.g. host:1) against host:2 with the
// same random inputs, on random block shapes (sides often not powers of
// two), either axis, 1, 4, 8 and 12 warps: an argmax with the lowest index on
// ties and an xor of each line (exact, so bit for bit), a whole block's
// minimum and maximum together (exact), and Welford's mean and variance of
// each line (floats combined in other orders, so within a tolerance).
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

std::vector<Value> argmax_combine(std::span<const Value> a, std::span<const Value> b) {
  Value take_b = (b[0] > a[0]) | ((b[0] == a[0]) & (b[1] < a[1]));
  return {where(take_b, b[0], a[0]), where(take_b, b[1], a[1])};
}

std::vector<Value> welford_combine(std::span<const Value> a, std::span<const Value> b) {
  Value n = a[0] + b[0];
  Value delta = b[1] - a[1];
  Value share = b[0] / n;
  return {n, a[1] + delta * share, a[2] + b[2] + delta * delta * a[0] * share};
}

// Program p reduces block p of xi ([br, bc] i32) and xf ([br, bc] f32) along
// `axis` into its lines' results: ints [4, lines] (argmax value, position,
// xor; and the block's minimum and maximum in the first two of a fourth row)
// and floats [2, lines] (mean, variance).
Kernel block_reduce_fn_kernel(int br, int bc, int axis) {
  KernelBuilder k("block_reduce_fn");
  Value xi = k.arg(ptr(i32), "xi"), xf = k.arg(ptr(f32), "xf");
  Value ints = k.arg(ptr(i32), "ints"), floats = k.arg(ptr(f32), "floats");
  Value p = k.program_id(0);
  Value rows = expand_dims(k.arange(0, br), 1), cols = expand_dims(k.arange(0, bc), 0);
  Value at = p * (br * bc) + rows * bc + cols;
  Value vi = load(xi + at), vf = load(xf + at);  // [br, bc]
  const int lines = axis == 0 ? bc : br;
  Value pos = broadcast_to(axis == 0 ? rows : cols, {br, bc});
  Value line = k.arange(0, lines);
  Value ib = ints + p * (4 * lines), fb = floats + p * (2 * lines);
  std::vector<Value> am = reduce({vi, pos}, axis, argmax_combine);
  store(ib + line, am[0]);
  store(ib + lines + line, am[1]);
  store(ib + 2 * lines + line, reduce(vi, axis, [](const Value& a, const Value& b) { return a ^ b; }));
  std::vector<Value> lohi = reduce({reshape(vi, {br * bc}), reshape(vi, {br * bc})}, 0,
                                   [](std::span<const Value> a, std::span<const Value> b) {
                                     return std::vector<Value>{minimum(a[0], b[0]), maximum(a[1], b[1])};
                                   });
  store(ib + 3 * lines, lohi[0]);
  store(ib + 3 * lines + 1, lohi[1]);
  std::vector<Value> w = reduce({k.full({br, bc}, 1.0, f32), vf, k.zeros({br, bc}, f32)}, axis, welford_combine);
  store(fb + line, w[1]);
  store(fb + lines + line, w[2] / w[0]);
  absl::StatusOr<Kernel> kernel = k.build();
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return *kernel;
}

class ReduceFn : public AgreeTest {
 protected:
  static constexpr int kPrograms = 3;
  // Random blocks of [br, bc] reduced along `axis` on `warps` warps, on the
  // device under test and host:2.
  void Agree(Rng& rng, int br, int bc, int axis, int warps) {
    const int lines = axis == 0 ? bc : br;
    SCOPED_TRACE(::testing::Message() << "block " << br << "x" << bc << " axis " << axis << " warps " << warps);
    const size_t n = size_t{kPrograms} * br * bc;
    std::vector<int32_t> xi(n);
    std::vector<float> xf(n);
    for (int32_t& v : xi) v = rng.uniform_int(-5, 5);  // many ties
    for (float& v : xf) v = 100 + rng.uniform(-1, 1);
    const Kernel kernel = block_reduce_fn_kernel(br, bc, axis);
    const size_t ni = size_t{kPrograms} * 4 * lines, nf = size_t{kPrograms} * 2 * lines;
    std::vector<std::vector<int32_t>> ints;
    std::vector<std::vector<float>> floats;
    for (const Device& dev : devices_) {
      CompileOptions options;
      options.num_warps = warps;
      absl::StatusOr<Function> fn = dev.compile(kernel, options);
      ASSERT_TRUE(fn.ok()) << fn.status();
      absl::StatusOr<Buffer> bi = upload(dev, xi), bf = upload(dev, xf), bints = upload(dev, std::vector<int32_t>(ni)),
                             bfloats = dev.allocate(nf * 4);
      ASSERT_TRUE(bi.ok() && bf.ok() && bints.ok() && bfloats.ok());
      absl::Status s = fn->launch({.grid = Grid(kPrograms), .num_warps = warps}, *bi, *bf, *bints, *bfloats);
      ASSERT_TRUE(s.ok()) << s;
      ASSERT_TRUE(dev.synchronize().ok());
      absl::StatusOr<std::vector<int32_t>> gi = download<int32_t>(dev, *bints, ni);
      absl::StatusOr<std::vector<float>> gf = download<float>(dev, *bfloats, nf);
      ASSERT_TRUE(gi.ok() && gf.ok());
      ints.push_back(*std::move(gi));
      floats.push_back(*std::move(gf));
    }
    EXPECT_EQ(ints[0], ints[1]);
    EXPECT_TRUE(all_close(floats[0], floats[1], 1e-4));
  }
};

TEST_F(ReduceFn, BlocksAgreeWithTheHost) {
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  for (int trial = 0; trial < 24; ++trial) {
    BlockCase shape = random_block_case(rng);
    // The fourth row of ints holds the block's minimum and maximum.
    if ((shape.axis == 0 ? shape.bc : shape.br) < 2) shape.axis = 1 - shape.axis;
    if ((shape.axis == 0 ? shape.bc : shape.br) < 2) continue;
    Agree(rng, shape.br, shape.bc, shape.axis, shape.num_warps);
  }
}

// Lines too long for registers (more than 64 elements a thread) and fewer
// than the threads reduce over shared memory in segments; so does the
// whole block, each thread combining the segments' totals.
TEST_F(ReduceFn, LongLinesReduceInSegments) {
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  for (const auto& [br, bc, axis, warps] :
       std::vector<std::tuple<int, int, int, int>>{{2, 1200, 1, 1}, {3, 800, 1, 1}, {1200, 2, 0, 1}}) {
    Agree(rng, br, bc, axis, warps);
  }
}

}  // namespace
}  // namespace tessel::gpu_test
