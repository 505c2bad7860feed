#include "codegen/views.h"

#include <cstddef>

#include "codegen/loops.h"
#include "base/view_abi.h"

namespace tessel::codegen {

llvm::Value* ViewLowering::header_address(llvm::Value* view, int offset) {
  if (!llvm::isa<llvm::Argument>(view)) return b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), view, offset);
  llvm::IRBuilder<> entry(entry_end_);
  return entry.CreateConstInBoundsGEP1_64(entry.getInt8Ty(), view, offset);
}

llvm::Value* ViewLowering::header_field(llvm::Value* view, int offset, llvm::Type* type) {
  if (!llvm::isa<llvm::Argument>(view)) return b_.CreateLoad(type, header_address(view, offset));
  llvm::Value*& load = loads_[{view, offset}];
  if (load == nullptr) load = llvm::IRBuilder<>(entry_end_).CreateLoad(type, header_address(view, offset));
  return load;
}

llvm::Value* ViewLowering::gate_word(llvm::Value* view, llvm::Value* batch, int word) {
  llvm::Value* gates = header_field(view, offsetof(ViewHeader, gates), b_.getPtrTy());
  llvm::Value* row = b_.CreateMul(b_.CreateZExt(batch, b_.getInt64Ty()), b_.getInt64(sizeof(GateRow)));
  return b_.CreateGEP(b_.getInt8Ty(), gates, b_.CreateAdd(row, b_.getInt64(word * 8)));
}

void ViewLowering::record_error(llvm::Value* view, llvm::Value* word, uint64_t code) {
  target_.store_release_sys(b_, word, b_.getInt64(code));
  target_.store_release_sys(b_, header_field(view, offsetof(ViewHeader, alarm), b_.getPtrTy()), b_.getInt64(code));
}

llvm::Value* ViewLowering::checked(llvm::Value* view, llvm::Value* batch) {
  llvm::Value* n = header_field(view, offsetof(ViewHeader, num_batches), b_.getInt32Ty());
  llvm::Value* ok = b_.CreateICmpULT(batch, n);
  emit_if(b_, b_.CreateNot(ok), [&] {
    record_error(view, header_address(view, offsetof(ViewHeader, status)), kViewBadBatch);
  });
  return ok;
}

llvm::Value* ViewLowering::open(llvm::Value* view, llvm::Value* word) {
  llvm::Value* epoch = header_field(view, offsetof(ViewHeader, epoch), b_.getInt64Ty());
  return b_.CreateICmpUGE(b_.CreateTrunc(word, b_.getInt32Ty()), b_.CreateTrunc(epoch, b_.getInt32Ty()));
}

llvm::Value* ViewLowering::batch_entry(llvm::Value* view, llvm::Value* batch) {
  llvm::Value* batches = header_field(view, offsetof(ViewHeader, batches), b_.getPtrTy());
  return b_.CreateGEP(b_.getInt8Ty(), batches,
                      b_.CreateMul(b_.CreateZExt(batch, b_.getInt64Ty()), b_.getInt64(sizeof(ViewBatch))));
}

// A rank reads ready for the batches it owns and arrival for the others'.
llvm::Value* ViewLowering::arrival_word(llvm::Value* view, llvm::Value* batch) {
  llvm::Value* owner = b_.CreateLoad(b_.getInt32Ty(), batch_entry(view, batch));
  llvm::Value* rank = header_field(view, offsetof(ViewHeader, rank), b_.getInt32Ty());
  llvm::Value* own = b_.CreateICmpEQ(owner, rank);
  return b_.CreateSelect(own, gate_word(view, batch, 0), gate_word(view, batch, 1));
}

llvm::Value* ViewLowering::carry_word(llvm::Value* view) { return header_address(view, offsetof(ViewHeader, carry)); }

void ViewLowering::release_tag(llvm::Value* view, llvm::Value* tag) {
  llvm::Value* epoch = header_field(view, offsetof(ViewHeader, epoch), b_.getInt64Ty());
  llvm::Value* same_epoch = b_.CreateICmpEQ(b_.CreateLShr(tag, 32), b_.CreateAnd(epoch, b_.getInt64(0xFFFFFFFF)));
  emit_if(b_, b_.CreateAnd(b_.CreateICmpNE(tag, b_.getInt64(0)), same_epoch), [&] {
    llvm::Value* batch = b_.CreateSub(b_.CreateTrunc(tag, b_.getInt32Ty()), b_.getInt32(1));
    target_.store_release_sys(b_, gate_word(view, batch, 0), epoch);
  });
}

void ViewLowering::carry_over(llvm::Value* view, llvm::Value* seen) {
  emit_if(b_, b_.CreateICmpNE(seen, b_.getInt64(0)), [&] {
    release_tag(view, target_.atomic_exch_acq_rel_gpu(b_, carry_word(view), b_.getInt64(0)));
  });
}

void ViewLowering::publish(llvm::Value* view, llvm::Value* batch, llvm::Value* defer) {
  // The batch's contributor count is read before the barrier, so its load
  // overlaps the wait (batch 0's where the batch is out of range).
  llvm::Value* n = header_field(view, offsetof(ViewHeader, num_batches), b_.getInt32Ty());
  llvm::Value* in_range = b_.CreateICmpULT(batch, n);
  llvm::Value* entry = batch_entry(view, b_.CreateSelect(in_range, batch, b_.getInt32(0)));
  llvm::Value* count = b_.CreateLoad(b_.getInt32Ty(), b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), entry, 4));
  // The counter is shared only by programs on this device, so the fetch-add
  // is acq_rel at device scope: the last contributor acquires every other
  // one's stores, and its release of ready at system scope is cumulative,
  // carrying them to the copy engines and peers that acquire ready. Only
  // one system fence per batch, not one per program: that fence waits for
  // the whole GPU's traffic, and costs microseconds beside copy engines.
  //
  // A deferred release goes through the view's carry word, which holds one
  // batch: the last contributor exchanges its batch in at device scope and
  // releases whatever it took out; every publish (and wait) takes out and
  // releases what it finds there. Taking it out acquires what the deferring
  // program acquired from the batch's contributors, so the taker's
  // system-scope release carries their stores as well. A program that
  // defers publishes again, and looks at the word then: nothing is lost.
  // The fence then falls on whichever program publishes next, usually one
  // running ahead, instead of on the one running latest, batch after batch.
  target_.program_barrier(b_);
  target_.single_thread(b_, [&] {
    target_.tma_store_flush(b_);  // the program's TMA stores are its stores too
    emit_if(b_, checked(view, batch), [&] {
      llvm::Value* contributors = b_.CreateZExt(count, b_.getInt64Ty());
      contributors = b_.CreateSelect(b_.CreateICmpEQ(contributors, b_.getInt64(0)), b_.getInt64(1), contributors);
      llvm::Value* seen = target_.load_relaxed_gpu(b_, carry_word(view));
      llvm::Value* old = target_.atomic_add_acq_rel_gpu(b_, gate_word(view, batch, 4), b_.getInt64(1));
      llvm::Value* last = b_.CreateICmpEQ(b_.CreateURem(b_.CreateAdd(old, b_.getInt64(1)), contributors),
                                          b_.getInt64(0));
      carry_over(view, seen);
      llvm::Value* deferred = defer == nullptr ? b_.getFalse() : defer;
      llvm::Value* epoch = header_field(view, offsetof(ViewHeader, epoch), b_.getInt64Ty());
      emit_if(b_, b_.CreateAnd(last, b_.CreateNot(deferred)),
              [&] { target_.store_release_sys(b_, gate_word(view, batch, 0), epoch); });
      if (defer == nullptr) return;
      emit_if(b_, b_.CreateAnd(last, deferred), [&] {
        llvm::Value* tag = b_.CreateOr(b_.CreateShl(epoch, 32),
                                       b_.CreateZExt(b_.CreateAdd(batch, b_.getInt32(1)), b_.getInt64Ty()));
        release_tag(view, target_.atomic_exch_acq_rel_gpu(b_, carry_word(view), tag));
      });
    });
  });
}

llvm::Value* ViewLowering::arrived(llvm::Value* view, llvm::Value* batch) {
  llvm::Value* ok = checked(view, batch);
  // An out-of-range batch reads gate 0's word but reports false.
  llvm::Value* safe = b_.CreateSelect(ok, batch, b_.getInt32(0));
  return b_.CreateAnd(ok, open(view, target_.load_acquire_sys(b_, arrival_word(view, safe))));
}

llvm::Value* ViewLowering::reusable(llvm::Value* view, llvm::Value* batch) {
  llvm::Value* ok = checked(view, batch);
  llvm::Value* safe = b_.CreateSelect(ok, batch, b_.getInt32(0));
  return b_.CreateAnd(ok, open(view, target_.load_acquire_sys(b_, gate_word(view, safe, 2))));
}

// A bounded spin: after spin_limit polls the gate's error word (and the
// view's alarm) records kGateTimeout and the program goes on, so a lost
// batch never hangs.
void ViewLowering::wait(llvm::Value* view, llvm::Value* batch) {
  target_.single_thread(b_, [&] {
    // A batch this wait depends on may lie in the carry word.
    carry_over(view, target_.load_relaxed_gpu(b_, carry_word(view)));
    emit_if(b_, checked(view, batch), [&] {
      llvm::Value* limit = header_field(view, offsetof(ViewHeader, spin_limit), b_.getInt64Ty());
      llvm::Value* word = arrival_word(view, batch);
      emit_bounded_poll(
          b_, [&] { return open(view, target_.load_acquire_sys(b_, word)); },
          [&](llvm::Value* polls) { return b_.CreateICmpUGE(polls, limit); },
          [&] { record_error(view, gate_word(view, batch, 3), kGateTimeout); });
    });
  });
  target_.program_barrier(b_);
}

}  // namespace tessel::codegen
