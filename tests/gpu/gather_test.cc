// gather along one axis of 2-D tiles on the device under test (cuda:0, or
// the device TESSEL_GPU_TEST_DEVICE names, e.g. host:1) against host:2 with
// the same random inputs (f32, i32, and bf16 as any bits): random block
// shapes (sides often not powers of two), index tiles longer and shorter
// than the block along the axis, indices outside it (they give 0), 1, 4, 8
// and 12 warps; and a router's top k, argsort then gather, at a few widths. A
// gather moves elements, so the targets agree bit for bit.
#include <cstdint>
#include <tuple>
#include <vector>

#include "dsl/ops.h"
#include "gtest/gtest.h"
#include "runtime/device.h"
#include "tests/gpu/gpu_test_util.h"

namespace tessel::gpu_test {
namespace {

// Program p gathers block p of x ([br, bc], consecutive) along `axis` by an
// index tile of `index_shape` whose element (i, j) is (i * a + j * b + p * c)
// % (n + 4) - 2 for the block's size n along the axis (two below it and two
// past it give 0), into out's block p ([index_shape], consecutive).
Kernel block_gather_kernel(DType d, int br, int bc, int axis, const Shape& index_shape) {
  KernelBuilder k("block_gather");
  Value x = k.arg(ptr(d), "x"), out = k.arg(ptr(d), "out");
  Value a = k.arg(i32, "a"), b = k.arg(i32, "b"), c = k.arg(i32, "c");
  Value p = k.program_id(0);
  Value block = load(x + p * (br * bc) + expand_dims(k.arange(0, br), 1) * bc + expand_dims(k.arange(0, bc), 0));
  const int64_t ir = index_shape[0], ic = index_shape[1], n = axis == 0 ? br : bc;
  Value rows = expand_dims(k.arange(0, static_cast<int>(ir)), 1),
        cols = expand_dims(k.arange(0, static_cast<int>(ic)), 0);
  Value index = (rows * a + cols * b + p * c) % static_cast<int>(n + 4) - 2;
  Value at = p * static_cast<int>(ir * ic) + rows * static_cast<int>(ic) + cols;
  store(out + at, gather(block, index, axis));
  absl::StatusOr<Kernel> kernel = k.build();
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return *kernel;
}

class Gather : public AgreeTest {
 protected:
  template <class T>
  void agree_on_random_shapes(DType d) {
    Rng rng;
    TESSEL_TRACE_SEED(rng);
    constexpr int kPrograms = 3;
    for (int trial = 0; trial < 24; ++trial) {
      const BlockCase shape = random_block_case(rng);
      const int br = shape.br, bc = shape.bc, axis = shape.axis;
      Shape index_shape = {br, bc};
      index_shape[axis] = tile_side(rng, 1 << rng.uniform_int(0, 8));
      const int a = rng.uniform_int(1, 97), b = rng.uniform_int(1, 97), c = rng.uniform_int(0, 97);
      SCOPED_TRACE(::testing::Message() << d.name() << " block " << br << "x" << bc << " axis " << axis << " index "
                                        << index_shape[0] << "x" << index_shape[1] << " warps " << shape.num_warps
                                        << " a " << a << " b " << b << " c " << c);
      std::vector<T> x(size_t{kPrograms} * br * bc);
      for (T& v : x) v = static_cast<T>(rng.gen()());
      const size_t out_size = size_t{kPrograms} * index_shape[0] * index_shape[1];
      const Kernel kernel = block_gather_kernel(d, br, bc, axis, index_shape);
      std::vector<std::vector<T>> outs;
      for (const Device& dev : devices_) {
        CompileOptions options;
        options.num_warps = shape.num_warps;
        absl::StatusOr<Function> fn = dev.compile(kernel, options);
        // A large index tile on one warp holds its pointers in shared memory;
        // past the device's limit the compile says so, which is right.
        if (fn.status().code() == absl::StatusCode::kResourceExhausted) break;
        ASSERT_TRUE(fn.ok()) << fn.status();
        absl::StatusOr<Buffer> bx = upload(dev, x), bout = dev.allocate(out_size * sizeof(T));
        ASSERT_TRUE(bx.ok() && bout.ok());
        ASSERT_TRUE(poison<T>(dev, *bout, out_size, T(7)).ok());
        absl::Status s = fn->launch({.grid = Grid(kPrograms), .num_warps = shape.num_warps}, *bx, *bout, a, b, c);
        ASSERT_TRUE(s.ok()) << s;
        ASSERT_TRUE(dev.synchronize().ok());
        absl::StatusOr<std::vector<T>> got = download<T>(dev, *bout, out_size);
        ASSERT_TRUE(got.ok());
        outs.push_back(*std::move(got));
      }
      if (outs.size() == 2) {
        EXPECT_TRUE(bit_equal(outs[0], outs[1]));
      }
    }
  }
};

TEST_F(Gather, F32AlongEachAxisAgreesWithTheHost) { agree_on_random_shapes<uint32_t>(f32); }

TEST_F(Gather, I32AlongEachAxisAgreesWithTheHost) { agree_on_random_shapes<int32_t>(i32); }

TEST_F(Gather, BF16BitsAlongEachAxisAgreeWithTheHost) { agree_on_random_shapes<uint16_t>(bf16); }

// Each program's [rows, experts] scores, argsorted descending; the first k
// positions and their scores picked by gather, as a mixture-of-experts
// router does.
TEST_F(Gather, TopKOfRowsAgreesWithTheHost) {
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  constexpr int kPrograms = 4, kTop = 8;
  for (const auto& [rows, experts, warps] :
       std::vector<std::tuple<int, int, int>>{{16, 64, 4}, {32, 128, 4}, {8, 256, 8}, {4, 160, 4}, {64, 32, 8}}) {
    SCOPED_TRACE(::testing::Message() << rows << " rows of " << experts << " experts, " << warps << " warps");
    KernelBuilder k("top_k");
    Value x = k.arg(ptr(f32), "x"), top = k.arg(ptr(f32), "top"), picked = k.arg(ptr(i32), "picked");
    Value p = k.program_id(0);
    Value r = expand_dims(k.arange(0, rows), 1);
    Value scores = load(x + p * (rows * experts) + r * experts + expand_dims(k.arange(0, experts), 0));
    Value first = broadcast_to(expand_dims(k.arange(0, kTop), 0), {rows, kTop});
    Value chosen = gather(argsort(scores, 1, /*descending=*/true), first, 1);  // [rows, k] i32
    Value at = p * (rows * kTop) + r * kTop + first;
    store(picked + at, chosen);
    store(top + at, gather(scores, chosen, 1));
    absl::StatusOr<Kernel> kernel = k.build();
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    std::vector<float> xs(size_t{kPrograms} * rows * experts);
    for (float& v : xs) v = rng.uniform(-1, 1);
    const size_t n = size_t{kPrograms} * rows * kTop;
    std::vector<std::vector<float>> tops;
    std::vector<std::vector<int32_t>> picks;
    for (const Device& dev : devices_) {
      CompileOptions options;
      options.num_warps = warps;
      absl::StatusOr<Function> fn = dev.compile(*kernel, options);
      ASSERT_TRUE(fn.ok()) << fn.status();
      absl::StatusOr<Buffer> bx = upload(dev, xs), btop = dev.allocate(n * 4), bpick = dev.allocate(n * 4);
      ASSERT_TRUE(bx.ok() && btop.ok() && bpick.ok());
      absl::Status s = fn->launch({.grid = Grid(kPrograms), .num_warps = warps}, *bx, *btop, *bpick);
      ASSERT_TRUE(s.ok()) << s;
      ASSERT_TRUE(dev.synchronize().ok());
      absl::StatusOr<std::vector<float>> got_top = download<float>(dev, *btop, n);
      absl::StatusOr<std::vector<int32_t>> got_pick = download<int32_t>(dev, *bpick, n);
      ASSERT_TRUE(got_top.ok() && got_pick.ok());
      tops.push_back(*std::move(got_top));
      picks.push_back(*std::move(got_pick));
    }
    EXPECT_TRUE(bit_equal(tops[0], tops[1]));
    EXPECT_EQ(picks[0], picks[1]);
  }
}

}  // namespace
}  // namespace tessel::gpu_test
