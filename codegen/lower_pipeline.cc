// Software pipelines of TMA loads: rings of stage buffers filled
// stages - 1 iterations ahead (stages - 2 for some multicast rings), one
// mbarrier per stage (see lowering.h).
#include "codegen/lowering.h"

#include <algorithm>

#include "codegen/hazards.h"

namespace tessel::codegen {

namespace {

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

bool Lowering::per_iteration(const Op& loop, int id, const Op* outer) const {
  const Block& body = ir_.blocks[loop.blocks[0]];
  const ValueInfo& v = ir_.values[id];
  if (v.def_block != loop.blocks[0]) {  // from outside the loop
    return outer == nullptr || v.def_block != outer->blocks[0] || per_iteration(*outer, id);
  }
  if (v.def_op < 0) return id == body.args[0];  // the induction variable, not a carried value
  const Op& o = ir_.ops[v.def_op];
  if (o.op == OpCode::kConstant || o.op == OpCode::kProgramId || o.op == OpCode::kNumPrograms) return true;
  if (ir_.type(id).is_tile() || !(is_elementwise(o.op) || (o.op == OpCode::kLoad && reads_unwritten(o)))) {
    return false;
  }
  for (int operand : o.operands) {
    if (!per_iteration(loop, operand, outer)) return false;
  }
  return true;
}

llvm::Value* Lowering::value_in_iteration(const Op& loop, int id, llvm::Value* iv, const Op* outer,
                                          llvm::Value* outer_iv) {
  const ValueInfo& v = ir_.values[id];
  if (v.def_block != loop.blocks[0]) {
    if (outer != nullptr && outer_iv != nullptr && v.def_block == outer->blocks[0]) {
      if (outer_values_ != nullptr && outer_values_->contains(id)) return outer_values_->at(id);
      return value_in_iteration(*outer, id, outer_iv);
    }
    return val(id);
  }
  if (v.def_op < 0) return iv;
  const Op& o = ir_.ops[v.def_op];
  if (o.op == OpCode::kConstant) return constant(o);
  if (o.op == OpCode::kProgramId) return target_.program_id(b_, static_cast<int>(o.ints[0]));
  if (o.op == OpCode::kNumPrograms) return target_.num_programs(b_, static_cast<int>(o.ints[0]));
  std::vector<llvm::Value*> args;
  for (int operand : o.operands) args.push_back(value_in_iteration(loop, operand, iv, outer, outer_iv));
  if (o.op == OpCode::kLoad)
    return load_scalar(o, args[0], args.size() == 3 ? args[1] : nullptr, args.size() == 3 ? args[2] : nullptr);
  return elementwise(o, args);
}

void Lowering::plan_pipelines() {
  if (!target_.tma_async()) return;
  for (const Op& loop : ir_.ops) {
    if (loop.op != OpCode::kFor) continue;
    const bool defaulted = loop.ints.empty() || loop.ints[0] == 0;
    const int stages = defaulted ? overlap_.default_stages : static_cast<int>(loop.ints[0]);
    if (stages < 2) continue;
    const int body = loop.blocks[0];
    std::vector<const Op*> loads;
    for (int id : ir_.blocks[body].ops) {
      if (ir_.ops[id].op == OpCode::kTmaLoad) loads.push_back(&ir_.ops[id]);
    }
    if (loads.empty()) continue;
    // Loads deeper inside keep the loop as it is, and so do ops that order
    // the copy engine's reads (atomics and gates; codegen/hazards.h): a load
    // run ahead would pass them. Stores do not: a loop's iterations touch
    // different elements, and a TMA store has read its tile before the
    // program goes on (one held across the kernel stages it in a tile of its
    // own). A warp-specialized kernel's loops keep to loads alone.
    bool nested = false;
    for (int id : ir_.blocks[body].ops) {
      for (int inner : ir_.ops[id].blocks) nested = nested || any_op(ir_, inner, [](const Op& o) {
        return o.op == OpCode::kTmaLoad;
      });
    }
    auto orders = [&](const Op& o) {
      if (specialized_ != nullptr) return op_traits(o.op).writes_memory;
      return o.op == OpCode::kAtomic || o.op == OpCode::kAtomicCas ||
             op_traits(o.op).category == OpCategory::kTriggeredView;
    };
    if (nested || any_op(ir_, body, orders)) continue;
    bool computable = true;
    for (const Op* l : loads) {
      for (size_t c = 1; c < l->operands.size(); ++c) computable = computable && per_iteration(loop, l->operands[c]);
    }
    if (!computable) continue;
    Pipeline& p = pipelines_[&loop];
    p.stages = stages;
    p.ahead = stages - 1;
    p.multicast = std::any_of(loads.begin(), loads.end(), [](const Op* l) { return load_parts(*l) > 1; });
    pipelined_by_default_ = pipelined_by_default_ || defaulted;
    p.loads = loads;
    // (A warp-specialized loop's producer needs the ring across it.)
    p.outer = overlap_.rings_across || specialized_ != nullptr ? runs_across(loop, loads) : nullptr;
    for (size_t i = 0; i < loads.size(); ++i) pipelined_[loads[i]] = {&loop, static_cast<int>(i)};
    leave_in_flight(loop);
  }
  // One ring per outer loop runs across it.
  std::map<const Op*, int> per_outer;
  for (const auto& [loop, p] : pipelines_) {
    if (p.outer != nullptr) ++per_outer[p.outer];
  }
  for (auto& [loop, p] : pipelines_) {
    if (p.outer != nullptr && per_outer[p.outer] > 1) p.outer = nullptr;
    if (p.outer != nullptr) outer_pipelines_[p.outer] = loop;
    // A multicast ring of 4 stages or more filled by its consumers keeps a
    // stage between the one it releases and the one it loads next, so that
    // the other programs' releases have an iteration to arrive. (With 3, one
    // load ahead starved the tensor cores more than the wait for them.)
    if (p.multicast && !(specialized_ != nullptr && p.outer == specialized_) && p.stages >= 4) p.ahead = p.stages - 2;
    p.groups = {LoadGroup{}};
    for (size_t i = 0; i < p.loads.size(); ++i) p.groups[0].loads.push_back(static_cast<int>(i));
    if (specialized_ != nullptr && p.outer == specialized_) plan_groups(*loop, p);
  }
}

void Lowering::leave_in_flight(const Op& loop) {
  const Block& body = ir_.blocks[loop.blocks[0]];
  const Op& yield = ir_.ops[body.ops.back()];
  for (int id : body.ops) {
    const Op& o = ir_.ops[id];
    if (!mma_dots_.contains(&o) || mma_dots_.at(&o).stages()) continue;
    bool only_yielded = true;
    for (const Op& user : ir_.ops) {
      for (int v : user.operands) only_yielded = only_yielded && (v != o.results[0] || &user == &yield);
    }
    if (only_yielded) in_flight_dots_.insert(&o);
  }
}

void Lowering::plan_groups(const Op& loop, Pipeline& p) {
  // The position in the body of each of its ops (nested ones at the op
  // that holds them), and of its first product.
  const std::vector<int>& body = ir_.blocks[loop.blocks[0]].ops;
  std::map<const Op*, int> at;
  std::function<void(int, int)> walk = [&](int block, int position) {
    for (int id : ir_.blocks[block].ops) {
      at[&ir_.ops[id]] = position;
      for (int nested : ir_.ops[id].blocks) walk(nested, position);
    }
  };
  int settle = -1;
  for (size_t i = 0; i < body.size(); ++i) {
    const Op& o = ir_.ops[body[i]];
    at[&o] = static_cast<int>(i);
    for (int nested : o.blocks) walk(nested, static_cast<int>(i));
    if (settle < 0 && mma_dots_.contains(&o)) settle = static_cast<int>(i);
  }
  // A load read only by products is waited for before its first reader,
  // and released after its last (the next iteration's first product, for
  // one left in flight); any other at the top and end of the iterations.
  struct Key {
    int first = -1, last = -1;
    bool deferred = false;
    auto operator<=>(const Key&) const = default;
  };
  std::map<Key, std::vector<int>> keyed;  // (in the order the consumer reads them)
  for (size_t i = 0; i < p.loads.size(); ++i) {
    const int tile = p.loads[i]->results[0];
    Key key;
    for (const auto& [dot, plan] : mma_dots_) {
      if (!mma_only_[tile] || settle < 0 || (plan.a_tile != tile && plan.b_tile != tile)) continue;
      const int position = at.at(dot);
      key.first = key.first < 0 ? position : std::min(key.first, position);
      key.last = std::max(key.last, position);
      key.deferred = key.deferred || in_flight_dots_.contains(dot);
    }
    if (key.deferred) key.last = -1;
    keyed[key].push_back(static_cast<int>(i));
  }
  if (keyed.size() < 2) return;
  p.groups.clear();
  auto op_at = [&](int position) { return position < 0 ? nullptr : &ir_.ops[body[position]]; };
  for (const auto& [key, loads] : keyed) {
    p.groups.push_back({loads, op_at(key.first), op_at(key.last), key.deferred});
    for (const Op* o : {p.groups.back().first, p.groups.back().last}) {
      if (o != nullptr) staged_ops_[o] = &loop;
    }
    if (key.deferred) p.settle = op_at(settle);
  }
  if (p.settle != nullptr) staged_ops_[p.settle] = &loop;
}

llvm::Value* Lowering::group_barrier(const Pipeline& p, llvm::Value* base, int g, llvm::Value* stage) {
  llvm::Value* offset = b_.CreateMul(stage, b_.getInt64(8));
  if (g > 0) offset = b_.CreateAdd(offset, b_.getInt64(8 * int64_t{g} * p.stages));
  return b_.CreateInBoundsGEP(b_.getInt8Ty(), base, offset);
}

void Lowering::wait_group(Pipeline& p, int g) {
  target_.tma_wait(b_, group_barrier(p, p.barriers, g, p.stage), p.parity);
}

void Lowering::release_group(Pipeline& p, int g, llvm::Value* i) {
  llvm::Value* stage = b_.CreateURem(b_.CreateAdd(p.first, i), b_.getInt64(p.stages));
  llvm::Value* empty = group_barrier(p, p.empty, g, stage);
  if (!p.multicast) {
    target_.barrier_arrive(b_, empty);
    return;
  }
  // Every program of the cluster loads into this stage: a warp's release
  // counts in each.
  target_.per_warp(b_, [&] { target_.cluster_arrive(b_, empty); });
}

void Lowering::reclaim_stage(Pipeline& p, llvm::Value* use) {
  emit_if(b_, b_.CreateICmpUGE(use, b_.getInt64(p.stages)), [&] {
    llvm::Value* stage = b_.CreateURem(use, b_.getInt64(p.stages));
    // The phase of the stage's use before: use / stages - 1.
    llvm::Value* round = b_.CreateSub(b_.CreateUDiv(use, b_.getInt64(p.stages)), b_.getInt64(1));
    target_.tma_wait(b_, group_barrier(p, p.released, 0, stage),
                     b_.CreateTrunc(b_.CreateAnd(round, 1), b_.getInt32Ty()));
  });
}

void Lowering::stage_point(const Op& o, bool after) {
  auto it = staged_ops_.find(&o);
  if (it == staged_ops_.end()) return;
  Pipeline& p = pipelines_.at(it->second);
  for (size_t g = 0; g < p.groups.size(); ++g) {
    if (!after && p.groups[g].first == &o) wait_group(p, static_cast<int>(g));
    if (after && p.groups[g].last == &o) release_group(p, static_cast<int>(g), p.index);
  }
  if (!after || &o != p.settle) return;
  // The iteration before this one left its product in flight until here.
  emit_if(b_, b_.CreateICmpSGT(p.index, b_.getInt64(0)), [&] {
    for (size_t g = 0; g < p.groups.size(); ++g) {
      if (p.groups[g].deferred) release_group(p, static_cast<int>(g), b_.CreateSub(p.index, b_.getInt64(1)));
    }
  });
}

const Op* Lowering::runs_across(const Op& loop, const std::vector<const Op*>& loads) const {
  // The for loop whose body holds `loop` itself.
  const int index = static_cast<int>(&loop - ir_.ops.data());
  const Op* outer = nullptr;
  for (const Op& o : ir_.ops) {
    if (o.op != OpCode::kFor) continue;
    const std::vector<int>& ops = ir_.blocks[o.blocks[0]].ops;
    if (std::find(ops.begin(), ops.end(), index) != ops.end()) outer = &o;
  }
  if (outer == nullptr) return nullptr;
  // The next run's bounds and loads computable ahead of it; and no store
  // in the outer body that a load run ahead could miss: TMA stores are
  // asynchronous anyway (a program's loads do not wait for them), and
  // stores and atomics through another parameter's pointers touch other
  // memory (parameters do not overlap; codegen/hazards.h).
  for (int k = 0; k < 3; ++k) {
    if (!per_iteration(*outer, loop.operands[k])) return nullptr;
  }
  for (const Op* l : loads) {
    for (size_t c = 1; c < l->operands.size(); ++c) {
      if (!per_iteration(loop, l->operands[c], outer)) return nullptr;
    }
  }
  auto may_reach_loads = [&](const Op& o) {
    return std::any_of(loads.begin(), loads.end(), [&](const Op* l) { return may_write(o, l->operands[0]); });
  };
  if (any_op(ir_, outer->blocks[0], may_reach_loads)) return nullptr;
  return outer;
}

void Lowering::issue_stage(const Op& loop, Pipeline& p, llvm::Value* iv, llvm::Value* use, llvm::Value* outer_iv,
                           int group) {
  llvm::Value* stage = b_.CreateURem(use, b_.getInt64(p.stages));
  std::vector<TargetInfo::TmaCopy> copies;
  for (int i : p.groups[std::max(group, 0)].loads) {
    const Op& l = *p.loads[i];
    std::vector<llvm::Value*> coords;
    for (size_t c = 1; c < l.operands.size(); ++c) {
      coords.push_back(value_in_iteration(loop, l.operands[c], iv, p.outer, outer_iv));
    }
    llvm::Value* smem = b_.CreateInBoundsGEP(b_.getInt8Ty(), p.rings[i], b_.CreateMul(stage, b_.getInt64(p.strides[i])));
    const int parts = load_parts(l);
    copies.push_back({&ir_.type(l.operands[0]), val(l.operands[0]), std::move(coords), smem, parts, parts > 1});
  }
  const int g = std::max(group, 0);
  if (p.released != nullptr) target_.single_thread(b_, [&] { reclaim_stage(p, use); });
  target_.tma_issue(b_, group_barrier(p, p.barriers, g, stage), p.groups[g].bytes, copies);
}

llvm::Value* Lowering::trip_count(llvm::Value* lo64, llvm::Value* hi64, llvm::Value* step64) {
  llvm::Value* ahead = b_.CreateAnd(b_.CreateICmpSGT(step64, b_.getInt64(0)), b_.CreateICmpSGT(hi64, lo64));
  llvm::Value* count = b_.CreateSDiv(b_.CreateAdd(b_.CreateSub(hi64, lo64), b_.CreateSub(step64, b_.getInt64(1))), step64);
  return b_.CreateSelect(ahead, count, b_.getInt64(0));
}

Lowering::Run Lowering::run_in(const Op& loop, const Op& outer, llvm::Value* outer_iv) {
  auto bound = [&](int k) { return value_in_iteration(outer, loop.operands[k], outer_iv); };
  Run run{bound(0), bound(2), nullptr};
  run.trips = trip_count(widen(loop, run.lo), widen(loop, bound(1)), widen(loop, run.step));
  return run;
}

void Lowering::issue_iteration(const Op& loop, Pipeline& p, const Run& run, llvm::Value* j, llvm::Value* use,
                               llvm::Value* outer_iv, int group) {
  llvm::Value* iv = b_.CreateAdd(run.lo, b_.CreateMul(run.step, b_.CreateTrunc(j, run.lo->getType())));
  issue_stage(loop, p, iv, use, outer_iv, group);
}

void Lowering::issue_first(const Op& loop, Pipeline& p, const Run& run, llvm::Value* count, llvm::Value* first,
                           llvm::Value* outer_iv) {
  for (int j = 0; j < p.ahead; ++j) {
    emit_if(b_, b_.CreateICmpSLT(b_.getInt64(j), count),
            [&] { issue_iteration(loop, p, run, b_.getInt64(j), b_.CreateAdd(first, b_.getInt64(j)), outer_iv); });
  }
}

void Lowering::allocate_rings(Pipeline& p, const std::function<llvm::Value*(int64_t, int64_t)>& alloc) {
  p.rings.clear();
  p.strides.clear();
  std::vector<int64_t> load_bytes;
  for (const Op* l : p.loads) {
    const Type& t = ir_.type(l->results[0]);
    load_bytes.push_back(t.numel() * t.dtype().bytes());
    const int64_t align = swizzled(ir_.type(l->operands[0])) ? tma::kSwizzledTileAlignment : tma::kSharedTileAlignment;
    const int64_t stride = round_up(load_bytes.back(), align);
    p.rings.push_back(alloc(stride * p.stages, align));
    p.strides.push_back(stride);
  }
  for (LoadGroup& g : p.groups) {
    g.bytes = 0;
    for (int i : g.loads) g.bytes += load_bytes[i];
  }
}

void Lowering::rings_free(const Pipeline& p) {
  // Multicast rings are written by every program of the cluster.
  if (p.multicast) {
    target_.cluster_barrier(b_);
  } else {
    target_.program_barrier(b_);
  }
}

void Lowering::begin_outer_pipeline(const Op& outer, llvm::Value* lo, llvm::Value* go) {
  const Op& loop = *outer_pipelines_.at(&outer);
  Pipeline& p = pipelines_.at(&loop);
  allocate_rings(p, [&](int64_t bytes, int64_t align) { return smem_alloc(bytes, align); });
  rings_free(p);
  emit_if(b_, go, [&] {
    const Run run = run_in(loop, outer, lo);
    issue_first(loop, p, run, run.trips, b_.CreateLoad(b_.getInt64Ty(), p.used), lo);
  });
}

void Lowering::end_outer_pipeline(const Op& outer) {
  for (llvm::Value* ring : pipelines_.at(outer_pipelines_.at(&outer)).rings) shared_.erase(ring);
}

void Lowering::begin_pipeline(const Op& loop, llvm::Value* lo, llvm::Value* step, llvm::Value* trips) {
  Pipeline& p = pipelines_.at(&loop);
  if (p.turns != nullptr) take_turn(p);
  if (p.outer != nullptr) {  // the run's first loads are in flight already
    p.first = b_.CreateLoad(b_.getInt64Ty(), p.used);
    return;
  }
  allocate_rings(p, [&](int64_t bytes, int64_t align) { return smem_alloc(bytes, align); });
  rings_free(p);
  p.first = b_.CreateLoad(b_.getInt64Ty(), p.used);
  issue_first(loop, p, Run{lo, step, trips}, trips, p.first, nullptr);
}

void Lowering::enter_stage(const Op& loop, llvm::Value* i) {
  Pipeline& p = pipelines_.at(&loop);
  llvm::Value* use = b_.CreateAdd(p.first, i);
  p.index = i;
  p.stage = b_.CreateURem(use, b_.getInt64(p.stages));
  p.parity = b_.CreateTrunc(b_.CreateAnd(b_.CreateUDiv(use, b_.getInt64(p.stages)), 1), b_.getInt32Ty());
  for (size_t g = 0; g < p.groups.size(); ++g) {
    if (p.groups[g].first == nullptr) wait_group(p, static_cast<int>(g));
  }
}

llvm::Value* Lowering::widen(const Op& loop, llvm::Value* v) {
  return ir_.type(loop.operands[0]).dtype().is_signed() ? b_.CreateSExt(v, b_.getInt64Ty())
                                                         : b_.CreateZExt(v, b_.getInt64Ty());
}

std::pair<llvm::Value*, llvm::Value*> Lowering::next_outer(const Op& outer) {
  llvm::Value* iv = vals_[ir_.blocks[outer.blocks[0]].args[0]];
  llvm::Value* next = b_.CreateAdd(widen(outer, iv), widen(outer, val(outer.operands[2])));
  return {b_.CreateTrunc(next, iv->getType()), b_.CreateICmpSLT(next, widen(outer, val(outer.operands[1])))};
}

void Lowering::release_stage(Pipeline& p, llvm::Value* i, bool deferred) {
  for (size_t g = 0; g < p.groups.size(); ++g) {
    const LoadGroup& group = p.groups[g];
    if (group.last == nullptr && (deferred || !group.deferred)) release_group(p, static_cast<int>(g), i);
  }
}

void Lowering::prefetch(const Op& loop, llvm::Value* iv, llvm::Value* i, llvm::Value* step, llvm::Value* trips) {
  Pipeline& p = pipelines_.at(&loop);
  if (p.empty != nullptr) {
    // A consumer's: the stage the iteration before this one read is free
    // (mma left at most this iteration's product in flight) once each of
    // the consumer's threads arrived; the producer loads it again.
    // (Groups released earlier in the iteration are not.)
    const bool any = std::any_of(p.groups.begin(), p.groups.end(),
                                 [](const LoadGroup& g) { return g.last == nullptr && !g.deferred; });
    if (any) {
      emit_if(b_, b_.CreateICmpSGT(i, b_.getInt64(0)),
              [&] { release_stage(p, b_.CreateSub(i, b_.getInt64(1)), /*deferred=*/false); });
    }
    return;
  }
  // The stage the iteration before this one read: its readers are done
  // (mma left at most this iteration's product in flight) once every
  // thread is here.
  target_.program_barrier(b_);
  if (p.released != nullptr) {
    // The ring's use before this iteration's (of an earlier run for i = 0)
    // is this program's no more: so in every program of the cluster.
    llvm::Value* done = b_.CreateAdd(p.first, i);
    target_.single_thread(b_, [&] {
      emit_if(b_, b_.CreateICmpUGE(done, b_.getInt64(1)), [&] {
        llvm::Value* stage = b_.CreateURem(b_.CreateSub(done, b_.getInt64(1)), b_.getInt64(p.stages));
        target_.cluster_arrive(b_, group_barrier(p, p.released, 0, stage));
      });
    });
  }
  llvm::Value* ahead = b_.CreateAdd(i, b_.getInt64(p.ahead));
  llvm::Value* use = b_.CreateAdd(p.first, ahead);
  llvm::Value* own = b_.CreateICmpSLT(ahead, trips);
  emit_if(b_, own, [&] {
    llvm::Value* next_iv = b_.CreateAdd(iv, b_.CreateMul(step, llvm::ConstantInt::get(iv->getType(), p.ahead)));
    issue_stage(loop, p, next_iv, use);
  });
  if (p.outer == nullptr) return;
  // Past this run's end: the next run's iteration ahead - trips.
  auto [outer_iv, more] = next_outer(*p.outer);
  emit_if(b_, b_.CreateAnd(b_.CreateNot(own), more), [&] {
    const Run next = run_in(loop, *p.outer, outer_iv);
    llvm::Value* j = b_.CreateSub(ahead, trips);
    emit_if(b_, b_.CreateICmpSLT(j, next.trips), [&] { issue_iteration(loop, p, next, j, use, outer_iv); });
  });
}

void Lowering::end_pipeline(const Op& loop, llvm::Value* trips) {
  Pipeline& p = pipelines_.at(&loop);
  b_.CreateStore(b_.CreateAdd(p.first, trips), p.used);
  if (p.empty != nullptr) {
    // A consumer's last stage (its products waited for at the loop's exit),
    // and the stages of the other consumers' iterations up to this one's next.
    emit_if(b_, b_.CreateICmpSGT(trips, b_.getInt64(0)),
            [&] { release_stage(p, b_.CreateSub(trips, b_.getInt64(1)), /*deferred=*/true); });
    llvm::Value* iv = widen(*p.outer, vals_[ir_.blocks[p.outer->blocks[0]].args[0]]);
    llvm::Value* step = widen(*p.outer, val(p.outer->operands[2]));
    llvm::Value* used = b_.CreateAdd(p.first, trips);
    for (int k = 1; k < consumers_; ++k) {
      used = b_.CreateAdd(used, ring_uses(*p.outer, loop, b_.CreateAdd(iv, b_.CreateMul(step, b_.getInt64(k)))));
    }
    b_.CreateStore(used, p.used);
    return;
  }
  if (p.outer == nullptr) {
    for (llvm::Value* ring : p.rings) shared_.erase(ring);
    return;
  }
  // A run shorter than the loads ahead (stages - 1) left the next run's
  // first loads [0, ahead - trips) to issue here, each under its own guard with
  // the next run's bounds computed there (computed once ahead, they stay
  // live into the epilogue: ptxas spilled more of the fused GEMM's).
  auto [outer_iv, more] = next_outer(*p.outer);
  emit_if(b_, b_.CreateAnd(more, b_.CreateICmpSLT(trips, b_.getInt64(p.ahead))), [&] {
    target_.program_barrier(b_);
    llvm::Value* next_first = b_.CreateAdd(p.first, trips);
    for (int j = 0; j < p.ahead; ++j) {
      emit_if(b_, b_.CreateICmpSLT(b_.CreateAdd(trips, b_.getInt64(j)), b_.getInt64(p.ahead)), [&] {
        const Run next = run_in(loop, *p.outer, outer_iv);
        emit_if(b_, b_.CreateICmpSLT(b_.getInt64(j), next.trips), [&] {
          issue_iteration(loop, p, next, b_.getInt64(j), b_.CreateAdd(next_first, b_.getInt64(j)), outer_iv);
        });
      });
    }
  });
}

}  // namespace tessel::codegen
