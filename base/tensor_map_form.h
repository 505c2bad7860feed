// The host form of a tensor map: the 128 bytes tessel's own encoder writes
// (runtime/tensor_map.cc) and everything that reads a map without NVIDIA's
// TMA reads (the host copy engine, software TMA in codegen). Version 1,
// little-endian; per-dimension arrays are outermost first and slots past the
// rank are zero.
//   offset size  field
//        0    4  magic 0x4D545354 (the bytes "TSTM")
//        4    2  version (1)
//        6    1  dtype (ScalarKind value)
//        7    1  rank (1..5)
//        8    1  swizzle (Swizzle value; host copies ignore it)
//        9    1  interleave (TensorMapInterleave value)
//       10    1  out-of-bounds fill (TensorMapOobFill value)
//       11    1  element size in bytes
//       12    4  reserved, zero
//       16    8  base address
//       24   40  dims[5], u64
//       64   32  byte strides[4] of dims 0..rank-2, u64
//       96   10  box[5], u16
//      106    5  element strides[5], u8
//      111   17  reserved, zero
#pragma once

#include <cstddef>
#include <cstdint>

#include "dsl/types.h"

namespace tessel {

inline constexpr int kTensorMapMaxRank = 5;
inline constexpr size_t kTensorMapBytes = 128;

inline constexpr uint32_t kTensorMapHostMagic = 0x4D545354;
inline constexpr uint16_t kTensorMapHostVersion = 1;

// Byte offsets of the host form's fields.
namespace host_form {
inline constexpr size_t kMagic = 0;
inline constexpr size_t kVersion = 4;
inline constexpr size_t kDType = 6;
inline constexpr size_t kRank = 7;
inline constexpr size_t kSwizzle = 8;
inline constexpr size_t kInterleave = 9;
inline constexpr size_t kFill = 10;
inline constexpr size_t kElemSize = 11;
inline constexpr size_t kAddress = 16;
inline constexpr size_t kDims = 24;          // u64 each
inline constexpr size_t kStrides = 64;       // u64 each
inline constexpr size_t kBox = 96;           // u16 each
inline constexpr size_t kElementStrides = 106;  // u8 each
static_assert(kElementStrides + kTensorMapMaxRank <= kTensorMapBytes);
}  // namespace host_form

// What a NaN-filled load writes out of bounds: the dtype's quiet NaN, as
// NVIDIA's TMA does; 0 for types without NaN.
inline constexpr uint64_t quiet_nan_bits(ScalarKind kind) {
  switch (kind) {
    case ScalarKind::kF16:
      return 0x7E00;
    case ScalarKind::kBF16:
      return 0x7FC0;
    case ScalarKind::kF32:
      return 0x7FC00000;
    case ScalarKind::kF64:
      return 0x7FF8000000000000;
    case ScalarKind::kF8E4M3:
      return 0x7F;
    case ScalarKind::kF8E5M2:
      return 0x7E;
    default:
      return 0;
  }
}

}  // namespace tessel
