// Inclusive scans by a combine function of the kernel's own (scan_fn). The
// function need not commute, so every combine takes the part earlier in the
// scan's order first. In registers along scan_registers' steps (each chunk
// in turn, a butterfly across lanes, one exchange across warps, the rounds
// in order), with a flag beside each part that may be empty, since there is
// no identity; otherwise each line walked from its first element over
// buffers.
#include "codegen/lowering.h"

namespace tessel::codegen {

void Lowering::scan_fn_registers(const Op& o, std::shared_ptr<const Layout> l, const ScanPlan& plan) {
  const bool reverse = o.ints[1] != 0;
  const int64_t lines = static_cast<int64_t>(plan.slots.size()), rounds = plan.rounds;
  std::vector<std::vector<llvm::Value*>> elems;
  for (int v : o.operands) elems.push_back(regs(v, *l));
  auto slot_part = [&](int64_t s) {
    FnPart p;
    for (const std::vector<llvm::Value*>& e : elems) p.values.push_back(e[s]);
    return p;
  };
  // A part that holds nothing.
  FnPart none;
  for (const std::vector<llvm::Value*>& e : elems) none.values.push_back(llvm::Constant::getNullValue(e[0]->getType()));
  none.valid = b_.getFalse();
  // Each chunk a thread holds, scanned from its first element in the scan's
  // order. Chunk k = line * rounds + round.
  std::vector<FnPart> out(l->slots()), total(lines * rounds), before(lines * rounds, none);
  for (int64_t g = 0; g < lines; ++g) {
    for (int64_t r = 0; r < rounds; ++r) {
      const std::vector<int64_t>& chunk = plan.slots[g][r];
      std::optional<FnPart> acc;
      for (int64_t j = 0; j < plan.run; ++j) {
        const int64_t s = chunk[reverse ? plan.run - 1 - j : j];
        acc = acc.has_value() ? combine_fn(o, *acc, slot_part(s)) : slot_part(s);
        out[s] = *acc;
      }
      total[g * rounds + r] = *std::move(acc);
    }
  }
  // The holders' chunks of one round, across lanes: each thread keeps its
  // group's total and what precedes it within the group, each combined in
  // the scan's order.
  scan_lanes(plan.holder_bits, reverse, [&](int bit, llvm::Value* partner_first) {
    for (size_t k = 0; k < total.size(); ++k) {
      FnPart theirs;
      for (llvm::Value* v : total[k].values) theirs.values.push_back(target_.shuffle_xor(b_, v, bit));
      before[k] = select_part(partner_first, combine_fn(o, theirs, before[k]), before[k]);
      total[k] =
          combine_fn(o, select_part(partner_first, theirs, total[k]), select_part(partner_first, total[k], theirs));
    }
  });
  // Across warps: every thread reads the group totals of the warps that
  // hold its lines, lowest warp first, and takes in those before its own.
  if (const int warps = plan.holder_bits & ~(target_.warp_size() - 1); warps != 0) {
    llvm::Value* mine = b_.CreateAnd(thread_, b_.getInt64(warps));
    std::vector<FnPart> earlier(total.size(), none);
    std::vector<std::optional<FnPart>> all(total.size());
    exchange_fn_parts(total, plan.holder_bits, [&](int m, size_t k, const FnPart& theirs) {
      // Ascending warps are the scan's order forwards, its reverse backwards.
      if (reverse) {
        llvm::Value* first = b_.CreateICmpUGT(b_.getInt64(m), mine);
        earlier[k] = select_part(first, combine_fn(o, theirs, earlier[k]), earlier[k]);
        all[k] = all[k].has_value() ? combine_fn(o, theirs, *all[k]) : theirs;
      } else {
        llvm::Value* first = b_.CreateICmpULT(b_.getInt64(m), mine);
        earlier[k] = select_part(first, combine_fn(o, earlier[k], theirs), earlier[k]);
        all[k] = all[k].has_value() ? combine_fn(o, *all[k], theirs) : theirs;
      }
    });
    for (size_t k = 0; k < total.size(); ++k) {
      before[k] = combine_fn(o, earlier[k], before[k]);
      total[k] = *std::move(all[k]);
    }
  }
  // The rounds in order: each chunk's elements take everything before it.
  for (int64_t g = 0; g < lines; ++g) {
    FnPart carry = none;
    for (int64_t step = 0; step < rounds; ++step) {
      const int64_t r = reverse ? rounds - 1 - step : step, k = g * rounds + r;
      const FnPart prefix = combine_fn(o, carry, before[k]);
      for (int64_t s : plan.slots[g][r]) out[s] = combine_fn(o, prefix, out[s]);
      carry = combine_fn(o, carry, total[k]);
    }
  }
  for (size_t i = 0; i < o.operands.size(); ++i) {
    std::vector<llvm::Value*> r;
    for (const FnPart& p : out) r.push_back(p.values[i]);
    regs_[o.results[i]] = {l, std::move(r)};
  }
}

void Lowering::scan_fn_segments(const Op& o, const Shape& outer, int64_t parts, const LineVisit& put) {
  const int axis = static_cast<int>(o.ints[0]);
  const bool reverse = o.ints[1] != 0;
  FnSegments seg = fn_segment_totals(o, outer, parts, reverse);
  guarded(seg.at.active, [&] {
    // The segments before this one, then this one's elements after them.
    const FnPart prefix = fn_segments_combined(o, seg, b_.CreateSub(thread_, seg.at.part), seg.at.part);
    LineSpan span = seg.span();
    span.prefix = &prefix;
    fn_line(o, axis, seg.dims, reverse, put, span);
  });
  fn_segments_done(seg);
}

absl::Status Lowering::scan_fn(const Op& o) {
  const Type& in = ir_.type(o.operands[0]);
  const int axis = static_cast<int>(o.ints[0]);
  const bool reverse = o.ints[1] != 0;
  const size_t n = o.operands.size();
  if (in_registers(in)) {
    std::shared_ptr<const Layout> l = layout(o.operands[0]);
    std::optional<ScanPlan> plan = scan_plan(*l, in.shape(), axis);
    if (plan.has_value()) {
      // The warps exchange a word per value of each chunk (each holds
      // elements, so its total needs no flag).
      const int64_t words = static_cast<int64_t>(plan->slots.size()) * plan->rounds * static_cast<int64_t>(n);
      if ((plan->holder_bits & ~(target_.warp_size() - 1)) == 0 ||
          across_warps_fits(o, b_.getInt64Ty(), words, plan->holder_bits)) {
        scan_fn_registers(o, std::move(l), *plan);
        return absl::OkStatus();
      }
    }
  }
  // Over buffers: each line from its first element in the scan's order; in
  // segments over the threads where there are fewer lines than threads.
  hold(o);
  Shape outer = in.shape();
  outer.erase(outer.begin() + axis);
  // Results nothing reads (a recurrence's products) take no buffer.
  std::vector<llvm::Value*> bufs;
  for (int r : o.results) bufs.push_back(has_uses(r) ? new_buffer(ir_.type(r)) : nullptr);
  auto put = [&](ElemIndex& here, const std::vector<llvm::Value*>& values) {
    for (size_t i = 0; i < n; ++i) {
      if (bufs[i] != nullptr) store_elem(bufs[i], ir_.type(o.results[i]), here.linear, values[i]);
    }
  };
  if (const int64_t parts = line_parts(outer, in.shape()[axis]); parts > 1) {
    scan_fn_segments(o, outer, parts, put);
    for (size_t i = 0; i < n; ++i) vals_[o.results[i]] = bufs[i];
    return absl::OkStatus();
  }
  each_element(outer, [&](ElemIndex& at) { fn_line(o, axis, at.dims, reverse, put); });
  for (size_t i = 0; i < n; ++i) vals_[o.results[i]] = bufs[i];
  return absl::OkStatus();
}

}  // namespace tessel::codegen
