// Internal: gfx942's matrix fused multiply-add (MFMA) for dot on bf16 and
// f16 tiles in LDS, accumulating in f32 registers, on fp8 tiles (e4m3,
// e5m2, mixed; read as gfx942's FNUZ encodings, mfma.cc) into f32 ones, and
// on i8 tiles into i32 ones. Each wavefront takes 32 x 32 blocks of the
// tile in turn (mfma_fragment.h); each instruction multiplies a block by 8
// of k (16 for i8 and fp8), its operands read from LDS by each lane (four
// consecutive k of one row of A and one column of B; eight for 8-bit types).
#pragma once

#include <memory>
#include <vector>

#include "codegen/layout.h"
#include "codegen/target_info.h"

namespace tessel::codegen::amdgpu {

// The accumulator layout when `threads` threads can multiply operands like
// `a` and `b` (plain tiles in LDS, either major order) with MFMA, else nullptr.
std::shared_ptr<const Layout> mfma_layout(const MmaShape& shape, const SharedMatrix& a, const SharedMatrix& b,
                                          int threads);

// acc + a @ b on MFMA; `acc` and the result are this thread's slots of
// mfma_layout()'s layout.
std::vector<llvm::Value*> emit_mfma(llvm::IRBuilder<>& b, const MmaShape& shape, const SharedMatrix& a,
                                    const SharedMatrix& bm, std::vector<llvm::Value*> acc, llvm::Value* tid,
                                    int threads);

}  // namespace tessel::codegen::amdgpu
