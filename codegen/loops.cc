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

}  // namespace tessel::codegen
