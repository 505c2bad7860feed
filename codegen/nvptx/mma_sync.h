// Internal: the warp-level tensor-core instructions of sm_80 on
// (mma.sync), for dot on chips without wgmma: bf16 and f16 tiles (a from
// shared memory or registers), tf32, i8, and on sm_89 fp8 (e4m3 and e5m2
// in any pairing), accumulating in f32 (i32) registers, operands either
// way round.
//
// The program's warps split the accumulator into a grid of warp blocks
// (mma_sync_fragment.h), each warp multiplying its block 16 x 8 at a time
// with operands loaded by ldmatrix: per 32 bytes of k, one .x4 per 16 rows
// of a and per 16 columns of b (.x2 for a last 8), .trans for 16-bit
// operands stored along m or n. Tiles may be plain or swizzled as TMA
// leaves them (tile_offset.h); the 16-byte rows ldmatrix reads stay whole
// under every swizzle.
#pragma once

#include <memory>
#include <vector>

#include "codegen/layout.h"
#include "codegen/nvptx/mma_sync_fragment.h"
#include "codegen/target_info.h"

namespace tessel::codegen::nvptx {

// The accumulator layout when `threads` threads can multiply operands like
// `a` and `b` with mma.sync, else nullptr; fp8 only with `fp8` (sm_89).
std::shared_ptr<const Layout> mma_sync_layout(const MmaShape& shape, const SharedMatrix& a, const SharedMatrix& b,
                                              int threads, bool fp8 = false);

// The layout a [m, k] takes in registers for a product with a in registers
// (16-bit floats): the accumulator's layout of m x k with every warp on its
// own rows, since the A fragment of a k16 step is the accumulator's of two
// 16 x 8 blocks side by side. nullptr where not available.
std::shared_ptr<const Layout> mma_sync_register_a_layout(const MmaShape& shape, const SharedMatrix& b, int threads,
                                                         bool fp8 = false);

// The accumulator layout of an m x n product on `warps`
// (mma_sync_accumulator_element).
std::shared_ptr<const Layout> mma_sync_accumulator_layout(int64_t m, int64_t n, MmaWarps warps);

// ldmatrix_lane_offset (mma_sync_fragment.h) in IR (i64 values).
llvm::Value* ldmatrix_lane_offset(llvm::IRBuilder<>& b, const StoredOperand& op, LdmatrixLanes lanes, int64_t mn,
                                  int64_t k, llvm::Value* origin, llvm::Value* lane);

// acc + a @ b: `acc` and the result are this thread's slots of
// mma_sync_layout()'s layout; `tid` is the thread's index (i64).
std::vector<llvm::Value*> emit_mma_sync(llvm::IRBuilder<>& b, const MmaShape& shape, const SharedMatrix& a,
                                        const SharedMatrix& bm, std::vector<llvm::Value*> acc, llvm::Value* tid,
                                        int threads, bool fp8 = false);

}  // namespace tessel::codegen::nvptx
