// Internal: what the GPU targets (NVPTX, AMDGPU) share behind TargetInfo. A
// program is `threads` threads in warps of warp_size(); tiles live in shared
// memory and a tile loop is spread over the threads, ending in a barrier;
// cross-warp results meet in one 8-byte slot per warp of a scratch array in
// shared memory. A target supplies its barrier, its shuffle of a 32-bit
// word between lanes, the scratch array, and the thread index (tid_, set
// by its params()).
#pragma once

#include <functional>

#include "codegen/target_info.h"

namespace tessel::codegen {

class GpuTarget : public TargetInfo {
 public:
  explicit GpuTarget(int threads) : threads_(threads), program_threads_(threads) {}

  int register_tile_threads() const override { return threads_; }
  llvm::Value* thread_index(llvm::IRBuilder<>&) override { return tid_; }
  bool tiles_in_shared() const override { return true; }
  void tile_loop(llvm::IRBuilder<>& b, int64_t n, const std::function<void(llvm::Value*)>& body) override;
  // Through 32-bit shuffles: narrower integers travel in a word, 64-bit values in two.
  llvm::Value* shuffle_xor(llvm::IRBuilder<>& b, llvm::Value* v, int lanes) override;
  // A butterfly within each warp; lane 0 of each warp writes its result to
  // the scratch array, and every thread combines those in warp order.
  llvm::Value* combine_threads(llvm::IRBuilder<>& b, llvm::Value* partial,
                               const std::function<llvm::Value*(llvm::Value*, llvm::Value*)>& combine) override;
  // Computed by thread 0, handed to every thread through scratch slot 0.
  llvm::Value* uniform(llvm::IRBuilder<>& b, const std::function<llvm::Value*()>& compute) override;
  void single_thread(llvm::IRBuilder<>& b, const std::function<void()>& body) override;
  // In a group, tid_ counts from the group's first thread (consumers of
  // threads_ threads each, the producer after them), and the scratch array
  // is the group's share of it.
  void enter_group(llvm::IRBuilder<>& b, llvm::Value* group, bool producer) override;
  void leave_group() override;

 protected:
  // A barrier of the program's threads that orders their shared-memory accesses.
  virtual void barrier(llvm::IRBuilder<>& b) = 0;
  // The i32 `word` as held by the lane whose index differs from this one's in `lanes`.
  virtual llvm::Value* shuffle_word(llvm::IRBuilder<>& b, llvm::Value* word, int lanes) = 0;
  // The scratch array's first slot (one i64 per warp), as the target's loads and stores take it.
  virtual llvm::Value* scratch(llvm::IRBuilder<>& b) = 0;
  // The LLVM type a kernel parameter of `type` arrives as.
  virtual llvm::Type* param_type(llvm::IRBuilder<>& b, const Type& type) = 0;
  // The same for a scalar parameter, alike on every GPU target: i1 travels
  // as a byte, 16-bit floats as their bits.
  static llvm::Type* scalar_param_type(llvm::IRBuilder<>& b, DType dtype);
  // The kernel function, its parameters typed and named (declare_kernel's
  // start, which also undoes a split of the kernel lowered before).
  llvm::Function* create_kernel(llvm::Module& module, const KernelIR& ir);

  // The scratch array, or while in a group, the group's slots of it.
  llvm::Value* group_scratch(llvm::IRBuilder<>& b);

  // The threads of the program, or of each consumer group once split.
  int threads_;
  const int program_threads_;
  llvm::Value* tid_ = nullptr;  // this thread's index in the program, or in its group (i64)
  // While in a group: the group's index (i64) and this thread's index in
  // the program (what tid_ is outside groups).
  llvm::Value* group_ = nullptr;
  llvm::Value* program_tid_ = nullptr;
};

}  // namespace tessel::codegen
