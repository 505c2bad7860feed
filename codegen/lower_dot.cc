// dot: acc + a @ b on tiles. Lowering converts the accumulator to and from
// the accumulation type; the product itself is the target's (TargetInfo::dot),
// whose default, a loop any target runs, is here too. Dots whose operands a
// TMA copy left in shared memory in a form the target's matrix instructions
// read run on those instead (TargetInfo::mma), with the accumulator in the
// instructions' register layout from one iteration to the next.
#include <algorithm>
#include <optional>

#include "codegen/lowering.h"

namespace tessel::codegen {
namespace {

// A tile as stored in shared memory (SharedMatrix's data filled in later).
SharedMatrix in_shared(int64_t rows, int64_t cols, bool k_major, Swizzle swizzle) {
  SharedMatrix m;
  m.rows = rows;
  m.cols = cols;
  m.k_major = k_major;
  m.swizzle = swizzle;
  return m;
}

}  // namespace

absl::Status Lowering::plan_mma() {
  auto tma_tile = [&](int id) -> const Op* {
    int def = ir_.values[id].def_op;
    return def >= 0 && ir_.ops[def].op == OpCode::kTmaLoad ? &ir_.ops[def] : nullptr;
  };
  auto swizzle_of = [&](const Op* load) { return ir_.type(load->operands[0]).swizzle(); };
  for (const Op& o : ir_.ops) {
    if (o.op != OpCode::kDot) continue;
    const Type& at = ir_.type(o.operands[0]);
    const Type& bt = ir_.type(o.operands[1]);
    const Type& rt = ir_.type(o.results[0]);
    if (ir_.type(o.operands[2]).dtype() != rt.dtype()) continue;
    MmaShape shape{at.dtype(), bt.dtype(), rt.dtype(), at.shape()[0], bt.shape()[1], at.shape()[1], !o.ints.empty()};
    // An operand along `mn`, stored [*, k] (K-major) or [k, *], as a tile.
    auto as_stored = [&](int64_t mn, bool k_major, Swizzle swizzle) {
      return in_shared(k_major ? mn : shape.k, k_major ? shape.k : mn, k_major, swizzle);
    };
    // An operand as a TMA copy (or a copy ring) left it: a's [m, k] tile or
    // b's [k, n] one, or the transpose of a tile stored the other way round.
    // Stored [*, k], it is K-major.
    auto stored = [&](int v, int64_t mn, bool k_major_direct, int* tile) -> std::optional<SharedMatrix> {
      bool k_major = k_major_direct;
      if (const int t = transposed_from(v); t >= 0) {
        v = t;
        k_major = !k_major;
      }
      // A box of a map of higher rank (one head of [heads, rows, cols]; a
      // SwiGLU GEMM's gate and up rows, [1, 2, rows, cols]), its leading
      // dimensions merged into its rows: the same bytes, rows in the same
      // order (a swizzle permutes chunks within rows by the row's index).
      if (int r = ir_.values[v].def_op; r >= 0 && ir_.ops[r].op == OpCode::kReshape) {
        const Shape& from = ir_.type(ir_.ops[r].operands[0]).shape();
        const Shape& to = ir_.type(v).shape();
        if (to.size() == 2 && from.size() >= 2 && from.back() == to.back()) v = ir_.ops[r].operands[0];
      }
      const Op* load = tma_tile(v);
      if (load == nullptr && copy_loads_.contains(v)) {
        // Copied into a ring of tiles laid out as the product reads them.
        *tile = v;
        return as_stored(mn, k_major, widest_swizzle(ir_.type(v)));
      }
      if (load == nullptr) return std::nullopt;
      *tile = v;
      // Swizzled as the map says where the target's copies swizzle, else plain.
      return as_stored(mn, k_major, swizzled(ir_.type(load->operands[0])) ? swizzle_of(load) : Swizzle::kNone);
    };
    // An operand the program computed, written before the product to a tile
    // of its own, as a swizzling TMA copy would have left it: the value, or
    // the one it is the transpose of, its rows swizzled as widely as they
    // allow (which the target's matrix instructions may refuse).
    auto staged = [&](int v, int64_t mn, bool k_major_direct, int* value) -> std::optional<SharedMatrix> {
      bool k_major = k_major_direct;
      if (const int t = transposed_from(v); t >= 0) {
        v = t;
        k_major = !k_major;
      }
      const Swizzle swizzle = widest_swizzle(ir_.type(v));
      if (swizzle == Swizzle::kNone) return std::nullopt;
      *value = v;
      return as_stored(mn, k_major, swizzle);
    };
    int a_tile = -1, b_tile = -1, a_staged = -1, b_staged = -1;
    std::optional<SharedMatrix> a = stored(o.operands[0], shape.m, /*k_major_direct=*/true, &a_tile);
    std::optional<SharedMatrix> b = stored(o.operands[1], shape.n, /*k_major_direct=*/false, &b_tile);
    if (!b) b = staged(o.operands[1], shape.n, /*k_major_direct=*/false, &b_staged);
    if (!b) continue;
    std::shared_ptr<const Layout> a_layout;
    if (!a && transposed_from(o.operands[0]) < 0) {
      // a computed in registers (P of P @ V): the register form, where the
      // target has one; a is then wanted in the layout that form reads.
      a_layout = target_.mma_register_a_layout(shape, *b);
      if (a_layout != nullptr) {
        a = in_shared(shape.m, shape.k, true, Swizzle::kNone);
        a->registers = true;
      }
    }
    // Else staged (a transpose: its threads would read it across each
    // other's registers).
    if (!a) a = staged(o.operands[0], shape.m, /*k_major_direct=*/true, &a_staged);
    if (!a) continue;
    std::shared_ptr<const Layout> layout = target_.mma_layout(shape, *a, *b);
    if (layout == nullptr && (a_staged >= 0 || b_staged >= 0)) continue;
    if (layout == nullptr) {
      // Operands the instructions would read K-major but not as stored.
      SharedMatrix ka = a->registers ? *a : in_shared(shape.m, shape.k, true, a->swizzle);
      SharedMatrix kb = in_shared(shape.n, shape.k, true, b->swizzle);
      if ((!a->k_major || !b->k_major) && target_.mma_layout(shape, ka, kb) != nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "kernel '", ir_.name, "': the dot at ", o.loc.file_name(), ":", o.loc.line(), " multiplies ",
            shape.a.name(), " by ", shape.b.name(),
            " on the tensor cores only with K-major operands: load a as [m, k] boxes and b as [n, k] boxes read "
            "through trans (B given as N x K)"));
      }
      continue;
    }
    mma_dots_[&o] = MmaDot{shape, *a, *b, a_tile, b_tile, layout, a_layout, a_staged, b_staged};
    wanted_[o.results[0]] = layout;
    // A splat to start from (zeros) goes straight into the registers, however large.
    if (const int c = ir_.values[o.operands[2]].def_op; c >= 0 && ir_.ops[c].op == OpCode::kSplat) {
      wanted_[o.operands[2]] = layout;
    }
    if (a_layout != nullptr) wanted_[o.operands[0]] = a_layout;
  }
  if (mma_dots_.empty()) return absl::OkStatus();
  plan_hoisted_stages();
  // Loops that carry an accumulator carry it in its layout.
  for (const Op& o : ir_.ops) {
    if (o.op != OpCode::kFor) continue;
    const Block& body = ir_.blocks[o.blocks[0]];
    const Op& yield = ir_.ops[body.ops.back()];
    for (size_t i = 0; i < o.results.size(); ++i) {
      int def = ir_.values[yield.operands[i]].def_op;
      if (def < 0 || !mma_dots_.contains(&ir_.ops[def])) continue;
      const std::shared_ptr<const Layout>& layout = mma_dots_.at(&ir_.ops[def]).layout;
      wanted_[body.args[1 + i]] = wanted_[o.results[i]] = layout;
      // An initial splat (zeros) goes straight into the registers.
      const int init = o.operands[3 + i], init_def = ir_.values[init].def_op;
      if (init_def >= 0 && ir_.ops[init_def].op == OpCode::kSplat) wanted_[init] = layout;
    }
  }
  // Operands read by nothing else need no plain copy (and a transpose none at all).
  std::vector<std::vector<const Op*>> users(ir_.values.size());
  for (const Op& o : ir_.ops) {
    for (int v : o.operands) users[v].push_back(&o);
  }
  std::function<bool(int)> only = [&](int v) {
    if (users[v].empty()) return false;
    for (const Op* u : users[v]) {
      bool operand = mma_dots_.contains(u) && (u->operands[0] == v || u->operands[1] == v);
      const bool view = u->op == OpCode::kTrans || u->op == OpCode::kReshape;
      if (!operand && !(view && only(u->results[0]))) return false;
    }
    return true;
  };
  for (const auto& [dot, plan] : mma_dots_) {
    for (int v : {dot->operands[0], dot->operands[1], plan.a_tile, plan.b_tile}) {
      const bool own = (plan.a.registers && v == dot->operands[0]) || v == plan.a_staged || v == plan.b_staged;
      if (v >= 0 && !own) mma_only_[v] = only(v);
    }
  }
  return absl::OkStatus();
}

void Lowering::plan_hoisted_stages() {
  hoisted_stages_.clear();
  // Roles split the program's threads between loops; staging stays at the dot there.
  if (specialized_ != nullptr) return;
  std::vector<int> block_of(ir_.ops.size(), -1), owner(ir_.blocks.size(), -1);
  for (size_t b = 0; b < ir_.blocks.size(); ++b) {
    for (int id : ir_.blocks[b].ops) block_of[id] = static_cast<int>(b);
  }
  for (size_t id = 0; id < ir_.ops.size(); ++id) {
    for (int nested : ir_.ops[id].blocks) owner[nested] = static_cast<int>(id);
  }
  // A staging held through a loop keeps its tile from the loop's other
  // buffers: only small ones (a few query rows).
  constexpr int64_t kMostHeldBytes = 16 * 1024;
  for (auto& [dot, plan] : mma_dots_) {
    for (auto [value, form, hoisted] : {std::tuple{plan.a_staged, &plan.a, &plan.a_hoisted},
                                        std::tuple{plan.b_staged, &plan.b, &plan.b_hoisted}}) {
      if (value < 0) continue;
      const Type& t = ir_.type(value);
      if (t.numel() * t.dtype().bytes() > kMostHeldBytes) continue;
      // The outermost loop around the dot whose body does not define the value.
      const Op* loop = nullptr;
      for (int b = block_of[dot - ir_.ops.data()]; b >= 0 && owner[b] >= 0 && !ir_.defined_within(value, b);
           b = block_of[owner[b]]) {
        if (ir_.ops[owner[b]].op == OpCode::kFor) loop = &ir_.ops[owner[b]];
      }
      if (loop == nullptr) continue;
      std::vector<std::pair<int, SharedMatrix>>& staged = hoisted_stages_[loop];
      auto same = std::find_if(staged.begin(), staged.end(), [&](const auto& s) { return s.first == value; });
      if (same == staged.end()) {
        staged.push_back({value, *form});
      } else if (same->second.k_major != form->k_major || same->second.swizzle != form->swizzle) {
        continue;  // another form of it is held: this dot stages its own
      }
      *hoisted = true;
    }
  }
}

void Lowering::stage_hoisted(const Op& o) {
  auto it = hoisted_stages_.find(&o);
  if (it == hoisted_stages_.end()) return;
  // Where the loop runs again (inside another), every thread is past the
  // last run's reads first.
  target_.program_barrier(b_);
  for (const auto& [value, form] : it->second) hoisted_tiles_[value] = stage(value, form);
  target_.mma_operands_written(b_);
}

void Lowering::free_hoisted(const Op& o) {
  auto it = hoisted_stages_.find(&o);
  if (it == hoisted_stages_.end()) return;
  for (const auto& staged : it->second) {
    shared_.erase(hoisted_tiles_.at(staged.first));
    hoisted_tiles_.erase(staged.first);
  }
}

llvm::Value* Lowering::stage(int id, const SharedMatrix& m) {
  const Type& t = ir_.type(id);
  llvm::Value* tile = smem_alloc(t.numel() * t.dtype().bytes(), tma::kSwizzledTileAlignment);
  write_tile(id, [&](llvm::Value* i) { return swizzled_elem(tile, t, i, m.swizzle); });
  return tile;
}

absl::Status Lowering::dot(const Op& o, const Type& rt) {
  if (auto it = mma_dots_.find(&o); it != mma_dots_.end()) {
    MmaDot d = it->second;
    auto operand = [&](int staged, bool hoisted, const SharedMatrix& m, int tile) {
      if (hoisted) return hoisted_tiles_.at(staged);
      return staged >= 0 ? stage(staged, m) : raw_tile(tile);
    };
    if (d.a.registers) {
      d.a.regs = regs(o.operands[0], *d.a_layout);
    } else {
      d.a.data = operand(d.a_staged, d.a_hoisted, d.a, d.a_tile);
    }
    d.b.data = operand(d.b_staged, d.b_hoisted, d.b, d.b_tile);
    if (d.stages()) target_.mma_operands_written(b_);
    set_regs(o, target_.mma(b_, d.shape, d.a, d.b, regs(o.operands[2], *d.layout), in_flight(o)));
    // The product is done (staged dots do not run on): its tiles are free
    // once every thread's is. Memory reused later in this pass is behind
    // smem_alloc's barrier, and in a pipelined loop's body the next
    // iteration is behind the barrier that ends this one (prefetch);
    // elsewhere a loop could come round to the tiles first.
    if (d.stages()) {
      const bool ends_in_barrier = std::any_of(pipelines_.begin(), pipelines_.end(), [&](const auto& loop) {
        return loop.first->blocks[0] == block_ && loop.second.empty == nullptr;
      });
      if (!ends_in_barrier) target_.mma_operands_read(b_);
    }
    if (d.a_staged >= 0 && !d.a_hoisted) shared_.erase(d.a.data);
    if (d.b_staged >= 0 && !d.b_hoisted) shared_.erase(d.b.data);
    return absl::OkStatus();
  }
  const Type& at = ir_.type(o.operands[0]);
  const Type& bt = ir_.type(o.operands[1]);
  int64_t m = at.shape()[0], k = at.shape()[1], n = bt.shape()[1];
  DType in = at.dtype(), out_d = rt.dtype();
  DType acc_d = in == f64 ? f64 : (in == i8 ? i32 : f32);
  const bool tf32 = !o.ints.empty();
  Type acc_tile = Type::tile(acc_d, rt.shape());
  // Where the sum goes: a new buffer that the target fills from c when c
  // already has the accumulation type, else c converted, summed into in place.
  llvm::Value* sum = acc_d == out_d ? new_buffer(rt) : new_buffer(acc_tile);
  llvm::Value* c = val(o.operands[2]);
  llvm::Value* acc = sum;
  if (acc_d == out_d) {
    acc = c;
  } else {
    tile_loop(rt.numel(),
              [&](llvm::Value* i) { store_elem(sum, acc_tile, i, ops_.convert(load_elem(c, rt, i), out_d, acc_d)); });
  }
  llvm::Value* a = val(o.operands[0]);
  llvm::Value* bv = val(o.operands[1]);
  target_.dot(b_, MatrixTile{a, in, m, k, k, tf32}, MatrixTile{bv, bt.dtype(), k, n, n, tf32},
              MatrixTile{acc, acc_d, m, n, n}, MatrixTile{sum, acc_d, m, n, n});
  if (acc_d == out_d) {
    set(o, sum);
    return absl::OkStatus();
  }
  llvm::Value* result = new_buffer(rt);
  tile_loop(rt.numel(), [&](llvm::Value* i) {
    store_elem(result, rt, i, ops_.convert(load_elem(sum, acc_tile, i), acc_d, out_d));
  });
  set(o, result);
  return absl::OkStatus();
}

void TargetInfo::dot(llvm::IRBuilder<>& b, const MatrixTile& lhs, const MatrixTile& rhs, const MatrixTile& acc,
                     const MatrixTile& result) {
  ScalarOps ops(b, *this);
  const DType acc_d = result.dtype;
  auto element = [&](const MatrixTile& t, llvm::Value* row, llvm::Value* col) {
    llvm::Value* i = b.CreateAdd(b.CreateMul(row, b.getInt64(t.row_stride)), col);
    return b.CreateInBoundsGEP(ops.reg_type(t.dtype), t.data, i);
  };
  auto load = [&](const MatrixTile& t, llvm::Value* row, llvm::Value* col) {
    return b.CreateLoad(ops.reg_type(t.dtype), element(t, row, col));
  };
  auto operand = [&](const MatrixTile& t, llvm::Value* row, llvm::Value* col) {
    llvm::Value* v = ops.convert(load(t, row, col), t.dtype, acc_d);
    return t.tf32 ? ops.round_to_tf32(v) : v;
  };
  if (acc.data != result.data) {
    auto dense = [](const MatrixTile& t) { return t.row_stride == t.cols; };
    tile_loop(b, result.rows * result.cols, [&](llvm::Value* i) {
      if (dense(acc) && dense(result)) {
        llvm::Type* t = ops.reg_type(acc_d);
        b.CreateStore(b.CreateLoad(t, b.CreateInBoundsGEP(t, acc.data, i)), b.CreateInBoundsGEP(t, result.data, i));
        return;
      }
      llvm::Value* row = b.CreateUDiv(i, b.getInt64(result.cols));
      llvm::Value* col = b.CreateURem(i, b.getInt64(result.cols));
      b.CreateStore(load(acc, row, col), element(result, row, col));
    });
  }
  // Rows are spread over the program's threads; each owns its rows of the result.
  const int64_t k = lhs.cols, n = rhs.cols;
  tile_loop(b, lhs.rows, [&](llvm::Value* mi) {
    emit_loop(b, b.getInt64(0), b.getInt64(k), b.getInt64(1), [&](llvm::Value* ki) {
      llvm::Value* av = operand(lhs, mi, ki);
      emit_loop(b, b.getInt64(0), b.getInt64(n), b.getInt64(1), [&](llvm::Value* ni) {
        llvm::Value* bval = operand(rhs, ki, ni);
        llvm::Value* p = element(result, mi, ni);
        llvm::Value* cur = b.CreateLoad(ops.reg_type(acc_d), p);
        llvm::Value* prod = acc_d.is_float() ? b.CreateFMul(av, bval) : b.CreateMul(av, bval);
        b.CreateStore(acc_d.is_float() ? b.CreateFAdd(cur, prod) : b.CreateAdd(cur, prod), p);
      });
    });
  });
}

}  // namespace tessel::codegen
