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

namespace tessel {
namespace {

TEST(Builder, ALiteralFillsATileVar) {
  KernelBuilder k("fill");
  Value x = k.arg(ptr(f32), "x");
  Var acc = k.var(k.zeros({16}, f32));
  k.if_(k.program_id() == 0, [&] { acc = 2.5; });
  store(x + k.arange(0, 16), acc);
  absl::StatusOr<Kernel> kernel = k.build();
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->str(), ::testing::HasSubstr("splat %"));
  EXPECT_THAT(kernel->str(), ::testing::HasSubstr("constant 2.5 : f32"));
}

TEST(Builder, TensorMapsOfRankFiveMakeRankFiveTiles) {
  KernelBuilder k("rank5");
  Value m = k.tensor_map(f32, {2, 2, 2, 2, 4}, "m");
  Value t = tma_load(m, {0, 0, 0, 0, 0});
  absl::StatusOr<Kernel> kernel = k.build();
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(t.type().rank(), 5);
}

}  // namespace
}  // namespace tessel
