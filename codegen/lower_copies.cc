// Copy rings: loads through pointers that feed matrix instructions, copied
// asynchronously into rings of shared-memory stages iterations ahead (see
// lowering.h, "Copy rings").
#include <algorithm>
#include <set>

#include "codegen/lowering.h"

namespace tessel::codegen {

Swizzle Lowering::widest_swizzle(const Type& t) {
  const int64_t row = t.shape()[1] * t.dtype().bytes();
  Swizzle swizzle = Swizzle::kNone;
  for (Swizzle s : {Swizzle::k32B, Swizzle::k64B, Swizzle::k128B}) {
    if (row % swizzle_bytes(s) == 0) swizzle = s;
  }
  return swizzle;
}

std::vector<RingLoad> copy_ring_loads(const KernelIR& ir, const AffineAnalysis& analysis, const TargetInfo& target) {
  std::vector<RingLoad> out;
  if (!target.async_copies()) return out;
  const int threads = target.register_tile_threads();
  for (RingLoad& l : ring_loads(ir)) {
    const Op& o = ir.ops[l.load];
    const Type& t = ir.type(o.results[0]);
    const bool past_registers = threads > 0 && t.numel() > threads * kMaxRegisterSlots;
    if (analysis.access_run(o) * t.dtype().bytes() >= 4 || past_registers) out.push_back(std::move(l));
  }
  return out;
}

void Lowering::plan_copy_loads() {
  for (const RingLoad& l : ring_loads_) {
    const int v = ir_.ops[l.load].results[0];
    if (widest_swizzle(ir_.type(v)) != Swizzle::kNone) copy_loads_[v] = &l;
  }
}

bool Lowering::drop_copy_loads_read_elsewhere() {
  bool dropped = false;
  for (auto it = copy_loads_.begin(); it != copy_loads_.end();) {
    const int v = it->first;
    // Every dot that reads it does so from its tile.
    bool read_there = true;
    for (const Op& o : ir_.ops) {
      if (o.op != OpCode::kDot) continue;
      for (int k : {0, 1}) {
        if (o.operands[k] != v && transposed_from(o.operands[k]) != v) continue;
        auto dot = mma_dots_.find(&o);
        read_there = read_there && dot != mma_dots_.end() && (k == 0 ? dot->second.a_tile : dot->second.b_tile) == v;
      }
    }
    dropped = dropped || !read_there;
    it = read_there ? std::next(it) : copy_loads_.erase(it);
  }
  return dropped;
}

void Lowering::plan_copy_rings() {
  for (const auto& [v, l] : copy_loads_) {
    const Op& loop = ir_.ops[l->loop];
    CopyRing& r = copy_rings_[&loop];
    r.loads.push_back(l);
    copied_[&ir_.ops[l->load]] = &loop;
    // Its addresses and mask are wanted in the layout its copies take, and
    // so are what they are computed from, whatever their size (a gathered
    // row's pointers broadcast along K stay in registers).
    wanted_[v] = planned(v);
  }
  for (auto& [loop, r] : copy_rings_) {
    const bool defaulted = loop->ints.empty() || loop->ints[0] == 0;
    r.stages = defaulted ? overlap_.default_stages : static_cast<int>(loop->ints[0]);
    pipelined_by_default_ = pipelined_by_default_ || defaulted;
    if (r.stages > 1) leave_in_flight(*loop);
  }
}

absl::Status Lowering::begin_copies(const Op& loop, llvm::Value* lo, llvm::Value* step, llvm::Value* trips) {
  CopyRing& r = copy_rings_.at(&loop);
  r.rings.clear();
  r.strides.clear();
  for (const RingLoad* l : r.loads) {
    const Type& t = ir_.type(ir_.ops[l->load].results[0]);
    r.strides.push_back(round_up(t.numel() * t.dtype().bytes(), tma::kSwizzledTileAlignment));
    r.rings.push_back(smem_alloc(r.strides.back() * r.stages, tma::kSwizzledTileAlignment));
  }
  // What the copies read that no iteration changes (a gathered row's
  // pointers, broadcast along K), once, where it dominates every copy:
  // else each iteration would convert it again into the copies' layout.
  std::set<int> seen;
  std::vector<int> ops, results;  // (each load's in program order)
  for (const RingLoad* l : r.loads) {
    for (int id : l->invariant) {
      if (!seen.insert(id).second) continue;
      ops.push_back(id);
      results.insert(results.end(), ir_.ops[id].results.begin(), ir_.ops[id].results.end());
    }
  }
  const std::vector<Lowered> before = lowered(results);
  for (int id : ops) TESSEL_RETURN_IF_ERROR(op(ir_.ops[id]));
  r.invariant = lowered(results);
  // A row the copies broadcast, held in another layout than the slice they
  // read it in (a gathered row's pointers and mask, made before the loop),
  // is converted into that slice here, once: else each iteration reads it
  // back from shared memory.
  for (const RingLoad* l : r.loads) {
    for (int id : l->slice) {
      const Op& o = ir_.ops[id];
      if (o.op != OpCode::kBroadcast || wanted_[o.results[0]] == nullptr) continue;
      const int v = o.operands[0], axis = stretched_axis(o);
      auto held = std::find_if(r.invariant.begin(), r.invariant.end(), [&](const Lowered& x) { return x.id == v; });
      // (An index tile each slot computes again, as the broadcast does.)
      if (axis < 0 || regs_[v].slots.empty() || index_tile_[v] ||
          (ir_.defined_within(v, loop.blocks[0]) && held == r.invariant.end())) {
        continue;
      }
      auto into = std::make_shared<SliceLayout>(layout(o.results[0]), ir_.type(o.results[0]).shape(), axis);
      if (regs_[v].layout->same_as(*into)) continue;
      const RegTile row{into, regs(v, *into)};
      if (held == r.invariant.end()) {
        r.invariant.push_back({v, vals_[v], row});
      } else {
        held->regs = row;
      }
    }
  }
  set_lowered(before);
  // Each thread ends a group for every iteration ahead, copies or none, so
  // that iteration i's is always its i-th.
  for (int j = 0; j + 1 < r.stages; ++j) {
    absl::Status status = absl::OkStatus();
    emit_if(b_, b_.CreateICmpSLT(b_.getInt64(j), trips), [&] {
      llvm::Value* iv = b_.CreateAdd(lo, b_.CreateMul(step, llvm::ConstantInt::get(lo->getType(), j)));
      status = issue_copies(loop, r, iv, b_.getInt64(j));
    });
    TESSEL_RETURN_IF_ERROR(status);
    target_.async_commit(b_);
  }
  return absl::OkStatus();
}

absl::Status Lowering::enter_copies(const Op& loop, llvm::Value* iv, llvm::Value* i) {
  CopyRing& r = copy_rings_.at(&loop);
  r.stage = b_.CreateURem(i, b_.getInt64(r.stages));
  if (r.stages == 1) {
    // One stage: this iteration's copies, once every thread is done with
    // the last one's.
    target_.program_barrier(b_);
    TESSEL_RETURN_IF_ERROR(issue_copies(loop, r, iv, r.stage));
    target_.async_commit(b_);
  }
  target_.async_wait(b_, std::max(r.stages - 2, 0));
  target_.mma_operands_written(b_);
  return absl::OkStatus();
}

absl::Status Lowering::next_copies(const Op& loop, llvm::Value* iv, llvm::Value* i, llvm::Value* step,
                                   llvm::Value* trips) {
  CopyRing& r = copy_rings_.at(&loop);
  if (r.stages == 1) return absl::OkStatus();
  // The stage iteration i - 1 read: every thread's product of it is done
  // (this iteration's may still run) once all are here.
  target_.program_barrier(b_);
  const int ahead = r.stages - 1;
  llvm::Value* next = b_.CreateAdd(i, b_.getInt64(ahead));
  absl::Status status = absl::OkStatus();
  emit_if(b_, b_.CreateICmpSLT(next, trips), [&] {
    llvm::Value* next_iv = b_.CreateAdd(iv, b_.CreateMul(step, llvm::ConstantInt::get(iv->getType(), ahead)));
    status = issue_copies(loop, r, next_iv, b_.CreateURem(next, b_.getInt64(r.stages)));
  });
  TESSEL_RETURN_IF_ERROR(status);
  target_.async_commit(b_);
  return absl::OkStatus();
}

void Lowering::end_copies(const Op& loop) {
  // (Every group with copies in it was waited for by the iteration that read it.)
  for (llvm::Value* ring : copy_rings_.at(&loop).rings) shared_.erase(ring);
}

std::vector<Lowering::Lowered> Lowering::lowered(const std::vector<int>& ids) const {
  std::vector<Lowered> out;
  for (int id : ids) out.push_back({id, vals_[id], regs_[id]});
  return out;
}

void Lowering::set_lowered(const std::vector<Lowered>& values) {
  for (const Lowered& v : values) {
    vals_[v.id] = v.val;
    regs_[v.id] = v.regs;
  }
}

llvm::Value* Lowering::stage_tile(const CopyRing& r, size_t k, llvm::Value* stage) {
  return b_.CreateInBoundsGEP(b_.getInt8Ty(), r.rings[k], b_.CreateMul(stage, b_.getInt64(r.strides[k])));
}

llvm::Value* Lowering::ring_tile(const Op& load) {
  const CopyRing& r = copy_rings_.at(copied_.at(&load));
  for (size_t k = 0; k < r.loads.size(); ++k) {
    if (&ir_.ops[r.loads[k]->load] == &load) return stage_tile(r, k, r.stage);
  }
  return nullptr;
}

absl::Status Lowering::issue_copies(const Op& loop, CopyRing& r, llvm::Value* iv, llvm::Value* stage) {
  for (size_t k = 0; k < r.loads.size(); ++k) {
    TESSEL_RETURN_IF_ERROR(
        copy_ring_tile(r, *r.loads[k], ir_.blocks[loop.blocks[0]].args[0], iv, stage_tile(r, k, stage)));
  }
  return absl::OkStatus();
}

absl::Status Lowering::copy_ring_tile(const CopyRing& r, const RingLoad& l, int iv_arg, llvm::Value* iv,
                                      llvm::Value* tile) {
  // The slice's values as the iteration `iv` computes them, in place of
  // the ones lowered so far (put back at the end).
  const Op& ld = ir_.ops[l.load];
  std::vector<int> ids = {iv_arg};
  for (int id : l.slice) ids.insert(ids.end(), ir_.ops[id].results.begin(), ir_.ops[id].results.end());
  for (const Lowered& v : r.invariant) ids.push_back(v.id);
  const std::vector<Lowered> saved = lowered(ids);
  set_lowered(r.invariant);
  vals_[iv_arg] = iv;
  absl::Status status = absl::OkStatus();
  for (size_t s = 0; s < l.slice.size() && status.ok(); ++s) status = op(ir_.ops[l.slice[s]]);
  if (status.ok()) {
    const Type& t = ir_.type(ld.results[0]);
    const int64_t bytes = t.dtype().bytes();
    const Layout& lay = *layout(ld.results[0]);
    const int64_t run = access_run(ld, lay);
    // Copies of 16 bytes at most, each within one of the swizzle's chunks.
    const int64_t piece = std::min<int64_t>(run * bytes, 16) / bytes;
    std::vector<llvm::Value*> ptrs = register_addresses(ld.operands[0], lay);
    std::vector<llvm::Value*> masks = ld.operands.size() == 3 ? regs(ld.operands[1], lay) : std::vector<llvm::Value*>();
    llvm::Type* mt = elem_mem_type(t);
    auto ok_at = [&](int64_t slot, llvm::Value* src, int64_t size) {
      llvm::Value* ok = checked(ld, src, size, masks.empty() ? nullptr : masks[slot]);
      return ok == nullptr ? b_.getTrue() : ok;
    };
    // Narrower than a copy takes: each element loaded, and the layout's
    // runs (16 bytes at most, within a swizzle chunk) stored at once, which
    // the fence before the products orders as well.
    const bool narrow = piece * bytes < 4;
    const int64_t step = narrow ? contiguous_run(lay, kVectorBytes / bytes) : run;
    for (int64_t slot = 0; slot < lay.slots(); slot += step) {
      guarded(lay.valid(b_, thread_, slot), [&] {
        llvm::Value* e = lay.element(b_, thread_, slot);
        if (narrow) {
          llvm::Value* v = llvm::UndefValue::get(llvm::FixedVectorType::get(mt, step));
          for (int64_t p = 0; p < step; ++p) {
            llvm::Value* x = predicated_load(mt, ptrs[slot + p], ok_at(slot + p, ptrs[slot + p], bytes),
                                             llvm::Constant::getNullValue(mt), llvm::Align(bytes));
            v = b_.CreateInsertElement(v, x, p);
          }
          llvm::Value* dst = swizzled_elem(tile, t, e, widest_swizzle(t));
          const int64_t words = step * bytes / 4;
          if (words > 0) v = b_.CreateBitCast(v, llvm::FixedVectorType::get(b_.getInt32Ty(), words));
          b_.CreateAlignedStore(v, dst, llvm::Align(step * bytes));
          return;
        }
        for (int64_t p = 0; p < run; p += piece) {
          llvm::Value* src = b_.CreateGEP(mt, ptrs[slot], b_.getInt64(p));
          llvm::Value* dst = swizzled_elem(tile, t, b_.CreateAdd(e, b_.getInt64(p)), widest_swizzle(t));
          target_.async_copy(b_, dst, src, piece * bytes, ok_at(slot, src, piece * bytes));
        }
      });
    }
  }
  set_lowered(saved);
  return status;
}

}  // namespace tessel::codegen
