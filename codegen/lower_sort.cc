// Sorting lines of a tile along an axis, or finding the positions that
// would (argsort). Every comparison is of integer keys whose unsigned order
// is the sort's (sort_key), so the order is total and the result the same
// whatever network computes it.
//
// In registers (GPUs, where the operand's layout holds each line in a
// pattern sort_plan recognizes): a bitonic network on the keys, each merge
// of blocks of 2^level positions in steps over the position bits below
// level, each step a min or max against the partner, found in another slot
// of the thread, in a neighbouring lane (a shuffle) or in another warp
// (through shared memory).
//
// Otherwise, over a buffer: the network sorts 2^m positions, m the least
// with 2^m >= n. Each merge of blocks of `size` first pairs position i of a
// block with its mirror (size - 1 - i), then half-cleans with pairs half
// apart, and every pair puts the element that comes first at its lower
// position. Positions n and up stand for elements after every other: a
// pair reaching one would leave both in place, so those pairs are skipped
// and any n sorts in place. Its compare-exchange steps are spread over the
// program's threads (one tile_loop and its barrier a step, in loops over
// the steps), the same network on every target.
#include "codegen/layout.h"
#include "codegen/loops.h"
#include "codegen/lowering.h"

namespace tessel::codegen {
namespace {

// The bits of the largest positive value of float dtype `d` that is not a
// NaN: +inf, or the largest finite value where the format has no infinity.
uint64_t top_number(DType d) {
  switch (d.kind) {
    case ScalarKind::kF16:
      return 0x7c00;
    case ScalarKind::kBF16:
      return 0x7f80;
    case ScalarKind::kF32:
      return 0x7f800000;
    case ScalarKind::kF64:
      return 0x7ff0000000000000;
    case ScalarKind::kF8E4M3:
      return 0x7e;
    default:  // f8e5m2
      return 0x7c;
  }
}

// The key of element `x` of dtype `d`: an unsigned integer of d's width
// whose order is sort's ascending one. Signed integers flip their sign bit.
// Float bits b with sign bit S and top number T map one to one: negative
// numbers (-inf first) to [0, T], so that -0 comes just before +0; +0 to
// +inf to [T + 1, 2T + 1]; then NaNs, positive and negative, in the order
// of their bits. With `ties` (argsort) -0 takes +0's key and every NaN one
// key, so that those elements tie and keep their order.
llvm::Value* sort_key(llvm::IRBuilder<>& b, llvm::Value* x, DType d, bool ties) {
  const unsigned w = d.bits();
  const uint64_t sign = uint64_t{1} << (w - 1);
  if (!d.is_float()) return d.is_signed() ? b.CreateXor(x, b.getIntN(w, sign)) : x;
  const uint64_t top = top_number(d);
  llvm::Value* bits = b.CreateBitCast(x, b.getIntNTy(w));
  llvm::Value* negative = b.CreateICmpUGE(bits, b.getIntN(w, sign));
  llvm::Value* nan = b.CreateICmpUGT(b.CreateAnd(bits, b.getIntN(w, sign - 1)), b.getIntN(w, top));
  llvm::Value* key = b.CreateSelect(negative, b.CreateSelect(nan, bits, b.CreateSub(b.getIntN(w, sign + top), bits)),
                                    b.CreateAdd(bits, b.getIntN(w, top + 1)));
  if (!ties) return key;
  key = b.CreateSelect(b.CreateICmpEQ(key, b.getIntN(w, top)), b.getIntN(w, top + 1), key);
  return b.CreateSelect(nan, b.getIntN(w, 2 * top + 2), key);
}

// The element whose key (without ties) is `key`, in register type `t`.
llvm::Value* from_key(llvm::IRBuilder<>& b, llvm::Value* key, DType d, llvm::Type* t) {
  const unsigned w = d.bits();
  const uint64_t sign = uint64_t{1} << (w - 1);
  if (!d.is_float()) return d.is_signed() ? b.CreateXor(key, b.getIntN(w, sign)) : key;
  const uint64_t top = top_number(d);
  llvm::Value* bits = b.CreateSelect(
      b.CreateICmpULE(key, b.getIntN(w, top)), b.CreateSub(b.getIntN(w, sign + top), key),
      b.CreateSelect(b.CreateICmpULE(key, b.getIntN(w, sign + top)), b.CreateSub(key, b.getIntN(w, top + 1)), key));
  return b.CreateBitCast(bits, t);
}

}  // namespace

std::vector<llvm::Value*> Lowering::from_threads(const std::vector<llvm::Value*>& values, int mask) {
  std::vector<llvm::Value*> out;
  if (mask < target_.warp_size()) {
    for (llvm::Value* v : values) out.push_back(target_.shuffle_xor(b_, v, mask));
    return out;
  }
  through_shared(values, [&](const ReadShared& load) {
    llvm::Value* partner = b_.CreateXor(thread_, b_.getInt64(mask));
    for (int64_t s = 0; s < static_cast<int64_t>(values.size()); ++s) out.push_back(load(partner, s));
  });
  return out;
}

void Lowering::sort_registers(const Op& o, std::shared_ptr<const Layout> l, const SortPlan& plan) {
  const Type& in = ir_.type(o.operands[0]);
  const int axis = static_cast<int>(o.ints[0]);
  const bool descending = o.ints[1] != 0, positions = o.ints[2] != 0;
  const DType d = in.dtype();
  const int64_t n = in.shape()[axis], inner = strides(in.shape())[axis], slots = l->slots();
  const int levels = static_cast<int>(plan.bits.size());
  const std::vector<llvm::Value*> x = regs(o.operands[0], *l);
  // Each slot's position along the axis, and its key: complemented for a
  // descending sort, and for argsort above the position (keys of at most
  // 32 bits), so that keys that tie keep their order.
  std::vector<llvm::Value*> place(slots), key(slots);
  for (int64_t s = 0; s < slots; ++s) {
    llvm::Value* e = l->element(b_, thread_, s);
    place[s] = b_.CreateTrunc(b_.CreateURem(b_.CreateUDiv(e, b_.getInt64(inner)), b_.getInt64(n)), b_.getInt32Ty());
    key[s] = sort_key(b_, x[s], d, positions);
    if (descending) key[s] = b_.CreateNot(key[s]);
    if (positions) {
      key[s] = b_.CreateOr(b_.CreateShl(b_.CreateZExt(key[s], b_.getInt64Ty()), 32),
                           b_.CreateZExt(place[s], b_.getInt64Ty()));
    }
  }
  auto min = [&](llvm::Value* a, llvm::Value* c) { return b_.CreateBinaryIntrinsic(llvm::Intrinsic::umin, a, c); };
  auto max = [&](llvm::Value* a, llvm::Value* c) { return b_.CreateBinaryIntrinsic(llvm::Intrinsic::umax, a, c); };
  for (int level = 1; level <= levels; ++level) {
    // Blocks of 2^level positions ascend where bit `level` is clear.
    std::vector<llvm::Value*> up(slots, b_.getTrue());
    if (level < levels) {
      for (int64_t s = 0; s < slots; ++s) {
        up[s] = b_.CreateICmpEQ(b_.CreateAnd(place[s], b_.getInt32(1 << level)), b_.getInt32(0));
      }
    }
    for (int h = level - 1; h >= 0; --h) {
      const SortBit& bit = plan.bits[h];
      if (bit.threads == 0) {
        for (const auto& [lo, hi] : bit.pairs) {
          llvm::Value *first = min(key[lo], key[hi]), *last = max(key[lo], key[hi]);
          key[lo] = b_.CreateSelect(up[lo], first, last);
          key[hi] = b_.CreateSelect(up[lo], last, first);
        }
        continue;
      }
      const std::vector<llvm::Value*> theirs = from_threads(key, bit.threads);
      llvm::Value* lower = b_.CreateICmpEQ(b_.CreateAnd(thread_, b_.getInt64(bit.threads)), b_.getInt64(0));
      for (int64_t s = 0; s < slots; ++s) {
        key[s] = b_.CreateSelect(b_.CreateICmpEQ(lower, up[s]), min(key[s], theirs[s]), max(key[s], theirs[s]));
      }
    }
  }
  std::vector<llvm::Value*> out(slots);
  for (int64_t s = 0; s < slots; ++s) {
    if (positions) {
      out[s] = b_.CreateTrunc(key[s], b_.getInt32Ty());
    } else {
      out[s] = from_key(b_, descending ? b_.CreateNot(key[s]) : key[s], d, reg_type(d));
    }
  }
  regs_[o.results[0]] = {std::move(l), std::move(out)};
}

absl::Status Lowering::sort(const Op& o, const Type& rt) {
  const Type& in = ir_.type(o.operands[0]);
  const int axis = static_cast<int>(o.ints[0]);
  const bool descending = o.ints[1] != 0, positions = o.ints[2] != 0;
  const DType d = in.dtype();
  if (in_registers(in) && !(positions && d.bits() > 32)) {
    std::shared_ptr<const Layout> l = layout(o.operands[0]);
    if (std::optional<SortPlan> plan = sort_plan(*l, in.shape(), axis)) {
      sort_registers(o, std::move(l), *plan);
      return absl::OkStatus();
    }
  }
  const int64_t n = in.shape()[axis];
  const int64_t inner = strides(in.shape())[axis];
  const int64_t lines = in.numel() / n;
  hold(o);
  // The elements and, for positions, each element's place along its line.
  llvm::Value* keys = new_buffer(in);
  llvm::Value* places = positions ? new_buffer(rt) : nullptr;
  each_element(in.shape(), [&](ElemIndex& at) {
    store_elem(keys, in, at.linear, element(o.operands[0], at));
    if (positions) {
      llvm::Value* place = b_.CreateURem(b_.CreateUDiv(at.linear, b_.getInt64(inner)), b_.getInt64(n));
      store_elem(places, rt, at.linear, b_.CreateTrunc(place, b_.getInt32Ty()));
    }
  });
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
          // Whether x comes before y ascending, and y before x.
          llvm::Value *kx = sort_key(b_, x, d, positions), *ky = sort_key(b_, y, d, positions);
          llvm::Value *x_first = b_.CreateICmpULT(kx, ky), *y_first = b_.CreateICmpULT(ky, kx);
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
