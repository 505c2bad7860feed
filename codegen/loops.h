// Emitting counted loops into LLVM IR.
#pragma once

#include <functional>

#include "llvm/IR/IRBuilder.h"

namespace tessel::codegen {

// for (i = start; i < end; i += step) body(i), on i64 values; runs no
// iteration when start >= end. Leaves `b` after the loop.
void emit_loop(llvm::IRBuilder<>& b, llvm::Value* start, llvm::Value* end, llvm::Value* step,
               const std::function<void(llvm::Value*)>& body);

// Runs `body` where `cond` holds; leaves `b` after it.
void emit_if(llvm::IRBuilder<>& b, llvm::Value* cond, const std::function<void()>& body);

}  // namespace tessel::codegen
