#include "dsl/builder.h"

#include <functional>
#include <string>
#include <vector>

#include "dsl/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/device.h"

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
  Value y = load(x + i) + (i < 3);
  (void)y;
  absl::Status s = k.build().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("builder_test.cc:" + std::to_string(line)));
  EXPECT_THAT(s.message(), HasSubstr("operator+: mismatched types tile<f32>[64] and tile<i1>[64]; cast one side"));
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

namespace tessel {
namespace {

// The dtype `a op b` takes under the promotion rules, or the error.
std::string promoted_type(const std::function<Value(KernelBuilder&)>& f) {
  KernelBuilder k("promote");
  Value v = f(k);
  absl::StatusOr<Kernel> kernel = k.build();
  return kernel.ok() ? v.type().str() : std::string(kernel.status().message());
}

TEST(Promotion, NumbersMeetInTheTypeThatHoldsBoth) {
  auto tile = [](KernelBuilder& k, DType d) { return cast(k.arange(0, 64), d); };
  // An integer meets a float in the float.
  EXPECT_EQ(promoted_type([&](KernelBuilder& k) { return tile(k, i32) + tile(k, f32); }), "tile<f32>[64]");
  EXPECT_EQ(promoted_type([&](KernelBuilder& k) { return tile(k, i64) * tile(k, bf16); }), "tile<bf16>[64]");
  EXPECT_EQ(promoted_type([&](KernelBuilder& k) { return sum(tile(k, f32), 0) / k.arg(i32, "cols"); }), "f32");
  // Floats: the wider; two 16-bit kinds in f32.
  EXPECT_EQ(promoted_type([&](KernelBuilder& k) { return tile(k, f16) + tile(k, f32); }), "tile<f32>[64]");
  EXPECT_EQ(promoted_type([&](KernelBuilder& k) { return tile(k, bf16) + tile(k, f16); }), "tile<f32>[64]");
  EXPECT_EQ(promoted_type([&](KernelBuilder& k) { return k.arg(f32, "s") * tile(k, bf16); }), "tile<f32>[64]");
  // Integers: the wider of one signedness; a wider signed one holds an unsigned one.
  EXPECT_EQ(promoted_type([&](KernelBuilder& k) { return tile(k, i8) + tile(k, i32); }), "tile<i32>[64]");
  EXPECT_EQ(promoted_type([&](KernelBuilder& k) { return tile(k, u8) < tile(k, i32); }), "tile<i1>[64]");
  EXPECT_EQ(promoted_type([&](KernelBuilder& k) { return tile(k, u16) + tile(k, i32); }), "tile<i32>[64]");
  EXPECT_EQ(promoted_type([&](KernelBuilder& k) { return tile(k, u32) + tile(k, u64); }), "tile<u64>[64]");
  // Literals take the other side's type; a float literal next to integers is f32.
  EXPECT_EQ(promoted_type([&](KernelBuilder& k) { return tile(k, bf16) * 3; }), "tile<bf16>[64]");
  EXPECT_EQ(promoted_type([&](KernelBuilder& k) { return tile(k, f16) * 0.5; }), "tile<f16>[64]");
  EXPECT_EQ(promoted_type([&](KernelBuilder& k) { return k.arange(0, 64) * 0.5; }), "tile<f32>[64]");
  EXPECT_EQ(promoted_type([&](KernelBuilder& k) { return select(k.arange(0, 64) < 3, 1, 2.5); }), "tile<f32>[64]");
  // What no dtype holds is an error naming both sides.
  EXPECT_THAT(promoted_type([&](KernelBuilder& k) { return tile(k, u32) + tile(k, i32); }),
              HasSubstr("operator+: mismatched types tile<u32>[64] and tile<i32>[64] (neither holds the other); cast "
                        "one side"));
  EXPECT_THAT(promoted_type([&](KernelBuilder& k) { return tile(k, u64) + tile(k, i64); }),
              HasSubstr("(neither holds the other)"));
  EXPECT_THAT(promoted_type([&](KernelBuilder& k) { return tile(k, f32) + (k.arange(0, 64) < 3); }),
              HasSubstr("mismatched types tile<f32>[64] and tile<i1>[64]; cast one side"));
}

// Promotion computes what the explicit casts would: the mean of a row
// divided by an i32 count.
TEST(Promotion, TheMeanOfARowDividesByAnIntegerCount) {
  KernelBuilder k("mean");
  Value x = k.arg(ptr(f32), "x"), out = k.arg(ptr(f32), "out"), cols = k.arg(i32, "cols");
  Value offs = k.arange(0, 64);
  Value v = load(x + offs, offs < cols, 0.0f);
  store(out, sum(v, 0) / cols);
  absl::StatusOr<Kernel> kernel = k.build();
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  Device device = *Device::open("host:1");
  absl::StatusOr<Function> fn = device.compile(*kernel);
  ASSERT_TRUE(fn.ok()) << fn.status();
  std::vector<float> in(64);
  for (int i = 0; i < 64; ++i) in[i] = static_cast<float>(i);
  float mean = 0;
  ASSERT_TRUE(fn->launch({.grid = 1}, in.data(), &mean, 50).ok());
  EXPECT_EQ(mean, 24.5f);  // (0 + ... + 49) / 50
}

TEST(Builder, DebugOpsPrintTheirTextEscaped) {
  KernelBuilder k("debug");
  Value t = k.arange(0, 4);
  device_print("t \"now\"", {t, 2.5});
  device_assert(t < 4, "in range");
  absl::StatusOr<Kernel> kernel = k.build();
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(kernel->str(), HasSubstr("print %0, %2 \"t \\\"now\\\"\"\n"));
  EXPECT_THAT(kernel->str(), HasSubstr("assert %5 \"in range\"\n"));
  EXPECT_EQ(kernel->ir().texts, (std::vector<std::string>{"t \"now\"", "in range"}));
}

}  // namespace
}  // namespace tessel
