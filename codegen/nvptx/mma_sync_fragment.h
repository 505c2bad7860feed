// Internal: the arithmetic of the warp-level tensor-core instructions of
// sm_80 on (mma.sync m16n8k16 for bf16 and f16, m16n8k8 for tf32, m16n8k32
// for i8), without LLVM, for codegen and its tests alike.
//
// One instruction multiplies a 16 x 8 block of the accumulator by 32 bytes
// of k. With g = lane / 4 and t = lane % 4, a lane holds accumulator values
// (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1) of the block; of A
// (16 rows by 32 bytes of k) the 4 bytes at byte 4t of rows g and g + 8,
// then at byte 16 + 4t of the same rows; of B (32 bytes of k by 8 columns)
// the 4 bytes at byte 4t, then 16 + 4t, of column g. Each of those is a
// row of an 8 x 16-byte matrix as ldmatrix hands it out: lane l gets the 4
// bytes at 4 (l % 4) of row l / 4, every matrix's rows addressed by lanes
// 8q .. 8q + 7 for matrix q (.trans: of the matrix as stored transposed, for
// 16-bit operands stored along m or n).
#pragma once

#include <cstdint>
#include <limits>
#include <utility>

#include "base/tma_rules.h"
#include "dsl/types.h"

namespace tessel::codegen::nvptx {

inline constexpr int64_t kMmaRows = 16;  // accumulator rows of one instruction
inline constexpr int64_t kMmaCols = 8;   // and columns
inline constexpr int64_t kMmaKBytes = 32;
inline constexpr int64_t kMmaSlots = 4;  // accumulator values per lane and block

// How a program's warps share an m x n accumulator: `rows` x `cols` warps,
// each a (m / rows) x (n / cols) block of it.
struct MmaWarps {
  int rows = 0, cols = 0;
};

// The row-major index in an m x n accumulator of what `thread`'s `slot`
// holds: warp w takes block (w / cols, w % cols); slot s is value s % 4 of
// its 16 x 8 block i = s / 4, row i / (n / cols / 8), column
// i % (n / cols / 8), within the warp's block.
constexpr int64_t mma_sync_accumulator_element(int64_t m, int64_t n, MmaWarps warps, int64_t thread, int64_t slot) {
  const int64_t warp = thread / 32, lane = thread % 32;
  const int64_t warp_m = m / warps.rows, warp_n = n / warps.cols, blocks_n = warp_n / kMmaCols;
  const int64_t block = slot / kMmaSlots, value = slot % kMmaSlots;
  const int64_t row = warp / warps.cols * warp_m + block / blocks_n * kMmaRows + lane / 4 + 8 * (value / 2);
  const int64_t col = warp % warps.cols * warp_n + block % blocks_n * kMmaCols + 2 * (lane % 4) + value % 2;
  return row * n + col;
}

// The matrix of an ldmatrix .x4 whose row lane `lane` addresses, and that row.
constexpr int64_t ldmatrix_matrix(int64_t lane) { return lane / 8 % 4; }
constexpr int64_t ldmatrix_row(int64_t lane) { return lane % 8; }

// Where matrix q of an ldmatrix .x4 starts in a block of an operand, along
// m or n and in bytes along k. For A (16 rows, 32 bytes of k): rows 8 (q %
// 2) on, bytes 16 (q / 2) on, so that the four registers are a0 .. a3. For
// B, two 8-column blocks at once: columns 8 (q / 2) on, bytes 16 (q % 2)
// on, so that the registers are b0 and b1 of the first block, then of the
// second. A K-major operand's matrix rows run along m or n (lane row r at
// mn + r), an MN-major one's along k (at k + r).
constexpr int64_t a_matrix_mn(int64_t q) { return 8 * (q % 2); }
constexpr int64_t a_matrix_byte(int64_t q) { return 16 * (q / 2); }
constexpr int64_t b_matrix_mn(int64_t q) { return 8 * (q / 2); }
constexpr int64_t b_matrix_byte(int64_t q) { return 16 * (q % 2); }

// The most accumulator registers a thread keeps: a 64 x 64 block of a
// warp, which leaves half of a 255-register budget for its operands and
// everything else.
inline constexpr int64_t kMmaMaxSlots = 128;

// The grid of `threads` / 32 warps for an m x n accumulator: one column of
// warps, each holding whole rows (which row reductions and a product
// taking its a from registers like), where that loads at most a quarter
// more operand rows per k step (m / rows of a and n / cols of b a warp)
// than the grid that loads the fewest, else that grid. Only one column
// with `rows_only`. {0, 0} where none fits.
constexpr MmaWarps mma_sync_warps(int64_t m, int64_t n, int threads, bool rows_only) {
  MmaWarps best, whole_rows;
  if (threads % 32 != 0) return best;
  const int warps = threads / 32;
  int64_t best_cost = std::numeric_limits<int64_t>::max(), rows_cost = 0;
  for (int cols = 1; cols <= (rows_only ? 1 : warps); ++cols) {
    const int rows = warps / cols;
    if (warps % cols != 0 || m % (kMmaRows * rows) != 0 || n % (kMmaCols * cols) != 0) continue;
    if (m / rows * (n / cols) / 32 > kMmaMaxSlots) continue;
    const int64_t cost = m / rows + n / cols;
    if (cols == 1) whole_rows = {rows, cols}, rows_cost = cost;
    if (cost < best_cost) best = {rows, cols}, best_cost = cost;
  }
  return whole_rows.rows > 0 && 4 * rows_cost <= 5 * best_cost ? whole_rows : best;
}

// An operand tile as stored in shared memory: `rows` x `cols` elements of
// `bytes`, its rows along m or n (K-major) or along k, in panels and
// swizzled as a TMA box (tma::box_tile_offset).
struct StoredOperand {
  int64_t rows = 0, cols = 0, bytes = 0;
  bool k_major = true;
  Swizzle swizzle = Swizzle::kNone;
};

// How the lanes of an ldmatrix address an operand's rows: a's four
// matrices (.x4), b's two blocks of 8 columns (.x4), or a last block of b
// alone (.x2, whose lanes 16 to 31 address nothing it reads).
enum class LdmatrixLanes { kA, kB, kLastB };

// The row and column of the tile `lane` addresses for the ldmatrix of the
// block at `mn` (along m or n, from `origin`, where its warp's block
// starts) and element `k`.
constexpr std::pair<int64_t, int64_t> ldmatrix_lane_row_col(const StoredOperand& op, LdmatrixLanes lanes, int64_t mn,
                                                            int64_t k, int64_t origin, int64_t lane) {
  const int64_t q = ldmatrix_matrix(lane), r = ldmatrix_row(lane);
  const bool a = lanes == LdmatrixLanes::kA;
  const int64_t at_mn = origin + mn + (a ? a_matrix_mn(q) : lanes == LdmatrixLanes::kB ? b_matrix_mn(q) : 0);
  const int64_t at_k = k + (a ? a_matrix_byte(q) : b_matrix_byte(q)) / op.bytes;
  return op.k_major ? std::pair{at_mn + r, at_k} : std::pair{at_k + r, at_mn};
}
// The same as a byte offset in the tile.
inline int64_t ldmatrix_lane_offset(const StoredOperand& op, LdmatrixLanes lanes, int64_t mn, int64_t k, int64_t origin,
                                    int64_t lane) {
  const auto [row, col] = ldmatrix_lane_row_col(op, lanes, mn, k, origin, lane);
  return tma::box_tile_offset(row * op.cols + col, op.rows * op.cols, op.cols, op.bytes, op.swizzle);
}

}  // namespace tessel::codegen::nvptx
