// Lowering of triggered-view ops (publish, arrived, wait, reusable) against
// the layout in view_abi.h, through the target's ordering hooks.
#pragma once

#include <cstdint>
#include <map>
#include <utility>

#include "codegen/target_info.h"

namespace tessel::codegen {

// Header fields, loaded once per kernel: the header does not change while
// kernels of an epoch run, and an acquire empties the L1 cache, so a load
// in a loop of publishes would go to L2 every time. Keyed by (view, offset).
using ViewHeaderLoads = std::map<std::pair<llvm::Value*, int>, llvm::Value*>;

class ViewLowering {
 public:
  // Header fields of views that are kernel arguments are loaded before
  // `entry_end` (the end of the kernel's entry block) and kept in `loads`.
  ViewLowering(llvm::IRBuilder<>& b, TargetInfo& target, llvm::Instruction* entry_end, ViewHeaderLoads& loads)
      : b_(b), target_(target), entry_end_(entry_end), loads_(loads) {}

  // `view` points to a ViewHeader; `batch` is an i32. With `defer` (an i1,
  // or null for false), a last contributor leaves its batch's system-scope
  // release to a later publish on the rank (view_abi.h, carry).
  void publish(llvm::Value* view, llvm::Value* batch, llvm::Value* defer);
  llvm::Value* arrived(llvm::Value* view, llvm::Value* batch);
  void wait(llvm::Value* view, llvm::Value* batch);
  llvm::Value* reusable(llvm::Value* view, llvm::Value* batch);

 private:
  // A header field's address, and its value (loaded once per kernel).
  llvm::Value* header_address(llvm::Value* view, int offset);
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
  // Stores the epoch to ready of the batch `tag` names (a carry word's
  // value), unless it is 0 or from another epoch.
  void release_tag(llvm::Value* view, llvm::Value* tag);
  // Takes a batch a deferred publish left in the view's carry word, if any,
  // and releases it: a relaxed look first, so that nothing to carry costs
  // no atomic. `seen` is that look, made earlier.
  void carry_over(llvm::Value* view, llvm::Value* seen);
  llvm::Value* carry_word(llvm::Value* view);

  llvm::IRBuilder<>& b_;
  TargetInfo& target_;
  llvm::Instruction* entry_end_;
  ViewHeaderLoads& loads_;
};

}  // namespace tessel::codegen
