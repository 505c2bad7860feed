// The 8-bit float conversions of base/float8.h against a reference that
// picks the nearest of all 256 values (ties to the even one) and saturates.
#include "base/float8.h"

#include <bit>
#include <cmath>
#include <random>

#include "gtest/gtest.h"
#include "tests/float8_reference.h"

namespace tessel {
namespace {

class Float8Test : public ::testing::TestWithParam<Float8> {};

TEST_P(Float8Test, EveryValueRoundTrips) {
  const Float8 f = GetParam();
  for (int b = 0; b < 256; ++b) {
    const float v = float8_to_float(static_cast<uint8_t>(b), f);
    if (std::isnan(v) || std::isinf(v)) continue;  // infinities saturate (below)
    EXPECT_EQ(float_to_float8(v, f), b) << b;
  }
}

TEST_P(Float8Test, FloatsRoundToTheNearestValueTiesToEven) {
  const Float8 f = GetParam();
  std::mt19937 gen(7);
  for (int i = 0; i < 100000; ++i) {
    float x = std::bit_cast<float>(static_cast<uint32_t>(gen()));
    if (i % 2 == 0) x = std::ldexp(static_cast<float>(static_cast<int>(gen() % 4001) - 2000) / 64.0f, static_cast<int>(gen() % 44) - 28);
    if (std::isinf(x) || std::fabs(x) > 1e6f) continue;
    ASSERT_EQ(float_to_float8(x, f), nearest_float8(x, f)) << std::hexfloat << x;
  }
  // Halfway between neighbours: the even one.
  for (int b = 0; b < 255; ++b) {
    const float lo = float8_to_float(static_cast<uint8_t>(b), f), hi = float8_to_float(static_cast<uint8_t>(b + 1), f);
    if (!std::isfinite(lo) || !std::isfinite(hi) || (b & 0x7F) == 0x7F) continue;
    const float mid = (lo + hi) / 2;
    EXPECT_EQ(float_to_float8(mid, f), nearest_float8(mid, f)) << std::hexfloat << mid;
  }
}

TEST_P(Float8Test, OutOfRangeSaturatesAndNanStays) {
  const Float8 f = GetParam();
  const uint8_t max = float8_format(f).max_finite;
  EXPECT_EQ(float_to_float8(INFINITY, f), max);
  EXPECT_EQ(float_to_float8(-INFINITY, f), 0x80 | max);
  EXPECT_EQ(float_to_float8(1e30f, f), max);
  EXPECT_TRUE(std::isnan(float8_to_float(float_to_float8(NAN, f), f)));
  EXPECT_EQ(float8_to_float(max, f), f == Float8::kE4M3 ? 448.0f : 57344.0f);
  EXPECT_EQ(float8_to_float(0x01, f), f == Float8::kE4M3 ? std::ldexp(1.0f, -9) : std::ldexp(1.0f, -16));
}

INSTANTIATE_TEST_SUITE_P(Formats, Float8Test, ::testing::Values(Float8::kE4M3, Float8::kE5M2),
                         [](const auto& info) { return info.param == Float8::kE4M3 ? "E4M3" : "E5M2"; });

}  // namespace
}  // namespace tessel
