// Internal: the lowering of kernel IR to LLVM IR, one instance per
// compilation. Its methods live in one file per concern:
//   lower.cc             the driver: run(), blocks, the dispatch of ops,
//                        shared-memory buffers, val() and regs()
//   lower_elementwise.cc elementwise ops, the layouts they compute in,
//                        and the slices broadcasts want (want_slices)
//   lower_views.cc       expand_dims, reshape, broadcast, trans, gather
//   lower_reduce.cc      reductions and histograms
//   lower_reduce_fn.cc   reductions by a combine function
//   lower_scan.cc        scans
//   lower_scan_fn.cc     scans by a combine function
//   lower_dot.cc         dot, and TargetInfo::dot's default
//   lower_memory.cc      loads, stores and atomics
//   lower_tma.cc         tma_load, tma_store and their mbarriers, and
//                        TargetInfo's default (software) TMA
//   lower_control.cc     for and if
//   lower_roles.cc       warp specialization: producer and consumer groups
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "base/tma_rules.h"
#include "codegen/affine.h"
#include "codegen/layout.h"
#include "codegen/layout_plan.h"
#include "codegen/loops.h"
#include "codegen/lower.h"
#include "codegen/prefetch.h"
#include "codegen/scalar_ops.h"
#include "codegen/target_info.h"
#include "codegen/views.h"
#include "dsl/ir.h"
#include "dsl/opcode_traits.h"

namespace tessel::codegen {

// The panels of tma_store `o`'s tile when its map is swizzled (boxes wider
// than their swizzle are copied a panel at a time), else 1.
int64_t store_panels(const KernelIR& ir, const Op& o);
// Whether tma_store `o` is streamed: in an innermost loop's body that
// loads TMA boxes too (a pipeline's), whose every iteration would otherwise
// wait for the copy of the iteration before.
bool streamed_store(const KernelIR& ir, const Op& o);
// The boxes tma_load `o`'s tile holds: the kernel's cluster size for a
// tma_multicast, else 1.
inline int load_parts(const Op& o) { return o.ints.empty() ? 1 : static_cast<int>(o.ints[0]); }

// The most elements a thread holds of a tile in registers (larger tiles
// stay in shared memory).
inline constexpr int64_t kMaxRegisterSlots = 64;

// The ring loads of `ir` (codegen/prefetch.h) that take copy rings on
// `target` (Lowering's "Copy rings"): those whose accesses move 4 bytes or
// more, a copy's least, and narrower ones whose tiles are larger than
// registers hold (copied element by element; smaller ones keep to
// registers, as Triton's do).
std::vector<RingLoad> copy_ring_loads(const KernelIR& ir, const AffineAnalysis& analysis, const TargetInfo& target);

class Lowering {
 public:
  // What a kernel may spend shared memory on to overlap copies with work.
  struct Overlap {
    // Swizzled tma_stores stage their tiles in shared memory held for the
    // whole kernel and leave the copy running.
    bool hold_store_tiles = true;
    // Pipelined loops' rings run across the loop around them (Pipeline::outer).
    bool rings_across = true;
    // Held tiles of more than two panels (a box wider than its swizzle)
    // stage one panel at a time through two panel buffers, each panel's
    // store issued before the next panel is written.
    bool stage_panels = false;
    // Of the store tiles, only those of streamed stores are held.
    bool hold_streamed_only = false;
    // Stores of a tensor-core product through pointers that allow 16-byte
    // accesses stage the product in shared memory (staged_stores_).
    bool stage_stores = true;
    // The stages of loops that take the default count.
    int default_stages = kDefaultStages;
  };
  static constexpr int kDefaultStages = 3;
  Lowering(const KernelIR& ir, TargetInfo& target, llvm::LLVMContext& ctx, Specialization facts, Overlap overlap)
      : ir_(ir),
        target_(target),
        ctx_(ctx),
        b_(ctx),
        ops_(b_, target),
        facts_(facts),
        analysis_(ir, facts),
        overlap_(overlap) {}

  absl::StatusOr<LoweredKernel> run();

 private:
  // ---- Types -------------------------------------------------------------
  llvm::Type* reg_type(DType d) { return ops_.reg_type(d); }
  llvm::Type* ptr_type() { return llvm::PointerType::get(ctx_, target_.global_address_space()); }
  // The register type of a scalar, pointer, or a tile's element.
  llvm::Type* elem_type(const Type& t) {
    if (t.is_pointer() || (t.is_tile() && t.elements_are_pointers())) return ptr_type();
    return reg_type(t.dtype());
  }
  // In memory an i1 takes a byte.
  llvm::Type* elem_mem_type(const Type& t) {
    llvm::Type* r = elem_type(t);
    return r->isIntegerTy(1) ? b_.getInt8Ty() : r;
  }

  // Each tma_load op gets an mbarrier at the start of shared memory, set up
  // once per kernel, and a phase bit that flips with each use.
  void reserve_tma_barriers();

  // ---- Buffers and loops ---------------------------------------------------
  // Shared memory: a first-fit allocation per buffer. A buffer is free again
  // after the last op of its block that uses a value held in it, and
  // everything a block allocated is free when the block ends (values never
  // outlive their block but through yields, which copy). Memory used before
  // is handed out again only after a barrier, so that no thread writes it
  // while another may still read it. Host tiles other than TMA boxes live on
  // the stack.
  llvm::Value* smem_alloc(int64_t bytes, int64_t align = tma::kSharedTileAlignment);
  // `bytes` rounded up to a multiple of `align`.
  static int64_t round_up(int64_t bytes, int64_t align) { return (bytes + align - 1) / align * align; }
  // Frees the buffers of this block that no value used after op `position` holds.
  void release_dead_buffers(const std::vector<int>& last_use, int position);
  // A slot in this thread's stack, at the function's entry (as a flat
  // pointer where the target's stack has an address space of its own).
  llvm::Value* stack_slot(llvm::Type* type, int64_t count = 1, uint64_t align = 0);
  llvm::Value* new_buffer(const Type& tile);
  // An element as memory holds it (`mt`, elem_mem_type: i1 widened to
  // i8), and back as registers hold it for a tile of `tile`'s dtype.
  llvm::Value* to_memory(llvm::Value* v, llvm::Type* mt) { return v->getType() == mt ? v : b_.CreateZExt(v, mt); }
  llvm::Value* from_memory(llvm::Value* v, const Type& tile) {
    return v->getType() == elem_type(tile) ? v : b_.CreateTrunc(v, b_.getInt1Ty());
  }
  llvm::Value* load_elem(llvm::Value* buf, const Type& tile, llvm::Value* i) {
    llvm::Type* mt = elem_mem_type(tile);
    return from_memory(b_.CreateLoad(mt, b_.CreateInBoundsGEP(mt, buf, i)), tile);
  }
  void store_elem(llvm::Value* buf, const Type& tile, llvm::Value* i, llvm::Value* v) {
    llvm::Type* mt = elem_mem_type(tile);
    b_.CreateStore(to_memory(v, mt), b_.CreateInBoundsGEP(mt, buf, i));
  }
  // One thread's loop: for (i = 0; i < n; ++i) body(i), with an i64 index.
  void loop(int64_t n, const std::function<void(llvm::Value*)>& body) {
    emit_loop(b_, b_.getInt64(0), b_.getInt64(n), b_.getInt64(1), body);
  }
  // The program's loop over the elements of a tile: the target spreads it
  // over its threads and makes the writes visible to all of them.
  void tile_loop(int64_t n, const std::function<void(llvm::Value*)>& body) { target_.tile_loop(b_, n, body); }
  static std::vector<int64_t> strides(const Shape& shape) {
    std::vector<int64_t> s(shape.size(), 1);
    for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) s[d] = s[d + 1] * shape[d + 1];
    return s;
  }
  llvm::Value* linear_index(const std::vector<llvm::Value*>& idx, const std::vector<int64_t>& stride);
  // The index per dimension (i64) of row-major element `lin` of `shape`.
  std::vector<llvm::Value*> unravel(llvm::Value* lin, const Shape& shape);
  void copy_tile(llvm::Value* dst, llvm::Value* src, const Type& tile) {
    tile_loop(tile.numel(), [&](llvm::Value* i) { store_elem(dst, tile, i, load_elem(src, tile, i)); });
  }

  // ---- Tiles element by element (lower_elements.cc) ----------------------------
  // Ops on tiles that are not in registers compute element by element, in
  // loops over the tile. On a target whose program is one thread walking
  // tiles on its own stack (the host), a tile may also be *inline*: never
  // stored, each element computed where an op reads it (Halide's
  // compute_inline), so that a chain of elementwise ops, views, broadcasts
  // and loads runs in the loop of the store or reduction it feeds. A layer
  // norm's tile then passes through memory three times, as in a C++ loop,
  // instead of once per op.
  //
  // The position of an element in the loop that computes it: its index per
  // dimension and its row-major linear one (i64), the elements already
  // computed there (by value id), and the positions it stands for in the
  // operands of views, broadcasts and transposes (by the op's result id),
  // so that a value reached along two paths is computed once.
  struct ElemIndex {
    std::vector<llvm::Value*> dims;
    llvm::Value* linear = nullptr;
    std::map<int, llvm::Value*> computed;
    std::map<int, std::unique_ptr<ElemIndex>> derived;
  };
  ElemIndex at_dims(const Shape& shape, std::vector<llvm::Value*> dims);
  ElemIndex at_linear(const Shape& shape, llvm::Value* linear);
  // Whether tiles live on this thread's stack and one thread walks them.
  bool walks_alone() const { return threads_ == 0 && !target_.tiles_in_shared(); }
  // Loops over the elements of `shape`: one per dimension, the innermost
  // over consecutive elements, where one thread walks the tile; else the
  // program's tile_loop.
  void each_element(const Shape& shape, const std::function<void(ElemIndex&)>& body);
  // Picks the inline tiles (where walks_alone()): results of elementwise
  // ops, arange, splat, views, broadcast, trans and loads whose every use
  // reads elements (those ops, stores and reductions) in the same block, or
  // for index tiles (no loads in them) in blocks nested in it;
  // not a costly op (a division, a transcendental) computed more often than
  // the tile has elements, not one computed in more than kInlineLoops
  // loops, and not a load with an op between it and its last reader that
  // writes memory or waits for others' writes. (Inline loads run in the
  // loop of the store they feed, so a store that writes what a load in
  // its tile reads at another element sees the elements already stored;
  // on a GPU the threads of a program order such accesses no better.)
  void plan_inline();
  static constexpr int kInlineLoops = 16;
  bool costly(const Op& o) const;
  // Op `o`'s elements (an op plan_inline may inline), at `at` in its result.
  llvm::Value* compute(const Op& o, ElemIndex& at);
  // Concat `o`'s element at `at`.
  llvm::Value* concat_element(const Op& o, ElemIndex& at);
  // Tile `id`'s element at `at`: computed there when inline, else read from
  // the buffer `hold` gave it; a scalar's value.
  llvm::Value* element(int id, ElemIndex& at);
  // The same for an i32 or i64 offset of a ptr_add on the host, as an i64:
  // inline sums, differences and products of offsets are computed in 64
  // bits (where the 32-bit ones would wrap, the address lies outside its
  // tensor either way), so that consecutive elements' addresses are
  // visibly consecutive to LLVM's vectorizer. Not in checked code, which
  // reports the address the 32-bit offset gives.
  llvm::Value* offset_element(int id, ElemIndex& at);
  // The buffers of the tiles (not inline) that computing `o`'s elements
  // reads, made before the loop that reads them (where registers are
  // written out); held in held_ until the next call.
  void hold(const Op& o);
  void hold(int id);
  void hold_operands(const Op& o);
  std::map<int, llvm::Value*> held_;
  // The result of `o` (an op plan_inline may inline): nothing now when
  // inline, else a buffer of its elements.
  void define_elements(const Op& o);
  // The position at `at` stands for in the operand of view, broadcast or
  // transpose `o`.
  ElemIndex& operand_index(const Op& o, ElemIndex& at);
  std::vector<bool> inline_;  // per value
  // Index tiles: arange, splats, and cheap arithmetic and views of them (no
  // loads), per value. While recompute_index_ is set, element() computes
  // them where it reads them, as it does inline tiles.
  std::vector<bool> index_tile_;
  bool recompute_index_ = false;
  // The ops the program's threads meet before, and the parameter each
  // pointer derives from (codegen/hazards.h).
  std::set<int> hazards_;
  std::vector<int> pointer_params_;

  // A kConstant's value.
  llvm::Value* constant(const Op& o);
  // One element of an elementwise op; `args` are element values.
  llvm::Value* elementwise(const Op& o, const std::vector<llvm::Value*>& args);
  // An elementwise op on scalars, register tiles or buffers.
  absl::Status elementwise_op(const Op& o, const Type& rt);

  // ---- Ops -------------------------------------------------------------------
  absl::Status block(int b);

  // A scalar's value, or a tile's buffer (written from registers when the
  // tile is held there; kept when this is the block that defines the tile).
  llvm::Value* val(int id);
  // Writes register tile `id`'s elements, element i (i64, row-major) at
  // address(i), then a barrier: all threads see the whole tile. A thread
  // holding an even element and the next writes both at once, so for even
  // i, address(i + 1) must follow address(i), both aligned for the pair.
  // Without `barrier`, the caller synchronizes the program. With `keep`,
  // only the slots it keeps.
  void store_regs(int id, const std::function<llvm::Value*(llvm::Value*)>& address, bool barrier = true,
                  const SlotFilter& keep = {});
  void set(const Op& o, llvm::Value* v) { vals_[o.results[0]] = v; }
  // Results of register-tile ops take their planned layout.
  void set_regs(const Op& o, std::vector<llvm::Value*> r) {
    regs_[o.results[0]] = {layout(o.results[0]), std::move(r)};
  }

  // ---- Addresses of pointer tiles ----------------------------------------------
  // Tells LLVM the facts of the specialization about the parameters.
  void assume_facts(const std::vector<llvm::Value*>& params);

  // The address of pointer tile `id`'s element at a position: computed
  // from its affine form when it has one, else the tile's element (see hold).
  std::function<llvm::Value*(ElemIndex&)> addresses(int id);
  // The scalar part of an affine pointer tile: pointer + sum of terms.
  llvm::Value* affine_base(const Affine& a, const Type& t);
  // The addresses of this thread's elements of pointer tile `id` in layout `l`.
  std::vector<llvm::Value*> register_addresses(int id, const Layout& l);

  // ---- Register tiles ---------------------------------------------------------
  // On targets whose programs have several threads, elementwise ops, splat,
  // arange, loads and stores through pointer tiles and whole-tile reductions
  // keep tiles in registers, spread over the threads by a Layout
  // (codegen/layout.h). Each tile's planned layout is blocked, with as many
  // elements per thread and step as codegen/layout_plan.h picks: one, so
  // that a warp's scalar accesses coalesce, or a run that loads and stores
  // move with one vector access (16 bytes) per run. A reduction along an
  // axis whose positions each lie within a warp stays in registers, in the
  // slice of its operand's layout (per-thread combines, then shuffles);
  // arithmetic on slices keeps that layout, and broadcasting a slice back
  // to its parent layout reads the thread's own registers. Ops that move
  // elements between threads otherwise (other broadcasts, trans, reductions
  // across warps, dot, TMA) read buffers in shared
  // memory, which val() writes from the registers: the conversion through
  // shared memory, also taken between two register layouts.
  static constexpr int64_t kMaxSlots = kMaxRegisterSlots;
  bool in_registers(const Type& t) const {
    return threads_ > 0 && t.is_tile() && (t.numel() + threads_ - 1) / threads_ <= kMaxSlots;
  }
  // Whether a tile carried out of a loop or branch that yields `yielded`
  // is kept in registers: not when a dot makes it (an accumulator), since
  // dot reads and writes buffers and registers would add a round trip
  // through shared memory each iteration.
  // An accumulator the target's matrix instructions make stays in their
  // registers whatever its size.
  bool carried_in_registers(const Type& t, const std::vector<int>& yielded) const {
    bool mma = false;
    for (int v : yielded) {
      int def = ir_.values[v].def_op;
      if (def < 0 || ir_.ops[def].op != OpCode::kDot) continue;
      if (!mma_dots_.contains(&ir_.ops[def])) return false;
      mma = true;
    }
    return mma || in_registers(t);
  }
  // The planned (blocked) layout of tile value `id`.
  const std::shared_ptr<const Layout>& planned(int id) {
    int64_t numel = ir_.type(id).numel();
    std::shared_ptr<const Layout>& l = layouts_[{numel, blocking_[id]}];
    if (l == nullptr) l = blocked_layout(numel, threads_, blocking_[id]);
    return l;
  }
  // The layout tile value `id` is computed in: the slice its broadcasts
  // want (see want_slices), else its planned one.
  const std::shared_ptr<const Layout>& layout(int id) { return wanted_[id] != nullptr ? wanted_[id] : planned(id); }
  // Elementwise results of tiles that want a layout want it too (walking
  // forwards). Tiles that are broadcast along one axis (after expand_dims)
  // want the slice of the broadcast result's layout along that axis, and so
  // do the views and elementwise operands they are computed from: an
  // arange, a splat or a load computes in any layout, and the broadcast
  // then reads the thread's own registers (walking backwards, consumers
  // first). A value keeps the first wish it gets.
  void want_slices();
  // Whether store `o` stages its value, a tensor-core product of 16-bit
  // elements, in shared memory: written with the target's matrix stores
  // into a swizzled tile, then read back and stored along rows as wide as
  // its pointers allow (16 bytes), where the product's own layout holds
  // pairs (4-byte stores, half of each 32-byte sector). Triton converts
  // such a store's layout the same way.
  bool stages_store(const Op& o) const;
  // Value `id` (a register tile) written into a swizzled shared-memory tile
  // for such a store, the program met after it; returns the tile.
  llvm::Value* stage_for_store(int id);
  // How many elements each access of load or store `o` moves when the
  // tile's registers are in layout `l`: what the pointers and mask allow,
  // over runs the layout holds in consecutive slots.
  int64_t access_run(const Op& o, const Layout& l) const {
    int64_t run = analysis_.access_run(o);
    return run == 1 ? 1 : contiguous_run(l, run);
  }
  // A tile's elements of this thread in layout `want`: its registers; where
  // they have another layout, taken from its own and other threads'
  // registers when register_moves finds every slot within a warp, else
  // loaded from its buffer (written there first).
  std::vector<llvm::Value*> regs(int id, const Layout& want);
  // A thread's registers in another layout, taken from `slots` (its
  // registers in layout `from`) as `moves` says.
  std::vector<llvm::Value*> moved(const std::vector<llvm::Value*>& slots, const Layout& from,
                                  const std::vector<SlotSources>& moves);
  std::vector<llvm::Value*> regs(int id) { return regs(id, *layout(id)); }
  // Whether any op reads value `id`.
  bool has_uses(int id) const {
    for (const Op& o : ir_.ops) {
      if (std::find(o.operands.begin(), o.operands.end(), id) != o.operands.end()) return true;
    }
    return false;
  }
  // Whether tile `id` is a scalar splat: its registers hold one value, in any layout.
  bool is_splat(int id) const {
    int def = ir_.values[id].def_op;
    return def >= 0 && ir_.ops[def].op == OpCode::kSplat;
  }
  // The layout every tile operand of `o` that is not a splat is held in
  // registers in, or nullptr when one is in memory or they differ.
  std::shared_ptr<const Layout> registers_layout(const Op& o);
  // The layout an elementwise op computes in: its operands' common register
  // layout (splats aside), so that arithmetic on reduced rows stays in their
  // slice. Operands held in different layouts meet in the first of its
  // planned layout and theirs that each reaches in registers (a row's two
  // halves, in the first's); else in its planned one, through shared memory.
  std::shared_ptr<const Layout> elementwise_layout(const Op& o);
  absl::Status op(const Op& o);

  std::vector<llvm::Value*> coords(const Op& o, size_t first) {
    std::vector<llvm::Value*> c;
    for (size_t i = first; i < o.operands.size(); ++i) c.push_back(val(o.operands[i]));
    return c;
  }

  // expand_dims and reshape: their operand's buffer or registers.
  absl::Status view(const Op& o);
  // Broadcast and transpose: out[idx] = in[map(idx)].
  absl::Status permute(const Op& o, const Type& rt);
  // Narrow: in registers, the operand's slots that hold the part
  // (codegen/layout.h, narrow_layout); else as permute.
  absl::Status narrow(const Op& o, const Type& rt);
  // Concat: in registers, both operands' slots (codegen/layout.h,
  // ConcatLayout); else as permute.
  absl::Status concat(const Op& o, const Type& rt);
  // Gather: each element read from the source's buffer at the position its
  // index gives; in registers, the index's registers in the result's layout.
  absl::Status gather(const Op& o, const Type& rt);
  // Integer `x` of dtype `d` as an i64 position, and whether it lies in
  // [0, size).
  std::pair<llvm::Value*, llvm::Value*> index_inside(llvm::Value* x, DType d, int64_t size);
  // Gather `o`'s element at `at`, whose index is `index`.
  llvm::Value* gathered(const Op& o, ElemIndex& at, llvm::Value* index);
  // This thread's slots of a tile of `shape` in layout `want`: each the
  // element element_at gives at the slot's position (a slot past the tile
  // asks for position 0).
  std::vector<llvm::Value*> each_slot(const Layout& want, const Shape& shape,
                                      const std::function<llvm::Value*(ElemIndex&, int64_t)>& element_at);

  // Triggered-view ops, with the view header's fields loaded in the entry block.
  ViewLowering views() { return ViewLowering(b_, target_, alloca_point_, view_header_); }

  using Combine = std::function<llvm::Value*(llvm::Value*, llvm::Value*)>;
  llvm::Value* reduce_identity(OpCode combiner, DType d, llvm::Type* t);
  // Element `elem` (of dtype `d`) of `slot` in layout `l`, widened to the
  // reduction's accumulator, or `identity` where the slot holds nothing.
  llvm::Value* reduce_part(const Layout& l, int64_t slot, llvm::Value* elem, DType d, llvm::Value* identity);
  // `identity` combined with `parts` (at least one), which combine pairwise
  // in a balanced tree. Starting from the identity, as the buffer path's
  // loop does, keeps the results the same: max over NaNs alone is -inf, a
  // sum of -0 is +0.
  llvm::Value* combine_parts(llvm::Value* identity, std::vector<llvm::Value*> parts, const Combine& combine);
  // Writes this thread's `values` (one type) to a scratch area in shared
  // memory and meets the program; `reads` may then load(thread, k), value k
  // as that thread wrote it. Threads that differ only in the lane bits
  // `same` hold the same values: the first of them writes for all, so the
  // area holds one copy. The area is free again after.
  using ReadShared = std::function<llvm::Value*(llvm::Value* thread, int64_t k)>;
  void through_shared(const std::vector<llvm::Value*>& values, const std::function<void(const ReadShared&)>& reads,
                      int same = 0);
  // The threads that differ only in the bits `holders` hold the same lines,
  // and after a butterfly over their lanes each holds its warp's parts of
  // them. Writes this thread's `values` to a scratch area in shared memory
  // (one copy per warp's holders), meets the program, and calls
  // read(m, k, theirs) with value k of thread (this thread & ~warps) | m for
  // each sub-mask m of the warp bits of `holders`, ascending (submasks), up
  // to the last thread; the area is free again after.
  void exchange_warps(const std::vector<llvm::Value*>& values, int holders,
                      const std::function<void(int, int64_t, llvm::Value*)>& read);
  // Combines each slot's part across the warps that hold its position (the
  // thread bits `holders`, each lane of a warp's holding the same parts)
  // through shared memory; every holder gets the same result.
  void combine_warps(std::vector<llvm::Value*>& acc, int holders, const Combine& combine);

  // f16 and bf16 reductions accumulate in f32 and round once.
  absl::Status reduce(const Op& o, const Type& rt);
  // reduce_fn (lower_reduce_fn.cc). A part of such a reduction: one
  // register value per operand, and whether it holds any element (null:
  // always).
  struct FnPart {
    std::vector<llvm::Value*> values;
    llvm::Value* valid = nullptr;
  };
  // The combine function of reduce_fn `o` lowered on `a` and `b`.
  FnPart combine_fn(const Op& o, const FnPart& a, const FnPart& b);
  // `acc` combined with its copies in the lanes that differ in `lanes` bits.
  void combine_fn_lanes(const Op& o, FnPart& acc, int lanes);
  // Each slot's part combined across the warps that hold its position (the
  // thread bits `holders`, each lane of a warp's holding the same parts)
  // through shared memory; every holder gets the same result.
  void combine_fn_warps(const Op& o, std::vector<FnPart>& acc, int holders);
  // `a` where `cond`, else `b`.
  FnPart select_part(llvm::Value* cond, const FnPart& a, const FnPart& b);
  // Writes `parts` (one per slot, of the same types) to shared memory and
  // meets the program; then read(m, slot, part) gets slot `slot`'s part of
  // thread (this thread & ~warps) | m, for each sub-mask m of the warp bits
  // of `holders` ascending, as exchange_warps does.
  void exchange_fn_parts(const std::vector<FnPart>& parts, int holders,
                         const std::function<void(int, size_t, const FnPart&)>& read);
  // The line of `o`'s operands along `axis` at `others` (the indices
  // along the other axes), combined by its function from the line's first
  // element in order (from its last with `reverse`): visit(at, values), where
  // given, sees each element's position and the combination up to it; the
  // result is the whole line's. With a span, only its elements [lo, hi) in
  // the scan's order (at least one), the first combined after `prefix`
  // where one is given.
  using LineVisit = std::function<void(ElemIndex&, const std::vector<llvm::Value*>&)>;
  struct LineSpan {  // value-initialized ({}): the whole line, no prefix
    llvm::Value* lo;
    llvm::Value* hi;
    const FnPart* prefix;
  };
  std::vector<llvm::Value*> fn_line(const Op& o, int axis, const std::vector<llvm::Value*>& others, bool reverse,
                                    const LineVisit& visit, const LineSpan& span = {});
  absl::Status reduce_fn(const Op& o);
  // For each of the lane bits of `holder_bits`, lowest first:
  // each(bit, partner_first), partner_first saying whether the lane that
  // differs from this thread's in that bit comes first in a scan's order
  // (the lower one, or with `reverse` the upper).
  void scan_lanes(int holder_bits, bool reverse, const std::function<void(int, llvm::Value*)>& each);
  // scan_fn (lower_scan_fn.cc): in registers where the operands' layout
  // has a ScanPlan, as scan_registers does, else each line over buffers.
  void scan_fn_registers(const Op& o, std::shared_ptr<const Layout> l, const ScanPlan& plan);
  // Over buffers, each line of the tile `outer` indexes in segments over
  // the program's threads (at most `parts` a line), each result element
  // given to `put`.
  void scan_fn_segments(const Op& o, const Shape& outer, int64_t parts, const LineVisit& put);
  // How many segments each line of `n` elements (one per position of
  // `outer`) splits into so that the program's threads share the lines: a
  // power of two, and 1 where one thread walks the tile or the lines are
  // at least half as many as the threads.
  int64_t line_parts(const Shape& outer, int64_t n) const {
    int64_t parts = 1;
    if (walks_alone() || threads_ <= 0) return parts;
    while (parts * 2 * numel(outer) <= threads_ && parts * 2 <= n) parts *= 2;
    return parts;
  }
  // The lines of n elements (one per position of `outer`) cut into at most
  // `parts` non-empty segments, `count` a line: thread t takes segment
  // `part` = t % count of line `line` = t / count (`active` where the
  // thread has one), elements [lo, hi) of it.
  struct LineSegments {
    int64_t count = 0;
    llvm::Value* line = nullptr;
    llvm::Value* part = nullptr;
    llvm::Value* active = nullptr;
    llvm::Value* lo = nullptr;
    llvm::Value* hi = nullptr;
  };
  LineSegments line_segments(const Shape& outer, int64_t n, int64_t parts);
  // reduce_fn's or scan_fn's lines in segments, with each line's other
  // indices `dims`. fn_segment_totals writes each segment's combination to
  // `totals` (one area per operand, in memory's types, by thread) and meets
  // the program; fn_segments_combined combines `count` of them from thread
  // `first` on, in order, from an empty part; fn_segments_done meets the
  // program again and frees the areas.
  struct FnSegments {
    LineSegments at;
    std::vector<llvm::Value*> totals;
    std::vector<llvm::Type*> mem_types;
    std::vector<llvm::Value*> dims;
    LineSpan span() const { return {at.lo, at.hi, nullptr}; }
  };
  FnSegments fn_segment_totals(const Op& o, const Shape& outer, int64_t parts, bool reverse);
  FnPart fn_segments_combined(const Op& o, const FnSegments& seg, llvm::Value* first, llvm::Value* count);
  void fn_segments_done(const FnSegments& seg);
  absl::Status scan_fn(const Op& o);
  // Histogram: counts of the operand's elements per bin, in the result's
  // buffer (shared memory on GPUs).
  absl::Status histogram(const Op& o, const Type& rt);

  // ---- Debugging (lower_debug.cc) ----------------------------------------------------
  // device_print and device_assert: records in the kernel's debug buffer
  // (base/debug_abi.h), which the runtime reads once the work is done.
  absl::Status debug(const Op& o);
  // Word `word` of the debug buffer's header, as a flat i64 pointer.
  llvm::Value* debug_word(int64_t word);
  // One value as a record's word: integers extended, floats as a double's bits.
  llvm::Value* debug_bits(llvm::Value* v, const Type& t);
  // Whether a program that fails an assert may stop there: no asynchronous
  // copy of its can be in flight.
  bool stops_on_assert() const;
  llvm::GlobalVariable* debug_buffer_ = nullptr;
  // The position of element k along `axis` of a tile of `shape`, at
  // `others` (the indices along the other axes).
  ElemIndex at_axis(const Shape& shape, int axis, std::vector<llvm::Value*> others, llvm::Value* k);
  // The lines of a tile along an axis of n elements (one per position of
  // `outer`, the other axes), each with an accumulator (a stack slot) set
  // to `identity`: body(slot, at, k) for element k of the line at `at`, in
  // order, then done(slot, at). One thread walking the tile takes the axis
  // outermost where it is not the last; otherwise the lines are spread
  // over the program's threads (each_element), each walked in turn.
  void each_line(const Shape& outer, int64_t n, bool axis_is_last, llvm::Type* acc_t, llvm::Value* identity,
                 const std::function<void(llvm::Value*, ElemIndex&, llvm::Value*)>& body,
                 const std::function<void(llvm::Value*, ElemIndex&)>& done = {});
  // The sub-masks of `bits`, ascending (holders above the lanes, lowest rank first).
  static std::vector<int> submasks(int bits);
  // The layout a reduction `o` to a tile reads its first operand in, to
  // combine along the axis in the slice of it; nullptr where it takes the
  // buffer path: the operand's own layout where it is in registers or
  // wants that one, unless a slice (whose threads may share elements),
  // then its planned one.
  std::shared_ptr<const Layout> reduce_layout(const Op& o);
  // Whether `chunks` values per warp's holders (the threads that differ
  // in the lane bits of `holders`) in `acc_t`, exchanged across warps
  // through shared memory, take no more of it than the tile operands of `o`
  // would.
  bool across_warps_fits(const Op& o, llvm::Type* acc_t, int64_t chunks, int holders);

  // Inclusive scans (lower_scan.cc): f16 and bf16 accumulate in f32 and
  // round each result.
  absl::Status scan(const Op& o, const Type& rt);
  // Sorts the lines along an axis (lower_sort.cc).
  absl::Status sort(const Op& o, const Type& rt);
  // In registers of `l`, the operand's layout, following `plan`.
  void sort_registers(const Op& o, std::shared_ptr<const Layout> l, const SortPlan& plan);
  // Each of this thread's `values` (one type) as the thread whose index
  // differs in `mask` holds it: shuffles within a warp, else through
  // shared memory (a barrier).
  std::vector<llvm::Value*> from_threads(const std::vector<llvm::Value*>& values, int mask);
  // In registers of `l`, the operand's layout, following `plan`: each
  // thread scans its chunks, a butterfly over the lanes and an exchange
  // over the warps give each chunk what precedes it, then the rounds follow
  // one another.
  void scan_registers(const Op& o, std::shared_ptr<const Layout> l, const ScanPlan& plan, llvm::Value* identity,
                      const Combine& combine);
  // Over buffers on a GPU, the lines (positions in `outer`) in `parts`
  // segments each, a thread per segment: each combines its segment, then
  // scans it again from the totals of the segments before it into `out`.
  void scan_segments(const Op& o, const Shape& outer, int64_t parts, llvm::Value* out, llvm::Value* identity,
                     const Combine& combine);

  absl::Status load(const Op& o, const Type& rt);
  // One element of load `o` at `at` (a scalar load's, `at` empty): a
  // predicated load (masked-off and, in checked code, out-of-bounds
  // elements read `other` or zero).
  llvm::Value* load_element(const Op& o, ElemIndex& at);
  // Scalar load `o` from `p`, where `mask` (or none) holds, else `other`.
  llvm::Value* load_scalar(const Op& o, llvm::Value* p, llvm::Value* mask, llvm::Value* other);
  // Whether op `o` may write memory of parameter `param` (its value id): a
  // store or atomic through a pointer derived from it, or from one that may
  // be any parameter's, or any other write but a TMA store (which writes a
  // map's memory; parameters do not overlap, codegen/hazards.h).
  bool may_write(const Op& o, int param) const;
  // Whether scalar load `o` reads memory that no op of the kernel may
  // write, so that it reads the same whenever it runs.
  bool reads_unwritten(const Op& o) const;

  // A thread loads its own elements; lanes past the tile's end or masked
  // off read `other` (or nothing) from a private slot instead of memory.
  // Runs of access_run elements are one vector load each, behind their
  // mask (constant over the run); a skipped run takes `other`'s values.
  absl::Status load_registers(const Op& o, const Type& rt);

  // A load of `type` at `p` where `ok` holds (null: always), else `other`:
  // the target's predicated form, or a branch around a plain load.
  llvm::Value* predicated_load(llvm::Type* type, llvm::Value* p, llvm::Value* ok, llvm::Value* other,
                               llvm::Align align);
  // A store of `v` at `p` where `ok` holds (null: always).
  void predicated_store(llvm::Value* v, llvm::Value* p, llvm::Value* ok, llvm::Align align);
  // Runs `body` only where `mask` (may be null) holds.
  void guarded(llvm::Value* mask, const std::function<void()>& body);
  // The value `body` computes where `mask` (may be null) holds, else
  // `otherwise` (null: zero).
  llvm::Value* guarded_value(llvm::Value* mask, const std::function<llvm::Value*()>& body,
                             llvm::Value* otherwise = nullptr);

  // In checked code (TargetInfo::checks_accesses): `mask` (null: every
  // lane) and-ed with whether the access of `o` to `bytes` at `p` lies
  // within the argument its pointer came from; masked-off lanes are not
  // asked about. Elsewhere `mask` itself.
  llvm::Value* checked(const Op& o, llvm::Value* p, int64_t bytes, llvm::Value* mask);
  // The parameter pointer value `v` is derived from, as an index into
  // ir_.params (pointer_parameters in codegen/hazards.h), or -1.
  int root_param(int v) const;

  absl::Status store(const Op& o);

  absl::Status atomic(const Op& o, const Type& rt);
  // Before a release: the program's TMA stores written and its threads met.
  void release_program();
  // A scalar compare-and-swap, done by one thread; all see the old value.
  absl::Status atomic_cas(const Op& o, const Type& rt);

  // The box lands in a fresh shared-memory buffer; the op's mbarrier (see
  // reserve_tma_barriers) says when it is there.
  absl::Status tma_load(const Op& o, const Type& rt);
  absl::Status tma_store(const Op& o);

  // acc + a @ b, accumulating in f32 (f16, bf16, f32, fp8 inputs), f64 or i32:
  // the accumulator is converted here, the product is the target's
  // (TargetInfo::dot), or its matrix instructions' (TargetInfo::mma) for
  // the dots plan_mma chose.
  absl::Status dot(const Op& o, const Type& rt);

  // ---- Matrix instructions (lower_dot.cc) ---------------------------------------
  // A dot whose operands TMA left in shared memory in a form the target's
  // matrix instructions read: a [m, k] tile, and b either a [k, n] tile or
  // the transpose of an [n, k] one (B given as N x K); or b so and a a value
  // in registers, where the target multiplies one from there (a is then
  // wanted in the layout that form reads). An operand the program computed
  // otherwise (the transpose of a value in registers: dS of dS K when the
  // registers hold dS^T) is staged: written to a swizzled tile of its own
  // before the product. Its accumulator, and the loop values that carry
  // it, take the target's register layout.
  struct MmaDot {
    MmaShape shape;
    SharedMatrix a, b;   // data filled in when the dot is lowered
    int a_tile, b_tile;  // the tma_load results holding them (-1 for an operand in registers or staged)
    std::shared_ptr<const Layout> layout;
    std::shared_ptr<const Layout> a_layout;  // a's, when in registers
    int a_staged = -1, b_staged = -1;        // the values staged for them
    // Staged once, before the outermost loop around the dot that does not
    // define the value, instead of at the dot (hoisted_stages_).
    bool a_hoisted = false, b_hoisted = false;
    // Whether the dot itself writes a staged operand (then synchronizes
    // the program around its product).
    bool stages() const { return (a_staged >= 0 && !a_hoisted) || (b_staged >= 0 && !b_hoisted); }
  };
  // Chooses the dots (before any op is lowered, since layouts follow).
  absl::Status plan_mma();
  // Marks the staged operands of mma_dots_ that a loop around their dot
  // does not change (a decode step's queries) to be staged before it.
  void plan_hoisted_stages();
  // Before loop `o`: stages the operands hoisted out of it; after it,
  // frees their tiles.
  void stage_hoisted(const Op& o);
  void free_hoisted(const Op& o);
  // The shared tile tma_load result `tile` is held in, as the copy engine
  // wrote it (swizzled where the map is).
  llvm::Value* raw_tile(int tile) { return raw_tiles_.contains(tile) ? raw_tiles_.at(tile) : val(tile); }

  // Writes value `id`, a dot's staged operand, to a fresh shared tile laid
  // out as `m` says; returns the tile.
  llvm::Value* stage(int id, const SharedMatrix& m);
  // Writes tile `id` (in registers or a buffer) with element i (row-major)
  // at address(i), by the target's matrix stores where it has them; the
  // caller synchronizes the program.
  void write_tile(int id, const std::function<llvm::Value*(llvm::Value*)>& address);

  // The one axis broadcast `o` stretches (from 1), or -1 where it stretches
  // several.
  int stretched_axis(const Op& o) const {
    const Shape &from = ir_.type(o.operands[0]).shape(), &to = ir_.type(o.results[0]).shape();
    int axis = -1;
    for (size_t d = 0; d < to.size(); ++d) {
      if (from[d] == to[d]) continue;
      if (axis >= 0) return -1;
      axis = static_cast<int>(d);
    }
    return axis;
  }
  // The value `v` is the transpose of (by a trans op), or -1.
  int transposed_from(int v) const {
    const int def = ir_.values[v].def_op;
    return def >= 0 && ir_.ops[def].op == OpCode::kTrans ? ir_.ops[def].operands[0] : -1;
  }
  // Whether mma dot `o` may leave its product in flight (a software
  // pipeline's, whose next iteration or exit waits for it).
  int in_flight(const Op& o) const { return in_flight_dots_.contains(&o) ? 1 : 0; }
  // Lets the mma dots of pipelined `loop` whose product only the next
  // iteration reads leave it running (but not those on tiles staged for
  // them, freed once it is done).
  void leave_in_flight(const Op& loop);

  // ---- Software pipelines (lower_pipeline.cc) --------------------------------------
  // A for loop (LoopOptions::stages) whose body loads TMA boxes at
  // coordinates made from its induction variable and values from outside,
  // and takes no atomic or gate (it may store), on a target with
  // asynchronous TMA: iteration i
  // waits for its stage's mbarrier, runs the body on that stage's buffers,
  // then issues the loads of iteration i + stages - 1 into the stage the
  // iteration before it used, whose readers are done (Pipeline::ahead).
  // A ring whose loads multicast (tma_multicast) is shared with the other
  // programs of the cluster, which must be done with a stage too.
  // A warp-specialized consumer's loads that share mbarriers: waited for
  // before the body's first op that reads them and released once the last
  // has, so that the producer loads a stage's next key block while the
  // consumer still multiplies by its values (attention's K and V).
  struct LoadGroup {
    std::vector<int> loads;     // indices into Pipeline::loads
    const Op* first = nullptr;  // the body's op it is waited for before (nullptr: the iteration's top)
    // The body's op it is released after; nullptr: at the end of the next
    // iteration, or with `deferred` after the next iteration's first product.
    const Op* last = nullptr;
    bool deferred = false;  // read by a product left in flight into the next iteration
    int64_t bytes = 0;      // what its loads bring in a stage
  };
  struct Pipeline {
    int stages = 0;
    std::vector<const Op*> loads;      // the body's tma_loads
    // One group of all loads, waited for at the top of each iteration and
    // released as a stage; or, in a warp-specialized loop whose loads have
    // different readers, one group per reader (plan_groups).
    std::vector<LoadGroup> groups;
    const Op* settle = nullptr;        // the body's first product (groups that are `deferred`)
    llvm::Value* index = nullptr;      // i64: while the body is lowered, its iteration's index
    llvm::Value* parity = nullptr;     // i32: the phase its stage's full barriers complete
    llvm::Value* barriers = nullptr;   // `stages` mbarriers of 8 bytes per group
    llvm::Value* used = nullptr;       // i64 slot: stages used by earlier runs of the loop
    std::vector<llvm::Value*> rings;   // per load: its stage buffers, one after another
    std::vector<int64_t> strides;      // per load: bytes from one stage buffer to the next
    llvm::Value* first = nullptr;      // i64: the stage count at this run's first iteration
    llvm::Value* stage = nullptr;      // i64: while the body is lowered, its iteration's stage
    // The loop around it, when the ring runs across that loop's iterations:
    // the last iterations load the first stages of the next run, which
    // therefore starts with its loads in flight (the persistent GEMM's next
    // tile loads during this one's epilogue).
    const Op* outer = nullptr;
    // Where the outer loop is warp-specialized: `stages` mbarriers per group
    // that the consumers arrive on when they are done with a stage, which the
    // producer waits for before it loads the stage again; and one mbarrier
    // per consumer, its turn (see take_turn), with an i64 slot counting
    // this thread's turns.
    llvm::Value* empty = nullptr;
    llvm::Value* turns = nullptr;
    llvm::Value* turns_taken = nullptr;
    // Whether a load multicasts (tma_multicast on a target with clusters):
    // the cluster's programs write into each other's stages, so a stage is
    // loaded again only once every program of the cluster is done with it.
    // Without a producer, `released` holds `stages` mbarriers that each
    // program arrives on, in every program, once done with a stage (at the
    // next iteration's prefetch), and waits on before it loads the stage
    // again.
    bool multicast = false;
    llvm::Value* released = nullptr;
    // Iterations whose loads are in flight ahead of the current one:
    // stages - 1, or stages - 2 for a multicast ring without a producer
    // (4 stages or more), which releases the stage of iteration i - 1 in
    // iteration i and loads it again in iteration i + 1.
    int ahead = 0;
  };
  void plan_pipelines();
  // The load groups of pipelined `loop`, whose ring a warp-specialized
  // loop's producer fills: loads read by the same products share a group.
  void plan_groups(const Op& loop, Pipeline& p);
  // The mbarrier of group `g` (of p.groups) at `stage` (i64) in `base` (the
  // full or the empty ones).
  llvm::Value* group_barrier(const Pipeline& p, llvm::Value* base, int g, llvm::Value* stage);
  // Waits for group `g`'s loads of the current iteration, and releases
  // group `g` of iteration `i` (i64).
  void wait_group(Pipeline& p, int g);
  void release_group(Pipeline& p, int g, llvm::Value* i);
  // Before (and after) the body's op `o` of a pipelined loop: the waits
  // (and releases) of its groups that it starts (and ends).
  void stage_point(const Op& o, bool after);
  // Whether `id`, a coordinate of a load in `loop`'s body, can be computed
  // for any iteration: from the induction variable, outside values, constants,
  // program ids, scalar arithmetic and scalar loads of memory the kernel
  // does not write (reads_unwritten; a grouped GEMM's group per tile).
  // With `outer`, the loop around `loop`, values of outer's body count too
  // where they can be computed for any iteration of outer.
  bool per_iteration(const Op& loop, int id, const Op* outer = nullptr) const;
  // Its value in the iteration whose induction variable is `iv` (the loop's
  // type), and of outer's iteration `outer_iv` with `outer`.
  llvm::Value* value_in_iteration(const Op& loop, int id, llvm::Value* iv, const Op* outer = nullptr,
                                  llvm::Value* outer_iv = nullptr);
  // Issues the loads of the iteration with induction variable `iv` as the
  // ring's use `use` (i64; its stage is use mod stages), in the outer
  // loop's iteration `outer_iv` if given: all of them, or group `group`'s.
  void issue_stage(const Op& loop, Pipeline& p, llvm::Value* iv, llvm::Value* use, llvm::Value* outer_iv = nullptr,
                   int group = -1);
  // A multicast pipeline without a producer (Pipeline::released), before
  // use `use` (i64) of the ring, in one thread: waits until every program
  // of the cluster released the stage's use before.
  void reclaim_stage(Pipeline& p, llvm::Value* use);
  // The iterations (i64) of a loop from lo to hi by step (all i64).
  llvm::Value* trip_count(llvm::Value* lo64, llvm::Value* hi64, llvm::Value* step64);
  // A run of a loop: its first induction variable and step (the loop's
  // type) and its trip count (i64).
  struct Run {
    llvm::Value *lo, *step, *trips;
  };
  // The run of `loop` in iteration `outer_iv` of `outer`, the loop around it.
  Run run_in(const Op& loop, const Op& outer, llvm::Value* outer_iv);
  // Issues the loads of iteration `j` (i64) of `run` as the ring's use
  // `use` (group `group`'s, or all).
  void issue_iteration(const Op& loop, Pipeline& p, const Run& run, llvm::Value* j, llvm::Value* use,
                       llvm::Value* outer_iv, int group = -1);
  // Issues the loads of `run`'s first `ahead` iterations, those below
  // `count` (i64), into the stages after `first` (the run's stage count).
  void issue_first(const Op& loop, Pipeline& p, const Run& run, llvm::Value* count, llvm::Value* first,
                   llvm::Value* outer_iv);
  // The loop `loop` (pipelining `loads`) sits in directly, when its ring can
  // run across that loop's iterations; else nullptr.
  const Op* runs_across(const Op& loop, const std::vector<const Op*>& loads) const;
  // The induction variable of `outer`'s next iteration (its type), and
  // whether there is one (i1); inside its body.
  std::pair<llvm::Value*, llvm::Value*> next_outer(const Op& outer);
  // `v`, of the type of `loop`'s bounds, in 64 bits.
  llvm::Value* widen(const Op& loop, llvm::Value* v);
  // A consumer is done with iteration `i` (i64) of the current run's stage
  // (Pipeline::empty): with the groups released at the end of the next
  // iteration, or `deferred` ones too (the last iteration's).
  void release_stage(Pipeline& p, llvm::Value* i, bool deferred);
  // Before p's first loads into its rings: every thread is done with what
  // the rings' memory held before, in every program that writes into them.
  void rings_free(const Pipeline& p);
  // Rings of stage buffers for p's loads, each `alloc(bytes, align)`'s.
  void allocate_rings(Pipeline& p, const std::function<llvm::Value*(int64_t, int64_t)>& alloc);
  // The loop around loops whose rings run across its iterations (Pipeline::outer):
  // the rings for all of it, and the first loads of its first iteration's run.
  void begin_outer_pipeline(const Op& outer, llvm::Value* lo, llvm::Value* go);
  void end_outer_pipeline(const Op& outer);
  // Before the loop: the rings, and the loads of the first `ahead` iterations.
  void begin_pipeline(const Op& loop, llvm::Value* lo, llvm::Value* step, llvm::Value* trips);
  // At the top of an iteration (index `i`, i64): wait for its stage.
  void enter_stage(const Op& loop, llvm::Value* i);
  // At its end: the loads of iteration i + ahead, if there is one.
  void prefetch(const Op& loop, llvm::Value* iv, llvm::Value* i, llvm::Value* step, llvm::Value* trips);
  // After the loop: count its stages, free the rings.
  void end_pipeline(const Op& loop, llvm::Value* trips);

  // ---- Copy rings (lower_copies.cc) ------------------------------------------------
  // Loads through pointers that only a loop's mma dots read (ring_loads,
  // codegen/prefetch.h), on a target with asynchronous copies: the loop
  // keeps a ring of `stages` shared-memory tiles per load, each laid out
  // as the dot's descriptors read it (swizzled as widely as its rows
  // allow). Before the loop, the threads copy the tiles of the first
  // stages - 1 iterations, a group of copies each; iteration i waits until
  // its group is in (stages - 2 later ones may fly), fences and meets, runs
  // the body on its stage, and at its end, once every thread's product of
  // iteration i - 1 is done, copies iteration i + stages - 1's tiles into
  // that stage, their addresses and masks computed again for that
  // iteration's induction variable.
  struct RegTile {
    std::shared_ptr<const Layout> layout;
    std::vector<llvm::Value*> slots;  // empty: the tile is a buffer
  };
  // Values as lowered at some point (their vals_ and regs_), to be put
  // back (set_lowered) after lowering their ops again elsewhere.
  struct Lowered {
    int id;
    llvm::Value* val;
    RegTile regs;
  };
  std::vector<Lowered> lowered(const std::vector<int>& ids) const;
  void set_lowered(const std::vector<Lowered>& values);
  struct CopyRing {
    int stages = 0;
    std::vector<const RingLoad*> loads;
    // The results of the loads' invariant ops (RingLoad::invariant), lowered
    // once before the loop: what every iteration's copies read of them.
    std::vector<Lowered> invariant;
    std::vector<llvm::Value*> rings;  // per load: its stages, one after another
    std::vector<int64_t> strides;     // per load: bytes from one stage to the next
    llvm::Value* stage = nullptr;     // i64: while the body is lowered, its iteration's stage
  };
  // The loads that may take rings (before plan_mma, which reads their
  // tiles from shared memory); after it, those some dot reads otherwise
  // (not on the matrix instructions) dropped, true if any was (plan_mma
  // then runs again); and the rings of the rest.
  void plan_copy_loads();
  bool drop_copy_loads_read_elsewhere();
  void plan_copy_rings();

  // The widest swizzle whose rows a [rows, cols] tile's rows are a
  // multiple of (none under 32 bytes).
  static Swizzle widest_swizzle(const Type& t);
  // Before the loop: the rings and the copies of its first iterations; at
  // the top of iteration `i` (i64; induction variable `iv`): the wait for
  // its stage; at the end: the copies of iteration i + stages - 1; after
  // the loop: the rings free.
  absl::Status begin_copies(const Op& loop, llvm::Value* lo, llvm::Value* step, llvm::Value* trips);
  absl::Status enter_copies(const Op& loop, llvm::Value* iv, llvm::Value* i);
  absl::Status next_copies(const Op& loop, llvm::Value* iv, llvm::Value* i, llvm::Value* step, llvm::Value* trips);
  void end_copies(const Op& loop);
  // The tile of r's load k at `stage` (i64), and the current iteration's
  // tile of the ring of load `load`.
  llvm::Value* stage_tile(const CopyRing& r, size_t k, llvm::Value* stage);
  llvm::Value* ring_tile(const Op& load);
  // Copies the tiles of the iteration whose induction variable is `iv`
  // (the loop's type) into stage `stage` (i64) of each ring.
  absl::Status issue_copies(const Op& loop, CopyRing& r, llvm::Value* iv, llvm::Value* stage);
  // One load's copies into `tile`: the ops of its slice lowered again with
  // `iv` for the loop's induction variable `iv_arg` (reading r's invariant
  // values), then each thread's runs of the tile copied to their swizzled
  // places.
  absl::Status copy_ring_tile(const CopyRing& r, const RingLoad& l, int iv_arg, llvm::Value* iv, llvm::Value* tile);
  std::map<int, const RingLoad*> copy_loads_;  // by load result: loads that may take rings
  std::vector<RingLoad> ring_loads_;
  std::map<const Op*, CopyRing> copy_rings_;  // by loop
  std::map<const Op*, const Op*> copied_;     // a load with a ring -> its loop

  // ---- Warp specialization (lower_roles.cc) ------------------------------------------
  // A loop with LoopOptions::warp_specialize, on a target that can split
  // its programs (TargetInfo::split_program): its iterations go to
  // consumers_ consumer groups in turn (iteration i to consumer i mod
  // consumers_), each running the body as a program of its own threads,
  // with shared memory of its own; the producer group walks every
  // iteration and issues the loads of the pipeline in the body (whose ring
  // runs across the loop, Pipeline::outer) in the order the consumers read
  // them, each stage once the consumer before has arrived on its empty
  // barrier. Shared memory: the ring and its barriers first, for all, then
  // each consumer's region (everything else) `consumer_span_` apart.
  // Two consumers of one warpgroup each (ping-pong), or with
  // LoopOptions::cooperative one of two that takes every iteration.
  int consumers_ = 2;
  // Finds the loop and splits the program (before layouts are planned).
  absl::Status plan_roles();
  // What the loop must be (after the pipelines are planned).
  absl::Status check_roles() const;
  // The ring and both kinds of barriers of the specialized loop's pipeline,
  // at the start of shared memory (from reserve_tma_barriers).
  void reserve_producer_ring();
  // The loop itself: the producer's loads, and each consumer's iterations.
  absl::Status specialized_for(const Op& o);
  void produce(const Op& o, Pipeline& p);
  // The ring positions (i64) that iteration `iv` (i64) of the specialized
  // loop `outer` takes: the trip count of the run of `loop` (the pipelined
  // loop in it) there, 0 past the loop's end.
  llvm::Value* ring_uses(const Op& outer, const Op& loop, llvm::Value* iv);
  // Shared memory of consumer `c`'s region.
  llvm::Value* consumer_smem(llvm::Value* c);
  // The consumers run their loops on the ring in turn, in the order of
  // the ring's stages: consumer c waits for its turn before its loop and
  // hands the next turn to consumer c + 1 (mod consumers_) once its loop
  // has issued its last products. A consumer that waited for a stage far
  // ahead of the ring would see an earlier phase of the same parity
  // complete; in turn, it waits at most a round ahead. (This is CUTLASS's
  // ping-pong order: one consumer's products run while the other's
  // epilogue does.)
  void take_turn(Pipeline& p);
  void pass_turn(Pipeline& p);
  llvm::Value* group_ = nullptr;  // this thread's group (i64: a consumer's index, or the producer's consumers_)
  // While set, values of the outer loop's body that value_in_iteration
  // takes from here: the producer computes a tile's coordinates once,
  // before its loop over the tile's stages (LLVM does not hoist their
  // divisions out of a loop that may not run).
  const std::map<int, llvm::Value*>* outer_values_ = nullptr;
  const Op* specialized_ = nullptr;
  llvm::Value* cta_smem_ = nullptr;           // the start of shared memory (smem_base_ is the consumer's)
  llvm::Instruction* consumer_span_ = nullptr;  // bytes between consumers' regions, known at the end
  int64_t consumer_region_ = 0;                 // where the first consumer's region starts

  // ---- Swizzled tiles (lower_tma.cc) ----------------------------------------------
  // Whether tma_load result `id` is a swizzled tile in shared memory.
  bool swizzled(const Type& map_type) const {
    return map_type.swizzle() != Swizzle::kNone && target_.swizzles_shared_tiles();
  }
  // Whether tma_store `o` writes its tile into a staging buffer (swizzled
  // as its map says) and stores from there: a swizzled map's, and on
  // targets that swizzle shared tiles an unswizzled one's too, unless the
  // tile is a TMA load's, which it stores from where the load put it. (A
  // staging buffer may be held across the kernel, the store left running.)
  bool staged_store(const Op& o) const {
    if (swizzled(ir_.type(o.operands[0]))) return true;
    const int def = ir_.values[o.operands[1]].def_op;
    return target_.swizzles_shared_tiles() && def >= 0 && ir_.ops[def].op != OpCode::kTmaLoad;
  }
  // The address of element `i` (i64) of a tile stored swizzled at `buf`.
  llvm::Value* swizzled_elem(llvm::Value* buf, const Type& tile, llvm::Value* i, Swizzle swizzle);
  // Stages held tma_store `o`'s tile a panel at a time through the two
  // panel buffers at `buffers`, issuing each panel's store.
  void tma_store_panels(const Op& o, llvm::Value* buffers, int64_t panels);

  // Carried scalars are phis, and so are the slots of carried tiles that fit
  // in registers (in the result's layout). Larger carried tiles live in a
  // buffer per carried value, filled from the init before the loop and from
  // the yield at the end of each iteration.
  // A specialized loop's consumer runs it from `lo_from` by `step_by`
  // instead (both i64).
  absl::Status for_op(const Op& o, llvm::Value* lo_from = nullptr, llvm::Value* step_by = nullptr);

  // A while loop carries as a for loop does: its test reads the carried
  // values at the head, and its body's yield feeds them back.
  absl::Status while_op(const Op& o);

  // What a loop carries: per carried value a buffer (a tile too large for
  // registers, filled from its init), or the slots of a scalar or register
  // tile (in the result's layout), which are phis in the loop.
  struct Carried {
    std::vector<llvm::Value*> bufs;
    std::vector<std::shared_ptr<const Layout>> in_regs;
    std::vector<std::vector<llvm::Value*>> init;  // the slots before the loop
  };
  // The values loop `o` carries, from its inits (operands from `first` on).
  Carried carry_init(const Op& o, size_t first, const Op& yield);
  // At the loop's head: a phi per slot of each carried value (none for a
  // buffer), taking the init from `pre`.
  std::vector<std::vector<llvm::PHINode*>> carried_phis(const Carried& c, llvm::BasicBlock* pre);
  // Value `id` as carried value i's slots: a scalar's one value, or a
  // register tile's slots.
  std::vector<llvm::Value*> carried_slots(const Carried& c, size_t i, int id);
  // At the end of an iteration: the yielded tiles copied into their
  // buffers; the program met if shared memory was handed out since
  // smem_allocations_ was `since` (never where `since` is negative); and the
  // slots the other carried values go on with.
  std::vector<std::vector<llvm::Value*>> carry_next(const Carried& c, const Op& yield, int64_t since);
  // Value `id` is carried value i: its buffer, or the phis `from`.
  void bind_carried(const Carried& c, size_t i, int id, const std::vector<llvm::PHINode*>& from);

  // Copies yielded tiles into the carried buffers; through temporaries when
  // a yielded tile is itself one of those buffers (a swap, a view).
  void carry_tiles(const Op& yield, const std::vector<llvm::Value*>& bufs);

  // Results of an if: scalars and the slots of register tiles are phis;
  // larger tiles are copied into buffers made before the branch (a branch's
  // own buffers end with it).
  absl::Status if_op(const Op& o);

  const KernelIR& ir_;
  TargetInfo& target_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  ScalarOps ops_;
  llvm::Module* module_ = nullptr;
  llvm::Function* fn_ = nullptr;
  llvm::BasicBlock* entry_ = nullptr;
  llvm::Instruction* alloca_point_ = nullptr;
  ViewHeaderLoads view_header_;  // header fields of view arguments, loaded in the entry block
  std::vector<llvm::Value*> vals_;
  std::vector<RegTile> regs_;
  Specialization facts_;
  AffineAnalysis analysis_;
  std::vector<Blocking> blocking_;  // per value: how its planned layout spreads it
  std::vector<std::shared_ptr<const Layout>> wanted_;  // per value: the slice it is computed in, if any
  std::map<std::pair<int64_t, Blocking>, std::shared_ptr<const Layout>> layouts_;  // by element count and blocking
  int threads_ = 0;                                           // threads of a program holding register tiles; 0: none
  llvm::Value* thread_ = nullptr;                             // this thread's index (i64)
  int block_ = 0;                                             // the IR block being lowered
  llvm::Value* smem_base_ = nullptr;
  struct SharedBuffer {
    int64_t offset, bytes;
    int block;  // the block that allocated it
  };
  std::map<llvm::Value*, SharedBuffer> shared_;  // live buffers by their address value
  int64_t smem_reserved_ = 0;  // bytes at the start held for the kernel (TMA mbarriers, store tiles)
  int64_t smem_peak_ = 0;      // the most any point of the kernel uses
  // How many buffers smem_alloc has handed out. A loop whose body took one
  // meets at the end of each iteration: the next one writes that memory
  // again, perhaps while a slower thread still reads this one's.
  int64_t smem_allocations_ = 0;
  struct TmaBarrier {
    llvm::Value* address;  // the mbarrier in shared memory
    llvm::Value* phase;    // i32 slot holding the parity to wait for
  };
  std::map<const Op*, TmaBarrier> tma_barriers_;
  // Swizzled tma_stores' staging tiles, held for the whole kernel so that a
  // store may still read one while the program goes on: the whole tile, or
  // two of its `panels` (Overlap::stage_panels).
  Overlap overlap_;
  struct HeldTile {
    llvm::Value* buffer;
    int64_t panels = 1;
  };
  std::map<const Op*, HeldTile> store_tiles_;
  std::set<const Op*> staged_stores_;  // stores that stage their values (stages_store)
  std::map<const Op*, MmaDot> mma_dots_;
  std::map<const Op*, Pipeline> pipelines_;                  // by loop
  std::map<const Op*, const Op*> outer_pipelines_;           // outer loop -> the pipelined loop in it
  std::map<const Op*, std::pair<const Op*, int>> pipelined_;  // tma_load -> its loop and index there
  std::set<const Op*> in_flight_dots_;
  // Per loop, the staged operands written before it (value, form), and the
  // tiles they are in while the loop runs.
  std::map<const Op*, std::vector<std::pair<int, SharedMatrix>>> hoisted_stages_;
  std::map<int, llvm::Value*> hoisted_tiles_;
  std::map<const Op*, const Op*> staged_ops_;  // a body's op that waits for or releases load groups -> its loop
  // Whether a loop that takes the default stage count is pipelined.
  bool pipelined_by_default_ = false;
  // Per value: read by nothing but the operands of mma_dots_ (a tma_load
  // result, or the transpose of one), so it needs no plain copy.
  std::vector<bool> mma_only_;
  // Swizzled tma_load results that other ops read too: the swizzled tile,
  // while the value itself is a plain copy.
  std::map<int, llvm::Value*> raw_tiles_;
};

}  // namespace tessel::codegen
