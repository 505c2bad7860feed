// Lowering of triggered-view ops (publish, arrived, wait, reusable) against
// the layout in view_abi.h, through the target's ordering hooks.
#pragma once

#include <cstdint>

#include "codegen/target_info.h"

namespace tessel::codegen {

class ViewLowering {
 public:
  ViewLowering(llvm::IRBuilder<>& b, TargetInfo& target) : b_(b), target_(target) {}

  // `view` points to a ViewHeader; `batch` is an i32.
  void publish(llvm::Value* view, llvm::Value* batch);
  llvm::Value* arrived(llvm::Value* view, llvm::Value* batch);
  void wait(llvm::Value* view, llvm::Value* batch);
  llvm::Value* reusable(llvm::Value* view, llvm::Value* batch);

 private:
  llvm::Value* header_field(llvm::Value* view, int offset, llvm::Type* type);
  llvm::Value* gate_word(llvm::Value* view, llvm::Value* batch, int word);
  // The batch's ViewBatch entry.
  llvm::Value* batch_entry(llvm::Value* view, llvm::Value* batch);
  // Stores `code` to `word` and to the view's alarm.
  void record_error(llvm::Value* view, llvm::Value* word, uint64_t code);
  // Whether `batch` is in range; records kViewBadBatch in the header if not.
  llvm::Value* checked(llvm::Value* view, llvm::Value* batch);
  // Low 32 bits of `word` >= low 32 bits of the view's epoch.
  llvm::Value* open(llvm::Value* view, llvm::Value* word);
  llvm::Value* arrival_word(llvm::Value* view, llvm::Value* batch);

  llvm::IRBuilder<>& b_;
  TargetInfo& target_;
};

}  // namespace tessel::codegen
