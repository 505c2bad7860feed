// Loads, stores and atomics: through pointer tiles (affine ones compute
// their addresses), from registers or shared-memory buffers, with masks.
#include <algorithm>
#include <functional>

#include "base/status.h"
#include "base/tma_rules.h"
#include "codegen/hazards.h"
#include "codegen/loops.h"
#include "codegen/lowering.h"
#include "dsl/ops.h"

namespace tessel::codegen {

using llvm::IRBuilder;

std::function<llvm::Value*(Lowering::ElemIndex&)> Lowering::addresses(int id) {
  if (!analysis_.affine(id)) {
    return [this, id](ElemIndex& at) { return element(id, at); };
  }
  const Affine& a = *analysis_.affine(id);
  const Type& t = ir_.type(id);
  llvm::Value* base = affine_base(a, t);
  return [this, base, a, t](ElemIndex& at) {
    llvm::Value* offset = b_.getInt64(0);
    for (size_t d = 0; d < at.dims.size(); ++d) {
      if (a.strides[d] != 0) offset = b_.CreateAdd(offset, b_.CreateMul(at.dims[d], b_.getInt64(a.strides[d])));
    }
    return b_.CreateGEP(elem_mem_type(Type(t.dtype())), base, offset);
  };
}

llvm::Value* Lowering::affine_base(const Affine& a, const Type& t) {
  llvm::Value* offset = b_.getInt64(a.constant);
  for (auto [v, c] : a.terms) {
    llvm::Value* x = b_.CreateIntCast(val(v), b_.getInt64Ty(), ir_.type(v).dtype().is_signed());
    offset = b_.CreateAdd(offset, b_.CreateMul(x, b_.getInt64(c)));
  }
  return b_.CreateGEP(elem_mem_type(Type(t.dtype())), val(a.pointer), offset);
}

std::vector<llvm::Value*> Lowering::register_addresses(int id, const Layout& l) {
  if (!analysis_.affine(id)) return regs(id, l);
  const Affine& a = *analysis_.affine(id);
  const Type& t = ir_.type(id);
  // Strides that are the tile's own row-major ones times s: the address is
  // base + s * element, and a layout's element (a thread's part plus the
  // slot's constant) leaves each slot one constant offset from the others.
  const std::vector<int64_t> own = strides(t.shape());
  bool scaled = true;
  for (size_t d = 0; d < own.size(); ++d) scaled = scaled && a.strides[d] == a.strides.back() * own[d];
  std::vector<llvm::Value*> out;
  if (scaled) {
    llvm::Value* base = affine_base(a, t);
    for (int64_t slot = 0; slot < l.slots(); ++slot) {
      llvm::Value* e = b_.CreateMul(l.element(b_, thread_, slot), b_.getInt64(a.strides.back()));
      out.push_back(b_.CreateGEP(elem_mem_type(Type(t.dtype())), base, e));
    }
    return out;
  }
  std::function<llvm::Value*(ElemIndex&)> address = addresses(id);
  for (int64_t slot = 0; slot < l.slots(); ++slot) {
    ElemIndex at = at_linear(t.shape(), l.element(b_, thread_, slot));
    out.push_back(address(at));
  }
  return out;
}

llvm::Value* Lowering::checked(const Op& o, llvm::Value* p, int64_t bytes, llvm::Value* mask) {
  if (!target_.checks_accesses()) return mask;
  const int op = static_cast<int>(&o - ir_.ops.data());
  const int param = root_param(o.operands[0]);
  if (mask == nullptr) return target_.access_ok(b_, param, p, b_.getInt64(bytes), op);
  // A masked-off lane asks about nothing: no bytes.
  return b_.CreateAnd(mask,
                      target_.access_ok(b_, param, p, b_.CreateSelect(mask, b_.getInt64(bytes), b_.getInt64(0)), op));
}

int Lowering::root_param(int v) const {
  const int param = pointer_params_[v];
  for (size_t i = 0; i < ir_.params.size(); ++i) {
    if (ir_.params[i].value == param) return static_cast<int>(i);
  }
  return -1;
}

absl::Status Lowering::load(const Op& o, const Type& rt) {
  if (copied_.contains(&o)) {  // in its ring's stage already
    set(o, ring_tile(o));
    return absl::OkStatus();
  }
  if (ir_.type(o.operands[0]).is_tile()) {
    // (A tile wanted in a register layout, an accumulator's, is loaded
    // there whatever its size.)
    if (in_registers(rt) || wanted_[o.results[0]] != nullptr) return load_registers(o, rt);
    define_elements(o);
    return absl::OkStatus();
  }
  ElemIndex scalar;
  set(o, load_element(o, scalar));
  return absl::OkStatus();
}

llvm::Value* Lowering::load_element(const Op& o, ElemIndex& at) {
  const bool masked = o.operands.size() == 3;
  llvm::Value* p = ir_.type(o.operands[0]).is_tile() ? addresses(o.operands[0])(at) : val(o.operands[0]);
  return load_scalar(o, p, masked ? element(o.operands[1], at) : nullptr,
                     masked ? element(o.operands[2], at) : nullptr);
}

llvm::Value* Lowering::load_scalar(const Op& o, llvm::Value* p, llvm::Value* mask, llvm::Value* other) {
  const Type& rt = ir_.type(o.results[0]);
  llvm::Type* mt = elem_mem_type(rt);
  llvm::Value* ok = checked(o, p, module_->getDataLayout().getTypeStoreSize(mt), mask);
  return from_memory(predicated_load(mt, p, ok, other != nullptr ? to_memory(other, mt) : nullptr,
                                     module_->getDataLayout().getABITypeAlign(mt)),
                     rt);
}

bool Lowering::may_write(const Op& o, int param) const {
  if (!op_traits(o.op).writes_memory || o.op == OpCode::kTmaStore) return false;
  if (o.op != OpCode::kStore && o.op != OpCode::kAtomic && o.op != OpCode::kAtomicCas) return true;
  const int written = pointer_params_[o.operands[0]];
  return written == kAnyParameter || written == param;
}

bool Lowering::reads_unwritten(const Op& o) const {
  const int param = pointer_params_[o.operands[0]];
  return param != kAnyParameter &&
         std::none_of(ir_.ops.begin(), ir_.ops.end(), [&](const Op& w) { return may_write(w, param); });
}

absl::Status Lowering::load_registers(const Op& o, const Type& rt) {
  bool masked = o.operands.size() == 3;
  llvm::Type* mt = elem_mem_type(rt);
  const Layout& l = *layout(o.results[0]);
  int64_t run = access_run(o, l);
  std::vector<llvm::Value*> ptrs = register_addresses(o.operands[0], l);
  std::vector<llvm::Value*> masks = masked ? regs(o.operands[1], l) : std::vector<llvm::Value*>();
  std::vector<llvm::Value*> others = masked ? regs(o.operands[2], l) : std::vector<llvm::Value*>();
  auto* vector_type = llvm::FixedVectorType::get(mt, static_cast<unsigned>(run));
  llvm::Type* access_type = run == 1 ? mt : vector_type;
  llvm::Align align(run * module_->getDataLayout().getTypeAllocSize(mt));
  std::vector<llvm::Value*> out;
  for (int64_t slot = 0; slot < l.slots(); slot += run) {
    // Validity and mask are the same over the run: take its first slot's.
    llvm::Value* ok = l.valid(b_, thread_, slot);
    if (masked) ok = ok == nullptr ? masks[slot] : b_.CreateAnd(ok, masks[slot]);
    // A run that is skipped takes `other` (zeros where there is none, so
    // that nothing downstream sees poison).
    llvm::Value* skipped = llvm::Constant::getNullValue(access_type);
    if (masked && run == 1) skipped = to_memory(others[slot], mt);
    for (int64_t lane = 0; masked && run > 1 && lane < run; ++lane) {
      skipped = b_.CreateInsertElement(skipped, to_memory(others[slot + lane], mt), lane);
    }
    llvm::Value* v = predicated_load(access_type, ptrs[slot], ok, skipped, align);
    for (int64_t lane = 0; lane < run; ++lane) {
      llvm::Value* e = run == 1 ? v : b_.CreateExtractElement(v, lane);
      out.push_back(from_memory(e, rt));
    }
  }
  set_regs(o, std::move(out));
  return absl::OkStatus();
}

llvm::Value* Lowering::predicated_load(llvm::Type* type, llvm::Value* p, llvm::Value* ok, llvm::Value* other,
                                       llvm::Align align) {
  if (ok == nullptr) return b_.CreateAlignedLoad(type, p, align);
  if (llvm::Value* v = target_.masked_load(b_, type, p, ok, other)) return v;
  return guarded_value(ok, [&] { return b_.CreateAlignedLoad(type, p, align); }, other);
}

void Lowering::predicated_store(llvm::Value* v, llvm::Value* p, llvm::Value* ok, llvm::Align align) {
  if (ok == nullptr || !target_.masked_store(b_, v, p, ok)) {
    guarded(ok, [&] { b_.CreateAlignedStore(v, p, align); });
  }
}

void Lowering::guarded(llvm::Value* mask, const std::function<void()>& body) {
  if (mask == nullptr) {
    body();
  } else {
    emit_if(b_, mask, body);
  }
}

llvm::Value* Lowering::guarded_value(llvm::Value* mask, const std::function<llvm::Value*()>& body,
                                     llvm::Value* otherwise) {
  if (mask == nullptr) return body();
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  llvm::Value* v = nullptr;
  llvm::BasicBlock* in = nullptr;
  guarded(mask, [&] {
    v = body();
    in = b_.GetInsertBlock();
  });
  llvm::PHINode* phi = b_.CreatePHI(v->getType(), 2);
  phi->addIncoming(v, in);
  phi->addIncoming(otherwise != nullptr ? otherwise : llvm::Constant::getNullValue(v->getType()), pre);
  return phi;
}

absl::Status Lowering::store(const Op& o) {
  const Type& pt = ir_.type(o.operands[0]);
  const Type& vt = ir_.type(o.operands[1]);
  bool masked = o.operands.size() == 3;
  llvm::Type* mt = elem_mem_type(vt);
  const int64_t bytes = module_->getDataLayout().getTypeStoreSize(mt);
  auto one = [&](llvm::Value* p, llvm::Value* v, llvm::Value* mask) {
    guarded(checked(o, p, bytes, mask), [&] { b_.CreateStore(to_memory(v, mt), p); });
  };
  if (!pt.is_tile()) {
    one(val(o.operands[0]), val(o.operands[1]), masked ? val(o.operands[2]) : nullptr);
    return absl::OkStatus();
  }
  if (in_registers(pt) || wanted_[o.operands[0]] != nullptr) {
    // Values held in a slice are stored from it: threads holding the same
    // element write the same value, which costs less than a conversion.
    // So are parts and joins of register tiles (narrow, concat) where the
    // pointers are affine: each slot's address is computed where it is.
    const RegTile& held = regs_[o.operands[1]];
    const Layout* own = held.slots.empty() ? nullptr : held.layout.get();
    const bool from_own =
        own != nullptr &&
        (dynamic_cast<const SliceLayout*>(own) != nullptr ||
         ((dynamic_cast<const NarrowLayout*>(own) != nullptr || dynamic_cast<const ConcatLayout*>(own) != nullptr) &&
          analysis_.affine(o.operands[0]) && wanted_[o.operands[0]] == nullptr));
    const Layout& l = from_own ? *own : *layout(o.operands[0]);
    int64_t run = access_run(o, l);
    std::vector<llvm::Value*> ptrs = register_addresses(o.operands[0], l);
    std::vector<llvm::Value*> masks = masked ? regs(o.operands[2], l) : std::vector<llvm::Value*>();
    auto* vector_type = llvm::FixedVectorType::get(mt, static_cast<unsigned>(run));
    llvm::Type* access_type = run == 1 ? mt : vector_type;
    llvm::Align align(run * module_->getDataLayout().getTypeAllocSize(mt));
    // Each run's values: from the tile staged in shared memory, or from
    // registers in the pointers' layout.
    std::function<llvm::Value*(int64_t)> values_at;
    std::vector<llvm::Value*> values;
    llvm::Value* staged = staged_stores_.contains(&o) ? stage_for_store(o.operands[1]) : nullptr;
    if (staged != nullptr) {
      values_at = [&](int64_t slot) {
        llvm::Value* e = l.element(b_, thread_, slot);
        if (llvm::Value* ok = l.valid(b_, thread_, slot)) e = b_.CreateSelect(ok, e, b_.getInt64(0));
        return b_.CreateAlignedLoad(access_type, swizzled_elem(staged, vt, e, widest_swizzle(vt)), align);
      };
    } else {
      values = regs(o.operands[1], l);
      values_at = [&](int64_t slot) {
        llvm::Value* v = run == 1 ? to_memory(values[slot], mt) : llvm::PoisonValue::get(vector_type);
        for (int64_t lane = 0; run > 1 && lane < run; ++lane) {
          v = b_.CreateInsertElement(v, to_memory(values[slot + lane], mt), lane);
        }
        return v;
      };
    }
    for (int64_t slot = 0; slot < l.slots(); slot += run) {
      llvm::Value* ok = l.valid(b_, thread_, slot);  // the same over the run, like the mask
      if (masked) ok = ok == nullptr ? masks[slot] : b_.CreateAnd(ok, masks[slot]);
      predicated_store(values_at(slot), ptrs[slot], ok, align);
    }
    if (staged != nullptr) shared_.erase(staged);  // (smem_alloc meets before it is written again)
    return absl::OkStatus();
  }
  hold(o);
  std::function<llvm::Value*(ElemIndex&)> address = addresses(o.operands[0]);
  each_element(pt.shape(), [&](ElemIndex& at) {
    llvm::Value* p = address(at);
    llvm::Value* v = element(o.operands[1], at);
    one(p, v, masked ? element(o.operands[2], at) : nullptr);
  });
  return absl::OkStatus();
}

llvm::Value* Lowering::stage_for_store(int id) {
  const Type& t = ir_.type(id);
  llvm::Value* tile = smem_alloc(t.numel() * t.dtype().bytes(), tma::kSwizzledTileAlignment);
  write_tile(id, [&](llvm::Value* i) { return swizzled_elem(tile, t, i, widest_swizzle(t)); });
  target_.program_barrier(b_);
  return tile;
}

// The DSL's orders are the program's (dsl/ops.h): a release makes every
// thread's earlier writes, and the TMA stores still on their way, visible
// before the atomic; an acquire makes every thread's later reads see what
// was released to it. The atomics themselves are relaxed, between fences.
void Lowering::release_program() {
  target_.single_thread(b_, [&] { target_.tma_store_flush(b_); });
  target_.program_barrier(b_);
}

absl::Status Lowering::atomic(const Op& o, const Type& rt) {
  const Type& pt = ir_.type(o.operands[0]);
  DType d = rt.dtype();
  auto kind = static_cast<AtomicOp>(o.ints[0]);
  const auto order = static_cast<MemoryOrder>(o.ints[1]);
  bool masked = o.operands.size() == 3;
  const llvm::SyncScope::ID scope = target_.device_scope(ctx_);
  // A masked-off lane returns 0 and touches nothing.
  auto one = [&](llvm::Value* p, llvm::Value* v, llvm::Value* mask) -> llvm::Value* {
    return guarded_value(checked(o, p, d.bytes(), mask),
                         [&] { return ops_.atomic_rmw(kind, d, p, v, llvm::AtomicOrdering::Monotonic, scope); });
  };
  if (releases(order)) release_program();
  if (!pt.is_tile()) {
    // One thread of the program does a scalar atomic; all see its result
    // (after the barrier that carries its acquire to them).
    set(o, target_.uniform(b_, [&] {
      if (releases(order)) target_.device_fence(b_, true);
      llvm::Value* old = one(val(o.operands[0]), val(o.operands[1]), masked ? val(o.operands[2]) : nullptr);
      if (acquires(order)) target_.device_fence(b_, false);
      return old;
    }));
    return absl::OkStatus();
  }
  llvm::Value* ptrs = val(o.operands[0]);
  llvm::Value* values = val(o.operands[1]);
  llvm::Value* masks = masked ? val(o.operands[2]) : nullptr;
  llvm::Value* out = new_buffer(rt);
  if (releases(order)) target_.device_fence(b_, true);
  tile_loop(pt.numel(), [&](llvm::Value* i) {
    llvm::Value* r = one(load_elem(ptrs, pt, i), load_elem(values, rt, i),
                         masked ? load_elem(masks, ir_.type(o.operands[2]), i) : nullptr);
    store_elem(out, rt, i, r);
  });
  if (acquires(order)) {
    target_.device_fence(b_, false);
    target_.program_barrier(b_);  // what one thread acquired, all read after
  }
  set(o, out);
  return absl::OkStatus();
}

absl::Status Lowering::atomic_cas(const Op& o, const Type& rt) {
  DType d = rt.dtype();
  const auto order = static_cast<MemoryOrder>(o.ints[0]);
  if (releases(order)) release_program();
  // Out of bounds in checked code: 0, and memory untouched.
  set(o, target_.uniform(b_, [&] {
    if (releases(order)) target_.device_fence(b_, true);
    llvm::Value* old = guarded_value(checked(o, val(o.operands[0]), d.bytes(), nullptr), [&] {
      auto* cx = b_.CreateAtomicCmpXchg(val(o.operands[0]), val(o.operands[1]), val(o.operands[2]),
                                        llvm::MaybeAlign(d.bytes()), llvm::AtomicOrdering::Monotonic,
                                        llvm::AtomicOrdering::Monotonic, target_.device_scope(ctx_));
      return b_.CreateExtractValue(cx, 0);
    });
    if (acquires(order)) target_.device_fence(b_, false);
    return old;
  }));
  return absl::OkStatus();
}

}  // namespace tessel::codegen
