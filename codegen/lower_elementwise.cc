// Elementwise ops: one element's arithmetic (through ScalarOps), the op over
// a whole tile (in registers, or element by element), the layout it
// computes in, and the slices that broadcasts ask their operands to take.
#include "base/status.h"
#include "codegen/lowering.h"
#include "dsl/ops.h"

namespace tessel::codegen {

void Lowering::want_slices() {
  bool grew = true;
  auto wish = [&](int v, const std::shared_ptr<const Layout>& l) {
    if (l == nullptr || !ir_.type(v).is_tile() || wanted_[v] != nullptr) return;
    wanted_[v] = l;
    grew = true;
  };
  // Values that are one tile at different points (a branch's result and
  // what its branches yield; a loop's start, result, its body's argument
  // and what the body yields) take one layout: the first any of them wants.
  auto merge = [&](const std::vector<int>& same) {
    std::shared_ptr<const Layout> l;
    for (int v : same) l = l != nullptr ? l : wanted_[v];
    for (int v : same) wish(v, l);
  };
  // Wishes spread along ops until none is added: an accumulator's
  // products, the row statistics a loop carries beside it (the running
  // maximum of an online softmax) and the slices broadcasts read.
  // A broadcast's operand takes the slice of its result's wanted layout;
  // only once no wanted layout spreads further, of its planned one.
  bool planned_slices = false;
  for (bool settled = false; !settled;) {
    if (!grew) planned_slices = true;
    grew = false;
    for (const Op& o : ir_.ops) {
      if (o.op == OpCode::kIf || o.op == OpCode::kFor || o.op == OpCode::kWhile) {
        for (const std::vector<int>& same : carried_tiles(ir_, o)) merge(same);
      }
    }
    // An elementwise op on a tile that wants a layout (an accumulator)
    // computes in it, whatever its size: the epilogue of a matrix product
    // stays in the product's registers.
    for (const Op& o : ir_.ops) {
      // A part or a join of such tiles stays in the registers that hold
      // them there (its layout made once, not on each pass to the fixed point).
      const bool unwished = !o.results.empty() && wanted_[o.results[0]] == nullptr;
      if (unwished && o.op == OpCode::kNarrow && wanted_[o.operands[0]] != nullptr) {
        wish(o.results[0],
             narrow_layout(wanted_[o.operands[0]], ir_.type(o.operands[0]).shape(), static_cast<int>(o.ints[0]),
                           o.ints[1], ir_.type(o.results[0]).shape()[o.ints[0]])
                 .layout);
      }
      if (unwished && o.op == OpCode::kConcat && wanted_[o.operands[0]] != nullptr &&
          wanted_[o.operands[1]] != nullptr) {
        const int axis = static_cast<int>(o.ints[0]);
        wish(o.results[0], std::make_shared<ConcatLayout>(wanted_[o.operands[0]], wanted_[o.operands[1]],
                                                          ir_.type(o.operands[0]).shape(), axis,
                                                          ir_.type(o.operands[1]).shape()[axis]));
      }
      if (!is_elementwise(o.op) || o.results.empty() || !ir_.type(o.results[0]).is_tile()) continue;
      for (int v : o.operands) {
        if (wanted_[v] != nullptr && ir_.type(v).shape() == ir_.type(o.results[0]).shape()) {
          wish(o.results[0], wanted_[v]);
        }
      }
    }
    for (auto o = ir_.ops.rbegin(); o != ir_.ops.rend(); ++o) {
      // A store of a value wanted in a layout (a product's C through
      // pointers) computes its pointers and mask there too, whatever their
      // size; or, where it stages the value, in their planned layout.
      if (o->op == OpCode::kStore && wanted_[o->operands[1]] != nullptr) {
        const bool staged = stages_store(*o);
        if (staged) staged_stores_.insert(&*o);
        for (size_t i = 0; i < o->operands.size(); i += 2) {
          wish(o->operands[i], staged ? planned(o->operands[i]) : wanted_[o->operands[1]]);
        }
      }
      if (o->results.empty() || !ir_.type(o->results[0]).is_tile()) continue;
      int r = o->results[0];
      const Type& rt = ir_.type(r);
      if (o->op == OpCode::kBroadcast && (in_registers(rt) || wanted_[r] != nullptr)) {
        const int axis = stretched_axis(*o);
        if (axis >= 0 && (wanted_[r] != nullptr || planned_slices)) {
          wish(o->operands[0], std::make_shared<SliceLayout>(layout(r), rt.shape(), axis));
        }
      } else if (wanted_[r] != nullptr && (is_elementwise(o->op) || op_traits(o->op).view || o->op == OpCode::kLoad)) {
        for (int v : o->operands) wish(v, wanted_[r]);
      }
    }
    settled = planned_slices && !grew;
  }
  // A store through pointers wanted in a layout takes its values there.
  for (const Op& o : ir_.ops) {
    if (o.op != OpCode::kStore || wanted_[o.operands[0]] == nullptr) continue;
    for (size_t i = 1; i < o.operands.size(); ++i) wish(o.operands[i], wanted_[o.operands[0]]);
  }
}

bool Lowering::stages_store(const Op& o) const {
  const Type& vt = ir_.type(o.operands[1]);
  const std::shared_ptr<const Layout>& held = wanted_[o.operands[1]];
  return overlap_.stage_stores && target_.swizzles_shared_tiles() && held != nullptr &&
         dynamic_cast<const SliceLayout*>(held.get()) == nullptr && vt.is_tile() && vt.rank() == 2 &&
         vt.dtype().bytes() == 2 && widest_swizzle(vt) != Swizzle::kNone &&
         analysis_.access_run(o) * vt.dtype().bytes() >= kVectorBytes &&
         contiguous_run(*held, kVectorBytes / vt.dtype().bytes()) * vt.dtype().bytes() < kVectorBytes;
}

llvm::Value* Lowering::elementwise(const Op& o, const std::vector<llvm::Value*>& args) {
  const Type& t0 = ir_.type(o.operands[0]);
  DType d = t0.dtype();
  const bool fast = !o.ints.empty() && o.ints[0] == static_cast<int64_t>(MathForm::kFast);
  switch (op_traits(o.op).category) {
    case OpCategory::kBinary:
    case OpCategory::kComparison:
      return ops_.binary(o.op, d, args[0], args[1], fast);
    case OpCategory::kUnary:
      return ops_.unary(o.op, d, args[0], fast);
    default:
      break;
  }
  switch (o.op) {
    case OpCode::kFma:
      return ops_.fma(d, args[0], args[1], args[2]);
    case OpCode::kPtrAdd: {
      llvm::Value* off = b_.CreateIntCast(args[1], b_.getInt64Ty(), ir_.type(o.operands[1]).dtype().is_signed());
      return b_.CreateGEP(elem_mem_type(Type(d)), args[0], off);
    }
    case OpCode::kCast:
      return ops_.convert(args[0], d, ir_.type(o.results[0]).dtype());
    case OpCode::kBitcast:
      return b_.CreateBitCast(args[0], reg_type(ir_.type(o.results[0]).dtype()));
    case OpCode::kSelect:
      return b_.CreateSelect(args[0], args[1], args[2]);
    case OpCode::kSplat:
      return args[0];
    default:
      TESSEL_CHECK(false, "not an elementwise op");
  }
  return nullptr;
}

absl::Status Lowering::elementwise_op(const Op& o, const Type& rt) {
  if (!rt.is_tile()) {
    std::vector<llvm::Value*> args;
    for (int v : o.operands) args.push_back(val(v));
    set(o, elementwise(o, args));
    return absl::OkStatus();
  }
  // Tiles small enough live in registers; so does one computed from tiles
  // held there in one layout, whatever its size (as a cast of an
  // accumulator for the epilogue), and a splat of any size (its slots are
  // one value, so that `x * 0.5` on a large register tile stays there).
  if (in_registers(rt) || o.op == OpCode::kSplat || registers_layout(o) != nullptr) {
    std::shared_ptr<const Layout> l = elementwise_layout(o);
    std::vector<std::vector<llvm::Value*>> args;
    for (int v : o.operands) args.push_back(regs(v, *l));
    // A mask equal over runs of elements (AffineAnalysis::constancy, as
    // `c < cols` with cols a multiple of 16) that the layout holds in
    // consecutive slots is computed once per run.
    const int64_t same = rt.dtype().is_bool() ? contiguous_run(*l, analysis_.constancy(o.results[0])) : 1;
    std::vector<llvm::Value*> out(args[0].size());
    for (size_t slot = 0; slot < out.size(); ++slot) {
      if (slot % same != 0) {
        out[slot] = out[slot - slot % same];
        continue;
      }
      std::vector<llvm::Value*> elems;
      for (const auto& a : args) elems.push_back(a[slot]);
      out[slot] = elementwise(o, elems);
    }
    regs_[o.results[0]] = {std::move(l), std::move(out)};
    return absl::OkStatus();
  }
  define_elements(o);
  return absl::OkStatus();
}

std::shared_ptr<const Layout> Lowering::registers_layout(const Op& o) {
  std::shared_ptr<const Layout> common;
  for (int v : o.operands) {
    if (!ir_.type(v).is_tile() || (is_splat(v) && !regs_[v].slots.empty())) continue;
    if (regs_[v].slots.empty()) return nullptr;
    if (common != nullptr && !common->same_as(*regs_[v].layout)) return nullptr;
    common = regs_[v].layout;
  }
  return common;
}

std::shared_ptr<const Layout> Lowering::elementwise_layout(const Op& o) {
  std::vector<std::shared_ptr<const Layout>> held;
  for (int v : o.operands) {
    if (!ir_.type(v).is_tile() || regs_[v].slots.empty() || is_splat(v)) continue;
    const std::shared_ptr<const Layout>& l = regs_[v].layout;
    if (std::none_of(held.begin(), held.end(), [&](const auto& h) { return h->same_as(*l); })) held.push_back(l);
  }
  if (held.size() == 1) return held[0];
  std::vector<std::shared_ptr<const Layout>> tries = {layout(o.results[0])};
  tries.insert(tries.end(), held.begin(), held.end());
  for (const std::shared_ptr<const Layout>& to : tries) {
    auto reaches = [&](const std::shared_ptr<const Layout>& from) {
      return from->same_as(*to) || register_moves(*from, *to, target_.warp_size()).has_value();
    };
    if (std::all_of(held.begin(), held.end(), reaches)) return to;
  }
  return tries[0];
}

}  // namespace tessel::codegen
