// The NVPTX target. A program is a CTA of num_warps * 32 threads; tiles live
// in shared memory and every tile loop is spread over the threads, ending in
// a barrier. TMA descriptors are by-value __grid_constant__ parameters: LLVM
// 19 honours only the nvvm.annotations form of grid_constant, and the param
// pointer reaches inline asm through "l" (cvta.param), never a local copy.
#include "codegen/nvptx/nvptx_target.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "base/status.h"
#include "base/tma_rules.h"
#include "codegen/gpu_target.h"
#include "codegen/llvm_util.h"
#include "codegen/loops.h"
#include "codegen/nvptx/mma_sync.h"
#include "codegen/nvptx/ptx_asm.h"
#include "codegen/nvptx/wgmma.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/IntrinsicsNVPTX.h"
#include "llvm/MC/TargetRegistry.h"

namespace tessel::codegen {
namespace {

// A bounded wait gives up after this long (ns on %globaltimer) and records
// kDeviceTimeout instead of hanging the GPU.
constexpr int64_t kWaitLimitNs = int64_t{10} * 1000 * 1000 * 1000;

// Where dynamic shared memory is sure to start: a multiple of 16 bytes.
constexpr int64_t kDynamicSharedAlignment = 16;

using nvptx::inline_asm;
using nvptx::kGlobal;
using nvptx::kShared;
using nvptx::pure_asm;
using nvptx::shared32;

// A value of 1 to 16 bytes (no pointers) as the 32-bit words a predicated
// ld/st.global moves: 1 and 2 bytes in one word (.u8, .u16), 4, 8 and 16
// bytes as .b32, .v2.b32 and .v4.b32.
struct Words {
  llvm::Type* type;
  int64_t bytes;
  int count;
  std::string suffix;

  std::vector<llvm::Value*> split(llvm::IRBuilder<>& b, llvm::Value* v) const {
    if (bytes < 4) return {b.CreateZExt(b.CreateBitCast(v, b.getIntNTy(8 * bytes)), b.getInt32Ty())};
    if (count == 1) return {b.CreateBitCast(v, b.getInt32Ty())};
    llvm::Value* vec = b.CreateBitCast(v, llvm::FixedVectorType::get(b.getInt32Ty(), count));
    std::vector<llvm::Value*> out;
    for (int i = 0; i < count; ++i) out.push_back(b.CreateExtractElement(vec, i));
    return out;
  }
  llvm::Value* join(llvm::IRBuilder<>& b, const std::vector<llvm::Value*>& w) const {
    if (bytes < 4) return b.CreateBitCast(b.CreateTrunc(w[0], b.getIntNTy(8 * bytes)), type);
    if (count == 1) return b.CreateBitCast(w[0], type);
    llvm::Value* vec = llvm::PoisonValue::get(llvm::FixedVectorType::get(b.getInt32Ty(), count));
    for (int i = 0; i < count; ++i) vec = b.CreateInsertElement(vec, w[i], i);
    return b.CreateBitCast(vec, type);
  }
  // The asm operands $first.. as one register or a braced list.
  std::string registers(int first) const {
    return count == 1 ? absl::StrCat("$", first) : nvptx::register_list(first, count);
  }
};

std::optional<Words> words(llvm::IRBuilder<>& b, llvm::Type* t) {
  if (t->isPtrOrPtrVectorTy()) return std::nullopt;
  const int64_t bytes = b.GetInsertBlock()->getModule()->getDataLayout().getTypeStoreSize(t);
  switch (bytes) {
    case 1:
      return Words{t, bytes, 1, ".u8"};
    case 2:
      return Words{t, bytes, 1, ".u16"};
    case 4:
      return Words{t, bytes, 1, ".b32"};
    case 8:
      return Words{t, bytes, 2, ".v2.b32"};
    case 16:
      return Words{t, bytes, 4, ".v4.b32"};
    default:
      return std::nullopt;
  }
}

// The operand `m` of an mn x k product as if stored K-major ([mn, k]).
SharedMatrix k_major(int64_t mn, int64_t k, const SharedMatrix& m) {
  if (m.registers || m.k_major) return m;
  SharedMatrix t = m;
  t.rows = mn, t.cols = k, t.k_major = true;
  return t;
}

// A generic pointer to global memory as ld/st.global take it.
llvm::Value* global(llvm::IRBuilder<>& b, llvm::Value* ptr) {
  return ptr->getType()->getPointerAddressSpace() == kGlobal ? ptr : b.CreateAddrSpaceCast(ptr, b.getPtrTy(kGlobal));
}

class NvptxTarget final : public GpuTarget {
 public:
  NvptxTarget(std::unique_ptr<llvm::TargetMachine> tm, const NvptxChip& chip, int threads, int min_programs)
      : GpuTarget(threads), tm_(std::move(tm)), chip_(chip), min_programs_(min_programs) {}

  std::string name() const override { return "nvptx"; }
  llvm::TargetMachine& machine() override { return *tm_; }

  llvm::Function* declare_kernel(llvm::Module& module, const KernelIR& ir) override {
    llvm::LLVMContext& ctx = module.getContext();
    llvm::IRBuilder<> b(ctx);
    fn_ = create_kernel(module, ir);
    cluster_ = ir.cluster;
    std::vector<llvm::Metadata*> grid_constants;
    for (size_t i = 0; i < ir.params.size(); ++i) {
      if (!ir.params[i].type.is_tensor_map()) continue;
      tensor_maps_ = true;
      swizzled_ = swizzled_ || ir.params[i].type.swizzle() != Swizzle::kNone;
      fn_->addParamAttr(
          i, llvm::Attribute::getWithByValType(ctx, llvm::ArrayType::get(b.getInt8Ty(), kTensorMapBytes)));
      fn_->addParamAttr(i, llvm::Attribute::getWithAlignment(ctx, llvm::Align(tma::kMapAlignment)));
      grid_constants.push_back(llvm::ConstantAsMetadata::get(b.getInt32(i + 1)));
    }
    llvm::NamedMDNode* annotations = module.getOrInsertNamedMetadata("nvvm.annotations");
    auto annotate = [&](const char* key, llvm::Metadata* value) {
      annotations->addOperand(llvm::MDNode::get(
          ctx, {llvm::ValueAsMetadata::get(fn_), llvm::MDString::get(ctx, key), value}));
    };
    annotate("kernel", llvm::ConstantAsMetadata::get(b.getInt32(1)));
    annotate("maxntidx", llvm::ConstantAsMetadata::get(b.getInt32(threads_)));
    if (min_programs_ > 1) annotate("minctasm", llvm::ConstantAsMetadata::get(b.getInt32(min_programs_)));
    if (!grid_constants.empty()) annotate("grid_constant", llvm::MDNode::get(ctx, grid_constants));
    // One 8-byte slot per warp: partial results of combine_threads, and the
    // value of uniform() in slot 0.
    scratch_ = new llvm::GlobalVariable(module, llvm::ArrayType::get(b.getInt64Ty(), 32), false,
                                        llvm::GlobalValue::InternalLinkage,
                                        llvm::UndefValue::get(llvm::ArrayType::get(b.getInt64Ty(), 32)),
                                        "tessel_scratch", nullptr, llvm::GlobalValue::NotThreadLocal, kShared);
    scratch_->setAlignment(llvm::Align(16));
    smem_ = new llvm::GlobalVariable(module, llvm::ArrayType::get(b.getInt8Ty(), 0), false,
                                     llvm::GlobalValue::ExternalLinkage, nullptr, "tessel_smem", nullptr,
                                     llvm::GlobalValue::NotThreadLocal, kShared);
    smem_->setAlignment(llvm::Align(kDynamicSharedAlignment));
    error_ = new llvm::GlobalVariable(module, b.getInt32Ty(), false, llvm::GlobalValue::ExternalLinkage,
                                      b.getInt32(0), kNvptxErrorSymbol, nullptr, llvm::GlobalValue::NotThreadLocal,
                                      kGlobal);
    error_->setAlignment(llvm::Align(4));
    return fn_;
  }

  std::vector<llvm::Value*> params(llvm::IRBuilder<>& b, const KernelIR& ir) override {
    std::vector<llvm::Value*> out;
    for (size_t i = 0; i < ir.params.size(); ++i) {
      llvm::Value* a = fn_->getArg(i);
      out.push_back(ir.params[i].type.is_bool() ? b.CreateTrunc(a, b.getInt1Ty()) : a);
    }
    tid_ = b.CreateZExt(sreg(b, llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x), b.getInt64Ty());
    warpgroup_of_ = warpgroup_ = nullptr;
    return out;
  }

  llvm::Value* program_id(llvm::IRBuilder<>& b, int axis) override {
    static constexpr llvm::Intrinsic::ID kIds[] = {llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x,
                                                   llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_y,
                                                   llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_z};
    return sreg(b, kIds[axis]);
  }
  llvm::Value* num_programs(llvm::IRBuilder<>& b, int axis) override {
    static constexpr llvm::Intrinsic::ID kIds[] = {llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_x,
                                                   llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_y,
                                                   llvm::Intrinsic::nvvm_read_ptx_sreg_nctaid_z};
    return sreg(b, kIds[axis]);
  }
  // The copy engine's tiles start at a multiple of 128 bytes, and with
  // swizzled maps of 1024 (where the swizzle pattern starts over); all else
  // in shared memory needs 16 at most. Dynamic shared memory is only sure to
  // start at a multiple of 16: the driver's JIT linker places it right after
  // the static shared memory, whatever alignment the PTX declares. So with
  // tensor maps the start is rounded up at run time.
  llvm::Value* shared_base(llvm::IRBuilder<>& b) override {
    llvm::Value* base = b.CreateAddrSpaceCast(smem_, b.getPtrTy());
    if (tile_alignment() == kDynamicSharedAlignment) return base;
    llvm::Value* start = shared32(b, base);
    llvm::Value* pad = b.CreateAnd(b.CreateSub(b.getInt32(0), start), b.getInt32(tile_alignment() - 1));
    return b.CreateInBoundsGEP(b.getInt8Ty(), base, pad);
  }
  int64_t shared_base_slack() const override { return tile_alignment() - kDynamicSharedAlignment; }

  // The SFU's approximations (what Triton's tl.exp and tl.log use): base-2
  // exp and log, sin and cos, tanh (sm_75 on). exp and log add the rounding
  // of their scaling, which grows with the argument. Subnormal arguments and
  // results flush to zero (the .ftz forms): without it ptxas wraps each in
  // a range check and two scalings, which in an attention kernel's softmax
  // is half again its arithmetic.
  llvm::Value* fast_math(llvm::IRBuilder<>& b, OpCode op, llvm::Value* x) override {
    auto sfu = [&](llvm::Intrinsic::ID id, llvm::Value* v) { return b.CreateIntrinsic(id, {}, {v}); };
    auto times = [&](llvm::Value* v, double k) { return b.CreateFMul(v, llvm::ConstantFP::get(x->getType(), k)); };
    switch (op) {
      case OpCode::kExp:
        return sfu(llvm::Intrinsic::nvvm_ex2_approx_ftz_f, times(x, M_LOG2E));
      case OpCode::kExp2:
        return sfu(llvm::Intrinsic::nvvm_ex2_approx_ftz_f, x);
      case OpCode::kLog:
        return times(sfu(llvm::Intrinsic::nvvm_lg2_approx_ftz_f, x), M_LN2);
      case OpCode::kLog2:
        return sfu(llvm::Intrinsic::nvvm_lg2_approx_ftz_f, x);
      case OpCode::kSin:
        return sfu(llvm::Intrinsic::nvvm_sin_approx_ftz_f, x);
      case OpCode::kCos:
        return sfu(llvm::Intrinsic::nvvm_cos_approx_ftz_f, x);
      case OpCode::kTanh:
        return pure_asm(b, x->getType(), "tanh.approx.f32 $0, $1;", "=f,f", {x});
      default:
        return nullptr;
    }
  }

  // cvt.rn.satfinite.{e4m3,e5m2}x2.f32 (sm_89 on) packs two conversions;
  // one of them here, the other a zero (its result in the high byte).
  llvm::Value* narrow_float8(llvm::IRBuilder<>& b, llvm::Value* x, DType d) override {
    if (!chip_.fp8) return nullptr;
    const std::string text =
        absl::StrCat("cvt.rn.satfinite.", d == f8e4m3 ? "e4m3x2" : "e5m2x2", ".f32 $0, 0f00000000, $1;");
    return b.CreateTrunc(pure_asm(b, b.getInt16Ty(), text, "=h,f", {x}), b.getInt8Ty());
  }

  llvm::Value* masked_load(llvm::IRBuilder<>& b, llvm::Type* type, llvm::Value* ptr, llvm::Value* mask,
                           llvm::Value* other) override {
    std::optional<Words> w = words(b, type);
    if (!w.has_value()) return nullptr;
    // Each word starts as `other`'s; the load overwrites them where the mask holds.
    std::string text, constraints;
    std::vector<llvm::Value*> args = {global(b, ptr), mask};
    std::vector<llvm::Value*> others = w->split(b, other);
    for (int i = 0; i < w->count; ++i) {
      absl::StrAppend(&text, "mov.b32 $", i, ", $", w->count + 2 + i, "; ");
      absl::StrAppend(&constraints, "=r,");
    }
    absl::StrAppend(&text, "@$", w->count + 1, " ld.global", w->suffix, " ", w->registers(0), ", [$", w->count, "];");
    absl::StrAppend(&constraints, "l,b");
    for (llvm::Value* o : others) {
      args.push_back(o);
      absl::StrAppend(&constraints, ",r");
    }
    llvm::Type* ret = w->count == 1 ? static_cast<llvm::Type*>(b.getInt32Ty())
                                    : llvm::StructType::get(b.getContext(), std::vector<llvm::Type*>(w->count, b.getInt32Ty()));
    llvm::Value* r = inline_asm(b, ret, text, constraints, args);
    std::vector<llvm::Value*> loaded;
    for (int i = 0; i < w->count; ++i) loaded.push_back(w->count == 1 ? r : b.CreateExtractValue(r, i));
    return w->join(b, loaded);
  }
  bool masked_store(llvm::IRBuilder<>& b, llvm::Value* v, llvm::Value* ptr, llvm::Value* mask) override {
    std::optional<Words> w = words(b, v->getType());
    if (!w.has_value()) return false;
    std::vector<llvm::Value*> args = {global(b, ptr), mask};
    std::string constraints = "l,b";
    for (llvm::Value* word : w->split(b, v)) {
      args.push_back(word);
      constraints += ",r";
    }
    inline_asm(b, b.getVoidTy(), absl::StrCat("@$1 st.global", w->suffix, " [$0], ", w->registers(2), ";"),
               constraints + ",~{memory}", args);
    return true;
  }

  llvm::Value* fast_divide(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* y) override {
    return pure_asm(b, x->getType(), "div.full.f32 $0, $1, $2;", "=f,f,f", {x, y});
  }

  // wgmma on sm_90a where the product suits it; mma.sync on the chips
  // before it, on plain sm_90, and on sm_90a for products wgmma cannot take
  // (fewer than 64 rows a warpgroup, plain tiles), as Triton's MMAv2 on
  // Hopper. Not where wgmma would take the operands read K-major: there
  // lower_dot names that fix (its speed is wgmma's).
  std::shared_ptr<const Layout> mma_layout(const MmaShape& shape, const SharedMatrix& a,
                                           const SharedMatrix& b) override {
    if (!chip_.wgmma) return nvptx::mma_sync_layout(shape, a, b, threads_, chip_.fp8_mma);
    if (std::shared_ptr<const Layout> layout = nvptx::wgmma_layout(shape, a, b, threads_)) return layout;
    if (nvptx::wgmma_layout(shape, k_major(shape.m, shape.k, a), k_major(shape.n, shape.k, b), threads_) != nullptr) {
      return nullptr;
    }
    return nvptx::mma_sync_layout(shape, a, b, threads_, chip_.fp8_mma);
  }
  std::shared_ptr<const Layout> mma_register_a_layout(const MmaShape& shape, const SharedMatrix& b) override {
    if (!chip_.wgmma) return nvptx::mma_sync_register_a_layout(shape, b, threads_, chip_.fp8_mma);
    if (std::shared_ptr<const Layout> layout = nvptx::wgmma_register_a_layout(shape, b, threads_)) return layout;
    return nvptx::mma_sync_register_a_layout(shape, b, threads_, chip_.fp8_mma);
  }
  std::vector<llvm::Value*> mma(llvm::IRBuilder<>& b, const MmaShape& shape, const SharedMatrix& a,
                                const SharedMatrix& bm, std::vector<llvm::Value*> acc, int in_flight) override {
    // The same choice as mma_layout's, which planned the accumulator.
    last_wgmma_ = chip_.wgmma && (a.registers ? nvptx::wgmma_register_a_layout(shape, bm, threads_)
                                              : nvptx::wgmma_layout(shape, a, bm, threads_)) != nullptr;
    if (!last_wgmma_) return nvptx::emit_mma_sync(b, shape, a, bm, std::move(acc), tid_, threads_, chip_.fp8_mma);
    any_wgmma_ = true;
    return nvptx::emit_wgmma(b, shape, a, bm, std::move(acc), warpgroup(), threads_, in_flight);
  }
  bool store_matrix(llvm::IRBuilder<>& b, const Layout& layout, const std::vector<llvm::Value*>& slots, int64_t cols,
                    const std::function<llvm::Value*(llvm::Value*)>& address, const SlotFilter& keep) override {
    if (!chip_.tma) return false;  // stmatrix: sm_90
    return nvptx::emit_stmatrix(b, layout, slots, cols, tid_, address, keep);
  }
  std::vector<llvm::Value*> mma_drain(llvm::IRBuilder<>& b, std::vector<llvm::Value*> acc) override {
    // mma.sync is done when it returns; an accumulator of mma.sync in a
    // kernel with wgmma waits for nothing.
    return any_wgmma_ ? nvptx::wgmma_wait(b, std::move(acc), 0) : acc;
  }
  void mma_operands_read(llvm::IRBuilder<>& b) override {
    // A warpgroup's wait (a warp's mma.sync) is its whole product's; others may still read.
    if (threads_ > (last_wgmma_ ? kWarpgroup : 32)) barrier(b);
  }
  void mma_operands_written(llvm::IRBuilder<>& b) override {
    // Written through the generic proxy; wgmma reads through the async one.
    if (chip_.tma) inline_asm(b, b.getVoidTy(), "fence.proxy.async.shared::cta;", "~{memory}", {});
    barrier(b);
  }
  bool async_copies() const override { return true; }
  void async_copy(llvm::IRBuilder<>& b, llvm::Value* dst, llvm::Value* src, int64_t bytes, llvm::Value* ok) override {
    // (.cg, which skips L1, copies 16 bytes only.)
    const std::string text =
        absl::StrCat("cp.async.", bytes == 16 ? "cg" : "ca", ".shared.global [$0], [$1], ", bytes, ", $2;");
    llvm::Value* from = b.CreatePtrToInt(global(b, src), b.getInt64Ty());
    llvm::Value* size = b.CreateSelect(ok, b.getInt32(static_cast<int32_t>(bytes)), b.getInt32(0));
    inline_asm(b, b.getVoidTy(), text, "r,l,r,~{memory}", {shared32(b, dst), from, size});
  }
  void async_commit(llvm::IRBuilder<>& b) override {
    inline_asm(b, b.getVoidTy(), "cp.async.commit_group;", "~{memory}", {});
  }
  void async_wait(llvm::IRBuilder<>& b, int pending) override {
    inline_asm(b, b.getVoidTy(), absl::StrCat("cp.async.wait_group ", pending, ";"), "~{memory}", {});
  }
  bool swizzles_shared_tiles() const override { return chip_.tma; }
  int warp_size() const override { return 32; }

  // Before sm_90 TMA is the copy by the program's threads of every target,
  // from tessel's host form of the map, and needs no mbarrier.
  void init_tma_barriers(llvm::IRBuilder<>& b, llvm::Value* barriers, int count, int arrivals) override {
    if (!chip_.tma) return;
    single_thread(b, [&] {
      for (int i = 0; i < count; ++i) {
        llvm::Value* bar = b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), barriers, 8 * i);
        inline_asm(b, b.getVoidTy(), "mbarrier.init.shared::cta.b64 [$0], $1;", "r,r,~{memory}",
                   {shared32(b, bar), b.getInt32(arrivals)});
      }
      inline_asm(b, b.getVoidTy(), "fence.mbarrier_init.release.cluster;", "~{memory}", {});
    });
    barrier(b);
  }

  void tma_load(llvm::IRBuilder<>& b, const Type& map_type, llvm::Value* map, const std::vector<llvm::Value*>& coords,
                llvm::Value* smem, int64_t bytes, llvm::Value* bar, llvm::Value* phase, int parts) override {
    if (!chip_.tma) return GpuTarget::tma_load(b, map_type, map, coords, smem, bytes, bar, phase, parts);
    barrier(b);  // every thread is done with the buffer's previous contents
    tma_issue(b, bar, bytes, {TmaCopy{&map_type, map, coords, smem, parts, false}});
    llvm::Value* parity = b.CreateLoad(b.getInt32Ty(), phase);
    tma_wait(b, bar, parity);
    b.CreateStore(b.CreateXor(parity, 1), phase);
  }

  bool tma_async() const override { return chip_.tma; }
  bool rounds_to_bf16() const override { return true; }  // cvt.rn.bf16.f32 (sm_80 on)
  void tma_issue(llvm::IRBuilder<>& b, llvm::Value* bar, int64_t bytes, const std::vector<TmaCopy>& copies) override {
    llvm::Value* bar32 = shared32(b, bar);
    single_thread(b, [&] {
      inline_asm(b, b.getVoidTy(), "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,r,~{memory}",
                 {bar32, b.getInt32(bytes)});
      for (const TmaCopy& c : copies) {
        // Box r of a tile of parts: r box heights down dim 0, and r box
        // heights into each of the tile's panels.
        auto copy_part = [&](llvm::Value* r) {
          std::vector<llvm::Value*> at = c.coords;
          const int64_t rows = c.map_type->shape()[0];
          at[0] = b.CreateAdd(at[0], b.CreateMul(r, b.getInt32(static_cast<int32_t>(rows))));
          llvm::Value* smem =
              b.CreateInBoundsGEP(b.getInt8Ty(), c.smem,
                                  b.CreateMul(b.CreateZExt(r, b.getInt64Ty()), b.getInt64(panel_bytes(*c.map_type))));
          for_each_panel(
              b, *c.map_type, at, smem,
              [&](const std::vector<llvm::Value*>& coords, llvm::Value* dst) {
                std::vector<llvm::Value*> args = {shared32(b, dst), c.map, bar32};
                std::string text = absl::StrCat("cp.async.bulk.tensor.", coords.size(),
                                                "d.shared::cluster.global.mbarrier::complete_tx::bytes");
                if (c.multicast) {
                  // To the same place in every program of the cluster.
                  absl::StrAppend(&text, ".multicast::cluster [$0], [$1, {", coord_list(4, coords.size()),
                                  "}], [$2], $3;");
                  args.push_back(b.getInt16(static_cast<uint16_t>((1u << cluster_) - 1)));
                } else {
                  absl::StrAppend(&text, " [$0], [$1, {", coord_list(3, coords.size()), "}], [$2];");
                }
                append_reversed(args, coords);
                inline_asm(b, b.getVoidTy(), text, constraints(c.multicast ? "r,l,r,h" : "r,l,r", coords.size()), args);
              },
              c.parts);
        };
        if (c.multicast) {
          copy_part(cluster_rank(b));
        } else {
          for (int r = 0; r < c.parts; ++r) copy_part(b.getInt32(r));
        }
      }
    });
  }
  void tma_wait(llvm::IRBuilder<>& b, llvm::Value* bar, llvm::Value* parity) override {
    llvm::Value* bar32 = shared32(b, bar);
    bounded_wait(b, [&] {
      return inline_asm(b, b.getInt32Ty(),
                        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [$1], $2; selp.u32 $0, 1, 0, p; }",
                        "=r,r,r,~{memory}", {bar32, parity});
    });
  }

  void barrier_arrive(llvm::IRBuilder<>& b, llvm::Value* bar) override {
    inline_asm(b, b.getVoidTy(), "mbarrier.arrive.shared::cta.b64 _, [$0];", "r,~{memory}", {shared32(b, bar)});
  }
  void cluster_arrive(llvm::IRBuilder<>& b, llvm::Value* bar) override {
    llvm::Value* bar32 = shared32(b, bar);
    for (int r = 0; r < cluster_; ++r) {
      inline_asm(b, b.getVoidTy(),
                 "{ .reg .b32 remote; mapa.shared::cluster.u32 remote, $0, $1; "
                 "mbarrier.arrive.shared::cluster.b64 _, [remote]; }",
                 "r,r,~{memory}", {bar32, b.getInt32(r)});
    }
  }
  void per_warp(llvm::IRBuilder<>& b, const std::function<void()>& body) override {
    b.CreateIntrinsic(llvm::Intrinsic::nvvm_bar_warp_sync, {}, {b.getInt32(-1)});
    llvm::Value* lane = b.CreateIntrinsic(llvm::Intrinsic::nvvm_read_ptx_sreg_laneid, {}, {});
    emit_if(b, b.CreateICmpEQ(lane, b.getInt32(0)), body);
  }
  void cluster_barrier(llvm::IRBuilder<>& b) override {
    if (cluster_ < 2 || !chip_.tma) {
      barrier(b);
      return;
    }
    inline_asm(b, b.getVoidTy(), "barrier.cluster.arrive.release.aligned; barrier.cluster.wait.acquire.aligned;",
               "~{memory}", {});
  }

  void tma_store(llvm::IRBuilder<>& b, const Type& map_type, llvm::Value* map, const std::vector<llvm::Value*>& coords,
                 llvm::Value* smem, bool add) override {
    tma_store_async(b, map_type, map, coords, smem, add);
    tma_store_wait(b, 0);
  }
  void tma_store_async(llvm::IRBuilder<>& b, const Type& map_type, llvm::Value* map,
                       const std::vector<llvm::Value*>& coords, llvm::Value* smem, bool add) override {
    if (!chip_.tma) return GpuTarget::tma_store(b, map_type, map, coords, smem, add);
    // The tile was written through the generic proxy; the copy engine reads
    // through the async proxy.
    inline_asm(b, b.getVoidTy(), "fence.proxy.async.shared::cta;", "~{memory}", {});
    barrier(b);
    single_thread(b, [&] {
      for_each_panel(b, map_type, coords, smem, [&](const std::vector<llvm::Value*>& at, llvm::Value* panel) {
        std::vector<llvm::Value*> args = {map, shared32(b, panel)};
        // The copy engine adds into the tensor for tma_reduce (its type is the map's).
        std::string text = absl::StrCat(add ? "cp.reduce.async.bulk.tensor." : "cp.async.bulk.tensor.", at.size(),
                                        add ? "d.global.shared::cta.add.tile.bulk_group [$0, {"
                                            : "d.global.shared::cta.bulk_group [$0, {",
                                        coord_list(2, at.size()), "}], [$1];");
        append_reversed(args, at);
        inline_asm(b, b.getVoidTy(), text, constraints("l,r", at.size()), args);
      });
      inline_asm(b, b.getVoidTy(), "cp.async.bulk.commit_group;", "~{memory}", {});
    });
  }
  void tma_store_wait(llvm::IRBuilder<>& b, int pending) override {
    if (!chip_.tma) return;
    single_thread(b, [&] {
      inline_asm(b, b.getVoidTy(), absl::StrCat("cp.async.bulk.wait_group.read ", pending, ";"), "~{memory}", {});
    });
    barrier(b);  // the buffers may be written again
  }

  // One or two warpgroups per consumer and a producer warpgroup after
  // them. Of the registers a program of this size has at entry (ptxas must
  // know them: .maxnreg), the producer gives up all but 40, which the
  // consumers take with setmaxnreg where the chip has it (sm_90a). (More
  // consumer warps would be left too few registers for a wgmma accumulator.)
  int split_program(int consumers, int units) override {
    const int rest = program_threads_ - kWarpgroup;
    if (consumers < 1 || units < 1 || units > 2 || rest != consumers * units * kWarpgroup) return 0;
    threads_ = units * kWarpgroup;
    const int entry = std::min(kMaxRegisters, kRegisterFile / program_threads_ / 8 * 8);
    consumer_registers_ =
        std::min(kMaxRegisters, (entry + (entry - kProducerRegisters) * kWarpgroup / rest) / 8 * 8);
    llvm::LLVMContext& ctx = fn_->getContext();
    fn_->getParent()->getOrInsertNamedMetadata("nvvm.annotations")->addOperand(llvm::MDNode::get(
        ctx, {llvm::ValueAsMetadata::get(fn_), llvm::MDString::get(ctx, "maxnreg"),
              llvm::ConstantAsMetadata::get(llvm::ConstantInt::get(llvm::Type::getInt32Ty(ctx), entry))}));
    return threads_;
  }
  void enter_group(llvm::IRBuilder<>& b, llvm::Value* group, bool producer) override {
    GpuTarget::enter_group(b, group, producer);
    if (!chip_.wgmma) return;
    b.CreateIntrinsic(producer ? llvm::Intrinsic::nvvm_setmaxnreg_dec_sync_aligned_u32
                               : llvm::Intrinsic::nvvm_setmaxnreg_inc_sync_aligned_u32,
                      {}, {b.getInt32(producer ? kProducerRegisters : consumer_registers_)});
  }

  llvm::Value* group_of_thread(llvm::IRBuilder<>& b, llvm::Value* thread, int threads) override {
    llvm::Value* group = b.CreateTrunc(b.CreateUDiv(thread, b.getInt64(threads)), b.getInt32Ty());
    return b.CreateZExt(from_lane0(b, group), b.getInt64Ty());
  }

  void program_barrier(llvm::IRBuilder<>& b) override { barrier(b); }
  // LLVM 19's NVPTX emits its atomics relaxed whatever their ordering, and
  // cannot select a scoped fence: the fence is PTX's. Where the copy
  // engine writes (tma_store) or reads (tma_load) global memory it does so
  // through the async proxy, which a proxy fence orders with the generic
  // one on either side.
  void device_fence(llvm::IRBuilder<>& b, bool release) override {
    if (!chip_.tma) {
      inline_asm(b, b.getVoidTy(), "fence.acq_rel.gpu;", "~{memory}", {});
      return;
    }
    inline_asm(b, b.getVoidTy(),
               release ? "fence.proxy.async.global; fence.acq_rel.gpu;" : "fence.acq_rel.gpu; fence.proxy.async.global;",
               "~{memory}", {});
  }
  llvm::Value* atomic_add_acq_rel_gpu(llvm::IRBuilder<>& b, llvm::Value* ptr, llvm::Value* v) override {
    return inline_asm(b, b.getInt64Ty(), "atom.acq_rel.gpu.add.u64 $0, [$1], $2;", "=l,l,l,~{memory}", {ptr, v});
  }
  llvm::Value* atomic_exch_acq_rel_gpu(llvm::IRBuilder<>& b, llvm::Value* ptr, llvm::Value* v) override {
    return inline_asm(b, b.getInt64Ty(), "atom.acq_rel.gpu.exch.b64 $0, [$1], $2;", "=l,l,l,~{memory}", {ptr, v});
  }
  llvm::Value* load_relaxed_gpu(llvm::IRBuilder<>& b, llvm::Value* ptr) override {
    return inline_asm(b, b.getInt64Ty(), "ld.relaxed.gpu.u64 $0, [$1];", "=l,l,~{memory}", {ptr});
  }
  void store_release_sys(llvm::IRBuilder<>& b, llvm::Value* ptr, llvm::Value* v) override {
    inline_asm(b, b.getVoidTy(), "st.release.sys.u64 [$0], $1;", "l,l,~{memory}", {ptr, v});
  }
  llvm::Value* load_acquire_sys(llvm::IRBuilder<>& b, llvm::Value* ptr) override {
    return inline_asm(b, b.getInt64Ty(), "ld.acquire.sys.u64 $0, [$1];", "=l,l,~{memory}", {ptr});
  }
  void tma_store_flush(llvm::IRBuilder<>& b) override {
    if (!chip_.tma) return;
    inline_asm(b, b.getVoidTy(), "cp.async.bulk.wait_group 0;", "~{memory}", {});
  }
  // Bulk stores still writing to global memory finish before the CTA exits.
  void epilogue(llvm::IRBuilder<>& b) override {
    if (!chip_.tma) return;
    single_thread(b, [&] { tma_store_flush(b); });
  }

 private:
  llvm::Type* param_type(llvm::IRBuilder<>& b, const Type& t) override {
    if (t.is_pointer() || t.is_tensor_map() || t.is_triggered_view()) return b.getPtrTy();
    return scalar_param_type(b, t.dtype());
  }
  llvm::Value* sreg(llvm::IRBuilder<>& b, llvm::Intrinsic::ID id) { return b.CreateIntrinsic(id, {}, {}); }
  // The i32 `v` as lane 0 of this warp holds it.
  static llvm::Value* from_lane0(llvm::IRBuilder<>& b, llvm::Value* v) {
    return b.CreateIntrinsic(llvm::Intrinsic::nvvm_shfl_sync_idx_i32, {},
                             {b.getInt32(0xFFFFFFFF), v, b.getInt32(0), b.getInt32(0x1F)});
  }

  // This thread's warpgroup in the program or in its group (i32), as lane 0
  // of its warp holds it: ptxas takes a value shuffled from one lane to be
  // the same across the warp and keeps what is computed from it (the wgmma
  // descriptors) in uniform registers. Made once for each tid_, right where
  // tid_ is made, so that it holds wherever tid_ does; 0 where the threads
  // are one warpgroup.
  llvm::Value* warpgroup() {
    if (threads_ == kWarpgroup) return llvm::ConstantInt::get(llvm::Type::getInt32Ty(tid_->getContext()), 0);
    if (warpgroup_of_ == tid_) return warpgroup_;
    warpgroup_of_ = tid_;
    llvm::IRBuilder<> b(tid_->getContext());
    if (auto* made = llvm::dyn_cast<llvm::Instruction>(tid_)) {
      b.SetInsertPoint(made->getParent(), std::next(made->getIterator()));
    }
    llvm::Value* own = b.CreateTrunc(b.CreateLShr(tid_, 7), b.getInt32Ty());
    return warpgroup_ = llvm::isa<llvm::Constant>(own) ? own : from_lane0(b, own);
  }
  int64_t tile_alignment() const {
    if (swizzled_) return tma::kSwizzledTileAlignment;
    return tensor_maps_ ? tma::kSharedTileAlignment : kDynamicSharedAlignment;
  }
  // The whole CTA's barrier 0, or in a group the group's own named barrier.
  void barrier(llvm::IRBuilder<>& b) override {
    if (group_ == nullptr) {
      // Right after another (nothing between them), it waits for nothing more.
      llvm::BasicBlock* block = b.GetInsertBlock();
      if (b.GetInsertPoint() == block->end() && !block->empty()) {
        const auto* last = llvm::dyn_cast<llvm::IntrinsicInst>(&block->back());
        if (last != nullptr && last->getIntrinsicID() == llvm::Intrinsic::nvvm_barrier0) return;
      }
      b.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier0, {}, {});
      return;
    }
    llvm::Value* id = b.CreateTrunc(b.CreateAdd(group_, b.getInt64(1)), b.getInt32Ty());
    b.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier_sync_cnt, {}, {id, b.getInt32(threads_)});
  }
  llvm::Value* shuffle_word(llvm::IRBuilder<>& b, llvm::Value* word, int lanes) override {
    return b.CreateIntrinsic(llvm::Intrinsic::nvvm_shfl_sync_bfly_i32, {},
                             {b.getInt32(0xFFFFFFFF), word, b.getInt32(lanes), b.getInt32(0x1F)});
  }
  llvm::Value* scratch(llvm::IRBuilder<>&) override { return scratch_; }
  static std::string coord_list(size_t first, size_t n) {
    std::vector<std::string> names;
    for (size_t i = 0; i < n; ++i) names.push_back(absl::StrCat("$", first + i));
    return absl::StrJoin(names, ", ");
  }
  static std::string constraints(const std::string& head, size_t coords) {
    std::string c = head;
    for (size_t i = 0; i < coords; ++i) c += ",r";
    return c + ",~{memory}";
  }
  // Calls `copy` once per panel of a box (tma::panel_elems) with the
  // panel's coordinates and its place in the tile at `smem`.
  // (In a tile of `parts` boxes along dim 0, whose panels are `parts`
  // times as tall.)
  static void for_each_panel(llvm::IRBuilder<>& b, const Type& map_type, const std::vector<llvm::Value*>& coords,
                             llvm::Value* smem,
                             const std::function<void(const std::vector<llvm::Value*>&, llvm::Value*)>& copy,
                             int parts = 1) {
    const int64_t inner = map_type.shape().back();
    const int64_t width = tma::panel_elems(inner, map_type.dtype().bytes(), map_type.swizzle());
    for (int64_t p = 0; p < inner / width; ++p) {
      std::vector<llvm::Value*> at = coords;
      if (p > 0) at.back() = b.CreateAdd(at.back(), llvm::ConstantInt::get(at.back()->getType(), p * width));
      copy(at, p == 0 ? smem : b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), smem, p * parts * panel_bytes(map_type)));
    }
  }
  // The bytes of one panel of a box of `map_type`.
  static int64_t panel_bytes(const Type& map_type) {
    const int64_t inner = map_type.shape().back(), elem = map_type.dtype().bytes();
    return map_type.numel() / inner * tma::panel_elems(inner, elem, map_type.swizzle()) * elem;
  }
  // This program's rank in its cluster (i32).
  static llvm::Value* cluster_rank(llvm::IRBuilder<>& b) {
    return b.CreateIntrinsic(llvm::Intrinsic::nvvm_read_ptx_sreg_cluster_ctarank, {}, {});
  }
  // PTX takes tensor coordinates innermost first; tessel's are outermost first.
  static void append_reversed(std::vector<llvm::Value*>& args, const std::vector<llvm::Value*>& coords) {
    args.insert(args.end(), coords.rbegin(), coords.rend());
  }

  // Polls `done` (an i32, nonzero when done) until it holds or the time
  // limit passes; then records kDeviceTimeout in tessel_error.
  void bounded_wait(llvm::IRBuilder<>& b, const std::function<llvm::Value*()>& done) {
    auto now = [&] { return inline_asm(b, b.getInt64Ty(), "mov.u64 $0, %globaltimer;", "=l", {}); };
    llvm::Value* start = now();
    emit_bounded_poll(
        b, [&] { return b.CreateICmpNE(done(), b.getInt32(0)); },
        [&](llvm::Value*) { return b.CreateICmpUGT(b.CreateSub(now(), start), b.getInt64(kWaitLimitNs)); },
        [&] {
          b.CreateAtomicRMW(llvm::AtomicRMWInst::Xchg, error_, b.getInt32(1), llvm::MaybeAlign(4),
                            llvm::AtomicOrdering::Monotonic);
        });
  }

  static constexpr int kWarpgroup = 128, kRegisterFile = 65536, kMaxRegisters = 240, kProducerRegisters = 40;
  int consumer_registers_ = 0;  // what split_program gave each consumer thread
  llvm::Value* warpgroup_ = nullptr;     // warpgroup()'s value for the tid_ of
  llvm::Value* warpgroup_of_ = nullptr;  // this
  std::unique_ptr<llvm::TargetMachine> tm_;
  const NvptxChip chip_;
  llvm::Function* fn_ = nullptr;
  llvm::GlobalVariable* smem_ = nullptr;
  llvm::GlobalVariable* scratch_ = nullptr;
  llvm::GlobalVariable* error_ = nullptr;
  int min_programs_ = 1;      // programs to fit on one SM at once
  int cluster_ = 1;           // programs per cluster
  bool tensor_maps_ = false;  // the kernel has tensor-map parameters
  bool swizzled_ = false;     // a tensor-map parameter is swizzled
  bool any_wgmma_ = false;    // a product so far ran on wgmma
  bool last_wgmma_ = false;   // the last one did
};

}  // namespace

absl::StatusOr<NvptxChip> nvptx_chip(const std::string& arch) {
  absl::string_view rest = arch;
  int number = 0;
  const bool specific = absl::ConsumePrefix(&rest, "sm_") && absl::ConsumeSuffix(&rest, "a");
  if (!absl::SimpleAtoi(rest, &number) || number < 80 || number > 90 || (specific && number != 90)) {
    return absl::InvalidArgumentError(absl::StrCat("nvptx target '", arch,
                                                   "': tessel compiles for sm_80 to sm_89 (Ampere and Ada) and "
                                                   "sm_90a (Hopper)"));
  }
  NvptxChip chip{.tma = number >= 90, .wgmma = specific, .fp8 = number >= 89, .fp8_mma = number == 89};
  if (number >= 90) {
    chip.shared_per_program = 232448, chip.shared_per_sm = 233472;
  } else if (number == 80 || number == 87) {
    chip.shared_per_program = 166912, chip.shared_per_sm = 167936;
  } else {  // sm_86, sm_89 and the other consumer chips
    chip.shared_per_program = 101376, chip.shared_per_sm = 102400;
  }
  return chip;
}

absl::StatusOr<std::unique_ptr<TargetInfo>> make_nvptx_target(const std::string& arch, int num_warps, int opt_level,
                                                              int min_programs) {
  init_llvm_targets();
  if (num_warps < 1 || num_warps > 32) {
    return absl::InvalidArgumentError(absl::StrCat("num_warps must be 1 to 32, got ", num_warps));
  }
  TESSEL_ASSIGN_OR_RETURN(const NvptxChip chip, nvptx_chip(arch));
  std::string err;
  const std::string triple = "nvptx64-nvidia-cuda";
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(triple, err);
  if (target == nullptr) return absl::InternalError(absl::StrCat("NVPTX target: ", err));
  llvm::TargetOptions options;
  std::unique_ptr<llvm::TargetMachine> tm(
      target->createTargetMachine(triple, arch, chip.fp8_mma ? "+ptx84" : "+ptx83", options, std::nullopt, std::nullopt,
                                  opt_level >= 3 ? llvm::CodeGenOptLevel::Aggressive : llvm::CodeGenOptLevel::Default));
  if (tm == nullptr) return absl::InvalidArgumentError(absl::StrCat("NVPTX target: unknown chip '", arch, "'"));
  return std::unique_ptr<TargetInfo>(new NvptxTarget(std::move(tm), chip, num_warps * 32, min_programs));
}

}  // namespace tessel::codegen
