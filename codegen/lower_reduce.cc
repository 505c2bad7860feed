// Reductions: over a whole tile or along one axis, in registers (per-thread
// combines, shuffles within a warp, shared memory across warps) or over
// buffers; and histograms, counted in shared memory.
#include <algorithm>

#include "codegen/lowering.h"

namespace tessel::codegen {

using llvm::IRBuilder;

namespace {

// `x` with the bits `drop` taken out, the bits above them moved down.
uint64_t without_bits(uint64_t x, uint64_t drop) {
  uint64_t out = 0;
  for (int bit = 0, to = 0; bit < 64; ++bit) {
    if (((drop >> bit) & 1) == 0) out |= ((x >> bit) & 1) << to++;
  }
  return out;
}

// The same on the thread index `x`.
llvm::Value* without_bits(IRBuilder<>& b, llvm::Value* x, uint64_t drop) {
  if (drop == 0) return x;
  // Each run of kept bits moves down by the dropped bits below it.
  llvm::Value* out = nullptr;
  int below = 0;
  for (int bit = 0; bit < 64;) {
    if ((drop >> bit) & 1) {
      ++below;
      ++bit;
      continue;
    }
    int end = bit;
    while (end < 64 && ((drop >> end) & 1) == 0) ++end;
    const uint64_t run = (end == 64 ? ~uint64_t{0} : (uint64_t{1} << end) - 1) & ~((uint64_t{1} << bit) - 1);
    llvm::Value* part = b.CreateLShr(b.CreateAnd(x, b.getInt64(run)), below);
    out = out == nullptr ? part : b.CreateOr(out, part);
    bit = end;
  }
  return out;
}

// How many of `threads` threads differ in more than the bits `same`.
int64_t distinct_threads(int64_t threads, int same) {
  uint64_t most = 0;
  for (int64_t t = 0; t < threads; ++t) most = std::max(most, without_bits(t, same));
  return static_cast<int64_t>(most) + 1;
}

}  // namespace

std::vector<int> Lowering::submasks(int bits) {
  std::vector<int> masks;
  for (int m = 0;; m = (m - bits) & bits) {
    masks.push_back(m);
    if (((m - bits) & bits) == 0) break;
  }
  return masks;
}

std::shared_ptr<const Layout> Lowering::reduce_layout(const Op& o) {
  if (!ir_.type(o.results[0]).is_tile() || threads_ <= 0) return nullptr;
  std::shared_ptr<const Layout> l = layout(o.operands[0]);
  if (dynamic_cast<const SliceLayout*>(l.get()) != nullptr) l = planned(o.operands[0]);
  return in_registers(ir_.type(o.operands[0])) || l == wanted_[o.operands[0]] ? l : nullptr;
}

bool Lowering::across_warps_fits(const Op& o, llvm::Type* acc_t, int64_t chunks, int holders) {
  const llvm::DataLayout& dl = module_->getDataLayout();
  int64_t tiles = 0;
  for (int v : o.operands) {
    const Type& t = ir_.type(v);
    if (t.is_tile()) tiles += t.numel() * static_cast<int64_t>(dl.getTypeAllocSize(elem_mem_type(t)));
  }
  const int64_t copies = distinct_threads(threads_, holders & (target_.warp_size() - 1));
  return target_.tiles_in_shared() && copies * chunks * static_cast<int64_t>(dl.getTypeAllocSize(acc_t)) <= tiles;
}

void Lowering::through_shared(const std::vector<llvm::Value*>& values,
                              const std::function<void(const ReadShared&)>& reads, int same) {
  const int64_t slots = static_cast<int64_t>(values.size());
  llvm::Type* t = values[0]->getType();
  // One entry per group of threads that hold the same values.
  const int64_t entries = distinct_threads(threads_, same);
  llvm::Value* scratch = smem_alloc(entries * slots * module_->getDataLayout().getTypeAllocSize(t));
  // Slot-major: the lanes of a warp touch consecutive words (no bank conflicts).
  auto at = [&](llvm::Value* thread, int64_t slot) {
    return b_.CreateGEP(t, scratch, b_.CreateAdd(without_bits(b_, thread, same), b_.getInt64(slot * entries)));
  };
  guarded(same == 0 ? nullptr : b_.CreateICmpEQ(b_.CreateAnd(thread_, b_.getInt64(same)), b_.getInt64(0)), [&] {
    for (int64_t s = 0; s < slots; ++s) b_.CreateStore(values[s], at(thread_, s));
  });
  target_.program_barrier(b_);
  reads([&](llvm::Value* thread, int64_t slot) { return b_.CreateLoad(t, at(thread, slot)); });
  // Freed at once; whatever reuses the memory waits for these reads first.
  shared_.erase(scratch);
}

void Lowering::exchange_warps(const std::vector<llvm::Value*>& values, int holders,
                              const std::function<void(int, int64_t, llvm::Value*)>& read) {
  const int lanes = holders & (target_.warp_size() - 1), warps = holders & ~(target_.warp_size() - 1);
  through_shared(
      values,
      [&](const ReadShared& load) {
        llvm::Value* base = b_.CreateAnd(thread_, b_.getInt64(~static_cast<int64_t>(warps)));
        for (int m : submasks(warps)) {
          if (m >= threads_) break;  // past the last warp, where warps are not a power of two
          for (int64_t s = 0; s < static_cast<int64_t>(values.size()); ++s) {
            read(m, s, load(b_.CreateOr(base, b_.getInt64(m)), s));
          }
        }
      },
      lanes);
}

void Lowering::combine_warps(std::vector<llvm::Value*>& acc, int holders, const Combine& combine) {
  // Every holder reads the same threads' parts in the same order (lowest
  // thread first), so all of them compute the same bits.
  std::vector<llvm::Value*> all(acc.size(), nullptr);
  exchange_warps(acc, holders,
                 [&](int, int64_t s, llvm::Value* part) { all[s] = all[s] == nullptr ? part : combine(all[s], part); });
  acc = std::move(all);
}

llvm::Value* Lowering::reduce_part(const Layout& l, int64_t slot, llvm::Value* elem, DType d, llvm::Value* identity) {
  llvm::Value* v = ops_.widen(elem, d);
  llvm::Value* valid = l.valid(b_, thread_, slot);
  return valid == nullptr ? v : b_.CreateSelect(valid, v, identity);
}

llvm::Value* Lowering::combine_parts(llvm::Value* identity, std::vector<llvm::Value*> parts, const Combine& combine) {
  // Neighbours first, level by level: a balanced tree, so that its
  // combines do not wait on each other in one long chain. Min and max
  // (NaN loses to a number) give the same result in any order; sums round
  // differently from a chain, within the same bound.
  while (parts.size() > 1) {
    std::vector<llvm::Value*> next;
    for (size_t i = 0; i + 1 < parts.size(); i += 2) next.push_back(combine(parts[i], parts[i + 1]));
    if (parts.size() % 2 == 1) next.push_back(parts.back());
    parts = std::move(next);
  }
  return combine(identity, parts[0]);
}

llvm::Value* Lowering::reduce_identity(OpCode combiner, DType d, llvm::Type* t) {
  if (d.is_float()) {
    if (combiner == OpCode::kAdd) return llvm::ConstantFP::get(t, 0.0);
    if (combiner == OpCode::kMul) return llvm::ConstantFP::get(t, 1.0);
    return llvm::ConstantFP::getInfinity(t, combiner == OpCode::kMax);
  }
  unsigned bits = t->getIntegerBitWidth();
  if (combiner == OpCode::kAdd) return llvm::ConstantInt::get(t, 0);
  if (combiner == OpCode::kMul) return llvm::ConstantInt::get(t, 1);
  bool s = d.is_signed();
  if (combiner == OpCode::kMax) {
    return llvm::ConstantInt::get(t, s ? llvm::APInt::getSignedMinValue(bits) : llvm::APInt::getMinValue(bits));
  }
  return llvm::ConstantInt::get(t, s ? llvm::APInt::getSignedMaxValue(bits) : llvm::APInt::getMaxValue(bits));
}

absl::Status Lowering::reduce(const Op& o, const Type& rt) {
  const Type& in = ir_.type(o.operands[0]);
  int axis = static_cast<int>(o.ints[0]);
  auto combiner = static_cast<OpCode>(o.ints[1]);
  DType d = in.dtype();
  DType acc_d = is_narrow_float(d) ? f32 : d;
  llvm::Type* acc_t = reg_type(acc_d);
  llvm::Value* identity = reduce_identity(combiner, acc_d, acc_t);
  auto combine = [&](llvm::Value* x, llvm::Value* y) { return ops_.binary(combiner, acc_d, x, y); };
  if (!rt.is_tile() && in_registers(in)) {
    // A whole tile to one scalar: each thread combines its own elements,
    // then the target combines the threads' partial results. A planned
    // layout holds each element once; a slice may hold it in several threads.
    const Layout& l = *planned(o.operands[0]);
    std::vector<llvm::Value*> elems = regs(o.operands[0], l);
    std::vector<llvm::Value*> parts;
    for (size_t slot = 0; slot < elems.size(); ++slot) parts.push_back(reduce_part(l, slot, elems[slot], d, identity));
    llvm::Value* all = target_.combine_threads(b_, combine_parts(identity, parts, combine), combine);
    set(o, ops_.narrow(all, d));
    return absl::OkStatus();
  }
  // Along one axis, in the slice of the operand's layout: each thread
  // combines its own parts of each position, then a butterfly of shuffles
  // combines the parts other lanes hold, then (for positions spread over
  // warps) the warps' parts meet in a small scratch area. Positions over
  // several slots of a thread take the buffer path below. The operand's own
  // layout (an accumulator's fragment stays where the product left it,
  // however large) unless it is a slice, whose threads may share elements.
  if (std::shared_ptr<const Layout> from = reduce_layout(o); from != nullptr) {
    auto slice = std::make_shared<SliceLayout>(from, in.shape(), axis);
    std::optional<int> holders = holder_bits(*slice);
    const int warp_bits = holders.has_value() ? *holders & ~(target_.warp_size() - 1) : 0;
    // Across warps only where the scratch area is no larger than the
    // operand's buffer would be (f16 accumulates in f32, for instance).
    if (holders.has_value() && (warp_bits == 0 || across_warps_fits(o, acc_t, slice->slots(), *holders))) {
      const int lanes = *holders & (target_.warp_size() - 1);
      const Layout& l = slice->parent();
      std::vector<llvm::Value*> elems = regs(o.operands[0], l);
      std::vector<std::vector<llvm::Value*>> parts(slice->slots());
      for (int64_t slot = 0; slot < l.slots(); ++slot) {
        parts[slice->slot_of(slot)].push_back(reduce_part(l, slot, elems[slot], d, identity));
      }
      std::vector<llvm::Value*> acc;
      for (const std::vector<llvm::Value*>& p : parts) acc.push_back(combine_parts(identity, p, combine));
      for (llvm::Value*& a : acc) {
        for (int bit = 1; bit <= lanes; bit *= 2) {
          if (lanes & bit) a = combine(a, target_.shuffle_xor(b_, a, bit));
        }
      }
      if (warp_bits != 0) {
        combine_warps(acc, *holders, combine);
      }
      for (llvm::Value*& a : acc) a = ops_.narrow(a, d);
      regs_[o.results[0]] = {std::move(slice), std::move(acc)};
      return absl::OkStatus();
    }
  }
  hold(o);
  Shape outer = in.shape();
  outer.erase(outer.begin() + axis);
  const int64_t n = in.shape()[axis];
  // Combines element k along the axis of output position `at` into the
  // accumulator at `slot`.
  auto accumulate = [&](llvm::Value* slot, ElemIndex& at, llvm::Value* k) {
    ElemIndex along = at_axis(in.shape(), axis, at.dims, k);
    llvm::Value* next = combine(b_.CreateLoad(acc_t, slot), ops_.widen(element(o.operands[0], along), d));
    // One thread walking the tile may sum in any order, as the GPUs'
    // trees do: the vectorizer then keeps a partial sum per lane.
    if (auto* add = llvm::dyn_cast<llvm::BinaryOperator>(next);
        add != nullptr && walks_alone() && add->getOpcode() == llvm::Instruction::FAdd) {
      add->setHasAllowReassoc(true);
    }
    b_.CreateStore(next, slot);
  };
  auto result = [&](llvm::Value* slot) { return ops_.narrow(b_.CreateLoad(acc_t, slot), d); };
  // Fewer lines than threads: each line in segments over the threads.
  if (const int64_t parts = line_parts(outer, n); parts > 1) {
    const LineSegments seg = line_segments(outer, n, parts);
    const int64_t count = seg.count;
    llvm::Value* totals = smem_alloc(numel(outer) * count * module_->getDataLayout().getTypeAllocSize(acc_t), 16);
    // This thread's segment, then `count` segments' totals from thread
    // `first` on, each into a stack slot.
    auto segment = [&](llvm::Value* slot) {
      ElemIndex at = at_linear(outer, seg.line);
      emit_loop(b_, seg.lo, seg.hi, b_.getInt64(1), [&](llvm::Value* k) { accumulate(slot, at, k); });
    };
    auto totals_from = [&](llvm::Value* slot, llvm::Value* first) {
      loop(count, [&](llvm::Value* j) {
        llvm::Value* theirs = b_.CreateLoad(acc_t, b_.CreateGEP(acc_t, totals, b_.CreateAdd(first, j)));
        b_.CreateStore(combine(b_.CreateLoad(acc_t, slot), theirs), slot);
      });
    };
    guarded(seg.active, [&] {
      llvm::Value* slot = stack_slot(acc_t);
      b_.CreateStore(identity, slot);
      segment(slot);
      b_.CreateStore(b_.CreateLoad(acc_t, slot), b_.CreateGEP(acc_t, totals, thread_));
    });
    target_.program_barrier(b_);
    llvm::Value* slot = stack_slot(acc_t);
    b_.CreateStore(identity, slot);
    if (outer.empty()) {
      // Every thread holds the scalar.
      totals_from(slot, b_.getInt64(0));
      set(o, result(slot));
    } else {
      llvm::Value* out = new_buffer(rt);
      guarded(b_.CreateAnd(seg.active, b_.CreateICmpEQ(seg.part, b_.getInt64(0))), [&] {
        totals_from(slot, thread_);
        store_elem(out, rt, seg.line, result(slot));
      });
      set(o, out);
    }
    target_.program_barrier(b_);
    shared_.erase(totals);
    return absl::OkStatus();
  }
  if (outer.empty()) {
    llvm::Value* slot = stack_slot(acc_t);
    b_.CreateStore(identity, slot);
    ElemIndex whole;
    loop(n, [&](llvm::Value* k) { accumulate(slot, whole, k); });
    set(o, result(slot));
    return absl::OkStatus();
  }
  llvm::Value* out = new_buffer(rt);
  each_line(outer, n, axis + 1 == in.rank(), acc_t, identity, accumulate,
            [&](llvm::Value* slot, ElemIndex& at) { store_elem(out, rt, at.linear, result(slot)); });
  set(o, out);
  return absl::OkStatus();
}

absl::Status Lowering::histogram(const Op& o, const Type& rt) {
  const Type& in = ir_.type(o.operands[0]);
  const int64_t bins = rt.numel();
  const bool masked = o.operands.size() == 2;
  // The counts live in the result's buffer, zeroed first; each element adds
  // one to its bin. The program's threads add at once (shared-memory
  // atomics); one thread walking the tile adds in order.
  llvm::Value* counts = new_buffer(rt);
  llvm::Type* i32 = b_.getInt32Ty();
  tile_loop(bins, [&](llvm::Value* i) { b_.CreateStore(b_.getInt32(0), b_.CreateInBoundsGEP(i32, counts, i)); });
  auto count = [&](llvm::Value* x, llvm::Value* ok) {
    const std::pair<llvm::Value*, llvm::Value*> at = index_inside(x, in.dtype(), bins);
    llvm::Value* bin = at.first;
    llvm::Value* inside = at.second;
    guarded(ok == nullptr ? inside : b_.CreateAnd(ok, inside), [&] {
      llvm::Value* p = b_.CreateInBoundsGEP(i32, counts, bin);
      if (walks_alone()) {
        b_.CreateStore(b_.CreateAdd(b_.CreateLoad(i32, p), b_.getInt32(1)), p);
      } else {
        b_.CreateAtomicRMW(llvm::AtomicRMWInst::Add, p, b_.getInt32(1), llvm::MaybeAlign(4),
                           llvm::AtomicOrdering::Monotonic, target_.device_scope(ctx_));
      }
    });
  };
  if (in_registers(in)) {
    // The planned layout holds each element once (a slice may hold it in
    // several threads, which would count it more than once).
    const Layout& l = *planned(o.operands[0]);
    const std::vector<llvm::Value*> xs = regs(o.operands[0], l);
    const std::vector<llvm::Value*> ms = masked ? regs(o.operands[1], l) : std::vector<llvm::Value*>();
    for (int64_t slot = 0; slot < l.slots(); ++slot) {
      llvm::Value* ok = l.valid(b_, thread_, slot);
      if (masked) ok = ok == nullptr ? ms[slot] : b_.CreateAnd(ok, ms[slot]);
      count(xs[slot], ok);
    }
    target_.program_barrier(b_);
  } else {
    hold(o);
    each_element(in.shape(), [&](ElemIndex& at) {
      count(element(o.operands[0], at), masked ? element(o.operands[1], at) : nullptr);
    });
    // On the program's threads each_element ends in a barrier.
  }
  set(o, counts);
  return absl::OkStatus();
}

Lowering::ElemIndex Lowering::at_axis(const Shape& shape, int axis, std::vector<llvm::Value*> others, llvm::Value* k) {
  others.insert(others.begin() + axis, k);
  return at_dims(shape, std::move(others));
}

void Lowering::each_line(const Shape& outer, int64_t n, bool axis_is_last, llvm::Type* acc_t, llvm::Value* identity,
                         const std::function<void(llvm::Value*, ElemIndex&, llvm::Value*)>& body,
                         const std::function<void(llvm::Value*, ElemIndex&)>& done) {
  if (walks_alone() && !axis_is_last) {
    // One thread walking the tile: the axis outermost, so that the
    // innermost loop runs over consecutive lines (and vectorizes across
    // them); each line still takes its elements in order.
    llvm::Value* accs = stack_slot(acc_t, numel(outer), 64);
    auto slot = [&](ElemIndex& at) { return b_.CreateInBoundsGEP(acc_t, accs, at.linear); };
    each_element(outer, [&](ElemIndex& at) { b_.CreateStore(identity, slot(at)); });
    loop(n, [&](llvm::Value* k) { each_element(outer, [&](ElemIndex& at) { body(slot(at), at, k); }); });
    if (done) each_element(outer, [&](ElemIndex& at) { done(slot(at), at); });
    return;
  }
  each_element(outer, [&](ElemIndex& at) {
    llvm::Value* slot = stack_slot(acc_t);
    b_.CreateStore(identity, slot);
    loop(n, [&](llvm::Value* k) { body(slot, at, k); });
    if (done) done(slot, at);
  });
}

}  // namespace tessel::codegen
