// Lowers kernel IR to an LLVM module through a TargetInfo.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "codegen/compile_options.h"
#include "codegen/target_info.h"
#include "dsl/ir.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"

namespace tessel::codegen {

struct LoweredKernel {
  std::unique_ptr<llvm::Module> module;
  std::string entry;          // the kernel function's symbol
  int64_t shared_bytes = 0;   // shared memory the kernel needs per program
  // Whether shared memory went to overlap (held store tiles, rings across
  // loops), which a kernel over the limit may do without.
  bool overlapped = false;
  // Whether a loop took the default stage count (LoopOptions::stages = 0)
  // and was pipelined, which a kernel over the limit may take fewer of.
  bool pipelined_by_default = false;
  // Whether a store staged its value in shared memory (Overlap::stage_stores),
  // which a kernel over the limit may do without.
  bool staged_stores = false;
};

// `facts` are what the code may assume about the launch's arguments.
// Swizzled tma_stores leave their copies running, their tiles held in
// shared memory for the whole kernel, and pipelined loops load the first
// stages of the next run of the loop around them during this one, where
// the kernel still fits in `shared_limit` bytes (0: no limit) that way;
// else with one of the two, or neither (each store waits until the copy
// engine has read its tile; rings live only while their loop runs); then
// the same with 2 stages, then 1, in loops that take the default count.
// Each choice first stages tensor-core products stored through pointers in
// shared memory (Lowering::stages_store), then, if that does not fit, not.
// Without `debug`, device_asserts are dropped first.
absl::StatusOr<LoweredKernel> lower(const KernelIR& ir, TargetInfo& target, llvm::LLVMContext& ctx,
                                    Specialization facts = {}, int64_t shared_limit = 0, bool debug = false);

// OK where `lowered` fits in `limit` bytes of `memory` (the target's name
// for shared memory) per program on `arch`, the limit of `programs` of
// them at once on one `unit`; else an error naming the bytes and the way out.
absl::Status check_shared_limit(const KernelIR& ir, const LoweredKernel& lowered, const std::string& arch,
                                int64_t limit, const char* memory, int programs, const char* unit);

}  // namespace tessel::codegen
