// Internal: Hopper's warpgroup matrix instructions (wgmma.mma_async) for
// dot on bf16, f16, fp8 (e4m3, e5m2) and tf32 tiles that TMA left swizzled
// in shared memory, or with a 16-bit a in registers, accumulating in f32
// registers.
//
// A warpgroup (4 warps, 128 threads) multiplies m64 x n x 32 bytes of k
// (k16 for 16-bit types, k32 for fp8, k8 for tf32) per instruction; the
// program's warpgroups take the tile's 64-row blocks in turn (block
// j*warpgroups + g to warpgroup g), or, where there are fewer blocks than
// warpgroups, split the columns too (a 64-row product on two warpgroups:
// each takes half of n). Operands are read through
// 64-bit shared-memory descriptors, so each must be a swizzled tile as a TMA
// box leaves it: rows of the swizzle's width (128 bytes: 64 bf16), or panels
// of such rows side by side (tma::panel_elems), in 8-row atoms of 8 x width
// bytes. A K-major operand ([m, k] or [n, k]) steps along k 32 bytes at a
// time within a row, then to the next panel; an MN-major one ([k, m] or
// [k, n], wgmma's transpose bits; 16-bit types only) steps 16 rows along k, its panels along m
// or n the descriptor's leading byte offset apart.
#pragma once

#include <memory>
#include <vector>

#include "codegen/layout.h"
#include "codegen/nvptx/wgmma_fragment.h"
#include "codegen/target_info.h"

namespace tessel::codegen::nvptx {

// The accumulator of m x n for `warpgroups` warpgroups in `col_groups`
// groups of columns, as wgmma_accumulator_element (wgmma_fragment.h)
// places it.
std::shared_ptr<const Layout> wgmma_accumulator_layout(int64_t m, int64_t n, int warpgroups, int col_groups = 1);

// The accumulator layout when `threads` threads can multiply operands like
// `a` and `b` with wgmma, else nullptr.
std::shared_ptr<const Layout> wgmma_layout(const MmaShape& shape, const SharedMatrix& a, const SharedMatrix& b,
                                           int threads);

// The layout a [m, k] takes in registers for the register-A form of wgmma
// (16-bit floats only): the accumulator's layout of m x k, since each k16
// step's fragment is an m64n16 accumulator's. nullptr where not available.
std::shared_ptr<const Layout> wgmma_register_a_layout(const MmaShape& shape, const SharedMatrix& b, int threads);

// acc + a @ b: fence, the chain of wgmma over k (each warpgroup its row
// blocks), commit, and a wait that leaves `in_flight` groups running, with
// the accumulators tied to each step so that LLVM moves no other use of
// them across. `warpgroup` is this thread's warpgroup among the `threads`
// (i32); the descriptors are computed from it alone, so where it is
// warp-uniform they are too.
std::vector<llvm::Value*> emit_wgmma(llvm::IRBuilder<>& b, const MmaShape& shape, const SharedMatrix& a,
                                     const SharedMatrix& bm, std::vector<llvm::Value*> acc, llvm::Value* warpgroup,
                                     int threads, int in_flight);

// Writes the 16-bit `slots` of an accumulator layout of wgmma_layout()'s
// with stmatrix (a 16 x 16 block per warp and instruction, each lane giving
// one 16-byte row's address; a 16 x 8 block where a warpgroup's width ends
// 8 columns past a multiple of 16), the blocks whose slots `keep` keeps
// (all where empty); false where `layout` is not one, `cols` is not a
// multiple of 8, or `keep` splits a block.
bool emit_stmatrix(llvm::IRBuilder<>& b, const Layout& layout, const std::vector<llvm::Value*>& slots, int64_t cols,
                   llvm::Value* tid, const std::function<llvm::Value*(llvm::Value*)>& address,
                   const SlotFilter& keep = {});

// Two 16-bit values as one b32 register, as mov.b32 {lo, hi} makes it.
// Two f32 values rounded to one 16-bit type are rounded as a pair (one
// cvt.rn.bf16x2.f32 or cvt.rn.f16x2.f32 instead of two and a move): P of
// an attention kernel, cast from its exponentials.
llvm::Value* pack_b16(llvm::IRBuilder<>& b, llvm::Value* lo, llvm::Value* hi);

// Waits until at most `in_flight` wgmma groups run, the accumulators tied.
std::vector<llvm::Value*> wgmma_wait(llvm::IRBuilder<>& b, std::vector<llvm::Value*> acc, int in_flight);

}  // namespace tessel::codegen::nvptx
