// Warp specialization (LoopOptions::warp_specialize): a producer group that
// issues a persistent loop's TMA loads for every iteration, and consumer
// groups that take the iterations in turn, or one consumer of two
// warpgroups that takes every iteration (see lowering.h).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "codegen/lowering.h"

namespace tessel::codegen {

absl::Status Lowering::plan_roles() {
  if (!target_.tma_async()) return absl::OkStatus();  // other targets run the loop as written
  for (const Op& o : ir_.ops) {
    if (o.op != OpCode::kFor || o.ints.size() < 2 || o.ints[1] == 0) continue;
    if (specialized_ != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("kernel '", ir_.name, "': the loops at lines ",
                                                     specialized_->loc.line(), " and ", o.loc.line(),
                                                     " are both warp-specialized; a kernel may have one"));
    }
    specialized_ = &o;
  }
  if (specialized_ == nullptr) return absl::OkStatus();
  const int warps = target_.register_tile_threads() / target_.warp_size();
  const int consumer_warpgroups = static_cast<int>(specialized_->ints[1]);
  consumers_ = consumer_warpgroups == 2 ? 1 : 2;
  if (target_.split_program(consumers_, consumer_warpgroups) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel '", ir_.name, "': the warp-specialized loop at ", specialized_->loc.file_name(), ":",
                     specialized_->loc.line(), " needs a producer warpgroup and ",
                     consumer_warpgroups == 2 ? "a consumer of two warpgroups" : "two consumer warpgroups",
                     " (num_warps = 12); the program has ", warps, " warps"));
  }
  // Each thread's shared memory is its consumer's region (the producer's
  // threads, which use only the ring, take the last one's).
  consumer_span_ = b_.Insert(new llvm::FreezeInst(llvm::PoisonValue::get(b_.getInt64Ty())), "consumer_span");
  return absl::OkStatus();
}

absl::Status Lowering::check_roles() const {
  const Op& o = *specialized_;
  auto refuse = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("kernel '", ir_.name, "': the warp-specialized loop at ",
                                                   o.loc.file_name(), ":", o.loc.line(), " ", why));
  };
  if (!o.results.empty()) {
    return refuse(
        "carries values from one iteration to the next; its iterations run on two consumer warpgroups at once, "
        "so they must be independent");
  }
  const std::vector<int>& top = ir_.blocks[0].ops;
  const auto at = std::find(top.begin(), top.end(), static_cast<int>(&o - ir_.ops.data()));
  if (at == top.end()) return refuse("is not in the kernel's top block (it may not sit in another loop or an if)");
  for (auto it = top.begin(); it != at; ++it) {
    const Op& before = ir_.ops[*it];
    bool tile = false;
    for (int r : before.results) tile = tile || ir_.type(r).is_tile();
    if (tile || !before.blocks.empty() || op_traits(before.op).writes_memory) {
      return refuse(absl::StrCat("comes after the ", opcode_name(before.op), " at line ", before.loc.line(),
                                 "; only scalar arithmetic and loads may come before it (every warp runs them)"));
    }
  }
  for (auto it = at + 1; it != top.end(); ++it) {
    if (ir_.ops[*it].op != OpCode::kYield) {
      return refuse(absl::StrCat("is followed by the ", opcode_name(ir_.ops[*it].op), " at line ",
                                 ir_.ops[*it].loc.line(), "; nothing may come after it"));
    }
  }
  if (!outer_pipelines_.contains(&o)) {
    return refuse(
        "has no pipelined loop whose loads the producer could issue: its body must run a for_range (stages >= 2) "
        "of tma_loads at coordinates computable from the two loops' induction variables, and write memory only "
        "with tma_store");
  }
  return absl::OkStatus();
}

llvm::Value* Lowering::consumer_smem(llvm::Value* c) {
  return b_.CreateInBoundsGEP(b_.getInt8Ty(), cta_smem_, b_.CreateMul(c, consumer_span_));
}

void Lowering::reserve_producer_ring() {
  Pipeline& p = pipelines_.at(outer_pipelines_.at(specialized_));
  // Full barriers (the producer's expect_tx, then the bytes), empty ones
  // and turns (a consumer's every thread), then the ring; a stage's
  // barriers per load group.
  const int barriers = p.stages * static_cast<int>(p.groups.size());
  p.barriers = cta_smem_;
  p.empty = b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), cta_smem_, 8 * barriers);
  // (A single consumer has no one to take turns with.)
  p.turns = consumers_ > 1 ? b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), cta_smem_, 16 * barriers) : nullptr;
  int64_t offset = 16 * barriers + 8 * consumers_;
  allocate_rings(p, [&](int64_t bytes, int64_t align) {
    offset = round_up(offset, align);
    llvm::Value* ring = b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), cta_smem_, offset);
    offset += bytes;
    return ring;
  });
  target_.init_tma_barriers(b_, p.barriers, barriers, 1);
  // (With multicast loads, one arrival per warp of each program of the cluster.)
  target_.init_tma_barriers(b_, p.empty, barriers,
                            p.multicast ? threads_ / target_.warp_size() * ir_.cluster : threads_);
  if (p.turns != nullptr) target_.init_tma_barriers(b_, p.turns, consumers_, threads_);
  consumer_region_ = smem_reserved_ = smem_peak_ = round_up(offset, tma::kSwizzledTileAlignment);
  p.used = stack_slot(b_.getInt64Ty());
  p.turns_taken = stack_slot(b_.getInt64Ty());
}

void Lowering::take_turn(Pipeline& p) {
  // Consumer c > 0's k-th turn is phase k of its barrier (its predecessor's
  // k-th hand-over); consumer 0's first passes at once (the phase before
  // phase 0 counts as complete), its k-th is phase k - 1.
  llvm::Value* k = b_.CreateLoad(b_.getInt64Ty(), p.turns_taken);
  llvm::Value* first = b_.CreateZExt(b_.CreateICmpEQ(group_, b_.getInt64(0)), b_.getInt64Ty());
  llvm::Value* parity = b_.CreateTrunc(b_.CreateAnd(b_.CreateXor(k, first), 1), b_.getInt32Ty());
  target_.tma_wait(b_, b_.CreateInBoundsGEP(b_.getInt8Ty(), p.turns, b_.CreateMul(group_, b_.getInt64(8))), parity);
  b_.CreateStore(b_.CreateAdd(k, b_.getInt64(1)), p.turns_taken);
}

void Lowering::pass_turn(Pipeline& p) {
  llvm::Value* next = b_.CreateURem(b_.CreateAdd(group_, b_.getInt64(1)), b_.getInt64(consumers_));
  target_.barrier_arrive(b_, b_.CreateInBoundsGEP(b_.getInt8Ty(), p.turns, b_.CreateMul(next, b_.getInt64(8))));
}

llvm::Value* Lowering::ring_uses(const Op& outer, const Op& loop, llvm::Value* iv) {
  // The run's bounds are computed only where the iteration exists.
  llvm::Value* uses = stack_slot(b_.getInt64Ty());
  b_.CreateStore(b_.getInt64(0), uses);
  emit_if(b_, b_.CreateICmpSLT(iv, widen(outer, val(outer.operands[1]))), [&] {
    b_.CreateStore(run_in(loop, outer, b_.CreateTrunc(iv, val(outer.operands[0])->getType())).trips, uses);
  });
  return b_.CreateLoad(b_.getInt64Ty(), uses);
}

void Lowering::produce(const Op& o, Pipeline& p) {
  const Op& loop = *outer_pipelines_.at(&o);
  llvm::Value* used = stack_slot(b_.getInt64Ty());
  b_.CreateStore(b_.getInt64(0), used);
  llvm::Value* step = val(o.operands[2]);
  emit_if(b_, b_.CreateICmpSGT(step, llvm::ConstantInt::get(step->getType(), 0)), [&] {
    emit_loop(b_, widen(o, val(o.operands[0])), widen(o, val(o.operands[1])), widen(o, step), [&](llvm::Value* iv64) {
      llvm::Value* iv = b_.CreateTrunc(iv64, step->getType());
      const Run run = run_in(loop, o, iv);
      // The values of the tile's body that the loads' coordinates use.
      std::map<int, llvm::Value*> tile;
      std::function<void(int)> need = [&](int id) {
        const ValueInfo& v = ir_.values[id];
        if (v.def_block == o.blocks[0]) {
          if (!tile.contains(id)) tile[id] = value_in_iteration(o, id, iv);
        } else if (v.def_block == loop.blocks[0] && v.def_op >= 0) {
          for (int operand : ir_.ops[v.def_op].operands) need(operand);
        }
      };
      for (const Op* l : p.loads) {
        for (size_t c = 1; c < l->operands.size(); ++c) need(l->operands[c]);
      }
      outer_values_ = &tile;
      emit_loop(b_, b_.getInt64(0), run.trips, b_.getInt64(1), [&](llvm::Value* j) {
        // Use u of the ring waits for the consumers' release of use u - stages
        // (group by group, in the order the consumers read them).
        llvm::Value* u = b_.CreateLoad(b_.getInt64Ty(), used);
        llvm::Value* stage = b_.CreateURem(u, b_.getInt64(p.stages));
        llvm::Value* round = b_.CreateAnd(b_.CreateUDiv(u, b_.getInt64(p.stages)), 1);
        llvm::Value* parity = b_.CreateTrunc(b_.CreateXor(round, 1), b_.getInt32Ty());
        const int groups = static_cast<int>(p.groups.size());
        for (int g = 0; g < groups; ++g) {
          target_.tma_wait(b_, group_barrier(p, p.empty, g, stage), parity);
          issue_iteration(loop, p, run, j, u, iv, groups > 1 ? g : -1);
        }
        b_.CreateStore(b_.CreateAdd(u, b_.getInt64(1)), used);
      });
      outer_values_ = nullptr;
    });
  });
}

absl::Status Lowering::specialized_for(const Op& o) {
  Pipeline& p = pipelines_.at(outer_pipelines_.at(&o));
  const Op& loop = *outer_pipelines_.at(&o);
  llvm::Value* program_thread = thread_;
  emit_if(b_, b_.CreateICmpEQ(group_, b_.getInt64(consumers_)), [&] {
    target_.enter_group(b_, group_, /*producer=*/true);
    thread_ = target_.thread_index(b_);
    emit_if(b_, b_.CreateICmpEQ(thread_, b_.getInt64(0)), [&] { produce(o, p); });
    target_.leave_group();
  });
  absl::Status status;
  emit_if(b_, b_.CreateICmpULT(group_, b_.getInt64(consumers_)), [&] {
    target_.enter_group(b_, group_, /*producer=*/false);
    thread_ = target_.thread_index(b_);
    b_.CreateStore(b_.getInt64(0), p.turns_taken);
    // Consumer c runs iterations c, c + consumers_, ...; the ring positions
    // of the iterations before its first are the others'.
    llvm::Value* lo = widen(o, val(o.operands[0]));
    llvm::Value* step = widen(o, val(o.operands[2]));
    llvm::Value* used = b_.getInt64(0);
    for (int k = 0; k + 1 < consumers_; ++k) {
      llvm::Value* uses = ring_uses(o, loop, b_.CreateAdd(lo, b_.CreateMul(step, b_.getInt64(k))));
      used = b_.CreateAdd(used, b_.CreateSelect(b_.CreateICmpULT(b_.getInt64(k), group_), uses, b_.getInt64(0)));
    }
    b_.CreateStore(used, p.used);
    status = for_op(o, b_.CreateAdd(lo, b_.CreateMul(step, group_)), b_.CreateMul(step, b_.getInt64(consumers_)));
    target_.epilogue(b_);  // this consumer's stores are its own
    target_.leave_group();
  });
  thread_ = program_thread;
  return status;
}

}  // namespace tessel::codegen
