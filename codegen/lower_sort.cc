// Sorting lines of a tile along an axis, or finding the positions that
// would (argsort): a bitonic network over a buffer, its compare-exchange
// steps spread over the program's threads (one tile_loop and its barrier a
// step, in loops over the steps), the same network on every target.
//
// The network sorts 2^m positions, m the least with 2^m >= n. Each merge of
// blocks of `size` first pairs position i of a block with its mirror
// (size - 1 - i), then half-cleans with pairs half apart, and every pair
// puts the element that comes first at its lower position. Positions n and
// up stand for elements after every other: a pair reaching one would leave
// both in place, so those pairs are skipped and any n sorts in place.
#include "codegen/loops.h"
#include "codegen/lowering.h"

namespace tessel::codegen {

absl::Status Lowering::sort(const Op& o, const Type& rt) {
  const Type& in = ir_.type(o.operands[0]);
  const int axis = static_cast<int>(o.ints[0]);
  const bool descending = o.ints[1] != 0, positions = o.ints[2] != 0;
  const DType d = in.dtype();
  const int64_t n = in.shape()[axis];
  const int64_t inner = strides(in.shape())[axis];
  const int64_t lines = in.numel() / n;
  hold(o);
  // The keys and, for positions, each element's place along its line.
  llvm::Value* keys = new_buffer(in);
  llvm::Value* places = positions ? new_buffer(rt) : nullptr;
  each_element(in.shape(), [&](ElemIndex& at) {
    store_elem(keys, in, at.linear, element(o.operands[0], at));
    if (positions) {
      llvm::Value* place = b_.CreateURem(b_.CreateUDiv(at.linear, b_.getInt64(inner)), b_.getInt64(n));
      store_elem(places, rt, at.linear, b_.CreateTrunc(place, b_.getInt32Ty()));
    }
  });
  // Whether x comes before y ascending: x < y, a NaN above every number.
  auto less = [&](llvm::Value* x, llvm::Value* y) -> llvm::Value* {
    if (!d.is_float()) return d.is_signed() ? b_.CreateICmpSLT(x, y) : b_.CreateICmpULT(x, y);
    x = ops_.widen(x, d);
    y = ops_.widen(y, d);
    return b_.CreateAnd(b_.CreateFCmpULT(x, y), b_.CreateFCmpORD(x, x));
  };
  set(o, positions ? places : keys);
  int64_t span = 1, levels = 0;
  while (span < n) {
    span *= 2;
    ++levels;
  }
  if (levels == 0) return absl::OkStatus();  // lines of one element
  // Merges of blocks of 2^s (s = 1 .. levels), each in steps whose pairs lie
  // 2^h apart at most (h = s - 1 down to 0): loops in the code, not unrolled.
  llvm::Value* one = b_.getInt64(1);
  emit_loop(b_, one, b_.getInt64(levels + 1), one, [&](llvm::Value* s) {
    llvm::Value* size = b_.CreateShl(one, s);
    emit_loop(b_, b_.getInt64(0), s, one, [&](llvm::Value* t) {
      llvm::Value* h = b_.CreateSub(b_.CreateSub(s, one), t);
      llvm::Value* half = b_.CreateShl(one, h);
      tile_loop(lines * (span / 2), [&](llvm::Value* pair) {
        llvm::Value* line = b_.CreateUDiv(pair, b_.getInt64(span / 2));
        llvm::Value* q = b_.CreateURem(pair, b_.getInt64(span / 2));
        llvm::Value* block = b_.CreateLShr(q, h);
        llvm::Value* r = b_.CreateAnd(q, b_.CreateSub(half, one));
        llvm::Value* lo = b_.CreateAdd(b_.CreateShl(block, b_.CreateAdd(h, one)), r);
        // The merge's first step pairs mirrors; the others, positions half apart.
        llvm::Value* mirror = b_.CreateSub(b_.CreateAdd(b_.CreateShl(block, s), b_.CreateSub(size, one)), r);
        llvm::Value* hi = b_.CreateSelect(b_.CreateICmpEQ(t, b_.getInt64(0)), mirror, b_.CreateAdd(lo, half));
        // Element k of the line at (line / inner) * n * inner + k * inner + line % inner.
        llvm::Value* base = b_.CreateAdd(b_.CreateMul(b_.CreateUDiv(line, b_.getInt64(inner)), b_.getInt64(n * inner)),
                                         b_.CreateURem(line, b_.getInt64(inner)));
        guarded(b_.CreateICmpULT(hi, b_.getInt64(n)), [&] {
          llvm::Value* at_lo = b_.CreateAdd(base, b_.CreateMul(lo, b_.getInt64(inner)));
          llvm::Value* at_hi = b_.CreateAdd(base, b_.CreateMul(hi, b_.getInt64(inner)));
          llvm::Value* x = load_elem(keys, in, at_lo);
          llvm::Value* y = load_elem(keys, in, at_hi);
          llvm::Value *x_first = less(x, y), *y_first = less(y, x);
          llvm::Value* swap = descending ? x_first : y_first;
          if (positions) {
            // Equal keys in the order of their places: (key, place) orders
            // every line strictly, so the network's order is the stable one.
            llvm::Value* px = load_elem(places, rt, at_lo);
            llvm::Value* py = load_elem(places, rt, at_hi);
            llvm::Value* tie = b_.CreateNot(b_.CreateOr(x_first, y_first));
            swap = b_.CreateOr(swap, b_.CreateAnd(tie, b_.CreateICmpULT(py, px)));
            store_elem(places, rt, at_lo, b_.CreateSelect(swap, py, px));
            store_elem(places, rt, at_hi, b_.CreateSelect(swap, px, py));
          }
          store_elem(keys, in, at_lo, b_.CreateSelect(swap, y, x));
          store_elem(keys, in, at_hi, b_.CreateSelect(swap, x, y));
        });
      });
    });
  });
  return absl::OkStatus();
}

}  // namespace tessel::codegen
