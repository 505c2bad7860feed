// Reductions by a combine function of the kernel's own (reduce_fn): the
// function's block is lowered again at every combine, on the registers of
// the two tuples it joins. In registers as the named reductions are (each
// thread's elements in turn, shuffles across lanes, shared memory across
// warps), with a flag beside each tuple where a thread may hold no element;
// otherwise over buffers, each line walked from its first element.
#include <bit>

#include "codegen/lowering.h"

namespace tessel::codegen {

Lowering::FnPart Lowering::combine_fn(const Op& o, const FnPart& a, const FnPart& b) {
  const Block& body = ir_.blocks[o.blocks[0]];
  const size_t n = a.values.size();
  for (size_t i = 0; i < n; ++i) {
    vals_[body.args[i]] = a.values[i];
    vals_[body.args[n + i]] = b.values[i];
  }
  FnPart out;
  for (int id : body.ops) {
    const Op& inner = ir_.ops[id];
    if (inner.op == OpCode::kYield) {
      for (int v : inner.operands) out.values.push_back(val(v));
      break;
    }
    const absl::Status s = op(inner);
    TESSEL_CHECK(s.ok(), "an elementwise op on scalars did not lower");
  }
  if (a.valid == nullptr && b.valid == nullptr) return out;
  // Where one side holds nothing, the other; where neither does, either.
  llvm::Value* av = a.valid != nullptr ? a.valid : b_.getTrue();
  llvm::Value* bv = b.valid != nullptr ? b.valid : b_.getTrue();
  llvm::Value* both = b_.CreateAnd(av, bv);
  for (size_t i = 0; i < n; ++i) {
    out.values[i] = b_.CreateSelect(both, out.values[i], b_.CreateSelect(av, a.values[i], b.values[i]));
  }
  out.valid = b_.CreateOr(av, bv);
  return out;
}

void Lowering::combine_fn_lanes(const Op& o, FnPart& acc, int lanes) {
  for (int bit = 1; bit <= lanes; bit *= 2) {
    if ((lanes & bit) == 0) continue;
    FnPart other;
    for (llvm::Value* v : acc.values) other.values.push_back(target_.shuffle_xor(b_, v, bit));
    if (acc.valid != nullptr) other.valid = target_.shuffle_xor(b_, acc.valid, bit);
    acc = combine_fn(o, acc, other);
  }
}

Lowering::FnPart Lowering::select_part(llvm::Value* cond, const FnPart& a, const FnPart& b) {
  FnPart out;
  for (size_t i = 0; i < a.values.size(); ++i) out.values.push_back(b_.CreateSelect(cond, a.values[i], b.values[i]));
  if (a.valid != nullptr || b.valid != nullptr) {
    out.valid =
        b_.CreateSelect(cond, a.valid != nullptr ? a.valid : b_.getTrue(), b.valid != nullptr ? b.valid : b_.getTrue());
  }
  return out;
}

void Lowering::exchange_fn_parts(const std::vector<FnPart>& parts, int holders,
                                 const std::function<void(int, size_t, const FnPart&)>& read) {
  // Each part travels as 64-bit words, one per value and one for its flag.
  const size_t n = parts[0].values.size();
  const bool flags = parts[0].valid != nullptr;
  const size_t words = n + (flags ? 1 : 0);
  std::vector<llvm::Value*> packed;
  for (const FnPart& p : parts) {
    for (llvm::Value* v : p.values) {
      const unsigned bits = v->getType()->getPrimitiveSizeInBits();
      packed.push_back(b_.CreateZExt(b_.CreateBitCast(v, b_.getIntNTy(bits)), b_.getInt64Ty()));
    }
    if (flags) packed.push_back(b_.CreateZExt(p.valid, b_.getInt64Ty()));
  }
  FnPart part;
  exchange_warps(packed, holders, [&](int m, int64_t k, llvm::Value* word) {
    const size_t slot = static_cast<size_t>(k) / words, w = static_cast<size_t>(k) % words;
    if (w < n) {
      llvm::Type* t = parts[0].values[w]->getType();
      const unsigned bits = t->getPrimitiveSizeInBits();
      part.values.push_back(b_.CreateBitCast(b_.CreateTrunc(word, b_.getIntNTy(bits)), t));
    } else {
      part.valid = b_.CreateTrunc(word, b_.getInt1Ty());
    }
    if (w + 1 < words) return;
    read(m, slot, part);
    part = FnPart();
  });
}

void Lowering::combine_fn_warps(const Op& o, std::vector<FnPart>& acc, int holders) {
  // Every holder reads the same threads' parts in the same order.
  std::vector<std::optional<FnPart>> all(acc.size());
  exchange_fn_parts(acc, holders, [&](int, size_t slot, const FnPart& part) {
    all[slot] = all[slot].has_value() ? combine_fn(o, *all[slot], part) : part;
  });
  for (size_t slot = 0; slot < acc.size(); ++slot) acc[slot] = *std::move(all[slot]);
}

std::vector<llvm::Value*> Lowering::fn_line(const Op& o, int axis, const std::vector<llvm::Value*>& others,
                                            bool reverse, const LineVisit& visit, const LineSpan& span) {
  const Shape& shape = ir_.type(o.operands[0]).shape();
  const int64_t len = shape[axis];
  const size_t n = o.operands.size();
  auto along = [&](llvm::Value* k) {
    return at_axis(shape, axis, others, reverse ? b_.CreateSub(b_.getInt64(len - 1), k) : k);
  };
  llvm::Value* lo = span.lo != nullptr ? span.lo : b_.getInt64(0);
  llvm::Value* hi = span.hi != nullptr ? span.hi : b_.getInt64(len);
  ElemIndex first = along(lo);
  FnPart start;
  for (int v : o.operands) start.values.push_back(element(v, first));
  if (span.prefix != nullptr) start = combine_fn(o, *span.prefix, start);
  std::vector<llvm::Value*> slots;
  for (llvm::Value* v : start.values) {
    slots.push_back(stack_slot(v->getType()));
    b_.CreateStore(v, slots.back());
  }
  if (visit) visit(first, start.values);
  emit_loop(b_, b_.CreateAdd(lo, b_.getInt64(1)), hi, b_.getInt64(1), [&](llvm::Value* k) {
    ElemIndex here = along(k);
    FnPart acc, next;
    for (size_t i = 0; i < n; ++i) {
      acc.values.push_back(b_.CreateLoad(start.values[i]->getType(), slots[i]));
      next.values.push_back(element(o.operands[i], here));
    }
    acc = combine_fn(o, acc, next);
    for (size_t i = 0; i < n; ++i) b_.CreateStore(acc.values[i], slots[i]);
    if (visit) visit(here, acc.values);
  });
  std::vector<llvm::Value*> out;
  for (size_t i = 0; i < n; ++i) out.push_back(b_.CreateLoad(start.values[i]->getType(), slots[i]));
  return out;
}

Lowering::LineSegments Lowering::line_segments(const Shape& outer, int64_t n, int64_t parts) {
  LineSegments seg;
  // Segments of `len` elements, as many as that takes: none is empty.
  const int64_t len = (n + parts - 1) / parts;
  seg.count = (n + len - 1) / len;
  seg.line = b_.CreateUDiv(thread_, b_.getInt64(seg.count));
  seg.part = b_.CreateURem(thread_, b_.getInt64(seg.count));
  seg.active = b_.CreateICmpULT(thread_, b_.getInt64(numel(outer) * seg.count));
  seg.lo = b_.CreateMul(seg.part, b_.getInt64(len));
  seg.hi = b_.CreateBinaryIntrinsic(llvm::Intrinsic::umin, b_.CreateAdd(seg.lo, b_.getInt64(len)), b_.getInt64(n));
  return seg;
}

Lowering::FnSegments Lowering::fn_segment_totals(const Op& o, const Shape& outer, int64_t parts, bool reverse) {
  const int axis = static_cast<int>(o.ints[0]);
  FnSegments seg;
  seg.at = line_segments(outer, ir_.type(o.operands[0]).shape()[axis], parts);
  for (int v : o.operands) {
    seg.mem_types.push_back(elem_mem_type(ir_.type(v)));
    seg.totals.push_back(
        smem_alloc(numel(outer) * seg.at.count * module_->getDataLayout().getTypeAllocSize(seg.mem_types.back()), 16));
  }
  seg.dims = unravel(seg.at.line, outer);
  guarded(seg.at.active, [&] {
    const std::vector<llvm::Value*> total = fn_line(o, axis, seg.dims, reverse, nullptr, seg.span());
    for (size_t i = 0; i < total.size(); ++i) {
      b_.CreateStore(to_memory(total[i], seg.mem_types[i]), b_.CreateGEP(seg.mem_types[i], seg.totals[i], thread_));
    }
  });
  target_.program_barrier(b_);
  return seg;
}

Lowering::FnPart Lowering::fn_segments_combined(const Op& o, const FnSegments& seg, llvm::Value* first,
                                                llvm::Value* count) {
  const size_t n = o.operands.size();
  // From an empty part, held in stack slots across the loop.
  std::vector<llvm::Value*> slots;
  for (size_t i = 0; i < n; ++i) {
    llvm::Type* t = elem_type(ir_.type(o.operands[i]));
    slots.push_back(stack_slot(t));
    b_.CreateStore(llvm::Constant::getNullValue(t), slots.back());
  }
  llvm::Value* flag = stack_slot(b_.getInt1Ty());
  b_.CreateStore(b_.getFalse(), flag);
  auto held = [&] {
    FnPart p;
    for (size_t i = 0; i < n; ++i) p.values.push_back(b_.CreateLoad(elem_type(ir_.type(o.operands[i])), slots[i]));
    p.valid = b_.CreateLoad(b_.getInt1Ty(), flag);
    return p;
  };
  emit_loop(b_, b_.getInt64(0), count, b_.getInt64(1), [&](llvm::Value* j) {
    FnPart theirs;
    for (size_t i = 0; i < n; ++i) {
      llvm::Value* at = b_.CreateGEP(seg.mem_types[i], seg.totals[i], b_.CreateAdd(first, j));
      theirs.values.push_back(from_memory(b_.CreateLoad(seg.mem_types[i], at), ir_.type(o.operands[i])));
    }
    const FnPart acc = combine_fn(o, held(), theirs);
    for (size_t i = 0; i < n; ++i) b_.CreateStore(acc.values[i], slots[i]);
    b_.CreateStore(acc.valid, flag);
  });
  return held();
}

void Lowering::fn_segments_done(const FnSegments& seg) {
  target_.program_barrier(b_);
  for (llvm::Value* t : seg.totals) shared_.erase(t);
}

absl::Status Lowering::reduce_fn(const Op& o) {
  const Type& in = ir_.type(o.operands[0]);
  const Type& rt = ir_.type(o.results[0]);
  const int axis = static_cast<int>(o.ints[0]);
  const size_t n = o.operands.size();
  // The tuple of slot `slot` of each operand's registers in layout `l`.
  auto part_at = [&](const Layout& l, const std::vector<std::vector<llvm::Value*>>& elems, int64_t slot) {
    FnPart p;
    for (const std::vector<llvm::Value*>& e : elems) p.values.push_back(e[slot]);
    p.valid = l.valid(b_, thread_, slot);
    return p;
  };
  auto operand_regs = [&](const Layout& l) {
    std::vector<std::vector<llvm::Value*>> elems;
    for (int v : o.operands) elems.push_back(regs(v, l));
    return elems;
  };
  if (!rt.is_tile() && in_registers(in)) {
    // A whole tile to one tuple: each thread's elements, then every lane
    // and warp. The planned layout holds each element once.
    const Layout& l = *planned(o.operands[0]);
    const std::vector<std::vector<llvm::Value*>> elems = operand_regs(l);
    FnPart acc = part_at(l, elems, 0);
    for (int64_t slot = 1; slot < l.slots(); ++slot) acc = combine_fn(o, acc, part_at(l, elems, slot));
    const int warp = target_.warp_size();
    combine_fn_lanes(o, acc, warp - 1);
    if (threads_ > warp) {
      std::vector<FnPart> accs = {acc};
      combine_fn_warps(o, accs, static_cast<int>(std::bit_ceil(static_cast<unsigned>(threads_))) - 1);
      acc = accs[0];
    }
    for (size_t i = 0; i < n; ++i) vals_[o.results[i]] = acc.values[i];
    return absl::OkStatus();
  }
  // Along the axis, in the slice of the first operand's layout, as reduce
  // does.
  if (std::shared_ptr<const Layout> from = reduce_layout(o); from != nullptr) {
    auto slice = std::make_shared<SliceLayout>(from, in.shape(), axis);
    std::optional<int> holders = holder_bits(*slice);
    const int warp_bits = holders.has_value() ? *holders & ~(target_.warp_size() - 1) : 0;
    const int64_t words = slice->slots() * static_cast<int64_t>(n + 1);
    if (holders.has_value() && (warp_bits == 0 || across_warps_fits(o, b_.getInt64Ty(), words, *holders))) {
      const Layout& l = slice->parent();
      const std::vector<std::vector<llvm::Value*>> elems = operand_regs(l);
      std::vector<std::optional<FnPart>> parts(slice->slots());
      for (int64_t slot = 0; slot < l.slots(); ++slot) {
        std::optional<FnPart>& p = parts[slice->slot_of(slot)];
        p = p.has_value() ? combine_fn(o, *p, part_at(l, elems, slot)) : part_at(l, elems, slot);
      }
      std::vector<FnPart> acc;
      for (std::optional<FnPart>& p : parts) acc.push_back(*std::move(p));
      for (FnPart& a : acc) combine_fn_lanes(o, a, *holders & (target_.warp_size() - 1));
      if (warp_bits != 0) combine_fn_warps(o, acc, *holders);
      for (size_t i = 0; i < n; ++i) {
        std::vector<llvm::Value*> r;
        for (const FnPart& a : acc) r.push_back(a.values[i]);
        regs_[o.results[i]] = {slice, std::move(r)};
      }
      return absl::OkStatus();
    }
  }
  // Over buffers: each line from its first element, combined in order; in
  // segments over the threads where there are fewer lines than threads.
  hold(o);
  Shape outer = in.shape();
  outer.erase(outer.begin() + axis);
  if (const int64_t parts = line_parts(outer, in.shape()[axis]); parts > 1) {
    FnSegments seg = fn_segment_totals(o, outer, parts, /*reverse=*/false);
    if (outer.empty()) {
      // Every thread combines the segments: each holds the scalars.
      const FnPart all = fn_segments_combined(o, seg, b_.getInt64(0), b_.getInt64(seg.at.count));
      for (size_t i = 0; i < n; ++i) vals_[o.results[i]] = all.values[i];
    } else {
      // The first thread of each line combines its segments.
      std::vector<llvm::Value*> bufs;
      for (int r : o.results) bufs.push_back(new_buffer(ir_.type(r)));
      guarded(b_.CreateAnd(seg.at.active, b_.CreateICmpEQ(seg.at.part, b_.getInt64(0))), [&] {
        const FnPart all = fn_segments_combined(o, seg, thread_, b_.getInt64(seg.at.count));
        for (size_t i = 0; i < n; ++i) store_elem(bufs[i], ir_.type(o.results[i]), seg.at.line, all.values[i]);
      });
      for (size_t i = 0; i < n; ++i) vals_[o.results[i]] = bufs[i];
    }
    fn_segments_done(seg);
    return absl::OkStatus();
  }
  if (outer.empty()) {
    const std::vector<llvm::Value*> r = fn_line(o, axis, {}, false, nullptr);
    for (size_t i = 0; i < n; ++i) vals_[o.results[i]] = r[i];
    return absl::OkStatus();
  }
  std::vector<llvm::Value*> bufs;
  for (int r : o.results) bufs.push_back(new_buffer(ir_.type(r)));
  each_element(outer, [&](ElemIndex& at) {
    const std::vector<llvm::Value*> r = fn_line(o, axis, at.dims, false, nullptr);
    for (size_t i = 0; i < n; ++i) store_elem(bufs[i], ir_.type(o.results[i]), at.linear, r[i]);
  });
  for (size_t i = 0; i < n; ++i) vals_[o.results[i]] = bufs[i];
  return absl::OkStatus();
}

}  // namespace tessel::codegen
