// Layouts of register tiles: which element of a tile each slot of each
// thread of a program holds. Ops on register tiles pair slots of operands
// with the same layout; a tile moves to another layout through shared
// memory. The blocked layout is the default; matrix-instruction fragments
// (wgmma accumulators) are further layouts behind the same interface.
#pragma once

#include <cstdint>
#include <memory>

#include "llvm/IR/IRBuilder.h"

namespace tessel::codegen {

class Layout {
 public:
  virtual ~Layout() = default;
  virtual int64_t numel() const = 0;
  // Slots per thread.
  virtual int64_t slots() const = 0;
  // The row-major linear index (i64) of the element in `slot` of `thread`.
  virtual llvm::Value* element(llvm::IRBuilder<>& b, llvm::Value* thread, int64_t slot) const = 0;
  // Whether `slot` holds an element (i1), or nullptr when it does in every thread.
  virtual llvm::Value* valid(llvm::IRBuilder<>& b, llvm::Value* thread, int64_t slot) const = 0;
  virtual bool same_as(const Layout& other) const = 0;
};

// Threads take runs of `per_thread` consecutive elements in turn: slot s of
// thread t holds element (s / per_thread * threads + t) * per_thread + s % per_thread.
// With per_thread = 1 a warp's accesses to consecutive elements coalesce.
std::shared_ptr<const Layout> blocked_layout(int64_t numel, int threads, int per_thread = 1);

}  // namespace tessel::codegen
