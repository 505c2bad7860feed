// The math library's accurate forms, built from plain IR (fma, rint, bit
// operations, f64 where f32 needs the headroom) and the same on every
// target, so that the host and the GPUs agree bit for bit. f16 and bf16 are
// computed through f32 and rounded once more (scalar_ops). The error bounds,
// measured against long double by tests/codegen/math_test.cc on the host and
// tests/gpu/math_agree_test.cc on GPUs, are in docs/math.md.
//
// f32: exp, exp2, log, log2, tanh, sigmoid, erf, sin, cos, tan, asin, acos,
// atan, sinh, cosh, log1p, expm1, pow, atan2.
// f64: exp and log (math_f64.h), exp2, log2, tanh, sigmoid, sinh and cosh; the
// builder refuses f64 for the others (OpTraits::no_f64).
#pragma once

#include "dsl/ir.h"
#include "llvm/IR/IRBuilder.h"

namespace tessel::codegen {

// `op` (a unary math opcode) of an f32 or f64 value.
llvm::Value* emit_math(llvm::IRBuilder<>& b, OpCode op, llvm::Value* x);
// x^y of f32 values, computed in f64 and rounded once; C's special cases.
llvm::Value* emit_pow_f32(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* y);
// The angle of (x, y) in [-pi, pi] of f32 values, C's atan2(y, x) with its
// signed zeros and infinities, computed in f64 and rounded once.
llvm::Value* emit_atan2_f32(llvm::IRBuilder<>& b, llvm::Value* y, llvm::Value* x);

}  // namespace tessel::codegen
