// bf16 bits <-> float for the test suites' operands and references:
// rounding to nearest even, NaN kept quiet.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace tessel {

inline uint16_t to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}
inline float from_bf16(uint16_t b) {
  uint32_t bits = uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace tessel
