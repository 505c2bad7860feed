#include "codegen/layout.h"

namespace tessel::codegen {
namespace {

class BlockedLayout final : public Layout {
 public:
  BlockedLayout(int64_t numel, int threads, int per_thread)
      : numel_(numel), threads_(threads), per_thread_(per_thread) {}

  int64_t numel() const override { return numel_; }
  int64_t slots() const override {
    int64_t run = int64_t{threads_} * per_thread_;
    return (numel_ + run - 1) / run * per_thread_;
  }
  llvm::Value* element(llvm::IRBuilder<>& b, llvm::Value* thread, int64_t slot) const override {
    int64_t round = slot / per_thread_, lane = slot % per_thread_;
    llvm::Value* run = b.CreateAdd(b.getInt64(round * threads_), thread);
    return b.CreateAdd(b.CreateMul(run, b.getInt64(per_thread_)), b.getInt64(lane));
  }
  llvm::Value* valid(llvm::IRBuilder<>& b, llvm::Value* thread, int64_t slot) const override {
    int64_t round = slot / per_thread_, lane = slot % per_thread_;
    // The last thread's element in this slot: if it exists, every thread's does.
    if (((round + 1) * threads_ - 1) * per_thread_ + lane < numel_) return nullptr;
    return b.CreateICmpULT(element(b, thread, slot), b.getInt64(numel_));
  }
  bool same_as(const Layout& other) const override {
    auto* o = dynamic_cast<const BlockedLayout*>(&other);
    return o != nullptr && o->numel_ == numel_ && o->threads_ == threads_ && o->per_thread_ == per_thread_;
  }

 private:
  int64_t numel_;
  int threads_;
  int per_thread_;
};

}  // namespace

std::shared_ptr<const Layout> blocked_layout(int64_t numel, int threads, int per_thread) {
  return std::make_shared<BlockedLayout>(numel, threads, per_thread);
}

}  // namespace tessel::codegen
