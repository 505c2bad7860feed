// Internal: the arithmetic of wgmma's accumulator fragment and shared-memory
// descriptors, without LLVM, for codegen and its tests alike.
#pragma once

#include <cstdint>

#include "dsl/types.h"

namespace tessel::codegen::nvptx {

inline constexpr int kWarpgroupThreads = 128;

// The row-major index in an m x n accumulator of what `thread`'s `slot` holds
// when `warpgroups` warpgroups share it, in `col_groups` groups of columns
// (n / col_groups = w columns each; 1: every warpgroup all n columns of its
// rows): warpgroup g takes the m64nWk16 fragment of column group
// c = g % col_groups and 64-row block j * r + g / col_groups, with
// r = warpgroups / col_groups, j = slot / (w/2), i = slot % (w/2),
// v = thread / 32 % 4, l = thread % 32: row 16v + l/4 + 8 * (i/2 % 2) of the
// block, column c * w + 8 * (i/4) + 2 * (l % 4) + i % 2.
constexpr int64_t wgmma_accumulator_element(int64_t n, int warpgroups, int64_t thread, int64_t slot,
                                            int col_groups = 1) {
  const int64_t w = n / col_groups, rows = warpgroups / col_groups;
  const int64_t j = slot / (w / 2), i = slot % (w / 2);
  const int64_t group = thread / kWarpgroupThreads, warp = thread / 32 % 4, lane = thread % 32;
  const int64_t row = 64 * (j * rows + group / col_groups) + 16 * warp + lane / 4 + 8 * (i / 2 % 2);
  const int64_t col = group % col_groups * w + 8 * (i / 4) + 2 * (lane % 4) + i % 2;
  return row * n + col;
}

// The 64-bit shared-memory matrix descriptor of a swizzled operand starting
// at shared-window address `addr`: start address >> 4 in bits 0-13, leading
// byte offset >> 4 in 16-29, stride byte offset >> 4 in 32-45, swizzle mode
// (1: 128B, 2: 64B, 3: 32B) in 62-63. The stride byte offset steps 8 rows
// of the swizzle's width (8 rows along m or n of a K-major operand, 8 along
// k of an MN-major one); the leading byte offset steps from one panel to the
// next along m or n of an MN-major operand (`panel_bytes`), and is unused
// for K-major operands, whose k16 steps stay within a row.
constexpr uint64_t wgmma_descriptor(uint32_t addr, Swizzle swizzle, uint64_t panel_bytes = 16) {
  const uint64_t span = swizzle == Swizzle::k128B ? 128 : swizzle == Swizzle::k64B ? 64 : swizzle == Swizzle::k32B ? 32 : 0;
  const uint64_t mode = swizzle == Swizzle::k128B ? 1 : swizzle == Swizzle::k64B ? 2 : swizzle == Swizzle::k32B ? 3 : 0;
  return ((uint64_t{addr} & 0x3FFFF) >> 4) | ((panel_bytes >> 4 & 0x3FFF) << 16) | ((8 * span >> 4) << 32) |
         (mode << 62);
}

}  // namespace tessel::codegen::nvptx
