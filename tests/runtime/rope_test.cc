// Rotary embeddings (samples::rope_kernel) on the host target against a
// double reference: f32 and bf16, head dimensions that are and are not
// powers of two, row counts that leave a program's block part empty (the
// rows past the end keep what they held), and the error an odd head
// dimension gets.
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "base/float16.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "samples/kernels.h"
#include "tessel/tessel.h"
#include "tests/seeded.h"

namespace tessel {
namespace {

// Values in [lo, hi] rounded to `d` (f32 or bf16): as floats, and as the bytes a kernel reads.
struct Values {
  std::vector<float> f;
  std::vector<uint16_t> bits;  // bf16 only

  Values(DType d, size_t n, std::mt19937& gen, float lo, float hi) : f(n) {
    std::uniform_real_distribution<float> u(lo, hi);
    for (float& v : f) v = u(gen);
    if (d == f32) return;
    for (float& v : f) {
      bits.push_back(float_to_bf16(v));
      v = bf16_to_float(bits.back());
    }
  }
  const void* data() const { return bits.empty() ? static_cast<const void*>(f.data()) : bits.data(); }
};

constexpr uint16_t kPoison = 0x7FC1;  // a NaN in f32 and bf16

TEST(Rope, MatchesADoubleReference) {
  TESSEL_SEEDED_GEN(gen);
  absl::StatusOr<Device> dev = Device::open("host:2");
  ASSERT_TRUE(dev.ok()) << dev.status();
  for (DType d : {f32, bf16}) {
    for (const samples::RowBlock& block :
         {samples::RowBlock{.rows = 32, .cols = 128, .warps = 4}, samples::RowBlock{.rows = 4, .cols = 64, .warps = 2},
          samples::RowBlock{.rows = 5, .cols = 80, .warps = 4}, samples::RowBlock{.rows = 1, .cols = 2, .warps = 1}}) {
      const int heads = 1 + static_cast<int>(gen() % 6), tokens = 1 + static_cast<int>(gen() % 20);
      const int rows = heads * tokens, dim = block.cols;
      SCOPED_TRACE(::testing::Message() << d.name() << " head dimension " << dim << ", blocks of " << block.rows
                                        << " rows, " << tokens << " tokens of " << heads << " heads");
      const size_t elem = d.bytes(), n = size_t{1} * rows * dim;
      // y has a block of rows more than the kernel writes: they must keep the poison.
      const size_t padded = n + size_t{1} * block.rows * dim;
      const Values x(d, n, gen, -2, 2), cos(d, size_t{1} * tokens * dim, gen, -1, 1),
          sin(d, size_t{1} * tokens * dim, gen, -1, 1);
      absl::StatusOr<Buffer> bx = dev->allocate(n * elem), by = dev->allocate(padded * elem),
                             bc = dev->allocate(cos.f.size() * elem), bs = dev->allocate(sin.f.size() * elem);
      ASSERT_TRUE(bx.ok() && by.ok() && bc.ok() && bs.ok());
      ASSERT_TRUE(dev->copy_to_device(*bx, x.data(), n * elem).ok());
      ASSERT_TRUE(dev->copy_to_device(*bc, cos.data(), cos.f.size() * elem).ok());
      ASSERT_TRUE(dev->copy_to_device(*bs, sin.data(), sin.f.size() * elem).ok());
      const std::vector<uint16_t> poison(padded * elem / 2, kPoison);
      ASSERT_TRUE(dev->copy_to_device(*by, poison.data(), padded * elem).ok());

      absl::StatusOr<Kernel> kernel = samples::rope_kernel(block, d);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      CompileOptions options;
      options.num_warps = block.warps;
      absl::StatusOr<Function> fn = dev->compile(*kernel, options);
      ASSERT_TRUE(fn.ok()) << fn.status();
      const LaunchConfig lc = {.grid = (rows + block.rows - 1) / block.rows, .num_warps = block.warps};
      absl::Status launched = fn->launch(lc, *bx, *by, *bc, *bs, rows, heads);
      ASSERT_TRUE(launched.ok()) << launched;
      ASSERT_TRUE(dev->synchronize().ok());

      std::vector<float> got(padded);
      std::vector<uint16_t> bits(padded * elem / 2);
      ASSERT_TRUE(dev->copy_to_host(bits.data(), *by, padded * elem).ok());
      for (size_t i = 0; i < padded; ++i) {
        got[i] = d == f32 ? std::bit_cast<float>(uint32_t{bits[2 * i]} | uint32_t{bits[2 * i + 1]} << 16)
                          : bf16_to_float(bits[i]);
      }
      // f32 arithmetic, then one rounding to the dtype: a half step of bf16.
      const double tolerance = d == f32 ? 1e-6 : std::ldexp(1.0, -8);
      for (int r = 0; r < rows; ++r) {
        const int64_t t = r / heads;
        const std::vector<double> want =
            samples::rope_reference(&x.f[size_t{1} * r * dim], &cos.f[t * dim], &sin.f[t * dim], dim);
        for (int j = 0; j < dim; ++j) {
          ASSERT_NEAR(got[size_t{1} * r * dim + j], want[j], tolerance * (1 + std::fabs(want[j])))
              << "row " << r << ", element " << j;
        }
      }
      for (size_t i = n; i < padded; ++i) ASSERT_TRUE(std::isnan(got[i])) << "element " << i << " past the rows";
    }
  }
}

TEST(Rope, AnOddHeadDimensionIsAnError) {
  absl::StatusOr<Kernel> kernel = samples::rope_kernel({.rows = 4, .cols = 63, .warps = 4}, bf16);
  EXPECT_EQ(kernel.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(kernel.status().message(), ::testing::HasSubstr("the head dimension must be even, not 63"));
}

}  // namespace
}  // namespace tessel
