// The reference the 8-bit float tests hold every conversion to: the nearest
// of all 256 values.
#pragma once

#include <cmath>
#include <cstdint>

#include "base/float8.h"

namespace tessel {

// The finite value of format `f` nearest to `x` (ties to the even
// mantissa; a zero keeps x's sign); beyond the largest finite value, that
// value; NaN to the format's NaN.
inline uint8_t nearest_float8(double x, Float8 f) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x)) return sign | float8_format(f).nan;
  double best = INFINITY;
  int pick = 0;
  for (int b = 0; b < 256; ++b) {
    const double v = float8_to_float(static_cast<uint8_t>(b), f);
    if (!std::isfinite(v) || (v == 0 && (b & 0x80) != sign)) continue;
    const double d = std::fabs(v - x);
    if (d < best || (d == best && (b & 1) == 0)) {
      best = d;
      pick = b;
    }
  }
  return static_cast<uint8_t>(pick);
}

}  // namespace tessel
