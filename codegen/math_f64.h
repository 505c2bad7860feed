// exp and log of f64 built from plain IR (fma, rint, bit operations), used by
// every target: NVPTX has no f64 exp/log instruction, and one expansion
// everywhere makes the host and GPUs agree bit for bit. Within 1 ulp of the
// exact result over the whole range (tested against long double on the host),
// with IEEE special values (NaN, infinities, zeros, subnormal inputs and
// results).
#pragma once

#include "llvm/IR/IRBuilder.h"

namespace tessel::codegen {

llvm::Value* emit_exp_f64(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_log_f64(llvm::IRBuilder<>& b, llvm::Value* x);

}  // namespace tessel::codegen
