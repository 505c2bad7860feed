// Scalar semantics shared by every target: the LLVM type of each dtype and
// the arithmetic, comparisons and conversions on one element. f16 and bf16
// values are their 16 bits (i16): arithmetic widens them to f32, computes,
// and rounds once to nearest even, which gives the correctly rounded result
// for + - * / sqrt (fma takes more care, see fma()).
#pragma once

#include <vector>

#include "codegen/target_info.h"
#include "dsl/ir.h"
#include "dsl/ops.h"
#include "llvm/IR/IRBuilder.h"

namespace tessel::codegen {

inline bool is_narrow_float(DType d) { return d == f16 || d == bf16 || d == f8e4m3 || d == f8e5m2; }

class ScalarOps {
 public:
  ScalarOps(llvm::IRBuilder<>& b, TargetInfo& target) : b_(b), target_(target) {}

  llvm::Type* reg_type(DType d);
  // f16/bf16 bits -> f32 (exact); other types pass through.
  llvm::Value* widen(llvm::Value* v, DType d);
  // f32 -> f16/bf16 bits, rounding to nearest even; other types pass through.
  llvm::Value* narrow(llvm::Value* v, DType d);
  // The 8-bit floats' conversions (base/float8.h).
  llvm::Value* widen_float8(llvm::Value* v, DType d);
  llvm::Value* narrow_float8(llvm::Value* v, DType d);
  // An f32 rounded to tf32's 10 mantissa bits, to nearest even (NaN and
  // infinities kept; overflow rounds to infinity as f32's own rounding does).
  llvm::Value* round_to_tf32(llvm::Value* v);
  // `fast`: MathForm::kFast (a division's target form, TargetInfo::fast_divide).
  llvm::Value* binary(OpCode op, DType d, llvm::Value* x, llvm::Value* y, bool fast = false);
  // `fast`: a math function's fast form (MathForm::kFast).
  llvm::Value* unary(OpCode op, DType d, llvm::Value* x, bool fast = false);
  llvm::Value* convert(llvm::Value* x, DType from, DType to);
  // a * b + c rounded once.
  llvm::Value* fma(DType d, llvm::Value* a, llvm::Value* b, llvm::Value* c);
  llvm::Value* intrinsic(llvm::Intrinsic::ID id, std::vector<llvm::Value*> args);
  // *p = *p `op` v for dtype `d`, atomically at `scope` with `order`;
  // returns the old value. f16 and bf16 adds are a compare-and-swap loop
  // around binary()'s add (an atomicrmw fadd of half/bfloat needs libcalls
  // such as __truncsfbf2 on x86, which a JIT-ed kernel cannot count on
  // finding).
  llvm::Value* atomic_rmw(AtomicOp op, DType d, llvm::Value* p, llvm::Value* v, llvm::AtomicOrdering order,
                          llvm::SyncScope::ID scope);

 private:
  llvm::Value* to_odd(llvm::Value* r, llvm::Value* inexact, llvm::Value* away);
  llvm::Value* f64_to_f32_odd(llvm::Value* x);
  llvm::Value* i64_to_odd53(llvm::Value* x, bool is_signed);
  llvm::Value* int_divrem(bool rem, bool is_signed, llvm::Value* x, llvm::Value* y);
  llvm::Value* shift(bool left, bool is_signed, llvm::Value* x, llvm::Value* n);

  llvm::IRBuilder<>& b_;
  TargetInfo& target_;
};

}  // namespace tessel::codegen
