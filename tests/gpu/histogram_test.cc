// histogram on the device under test (cuda:0, or the device
// TESSEL_GPU_TEST_DEVICE names, e.g. host:1) against host:2 with the same
// random inputs: random block shapes (sides often not powers of two), bins
// from 1 to 300, elements outside the bins, a mask, a row argmax's
// positions (a tile threads share), 1, 4, 8 and 12 warps, three
// integer dtypes; and an MoE's tokens per expert, blocks counted in a loop
// and the programs' counts added by atomics. Counts are exact, so the
// targets agree exactly.
#include <cstdint>
#include <vector>

#include "dsl/ops.h"
#include "gtest/gtest.h"
#include "runtime/device.h"
#include "tests/gpu/gpu_test_util.h"

namespace tessel::gpu_test {
namespace {

// Program p counts block p of x ([br, bc], consecutive) into out's row p of
// `bins`, unmasked, and into masked's row p where the element is not a
// multiple of 3; and into argmaxes's row p the positions of its rows'
// greatest elements (a top-1 router's tokens per expert), a tile held in a
// slice of the block's layout, where threads share elements.
Kernel block_histogram_kernel(DType d, int br, int bc, int bins) {
  KernelBuilder k("block_histogram");
  Value x = k.arg(ptr(d), "x"), out = k.arg(ptr(i32), "out"), masked = k.arg(ptr(i32), "masked"),
        argmaxes = k.arg(ptr(i32), "argmaxes");
  Value p = k.program_id(0);
  Value block = load(x + p * (br * bc) + expand_dims(k.arange(0, br), 1) * bc + expand_dims(k.arange(0, bc), 0));
  Value at = p * bins + k.arange(0, bins);
  store(out + at, histogram(block, bins));
  store(masked + at, histogram(block, bins, block % 3 != 0));
  store(argmaxes + at, histogram(argmax(block, 1), bins));
  absl::StatusOr<Kernel> kernel = k.build();
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return *kernel;
}

class Histogram : public AgreeTest {
 protected:
  template <class T>
  void agree_on_random_shapes(DType d) {
    Rng rng;
    TESSEL_TRACE_SEED(rng);
    constexpr int kPrograms = 3;
    for (int trial = 0; trial < 24; ++trial) {
      const BlockCase shape = random_block_case(rng);
      const int br = shape.br, bc = shape.bc, bins = rng.uniform_int(1, 300);
      SCOPED_TRACE(::testing::Message() << d.name() << " block " << br << "x" << bc << " bins " << bins << " warps "
                                        << shape.num_warps);
      std::vector<T> x(size_t{kPrograms} * br * bc);
      // Mostly inside the bins, a few on either side (unsigned ones wrap
      // to large values).
      for (T& v : x) v = static_cast<T>(rng.uniform_int(-3, bins + 2));
      const size_t out_size = size_t{kPrograms} * bins;
      const Kernel kernel = block_histogram_kernel(d, br, bc, bins);
      std::vector<std::vector<int32_t>> outs, masked_outs, argmax_outs;
      for (const Device& dev : devices_) {
        CompileOptions options;
        options.num_warps = shape.num_warps;
        absl::StatusOr<Function> fn = dev.compile(kernel, options);
        ASSERT_TRUE(fn.ok()) << fn.status();
        absl::StatusOr<Buffer> bx = upload(dev, x), bout = dev.allocate(out_size * 4),
                               bmasked = dev.allocate(out_size * 4), bargmax = dev.allocate(out_size * 4);
        ASSERT_TRUE(bx.ok() && bout.ok() && bmasked.ok() && bargmax.ok());
        for (const Buffer* b : {&*bout, &*bmasked, &*bargmax}) ASSERT_TRUE(poison<int32_t>(dev, *b, out_size, 7).ok());
        absl::Status s =
            fn->launch({.grid = Grid(kPrograms), .num_warps = shape.num_warps}, *bx, *bout, *bmasked, *bargmax);
        ASSERT_TRUE(s.ok()) << s;
        ASSERT_TRUE(dev.synchronize().ok());
        absl::StatusOr<std::vector<int32_t>> got = download<int32_t>(dev, *bout, out_size);
        absl::StatusOr<std::vector<int32_t>> got_masked = download<int32_t>(dev, *bmasked, out_size);
        absl::StatusOr<std::vector<int32_t>> got_argmax = download<int32_t>(dev, *bargmax, out_size);
        ASSERT_TRUE(got.ok() && got_masked.ok() && got_argmax.ok());
        outs.push_back(*std::move(got));
        masked_outs.push_back(*std::move(got_masked));
        argmax_outs.push_back(*std::move(got_argmax));
      }
      EXPECT_EQ(outs[0], outs[1]);
      EXPECT_EQ(masked_outs[0], masked_outs[1]);
      EXPECT_EQ(argmax_outs[0], argmax_outs[1]);
    }
  }
};

TEST_F(Histogram, I32BlocksAgreeWithTheHost) { agree_on_random_shapes<int32_t>(i32); }

TEST_F(Histogram, U8BlocksAgreeWithTheHost) { agree_on_random_shapes<uint8_t>(u8); }

TEST_F(Histogram, I64BlocksAgreeWithTheHost) { agree_on_random_shapes<int64_t>(i64); }

// Tokens per expert over n token choices: each program counts blocks of
// them in a loop, then adds its counts into out by atomics.
TEST_F(Histogram, TokensPerExpertAgreeWithTheHost) {
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  constexpr int kBlock = 512, kPrograms = 16;
  for (const int experts : {8, 60, 128, 256}) {
    SCOPED_TRACE(::testing::Message() << experts << " experts");
    KernelBuilder k("tokens_per_expert");
    Value x = k.arg(ptr(i32), "x"), n = k.arg(i32, "n"), out = k.arg(ptr(i32), "out");
    Var sum = k.var(k.zeros({experts}, i32));
    k.for_range(k.program_id(0) * kBlock, n, k.num_programs(0) * kBlock, [&](Value i) {
      Value offs = i + k.arange(0, kBlock);  // [B] i32
      Value inside = offs < n;
      sum = sum + histogram(load(x + offs, inside, 0), experts, inside);
    });
    atomic_add(out + k.arange(0, experts), sum, MemoryOrder::kRelaxed);
    absl::StatusOr<Kernel> kernel = k.build();
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    const int count = 100003;
    std::vector<int32_t> xs(count);
    // Skewed towards the low experts, as a router's choices often are.
    for (int32_t& v : xs) v = rng.uniform_int(0, 3) == 0 ? rng.uniform_int(0, experts - 1) : rng.uniform_int(0, 3);
    std::vector<std::vector<int32_t>> outs;
    for (const Device& dev : devices_) {
      absl::StatusOr<Function> fn = dev.compile(*kernel);
      ASSERT_TRUE(fn.ok()) << fn.status();
      absl::StatusOr<Buffer> bx = upload(dev, xs), bout = upload(dev, std::vector<int32_t>(experts, 0));
      ASSERT_TRUE(bx.ok() && bout.ok());
      absl::Status s = fn->launch({.grid = Grid(kPrograms)}, *bx, count, *bout);
      ASSERT_TRUE(s.ok()) << s;
      ASSERT_TRUE(dev.synchronize().ok());
      absl::StatusOr<std::vector<int32_t>> got = download<int32_t>(dev, *bout, experts);
      ASSERT_TRUE(got.ok());
      outs.push_back(*std::move(got));
    }
    EXPECT_EQ(outs[0], outs[1]);
    int64_t total = 0;
    for (int32_t c : outs[0]) total += c;
    EXPECT_EQ(total, count);
  }
}

}  // namespace
}  // namespace tessel::gpu_test
