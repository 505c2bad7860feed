#include "codegen/loops.h"

namespace tessel::codegen {

void emit_loop(llvm::IRBuilder<>& b, llvm::Value* start, llvm::Value* end, llvm::Value* step,
               const std::function<void(llvm::Value*)>& body) {
  llvm::Function* fn = b.GetInsertBlock()->getParent();
  llvm::LLVMContext& ctx = b.getContext();
  llvm::BasicBlock* pre = b.GetInsertBlock();
  llvm::BasicBlock* head = llvm::BasicBlock::Create(ctx, "loop", fn);
  llvm::BasicBlock* exit = llvm::BasicBlock::Create(ctx, "loop.end", fn);
  b.CreateCondBr(b.CreateICmpSLT(start, end), head, exit);
  b.SetInsertPoint(head);
  llvm::PHINode* i = b.CreatePHI(b.getInt64Ty(), 2, "i");
  i->addIncoming(start, pre);
  body(i);
  llvm::Value* next = b.CreateAdd(i, step, "", true, true);
  i->addIncoming(next, b.GetInsertBlock());
  b.CreateCondBr(b.CreateICmpSLT(next, end), head, exit);
  b.SetInsertPoint(exit);
}

void emit_if(llvm::IRBuilder<>& b, llvm::Value* cond, const std::function<void()>& body) {
  llvm::Function* fn = b.GetInsertBlock()->getParent();
  llvm::BasicBlock* then = llvm::BasicBlock::Create(b.getContext(), "if.then", fn);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(b.getContext(), "if.end", fn);
  b.CreateCondBr(cond, then, done);
  b.SetInsertPoint(then);
  body();
  b.CreateBr(done);
  b.SetInsertPoint(done);
}

void emit_bounded_poll(llvm::IRBuilder<>& b, const std::function<llvm::Value*()>& done,
                       const std::function<llvm::Value*(llvm::Value*)>& give_up,
                       const std::function<void()>& on_give_up) {
  llvm::Function* fn = b.GetInsertBlock()->getParent();
  llvm::LLVMContext& ctx = b.getContext();
  llvm::BasicBlock* pre = b.GetInsertBlock();
  llvm::BasicBlock* poll = llvm::BasicBlock::Create(ctx, "wait.poll", fn);
  llvm::BasicBlock* again = llvm::BasicBlock::Create(ctx, "wait.again", fn);
  llvm::BasicBlock* expired = llvm::BasicBlock::Create(ctx, "wait.expired", fn);
  llvm::BasicBlock* out = llvm::BasicBlock::Create(ctx, "wait.done", fn);
  b.CreateBr(poll);
  b.SetInsertPoint(poll);
  llvm::PHINode* polls = b.CreatePHI(b.getInt64Ty(), 2);
  polls->addIncoming(b.getInt64(0), pre);
  b.CreateCondBr(done(), out, again);
  b.SetInsertPoint(again);
  llvm::Value* next = b.CreateAdd(polls, b.getInt64(1));
  polls->addIncoming(next, b.GetInsertBlock());
  b.CreateCondBr(give_up(next), expired, poll);
  b.SetInsertPoint(expired);
  on_give_up();
  b.CreateBr(out);
  b.SetInsertPoint(out);
}

}  // namespace tessel::codegen
