// Where an element of a tile lies in shared memory when a TMA copy (or a
// copy ring) leaves it there: tma::box_tile_offset, in IR.
#pragma once

#include <cstdint>

#include "base/tma_rules.h"
#include "llvm/IR/IRBuilder.h"

namespace tessel::codegen {

// The byte offset (i64) of element (`row`, `col`) of a `rows` x `cols`
// tile of `elem_bytes` elements, in panels and swizzled as `swizzle` says.
inline llvm::Value* tile_offset(llvm::IRBuilder<>& b, llvm::Value* row, llvm::Value* col, int64_t rows, int64_t cols,
                                int64_t elem_bytes, Swizzle swizzle) {
  const int64_t width = tma::panel_elems(cols, elem_bytes, swizzle);
  llvm::Value* i = nullptr;
  if (width == cols) {
    i = b.CreateAdd(b.CreateMul(row, b.getInt64(cols)), col);
  } else {
    llvm::Value* panel_row = b.CreateAdd(b.CreateMul(b.CreateUDiv(col, b.getInt64(width)), b.getInt64(rows)), row);
    i = b.CreateAdd(b.CreateMul(panel_row, b.getInt64(width)), b.CreateURem(col, b.getInt64(width)));
  }
  llvm::Value* offset = b.CreateMul(i, b.getInt64(elem_bytes));
  if (swizzle == Swizzle::kNone) return offset;
  llvm::Value* chunk = b.CreateShl(b.CreateAnd(b.CreateLShr(offset, 7), tma::swizzle_row_mask(swizzle)), 4);
  return b.CreateXor(offset, chunk);
}

}  // namespace tessel::codegen
