// Paged decoding attention (samples/decode.h) on the host target against a
// double reference: grouped query heads (a group of one, of four, and of 20,
// which takes 32 rows), pages of 1, 3, 7, 16 and 64 keys, sequences empty,
// of one key, of lengths no block or page divides, and past the table
// (clamped); the keys in one split or several, combined by the last split
// to finish, run twice over the same workspace. And the errors.
#include "samples/decode.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tessel/tessel.h"
#include "tests/decode_cases.h"
#include "tests/seeded.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;

// The worst |got - want| / max(1, |want|).
double worst(const std::vector<float>& got, const std::vector<double>& want) {
  EXPECT_EQ(got.size(), want.size());
  double e = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    e = std::max(e, std::abs(got[i] - want[i]) / std::max(1.0, std::abs(want[i])));
    if (std::isnan(got[i])) return INFINITY;
  }
  return e;
}

TEST(Decode, MatchesADoubleReference) {
  TESSEL_SEEDED_GEN(gen);
  absl::StatusOr<Device> dev = Device::open("host:2");
  ASSERT_TRUE(dev.ok()) << dev.status();
  struct Case {
    samples::DecodeConfig c;
    decode_cases::Problem p;
    int splits;
  };
  for (const Case& t : {
           Case{{.d = 128, .group = 4, .page = 16, .bn = 64}, {.lens = {300, 1, 0, 129}, .max_pages = 20}, 0},
           Case{{.d = 128, .group = 4, .page = 16, .bn = 64}, {.lens = {300, 1, 0, 129}, .max_pages = 20}, 3},
           Case{{.d = 64, .group = 8, .page = 7, .bn = 32, .in = f16, .out = f32},
                {.lens = {100, 64, 5}, .kv_heads = 3, .max_pages = 16},
                4},
           Case{{.d = 64, .group = 1, .page = 64, .bn = 64}, {.lens = {65, 200}, .max_pages = 4}, 1},
           Case{{.d = 32, .group = 20, .page = 3, .bn = 16}, {.lens = {50, 1000}, .kv_heads = 1, .max_pages = 30}, 2},
           Case{{.d = 16, .group = 2, .page = 1, .bn = 16, .out = f32}, {.lens = {40, 17}, .max_pages = 40}, 5},
       }) {
    SCOPED_TRACE(::testing::Message() << "d " << t.c.d << ", group " << t.c.group << ", pages of " << t.c.page
                                      << ", bn " << t.c.bn << ", " << t.splits << " splits");
    const decode_cases::Inputs in = decode_cases::random_inputs(t.c, t.p, gen);
    const float scale = 1.0f / std::sqrt(static_cast<float>(t.c.d));
    absl::StatusOr<std::vector<float>> got = decode_cases::run(*dev, t.c, t.p, in, scale, t.splits, /*runs=*/2);
    ASSERT_TRUE(got.ok()) << got.status();
    // P is rounded to the input type before P V, and a bf16 O once more.
    EXPECT_LT(worst(*got, decode_cases::reference(t.c, t.p, in, scale)), t.c.out == bf16 ? 8e-3 : 2e-3);
  }
}

TEST(Decode, SplitsFillTheDeviceWithBlocksToSpare) {
  const samples::DecodeConfig c;  // bn 64
  // One sequence of 8192 keys on 8 KV heads, for 528 programs: 66 splits
  // would do, but each takes four of the 128 blocks at least.
  EXPECT_EQ(samples::decode_splits(c, 1, 8, 8192, 528), 32);
  EXPECT_EQ(samples::decode_splits(c, 1, 1, 1 << 20, 528), samples::kMaxDecodeSplits);
  // 64 sequences of 8 KV heads fill it already.
  EXPECT_EQ(samples::decode_splits(c, 64, 8, 8192, 528), 2);
  EXPECT_EQ(samples::decode_splits(c, 128, 8, 8192, 528), 1);
  // Short sequences: at least four blocks a split.
  EXPECT_EQ(samples::decode_splits(c, 1, 8, 1024, 528), 4);
  EXPECT_EQ(samples::decode_splits(c, 1, 8, 100, 528), 1);
}

TEST(Decode, BadConfigsShapesAndBuffersAreNamed) {
  auto config_error = [](samples::DecodeConfig c) { return std::string(samples::decode_kernel(c).status().message()); };
  EXPECT_THAT(config_error({.d = 100}), HasSubstr("head dimension d must be a multiple of 16 to 256, got 100"));
  EXPECT_THAT(config_error({.group = 0}), HasSubstr("group (query heads per KV head) must be 1 to 64, got 0"));
  EXPECT_THAT(config_error({.page = 0}), HasSubstr("page (keys per page) must be positive, got 0"));
  EXPECT_THAT(config_error({.bn = 40}), HasSubstr("bn (keys per step) must be a multiple of 16 to 256, got 40"));
  EXPECT_THAT(config_error({.in = f32}), HasSubstr("q and the caches must be bf16 or f16, got f32"));
  EXPECT_THAT(config_error({.out = i8}), HasSubstr("o must be bf16, f16 or f32, got i8"));
  EXPECT_THAT(config_error({.stages = 9}), HasSubstr("stages must be 0 (the default) to 8, got 9"));
  EXPECT_THAT(config_error({.warps = 0}), HasSubstr("warps must be 1 to 16, got 0"));

  absl::StatusOr<Device> dev = Device::open("host:2");
  ASSERT_TRUE(dev.ok()) << dev.status();
  const samples::DecodeConfig c = {.d = 16, .group = 2, .page = 4, .bn = 16};
  EXPECT_THAT(samples::Decode::compile(*dev, c, 0, 2, 4).status().message(),
              HasSubstr("batch, kv_heads and max_pages must be positive, got 0, 2 and 4"));
  EXPECT_THAT(samples::Decode::compile(*dev, c, 1, 2, 4, 65).status().message(),
              HasSubstr("splits must be 1 to 64 (or 0 to choose), got 65"));
  EXPECT_THAT(samples::Decode::compile(*dev, c, 1 << 20, 1 << 10, 4).status().message(),
              HasSubstr("past 32-bit indices"));

  absl::StatusOr<samples::Decode> decode = samples::Decode::compile(*dev, c, 2, 2, 4);
  ASSERT_TRUE(decode.ok()) << decode.status();
  auto buffer = [&](size_t bytes) { return *dev->allocate(bytes); };
  const size_t page = 4 * 2 * 16 * 2;  // keys, KV heads, d, bf16
  const Buffer q = buffer(2 * 4 * 16 * 2), table = buffer(2 * 4 * 4), lens = buffer(2 * 4), cache = buffer(3 * page);
  auto run_error = [&](const Buffer& q, const Buffer& k, const Buffer& v, const Buffer& o) {
    return std::string(decode->run(q, k, v, table, lens, o, 0.25f).message());
  };
  EXPECT_THAT(run_error(buffer(8), cache, cache, q), HasSubstr("q holds 8 bytes, fewer than the 256 it needs"));
  EXPECT_THAT(run_error(q, cache, cache, buffer(100)), HasSubstr("o holds 100 bytes, fewer than the 256 it needs"));
  EXPECT_THAT(run_error(q, buffer(page / 2), buffer(page / 2), q),
              HasSubstr("k_cache (one page) holds 128 bytes, fewer than the 256 it needs"));
  EXPECT_THAT(run_error(q, cache, buffer(2 * page), q),
              HasSubstr("k_cache and v_cache must hold the same whole pages of 256 bytes, got 768 and 512"));
  EXPECT_THAT(run_error(q, buffer(page + 2), buffer(page + 2), q), HasSubstr("whole pages of 256 bytes"));
  EXPECT_THAT(std::string(decode->run(q, cache, cache, buffer(4), lens, q, 0.25f).message()),
              HasSubstr("block_table holds 4 bytes, fewer than the 32 it needs"));
  EXPECT_THAT(std::string(decode->run(q, cache, cache, table, buffer(4), q, 0.25f).message()),
              HasSubstr("lens holds 4 bytes, fewer than the 8 it needs"));
}

}  // namespace
}  // namespace tessel
