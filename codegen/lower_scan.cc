// Inclusive scans along one axis: in registers where the operand's layout
// holds each line in chunks its holders take in turn (ScanPlan,
// codegen/blocking.h), else over buffers: on GPUs each line in segments
// over the program's threads where there are fewer lines than threads,
// otherwise (and on the host) one thread walking each line.
#include "codegen/lowering.h"

namespace tessel::codegen {

void Lowering::scan_lanes(int holder_bits, bool reverse, const std::function<void(int, llvm::Value*)>& each) {
  const int lanes = holder_bits & (target_.warp_size() - 1);
  for (int bit = 1; bit <= lanes; bit *= 2) {
    if ((lanes & bit) == 0) continue;
    llvm::Value* upper = b_.CreateICmpNE(b_.CreateAnd(thread_, b_.getInt64(bit)), b_.getInt64(0));
    each(bit, reverse ? b_.CreateNot(upper) : upper);
  }
}

void Lowering::scan_registers(const Op& o, std::shared_ptr<const Layout> l, const ScanPlan& plan, llvm::Value* identity,
                              const Combine& combine) {
  const DType d = ir_.type(o.operands[0]).dtype();
  const bool reverse = o.ints[2] != 0;
  const int64_t lines = static_cast<int64_t>(plan.slots.size()), rounds = plan.rounds, run = plan.run;
  std::vector<llvm::Value*> elems = regs(o.operands[0], *l);
  // Each chunk a thread holds, scanned from the identity (as the buffer
  // path starts: a max over NaNs alone is -inf, a sum of -0 is +0). Chunk
  // k = line * rounds + round.
  std::vector<llvm::Value*> out(l->slots()), total(lines * rounds), before(lines * rounds, identity);
  for (int64_t g = 0; g < lines; ++g) {
    for (int64_t r = 0; r < rounds; ++r) {
      llvm::Value* acc = identity;
      for (int64_t j = 0; j < run; ++j) {
        const int64_t s = plan.slots[g][r][reverse ? run - 1 - j : j];
        acc = combine(acc, ops_.widen(elems[s], d));
        out[s] = acc;
      }
      total[g * rounds + r] = acc;
    }
  }
  // The holders' chunks of one round, across lanes: a butterfly that keeps
  // each thread's group total and what precedes the thread within it (the
  // chunks of lower ranks, or of higher ones in reverse).
  scan_lanes(plan.holder_bits, reverse, [&](int bit, llvm::Value* partner_first) {
    for (size_t k = 0; k < total.size(); ++k) {
      llvm::Value* theirs = target_.shuffle_xor(b_, total[k], bit);
      before[k] = b_.CreateSelect(partner_first, combine(theirs, before[k]), before[k]);
      total[k] = combine(total[k], theirs);
    }
  });
  // Across warps, through shared memory: every thread reads the group
  // totals of the warps holding its lines, in the same order.
  if (const int warps = plan.holder_bits & ~(target_.warp_size() - 1); warps != 0) {
    llvm::Value* mine = b_.CreateAnd(thread_, b_.getInt64(warps));
    std::vector<llvm::Value*> earlier(total.size(), identity), all(total.size(), nullptr);
    exchange_warps(total, plan.holder_bits, [&](int m, int64_t k, llvm::Value* theirs) {
      llvm::Value* first = reverse ? b_.CreateICmpUGT(b_.getInt64(m), mine) : b_.CreateICmpULT(b_.getInt64(m), mine);
      earlier[k] = b_.CreateSelect(first, combine(earlier[k], theirs), earlier[k]);
      all[k] = all[k] == nullptr ? theirs : combine(all[k], theirs);
    });
    for (size_t k = 0; k < total.size(); ++k) before[k] = combine(earlier[k], before[k]);
    total = std::move(all);
  }
  // The rounds in order: each chunk's elements take everything before it.
  for (int64_t g = 0; g < lines; ++g) {
    llvm::Value* carry = identity;
    for (int64_t step = 0; step < rounds; ++step) {
      const int64_t r = reverse ? rounds - 1 - step : step, k = g * rounds + r;
      llvm::Value* prefix = combine(carry, before[k]);
      for (int64_t s : plan.slots[g][r]) out[s] = ops_.narrow(combine(prefix, out[s]), d);
      carry = combine(carry, total[k]);
    }
  }
  regs_[o.results[0]] = {std::move(l), std::move(out)};
}

void Lowering::scan_segments(const Op& o, const Shape& outer, int64_t parts, llvm::Value* out, llvm::Value* identity,
                             const Combine& combine) {
  const Type& in = ir_.type(o.operands[0]);
  const Type& rt = ir_.type(o.results[0]);
  const int axis = static_cast<int>(o.ints[0]);
  const bool reverse = o.ints[2] != 0;
  const DType d = in.dtype();
  const int64_t n = in.shape()[axis], len = (n + parts - 1) / parts;
  llvm::Type* acc_t = identity->getType();
  llvm::Value* totals =
      smem_alloc(numel(outer) * parts * module_->getDataLayout().getTypeAllocSize(acc_t), /*align=*/16);
  // Thread t takes segment t % parts of line t / parts; segment 0 comes
  // first in the scan's order (last along the axis in reverse).
  llvm::Value* line = b_.CreateUDiv(thread_, b_.getInt64(parts));
  llvm::Value* part = b_.CreateURem(thread_, b_.getInt64(parts));
  llvm::Value* active = b_.CreateICmpULT(thread_, b_.getInt64(numel(outer) * parts));
  // Segments of `len` elements, the last ones shorter (or empty) where
  // `parts` does not divide n.
  llvm::Value* start = b_.CreateMul(part, b_.getInt64(len));
  llvm::Value* end =
      b_.CreateBinaryIntrinsic(llvm::Intrinsic::umin, b_.CreateAdd(start, b_.getInt64(len)), b_.getInt64(n));
  // Runs `body` on each element of the thread's segment in order, with the
  // accumulator `acc` (a stack slot) combined with it.
  auto walk = [&](llvm::Value* acc, const std::function<void(ElemIndex&, llvm::Value*)>& body) {
    std::vector<llvm::Value*> line_dims = unravel(line, outer);
    emit_loop(b_, start, end, b_.getInt64(1), [&](llvm::Value* i) {
      ElemIndex at = at_axis(in.shape(), axis, line_dims, reverse ? b_.CreateSub(b_.getInt64(n - 1), i) : i);
      llvm::Value* next = combine(b_.CreateLoad(acc_t, acc), ops_.widen(element(o.operands[0], at), d));
      b_.CreateStore(next, acc);
      body(at, next);
    });
  };
  guarded(active, [&] {
    llvm::Value* acc = stack_slot(acc_t);
    b_.CreateStore(identity, acc);
    walk(acc, [](ElemIndex&, llvm::Value*) {});
    b_.CreateStore(b_.CreateLoad(acc_t, acc), b_.CreateGEP(acc_t, totals, thread_));
  });
  target_.program_barrier(b_);
  guarded(active, [&] {
    llvm::Value* acc = stack_slot(acc_t);
    b_.CreateStore(identity, acc);
    llvm::Value* first = b_.CreateSub(thread_, part);
    emit_loop(b_, b_.getInt64(0), part, b_.getInt64(1), [&](llvm::Value* j) {
      llvm::Value* theirs = b_.CreateLoad(acc_t, b_.CreateGEP(acc_t, totals, b_.CreateAdd(first, j)));
      b_.CreateStore(combine(b_.CreateLoad(acc_t, acc), theirs), acc);
    });
    walk(acc, [&](ElemIndex& at, llvm::Value* v) { store_elem(out, rt, at.linear, ops_.narrow(v, d)); });
  });
  target_.program_barrier(b_);
  shared_.erase(totals);
}

absl::Status Lowering::scan(const Op& o, const Type& rt) {
  const Type& in = ir_.type(o.operands[0]);
  const int axis = static_cast<int>(o.ints[0]);
  const auto combiner = static_cast<OpCode>(o.ints[1]);
  const bool reverse = o.ints[2] != 0;
  const DType d = in.dtype(), acc_d = is_narrow_float(d) ? f32 : d;
  llvm::Type* acc_t = reg_type(acc_d);
  llvm::Value* identity = reduce_identity(combiner, acc_d, acc_t);
  auto combine = [&](llvm::Value* x, llvm::Value* y) { return ops_.binary(combiner, acc_d, x, y); };
  if (in_registers(in)) {
    std::shared_ptr<const Layout> l = layout(o.operands[0]);
    std::optional<ScanPlan> plan = scan_plan(*l, in.shape(), axis);
    if (plan.has_value() &&
        ((plan->holder_bits & ~(target_.warp_size() - 1)) == 0 ||
         across_warps_fits(o, acc_t, static_cast<int64_t>(plan->slots.size()) * plan->rounds, plan->holder_bits))) {
      scan_registers(o, std::move(l), *plan, identity, combine);
      return absl::OkStatus();
    }
  }
  hold(o);
  Shape outer = in.shape();
  outer.erase(outer.begin() + axis);
  const int64_t n = in.shape()[axis];
  llvm::Value* out = new_buffer(rt);
  // Fewer lines than threads: each line in as many segments as keep the
  // threads busy.
  if (const int64_t parts = line_parts(outer, n); parts > 1) {
    scan_segments(o, outer, parts, out, identity, combine);
    set(o, out);
    return absl::OkStatus();
  }
  // Combines element k along the axis (counted from the end in reverse) at
  // position `at` of the other axes into the accumulator `slot`, and stores
  // the result there.
  auto step = [&](llvm::Value* slot, ElemIndex& at, llvm::Value* k) {
    ElemIndex along = at_axis(in.shape(), axis, at.dims, reverse ? b_.CreateSub(b_.getInt64(n - 1), k) : k);
    llvm::Value* next = combine(b_.CreateLoad(acc_t, slot), ops_.widen(element(o.operands[0], along), d));
    b_.CreateStore(next, slot);
    store_elem(out, rt, along.linear, ops_.narrow(next, d));
  };
  each_line(outer, n, axis + 1 == in.rank(), acc_t, identity, step);
  set(o, out);
  return absl::OkStatus();
}

}  // namespace tessel::codegen
