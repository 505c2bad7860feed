// Structured control flow: for and while loops and ifs, with scalars and register
// tiles carried in phis and larger tiles in buffers.
#include <algorithm>

#include "codegen/lowering.h"

namespace tessel::codegen {

absl::Status Lowering::for_op(const Op& o, llvm::Value* lo_from, llvm::Value* step_by) {
  if (&o == specialized_ && lo_from == nullptr) return specialized_for(o);
  const Block& body = ir_.blocks[o.blocks[0]];
  const Op& yield = ir_.ops[body.ops.back()];
  llvm::Type* it = reg_type(ir_.type(o.operands[0]).dtype());
  llvm::Value* lo = val(o.operands[0]);
  llvm::Value* hi = val(o.operands[1]);
  llvm::Value* step = val(o.operands[2]);
  const size_t n = o.results.size();
  Carried c = carry_init(o, 3, yield);
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  llvm::BasicBlock* head = llvm::BasicBlock::Create(ctx_, "for", fn_);
  llvm::BasicBlock* loop_body = llvm::BasicBlock::Create(ctx_, "for.body", fn_);
  llvm::BasicBlock* exit = llvm::BasicBlock::Create(ctx_, "for.end", fn_);
  // A step <= 0 runs no iteration rather than forever. The induction
  // variable is kept in i64 so that iv + step cannot wrap.
  llvm::Value* positive = b_.CreateICmpSGT(step, llvm::ConstantInt::get(it, 0));
  llvm::Value* lo64 = lo_from != nullptr ? lo_from : widen(o, lo);
  llvm::Value* hi64 = widen(o, hi);
  llvm::Value* step64 = step_by != nullptr ? step_by : widen(o, step);
  // (A specialized loop's producer issues the loads its ring would.)
  const bool pipelined = pipelines_.contains(&o), outer = outer_pipelines_.contains(&o) && &o != specialized_;
  const bool ringed = copy_rings_.contains(&o);
  llvm::Value* trips = pipelined || ringed ? trip_count(lo64, hi64, step64) : nullptr;
  if (pipelined) {
    begin_pipeline(o, lo, step, trips);
    pre = b_.GetInsertBlock();
  }
  if (ringed) {
    TESSEL_RETURN_IF_ERROR(begin_copies(o, lo, step, trips));
    pre = b_.GetInsertBlock();
  }
  if (outer) {
    begin_outer_pipeline(o, lo, b_.CreateAnd(positive, b_.CreateICmpSLT(lo64, hi64)));
    pre = b_.GetInsertBlock();
  }
  // Products left in flight by the last iteration are waited for before
  // anything reads them, on the way out of a loop that ran. Such a loop is
  // rotated (tested before its first iteration and after each), so that
  // every path to the wait runs a product: ptxas takes a path that reaches
  // the wait without one, or reads the registers without the wait, as an
  // ill-formed pipeline, and serializes every wgmma.
  std::vector<bool> drained(n, false);
  for (size_t i = 0; (pipelined || ringed) && i < n; ++i) {
    const int def = ir_.values[yield.operands[i]].def_op;
    drained[i] = def >= 0 && in_flight(ir_.ops[def]) > 0;
  }
  const bool rotated = std::find(drained.begin(), drained.end(), true) != drained.end();
  if (rotated) {
    b_.CreateCondBr(b_.CreateAnd(positive, b_.CreateICmpSLT(lo64, hi64)), head, exit);
  } else {
    b_.CreateBr(head);
  }
  b_.SetInsertPoint(head);
  llvm::PHINode* iv64 = b_.CreatePHI(b_.getInt64Ty(), 2, "iv");
  iv64->addIncoming(lo64, pre);
  std::vector<std::vector<llvm::PHINode*>> phis = carried_phis(c, pre);
  if (rotated) {
    b_.CreateBr(loop_body);
  } else {
    b_.CreateCondBr(b_.CreateAnd(positive, b_.CreateICmpSLT(iv64, hi64)), loop_body, exit);
  }
  b_.SetInsertPoint(loop_body);
  vals_[body.args[0]] = b_.CreateTrunc(iv64, it);
  for (size_t i = 0; i < n; ++i) bind_carried(c, i, body.args[1 + i], phis[i]);
  llvm::Value* index = pipelined || ringed ? b_.CreateSDiv(b_.CreateSub(iv64, lo64), step64) : nullptr;
  if (pipelined) enter_stage(o, index);
  if (ringed) TESSEL_RETURN_IF_ERROR(enter_copies(o, vals_[body.args[0]], index));
  const int64_t allocations = smem_allocations_;
  TESSEL_RETURN_IF_ERROR(block(o.blocks[0]));
  if (pipelined) prefetch(o, vals_[body.args[0]], index, step, trips);
  if (ringed) TESSEL_RETURN_IF_ERROR(next_copies(o, vals_[body.args[0]], index, step, trips));
  // The next iteration writes the body's shared memory again. (Pipelined
  // and warp-specialized loops order their rings by mbarriers.)
  std::vector<std::vector<llvm::Value*>> next =
      carry_next(c, yield, !pipelined && !outer && lo_from == nullptr ? allocations : -1);
  llvm::BasicBlock* latch = b_.GetInsertBlock();
  llvm::Value* iv_next = b_.CreateAdd(iv64, step64);
  iv64->addIncoming(iv_next, latch);
  for (size_t i = 0; i < n; ++i) {
    for (size_t slot = 0; slot < phis[i].size(); ++slot) phis[i][slot]->addIncoming(next[i][slot], latch);
  }
  if (!rotated) {
    b_.CreateBr(head);
    b_.SetInsertPoint(exit);
    for (size_t i = 0; i < n; ++i) bind_carried(c, i, o.results[i], phis[i]);
  } else {
    llvm::BasicBlock* ran = llvm::BasicBlock::Create(ctx_, "for.ran", fn_);
    b_.CreateCondBr(b_.CreateICmpSLT(iv_next, hi64), head, ran);
    b_.SetInsertPoint(ran);
    for (size_t i = 0; i < n; ++i) {
      if (drained[i]) next[i] = target_.mma_drain(b_, next[i]);
    }
    llvm::BasicBlock* ran_end = b_.GetInsertBlock();
    b_.CreateBr(exit);
    b_.SetInsertPoint(exit);
    for (size_t i = 0; i < n; ++i) {
      std::vector<llvm::PHINode*> out;
      for (size_t slot = 0; slot < c.init[i].size(); ++slot) {
        out.push_back(b_.CreatePHI(c.init[i][slot]->getType(), 2));
        out.back()->addIncoming(c.init[i][slot], pre);
        out.back()->addIncoming(next[i][slot], ran_end);
      }
      bind_carried(c, i, o.results[i], out);
    }
  }
  if (pipelined) {
    if (pipelines_.at(&o).turns != nullptr) pass_turn(pipelines_.at(&o));
    end_pipeline(o, trips);
  }
  if (outer) end_outer_pipeline(o);
  if (ringed) end_copies(o);
  return absl::OkStatus();
}

absl::Status Lowering::while_op(const Op& o) {
  const Block &test = ir_.blocks[o.blocks[0]], &body = ir_.blocks[o.blocks[1]];
  const Op& yield = ir_.ops[body.ops.back()];
  const size_t n = o.results.size();
  Carried c = carry_init(o, 0, yield);
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  llvm::BasicBlock* head = llvm::BasicBlock::Create(ctx_, "while", fn_);
  llvm::BasicBlock* loop_body = llvm::BasicBlock::Create(ctx_, "while.body", fn_);
  llvm::BasicBlock* exit = llvm::BasicBlock::Create(ctx_, "while.end", fn_);
  b_.CreateBr(head);
  b_.SetInsertPoint(head);
  std::vector<std::vector<llvm::PHINode*>> phis = carried_phis(c, pre);
  // A carried value is its buffer or its phis: in the test, the body and after.
  for (size_t i = 0; i < n; ++i) bind_carried(c, i, test.args[i], phis[i]);
  const int64_t allocations = smem_allocations_;
  TESSEL_RETURN_IF_ERROR(block(o.blocks[0]));
  b_.CreateCondBr(val(ir_.ops[test.ops.back()].operands[0]), loop_body, exit);
  b_.SetInsertPoint(loop_body);
  for (size_t i = 0; i < n; ++i) bind_carried(c, i, body.args[i], phis[i]);
  TESSEL_RETURN_IF_ERROR(block(o.blocks[1]));
  // The next test and body write the shared memory these took again.
  std::vector<std::vector<llvm::Value*>> next = carry_next(c, yield, allocations);
  llvm::BasicBlock* latch = b_.GetInsertBlock();
  for (size_t i = 0; i < n; ++i) {
    for (size_t slot = 0; slot < phis[i].size(); ++slot) phis[i][slot]->addIncoming(next[i][slot], latch);
  }
  b_.CreateBr(head);
  b_.SetInsertPoint(exit);
  for (size_t i = 0; i < n; ++i) bind_carried(c, i, o.results[i], phis[i]);
  return absl::OkStatus();
}

Lowering::Carried Lowering::carry_init(const Op& o, size_t first, const Op& yield) {
  const size_t n = o.results.size();
  Carried c{std::vector<llvm::Value*>(n, nullptr), std::vector<std::shared_ptr<const Layout>>(n),
            std::vector<std::vector<llvm::Value*>>(n)};
  for (size_t i = 0; i < n; ++i) {
    const Type& t = ir_.type(o.results[i]);
    // A tile wanted in a layout (an accumulator the body adds a product
    // to, in the product's registers) is carried there whatever its size.
    if (t.is_tile() && wanted_[o.results[i]] == nullptr && !carried_in_registers(t, {yield.operands[i]})) {
      c.bufs[i] = new_buffer(t);
      copy_tile(c.bufs[i], val(o.operands[first + i]), t);
      continue;
    }
    if (t.is_tile()) c.in_regs[i] = layout(o.results[i]);
    c.init[i] = carried_slots(c, i, o.operands[first + i]);
  }
  return c;
}

std::vector<std::vector<llvm::PHINode*>> Lowering::carried_phis(const Carried& c, llvm::BasicBlock* pre) {
  std::vector<std::vector<llvm::PHINode*>> phis(c.init.size());
  for (size_t i = 0; i < c.init.size(); ++i) {
    for (llvm::Value* v : c.init[i]) {
      phis[i].push_back(b_.CreatePHI(v->getType(), 2));
      phis[i].back()->addIncoming(v, pre);
    }
  }
  return phis;
}

std::vector<llvm::Value*> Lowering::carried_slots(const Carried& c, size_t i, int id) {
  return c.in_regs[i] != nullptr ? regs(id, *c.in_regs[i]) : std::vector<llvm::Value*>{val(id)};
}

std::vector<std::vector<llvm::Value*>> Lowering::carry_next(const Carried& c, const Op& yield, int64_t since) {
  carry_tiles(yield, c.bufs);
  if (since >= 0 && smem_allocations_ != since) target_.program_barrier(b_);
  std::vector<std::vector<llvm::Value*>> next(c.init.size());
  for (size_t i = 0; i < next.size(); ++i) {
    if (c.bufs[i] == nullptr) next[i] = carried_slots(c, i, yield.operands[i]);
  }
  return next;
}

void Lowering::bind_carried(const Carried& c, size_t i, int id, const std::vector<llvm::PHINode*>& from) {
  if (c.in_regs[i] != nullptr) {
    regs_[id] = {c.in_regs[i], std::vector<llvm::Value*>(from.begin(), from.end())};
    vals_[id] = nullptr;
  } else {
    vals_[id] = c.bufs[i] != nullptr ? c.bufs[i] : from[0];
  }
}

void Lowering::carry_tiles(const Op& yield, const std::vector<llvm::Value*>& bufs) {
  std::vector<llvm::Value*> srcs(bufs.size(), nullptr);
  for (size_t i = 0; i < bufs.size(); ++i) {
    if (bufs[i] == nullptr || val(yield.operands[i]) == bufs[i]) continue;
    srcs[i] = val(yield.operands[i]);
    if (std::find(bufs.begin(), bufs.end(), srcs[i]) != bufs.end()) {
      const Type& t = ir_.type(yield.operands[i]);
      llvm::Value* tmp = new_buffer(t);
      copy_tile(tmp, srcs[i], t);
      srcs[i] = tmp;
    }
  }
  for (size_t i = 0; i < bufs.size(); ++i) {
    if (srcs[i] != nullptr) copy_tile(bufs[i], srcs[i], ir_.type(yield.operands[i]));
  }
}

absl::Status Lowering::if_op(const Op& o) {
  const size_t n = o.results.size();
  std::vector<llvm::Value*> bufs(n, nullptr);
  std::vector<std::shared_ptr<const Layout>> in_regs(n);  // tile results in registers, in this layout
  auto yields = [&](size_t r) {
    std::vector<int> v;
    for (int b : o.blocks) v.push_back(ir_.ops[ir_.blocks[b].ops.back()].operands[r]);
    return v;
  };
  for (size_t r = 0; r < n; ++r) {
    const Type& t = ir_.type(o.results[r]);
    if (t.is_tile() && (wanted_[o.results[r]] != nullptr || carried_in_registers(t, yields(r)))) {
      in_regs[r] = layout(o.results[r]);
    } else if (t.is_tile()) {
      bufs[r] = new_buffer(t);
    }
  }
  llvm::BasicBlock* blocks[2] = {llvm::BasicBlock::Create(ctx_, "then", fn_),
                                 llvm::BasicBlock::Create(ctx_, "else", fn_)};
  llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx_, "endif", fn_);
  b_.CreateCondBr(val(o.operands[0]), blocks[0], blocks[1]);
  // Per branch and result: the scalar, or the register tile's slots.
  std::vector<std::vector<llvm::Value*>> yielded[2];
  llvm::BasicBlock* ends[2];
  for (int i = 0; i < 2; ++i) {
    b_.SetInsertPoint(blocks[i]);
    TESSEL_RETURN_IF_ERROR(block(o.blocks[i]));
    const Op& y = ir_.ops[ir_.blocks[o.blocks[i]].ops.back()];
    for (size_t r = 0; r < n; ++r) {
      if (bufs[r] != nullptr) {
        copy_tile(bufs[r], val(y.operands[r]), ir_.type(y.operands[r]));
        yielded[i].emplace_back();
      } else if (in_regs[r] != nullptr) {
        yielded[i].push_back(regs(y.operands[r], *in_regs[r]));
      } else {
        yielded[i].push_back({val(y.operands[r])});
      }
    }
    ends[i] = b_.GetInsertBlock();
    b_.CreateBr(done);
  }
  b_.SetInsertPoint(done);
  for (size_t r = 0; r < n; ++r) {
    if (bufs[r] != nullptr) {
      vals_[o.results[r]] = bufs[r];
      continue;
    }
    std::vector<llvm::Value*> merged;
    for (size_t slot = 0; slot < yielded[0][r].size(); ++slot) {
      llvm::PHINode* phi = b_.CreatePHI(yielded[0][r][slot]->getType(), 2);
      phi->addIncoming(yielded[0][r][slot], ends[0]);
      phi->addIncoming(yielded[1][r][slot], ends[1]);
      merged.push_back(phi);
    }
    if (in_regs[r] != nullptr) {
      regs_[o.results[r]] = {in_regs[r], std::move(merged)};
    } else {
      vals_[o.results[r]] = merged[0];
    }
  }
  return absl::OkStatus();
}

}  // namespace tessel::codegen
