// The two 8-bit float formats of Hopper's tensor cores, and their exact
// conversions to and from f32 on the host, which codegen mirrors in IR
// (codegen/scalar_ops.cc) so that every target rounds the same way:
//
//   f8e4m3 (OCP E4M3FN): 1 sign, 4 exponent (bias 7), 3 mantissa bits; no
//     infinities, NaN = S.1111.111; largest finite 448.
//   f8e5m2 (OCP E5M2): 1 sign, 5 exponent (bias 15), 2 mantissa bits; IEEE
//     infinities and NaNs; largest finite 57344.
//
// From f32 both round to nearest even and saturate: a value beyond the
// largest finite one (infinities included) becomes the largest finite one
// of its sign, as PTX's cvt .satfinite does; NaN stays NaN (the format's
// quiet NaN with its sign).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace tessel {

enum class Float8 : uint8_t { kE4M3, kE5M2 };

struct Float8Format {
  int exponent_bits, mantissa_bits, bias;
  uint8_t max_finite;  // bits of the largest finite value
  uint8_t nan;         // bits of the quiet NaN (positive)
  bool infinities;
};

constexpr Float8Format float8_format(Float8 f) {
  return f == Float8::kE4M3 ? Float8Format{4, 3, 7, 0x7E, 0x7F, false} : Float8Format{5, 2, 15, 0x7B, 0x7E, true};
}

// The value of `bits` as an f32 (exact).
inline float float8_to_float(uint8_t bits, Float8 f) {
  const Float8Format fmt = float8_format(f);
  const int e = bits >> fmt.mantissa_bits & ((1 << fmt.exponent_bits) - 1);
  const int m = bits & ((1 << fmt.mantissa_bits) - 1);
  const int top = (1 << fmt.exponent_bits) - 1;
  float mag;
  if (!fmt.infinities && e == top && m == (1 << fmt.mantissa_bits) - 1) {
    mag = NAN;
  } else if (fmt.infinities && e == top) {
    mag = m == 0 ? INFINITY : NAN;
  } else if (e == 0) {
    mag = std::ldexp(static_cast<float>(m), 1 - fmt.bias - fmt.mantissa_bits);
  } else {
    mag = std::ldexp(1.0f + static_cast<float>(m) / static_cast<float>(1 << fmt.mantissa_bits), e - fmt.bias);
  }
  return bits & 0x80 ? -mag : mag;
}

// `x` rounded to nearest even, saturating (see above).
inline uint8_t float_to_float8(float x, Float8 f) {
  const Float8Format fmt = float8_format(f);
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint8_t sign = static_cast<uint8_t>(bits >> 24 & 0x80);
  if (std::isnan(x)) return sign | fmt.nan;
  const uint32_t abs_bits = bits & 0x7FFFFFFF;
  const float a = std::bit_cast<float>(abs_bits);
  if (a >= float8_to_float(fmt.max_finite, f)) return sign | fmt.max_finite;
  const int min_exponent = 1 - fmt.bias;  // of the smallest normal value
  if (a < std::ldexp(1.0f, min_exponent)) {
    // Subnormal: adding 2^(23 + min_exponent - mantissa_bits) rounds a to
    // a multiple of the subnormal step, which the sum's low bits then count.
    const float big = std::ldexp(1.0f, 23 + min_exponent - fmt.mantissa_bits);
    return sign | static_cast<uint8_t>(std::bit_cast<uint32_t>(a + big) - std::bit_cast<uint32_t>(big));
  }
  const int shift = 23 - fmt.mantissa_bits;
  const uint32_t rounded = (abs_bits + (1u << (shift - 1)) - 1 + (abs_bits >> shift & 1)) >> shift;
  return sign | static_cast<uint8_t>(rounded - (static_cast<uint32_t>(127 - fmt.bias) << fmt.mantissa_bits));
}

}  // namespace tessel
