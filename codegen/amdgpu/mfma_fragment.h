// Internal: the arithmetic of the gfx942 MFMA fragments tessel uses
// (v_mfma_f32_32x32x8_bf16 / _f16, v_mfma_i32_32x32x16_i8, wave64), without
// LLVM, for codegen and its tests alike.
//
// Operands: lane l of a wavefront holds row l % 32 of A (column l % 32 of
// B) at k = 4 (l / 32) .. 4 (l / 32) + 3 of the instruction's 8 (i8: k = 8
// (l / 32) .. 8 (l / 32) + 7 of 16). The accumulator: 16 f32 (i32) per lane, value i at row 8 (i / 4) + 4 (l / 32) + i
// % 4, column l % 32 of the 32 x 32 block.
#pragma once

#include <cstdint>

namespace tessel::codegen::amdgpu {

inline constexpr int64_t kMfmaBlock = 32;  // rows and columns of one instruction's block
inline constexpr int64_t kMfmaK = 8;       // k per 16-bit instruction (16 for i8)
inline constexpr int64_t kMfmaSlots = 16;  // accumulator values per lane and block

// Row within the 32 x 32 block of accumulator value `i` of `lane`.
constexpr int64_t mfma_row(int64_t lane, int64_t i) { return 8 * (i / 4) + 4 * (lane / 32) + i % 4; }

// The row-major index in an m x n accumulator of what `thread`'s `slot`
// holds when `waves` wavefronts share it: block g = (slot / 16) * waves +
// thread / 64 of the (m / 32) x (n / 32) blocks in row-major order, value
// slot % 16 of the block.
constexpr int64_t mfma_accumulator_element(int64_t n, int waves, int64_t thread, int64_t slot) {
  const int64_t wave = thread / 64, lane = thread % 64;
  const int64_t g = slot / kMfmaSlots * waves + wave;
  const int64_t row = g / (n / kMfmaBlock) * kMfmaBlock + mfma_row(lane, slot % kMfmaSlots);
  const int64_t col = g % (n / kMfmaBlock) * kMfmaBlock + lane % 32;
  return row * n + col;
}

}  // namespace tessel::codegen::amdgpu
