// Software pipelines of TMA loads: rings of stage buffers filled
// stages - 1 iterations ahead, one mbarrier per stage (see lowering.h).
#include "codegen/lowering.h"

namespace tessel::codegen {

namespace {

constexpr int kDefaultStages = 3;

// Whether any op of `block`, or of the blocks nested in it, satisfies `pred`.
bool any_op(const KernelIR& ir, int block, const std::function<bool(const Op&)>& pred) {
  for (int id : ir.blocks[block].ops) {
    const Op& o = ir.ops[id];
    if (pred(o)) return true;
    for (int nested : o.blocks) {
      if (any_op(ir, nested, pred)) return true;
    }
  }
  return false;
}

}  // namespace

bool Lowering::per_iteration(const Op& loop, int id) const {
  const Block& body = ir_.blocks[loop.blocks[0]];
  const ValueInfo& v = ir_.values[id];
  if (v.def_block != loop.blocks[0]) return true;  // from outside the loop
  if (v.def_op < 0) return id == body.args[0];     // the induction variable, not a carried value
  const Op& o = ir_.ops[v.def_op];
  if (o.op == OpCode::kConstant) return true;
  if (ir_.type(id).is_tile() || !is_elementwise(o.op)) return false;
  for (int operand : o.operands) {
    if (!per_iteration(loop, operand)) return false;
  }
  return true;
}

llvm::Value* Lowering::value_in_iteration(const Op& loop, int id, llvm::Value* iv) {
  const ValueInfo& v = ir_.values[id];
  if (v.def_block != loop.blocks[0]) return val(id);
  if (v.def_op < 0) return iv;
  const Op& o = ir_.ops[v.def_op];
  if (o.op == OpCode::kConstant) return constant(o);
  std::vector<llvm::Value*> args;
  for (int operand : o.operands) args.push_back(value_in_iteration(loop, operand, iv));
  return elementwise(o, args);
}

void Lowering::plan_pipelines() {
  if (!target_.tma_async()) return;
  for (const Op& loop : ir_.ops) {
    if (loop.op != OpCode::kFor) continue;
    const int stages = loop.ints.empty() ? kDefaultStages : static_cast<int>(loop.ints[0]);
    if (stages < 2) continue;
    const int body = loop.blocks[0];
    std::vector<const Op*> loads;
    for (int id : ir_.blocks[body].ops) {
      if (ir_.ops[id].op == OpCode::kTmaLoad) loads.push_back(&ir_.ops[id]);
    }
    if (loads.empty()) continue;
    // Loads deeper inside, or stores a load ahead could miss, keep the loop as it is.
    bool nested = false;
    for (int id : ir_.blocks[body].ops) {
      for (int inner : ir_.ops[id].blocks) nested = nested || any_op(ir_, inner, [](const Op& o) {
        return o.op == OpCode::kTmaLoad;
      });
    }
    if (nested || any_op(ir_, body, [](const Op& o) { return op_traits(o.op).writes_memory; })) continue;
    bool computable = true;
    for (const Op* l : loads) {
      for (size_t c = 1; c < l->operands.size(); ++c) computable = computable && per_iteration(loop, l->operands[c]);
    }
    if (!computable) continue;
    Pipeline& p = pipelines_[&loop];
    p.stages = stages;
    p.loads = loads;
    for (size_t i = 0; i < loads.size(); ++i) pipelined_[loads[i]] = {&loop, static_cast<int>(i)};
    // Dots whose product only the next iteration reads may leave it running.
    const Op& yield = ir_.ops[ir_.blocks[body].ops.back()];
    for (int id : ir_.blocks[body].ops) {
      const Op& o = ir_.ops[id];
      if (!mma_dots_.contains(&o)) continue;
      bool only_yielded = true;
      for (const Op& user : ir_.ops) {
        for (int v : user.operands) only_yielded = only_yielded && (v != o.results[0] || &user == &yield);
      }
      if (only_yielded) in_flight_dots_.insert(&o);
    }
  }
}

void Lowering::issue_stage(const Op& loop, Pipeline& p, llvm::Value* iv, llvm::Value* stage) {
  std::vector<TargetInfo::TmaCopy> copies;
  for (size_t i = 0; i < p.loads.size(); ++i) {
    const Op& l = *p.loads[i];
    std::vector<llvm::Value*> coords;
    for (size_t c = 1; c < l.operands.size(); ++c) coords.push_back(value_in_iteration(loop, l.operands[c], iv));
    llvm::Value* smem = b_.CreateInBoundsGEP(b_.getInt8Ty(), p.rings[i], b_.CreateMul(stage, b_.getInt64(p.strides[i])));
    copies.push_back({&ir_.type(l.operands[0]), val(l.operands[0]), std::move(coords), smem});
  }
  llvm::Value* barrier = b_.CreateInBoundsGEP(b_.getInt8Ty(), p.barriers, b_.CreateMul(stage, b_.getInt64(8)));
  target_.tma_issue(b_, barrier, p.bytes, copies);
}

void Lowering::begin_pipeline(const Op& loop, llvm::Value* lo, llvm::Value* step, llvm::Value* trips) {
  Pipeline& p = pipelines_.at(&loop);
  p.rings.clear();
  p.strides.clear();
  p.bytes = 0;
  for (const Op* l : p.loads) {
    const Type& t = ir_.type(l->results[0]);
    const int64_t bytes = t.numel() * t.dtype().bytes();
    const int64_t align = swizzled(ir_.type(l->operands[0])) ? tma::kSwizzledTileAlignment : tma::kSharedTileAlignment;
    const int64_t stride = (bytes + align - 1) / align * align;
    p.rings.push_back(smem_alloc(stride * p.stages, align));
    p.strides.push_back(stride);
    p.bytes += bytes;
  }
  // Every thread is done with what the rings held before.
  target_.program_barrier(b_);
  p.first = b_.CreateLoad(b_.getInt64Ty(), p.used);
  llvm::Type* it = lo->getType();
  for (int j = 0; j + 1 < p.stages; ++j) {
    emit_if(b_, b_.CreateICmpSLT(b_.getInt64(j), trips), [&] {
      llvm::Value* iv = b_.CreateAdd(lo, b_.CreateMul(step, llvm::ConstantInt::get(it, j)));
      issue_stage(loop, p, iv, b_.CreateURem(b_.CreateAdd(p.first, b_.getInt64(j)), b_.getInt64(p.stages)));
    });
  }
}

void Lowering::enter_stage(const Op& loop, llvm::Value* i) {
  Pipeline& p = pipelines_.at(&loop);
  llvm::Value* use = b_.CreateAdd(p.first, i);
  p.stage = b_.CreateURem(use, b_.getInt64(p.stages));
  llvm::Value* parity = b_.CreateTrunc(b_.CreateAnd(b_.CreateUDiv(use, b_.getInt64(p.stages)), 1), b_.getInt32Ty());
  target_.tma_wait(b_, b_.CreateInBoundsGEP(b_.getInt8Ty(), p.barriers, b_.CreateMul(p.stage, b_.getInt64(8))),
                   parity);
}

void Lowering::prefetch(const Op& loop, llvm::Value* iv, llvm::Value* i, llvm::Value* step, llvm::Value* trips) {
  Pipeline& p = pipelines_.at(&loop);
  // The stage the iteration before this one read: its readers are done
  // (mma left at most this iteration's product in flight) once every
  // thread is here.
  target_.program_barrier(b_);
  llvm::Value* ahead = b_.CreateAdd(i, b_.getInt64(p.stages - 1));
  emit_if(b_, b_.CreateICmpSLT(ahead, trips), [&] {
    llvm::Value* next_iv = b_.CreateAdd(iv, b_.CreateMul(step, llvm::ConstantInt::get(iv->getType(), p.stages - 1)));
    issue_stage(loop, p, next_iv, b_.CreateURem(b_.CreateAdd(p.first, ahead), b_.getInt64(p.stages)));
  });
}

void Lowering::end_pipeline(const Op& loop, llvm::Value* trips) {
  Pipeline& p = pipelines_.at(&loop);
  b_.CreateStore(b_.CreateAdd(p.first, trips), p.used);
  for (llvm::Value* ring : p.rings) shared_.erase(ring);
}

}  // namespace tessel::codegen
