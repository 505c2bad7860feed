// bf16 and f16 conversions (base/float16.h): every 16-bit pattern round
// trips through f32, and from f32 the nearest value is taken, ties to even,
// at the edges of each format too.
#include "base/float16.h"

#include <cmath>
#include <cstdint>
#include <random>

#include "gtest/gtest.h"

namespace tessel {
namespace {

TEST(Float16, EveryPatternRoundTrips) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const float h = f16_to_float(bits), bf = bf16_to_float(bits);
    if (std::isnan(h)) {
      EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(h)))) << b;
    } else {
      EXPECT_EQ(float_to_f16(h), bits) << b;
    }
    if (std::isnan(bf)) {
      EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(bf)))) << b;
    } else {
      EXPECT_EQ(float_to_bf16(bf), bits) << b;
    }
  }
}

// `to(x)` is a nearest representable value, ties to the even pattern.
template <class To, class From>
void expect_nearest(float x, To to, From from) {
  const uint16_t r = to(x);
  const double got = from(r);
  if (std::isinf(got)) return;  // checked at the edges below
  for (int step : {-1, 1}) {
    const uint16_t n = static_cast<uint16_t>(r + step);
    const double other = from(n);
    if (std::isnan(other) || std::signbit(other) != std::signbit(got)) continue;
    const double mine = std::fabs(got - x), theirs = std::fabs(other - x);
    EXPECT_LE(mine, theirs) << x;
    if (mine == theirs) {
      EXPECT_EQ(r & 1, 0) << x << " is a tie";
    }
  }
}

TEST(Float16, FromFloatTakesTheNearestTiesToEven) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    const float x = std::bit_cast<float>(bits(rng));
    if (std::isnan(x) || std::fabs(x) > 65504.0f) continue;
    expect_nearest(x, float_to_f16, f16_to_float);
    expect_nearest(x, float_to_bf16, bf16_to_float);
  }
}

TEST(Float16, TheEdgesOfEachFormat) {
  EXPECT_EQ(float_to_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_f16(65519.99f), 0x7BFF);
  EXPECT_EQ(float_to_f16(65520.0f), 0x7C00);  // the tie rounds to even: infinity
  EXPECT_EQ(float_to_f16(-1e9f), 0xFC00);
  EXPECT_EQ(float_to_f16(0x1p-24f), 0x0001);   // the smallest subnormal
  EXPECT_EQ(float_to_f16(0x1p-25f), 0x0000);   // half of it: the tie goes to zero
  EXPECT_EQ(float_to_f16(0x1.8p-25f), 0x0001);
  EXPECT_EQ(float_to_f16(0x1.ffcp-15f), 0x0400);  // rounds up into the smallest normal
  EXPECT_EQ(float_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(f16_to_float(0x3555), 0x1.554p-2f);
  EXPECT_EQ(float_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16(0x1.01p0f), 0x3F80);   // the tie goes to even
  EXPECT_EQ(float_to_bf16(0x1.03p0f), 0x3F82);
  EXPECT_EQ(float_to_bf16(3.4e38f), 0x7F80);     // past bf16's largest: infinity
  EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(NAN))));
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(-NAN))));
  EXPECT_TRUE(std::signbit(bf16_to_float(float_to_bf16(-NAN))));
}

}  // namespace
}  // namespace tessel
