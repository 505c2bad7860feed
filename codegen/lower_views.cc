// Views and data movement between tile shapes: expand_dims and reshape keep
// their operand's elements in order; broadcast and trans permute them;
// gather picks them.
#include "codegen/lowering.h"

namespace tessel::codegen {

absl::Status Lowering::view(const Op& o) {
  // The same elements in the same row-major order: the same buffer, or
  // the same registers (the plan gives a view its operand's layout).
  if (!regs_[o.operands[0]].slots.empty()) {
    regs_[o.results[0]] = regs_[o.operands[0]];
  } else if (!inline_[o.operands[0]] && !inline_[o.results[0]]) {
    set(o, val(o.operands[0]));
  } else {
    define_elements(o);
  }
  return absl::OkStatus();
}

absl::Status Lowering::permute(const Op& o, const Type& rt) {
  const Type& in = ir_.type(o.operands[0]);
  if (o.op == OpCode::kBroadcast && (in_registers(rt) || wanted_[o.results[0]] != nullptr) &&
      !regs_[o.operands[0]].slots.empty()) {
    // A slice broadcast back along its axis to its parent layout: each slot
    // takes its row's value from this thread's own registers.
    // (Held in the slice of another parent that puts each position where
    // this one does, it reads the same registers.)
    const RegTile& src = regs_[o.operands[0]];
    auto* slice = dynamic_cast<const SliceLayout*>(src.layout.get());
    const std::shared_ptr<const Layout>& want = layout(o.results[0]);
    if (slice != nullptr && slice->axis() < rt.rank()) {
      Shape kept = rt.shape();
      kept[slice->axis()] = 1;
      const SliceLayout into(want, rt.shape(), slice->axis());
      if (in.shape() == kept && slice->same_as(into)) {
        std::vector<llvm::Value*> out;
        for (int64_t slot = 0; slot < want->slots(); ++slot) out.push_back(src.slots[into.slot_of(slot)]);
        set_regs(o, std::move(out));
        return absl::OkStatus();
      }
    }
  }
  if (o.op == OpCode::kBroadcast && (in_registers(rt) || wanted_[o.results[0]] != nullptr) &&
      index_tile_[o.operands[0]]) {
    // An index tile held in another slice (a row index broadcast to tiles of
    // two widths) or in memory: each slot computes its element again, which
    // costs less than a trip through shared memory and a barrier.
    recompute_index_ = true;
    set_regs(o, each_slot(*layout(o.results[0]), rt.shape(), [&](ElemIndex& at, int64_t) { return compute(o, at); }));
    recompute_index_ = false;
    return absl::OkStatus();
  }
  if (o.op == OpCode::kBroadcast && wanted_[o.results[0]] != nullptr && !regs_[o.operands[0]].slots.empty()) {
    // Wanted, but held in another layout (a gathered row's pointers, wanted
    // by the copies of a ring and by a store): the row or column converted
    // into the slice, not the broadcast tile through a buffer.
    const std::shared_ptr<const Layout>& want = layout(o.results[0]);
    if (const int axis = stretched_axis(o); axis >= 0) {
      const SliceLayout into(want, rt.shape(), axis);
      std::vector<llvm::Value*> row = regs(o.operands[0], into), out;
      for (int64_t slot = 0; slot < want->slots(); ++slot) out.push_back(row[into.slot_of(slot)]);
      set_regs(o, std::move(out));
      return absl::OkStatus();
    }
  }
  const bool from_buffer = regs_[o.operands[0]].slots.empty();
  if (wanted_[o.results[0]] != nullptr &&
      ((o.op == OpCode::kBroadcast && (!in_registers(rt) || from_buffer)) || o.op == OpCode::kTrans ||
       o.op == OpCode::kNarrow || o.op == OpCode::kConcat)) {
    // Wanted in a register layout: a broadcast tile too large for registers
    // by itself (in an accumulator's layout, for the epilogue) or of a tile
    // held in shared memory (a row of statistics the copy engine loaded),
    // or a transpose (in the layout of a product's register operand, dS of
    // dS @ K when dS^T is what the registers hold). Each slot reads its
    // element from the operand's buffer: no copy of the whole tile.
    hold(o);
    set_regs(o, each_slot(*wanted_[o.results[0]], rt.shape(), [&](ElemIndex& at, int64_t) { return compute(o, at); }));
    return absl::OkStatus();
  }
  define_elements(o);
  return absl::OkStatus();
}

absl::Status Lowering::narrow(const Op& o, const Type& rt) {
  const int x = o.operands[0];
  const RegTile& src = regs_[x];
  if (src.slots.empty()) return permute(o, rt);
  if (is_splat(x)) {
    set_regs(o, std::vector<llvm::Value*>(layout(o.results[0])->slots(), src.slots[0]));
    return absl::OkStatus();
  }
  const Narrowed part =
      narrow_layout(src.layout, ir_.type(x).shape(), static_cast<int>(o.ints[0]), o.ints[1], rt.shape()[o.ints[0]]);
  std::vector<llvm::Value*> slots;
  for (int64_t s : part.from) slots.push_back(src.slots[s]);
  regs_[o.results[0]] = {part.layout, std::move(slots)};
  return absl::OkStatus();
}

absl::Status Lowering::concat(const Op& o, const Type& rt) {
  const int a = o.operands[0], b = o.operands[1];
  if (regs_[a].slots.empty() || regs_[b].slots.empty()) return permute(o, rt);
  const int axis = static_cast<int>(o.ints[0]);
  std::vector<llvm::Value*> slots = regs_[a].slots;
  slots.insert(slots.end(), regs_[b].slots.begin(), regs_[b].slots.end());
  regs_[o.results[0]] = {std::make_shared<ConcatLayout>(regs_[a].layout, regs_[b].layout, ir_.type(a).shape(), axis,
                                                        ir_.type(b).shape()[axis]),
                         std::move(slots)};
  return absl::OkStatus();
}

absl::Status Lowering::gather(const Op& o, const Type& rt) {
  if (!in_registers(rt) && wanted_[o.results[0]] == nullptr) {
    define_elements(o);
    return absl::OkStatus();
  }
  // Every thread reads what its slots pick from the source's buffer (written
  // there from registers first, for all threads to read).
  const Layout& want = *layout(o.results[0]);
  const std::vector<llvm::Value*> index = regs(o.operands[1], want);
  held_.clear();
  hold(o.operands[0]);
  set_regs(o, each_slot(want, rt.shape(), [&](ElemIndex& at, int64_t slot) { return gathered(o, at, index[slot]); }));
  return absl::OkStatus();
}

std::pair<llvm::Value*, llvm::Value*> Lowering::index_inside(llvm::Value* x, DType d, int64_t size) {
  // A negative index is a large unsigned one: one compare finds both ends.
  llvm::Value* i = d.is_signed() ? b_.CreateSExtOrTrunc(x, b_.getInt64Ty()) : b_.CreateZExtOrTrunc(x, b_.getInt64Ty());
  return {i, b_.CreateICmpULT(i, b_.getInt64(size))};
}

llvm::Value* Lowering::gathered(const Op& o, ElemIndex& at, llvm::Value* index) {
  const Type& src = ir_.type(o.operands[0]);
  const int axis = static_cast<int>(o.ints[0]);
  const auto [i, inside] = index_inside(index, ir_.type(o.operands[1]).dtype(), src.shape()[axis]);
  std::vector<llvm::Value*> dims = at.dims;
  dims[axis] = b_.CreateSelect(inside, i, b_.getInt64(0));
  ElemIndex from = at_dims(src.shape(), std::move(dims));
  llvm::Value* v = element(o.operands[0], from);
  return b_.CreateSelect(inside, v, llvm::Constant::getNullValue(v->getType()));
}

std::vector<llvm::Value*> Lowering::each_slot(const Layout& want, const Shape& shape,
                                              const std::function<llvm::Value*(ElemIndex&, int64_t)>& element_at) {
  std::vector<llvm::Value*> out;
  for (int64_t slot = 0; slot < want.slots(); ++slot) {
    llvm::Value* e = want.element(b_, thread_, slot);
    if (llvm::Value* ok = want.valid(b_, thread_, slot)) e = b_.CreateSelect(ok, e, b_.getInt64(0));
    ElemIndex at = at_linear(shape, e);
    out.push_back(element_at(at, slot));
  }
  return out;
}

}  // namespace tessel::codegen
