#include "codegen/layout_table.h"

#include "codegen/layout.h"
#include "codegen/nvptx/mma_sync.h"
#include "codegen/nvptx/wgmma.h"
#include "dsl/types.h"
#include "llvm/IR/Constants.h"

namespace tessel::codegen {
namespace {

// -2 marks IR that did not fold to a constant, which no layout should emit.
int64_t constant_or(llvm::Value* v, int64_t otherwise) {
  auto* c = llvm::dyn_cast<llvm::ConstantInt>(v);
  return c != nullptr ? static_cast<int64_t>(c->getZExtValue()) : otherwise;
}

LayoutTable tabulate(const Layout& l, int warp_size) {
  llvm::LLVMContext ctx;
  llvm::IRBuilder<> b(ctx);  // no insertion point: constant operands fold
  LayoutTable table;
  table.threads = l.threads();
  table.slots = l.slots();
  for (int t = 0; t < l.threads(); ++t) {
    for (int64_t s = 0; s < l.slots(); ++s) {
      llvm::Value* valid = l.valid(b, b.getInt64(t), s);
      int64_t ok = valid == nullptr ? 1 : constant_or(valid, -2);
      int64_t e = constant_or(l.element(b, b.getInt64(t), s), -2);
      table.emitted.push_back(ok == 1 ? e : (ok == 0 ? -1 : -2));
      table.at.push_back(l.element_at(t, s));
    }
  }
  table.butterfly = butterfly_lanes(l, warp_size);
  table.holders = holder_bits(l);
  return table;
}

}  // namespace

LayoutTable tabulate_blocked(int64_t numel, int threads, Blocking blocking, int warp_size) {
  return tabulate(*blocked_layout(numel, threads, blocking), warp_size);
}

LayoutTable tabulate_slice(const std::vector<int64_t>& shape, int axis, int threads, Blocking blocking,
                           int warp_size) {
  SliceLayout slice(blocked_layout(numel(shape), threads, blocking), shape, axis);
  LayoutTable table = tabulate(slice, warp_size);
  for (int64_t s = 0; s < slice.parent().slots(); ++s) table.slot_of.push_back(slice.slot_of(s));
  return table;
}

namespace {

LayoutTable tabulate_narrow(const std::shared_ptr<const Layout>& parent, const std::vector<int64_t>& shape, int axis,
                            int64_t start, int64_t size, int warp_size) {
  const Narrowed part = narrow_layout(parent, shape, axis, start, size);
  LayoutTable table = tabulate(*part.layout, warp_size);
  table.slot_of = part.from;
  table.own_kind = dynamic_cast<const NarrowLayout*>(part.layout.get()) == nullptr;
  return table;
}

}  // namespace

LayoutTable tabulate_narrow(const std::vector<int64_t>& shape, int axis, int64_t start, int64_t size, int threads,
                            Blocking blocking, int warp_size) {
  return tabulate_narrow(blocked_layout(numel(shape), threads, blocking), shape, axis, start, size, warp_size);
}

LayoutTable tabulate_narrow_accumulator(int64_t m, int64_t n, int warpgroups, int col_groups, int axis, int64_t start,
                                        int64_t size) {
  return tabulate_narrow(nvptx::wgmma_accumulator_layout(m, n, warpgroups, col_groups), {m, n}, axis, start, size, 32);
}

LayoutTable tabulate_mma_sync(int64_t m, int64_t n, nvptx::MmaWarps warps) {
  return tabulate(*nvptx::mma_sync_accumulator_layout(m, n, warps), 32);
}

int64_t emitted_ldmatrix_lane_offset(const nvptx::StoredOperand& op, nvptx::LdmatrixLanes lanes, int64_t mn, int64_t k,
                                     int64_t origin, int64_t lane) {
  llvm::LLVMContext ctx;
  llvm::IRBuilder<> b(ctx);  // no insertion point: constant operands fold
  return constant_or(nvptx::ldmatrix_lane_offset(b, op, lanes, mn, k, b.getInt64(origin), b.getInt64(lane)), -2);
}

LayoutTable tabulate_concat(const std::vector<int64_t>& a_shape, int64_t b_size, int axis, int threads,
                            Blocking a_blocking, Blocking b_blocking, int warp_size) {
  const int64_t a_numel = numel(a_shape), b_numel = a_numel / a_shape[axis] * b_size;
  return tabulate(ConcatLayout(blocked_layout(a_numel, threads, a_blocking),
                               blocked_layout(b_numel, threads, b_blocking), a_shape, axis, b_size),
                  warp_size);
}

namespace {

MovesTable tabulate_moves(const Layout& from, const Layout& to, int warp_size) {
  MovesTable table = {.from = tabulate(from, warp_size), .to = tabulate(to, warp_size), .moves = std::nullopt};
  if (std::optional<std::vector<SlotSources>> moves = register_moves(from, to, warp_size)) {
    table.moves.emplace();
    for (const SlotSources& sources : *moves) {
      std::vector<std::pair<int64_t, int>>& slot = table.moves->emplace_back();
      for (const SlotSource& m : sources) slot.emplace_back(m.from, m.lanes);
    }
  }
  return table;
}

}  // namespace

MovesTable moves_between_blocked(int64_t numel, int threads, Blocking from, Blocking to, int warp_size) {
  return tabulate_moves(*blocked_layout(numel, threads, from), *blocked_layout(numel, threads, to), warp_size);
}

MovesTable moves_from_swapped_halves(const std::vector<int64_t>& shape, int axis, int threads, Blocking blocking,
                                     int warp_size) {
  std::shared_ptr<const Layout> whole = blocked_layout(numel(shape), threads, blocking);
  const int64_t half = shape[axis] / 2;
  std::vector<int64_t> half_shape = shape;
  half_shape[axis] = half;
  ConcatLayout swapped(narrow_layout(whole, shape, axis, half, half).layout,
                       narrow_layout(whole, shape, axis, 0, half).layout, half_shape, axis, half);
  return tabulate_moves(swapped, *whole, warp_size);
}

std::optional<ScanPlan> scan_plan_of_blocked(const std::vector<int64_t>& shape, int axis, int threads,
                                             Blocking blocking) {
  return scan_plan(*blocked_layout(numel(shape), threads, blocking), shape, axis);
}

std::optional<SortPlan> sort_plan_of_blocked(const std::vector<int64_t>& shape, int axis, int threads,
                                             Blocking blocking) {
  return sort_plan(*blocked_layout(numel(shape), threads, blocking), shape, axis);
}

}  // namespace tessel::codegen
