#include "codegen/gpu_target.h"

#include <bit>

#include "codegen/loops.h"

namespace tessel::codegen {

llvm::Function* GpuTarget::create_kernel(llvm::Module& module, const KernelIR& ir) {
  // A kernel lowered again (a smaller overlap choice) starts unsplit.
  threads_ = program_threads_;
  group_ = program_tid_ = nullptr;
  llvm::IRBuilder<> b(module.getContext());
  std::vector<llvm::Type*> types;
  for (const Param& p : ir.params) types.push_back(param_type(b, p.type));
  auto* type = llvm::FunctionType::get(b.getVoidTy(), types, false);
  llvm::Function* fn = llvm::Function::Create(type, llvm::Function::ExternalLinkage, ir.name, module);
  for (size_t i = 0; i < ir.params.size(); ++i) fn->getArg(i)->setName(ir.params[i].name);
  return fn;
}

llvm::Type* GpuTarget::scalar_param_type(llvm::IRBuilder<>& b, DType dtype) {
  switch (dtype.kind) {
    case ScalarKind::kI1:
      return b.getInt8Ty();
    case ScalarKind::kF32:
      return b.getFloatTy();
    case ScalarKind::kF64:
      return b.getDoubleTy();
    default:
      return b.getIntNTy(dtype.bits());
  }
}

void GpuTarget::tile_loop(llvm::IRBuilder<>& b, int64_t n, const std::function<void(llvm::Value*)>& body) {
  emit_loop(b, tid_, b.getInt64(n), b.getInt64(threads_), body);
  barrier(b);
}

llvm::Value* GpuTarget::shuffle_xor(llvm::IRBuilder<>& b, llvm::Value* v, int lanes) {
  llvm::Type* t = v->getType();
  const unsigned bits = t->getPrimitiveSizeInBits();
  if (bits < 32) return b.CreateTrunc(shuffle_xor(b, b.CreateZExt(v, b.getInt32Ty()), lanes), t);
  llvm::Value* x = b.CreateBitCast(v, b.getIntNTy(bits));
  if (bits == 32) return b.CreateBitCast(shuffle_word(b, x, lanes), t);
  llvm::Value* lo = shuffle_word(b, b.CreateTrunc(x, b.getInt32Ty()), lanes);
  llvm::Value* hi = shuffle_word(b, b.CreateTrunc(b.CreateLShr(x, 32), b.getInt32Ty()), lanes);
  llvm::Value* joined = b.CreateOr(b.CreateZExt(lo, b.getInt64Ty()), b.CreateShl(b.CreateZExt(hi, b.getInt64Ty()), 32));
  return b.CreateBitCast(joined, t);
}

llvm::Value* GpuTarget::combine_threads(llvm::IRBuilder<>& b, llvm::Value* partial,
                                        const std::function<llvm::Value*(llvm::Value*, llvm::Value*)>& combine) {
  const int warp = warp_size();
  llvm::Value* v = partial;
  for (int lanes = warp / 2; lanes >= 1; lanes /= 2) v = combine(v, shuffle_xor(b, v, lanes));
  const int warps = threads_ / warp;
  if (warps == 1) return v;  // the butterfly left every lane the whole result
  llvm::Value* slots = group_scratch(b);
  llvm::Value* slot =
      b.CreateGEP(v->getType(), slots, b.CreateLShr(tid_, std::countr_zero(static_cast<unsigned>(warp))));
  emit_if(b, b.CreateICmpEQ(b.CreateAnd(tid_, warp - 1), b.getInt64(0)), [&] { b.CreateStore(v, slot); });
  barrier(b);
  llvm::Value* all = b.CreateLoad(v->getType(), slots);
  for (int w = 1; w < warps; ++w) {
    all = combine(all, b.CreateLoad(v->getType(), b.CreateConstInBoundsGEP1_64(v->getType(), slots, w)));
  }
  barrier(b);  // the slots may be written again
  return all;
}

llvm::Value* GpuTarget::uniform(llvm::IRBuilder<>& b, const std::function<llvm::Value*()>& compute) {
  llvm::Type* type = nullptr;
  llvm::Value* slot = group_scratch(b);
  single_thread(b, [&] {
    llvm::Value* v = compute();
    type = v->getType();
    b.CreateStore(v, slot);
  });
  barrier(b);
  llvm::Value* v = b.CreateLoad(type, slot);
  barrier(b);
  return v;
}

void GpuTarget::enter_group(llvm::IRBuilder<>& b, llvm::Value* group, bool /*producer*/) {
  program_tid_ = tid_;
  group_ = group;
  tid_ = b.CreateSub(tid_, b.CreateMul(group, b.getInt64(threads_)));
}

void GpuTarget::leave_group() {
  tid_ = program_tid_;
  group_ = nullptr;
}

llvm::Value* GpuTarget::group_scratch(llvm::IRBuilder<>& b) {
  if (group_ == nullptr) return scratch(b);
  // One slot per warp of the program: the group's warps' slots.
  return b.CreateInBoundsGEP(b.getInt64Ty(), scratch(b), b.CreateMul(group_, b.getInt64(threads_ / warp_size())));
}

void GpuTarget::single_thread(llvm::IRBuilder<>& b, const std::function<void()>& body) {
  emit_if(b, b.CreateICmpEQ(tid_, b.getInt64(0)), body);
}

}  // namespace tessel::codegen
