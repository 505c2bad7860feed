// tma_load and tma_store through the target's hooks, with the mbarrier and
// phase bit each tma_load waits on; and the hooks' default, the copy that
// targets without a tensor memory accelerator do in software.
#include "base/tensor_map_form.h"
#include "base/tma_rules.h"
#include "codegen/lowering.h"
#include "codegen/tile_offset.h"

namespace tessel::codegen {

using llvm::IRBuilder;

void Lowering::reserve_tma_barriers() {
  // A warp-specialized loop's ring and barriers come first, for all groups;
  // the rest is each consumer's own.
  if (specialized_ != nullptr) reserve_producer_ring();
  // One mbarrier per tma_load, or per stage of a pipelined loop's loads.
  const int64_t start = smem_reserved_;
  int count = 0;
  IRBuilder<> eb(alloca_point_);
  for (const Op& o : ir_.ops) {
    if (o.op != OpCode::kTmaLoad || pipelined_.contains(&o)) continue;
    llvm::Value* phase = stack_slot(b_.getInt32Ty());
    eb.CreateStore(eb.getInt32(0), phase);
    tma_barriers_[&o] = {b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), smem_base_, start + 8 * count++), phase};
  }
  for (auto& [loop, p] : pipelines_) {
    if (p.empty != nullptr) continue;  // the producer's
    p.barriers = b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), smem_base_, start + 8 * count);
    count += p.stages;
    p.used = stack_slot(b_.getInt64Ty());
    eb.CreateStore(eb.getInt64(0), p.used);
  }
  // A multicast ring without a producer: its stages' releases, one per
  // program of the cluster (Pipeline::released).
  int released = 0;
  for (auto& [loop, p] : pipelines_) {
    if (p.empty != nullptr || !p.multicast) continue;
    p.released = b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), smem_base_, start + 8 * (count + released));
    released += p.stages;
  }
  smem_reserved_ = smem_peak_ = start + 8 * int64_t{count + released};
  if (count > 0 && specialized_ == nullptr) {
    target_.init_tma_barriers(b_, b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), smem_base_, start), count, 1);
  }
  if (released > 0) {
    target_.init_tma_barriers(b_, b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), smem_base_, start + 8 * count),
                              released, ir_.cluster);
  }
  for (int c = 0; count > 0 && specialized_ != nullptr && c < consumers_; ++c) {
    llvm::Value* own = b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), consumer_smem(b_.getInt64(c)), start);
    target_.init_tma_barriers(b_, own, count, 1);
  }
  for (const Op& o : ir_.ops) {
    if (!overlap_.hold_store_tiles || o.op != OpCode::kTmaStore || !staged_store(o)) continue;
    if (overlap_.hold_streamed_only && !streamed_store(ir_, o)) continue;
    const Type& t = ir_.type(o.operands[1]);
    const int64_t panels = overlap_.stage_panels && store_panels(ir_, o) > 2 ? store_panels(ir_, o) : 1;
    const int64_t offset = round_up(smem_reserved_, tma::kSwizzledTileAlignment);
    store_tiles_[&o] = {b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), smem_base_, offset), panels};
    smem_reserved_ = smem_peak_ = offset + t.numel() * t.dtype().bytes() / panels * std::min<int64_t>(panels, 2);
  }
}

int64_t store_panels(const KernelIR& ir, const Op& o) {
  const Type& map_type = ir.type(o.operands[0]);
  const int64_t inner = map_type.shape().back();
  return inner / tma::panel_elems(inner, map_type.dtype().bytes(), map_type.swizzle());
}

bool streamed_store(const KernelIR& ir, const Op& o) {
  const int id = static_cast<int>(&o - ir.ops.data());
  for (const Block& block : ir.blocks) {
    if (std::find(block.ops.begin(), block.ops.end(), id) == block.ops.end()) continue;
    auto has = [&](OpCode code) {
      return std::any_of(block.ops.begin(), block.ops.end(), [&](int op) { return ir.ops[op].op == code; });
    };
    return has(OpCode::kTmaLoad) && !has(OpCode::kFor) && !has(OpCode::kWhile);
  }
  return false;
}

llvm::Value* Lowering::swizzled_elem(llvm::Value* buf, const Type& tile, llvm::Value* i, Swizzle swizzle) {
  const int64_t inner = tile.shape().back();
  llvm::Value* row = b_.getInt64(0);
  llvm::Value* col = i;
  if (tma::panel_elems(inner, tile.dtype().bytes(), swizzle) != inner) {  // else row * inner + col is i itself
    row = b_.CreateUDiv(i, b_.getInt64(inner));
    col = b_.CreateURem(i, b_.getInt64(inner));
  }
  return b_.CreateInBoundsGEP(b_.getInt8Ty(), buf,
                              tile_offset(b_, row, col, tile.numel() / inner, inner, tile.dtype().bytes(), swizzle));
}

absl::Status Lowering::tma_load(const Op& o, const Type& rt) {
  const Type& map_type = ir_.type(o.operands[0]);
  const bool swizzle = swizzled(map_type);
  int64_t bytes = rt.numel() * rt.dtype().bytes();
  llvm::Value* smem = nullptr;
  if (auto it = pipelined_.find(&o); it != pipelined_.end()) {
    // Issued iterations ahead; the iteration waited for its stage.
    const Pipeline& p = pipelines_.at(it->second.first);
    const int i = it->second.second;
    smem = b_.CreateInBoundsGEP(b_.getInt8Ty(), p.rings[i], b_.CreateMul(p.stage, b_.getInt64(p.strides[i])));
  } else {
    smem = smem_alloc(bytes, swizzle ? tma::kSwizzledTileAlignment : tma::kSharedTileAlignment);
    TmaBarrier& bar = tma_barriers_.at(&o);
    target_.tma_load(b_, map_type, val(o.operands[0]), coords(o, 1), smem, bytes, bar.address, bar.phase,
                     load_parts(o));
  }
  if (!swizzle || mma_only_[o.results[0]]) {
    set(o, smem);
    return absl::OkStatus();
  }
  // Other ops read tiles row-major: they get a plain copy.
  llvm::Type* et = elem_mem_type(rt);
  llvm::Value* plain = new_buffer(rt);
  tile_loop(rt.numel(), [&](llvm::Value* i) {
    llvm::Value* v = b_.CreateLoad(et, swizzled_elem(smem, rt, i, map_type.swizzle()));
    b_.CreateStore(v, b_.CreateInBoundsGEP(et, plain, i));
  });
  raw_tiles_[o.results[0]] = smem;
  set(o, plain);
  return absl::OkStatus();
}

absl::Status Lowering::tma_store(const Op& o) {
  const Type& map_type = ir_.type(o.operands[0]);
  const bool add = !o.ints.empty();  // tma_reduce (AtomicOp::kAdd, the one it takes)
  if (!staged_store(o)) {
    target_.tma_store(b_, map_type, val(o.operands[0]), coords(o, 2), val(o.operands[1]), add);
    return absl::OkStatus();
  }
  // The copy engine reads the tile as the map swizzles it: written so, from
  // the registers where the tile is held there, once the store before it
  // has read it (the store itself runs on while the program goes on).
  const int id = o.operands[1];
  const Type& t = ir_.type(id);
  const bool held = store_tiles_.contains(&o);
  if (held && store_tiles_.at(&o).panels > 1) {
    tma_store_panels(o, store_tiles_.at(&o).buffer, store_tiles_.at(&o).panels);
    return absl::OkStatus();
  }
  llvm::Value* staged =
      held ? store_tiles_.at(&o).buffer : smem_alloc(t.numel() * t.dtype().bytes(), tma::kSwizzledTileAlignment);
  if (held) target_.tma_store_wait(b_, 0);
  // The store's issue synchronizes the program after its proxy fence.
  write_tile(id, [&](llvm::Value* i) { return swizzled_elem(staged, t, i, map_type.swizzle()); });
  if (held) {
    target_.tma_store_async(b_, map_type, val(o.operands[0]), coords(o, 2), staged, add);
  } else {
    // The copy has read the tile when this returns: its buffer is free
    // (smem_alloc synchronizes the program before reusing it).
    target_.tma_store(b_, map_type, val(o.operands[0]), coords(o, 2), staged, add);
    shared_.erase(staged);
  }
  return absl::OkStatus();
}

void Lowering::write_tile(int id, const std::function<llvm::Value*(llvm::Value*)>& address) {
  const Type& t = ir_.type(id);
  if (!regs_[id].slots.empty()) {
    if (!target_.store_matrix(b_, *regs_[id].layout, regs_[id].slots, t.shape().back(), address, {})) {
      store_regs(id, address, /*barrier=*/false);
    }
    return;
  }
  llvm::Value* src = val(id);
  llvm::Type* et = elem_mem_type(t);
  tile_loop(t.numel(),
            [&](llvm::Value* i) { b_.CreateStore(b_.CreateLoad(et, b_.CreateInBoundsGEP(et, src, i)), address(i)); });
}

void Lowering::tma_store_panels(const Op& o, llvm::Value* buffers, int64_t panels) {
  const Type& map_type = ir_.type(o.operands[0]);
  const int id = o.operands[1];
  const Type& t = ir_.type(id);
  const int64_t inner = t.shape().back(), width = inner / panels, rows = t.numel() / inner;
  Shape box = map_type.shape();
  box.back() = width;
  const Type panel_map = Type::tensor_map(map_type.dtype(), box, map_type.swizzle());
  const Type panel_tile = Type::tile(t.dtype(), {rows, width});
  const int64_t panel_bytes = panel_tile.numel() * t.dtype().bytes();
  // The panel of each register slot's element, -1 where threads differ
  // (then the tile goes through its buffer).
  std::vector<int64_t> slot_panel;
  bool by_slot = !regs_[id].slots.empty();
  for (int64_t s = 0; by_slot && s < regs_[id].layout->slots(); ++s) {
    int64_t panel = -1;
    for (int th = 0; th < regs_[id].layout->threads(); ++th) {
      const int64_t e = regs_[id].layout->element_at(th, s);
      if (e < 0) continue;
      if (panel == -1) panel = e % inner / width;
      by_slot = by_slot && panel == e % inner / width;
    }
    slot_panel.push_back(panel);
  }
  llvm::Value* src = by_slot ? nullptr : val(id);
  llvm::Type* et = elem_mem_type(t);
  const std::vector<llvm::Value*> at = coords(o, 2);
  for (int64_t p = 0; p < panels; ++p) {
    // The buffer was last read by the store two panels back (by the last
    // one, at an odd count's first panel).
    target_.tma_store_wait(b_, p == 0 && panels % 2 == 1 ? 0 : 1);
    llvm::Value* buf = b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), buffers, p % 2 * panel_bytes);
    // Element i of the tile, in the panel at `buf`.
    auto address = [&](llvm::Value* i) {
      llvm::Value* row = b_.CreateUDiv(i, b_.getInt64(inner));
      llvm::Value* col = b_.CreateSub(b_.CreateURem(i, b_.getInt64(inner)), b_.getInt64(p * width));
      return swizzled_elem(buf, panel_tile, b_.CreateAdd(b_.CreateMul(row, b_.getInt64(width)), col),
                           map_type.swizzle());
    };
    if (src == nullptr) {
      const SlotFilter keep = [&](int64_t s) { return slot_panel[s] == p; };
      if (!target_.store_matrix(b_, *regs_[id].layout, regs_[id].slots, inner, address, keep)) {
        store_regs(id, address, /*barrier=*/false, keep);
      }
    } else {
      tile_loop(rows * width, [&](llvm::Value* j) {
        llvm::Value* i = b_.CreateAdd(b_.CreateMul(b_.CreateUDiv(j, b_.getInt64(width)), b_.getInt64(inner)),
                                      b_.CreateAdd(b_.CreateURem(j, b_.getInt64(width)), b_.getInt64(p * width)));
        b_.CreateStore(b_.CreateLoad(et, b_.CreateInBoundsGEP(et, src, i)), address(i));
      });
    }
    std::vector<llvm::Value*> panel_at = at;
    panel_at.back() = b_.CreateAdd(at.back(), llvm::ConstantInt::get(at.back()->getType(), p * width));
    target_.tma_store_async(b_, panel_map, val(o.operands[0]), panel_at, buf, !o.ints.empty());
  }
}

namespace {

// The software copy between a box of the tensor and the dense tile at
// `smem`. The box's shape, rank and dtype come from the map's type; the
// tensor's address, dims, byte strides, element strides and fill are read
// from the map's host form when the kernel runs. The program's threads each
// take elements of the box (its static shape bounds the tile, which element
// strides above 1 make smaller); an element outside the tile does nothing,
// and one outside the tensor reads as the fill and is not stored. kAdd adds
// each element into the tensor atomically, at device scope.
enum class BoxCopy { kLoad, kStore, kAdd };
void copy_box(TargetInfo& target, IRBuilder<>& b, const Type& map_type, llvm::Value* map,
              const std::vector<llvm::Value*>& coords, llvm::Value* smem, BoxCopy copy) {
  const bool load = copy == BoxCopy::kLoad;
  const Shape& box = map_type.shape();
  const int rank = static_cast<int>(box.size());
  const int64_t elem = map_type.dtype().bytes();
  llvm::Type* i64 = b.getInt64Ty();
  llvm::Type* et = b.getIntNTy(8 * static_cast<unsigned>(elem));
  // Fields sit at multiples of their size in a map aligned to 64 bytes.
  auto field = [&](size_t offset, llvm::Type* t) -> llvm::Value* {
    llvm::Value* p = b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), map, offset);
    llvm::Value* v = b.CreateAlignedLoad(t, p, llvm::Align(t->getIntegerBitWidth() / 8));
    return t == i64 ? v : b.CreateZExt(v, i64);
  };
  llvm::Value* base = b.CreateIntToPtr(field(host_form::kAddress, i64),
                                       llvm::PointerType::get(b.getContext(), target.device_memory_address_space()));
  std::vector<llvm::Value*> dim(rank), stride(rank), step(rank), tile(rank), origin(rank), tile_stride(rank);
  for (int d = 0; d < rank; ++d) {
    dim[d] = field(host_form::kDims + 8 * d, i64);
    stride[d] = d == rank - 1 ? b.getInt64(elem) : field(host_form::kStrides + 8 * d, i64);
    step[d] = field(host_form::kElementStrides + d, b.getInt8Ty());
    tile[d] = b.CreateUDiv(b.CreateAdd(b.getInt64(box[d]), b.CreateSub(step[d], b.getInt64(1))), step[d]);
    origin[d] = b.CreateSExt(coords[d], i64);
  }
  for (int d = rank - 1; d >= 0; --d) {
    tile_stride[d] = d == rank - 1 ? b.getInt64(1) : b.CreateMul(tile_stride[d + 1], tile[d + 1]);
  }
  llvm::Value* fill = nullptr;
  if (load) {
    llvm::Value* nan = b.CreateICmpEQ(field(host_form::kFill, b.getInt8Ty()),
                                      b.getInt64(static_cast<uint64_t>(TensorMapOobFill::kNan)));
    fill = b.CreateSelect(nan, llvm::ConstantInt::get(et, quiet_nan_bits(map_type.dtype().kind)),
                          llvm::ConstantInt::get(et, 0));
  }
  std::vector<int64_t> box_stride(rank, 1);
  for (int d = rank - 2; d >= 0; --d) box_stride[d] = box_stride[d + 1] * box[d + 1];
  // Where box element i (i64) lies: its index in the tile, its byte offset in
  // the tensor, and whether it is in the tile and in the tensor (the
  // innermost dimension checked for `run` elements from it).
  struct Place {
    llvm::Value *slot, *offset, *in_tile, *in_tensor;
  };
  auto place = [&](llvm::Value* i, int64_t run) {
    Place p{b.getInt64(0), b.getInt64(0), b.getTrue(), b.getTrue()};
    for (int d = 0; d < rank; ++d) {
      llvm::Value* k = b.CreateUDiv(i, b.getInt64(box_stride[d]));
      if (d > 0) k = b.CreateURem(k, b.getInt64(box[d]));
      const int64_t last = d == rank - 1 ? run - 1 : 0;
      p.in_tile = b.CreateAnd(p.in_tile, b.CreateICmpULT(b.CreateAdd(k, b.getInt64(last)), tile[d]));
      p.slot = b.CreateAdd(p.slot, b.CreateMul(k, tile_stride[d]));
      llvm::Value* g = b.CreateAdd(origin[d], b.CreateMul(k, step[d]));
      llvm::Value* inside = b.CreateAnd(b.CreateICmpSGE(g, b.getInt64(0)),
                                        b.CreateICmpSLT(b.CreateAdd(g, b.getInt64(last)), dim[d]));
      p.in_tensor = b.CreateAnd(p.in_tensor, inside);
      p.offset = b.CreateAdd(p.offset, b.CreateMul(g, stride[d]));
    }
    return p;
  };
  auto copy_element = [&](llvm::Value* i) {
    const Place p = place(i, 1);
    emit_if(b, p.in_tile, [&] {
      llvm::Value* shared = b.CreateInBoundsGEP(et, smem, p.slot);
      llvm::Value* global = b.CreateGEP(b.getInt8Ty(), base, p.offset);
      if (copy == BoxCopy::kAdd) {
        emit_if(b, p.in_tensor, [&] {
          ScalarOps ops(b, target);
          const DType d = map_type.dtype();
          ops.atomic_rmw(AtomicOp::kAdd, d, global, b.CreateAlignedLoad(ops.reg_type(d), shared, llvm::Align(elem)),
                         llvm::AtomicOrdering::Monotonic, target.device_scope(b.getContext()));
        });
        return;
      }
      if (!load) {
        emit_if(b, p.in_tensor, [&] {
          b.CreateAlignedStore(b.CreateAlignedLoad(et, shared, llvm::Align(elem)), global, llvm::Align(elem));
        });
        return;
      }
      // A branch around the load: addresses outside the tensor are never read.
      llvm::BasicBlock* pre = b.GetInsertBlock();
      llvm::Value* loaded = nullptr;
      llvm::BasicBlock* in = nullptr;
      emit_if(b, p.in_tensor, [&] {
        loaded = b.CreateAlignedLoad(et, global, llvm::Align(elem));
        in = b.GetInsertBlock();
      });
      llvm::PHINode* v = b.CreatePHI(et, 2);
      v->addIncoming(loaded, in);
      v->addIncoming(fill, pre);
      b.CreateAlignedStore(v, shared, llvm::Align(elem));
    });
  };
  // Rows spanning 16-byte multiples go 16 bytes at a time where a run is
  // wholly in the tile and the tensor, contiguous (element stride 1) and
  // aligned in global memory; other runs element by element.
  const int64_t run = 16 / elem;
  if (elem > 16 || box.back() % run != 0 || copy == BoxCopy::kAdd) {
    target.tile_loop(b, numel(box), copy_element);
    return;
  }
  auto* vec = llvm::FixedVectorType::get(et, static_cast<unsigned>(run));
  target.tile_loop(b, numel(box) / run, [&](llvm::Value* c) {
    llvm::Value* i = b.CreateMul(c, b.getInt64(run));
    const Place p = place(i, run);
    llvm::Value* address = b.CreateAdd(b.CreatePtrToInt(base, i64), p.offset);
    llvm::Value* whole = b.CreateAnd(b.CreateAnd(p.in_tile, p.in_tensor),
                                     b.CreateAnd(b.CreateICmpEQ(step[rank - 1], b.getInt64(1)),
                                                 b.CreateICmpEQ(b.CreateAnd(address, 15), b.getInt64(0))));
    emit_if(b, whole, [&] {
      llvm::Value* shared = b.CreateInBoundsGEP(et, smem, p.slot);
      llvm::Value* global = b.CreateGEP(b.getInt8Ty(), base, p.offset);
      if (load) {
        b.CreateAlignedStore(b.CreateAlignedLoad(vec, global, llvm::Align(16)), shared, llvm::Align(16));
      } else {
        b.CreateAlignedStore(b.CreateAlignedLoad(vec, shared, llvm::Align(16)), global, llvm::Align(16));
      }
    });
    emit_if(b, b.CreateNot(whole), [&] {
      emit_loop(b, b.getInt64(0), b.getInt64(run), b.getInt64(1),
                [&](llvm::Value* e) { copy_element(b.CreateAdd(i, e)); });
    });
  });
}

}  // namespace

void TargetInfo::tma_load(IRBuilder<>& b, const Type& map_type, llvm::Value* map,
                          const std::vector<llvm::Value*>& coords, llvm::Value* smem, int64_t bytes, llvm::Value*,
                          llvm::Value*, int parts) {
  program_barrier(b);  // every thread is done with the buffer's previous contents
  for_each_part(b, map_type, coords, smem, bytes, parts, [&](const std::vector<llvm::Value*>& at, llvm::Value* dst) {
    copy_box(*this, b, map_type, map, at, dst, BoxCopy::kLoad);
  });
}

void for_each_part(IRBuilder<>& b, const Type& map_type, const std::vector<llvm::Value*>& coords, llvm::Value* smem,
                   int64_t bytes, int parts,
                   const std::function<void(const std::vector<llvm::Value*>&, llvm::Value*)>& copy) {
  for (int r = 0; r < parts; ++r) {
    std::vector<llvm::Value*> at = coords;
    at[0] = b.CreateAdd(at[0], llvm::ConstantInt::get(at[0]->getType(), r * map_type.shape()[0]));
    copy(at, b.CreateConstInBoundsGEP1_64(b.getInt8Ty(), smem, bytes / parts * r));
  }
}

void TargetInfo::tma_store(IRBuilder<>& b, const Type& map_type, llvm::Value* map,
                           const std::vector<llvm::Value*>& coords, llvm::Value* smem, bool add) {
  // Every thread's writes to the tile come first; the tile loop's own
  // barrier lets the buffer be reused.
  program_barrier(b);
  copy_box(*this, b, map_type, map, coords, smem, add ? BoxCopy::kAdd : BoxCopy::kStore);
}

}  // namespace tessel::codegen
