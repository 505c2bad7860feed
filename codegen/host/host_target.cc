#include "codegen/host/host_target.h"

#include "absl/strings/str_cat.h"
#include "base/host_abi.h"
#include "codegen/llvm_util.h"
#include "codegen/loops.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"

namespace tessel::codegen {
namespace {

// A host program is a plain function call: program ids and the shared arena
// come from the HostProgram record, parameters from the args array.
class HostTarget final : public TargetInfo {
 public:
  HostTarget(std::unique_ptr<llvm::TargetMachine> tm, HostTma tma, bool checked)
      : tm_(std::move(tm)), tma_(tma), checked_(checked) {}

  std::string name() const override { return "host"; }
  llvm::TargetMachine& machine() override { return *tm_; }

  llvm::Function* declare_kernel(llvm::Module& module, const KernelIR& ir) override {
    llvm::LLVMContext& ctx = module.getContext();
    llvm::Type* ptr = llvm::PointerType::get(ctx, 0);
    auto* type = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx), {ptr, ptr}, false);
    fn_ = llvm::Function::Create(type, llvm::Function::ExternalLinkage, absl::StrCat("tessel_", ir.name), module);
    fn_->getArg(0)->setName("args");
    fn_->getArg(1)->setName("program");
    for (int i = 0; i < 2; ++i) {
      fn_->addParamAttr(i, llvm::Attribute::NoAlias);
      fn_->addParamAttr(i, llvm::Attribute::ReadOnly);
    }
    fn_->addFnAttr(llvm::Attribute::NoUnwind);
    fn_->addFnAttr("target-cpu", tm_->getTargetCPU());
    fn_->addFnAttr("target-features", tm_->getTargetFeatureString());
    return fn_;
  }

  std::vector<llvm::Value*> params(llvm::IRBuilder<>& b, const KernelIR& ir) override {
    std::vector<llvm::Value*> out;
    llvm::Type* ptr = b.getPtrTy();
    for (size_t i = 0; i < ir.params.size(); ++i) {
      llvm::Value* slot = b.CreateLoad(ptr, b.CreateConstInBoundsGEP1_64(ptr, fn_->getArg(0), i));
      const Type& t = ir.params[i].type;
      if (t.is_tensor_map()) {
        out.push_back(slot);
      } else if (t.is_pointer() || t.is_triggered_view()) {
        out.push_back(b.CreateLoad(ptr, slot));
      } else {
        llvm::Type* st = t.dtype().is_bool() ? b.getInt8Ty() : b.getIntNTy(t.dtype().bits());
        if (t.dtype() == f32) st = b.getFloatTy();
        if (t.dtype() == f64) st = b.getDoubleTy();
        llvm::Value* v = b.CreateLoad(st, slot);
        out.push_back(t.dtype().is_bool() ? b.CreateTrunc(v, b.getInt1Ty()) : v);
      }
    }
    return out;
  }

  llvm::Value* program_id(llvm::IRBuilder<>& b, int axis) override { return field(b, axis); }
  llvm::Value* num_programs(llvm::IRBuilder<>& b, int axis) override { return field(b, 3 + axis); }

  llvm::Value* shared_base(llvm::IRBuilder<>& b) override {
    llvm::Value* p = b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), fn_->getArg(1), offsetof(HostProgram, shared));
    return b.CreateLoad(b.getPtrTy(), p);
  }

  // A host program is one thread walking its tiles on its own stack.
  bool tiles_in_shared() const override { return false; }
  void tile_loop(llvm::IRBuilder<>& b, int64_t n, const std::function<void(llvm::Value*)>& body) override {
    emit_loop(b, b.getInt64(0), b.getInt64(n), b.getInt64(1), body);
  }
  llvm::Value* combine_threads(llvm::IRBuilder<>&, llvm::Value* partial,
                               const std::function<llvm::Value*(llvm::Value*, llvm::Value*)>&) override {
    return partial;
  }
  llvm::Value* uniform(llvm::IRBuilder<>&, const std::function<llvm::Value*()>& compute) override {
    return compute();
  }

  // The emulated copy is complete when the call returns: no barriers.
  void init_tma_barriers(llvm::IRBuilder<>&, llvm::Value*, int, int) override {}
  void tma_load(llvm::IRBuilder<>& b, const Type& map_type, llvm::Value* map, const std::vector<llvm::Value*>& coords,
                llvm::Value* smem, int64_t bytes, llvm::Value* barrier, llvm::Value* phase, int parts) override {
    if (tma_ == HostTma::kSoftware) {
      TargetInfo::tma_load(b, map_type, map, coords, smem, bytes, barrier, phase, parts);
    } else {
      for_each_part(
          b, map_type, coords, smem, bytes, parts,
          [&](const std::vector<llvm::Value*>& at, llvm::Value* dst) { call_tma(b, kHostTmaLoad, map, at, dst); });
    }
  }
  // The host copy engine only copies; tma_reduce's adds are the software copy's.
  void tma_store(llvm::IRBuilder<>& b, const Type& map_type, llvm::Value* map, const std::vector<llvm::Value*>& coords,
                 llvm::Value* smem, bool add) override {
    if (tma_ == HostTma::kSoftware || add) {
      TargetInfo::tma_store(b, map_type, map, coords, smem, add);
    } else {
      call_tma(b, kHostTmaStore, map, coords, smem);
    }
  }

  // A host program is one thread: no barrier is needed, and x86's ordering
  // of atomics is what the GPU's scoped operations promise.
  void program_barrier(llvm::IRBuilder<>&) override {}
  void device_fence(llvm::IRBuilder<>& b, bool release) override {
    b.CreateFence(release ? llvm::AtomicOrdering::Release : llvm::AtomicOrdering::Acquire);
  }
  llvm::Value* atomic_add_acq_rel_gpu(llvm::IRBuilder<>& b, llvm::Value* ptr, llvm::Value* v) override {
    return b.CreateAtomicRMW(llvm::AtomicRMWInst::Add, ptr, v, llvm::MaybeAlign(8),
                             llvm::AtomicOrdering::AcquireRelease);
  }
  llvm::Value* atomic_exch_acq_rel_gpu(llvm::IRBuilder<>& b, llvm::Value* ptr, llvm::Value* v) override {
    return b.CreateAtomicRMW(llvm::AtomicRMWInst::Xchg, ptr, v, llvm::MaybeAlign(8),
                             llvm::AtomicOrdering::AcquireRelease);
  }
  llvm::Value* load_relaxed_gpu(llvm::IRBuilder<>& b, llvm::Value* ptr) override {
    llvm::LoadInst* l = b.CreateAlignedLoad(b.getInt64Ty(), ptr, llvm::MaybeAlign(8));
    l->setAtomic(llvm::AtomicOrdering::Monotonic);
    return l;
  }
  void store_release_sys(llvm::IRBuilder<>& b, llvm::Value* ptr, llvm::Value* v) override {
    b.CreateAlignedStore(v, ptr, llvm::MaybeAlign(8))->setAtomic(llvm::AtomicOrdering::Release);
  }
  llvm::Value* load_acquire_sys(llvm::IRBuilder<>& b, llvm::Value* ptr) override {
    llvm::LoadInst* l = b.CreateAlignedLoad(b.getInt64Ty(), ptr, llvm::MaybeAlign(8));
    l->setAtomic(llvm::AtomicOrdering::Acquire);
    return l;
  }
  void single_thread(llvm::IRBuilder<>&, const std::function<void()>& body) override { body(); }

  bool checks_accesses() const override { return checked_; }
  llvm::Value* access_ok(llvm::IRBuilder<>& b, int param, llvm::Value* address, llvm::Value* bytes, int op) override {
    llvm::Module& m = *fn_->getParent();
    llvm::Type* ptr = b.getPtrTy();
    llvm::FunctionCallee check = m.getOrInsertFunction(
        kHostCheck, llvm::FunctionType::get(b.getInt1Ty(), {ptr, b.getInt32Ty(), ptr, b.getInt64Ty(), b.getInt32Ty()},
                                            false));
    return b.CreateCall(check, {fn_->getArg(1), b.getInt32(param), address, bytes, b.getInt32(op)});
  }
  void epilogue(llvm::IRBuilder<>&) override {}

 private:
  llvm::Value* field(llvm::IRBuilder<>& b, int index) {
    llvm::Value* p = b.CreateConstInBoundsGEP1_64(b.getInt32Ty(), fn_->getArg(1), index);
    return b.CreateLoad(b.getInt32Ty(), p);
  }

  void call_tma(llvm::IRBuilder<>& b, const char* name, llvm::Value* map, const std::vector<llvm::Value*>& coords,
                llvm::Value* smem) {
    llvm::Module& m = *fn_->getParent();
    llvm::Type* ptr = b.getPtrTy();
    llvm::FunctionCallee callee =
        m.getOrInsertFunction(name, llvm::FunctionType::get(b.getVoidTy(), {ptr, ptr, ptr}, false));
    llvm::IRBuilder<> eb(&*fn_->getEntryBlock().getFirstInsertionPt());
    llvm::Value* c = eb.CreateAlloca(b.getInt32Ty(), b.getInt32(5));
    for (size_t i = 0; i < coords.size(); ++i) b.CreateStore(coords[i], b.CreateConstInBoundsGEP1_64(b.getInt32Ty(), c, i));
    b.CreateCall(callee, {map, c, smem});
  }

  std::unique_ptr<llvm::TargetMachine> tm_;
  HostTma tma_;
  bool checked_;
  llvm::Function* fn_ = nullptr;
};

}  // namespace

absl::StatusOr<std::unique_ptr<TargetInfo>> make_host_target(int opt_level, HostTma tma, bool checked) {
  init_llvm_targets();
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) return to_status(jtmb.takeError(), "detecting the host CPU");
  jtmb->setCodeGenOptLevel(opt_level >= 3 ? llvm::CodeGenOptLevel::Aggressive
                           : opt_level == 0 ? llvm::CodeGenOptLevel::None
                                            : llvm::CodeGenOptLevel::Default);
  // Position-independent: the object is linked into the process wherever the
  // JIT puts it, far from libm and the runtime's support functions.
  jtmb->setRelocationModel(llvm::Reloc::PIC_);
  auto tm = jtmb->createTargetMachine();
  if (!tm) return to_status(tm.takeError(), "creating the host target machine");
  return std::unique_ptr<TargetInfo>(new HostTarget(std::move(*tm), tma, checked));
}

}  // namespace tessel::codegen
