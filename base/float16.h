// bf16 and f16 to and from f32 on the host, for filling and reading the
// buffers of kernels that use them. From f32 both round to nearest even;
// NaN stays NaN (quiet, with its sign). bf16 keeps f32's range; f16
// overflows to infinity past 65504 (65520 and beyond, as rounding has it)
// and has subnormals down to 2^-24.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace tessel {

inline float bf16_to_float(uint16_t bits) { return std::bit_cast<float>(uint32_t{bits} << 16); }

inline uint16_t float_to_bf16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if (std::isnan(x)) return static_cast<uint16_t>(u >> 16 | 0x40);
  return static_cast<uint16_t>((u + 0x7FFF + (u >> 16 & 1)) >> 16);
}

inline float f16_to_float(uint16_t bits) {
  const uint32_t sign = uint32_t{bits} >> 15 << 31, exp = bits >> 10 & 0x1F, mant = bits & 0x3FF;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in f32
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign != 0 ? -v : v;
  }
  if (exp == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | mant << 13);
  return std::bit_cast<float>(sign | (exp + 112) << 23 | mant << 13);
}

inline uint16_t float_to_f16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint16_t sign = static_cast<uint16_t>(u >> 16 & 0x8000);
  if (std::isnan(x)) return static_cast<uint16_t>(sign | 0x7E00 | (u >> 13 & 0x3FF));
  const float a = std::fabs(x);
  if (a < 0x1p-14f) {
    // Subnormal (or zero): the nearest multiple of 2^-24, ties to even; 1024
    // of them is the smallest normal, which the same bits encode.
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(a * 0x1p24f)));
  }
  const uint32_t r = (u & 0x7FFFFFFF) + 0xFFF + (u >> 13 & 1);  // round at bit 13
  const uint32_t exp = (r >> 23) - 112;
  if (exp >= 0x1F) return static_cast<uint16_t>(sign | 0x7C00);  // infinity
  return static_cast<uint16_t>(sign | exp << 10 | (r >> 13 & 0x3FF));
}

}  // namespace tessel
