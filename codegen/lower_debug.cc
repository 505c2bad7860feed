// device_print and device_assert: each program appends records to the
// kernel's debug buffer (base/debug_abi.h), a global the runtime reads once
// the kernel's work is done. Tiles are walked element by element, each
// element by one thread.
#include "base/debug_abi.h"
#include "codegen/loops.h"
#include "codegen/lowering.h"

namespace tessel::codegen {

llvm::Value* Lowering::debug_word(int64_t word) {
  if (debug_buffer_ == nullptr) {
    auto* type = llvm::ArrayType::get(b_.getInt8Ty(), kDebugBytes);
    debug_buffer_ = new llvm::GlobalVariable(*module_, type, false, llvm::GlobalValue::ExternalLinkage,
                                             llvm::ConstantAggregateZero::get(type), kDebugSymbol, nullptr,
                                             llvm::GlobalValue::NotThreadLocal, target_.device_memory_address_space());
    debug_buffer_->setAlignment(llvm::Align(16));
  }
  // Addressed in the global space, so that GPUs take their global (not
  // generic) atomics, loads and stores.
  return b_.CreateConstInBoundsGEP1_64(b_.getInt64Ty(), debug_buffer_, word);
}

llvm::Value* Lowering::debug_bits(llvm::Value* v, const Type& t) {
  llvm::Type* i64 = b_.getInt64Ty();
  if (t.is_pointer() || (t.is_tile() && t.elements_are_pointers())) return b_.CreatePtrToInt(v, i64);
  const DType d = t.dtype();
  if (d.is_float()) {
    llvm::Value* f = ops_.widen(v, d);
    if (!f->getType()->isDoubleTy()) f = b_.CreateFPExt(f, b_.getDoubleTy());
    return b_.CreateBitCast(f, i64);
  }
  return d.is_signed() && !d.is_bool() ? b_.CreateSExt(v, i64) : b_.CreateZExt(v, i64);
}

bool Lowering::stops_on_assert() const {
  const bool loads_tma =
      std::any_of(ir_.ops.begin(), ir_.ops.end(), [](const Op& o) { return o.op == OpCode::kTmaLoad; });
  return !loads_tma && ring_loads_.empty() && pipelines_.empty() && specialized_ == nullptr && ir_.cluster == 1;
}

absl::Status Lowering::debug(const Op& o) {
  const bool tile = !o.operands.empty() && ir_.type(o.operands[0]).is_tile();
  llvm::Type* i64 = b_.getInt64Ty();
  const llvm::SyncScope::ID scope = target_.device_scope(ctx_);
  auto add = [&](int64_t word, int64_t n) {
    return b_.CreateAtomicRMW(llvm::AtomicRMWInst::Add, debug_word(word), b_.getInt64(n), llvm::MaybeAlign(8),
                              llvm::AtomicOrdering::Monotonic, scope);
  };
  auto program = [&](int axis) { return b_.CreateSExt(target_.program_id(b_, axis), i64); };
  auto element_of = [&](ElemIndex* at) { return at != nullptr ? at->linear : b_.getInt64(-1); };
  // Each element's (or the scalars') visit, in the thread that walks it.
  auto each = [&](const std::function<void(ElemIndex*)>& visit) {
    if (!tile) {
      target_.single_thread(b_, [&] { visit(nullptr); });
      return;
    }
    hold(o);
    each_element(ir_.type(o.operands[0]).shape(), [&](ElemIndex& at) { visit(&at); });
  };
  auto value = [&](int k, ElemIndex* at) {
    const int v = o.operands[k];
    return debug_bits(at != nullptr ? element(v, *at) : val(v), ir_.type(v));
  };

  if (o.op == OpCode::kPrint) {
    const int n = static_cast<int>(o.operands.size());
    const int64_t bytes = debug_record_bytes(n);
    each([&](ElemIndex* at) {
      llvm::Value* start = add(kDebugCursor, bytes);
      llvm::Value* fits =
          b_.CreateICmpULE(b_.CreateAdd(start, b_.getInt64(bytes)), b_.getInt64(kDebugBytes - kDebugHeaderBytes));
      emit_if(b_, fits, [&] {
        llvm::Value* record = b_.CreateLShr(b_.CreateAdd(start, b_.getInt64(kDebugHeaderBytes)), 3);
        auto put = [&](int k, llvm::Value* word) {
          b_.CreateStore(word, b_.CreateInBoundsGEP(i64, debug_word(0), b_.CreateAdd(record, b_.getInt64(k))));
        };
        put(0, b_.getInt64(o.ints[0]));
        for (int axis = 0; axis < 3; ++axis) put(1 + axis, program(axis));
        put(4, element_of(at));
        for (int k = 0; k < n; ++k) put(kDebugRecordFixedWords + k, value(k, at));
      });
      emit_if(b_, b_.CreateNot(fits), [&] { add(kDebugDropped, 1); });
    });
    return absl::OkStatus();
  }

  // An assert: the first failure anywhere claims the header's record; every
  // thread notes whether one of its elements failed.
  llvm::Value* failed = stack_slot(b_.getInt32Ty());
  b_.CreateStore(b_.getInt32(0), failed);
  each([&](ElemIndex* at) {
    llvm::Value* holds = at != nullptr ? element(o.operands[0], *at) : val(o.operands[0]);
    emit_if(b_, b_.CreateNot(holds), [&] {
      b_.CreateStore(b_.getInt32(1), failed);
      llvm::Value* old = b_.CreateExtractValue(
          b_.CreateAtomicCmpXchg(debug_word(kDebugAssert), b_.getInt64(0), b_.getInt64(o.ints[0] + 1),
                                 llvm::MaybeAlign(8), llvm::AtomicOrdering::Monotonic, llvm::AtomicOrdering::Monotonic,
                                 scope),
          0);
      emit_if(b_, b_.CreateICmpEQ(old, b_.getInt64(0)), [&] {
        for (int axis = 0; axis < 3; ++axis) b_.CreateStore(program(axis), debug_word(kDebugProgram + axis));
        b_.CreateStore(element_of(at), debug_word(kDebugElement));
      });
    });
  });
  if (!stops_on_assert()) return absl::OkStatus();
  // The program stops where any of its threads failed: all of them leave
  // together, once the tiles of their TMA stores have been read.
  llvm::Value* any = target_.combine_threads(b_, b_.CreateLoad(b_.getInt32Ty(), failed),
                                             [&](llvm::Value* a, llvm::Value* c) { return b_.CreateOr(a, c); });
  llvm::BasicBlock* stop = llvm::BasicBlock::Create(ctx_, "assert_failed", fn_);
  llvm::BasicBlock* go = llvm::BasicBlock::Create(ctx_, "assert_held", fn_);
  b_.CreateCondBr(b_.CreateICmpNE(any, b_.getInt32(0)), stop, go);
  b_.SetInsertPoint(stop);
  target_.single_thread(b_, [&] { target_.tma_store_flush(b_); });
  b_.CreateRetVoid();
  b_.SetInsertPoint(go);
  return absl::OkStatus();
}

}  // namespace tessel::codegen
