// The AMDGPU target. A program is a workgroup of num_warps wavefronts of 64
// threads; tiles live in LDS and every tile loop is spread over the threads,
// ending in a barrier. Pointers arrive in the global address space and are
// used as flat ones (LLVM's address-space inference turns the accesses back
// into global and LDS instructions). Tensor maps travel by value in the
// kernarg segment (byref arguments), in tessel's host form: AMD has no TMA,
// and the base class's copies by the program's threads read that form,
// addressing the tensor in the global address space.
#include "codegen/amdgpu/amdgpu_target.h"

#include "absl/strings/str_cat.h"
#include "base/tma_rules.h"
#include "codegen/amdgpu/mfma.h"
#include "codegen/gpu_target.h"
#include "codegen/llvm_util.h"
#include "codegen/loops.h"
#include "llvm/IR/IntrinsicsAMDGPU.h"
#include "llvm/MC/TargetRegistry.h"

namespace tessel::codegen {
namespace {

constexpr unsigned kFlat = 0, kGlobal = 1, kLds = 3, kConstant = 4;
// s_waitcnt's operand for "vmcnt(0)", the other counters left alone (gfx9
// encoding: vmcnt in bits 3:0 and 15:14, expcnt 6:4, lgkmcnt 11:8).
constexpr int kWaitVmcnt0 = 0x0F70;
// COV5 hidden kernel argument: the grid's size in workgroups, x, y, z (u32 each).
constexpr int64_t kHiddenBlockCount = 0;

class AmdgpuTarget final : public GpuTarget {
 public:
  AmdgpuTarget(std::unique_ptr<llvm::TargetMachine> tm, int threads, int waves_per_simd)
      : GpuTarget(threads), tm_(std::move(tm)), waves_per_simd_(waves_per_simd) {}

  std::string name() const override { return "amdgpu"; }
  llvm::TargetMachine& machine() override { return *tm_; }
  // Box copies and the debug buffer take global instructions, not flat ones.
  unsigned device_memory_address_space() const override { return kGlobal; }

  llvm::Function* declare_kernel(llvm::Module& module, const KernelIR& ir) override {
    llvm::LLVMContext& ctx = module.getContext();
    llvm::IRBuilder<> b(ctx);
    fn_ = create_kernel(module, ir);
    fn_->setCallingConv(llvm::CallingConv::AMDGPU_KERNEL);
    fn_->addFnAttr("amdgpu-flat-work-group-size", absl::StrCat(threads_, ",", threads_));
    fn_->addFnAttr("uniform-work-group-size", "true");
    if (waves_per_simd_ > 0) fn_->addFnAttr("amdgpu-waves-per-eu", absl::StrCat(waves_per_simd_));
    for (size_t i = 0; i < ir.params.size(); ++i) {
      if (!ir.params[i].type.is_tensor_map()) continue;
      // The map's bytes in the kernarg segment, the argument a pointer to them.
      fn_->addParamAttr(i,
                        llvm::Attribute::getWithByRefType(ctx, llvm::ArrayType::get(b.getInt8Ty(), kTensorMapBytes)));
      fn_->addParamAttr(i, llvm::Attribute::getWithAlignment(ctx, llvm::Align(tma::kMapAlignment)));
    }
    module.addModuleFlag(llvm::Module::Error, "amdhsa_code_object_version", 500);
    // One 8-byte slot per wavefront: partial results of combine_threads, and
    // the value of uniform() in slot 0.
    auto* slots = llvm::ArrayType::get(b.getInt64Ty(), 16);
    scratch_ =
        new llvm::GlobalVariable(module, slots, false, llvm::GlobalValue::InternalLinkage, llvm::UndefValue::get(slots),
                                 "tessel_scratch", nullptr, llvm::GlobalValue::NotThreadLocal, kLds);
    scratch_->setAlignment(llvm::Align(16));
    // Dynamic LDS: its size is the launch's.
    lds_ = new llvm::GlobalVariable(module, llvm::ArrayType::get(b.getInt8Ty(), 0), false,
                                    llvm::GlobalValue::ExternalLinkage, nullptr, "tessel_lds", nullptr,
                                    llvm::GlobalValue::NotThreadLocal, kLds);
    lds_->setAlignment(llvm::Align(tma::kSharedTileAlignment));
    return fn_;
  }

  std::vector<llvm::Value*> params(llvm::IRBuilder<>& b, const KernelIR& ir) override {
    std::vector<llvm::Value*> out;
    for (size_t i = 0; i < ir.params.size(); ++i) {
      llvm::Value* a = fn_->getArg(i);
      const Type& t = ir.params[i].type;
      if (a->getType()->isPointerTy()) a = b.CreateAddrSpaceCast(a, b.getPtrTy(kFlat));
      out.push_back(t.is_bool() ? b.CreateTrunc(a, b.getInt1Ty()) : a);
    }
    tid_ = b.CreateZExt(b.CreateIntrinsic(llvm::Intrinsic::amdgcn_workitem_id_x, {}, {}), b.getInt64Ty());
    return out;
  }

  llvm::Value* program_id(llvm::IRBuilder<>& b, int axis) override {
    static constexpr llvm::Intrinsic::ID kIds[] = {llvm::Intrinsic::amdgcn_workgroup_id_x,
                                                   llvm::Intrinsic::amdgcn_workgroup_id_y,
                                                   llvm::Intrinsic::amdgcn_workgroup_id_z};
    return b.CreateIntrinsic(kIds[axis], {}, {});
  }
  llvm::Value* num_programs(llvm::IRBuilder<>& b, int axis) override {
    llvm::Value* hidden = b.CreateIntrinsic(llvm::Intrinsic::amdgcn_implicitarg_ptr, {}, {});
    llvm::Value* at = b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), hidden, kHiddenBlockCount + 4 * axis);
    auto* count = b.CreateAlignedLoad(b.getInt32Ty(), at, llvm::Align(4));
    count->setMetadata(llvm::LLVMContext::MD_invariant_load, llvm::MDNode::get(b.getContext(), {}));
    return count;
  }
  llvm::Value* shared_base(llvm::IRBuilder<>& b) override { return b.CreateAddrSpaceCast(lds_, b.getPtrTy(kFlat)); }

  // The transcendental unit: v_exp_f32 and v_log_f32 (base 2, subnormals
  // flushed), v_sin_f32 and v_cos_f32 (of turns). No tanh.
  llvm::Value* fast_math(llvm::IRBuilder<>& b, OpCode op, llvm::Value* x) override {
    auto unit = [&](llvm::Intrinsic::ID id, llvm::Value* v) { return b.CreateIntrinsic(id, {x->getType()}, {v}); };
    auto times = [&](double k) { return b.CreateFMul(x, llvm::ConstantFP::get(x->getType(), k)); };
    switch (op) {
      case OpCode::kExp:
        return unit(llvm::Intrinsic::amdgcn_exp2, times(M_LOG2E));
      case OpCode::kExp2:
        return unit(llvm::Intrinsic::amdgcn_exp2, x);
      case OpCode::kLog:
        return b.CreateFMul(unit(llvm::Intrinsic::amdgcn_log, x), llvm::ConstantFP::get(x->getType(), M_LN2));
      case OpCode::kLog2:
        return unit(llvm::Intrinsic::amdgcn_log, x);
      case OpCode::kSin:
        return unit(llvm::Intrinsic::amdgcn_sin, times(0.5 * M_1_PI));
      case OpCode::kCos:
        return unit(llvm::Intrinsic::amdgcn_cos, times(0.5 * M_1_PI));
      default:
        return nullptr;
    }
  }

  llvm::Value* fast_divide(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* y) override {
    return b.CreateFMul(x, b.CreateIntrinsic(llvm::Intrinsic::amdgcn_rcp, {y->getType()}, {y}));
  }

  int warp_size() const override { return kWave; }

  // dot on bf16 and f16 tiles in LDS: MFMA, the accumulator in registers.
  std::shared_ptr<const Layout> mma_layout(const MmaShape& shape, const SharedMatrix& a,
                                           const SharedMatrix& b) override {
    return amdgpu::mfma_layout(shape, a, b, threads_);
  }
  std::vector<llvm::Value*> mma(llvm::IRBuilder<>& b, const MmaShape& shape, const SharedMatrix& a,
                                const SharedMatrix& bm, std::vector<llvm::Value*> acc, int) override {
    return amdgpu::emit_mfma(b, shape, a, bm, std::move(acc), tid_, threads_);
  }

  // The DSL's atomics at agent (device) scope: no system-wide writeback or invalidate.
  llvm::SyncScope::ID device_scope(llvm::LLVMContext& ctx) const override {
    return ctx.getOrInsertSyncScopeID("agent");
  }

  void device_fence(llvm::IRBuilder<>& b, bool release) override {
    b.CreateFence(release ? llvm::AtomicOrdering::Release : llvm::AtomicOrdering::Acquire, agent(b));
  }

  // Triggered views. MI300X's ordering for a gate: every wavefront waits
  // for its own global stores (s_waitcnt vmcnt(0); a workgroup-scope fence
  // does not), the workgroup meets at a barrier, then one thread releases
  // at system scope (buffer_wbl2 sc0 sc1 before the store).
  void program_barrier(llvm::IRBuilder<>& b) override {
    b.CreateIntrinsic(llvm::Intrinsic::amdgcn_s_waitcnt, {}, {b.getInt32(kWaitVmcnt0)});
    barrier(b);
  }
  llvm::Value* atomic_add_acq_rel_gpu(llvm::IRBuilder<>& b, llvm::Value* ptr, llvm::Value* v) override {
    return b.CreateAtomicRMW(llvm::AtomicRMWInst::Add, global(b, ptr), v, llvm::MaybeAlign(8),
                             llvm::AtomicOrdering::AcquireRelease, agent(b));
  }
  llvm::Value* atomic_exch_acq_rel_gpu(llvm::IRBuilder<>& b, llvm::Value* ptr, llvm::Value* v) override {
    return b.CreateAtomicRMW(llvm::AtomicRMWInst::Xchg, global(b, ptr), v, llvm::MaybeAlign(8),
                             llvm::AtomicOrdering::AcquireRelease, agent(b));
  }
  llvm::Value* load_relaxed_gpu(llvm::IRBuilder<>& b, llvm::Value* ptr) override {
    auto* load = b.CreateAlignedLoad(b.getInt64Ty(), global(b, ptr), llvm::Align(8));
    load->setAtomic(llvm::AtomicOrdering::Monotonic, agent(b));
    return load;
  }
  void store_release_sys(llvm::IRBuilder<>& b, llvm::Value* ptr, llvm::Value* v) override {
    auto* store = b.CreateAlignedStore(v, global(b, ptr), llvm::Align(8));
    store->setAtomic(llvm::AtomicOrdering::Release, llvm::SyncScope::System);
  }
  llvm::Value* load_acquire_sys(llvm::IRBuilder<>& b, llvm::Value* ptr) override {
    auto* load = b.CreateAlignedLoad(b.getInt64Ty(), global(b, ptr), llvm::Align(8));
    load->setAtomic(llvm::AtomicOrdering::Acquire, llvm::SyncScope::System);
    return load;
  }
  void epilogue(llvm::IRBuilder<>&) override {}

 private:
  llvm::Type* param_type(llvm::IRBuilder<>& b, const Type& t) override {
    if (t.is_tensor_map()) return b.getPtrTy(kConstant);
    if (t.is_pointer() || t.is_triggered_view()) return b.getPtrTy(kGlobal);
    return scalar_param_type(b, t.dtype());
  }
  // Workgroup barriers: s_barrier alone does not order LDS accesses on
  // gfx942; the fences around it make it wait for them (lgkmcnt).
  void barrier(llvm::IRBuilder<>& b) override {
    const llvm::SyncScope::ID workgroup = b.getContext().getOrInsertSyncScopeID("workgroup");
    b.CreateFence(llvm::AtomicOrdering::Release, workgroup);
    b.CreateIntrinsic(llvm::Intrinsic::amdgcn_s_barrier, {}, {});
    b.CreateFence(llvm::AtomicOrdering::Acquire, workgroup);
  }
  llvm::SyncScope::ID agent(llvm::IRBuilder<>& b) const { return device_scope(b.getContext()); }
  // Triggered views' words are in device (or peer) memory: global accesses.
  llvm::Value* global(llvm::IRBuilder<>& b, llvm::Value* ptr) {
    return b.CreateAddrSpaceCast(ptr, b.getPtrTy(kGlobal));
  }
  llvm::Value* scratch(llvm::IRBuilder<>& b) override { return b.CreateAddrSpaceCast(scratch_, b.getPtrTy(kFlat)); }
  // ds_bpermute_b32: each lane reads the word of the lane its address names.
  llvm::Value* shuffle_word(llvm::IRBuilder<>& b, llvm::Value* word, int lanes) override {
    llvm::Value* lane = b.CreateTrunc(b.CreateAnd(tid_, kWave - 1), b.getInt32Ty());
    llvm::Value* from = b.CreateShl(b.CreateXor(lane, b.getInt32(lanes)), 2);
    return b.CreateIntrinsic(llvm::Intrinsic::amdgcn_ds_bpermute, {}, {from, word});
  }

  std::unique_ptr<llvm::TargetMachine> tm_;
  llvm::Function* fn_ = nullptr;
  llvm::GlobalVariable* lds_ = nullptr;
  llvm::GlobalVariable* scratch_ = nullptr;
  int waves_per_simd_ = 0;  // wavefronts each SIMD should hold at once (0: no request)
};

}  // namespace

absl::StatusOr<std::unique_ptr<TargetInfo>> make_amdgpu_target(const std::string& arch, int num_warps, int opt_level,
                                                               int min_programs) {
  init_llvm_targets();
  if (num_warps < 1 || num_warps > 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_warps must be 1 to 16 on AMD GPUs (wavefronts of 64 threads), got ", num_warps));
  }
  if (arch != "gfx942") {
    return absl::InvalidArgumentError(
        absl::StrCat("amdgpu target '", arch, "': tessel compiles for gfx942 (MI300X, MI300A, MI325X)"));
  }
  std::string err;
  const std::string triple = "amdgcn-amd-amdhsa";
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, err);
  if (target == nullptr) return absl::InternalError(absl::StrCat("AMDGPU target: ", err));
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> tm(
      target->createTargetMachine(triple, arch, "", options, llvm::Reloc::PIC_, std::nullopt,
                                  opt_level >= 3 ? llvm::CodeGenOptLevel::Aggressive : llvm::CodeGenOptLevel::Default));
  if (tm == nullptr) return absl::InternalError(absl::StrCat("AMDGPU target: cannot make a target machine for ", arch));
  // A workgroup's wavefronts spread over the compute unit's four SIMDs,
  // each of which holds at most eight.
  const int waves_per_simd = min_programs * ((num_warps + 3) / 4);
  if (waves_per_simd > 8) {
    return absl::ResourceExhaustedError(
        absl::StrCat("min_programs ", min_programs, " of ", num_warps, " wavefronts would need ", waves_per_simd,
                     " wavefronts on each SIMD of a compute unit; ", arch, " holds at most 8"));
  }
  return std::unique_ptr<TargetInfo>(
      new AmdgpuTarget(std::move(tm), num_warps * kWave, min_programs > 1 ? waves_per_simd : 0));
}

}  // namespace tessel::codegen
