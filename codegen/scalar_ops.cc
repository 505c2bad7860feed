#include "codegen/scalar_ops.h"

#include <cmath>

#include "base/float8.h"
#include "base/status.h"
#include "codegen/math.h"

namespace tessel::codegen {

llvm::Type* ScalarOps::reg_type(DType d) {
  switch (d.kind) {
    case ScalarKind::kI1:
      return b_.getInt1Ty();
    case ScalarKind::kI8:
    case ScalarKind::kU8:
      return b_.getInt8Ty();
    case ScalarKind::kI16:
    case ScalarKind::kU16:
      return b_.getInt16Ty();
    case ScalarKind::kI32:
    case ScalarKind::kU32:
      return b_.getInt32Ty();
    case ScalarKind::kI64:
    case ScalarKind::kU64:
      return b_.getInt64Ty();
    case ScalarKind::kF16:
    case ScalarKind::kBF16:
      return b_.getInt16Ty();
    case ScalarKind::kF8E4M3:
    case ScalarKind::kF8E5M2:
      return b_.getInt8Ty();
    case ScalarKind::kF32:
      return b_.getFloatTy();
    case ScalarKind::kF64:
      return b_.getDoubleTy();
  }
  return nullptr;
}

namespace {

Float8 float8_of(DType d) { return d == f8e4m3 ? Float8::kE4M3 : Float8::kE5M2; }

}  // namespace

// base/float8.h's float8_to_float, in IR.
llvm::Value* ScalarOps::widen_float8(llvm::Value* v, DType d) {
  const Float8Format fmt = float8_format(float8_of(d));
  const int m_bits = fmt.mantissa_bits, top = (1 << fmt.exponent_bits) - 1;
  llvm::Value* x = b_.CreateZExt(v, b_.getInt32Ty());
  llvm::Value* sign = b_.CreateShl(b_.CreateAnd(x, 0x80), 24);
  llvm::Value* e = b_.CreateAnd(b_.CreateLShr(x, m_bits), top);
  llvm::Value* m = b_.CreateAnd(x, (1 << m_bits) - 1);
  llvm::Value* normal = b_.CreateOr(b_.CreateShl(b_.CreateAdd(e, b_.getInt32(127 - fmt.bias)), 23),
                                    b_.CreateShl(m, 23 - m_bits));
  llvm::Value* sub = b_.CreateBitCast(
      b_.CreateFMul(b_.CreateUIToFP(m, b_.getFloatTy()),
                    llvm::ConstantFP::get(b_.getFloatTy(), std::ldexp(1.0, 1 - fmt.bias - m_bits))),
      b_.getInt32Ty());
  llvm::Value* mag = b_.CreateSelect(b_.CreateICmpEQ(e, b_.getInt32(0)), sub, normal);
  llvm::Value* special = fmt.infinities ? b_.CreateICmpEQ(e, b_.getInt32(top))
                                        : b_.CreateICmpEQ(b_.CreateAnd(x, 0x7F), b_.getInt32(0x7F));
  llvm::Value* special_bits =
      fmt.infinities ? b_.CreateSelect(b_.CreateICmpEQ(m, b_.getInt32(0)), b_.getInt32(0x7F800000), b_.getInt32(0x7FC00000))
                     : b_.getInt32(0x7FC00000);
  mag = b_.CreateSelect(special, special_bits, mag);
  return b_.CreateBitCast(b_.CreateOr(sign, mag), b_.getFloatTy());
}

llvm::Value* ScalarOps::round_to_tf32(llvm::Value* v) {
  llvm::Value* bits = b_.CreateBitCast(v, b_.getInt32Ty());
  llvm::Value* odd = b_.CreateAnd(b_.CreateLShr(bits, 13), 1);
  llvm::Value* rounded = b_.CreateAnd(b_.CreateAdd(bits, b_.CreateAdd(odd, b_.getInt32(0xFFF))), ~0x1FFF);
  llvm::Value* finite = b_.CreateICmpNE(b_.CreateAnd(bits, 0x7F800000), b_.getInt32(0x7F800000));
  return b_.CreateBitCast(b_.CreateSelect(finite, rounded, bits), b_.getFloatTy());
}

// base/float8.h's float_to_float8, in IR.
llvm::Value* ScalarOps::narrow_float8(llvm::Value* v, DType d) {
  if (llvm::Value* own = target_.narrow_float8(b_, v, d)) return own;
  const Float8 f = float8_of(d);
  const Float8Format fmt = float8_format(f);
  const int m_bits = fmt.mantissa_bits, min_exponent = 1 - fmt.bias, shift = 23 - m_bits;
  llvm::Type* i32 = b_.getInt32Ty();
  llvm::Value* bits = b_.CreateBitCast(v, i32);
  llvm::Value* sign = b_.CreateAnd(b_.CreateLShr(bits, 24), 0x80);
  llvm::Value* abs_bits = b_.CreateAnd(bits, 0x7FFFFFFF);
  llvm::Value* a = b_.CreateBitCast(abs_bits, b_.getFloatTy());
  auto f32 = [&](double x) { return llvm::ConstantFP::get(b_.getFloatTy(), x); };
  llvm::Value* big = f32(std::ldexp(1.0, 23 + min_exponent - m_bits));
  llvm::Value* sub = b_.CreateSub(b_.CreateBitCast(b_.CreateFAdd(a, big), i32), b_.CreateBitCast(big, i32));
  llvm::Value* rounded = b_.CreateLShr(
      b_.CreateAdd(abs_bits, b_.CreateAdd(b_.CreateAnd(b_.CreateLShr(abs_bits, shift), 1), b_.getInt32((1 << (shift - 1)) - 1))),
      shift);
  llvm::Value* normal = b_.CreateSub(rounded, b_.getInt32((127 - fmt.bias) << m_bits));
  llvm::Value* mag = b_.CreateSelect(b_.CreateFCmpOLT(a, f32(std::ldexp(1.0, min_exponent))), sub, normal);
  mag = b_.CreateSelect(b_.CreateFCmpOGE(a, f32(float8_to_float(fmt.max_finite, f))), b_.getInt32(fmt.max_finite), mag);
  mag = b_.CreateSelect(b_.CreateFCmpUNO(v, v), b_.getInt32(fmt.nan), mag);
  return b_.CreateTrunc(b_.CreateOr(sign, mag), b_.getInt8Ty());
}

llvm::Value* ScalarOps::widen(llvm::Value* v, DType d) {
  if (d == f8e4m3 || d == f8e5m2) return widen_float8(v, d);
  if (d == f16) return b_.CreateFPExt(b_.CreateBitCast(v, b_.getHalfTy()), b_.getFloatTy());
  if (d == bf16) return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(v, b_.getInt32Ty()), 16), b_.getFloatTy());
  return v;
}

llvm::Value* ScalarOps::narrow(llvm::Value* v, DType d) {
  if (d == f8e4m3 || d == f8e5m2) return narrow_float8(v, d);
  if (d == f16) return b_.CreateBitCast(b_.CreateFPTrunc(v, b_.getHalfTy()), b_.getInt16Ty());
  if (d != bf16) return v;
  if (target_.rounds_to_bf16()) return b_.CreateBitCast(b_.CreateFPTrunc(v, b_.getBFloatTy()), b_.getInt16Ty());
  llvm::Value* bits = b_.CreateBitCast(v, b_.getInt32Ty());
  llvm::Value* lsb = b_.CreateAnd(b_.CreateLShr(bits, 16), 1);
  llvm::Value* rounded = b_.CreateLShr(b_.CreateAdd(bits, b_.CreateAdd(lsb, b_.getInt32(0x7FFF))), 16);
  llvm::Value* quiet = b_.CreateOr(b_.CreateLShr(bits, 16), 0x40);
  llvm::Value* nan = b_.CreateFCmpUNO(v, v);
  return b_.CreateTrunc(b_.CreateSelect(nan, quiet, rounded), b_.getInt16Ty());
}

// Rounding to odd (truncate, then set the last bit if anything was lost)
// keeps enough of a value that rounding it again, to a type at least two
// bits narrower, gives the correctly rounded result. From `r`, the value
// rounded to nearest: r when exact, else r truncated toward zero (one step
// back when r is `away` from zero) with its last bit set.
llvm::Value* ScalarOps::to_odd(llvm::Value* r, llvm::Value* inexact, llvm::Value* away) {
  llvm::Type* it = b_.getIntNTy(r->getType()->getPrimitiveSizeInBits());
  llvm::Value* bits = b_.CreateBitCast(r, it);
  llvm::Value* toward_zero = b_.CreateSelect(away, b_.CreateSub(bits, llvm::ConstantInt::get(it, 1)), bits);
  llvm::Value* odd = b_.CreateOr(toward_zero, llvm::ConstantInt::get(it, 1));
  return b_.CreateBitCast(b_.CreateSelect(inexact, odd, bits), r->getType());
}

// f64 -> f32 rounding to odd, so that a second rounding to a narrower
// type gives the correctly rounded result.
llvm::Value* ScalarOps::f64_to_f32_odd(llvm::Value* x) {
  llvm::Value* r = b_.CreateFPTrunc(x, b_.getFloatTy());
  llvm::Value* back = b_.CreateFPExt(r, b_.getDoubleTy());
  llvm::Value* away = b_.CreateFCmpOGT(intrinsic(llvm::Intrinsic::fabs, {back}), intrinsic(llvm::Intrinsic::fabs, {x}));
  return to_odd(r, b_.CreateFCmpONE(back, x), away);
}

// A 64-bit integer of magnitude 2^53 or more is inexact in f64, and
// converting it to f64 and then to f16/bf16 would round twice (2^62 + 2^54 + 1
// would become the bf16 tie 2^62 + 2^54, then 2^62). Rounding it to odd at
// bit 11 first leaves at most 53 significant bits, which f64 holds exactly.
// The two's-complement bits round negative values to odd as well.
llvm::Value* ScalarOps::i64_to_odd53(llvm::Value* x, bool is_signed) {
  llvm::Value* high = is_signed ? b_.CreateAShr(x, 53) : b_.CreateLShr(x, 53);
  llvm::Value* exact = b_.CreateICmpULE(b_.CreateAdd(high, b_.getInt64(1)), b_.getInt64(1));  // high is 0 or -1
  llvm::Value* lost = b_.CreateICmpNE(b_.CreateAnd(x, b_.getInt64(0x7FF)), b_.getInt64(0));
  llvm::Value* odd = b_.CreateOr(b_.CreateAnd(x, b_.getInt64(~int64_t{0x7FF})),
                                 b_.CreateSelect(lost, b_.getInt64(0x800), b_.getInt64(0)));
  return b_.CreateSelect(exact, x, odd);
}

llvm::Value* ScalarOps::intrinsic(llvm::Intrinsic::ID id, std::vector<llvm::Value*> args) {
  return b_.CreateIntrinsic(id, {args[0]->getType()}, args);
}

// Integer division and remainder with GPU-like results where C is
// undefined: x / 0 = -1 (all ones), x % 0 = x, INT_MIN / -1 wraps.
llvm::Value* ScalarOps::int_divrem(bool rem, bool is_signed, llvm::Value* x, llvm::Value* y) {
  llvm::Type* t = x->getType();
  llvm::Value* zero = llvm::ConstantInt::get(t, 0);
  llvm::Value* one = llvm::ConstantInt::get(t, 1);
  llvm::Value* by_zero = b_.CreateICmpEQ(y, zero);
  llvm::Value* safe = b_.CreateSelect(by_zero, one, y);
  if (is_signed) {
    llvm::Value* min = llvm::ConstantInt::get(t, llvm::APInt::getSignedMinValue(t->getIntegerBitWidth()));
    llvm::Value* overflow =
        b_.CreateAnd(b_.CreateICmpEQ(x, min), b_.CreateICmpEQ(y, llvm::ConstantInt::get(t, -1, true)));
    llvm::Value* q = rem ? b_.CreateSRem(x, b_.CreateSelect(overflow, one, safe))
                         : b_.CreateSDiv(x, b_.CreateSelect(overflow, one, safe));
    if (rem) q = b_.CreateSelect(overflow, zero, q);
    return b_.CreateSelect(by_zero, rem ? x : llvm::ConstantInt::get(t, -1, true), q);
  }
  llvm::Value* q = rem ? b_.CreateURem(x, safe) : b_.CreateUDiv(x, safe);
  return b_.CreateSelect(by_zero, rem ? x : llvm::ConstantInt::getAllOnesValue(t), q);
}

// Shifts by the bit width or more give 0 (or the sign) instead of poison.
llvm::Value* ScalarOps::shift(bool left, bool is_signed, llvm::Value* x, llvm::Value* n) {
  llvm::Type* t = x->getType();
  unsigned bits = t->getIntegerBitWidth();
  llvm::Value* big = b_.CreateICmpUGE(n, llvm::ConstantInt::get(t, bits));
  if (!left && is_signed) return b_.CreateAShr(x, b_.CreateSelect(big, llvm::ConstantInt::get(t, bits - 1), n));
  llvm::Value* r = left ? b_.CreateShl(x, b_.CreateSelect(big, llvm::ConstantInt::get(t, 0), n))
                        : b_.CreateLShr(x, b_.CreateSelect(big, llvm::ConstantInt::get(t, 0), n));
  return b_.CreateSelect(big, llvm::ConstantInt::get(t, 0), r);
}

llvm::Value* ScalarOps::binary(OpCode op, DType d, llvm::Value* x, llvm::Value* y, bool fast) {
  if (d.is_float()) {
    x = widen(x, d);
    y = widen(y, d);
    llvm::Value* r = nullptr;
    switch (op) {
      case OpCode::kAdd:
        r = b_.CreateFAdd(x, y);
        break;
      case OpCode::kSub:
        r = b_.CreateFSub(x, y);
        break;
      case OpCode::kMul:
        r = b_.CreateFMul(x, y);
        break;
      case OpCode::kDiv:
        if (fast && x->getType()->isFloatTy()) r = target_.fast_divide(b_, x, y);
        if (r == nullptr) r = b_.CreateFDiv(x, y);
        break;
      case OpCode::kRem: {
        // x - trunc(x / y) * y with one rounding (an fma), as on GPUs, where
        // the same IR runs: not C's fmod when x / y rounds up to an integer
        // or is beyond 2^24 (f32), and NaN for an infinite y.
        llvm::Value* q = intrinsic(llvm::Intrinsic::trunc, {b_.CreateFDiv(x, y)});
        r = intrinsic(llvm::Intrinsic::fma, {b_.CreateFNeg(q), y, x});
        break;
      }
      case OpCode::kMin:
        r = intrinsic(llvm::Intrinsic::minnum, {x, y});
        break;
      case OpCode::kMax:
        r = intrinsic(llvm::Intrinsic::maxnum, {x, y});
        break;
      case OpCode::kPow:  // f64 is refused by the builder (OpTraits::no_f64)
        TESSEL_CHECK(x->getType()->isFloatTy(), "pow of f64");
        r = emit_pow_f32(b_, x, y);
        break;
      case OpCode::kAtan2:  // the same
        TESSEL_CHECK(x->getType()->isFloatTy(), "atan2 of f64");
        r = emit_atan2_f32(b_, x, y);
        break;
      case OpCode::kEq:
        return b_.CreateFCmpOEQ(x, y);
      case OpCode::kNe:
        return b_.CreateFCmpUNE(x, y);
      case OpCode::kLt:
        return b_.CreateFCmpOLT(x, y);
      case OpCode::kLe:
        return b_.CreateFCmpOLE(x, y);
      case OpCode::kGt:
        return b_.CreateFCmpOGT(x, y);
      case OpCode::kGe:
        return b_.CreateFCmpOGE(x, y);
      default:
        TESSEL_CHECK(false, "not a float binary op");
    }
    return narrow(r, d);
  }
  bool s = d.is_signed();
  switch (op) {
    case OpCode::kAdd:
      return b_.CreateAdd(x, y);
    case OpCode::kSub:
      return b_.CreateSub(x, y);
    case OpCode::kMul:
      return b_.CreateMul(x, y);
    case OpCode::kDiv:
      return int_divrem(false, s, x, y);
    case OpCode::kRem:
      return int_divrem(true, s, x, y);
    case OpCode::kMin:
      return intrinsic(s ? llvm::Intrinsic::smin : llvm::Intrinsic::umin, {x, y});
    case OpCode::kMax:
      return intrinsic(s ? llvm::Intrinsic::smax : llvm::Intrinsic::umax, {x, y});
    case OpCode::kAnd:
      return b_.CreateAnd(x, y);
    case OpCode::kOr:
      return b_.CreateOr(x, y);
    case OpCode::kXor:
      return b_.CreateXor(x, y);
    case OpCode::kShl:
      return shift(true, s, x, y);
    case OpCode::kShr:
      return shift(false, s, x, y);
    case OpCode::kEq:
      return b_.CreateICmpEQ(x, y);
    case OpCode::kNe:
      return b_.CreateICmpNE(x, y);
    case OpCode::kLt:
      return s ? b_.CreateICmpSLT(x, y) : b_.CreateICmpULT(x, y);
    case OpCode::kLe:
      return s ? b_.CreateICmpSLE(x, y) : b_.CreateICmpULE(x, y);
    case OpCode::kGt:
      return s ? b_.CreateICmpSGT(x, y) : b_.CreateICmpUGT(x, y);
    case OpCode::kGe:
      return s ? b_.CreateICmpSGE(x, y) : b_.CreateICmpUGE(x, y);
    default:
      TESSEL_CHECK(false, "not an integer binary op");
  }
  return nullptr;
}

llvm::Value* ScalarOps::unary(OpCode op, DType d, llvm::Value* x, bool fast) {
  if (is_narrow_float(d) && (op == OpCode::kNeg || op == OpCode::kAbs)) {  // the sign bit
    const uint64_t sign = uint64_t{1} << (d.bits() - 1);
    return op == OpCode::kNeg ? b_.CreateXor(x, sign) : b_.CreateAnd(x, sign - 1);
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
    case OpCode::kExp:
    case OpCode::kLog:
    case OpCode::kExp2:
    case OpCode::kLog2:
    case OpCode::kTanh:
    case OpCode::kSigmoid:
    case OpCode::kErf:
    case OpCode::kSin:
    case OpCode::kCos:
    case OpCode::kSinh:
    case OpCode::kCosh:
    case OpCode::kLog1p:
    case OpCode::kExpm1:
    case OpCode::kTan:
    case OpCode::kAsin:
    case OpCode::kAcos:
    case OpCode::kAtan:
      if (fast && w->getType()->isFloatTy()) r = target_.fast_math(b_, op, w);
      if (r == nullptr) r = emit_math(b_, op, w);
      break;
    case OpCode::kCeil:
      r = intrinsic(llvm::Intrinsic::ceil, {w});
      break;
    case OpCode::kRound:
      r = intrinsic(llvm::Intrinsic::round, {w});
      break;
    case OpCode::kSqrt:
      r = intrinsic(llvm::Intrinsic::sqrt, {w});
      break;
    case OpCode::kFloor:
      r = intrinsic(llvm::Intrinsic::floor, {w});
      break;
    case OpCode::kRsqrt:
      r = b_.CreateFDiv(llvm::ConstantFP::get(w->getType(), 1.0), intrinsic(llvm::Intrinsic::sqrt, {w}));
      break;
    default:
      TESSEL_CHECK(false, "not a unary op");
  }
  return narrow(r, d);
}

llvm::Value* ScalarOps::convert(llvm::Value* x, DType from, DType to) {
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
    if (x->getType()->getIntegerBitWidth() == 64) x = i64_to_odd53(x, is_signed);
    llvm::Value* d = is_signed ? b_.CreateSIToFP(x, b_.getDoubleTy()) : b_.CreateUIToFP(x, b_.getDoubleTy());
    return narrow(f64_to_f32_odd(d), to);
  }
  if (to.is_bool()) return b_.CreateICmpNE(x, llvm::ConstantInt::get(x->getType(), 0));
  return b_.CreateIntCast(x, t, is_signed);
}

// f32 and f64 use the fused operation. For f16 and bf16 an f32 fma would
// round twice: a product exactly on a tie of the narrow type plus a tiny
// addend rounds to the tie in f32, then to even. Instead the product is
// formed exactly in f64, the sum's rounding error is recovered (TwoSum) to
// round the sum to odd, and the result then rounds once more as a whole.
llvm::Value* ScalarOps::fma(DType d, llvm::Value* a, llvm::Value* b, llvm::Value* c) {
  if (!is_narrow_float(d)) return intrinsic(llvm::Intrinsic::fma, {a, b, c});
  llvm::Type* f64t = b_.getDoubleTy();
  llvm::Value* p = b_.CreateFMul(b_.CreateFPExt(widen(a, d), f64t), b_.CreateFPExt(widen(b, d), f64t));
  llvm::Value* z = b_.CreateFPExt(widen(c, d), f64t);
  llvm::Value* s = b_.CreateFAdd(p, z);
  llvm::Value* pz = b_.CreateFSub(s, p);
  llvm::Value* err = b_.CreateFAdd(b_.CreateFSub(p, b_.CreateFSub(s, pz)), b_.CreateFSub(z, pz));
  // s is past the exact sum (away from zero) when err has the other sign.
  llvm::Value* away = b_.CreateICmpSLT(
      b_.CreateXor(b_.CreateBitCast(s, b_.getInt64Ty()), b_.CreateBitCast(err, b_.getInt64Ty())), b_.getInt64(0));
  llvm::Value* inexact = b_.CreateFCmpONE(err, llvm::ConstantFP::get(f64t, 0.0));
  return narrow(f64_to_f32_odd(to_odd(s, inexact, away)), d);
}

llvm::Value* ScalarOps::atomic_rmw(AtomicOp op, DType d, llvm::Value* p, llvm::Value* v, llvm::AtomicOrdering order,
                                   llvm::SyncScope::ID scope) {
  llvm::AtomicRMWInst::BinOp bin;
  switch (op) {
    case AtomicOp::kAdd:
      bin = d.is_float() ? llvm::AtomicRMWInst::FAdd : llvm::AtomicRMWInst::Add;
      break;
    case AtomicOp::kMin:
      bin = d.is_signed() ? llvm::AtomicRMWInst::Min : llvm::AtomicRMWInst::UMin;
      break;
    case AtomicOp::kMax:
      bin = d.is_signed() ? llvm::AtomicRMWInst::Max : llvm::AtomicRMWInst::UMax;
      break;
    case AtomicOp::kAnd:
      bin = llvm::AtomicRMWInst::And;
      break;
    case AtomicOp::kOr:
      bin = llvm::AtomicRMWInst::Or;
      break;
    case AtomicOp::kXor:
      bin = llvm::AtomicRMWInst::Xor;
      break;
    default:
      bin = llvm::AtomicRMWInst::Xchg;
      break;
  }
  if (!(is_narrow_float(d) && op == AtomicOp::kAdd)) {
    return b_.CreateAtomicRMW(bin, p, v, llvm::MaybeAlign(d.bytes()), order, scope);
  }
  llvm::Type* t = reg_type(d);
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  llvm::Function* fn = pre->getParent();
  llvm::LoadInst* first = b_.CreateAlignedLoad(t, p, llvm::MaybeAlign(d.bytes()));
  first->setAtomic(llvm::AtomicOrdering::Monotonic, scope);
  llvm::BasicBlock* retry = llvm::BasicBlock::Create(b_.getContext(), "atomic.retry", fn);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(b_.getContext(), "atomic.done", fn);
  b_.CreateBr(retry);
  b_.SetInsertPoint(retry);
  llvm::PHINode* old = b_.CreatePHI(t, 2);
  old->addIncoming(first, pre);
  auto* cx = b_.CreateAtomicCmpXchg(p, old, binary(OpCode::kAdd, d, old, v), llvm::MaybeAlign(d.bytes()), order,
                                    llvm::AtomicOrdering::Monotonic, scope);
  old->addIncoming(b_.CreateExtractValue(cx, 0), retry);
  b_.CreateCondBr(b_.CreateExtractValue(cx, 1), done, retry);
  b_.SetInsertPoint(done);
  return old;
}

}  // namespace tessel::codegen
