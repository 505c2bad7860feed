// Layouts of register tiles: which element of a tile each slot of each
// thread of a program holds. Ops on register tiles pair slots of operands
// with the same layout; a tile moves to another layout through shared
// memory. The blocked layout is the default; the slice layout holds the
// result of a reduction along one axis, so that reduced rows broadcast back
// to their parent layout without moving data.
//
// A matrix-instruction fragment (the wgmma accumulator of m64nNk16: warp w
// of a warpgroup holds rows 16w + lane/4 and 16w + lane/4 + 8, two adjacent
// columns per 8-column block) fits behind the same interface: element()
// computes row * N + col from the thread's warp and lane bits and the slot's
// row half and column block, valid() is nullptr (fragments cover the tile
// exactly), element_at() is the same arithmetic on integers, and same_as()
// compares the instruction shape. A row reduction of an accumulator is then
// a slice of the fragment: the four lanes of a quad hold one row, so
// butterfly_lanes() finds lane bits 0 and 1 without knowing the fragment.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "codegen/blocking.h"
#include "llvm/IR/IRBuilder.h"

namespace tessel::codegen {

// Which slots of a layout a store writes (all where empty).
using SlotFilter = std::function<bool(int64_t slot)>;

class Layout {
 public:
  virtual ~Layout() = default;
  virtual int64_t numel() const = 0;
  // Threads of the program the layout spreads the tile over.
  virtual int threads() const = 0;
  // Slots per thread.
  virtual int64_t slots() const = 0;
  // The row-major linear index (i64) of the element in `slot` of `thread`.
  virtual llvm::Value* element(llvm::IRBuilder<>& b, llvm::Value* thread, int64_t slot) const = 0;
  // Whether `slot` holds an element (i1), or nullptr when it does in every thread.
  virtual llvm::Value* valid(llvm::IRBuilder<>& b, llvm::Value* thread, int64_t slot) const = 0;
  // The same mapping at compile time: the element in `slot` of `thread`, or
  // -1 where that slot holds none. Plans (slices, shuffles) are made from it.
  virtual int64_t element_at(int64_t thread, int64_t slot) const = 0;
  virtual bool same_as(const Layout& other) const = 0;
  // A layout of this one's kind that holds the part narrow(tile, axis,
  // start, size) of a tile of `shape` in this layout, each element in a
  // slot of the thread that holds it here (a product's fragment narrowed to
  // whole column blocks is a fragment, which the target's matrix stores
  // take); nullptr where there is none. narrow_layout falls back on a
  // NarrowLayout.
  virtual std::shared_ptr<const Layout> narrowed(const std::vector<int64_t>& /*shape*/, int /*axis*/, int64_t /*start*/,
                                                 int64_t /*size*/) const {
    return nullptr;
  }
};

// Slot s of thread t (with t = t_row * threads_inner + t_col) holds row
// r * (threads / threads_inner) + t_row and, within it, element
// (c * threads_inner + t_col) * per_thread + lane, where
// s = (r * col_rounds + c) * per_thread + lane. `inner` must divide numel
// and, when it is not the whole tile, per_thread must divide inner.
std::shared_ptr<const Layout> blocked_layout(int64_t numel, int threads, Blocking blocking);
inline std::shared_ptr<const Layout> blocked_layout(int64_t numel, int threads, int per_thread = 1) {
  return blocked_layout(numel, threads, Blocking{.per_thread = per_thread});
}

// The layout of a tile of `shape` in layout `parent` reduced along `axis`:
// each thread holds the reduced positions its parent slots touch (the
// element index with `axis` dropped, which is also the index in the shape
// with `axis` kept at size 1). Parent slots that hold the same position in
// every thread (and are valid in the same threads) share one slot of the
// slice; several threads may hold one position (Triton's SliceLayout).
class SliceLayout final : public Layout {
 public:
  SliceLayout(std::shared_ptr<const Layout> parent, std::vector<int64_t> shape, int axis);

  int64_t numel() const override { return parent_->numel() / shape_[axis_]; }
  int threads() const override { return parent_->threads(); }
  int64_t slots() const override { return static_cast<int64_t>(first_.size()); }
  llvm::Value* element(llvm::IRBuilder<>& b, llvm::Value* thread, int64_t slot) const override;
  llvm::Value* valid(llvm::IRBuilder<>& b, llvm::Value* thread, int64_t slot) const override {
    return parent_->valid(b, thread, first_[slot]);
  }
  int64_t element_at(int64_t thread, int64_t slot) const override;
  bool same_as(const Layout& other) const override;

  const Layout& parent() const { return *parent_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int axis() const { return axis_; }
  // The slot of the slice that parent slot `parent_slot` contributes to.
  int64_t slot_of(int64_t parent_slot) const { return slot_of_[parent_slot]; }

 private:
  std::shared_ptr<const Layout> parent_;
  std::vector<int64_t> shape_;  // the parent's shape, before the reduction
  int axis_;
  int64_t inner_;                // elements per step along axis_
  std::vector<int64_t> slot_of_;  // per parent slot
  std::vector<int64_t> first_;    // per slot: its first parent slot
};

// The layout of narrow(tile, axis, start, size) for a tile of `shape` in
// layout `parent`: the parent's slots that hold an element of the part in
// some thread, in the parent's order, each holding it at its position in
// the part. A slot that holds one in only some threads is valid in those.
class NarrowLayout final : public Layout {
 public:
  NarrowLayout(std::shared_ptr<const Layout> parent, std::vector<int64_t> shape, int axis, int64_t start, int64_t size);

  int64_t numel() const override { return parent_->numel() / shape_[axis_] * size_; }
  int threads() const override { return parent_->threads(); }
  int64_t slots() const override { return static_cast<int64_t>(kept_.size()); }
  llvm::Value* element(llvm::IRBuilder<>& b, llvm::Value* thread, int64_t slot) const override;
  llvm::Value* valid(llvm::IRBuilder<>& b, llvm::Value* thread, int64_t slot) const override;
  int64_t element_at(int64_t thread, int64_t slot) const override;
  bool same_as(const Layout& other) const override;

  // The parent slot each slot is.
  const std::vector<int64_t>& kept() const { return kept_; }
  // Parent element `e`'s position in the part, or -1 where it lies outside.
  int64_t part_element(int64_t e) const;

 private:
  std::shared_ptr<const Layout> parent_;
  std::vector<int64_t> shape_;  // the parent's shape
  int axis_;
  int64_t start_, size_;
  int64_t inner_;  // elements per step along axis_
  std::vector<int64_t> kept_;
  std::vector<bool> everywhere_;  // per slot: inside the part in every thread where the parent's is valid
};

// The layout of concat(a, b, axis) for tiles a of `a_shape` and b of
// `b_size` along `axis` (the rest as a's), held in layouts `a` and `b` of
// as many threads: a's slots, then b's, each holding its element at its
// position in the result. No data moves.
class ConcatLayout final : public Layout {
 public:
  ConcatLayout(std::shared_ptr<const Layout> a, std::shared_ptr<const Layout> b, std::vector<int64_t> a_shape, int axis,
               int64_t b_size);

  int64_t numel() const override { return a_->numel() + b_->numel(); }
  int threads() const override { return a_->threads(); }
  int64_t slots() const override { return a_->slots() + b_->slots(); }
  llvm::Value* element(llvm::IRBuilder<>& b, llvm::Value* thread, int64_t slot) const override;
  llvm::Value* valid(llvm::IRBuilder<>& b, llvm::Value* thread, int64_t slot) const override;
  int64_t element_at(int64_t thread, int64_t slot) const override;
  bool same_as(const Layout& other) const override;

 private:
  // Element `e` of part `k` (0: a, 1: b) at its position in the result.
  int64_t placed(int k, int64_t e) const;
  std::shared_ptr<const Layout> a_, b_;
  std::vector<int64_t> a_shape_;
  int axis_;
  int64_t b_size_, inner_;  // inner_: elements per step along axis_
};

// The layout narrow(tile, axis, start, size) takes in registers when the
// tile of `shape` is held in `parent`, and the parent slot each of its
// slots reads: parent->narrowed() where it has one, else a NarrowLayout.
struct Narrowed {
  std::shared_ptr<const Layout> layout;
  std::vector<int64_t> from;
};
Narrowed narrow_layout(const std::shared_ptr<const Layout>& parent, const std::vector<int64_t>& shape, int axis,
                       int64_t start, int64_t size);

// The longest run R (a power of two, at most `limit`) such that in every
// thread each R consecutive slots starting at a multiple of R hold R
// consecutive elements starting at a multiple of R, or hold none: what one
// vector access of a tile in layout `l` may move.
int64_t contiguous_run(const Layout& l, int64_t limit);

// A register a slot of one layout reads for another: slot `from` of the
// thread whose index differs from the reader's in the bits of `lanes` (0:
// the reader's own register).
struct SlotSource {
  int64_t from = 0;
  int lanes = 0;
};
// Where a slot finds its element: the first of its sources (one or two)
// that holds an element in the thread it is read from (the two halves of a
// concat hold theirs in different threads).
using SlotSources = std::vector<SlotSource>;
// How a tile held in layout `from` reaches layout `to` in registers: the
// sources of every slot of `to`, with `lanes` below `warp_size` (a shuffle
// within a warp), or nullopt where some slot has none: the tile then moves
// through shared memory. A slot that holds no element in any thread reads
// slot 0 of its own thread.
std::optional<std::vector<SlotSources>> register_moves(const Layout& from, const Layout& to, int warp_size);

// The thread-index bits in which the holders of a position differ: when,
// for every slot s and thread t holding a position p, the holders of p are
// exactly slot s of the threads t ^ m (m made of those bits) where that slot
// is valid. nullopt when no such bits exist (a position held in different
// slots of threads).
std::optional<int> holder_bits(const Layout& l);

// How the threads of `l` that hold one position combine their parts with
// shuffles: holder_bits(l) when they all lie below `warp_size` (a butterfly
// within each warp), else nullopt.
std::optional<int> butterfly_lanes(const Layout& l, int warp_size);

// The ScanPlan (codegen/blocking.h) of layout `l` for a tile of `shape`
// scanned along `axis`, or nullopt where `l` is not of its form.
std::optional<ScanPlan> scan_plan(const Layout& l, const std::vector<int64_t>& shape, int axis);

// The SortPlan (codegen/blocking.h) of layout `l` for a tile of `shape`
// sorted along `axis`, or nullopt where the line length is not a power of
// two (at least 2), some element is held twice or not at all, or a
// partner lies neither in a fixed slot of the same thread nor in the same
// slot of a fixed other thread.
std::optional<SortPlan> sort_plan(const Layout& l, const std::vector<int64_t>& shape, int axis);

}  // namespace tessel::codegen
