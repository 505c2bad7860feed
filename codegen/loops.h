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

// A wait that cannot hang: polls `done()` (an i1) until it holds; after each
// failed poll `give_up(polls)` (an i1 from the i64 count of polls so far) may
// end the wait, running `on_give_up()`. Leaves `b` after the wait.
void emit_bounded_poll(llvm::IRBuilder<>& b, const std::function<llvm::Value*()>& done,
                       const std::function<llvm::Value*(llvm::Value*)>& give_up,
                       const std::function<void()>& on_give_up);

}  // namespace tessel::codegen
