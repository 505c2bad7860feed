// Kernel IR -> LLVM IR. Scalars are SSA values; a tile is a dense row-major
// buffer of its elements, written once by the op that defines it, and tile
// ops are loops over elements that LLVM's O3 pipeline vectorizes. Views
// (expand_dims, reshape) alias their operand's buffer. f16 and bf16 values
// are their 16 bits (i16): arithmetic widens them to f32, computes, and
// rounds once to nearest even, which gives the correctly rounded result for
// + - * / sqrt and fma.
#include "codegen/lower.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "codegen/views.h"
#include "dsl/ops.h"
#include "dsl/printer.h"
#include "dsl/status.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

namespace tessel::codegen {
namespace {

using llvm::IRBuilder;

bool is_narrow_float(DType d) { return d == f16 || d == bf16; }

class Lowering {
 public:
  Lowering(const KernelIR& ir, TargetInfo& target, llvm::LLVMContext& ctx)
      : ir_(ir), target_(target), ctx_(ctx), b_(ctx) {}

  absl::StatusOr<LoweredKernel> run() {
    auto module = std::make_unique<llvm::Module>(ir_.name, ctx_);
    module->setTargetTriple(target_.machine().getTargetTriple().str());
    module->setDataLayout(target_.machine().createDataLayout());
    module_ = module.get();
    fn_ = target_.declare_kernel(*module, ir_);
    entry_ = llvm::BasicBlock::Create(ctx_, "entry", fn_);
    llvm::BasicBlock* body = llvm::BasicBlock::Create(ctx_, "body", fn_);
    b_.SetInsertPoint(entry_);
    vals_.assign(ir_.values.size(), nullptr);
    std::vector<llvm::Value*> params = target_.params(b_, ir_);
    for (size_t i = 0; i < ir_.params.size(); ++i) vals_[ir_.params[i].value] = params[i];
    alloca_point_ = b_.CreateBr(body);
    b_.SetInsertPoint(body);
    TESSEL_RETURN_IF_ERROR(block(0));
    b_.CreateRetVoid();
    std::string err;
    llvm::raw_string_ostream os(err);
    if (llvm::verifyModule(*module, &os)) {
      return absl::InternalError(absl::StrCat("codegen produced invalid LLVM IR for kernel '", ir_.name, "': ", err));
    }
    return LoweredKernel{std::move(module), fn_->getName().str(), shared_bytes_};
  }

 private:
  // ---- Types -------------------------------------------------------------
  llvm::Type* reg_type(DType d) {
    switch (d.kind) {
      case ScalarKind::kI1: return b_.getInt1Ty();
      case ScalarKind::kI8: case ScalarKind::kU8: return b_.getInt8Ty();
      case ScalarKind::kI16: case ScalarKind::kU16: return b_.getInt16Ty();
      case ScalarKind::kI32: case ScalarKind::kU32: return b_.getInt32Ty();
      case ScalarKind::kI64: case ScalarKind::kU64: return b_.getInt64Ty();
      case ScalarKind::kF16: case ScalarKind::kBF16: return b_.getInt16Ty();
      case ScalarKind::kF32: return b_.getFloatTy();
      case ScalarKind::kF64: return b_.getDoubleTy();
    }
    return nullptr;
  }
  llvm::Type* ptr_type() { return llvm::PointerType::get(ctx_, target_.global_address_space()); }
  // The register type of a scalar, pointer, or a tile's element.
  llvm::Type* elem_type(const Type& t) {
    if (t.is_pointer() || (t.is_tile() && t.elements_are_pointers())) return ptr_type();
    return reg_type(t.dtype());
  }
  // In memory an i1 takes a byte.
  llvm::Type* elem_mem_type(const Type& t) {
    llvm::Type* r = elem_type(t);
    return r->isIntegerTy(1) ? b_.getInt8Ty() : r;
  }

  // ---- Buffers and loops ---------------------------------------------------
  llvm::Value* new_buffer(const Type& tile) {
    IRBuilder<> eb(alloca_point_);
    auto* a = eb.CreateAlloca(elem_mem_type(tile), eb.getInt64(tile.numel()), "tile");
    a->setAlignment(llvm::Align(64));
    return a;
  }
  llvm::Value* load_elem(llvm::Value* buf, const Type& tile, llvm::Value* i) {
    llvm::Type* mt = elem_mem_type(tile);
    llvm::Value* v = b_.CreateLoad(mt, b_.CreateInBoundsGEP(mt, buf, i));
    return mt == elem_type(tile) ? v : b_.CreateTrunc(v, b_.getInt1Ty());
  }
  void store_elem(llvm::Value* buf, const Type& tile, llvm::Value* i, llvm::Value* v) {
    llvm::Type* mt = elem_mem_type(tile);
    if (mt != v->getType()) v = b_.CreateZExt(v, mt);
    b_.CreateStore(v, b_.CreateInBoundsGEP(mt, buf, i));
  }
  // for (i = 0; i < n; ++i) body(i), with an i64 index.
  void loop(int64_t n, const std::function<void(llvm::Value*)>& body) {
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    llvm::BasicBlock* head = llvm::BasicBlock::Create(ctx_, "loop", fn_);
    llvm::BasicBlock* exit = llvm::BasicBlock::Create(ctx_, "loop.end", fn_);
    b_.CreateBr(head);
    b_.SetInsertPoint(head);
    llvm::PHINode* i = b_.CreatePHI(b_.getInt64Ty(), 2, "i");
    i->addIncoming(b_.getInt64(0), pre);
    body(i);
    llvm::Value* next = b_.CreateAdd(i, b_.getInt64(1), "", true, true);
    i->addIncoming(next, b_.GetInsertBlock());
    b_.CreateCondBr(b_.CreateICmpULT(next, b_.getInt64(n)), head, exit);
    b_.SetInsertPoint(exit);
  }
  // Loops over every index of `shape`; body gets the indices and the
  // row-major linear index.
  void loop_nest(const Shape& shape, const std::function<void(const std::vector<llvm::Value*>&, llvm::Value*)>& body,
                 std::vector<llvm::Value*> idx = {}) {
    if (idx.size() == shape.size()) {
      llvm::Value* linear = b_.getInt64(0);
      for (size_t d = 0; d < shape.size(); ++d) {
        linear = b_.CreateAdd(b_.CreateMul(linear, b_.getInt64(shape[d])), idx[d]);
      }
      body(idx, linear);
      return;
    }
    loop(shape[idx.size()], [&](llvm::Value* i) {
      std::vector<llvm::Value*> next = idx;
      next.push_back(i);
      loop_nest(shape, body, next);
    });
  }
  static std::vector<int64_t> strides(const Shape& shape) {
    std::vector<int64_t> s(shape.size(), 1);
    for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) s[d] = s[d + 1] * shape[d + 1];
    return s;
  }
  llvm::Value* linear_index(const std::vector<llvm::Value*>& idx, const std::vector<int64_t>& stride) {
    llvm::Value* lin = b_.getInt64(0);
    for (size_t d = 0; d < idx.size(); ++d) {
      if (stride[d] != 0) lin = b_.CreateAdd(lin, b_.CreateMul(idx[d], b_.getInt64(stride[d])));
    }
    return lin;
  }
  void copy_tile(llvm::Value* dst, llvm::Value* src, const Type& tile) {
    int64_t bytes = tile.numel() * module_->getDataLayout().getTypeAllocSize(elem_mem_type(tile));
    b_.CreateMemCpy(dst, llvm::Align(64), src, llvm::Align(64), bytes);
  }

  // ---- Scalar semantics ------------------------------------------------------
  // f16/bf16 bits -> f32 (exact); other types pass through.
  llvm::Value* widen(llvm::Value* v, DType d) {
    if (d == f16) return b_.CreateFPExt(b_.CreateBitCast(v, b_.getHalfTy()), b_.getFloatTy());
    if (d == bf16) return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(v, b_.getInt32Ty()), 16), b_.getFloatTy());
    return v;
  }
  // f32 -> f16/bf16 bits, rounding to nearest even; other types pass through.
  llvm::Value* narrow(llvm::Value* v, DType d) {
    if (d == f16) return b_.CreateBitCast(b_.CreateFPTrunc(v, b_.getHalfTy()), b_.getInt16Ty());
    if (d != bf16) return v;
    llvm::Value* bits = b_.CreateBitCast(v, b_.getInt32Ty());
    llvm::Value* lsb = b_.CreateAnd(b_.CreateLShr(bits, 16), 1);
    llvm::Value* rounded = b_.CreateLShr(b_.CreateAdd(bits, b_.CreateAdd(lsb, b_.getInt32(0x7FFF))), 16);
    llvm::Value* quiet = b_.CreateOr(b_.CreateLShr(bits, 16), 0x40);
    llvm::Value* nan = b_.CreateFCmpUNO(v, v);
    return b_.CreateTrunc(b_.CreateSelect(nan, quiet, rounded), b_.getInt16Ty());
  }
  // f64 -> f32 rounding to odd, so that a second rounding to a narrower
  // type gives the correctly rounded result.
  llvm::Value* f64_to_f32_odd(llvm::Value* x) {
    llvm::Value* r = b_.CreateFPTrunc(x, b_.getFloatTy());
    llvm::Value* back = b_.CreateFPExt(r, b_.getDoubleTy());
    llvm::Value* inexact = b_.CreateFCmpONE(back, x);
    llvm::Value* bits = b_.CreateBitCast(r, b_.getInt32Ty());
    llvm::Value* away = b_.CreateFCmpOGT(intrinsic(llvm::Intrinsic::fabs, {back}), intrinsic(llvm::Intrinsic::fabs, {x}));
    llvm::Value* toward_zero = b_.CreateSelect(away, b_.CreateSub(bits, b_.getInt32(1)), bits);
    llvm::Value* odd = b_.CreateOr(toward_zero, 1);
    return b_.CreateBitCast(b_.CreateSelect(inexact, odd, bits), b_.getFloatTy());
  }
  llvm::Value* intrinsic(llvm::Intrinsic::ID id, std::vector<llvm::Value*> args) {
    return b_.CreateIntrinsic(id, {args[0]->getType()}, args);
  }

  // Integer division and remainder with GPU-like results where C is
  // undefined: x / 0 = -1 (all ones), x % 0 = x, INT_MIN / -1 wraps.
  llvm::Value* int_divrem(bool rem, bool is_signed, llvm::Value* x, llvm::Value* y) {
    llvm::Type* t = x->getType();
    llvm::Value* zero = llvm::ConstantInt::get(t, 0);
    llvm::Value* one = llvm::ConstantInt::get(t, 1);
    llvm::Value* by_zero = b_.CreateICmpEQ(y, zero);
    llvm::Value* safe = b_.CreateSelect(by_zero, one, y);
    if (is_signed) {
      llvm::Value* min = llvm::ConstantInt::get(t, llvm::APInt::getSignedMinValue(t->getIntegerBitWidth()));
      llvm::Value* overflow = b_.CreateAnd(b_.CreateICmpEQ(x, min), b_.CreateICmpEQ(y, llvm::ConstantInt::get(t, -1, true)));
      llvm::Value* q = rem ? b_.CreateSRem(x, b_.CreateSelect(overflow, one, safe))
                           : b_.CreateSDiv(x, b_.CreateSelect(overflow, one, safe));
      if (rem) q = b_.CreateSelect(overflow, zero, q);
      return b_.CreateSelect(by_zero, rem ? x : llvm::ConstantInt::get(t, -1, true), q);
    }
    llvm::Value* q = rem ? b_.CreateURem(x, safe) : b_.CreateUDiv(x, safe);
    return b_.CreateSelect(by_zero, rem ? x : llvm::ConstantInt::getAllOnesValue(t), q);
  }
  // Shifts by the bit width or more give 0 (or the sign) instead of poison.
  llvm::Value* shift(bool left, bool is_signed, llvm::Value* x, llvm::Value* n) {
    llvm::Type* t = x->getType();
    unsigned bits = t->getIntegerBitWidth();
    llvm::Value* big = b_.CreateICmpUGE(n, llvm::ConstantInt::get(t, bits));
    if (!left && is_signed) return b_.CreateAShr(x, b_.CreateSelect(big, llvm::ConstantInt::get(t, bits - 1), n));
    llvm::Value* r = left ? b_.CreateShl(x, b_.CreateSelect(big, llvm::ConstantInt::get(t, 0), n))
                          : b_.CreateLShr(x, b_.CreateSelect(big, llvm::ConstantInt::get(t, 0), n));
    return b_.CreateSelect(big, llvm::ConstantInt::get(t, 0), r);
  }

  llvm::Value* binary(OpCode op, DType d, llvm::Value* x, llvm::Value* y) {
    if (d.is_float()) {
      x = widen(x, d);
      y = widen(y, d);
      llvm::Value* r = nullptr;
      switch (op) {
        case OpCode::kAdd: r = b_.CreateFAdd(x, y); break;
        case OpCode::kSub: r = b_.CreateFSub(x, y); break;
        case OpCode::kMul: r = b_.CreateFMul(x, y); break;
        case OpCode::kDiv: r = b_.CreateFDiv(x, y); break;
        case OpCode::kRem: r = b_.CreateFRem(x, y); break;
        case OpCode::kMin: r = intrinsic(llvm::Intrinsic::minnum, {x, y}); break;
        case OpCode::kMax: r = intrinsic(llvm::Intrinsic::maxnum, {x, y}); break;
        case OpCode::kEq: return b_.CreateFCmpOEQ(x, y);
        case OpCode::kNe: return b_.CreateFCmpUNE(x, y);
        case OpCode::kLt: return b_.CreateFCmpOLT(x, y);
        case OpCode::kLe: return b_.CreateFCmpOLE(x, y);
        case OpCode::kGt: return b_.CreateFCmpOGT(x, y);
        case OpCode::kGe: return b_.CreateFCmpOGE(x, y);
        default: TESSEL_CHECK(false, "not a float binary op");
      }
      return narrow(r, d);
    }
    bool s = d.is_signed();
    switch (op) {
      case OpCode::kAdd: return b_.CreateAdd(x, y);
      case OpCode::kSub: return b_.CreateSub(x, y);
      case OpCode::kMul: return b_.CreateMul(x, y);
      case OpCode::kDiv: return int_divrem(false, s, x, y);
      case OpCode::kRem: return int_divrem(true, s, x, y);
      case OpCode::kMin: return intrinsic(s ? llvm::Intrinsic::smin : llvm::Intrinsic::umin, {x, y});
      case OpCode::kMax: return intrinsic(s ? llvm::Intrinsic::smax : llvm::Intrinsic::umax, {x, y});
      case OpCode::kAnd: return b_.CreateAnd(x, y);
      case OpCode::kOr: return b_.CreateOr(x, y);
      case OpCode::kXor: return b_.CreateXor(x, y);
      case OpCode::kShl: return shift(true, s, x, y);
      case OpCode::kShr: return shift(false, s, x, y);
      case OpCode::kEq: return b_.CreateICmpEQ(x, y);
      case OpCode::kNe: return b_.CreateICmpNE(x, y);
      case OpCode::kLt: return s ? b_.CreateICmpSLT(x, y) : b_.CreateICmpULT(x, y);
      case OpCode::kLe: return s ? b_.CreateICmpSLE(x, y) : b_.CreateICmpULE(x, y);
      case OpCode::kGt: return s ? b_.CreateICmpSGT(x, y) : b_.CreateICmpUGT(x, y);
      case OpCode::kGe: return s ? b_.CreateICmpSGE(x, y) : b_.CreateICmpUGE(x, y);
      default: TESSEL_CHECK(false, "not an integer binary op");
    }
    return nullptr;
  }

  llvm::Value* unary(OpCode op, DType d, llvm::Value* x) {
    if (is_narrow_float(d) && (op == OpCode::kNeg || op == OpCode::kAbs)) {
      return op == OpCode::kNeg ? b_.CreateXor(x, 0x8000) : b_.CreateAnd(x, 0x7FFF);
    }
    if (op == OpCode::kNeg) return d.is_float() ? b_.CreateFNeg(x) : b_.CreateNeg(x);
    if (op == OpCode::kNot) return b_.CreateNot(x);
    if (op == OpCode::kAbs) {
      return d.is_float() ? intrinsic(llvm::Intrinsic::fabs, {x})
                          : (d.is_signed() ? intrinsic(llvm::Intrinsic::abs, {x, b_.getFalse()}) : x);
    }
    llvm::Value* w = widen(x, d);
    llvm::Value* r = nullptr;
    switch (op) {
      case OpCode::kExp: r = intrinsic(llvm::Intrinsic::exp, {w}); break;
      case OpCode::kLog: r = intrinsic(llvm::Intrinsic::log, {w}); break;
      case OpCode::kSqrt: r = intrinsic(llvm::Intrinsic::sqrt, {w}); break;
      case OpCode::kFloor: r = intrinsic(llvm::Intrinsic::floor, {w}); break;
      case OpCode::kRsqrt:
        r = b_.CreateFDiv(llvm::ConstantFP::get(w->getType(), 1.0), intrinsic(llvm::Intrinsic::sqrt, {w}));
        break;
      default: TESSEL_CHECK(false, "not a unary op");
    }
    return narrow(r, d);
  }

  llvm::Value* convert(llvm::Value* x, DType from, DType to) {
    if (from == to) return x;
    llvm::Type* t = reg_type(to);
    if (from.is_float() && to.is_float()) {
      if (is_narrow_float(to)) {
        llvm::Value* f = from == f64 ? f64_to_f32_odd(x) : widen(x, from);
        return narrow(f, to);
      }
      llvm::Value* w = widen(x, from);
      return w->getType() == t ? w : (from == f64 ? b_.CreateFPTrunc(w, t) : b_.CreateFPExt(w, t));
    }
    if (from.is_float()) {
      llvm::Value* w = widen(x, from);
      if (to.is_bool()) return b_.CreateFCmpUNE(w, llvm::ConstantFP::get(w->getType(), 0.0));
      // Saturating, NaN -> 0: what the GPU's cvt.rzi does.
      return b_.CreateIntrinsic(to.is_signed() ? llvm::Intrinsic::fptosi_sat : llvm::Intrinsic::fptoui_sat,
                                {t, w->getType()}, {w});
    }
    bool is_signed = from.is_signed() && !from.is_bool();
    if (to.is_float()) {
      if (!is_narrow_float(to)) return is_signed ? b_.CreateSIToFP(x, t) : b_.CreateUIToFP(x, t);
      llvm::Value* d = is_signed ? b_.CreateSIToFP(x, b_.getDoubleTy()) : b_.CreateUIToFP(x, b_.getDoubleTy());
      return narrow(f64_to_f32_odd(d), to);
    }
    if (to.is_bool()) return b_.CreateICmpNE(x, llvm::ConstantInt::get(x->getType(), 0));
    return b_.CreateIntCast(x, t, is_signed);
  }

  // One element of an elementwise op; `args` are element values.
  llvm::Value* elementwise(const Op& o, const std::vector<llvm::Value*>& args) {
    const Type& t0 = ir_.type(o.operands[0]);
    DType d = t0.dtype();
    switch (o.op) {
      case OpCode::kAdd: case OpCode::kSub: case OpCode::kMul: case OpCode::kDiv: case OpCode::kRem:
      case OpCode::kMin: case OpCode::kMax: case OpCode::kAnd: case OpCode::kOr: case OpCode::kXor:
      case OpCode::kShl: case OpCode::kShr: case OpCode::kEq: case OpCode::kNe: case OpCode::kLt:
      case OpCode::kLe: case OpCode::kGt: case OpCode::kGe:
        return binary(o.op, d, args[0], args[1]);
      case OpCode::kNeg: case OpCode::kNot: case OpCode::kExp: case OpCode::kLog: case OpCode::kSqrt:
      case OpCode::kRsqrt: case OpCode::kAbs: case OpCode::kFloor:
        return unary(o.op, d, args[0]);
      case OpCode::kFma:
        return narrow(intrinsic(llvm::Intrinsic::fma, {widen(args[0], d), widen(args[1], d), widen(args[2], d)}), d);
      case OpCode::kPtrAdd: {
        llvm::Value* off = b_.CreateIntCast(args[1], b_.getInt64Ty(), ir_.type(o.operands[1]).dtype().is_signed());
        return b_.CreateGEP(elem_mem_type(Type(d)), args[0], off);
      }
      case OpCode::kCast: return convert(args[0], d, ir_.type(o.results[0]).dtype());
      case OpCode::kSelect: return b_.CreateSelect(args[0], args[1], args[2]);
      case OpCode::kSplat: return args[0];
      default: TESSEL_CHECK(false, "not an elementwise op");
    }
    return nullptr;
  }

  static bool is_elementwise(OpCode op) {
    return (op >= OpCode::kAdd && op <= OpCode::kFma) || op == OpCode::kPtrAdd || op == OpCode::kCast ||
           op == OpCode::kSelect;
  }

  // ---- Ops -------------------------------------------------------------------
  absl::Status block(int b) {
    for (int o : ir_.blocks[b].ops) TESSEL_RETURN_IF_ERROR(op(ir_.ops[o]));
    return absl::OkStatus();
  }

  llvm::Value* val(int id) { return vals_[id]; }
  void set(const Op& o, llvm::Value* v) { vals_[o.results[0]] = v; }

  absl::Status op(const Op& o) {
    const Type rt = o.results.empty() ? Type() : ir_.type(o.results[0]);
    if (is_elementwise(o.op)) {
      if (!rt.is_tile()) {
        std::vector<llvm::Value*> args;
        for (int v : o.operands) args.push_back(val(v));
        set(o, elementwise(o, args));
        return absl::OkStatus();
      }
      llvm::Value* out = new_buffer(rt);
      loop(rt.numel(), [&](llvm::Value* i) {
        std::vector<llvm::Value*> args;
        for (int v : o.operands) args.push_back(load_elem(val(v), ir_.type(v), i));
        store_elem(out, rt, i, elementwise(o, args));
      });
      set(o, out);
      return absl::OkStatus();
    }
    switch (o.op) {
      case OpCode::kConstant: {
        DType d = rt.dtype();
        llvm::Type* t = reg_type(d);
        if (is_narrow_float(d)) {
          llvm::APFloat f(o.fval);
          bool lost;
          f.convert(d == f16 ? llvm::APFloat::IEEEhalf() : llvm::APFloat::BFloat(),
                    llvm::APFloat::rmNearestTiesToEven, &lost);
          set(o, b_.getInt(f.bitcastToAPInt()));
        } else {
          set(o, d.is_float() ? llvm::ConstantFP::get(t, o.fval) : llvm::ConstantInt::get(t, o.ints[0], d.is_signed()));
        }
        return absl::OkStatus();
      }
      case OpCode::kProgramId: set(o, target_.program_id(b_, static_cast<int>(o.ints[0]))); return absl::OkStatus();
      case OpCode::kNumPrograms:
        set(o, target_.num_programs(b_, static_cast<int>(o.ints[0])));
        return absl::OkStatus();
      case OpCode::kArange: {
        llvm::Value* out = new_buffer(rt);
        loop(rt.numel(), [&](llvm::Value* i) {
          store_elem(out, rt, i, b_.CreateTrunc(b_.CreateAdd(i, b_.getInt64(o.ints[0])), b_.getInt32Ty()));
        });
        set(o, out);
        return absl::OkStatus();
      }
      case OpCode::kSplat: {
        llvm::Value* out = new_buffer(rt);
        llvm::Value* x = val(o.operands[0]);
        loop(rt.numel(), [&](llvm::Value* i) { store_elem(out, rt, i, x); });
        set(o, out);
        return absl::OkStatus();
      }
      case OpCode::kExpandDims: case OpCode::kReshape:
        set(o, val(o.operands[0]));
        return absl::OkStatus();
      case OpCode::kBroadcast: case OpCode::kTrans: return permute(o, rt);
      case OpCode::kReduce: return reduce(o, rt);
      case OpCode::kLoad: return load(o, rt);
      case OpCode::kStore: return store(o);
      case OpCode::kAtomic: return atomic(o, rt);
      case OpCode::kAtomicCas: {
        DType d = rt.dtype();
        auto* cx = b_.CreateAtomicCmpXchg(val(o.operands[0]), val(o.operands[1]), val(o.operands[2]),
                                          llvm::MaybeAlign(d.bytes()), llvm::AtomicOrdering::AcquireRelease,
                                          llvm::AtomicOrdering::Acquire);
        set(o, b_.CreateExtractValue(cx, 0));
        return absl::OkStatus();
      }
      case OpCode::kTmaLoad: {
        int64_t bytes = rt.numel() * rt.dtype().bytes();
        shared_bytes_ = (shared_bytes_ + 127) / 128 * 128;
        llvm::Value* smem = b_.CreateGEP(b_.getInt8Ty(), target_.shared_base(b_), b_.getInt64(shared_bytes_));
        shared_bytes_ += bytes;
        target_.tma_load(b_, val(o.operands[0]), coords(o, 1), smem);
        set(o, smem);
        return absl::OkStatus();
      }
      case OpCode::kTmaStore:
        target_.tma_store(b_, val(o.operands[0]), coords(o, 2), val(o.operands[1]));
        return absl::OkStatus();
      case OpCode::kDot: return dot(o, rt);
      case OpCode::kFor: return for_op(o);
      case OpCode::kIf: return if_op(o);
      case OpCode::kYield: return absl::OkStatus();  // handled by the owner
      case OpCode::kPublish:
        ViewLowering(b_, target_).publish(val(o.operands[0]), val(o.operands[1]));
        return absl::OkStatus();
      case OpCode::kArrived:
        set(o, ViewLowering(b_, target_).arrived(val(o.operands[0]), val(o.operands[1])));
        return absl::OkStatus();
      case OpCode::kWait:
        ViewLowering(b_, target_).wait(val(o.operands[0]), val(o.operands[1]));
        return absl::OkStatus();
      case OpCode::kReusable:
        set(o, ViewLowering(b_, target_).reusable(val(o.operands[0]), val(o.operands[1])));
        return absl::OkStatus();
      default:
        return absl::InternalError(absl::StrCat("codegen: no lowering for ", opcode_name(o.op)));
    }
  }

  std::vector<llvm::Value*> coords(const Op& o, size_t first) {
    std::vector<llvm::Value*> c;
    for (size_t i = first; i < o.operands.size(); ++i) c.push_back(val(o.operands[i]));
    return c;
  }

  // Broadcast and transpose: out[idx] = in[map(idx)].
  absl::Status permute(const Op& o, const Type& rt) {
    const Type& in = ir_.type(o.operands[0]);
    std::vector<int64_t> in_strides = strides(in.shape());
    std::vector<int64_t> map(rt.rank());
    for (int d = 0; d < rt.rank(); ++d) {
      if (o.op == OpCode::kTrans) {
        map[d] = in_strides[o.ints[d]];
      } else {
        map[d] = in.shape()[d] == 1 ? 0 : in_strides[d];
      }
    }
    llvm::Value* out = new_buffer(rt);
    llvm::Value* src = val(o.operands[0]);
    loop_nest(rt.shape(), [&](const std::vector<llvm::Value*>& idx, llvm::Value* lin) {
      store_elem(out, rt, lin, load_elem(src, in, linear_index(idx, map)));
    });
    set(o, out);
    return absl::OkStatus();
  }

  llvm::Value* reduce_identity(OpCode combiner, DType d, llvm::Type* t) {
    if (d.is_float()) {
      if (combiner == OpCode::kAdd) return llvm::ConstantFP::get(t, 0.0);
      return llvm::ConstantFP::getInfinity(t, combiner == OpCode::kMax);
    }
    unsigned bits = t->getIntegerBitWidth();
    if (combiner == OpCode::kAdd) return llvm::ConstantInt::get(t, 0);
    bool s = d.is_signed();
    if (combiner == OpCode::kMax) {
      return llvm::ConstantInt::get(t, s ? llvm::APInt::getSignedMinValue(bits) : llvm::APInt::getMinValue(bits));
    }
    return llvm::ConstantInt::get(t, s ? llvm::APInt::getSignedMaxValue(bits) : llvm::APInt::getMaxValue(bits));
  }

  // f16 and bf16 reductions accumulate in f32 and round once.
  absl::Status reduce(const Op& o, const Type& rt) {
    const Type& in = ir_.type(o.operands[0]);
    int axis = static_cast<int>(o.ints[0]);
    auto combiner = static_cast<OpCode>(o.ints[1]);
    DType d = in.dtype();
    DType acc_d = is_narrow_float(d) ? f32 : d;
    llvm::Type* acc_t = reg_type(acc_d);
    std::vector<int64_t> in_strides = strides(in.shape());
    Shape outer = in.shape();
    outer.erase(outer.begin() + axis);
    std::vector<int64_t> outer_map = in_strides;
    outer_map.erase(outer_map.begin() + axis);
    llvm::Value* src = val(o.operands[0]);
    llvm::Value* out = rt.is_tile() ? new_buffer(rt) : nullptr;
    llvm::Value* scalar_result = nullptr;
    auto body = [&](const std::vector<llvm::Value*>& idx, llvm::Value* lin) {
      llvm::Value* base = linear_index(idx, outer_map);
      llvm::Value* acc_slot = nullptr;
      {
        IRBuilder<> eb(alloca_point_);
        acc_slot = eb.CreateAlloca(acc_t);
      }
      b_.CreateStore(reduce_identity(combiner, acc_d, acc_t), acc_slot);
      loop(in.shape()[axis], [&](llvm::Value* k) {
        llvm::Value* e = load_elem(src, in, b_.CreateAdd(base, b_.CreateMul(k, b_.getInt64(in_strides[axis]))));
        llvm::Value* acc = b_.CreateLoad(acc_t, acc_slot);
        b_.CreateStore(binary(combiner, acc_d, acc, widen(e, d)), acc_slot);
      });
      llvm::Value* r = narrow(b_.CreateLoad(acc_t, acc_slot), d);
      if (out != nullptr) store_elem(out, rt, lin, r);
      else scalar_result = r;
    };
    if (outer.empty()) {
      body({}, b_.getInt64(0));
    } else {
      loop_nest(outer, body);
    }
    set(o, out != nullptr ? out : scalar_result);
    return absl::OkStatus();
  }

  // A masked element reads `other` through a select of addresses, so that
  // masked-off lanes never touch memory and the loop stays branch-free.
  absl::Status load(const Op& o, const Type& rt) {
    const Type& pt = ir_.type(o.operands[0]);
    llvm::Type* mt = elem_mem_type(rt);
    bool masked = o.operands.size() == 3;
    auto one = [&](llvm::Value* p, llvm::Value* mask, llvm::Value* other_addr) {
      if (masked) p = b_.CreateSelect(mask, p, other_addr);
      llvm::Value* v = b_.CreateLoad(mt, p);
      return mt == elem_type(rt) ? v : b_.CreateTrunc(v, b_.getInt1Ty());
    };
    if (!pt.is_tile()) {
      llvm::Value* other_addr = nullptr;
      if (masked) {
        IRBuilder<> eb(alloca_point_);
        other_addr = eb.CreateAlloca(mt);
        llvm::Value* other = val(o.operands[2]);
        b_.CreateStore(mt == other->getType() ? other : b_.CreateZExt(other, mt), other_addr);
      }
      set(o, one(val(o.operands[0]), masked ? val(o.operands[1]) : nullptr, other_addr));
      return absl::OkStatus();
    }
    llvm::Value* out = new_buffer(rt);
    loop(rt.numel(), [&](llvm::Value* i) {
      llvm::Value* p = load_elem(val(o.operands[0]), pt, i);
      llvm::Value* mask = masked ? load_elem(val(o.operands[1]), ir_.type(o.operands[1]), i) : nullptr;
      llvm::Value* other_addr = masked ? b_.CreateInBoundsGEP(mt, val(o.operands[2]), i) : nullptr;
      store_elem(out, rt, i, one(p, mask, other_addr));
    });
    set(o, out);
    return absl::OkStatus();
  }

  // Runs `body` only where `mask` (may be null) holds.
  void guarded(llvm::Value* mask, const std::function<void()>& body) {
    if (mask == nullptr) {
      body();
      return;
    }
    llvm::BasicBlock* then = llvm::BasicBlock::Create(ctx_, "masked", fn_);
    llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx_, "masked.end", fn_);
    b_.CreateCondBr(mask, then, done);
    b_.SetInsertPoint(then);
    body();
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }

  absl::Status store(const Op& o) {
    const Type& pt = ir_.type(o.operands[0]);
    const Type& vt = ir_.type(o.operands[1]);
    bool masked = o.operands.size() == 3;
    llvm::Type* mt = elem_mem_type(vt);
    auto one = [&](llvm::Value* p, llvm::Value* v, llvm::Value* mask) {
      guarded(mask, [&] { b_.CreateStore(mt == v->getType() ? v : b_.CreateZExt(v, mt), p); });
    };
    if (!pt.is_tile()) {
      one(val(o.operands[0]), val(o.operands[1]), masked ? val(o.operands[2]) : nullptr);
      return absl::OkStatus();
    }
    loop(pt.numel(), [&](llvm::Value* i) {
      one(load_elem(val(o.operands[0]), pt, i), load_elem(val(o.operands[1]), vt, i),
          masked ? load_elem(val(o.operands[2]), ir_.type(o.operands[2]), i) : nullptr);
    });
    return absl::OkStatus();
  }

  absl::Status atomic(const Op& o, const Type& rt) {
    const Type& pt = ir_.type(o.operands[0]);
    DType d = rt.dtype();
    auto kind = static_cast<AtomicOp>(o.ints[0]);
    llvm::AtomicRMWInst::BinOp bin;
    switch (kind) {
      case AtomicOp::kAdd: bin = d.is_float() ? llvm::AtomicRMWInst::FAdd : llvm::AtomicRMWInst::Add; break;
      case AtomicOp::kMin: bin = d.is_signed() ? llvm::AtomicRMWInst::Min : llvm::AtomicRMWInst::UMin; break;
      case AtomicOp::kMax: bin = d.is_signed() ? llvm::AtomicRMWInst::Max : llvm::AtomicRMWInst::UMax; break;
      case AtomicOp::kAnd: bin = llvm::AtomicRMWInst::And; break;
      case AtomicOp::kOr: bin = llvm::AtomicRMWInst::Or; break;
      case AtomicOp::kXor: bin = llvm::AtomicRMWInst::Xor; break;
      default: bin = llvm::AtomicRMWInst::Xchg; break;
    }
    bool masked = o.operands.size() == 3;
    llvm::Type* t = reg_type(d);
    // A masked-off lane returns 0 and touches nothing.
    auto one = [&](llvm::Value* p, llvm::Value* v, llvm::Value* mask) -> llvm::Value* {
      if (mask == nullptr) {
        return b_.CreateAtomicRMW(bin, p, v, llvm::MaybeAlign(d.bytes()), llvm::AtomicOrdering::AcquireRelease);
      }
      llvm::BasicBlock* pre = b_.GetInsertBlock();
      llvm::Value* old = nullptr;
      llvm::BasicBlock* in = nullptr;
      guarded(mask, [&] {
        old = b_.CreateAtomicRMW(bin, p, v, llvm::MaybeAlign(d.bytes()), llvm::AtomicOrdering::AcquireRelease);
        in = b_.GetInsertBlock();
      });
      llvm::PHINode* phi = b_.CreatePHI(t, 2);
      phi->addIncoming(old, in);
      phi->addIncoming(llvm::Constant::getNullValue(t), pre);
      return phi;
    };
    if (!pt.is_tile()) {
      set(o, one(val(o.operands[0]), val(o.operands[1]), masked ? val(o.operands[2]) : nullptr));
      return absl::OkStatus();
    }
    llvm::Value* out = new_buffer(rt);
    loop(pt.numel(), [&](llvm::Value* i) {
      llvm::Value* r = one(load_elem(val(o.operands[0]), pt, i), load_elem(val(o.operands[1]), rt, i),
                           masked ? load_elem(val(o.operands[2]), ir_.type(o.operands[2]), i) : nullptr);
      store_elem(out, rt, i, r);
    });
    set(o, out);
    return absl::OkStatus();
  }

  // acc + a @ b, accumulating in f32 (f16, bf16, f32 inputs), f64 or i32.
  absl::Status dot(const Op& o, const Type& rt) {
    const Type& at = ir_.type(o.operands[0]);
    const Type& bt = ir_.type(o.operands[1]);
    int64_t m = at.shape()[0], k = at.shape()[1], n = bt.shape()[1];
    DType in = at.dtype(), out_d = rt.dtype();
    DType acc_d = in == f64 ? f64 : (in == i8 ? i32 : f32);
    Type acc_tile = Type::tile(acc_d, rt.shape());
    llvm::Value* acc = acc_d == out_d ? new_buffer(rt) : new_buffer(acc_tile);
    llvm::Value* c = val(o.operands[2]);
    if (acc_d == out_d) {
      copy_tile(acc, c, rt);
    } else {
      loop(rt.numel(), [&](llvm::Value* i) { store_elem(acc, acc_tile, i, convert(load_elem(c, rt, i), out_d, acc_d)); });
    }
    llvm::Value* a = val(o.operands[0]);
    llvm::Value* bv = val(o.operands[1]);
    loop(m, [&](llvm::Value* mi) {
      loop(k, [&](llvm::Value* ki) {
        llvm::Value* av = convert(load_elem(a, at, b_.CreateAdd(b_.CreateMul(mi, b_.getInt64(k)), ki)), in, acc_d);
        loop(n, [&](llvm::Value* ni) {
          llvm::Value* bval = convert(load_elem(bv, bt, b_.CreateAdd(b_.CreateMul(ki, b_.getInt64(n)), ni)), in, acc_d);
          llvm::Value* idx = b_.CreateAdd(b_.CreateMul(mi, b_.getInt64(n)), ni);
          llvm::Value* cur = load_elem(acc, acc_tile, idx);
          llvm::Value* prod = acc_d.is_float() ? b_.CreateFMul(av, bval) : b_.CreateMul(av, bval);
          store_elem(acc, acc_tile, idx, acc_d.is_float() ? b_.CreateFAdd(cur, prod) : b_.CreateAdd(cur, prod));
        });
      });
    });
    if (acc_d == out_d) {
      set(o, acc);
      return absl::OkStatus();
    }
    llvm::Value* result = new_buffer(rt);
    loop(rt.numel(), [&](llvm::Value* i) { store_elem(result, rt, i, convert(load_elem(acc, acc_tile, i), acc_d, out_d)); });
    set(o, result);
    return absl::OkStatus();
  }

  // Carried scalars are phis; carried tiles live in a buffer per carried
  // value, filled from the init before the loop and from the yield at the
  // end of each iteration.
  absl::Status for_op(const Op& o) {
    const Block& body = ir_.blocks[o.blocks[0]];
    const Op& yield = ir_.ops[body.ops.back()];
    DType d = ir_.type(o.operands[0]).dtype();
    bool s = d.is_signed();
    llvm::Type* it = reg_type(d);
    llvm::Value* lo = val(o.operands[0]);
    llvm::Value* hi = val(o.operands[1]);
    llvm::Value* step = val(o.operands[2]);
    size_t n = o.results.size();
    std::vector<llvm::Value*> bufs(n, nullptr);
    for (size_t i = 0; i < n; ++i) {
      const Type& t = ir_.type(o.results[i]);
      if (t.is_tile()) {
        bufs[i] = new_buffer(t);
        copy_tile(bufs[i], val(o.operands[3 + i]), t);
      }
    }
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    llvm::BasicBlock* head = llvm::BasicBlock::Create(ctx_, "for", fn_);
    llvm::BasicBlock* loop_body = llvm::BasicBlock::Create(ctx_, "for.body", fn_);
    llvm::BasicBlock* exit = llvm::BasicBlock::Create(ctx_, "for.end", fn_);
    // A step <= 0 runs no iteration rather than forever. The induction
    // variable is kept in i64 so that iv + step cannot wrap.
    llvm::Value* positive = b_.CreateICmpSGT(step, llvm::ConstantInt::get(it, 0));
    auto to64 = [&](llvm::Value* v) { return s ? b_.CreateSExt(v, b_.getInt64Ty()) : b_.CreateZExt(v, b_.getInt64Ty()); };
    llvm::Value* lo64 = to64(lo);
    llvm::Value* hi64 = to64(hi);
    llvm::Value* step64 = to64(step);
    b_.CreateBr(head);
    b_.SetInsertPoint(head);
    llvm::PHINode* iv64 = b_.CreatePHI(b_.getInt64Ty(), 2, "iv");
    iv64->addIncoming(lo64, pre);
    std::vector<llvm::PHINode*> phis(n, nullptr);
    for (size_t i = 0; i < n; ++i) {
      if (bufs[i] != nullptr) continue;
      phis[i] = b_.CreatePHI(elem_type(ir_.type(o.results[i])), 2);
      phis[i]->addIncoming(val(o.operands[3 + i]), pre);
    }
    llvm::Value* go = b_.CreateAnd(positive, b_.CreateICmpSLT(iv64, hi64));
    b_.CreateCondBr(go, loop_body, exit);
    b_.SetInsertPoint(loop_body);
    vals_[body.args[0]] = b_.CreateTrunc(iv64, it);
    for (size_t i = 0; i < n; ++i) vals_[body.args[1 + i]] = bufs[i] != nullptr ? bufs[i] : phis[i];
    TESSEL_RETURN_IF_ERROR(block(o.blocks[0]));
    carry_tiles(yield, bufs);
    iv64->addIncoming(b_.CreateAdd(iv64, step64), b_.GetInsertBlock());
    for (size_t i = 0; i < n; ++i) {
      if (phis[i] != nullptr) phis[i]->addIncoming(val(yield.operands[i]), b_.GetInsertBlock());
    }
    b_.CreateBr(head);
    b_.SetInsertPoint(exit);
    for (size_t i = 0; i < n; ++i) vals_[o.results[i]] = bufs[i] != nullptr ? bufs[i] : phis[i];
    return absl::OkStatus();
  }

  // Copies yielded tiles into the carried buffers; through temporaries when
  // a yielded tile is itself one of those buffers (a swap, a view).
  void carry_tiles(const Op& yield, const std::vector<llvm::Value*>& bufs) {
    std::vector<llvm::Value*> srcs(bufs.size(), nullptr);
    for (size_t i = 0; i < bufs.size(); ++i) {
      if (bufs[i] == nullptr || val(yield.operands[i]) == bufs[i]) continue;
      srcs[i] = val(yield.operands[i]);
      if (std::find(bufs.begin(), bufs.end(), srcs[i]) != bufs.end()) {
        const Type& t = ir_.type(yield.operands[i]);
        llvm::Value* tmp = new_buffer(t);
        copy_tile(tmp, srcs[i], t);
        srcs[i] = tmp;
      }
    }
    for (size_t i = 0; i < bufs.size(); ++i) {
      if (srcs[i] != nullptr) copy_tile(bufs[i], srcs[i], ir_.type(yield.operands[i]));
    }
  }

  // Results of an if are phis of the branches' values (tiles: of buffers).
  absl::Status if_op(const Op& o) {
    llvm::BasicBlock* blocks[2] = {llvm::BasicBlock::Create(ctx_, "then", fn_),
                                   llvm::BasicBlock::Create(ctx_, "else", fn_)};
    llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx_, "endif", fn_);
    b_.CreateCondBr(val(o.operands[0]), blocks[0], blocks[1]);
    std::vector<llvm::Value*> yielded[2];
    llvm::BasicBlock* ends[2];
    for (int i = 0; i < 2; ++i) {
      b_.SetInsertPoint(blocks[i]);
      TESSEL_RETURN_IF_ERROR(block(o.blocks[i]));
      const Op& y = ir_.ops[ir_.blocks[o.blocks[i]].ops.back()];
      for (int v : y.operands) yielded[i].push_back(val(v));
      ends[i] = b_.GetInsertBlock();
      b_.CreateBr(done);
    }
    b_.SetInsertPoint(done);
    for (size_t r = 0; r < o.results.size(); ++r) {
      llvm::PHINode* phi = b_.CreatePHI(yielded[0][r]->getType(), 2);
      phi->addIncoming(yielded[0][r], ends[0]);
      phi->addIncoming(yielded[1][r], ends[1]);
      vals_[o.results[r]] = phi;
    }
    return absl::OkStatus();
  }

  const KernelIR& ir_;
  TargetInfo& target_;
  llvm::LLVMContext& ctx_;
  IRBuilder<> b_;
  llvm::Module* module_ = nullptr;
  llvm::Function* fn_ = nullptr;
  llvm::BasicBlock* entry_ = nullptr;
  llvm::Instruction* alloca_point_ = nullptr;
  std::vector<llvm::Value*> vals_;
  int64_t shared_bytes_ = 0;
};

}  // namespace

absl::StatusOr<LoweredKernel> lower(const KernelIR& ir, TargetInfo& target, llvm::LLVMContext& ctx) {
  return Lowering(ir, target, ctx).run();
}

}  // namespace tessel::codegen
