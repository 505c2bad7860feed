#include "dsl/builder.h"

#include "dsl/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;

TEST(Builder, BuildsThePersistentTileCopy) {
  KernelBuilder k("tile_copy");
  Value src = k.tensor_map(bf16, {64, 128}, "src");
  Value dst = k.tensor_map(bf16, {64, 128}, "dst");
  Value m = k.arg(i32, "m"), n = k.arg(i32, "n");
  Value tiles_n = cdiv(n, 128);
  k.for_each_tile(cdiv(m, 64) * tiles_n, [&](Value t) {
    Value row = t / tiles_n * 64, col = t % tiles_n * 128;
    tma_store(dst, {row, col}, tma_load(src, {row, col}));
  });
  absl::StatusOr<Kernel> kernel = k.build();
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->str(), HasSubstr("tma_load %0"));
  EXPECT_THAT(kernel->str(), HasSubstr(": tile<bf16>[64,128]"));
  EXPECT_EQ(kernel->params().size(), 4u);
}

TEST(Builder, ReportsTheUsersLineForMismatchedTypes) {
  KernelBuilder k("bad");
  Value x = k.arg(ptr(f32), "x");
  Value i = k.arange(0, 64);
  int line = __LINE__ + 1;
  Value y = load(x + i) + i;
  (void)y;
  absl::Status s = k.build().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("builder_test.cc:" + std::to_string(line)));
  EXPECT_THAT(s.message(), HasSubstr("operator+: mismatched types tile<f32>[64] and tile<i32>[64]"));
}

}  // namespace
}  // namespace tessel
