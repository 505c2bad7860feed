#include "codegen/layout.h"

#include <algorithm>
#include <bit>
#include <map>

#include "base/status.h"

namespace tessel::codegen {
namespace {

class BlockedLayout final : public Layout {
 public:
  BlockedLayout(int64_t numel, int threads, Blocking k)
      : numel_(numel),
        threads_(threads),
        per_thread_(k.per_thread),
        inner_(k.inner > 0 ? k.inner : numel),
        threads_inner_(k.threads_inner > 0 ? k.threads_inner : threads) {
    TESSEL_CHECK(per_thread_ > 0 && numel_ % inner_ == 0 && (inner_ == numel_ || inner_ % per_thread_ == 0),
                 "a blocked layout's runs must tile its rows and its rows the tile");
    TESSEL_CHECK(threads_inner_ == threads_ ||
                     (threads_inner_ > 0 && (threads_inner_ & (threads_inner_ - 1)) == 0 && threads_ % threads_inner_ == 0),
                 "a blocked layout's threads per row must be a power of two dividing its threads");
    rows_ = numel_ / inner_;
    threads_outer_ = threads_ / threads_inner_;
    col_rounds_ = ceil_div(inner_, int64_t{threads_inner_} * per_thread_);
    row_rounds_ = ceil_div(rows_, threads_outer_);
  }

  int64_t numel() const override { return numel_; }
  int threads() const override { return threads_; }
  int64_t slots() const override { return row_rounds_ * col_rounds_ * per_thread_; }
  llvm::Value* element(llvm::IRBuilder<>& b, llvm::Value* thread, int64_t slot) const override {
    Slot s = split(slot);
    llvm::Value* col = b.CreateAdd(b.getInt64(s.col_round * threads_inner_), t_col(b, thread));
    col = b.CreateAdd(b.CreateMul(col, b.getInt64(per_thread_)), b.getInt64(s.lane));
    if (rows_ == 1) return col;
    llvm::Value* row = b.CreateAdd(b.getInt64(s.row_round * threads_outer_), t_row(b, thread));
    return b.CreateAdd(b.CreateMul(row, b.getInt64(inner_)), col);
  }
  llvm::Value* valid(llvm::IRBuilder<>& b, llvm::Value* thread, int64_t slot) const override {
    Slot s = split(slot);
    // The last thread's row or column in this slot: if it exists, every thread's does.
    llvm::Value* ok = nullptr;
    if ((s.row_round + 1) * threads_outer_ > rows_) {
      ok = b.CreateICmpULT(b.CreateAdd(b.getInt64(s.row_round * threads_outer_), t_row(b, thread)),
                           b.getInt64(rows_));
    }
    if (((s.col_round + 1) * threads_inner_ - 1) * per_thread_ + s.lane >= inner_) {
      llvm::Value* col = b.CreateAdd(b.getInt64(s.col_round * threads_inner_), t_col(b, thread));
      llvm::Value* in = b.CreateICmpULT(b.CreateAdd(b.CreateMul(col, b.getInt64(per_thread_)), b.getInt64(s.lane)),
                                        b.getInt64(inner_));
      ok = ok == nullptr ? in : b.CreateAnd(ok, in);
    }
    return ok;
  }
  int64_t element_at(int64_t thread, int64_t slot) const override {
    Slot s = split(slot);
    int64_t row = s.row_round * threads_outer_ + thread / threads_inner_;
    int64_t col = (s.col_round * threads_inner_ + thread % threads_inner_) * per_thread_ + s.lane;
    return row < rows_ && col < inner_ ? row * inner_ + col : -1;
  }
  bool same_as(const Layout& other) const override {
    auto* o = dynamic_cast<const BlockedLayout*>(&other);
    return o != nullptr && o->numel_ == numel_ && o->threads_ == threads_ && o->per_thread_ == per_thread_ &&
           o->inner_ == inner_ && o->threads_inner_ == threads_inner_;
  }

 private:
  struct Slot {
    int64_t row_round, col_round, lane;
  };
  static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
  Slot split(int64_t slot) const {
    int64_t run = slot / per_thread_;
    return {run / col_rounds_, run % col_rounds_, slot % per_thread_};
  }
  llvm::Value* t_col(llvm::IRBuilder<>& b, llvm::Value* thread) const {
    return threads_inner_ == threads_ ? thread : b.CreateAnd(thread, b.getInt64(threads_inner_ - 1));
  }
  llvm::Value* t_row(llvm::IRBuilder<>& b, llvm::Value* thread) const {
    return b.CreateLShr(thread, b.getInt64(__builtin_ctz(static_cast<unsigned>(threads_inner_))));
  }

  int64_t numel_;
  int threads_;
  int per_thread_;
  int64_t inner_;
  int threads_inner_;
  int64_t rows_, threads_outer_, col_rounds_, row_rounds_;
};

}  // namespace

std::shared_ptr<const Layout> blocked_layout(int64_t numel, int threads, Blocking blocking) {
  return std::make_shared<BlockedLayout>(numel, threads, blocking);
}

SliceLayout::SliceLayout(std::shared_ptr<const Layout> parent, std::vector<int64_t> shape, int axis)
    : parent_(std::move(parent)), shape_(std::move(shape)), axis_(axis), inner_(1) {
  for (size_t d = axis_ + 1; d < shape_.size(); ++d) inner_ *= shape_[d];
  // Parent slots whose positions agree in every thread (-1 where invalid)
  // share a slot; the slice's slots keep the parent's order.
  std::map<std::vector<int64_t>, int64_t> slot_by_positions;
  for (int64_t s = 0; s < parent_->slots(); ++s) {
    std::vector<int64_t> positions(parent_->threads());
    for (int t = 0; t < parent_->threads(); ++t) {
      int64_t e = parent_->element_at(t, s);
      positions[t] = e < 0 ? -1 : e / (shape_[axis_] * inner_) * inner_ + e % inner_;
    }
    auto [it, added] = slot_by_positions.emplace(std::move(positions), static_cast<int64_t>(first_.size()));
    if (added) first_.push_back(s);
    slot_of_.push_back(it->second);
  }
}

llvm::Value* SliceLayout::element(llvm::IRBuilder<>& b, llvm::Value* thread, int64_t slot) const {
  llvm::Value* e = parent_->element(b, thread, first_[slot]);
  llvm::Value* outer = b.CreateUDiv(e, b.getInt64(shape_[axis_] * inner_));
  return b.CreateAdd(b.CreateMul(outer, b.getInt64(inner_)), b.CreateURem(e, b.getInt64(inner_)));
}

int64_t SliceLayout::element_at(int64_t thread, int64_t slot) const {
  int64_t e = parent_->element_at(thread, first_[slot]);
  return e < 0 ? -1 : e / (shape_[axis_] * inner_) * inner_ + e % inner_;
}

bool SliceLayout::same_as(const Layout& other) const {
  auto* o = dynamic_cast<const SliceLayout*>(&other);
  if (o == nullptr) return false;
  if (o->axis_ == axis_ && o->shape_ == shape_ && o->parent_->same_as(*parent_)) return true;
  // Slices of different parents that put every position in the same slot
  // of the same threads (the row statistics of an online softmax, sliced
  // from the scores' fragment and from the output's) are one layout.
  std::vector<int64_t> kept = shape_, other_kept = o->shape_;
  kept.erase(kept.begin() + axis_);
  other_kept.erase(other_kept.begin() + o->axis_);
  if (kept != other_kept || o->threads() != threads() || o->slots() != slots()) return false;
  for (int t = 0; t < threads(); ++t) {
    for (int64_t slot = 0; slot < slots(); ++slot) {
      if (o->element_at(t, slot) != element_at(t, slot)) return false;
    }
  }
  return true;
}

NarrowLayout::NarrowLayout(std::shared_ptr<const Layout> parent, std::vector<int64_t> shape, int axis, int64_t start,
                           int64_t size)
    : parent_(std::move(parent)), shape_(std::move(shape)), axis_(axis), start_(start), size_(size), inner_(1) {
  for (size_t d = axis_ + 1; d < shape_.size(); ++d) inner_ *= shape_[d];
  for (int64_t s = 0; s < parent_->slots(); ++s) {
    bool some = false, all = true;
    for (int t = 0; t < parent_->threads(); ++t) {
      const int64_t e = parent_->element_at(t, s);
      if (e < 0) continue;
      const bool inside = part_element(e) >= 0;
      some = some || inside;
      all = all && inside;
    }
    if (!some) continue;
    kept_.push_back(s);
    everywhere_.push_back(all);
  }
}

int64_t NarrowLayout::part_element(int64_t e) const {
  const int64_t n = shape_[axis_], along = e / inner_ % n - start_;
  if (along < 0 || along >= size_) return -1;
  return (e / (n * inner_) * size_ + along) * inner_ + e % inner_;
}

llvm::Value* NarrowLayout::element(llvm::IRBuilder<>& b, llvm::Value* thread, int64_t slot) const {
  // e - start * inner - (e / (n * inner)) * (n - size) * inner: the rows
  // before e's lose the elements outside the part.
  llvm::Value* e = parent_->element(b, thread, kept_[slot]);
  const int64_t n = shape_[axis_];
  llvm::Value* part = b.CreateSub(e, b.getInt64(start_ * inner_));
  if (n * inner_ == parent_->numel()) return part;
  llvm::Value* outer = b.CreateUDiv(e, b.getInt64(n * inner_));
  return b.CreateSub(part, b.CreateMul(outer, b.getInt64((n - size_) * inner_)));
}

llvm::Value* NarrowLayout::valid(llvm::IRBuilder<>& b, llvm::Value* thread, int64_t slot) const {
  llvm::Value* ok = parent_->valid(b, thread, kept_[slot]);
  if (everywhere_[slot]) return ok;
  llvm::Value* e = parent_->element(b, thread, kept_[slot]);
  llvm::Value* along = b.CreateURem(b.CreateUDiv(e, b.getInt64(inner_)), b.getInt64(shape_[axis_]));
  llvm::Value* inside = b.CreateICmpULT(b.CreateSub(along, b.getInt64(start_)), b.getInt64(size_));
  return ok == nullptr ? inside : b.CreateAnd(ok, inside);
}

int64_t NarrowLayout::element_at(int64_t thread, int64_t slot) const {
  const int64_t e = parent_->element_at(thread, kept_[slot]);
  return e < 0 ? -1 : part_element(e);
}

bool NarrowLayout::same_as(const Layout& other) const {
  auto* o = dynamic_cast<const NarrowLayout*>(&other);
  return o != nullptr && o->axis_ == axis_ && o->start_ == start_ && o->size_ == size_ && o->shape_ == shape_ &&
         o->parent_->same_as(*parent_);
}

Narrowed narrow_layout(const std::shared_ptr<const Layout>& parent, const std::vector<int64_t>& shape, int axis,
                       int64_t start, int64_t size) {
  auto part = std::make_shared<NarrowLayout>(parent, shape, axis, start, size);
  std::shared_ptr<const Layout> own = parent->narrowed(shape, axis, start, size);
  if (own == nullptr || own->threads() != part->threads() || own->slots() != part->slots()) {
    return {part, part->kept()};
  }
  // Each of own's slots is the part's slot that holds its elements in every
  // thread; where one has none, the part's layout serves.
  std::vector<int64_t> from;
  for (int64_t s = 0; s < own->slots(); ++s) {
    int64_t match = -1;
    for (int64_t p = 0; p < part->slots() && match < 0; ++p) {
      bool same = true;
      for (int t = 0; t < part->threads() && same; ++t) same = own->element_at(t, s) == part->element_at(t, p);
      if (same) match = p;
    }
    if (match < 0) return {part, part->kept()};
    from.push_back(part->kept()[match]);
  }
  return {own, from};
}

ConcatLayout::ConcatLayout(std::shared_ptr<const Layout> a, std::shared_ptr<const Layout> b,
                           std::vector<int64_t> a_shape, int axis, int64_t b_size)
    : a_(std::move(a)), b_(std::move(b)), a_shape_(std::move(a_shape)), axis_(axis), b_size_(b_size), inner_(1) {
  TESSEL_CHECK(a_->threads() == b_->threads(), "a concat's parts are held by as many threads");
  for (size_t d = axis_ + 1; d < a_shape_.size(); ++d) inner_ *= a_shape_[d];
}

int64_t ConcatLayout::placed(int k, int64_t e) const {
  const int64_t na = a_shape_[axis_], run = (k == 0 ? na : b_size_) * inner_;
  return e / run * (na + b_size_) * inner_ + (k == 0 ? 0 : na * inner_) + e % run;
}

llvm::Value* ConcatLayout::element(llvm::IRBuilder<>& b, llvm::Value* thread, int64_t slot) const {
  const int k = slot < a_->slots() ? 0 : 1;
  const Layout& part = k == 0 ? *a_ : *b_;
  llvm::Value* e = part.element(b, thread, k == 0 ? slot : slot - a_->slots());
  const int64_t na = a_shape_[axis_], run = (k == 0 ? na : b_size_) * inner_;
  llvm::Value* rest = b.CreateAdd(b.CreateURem(e, b.getInt64(run)), b.getInt64(k == 0 ? 0 : na * inner_));
  if (run == part.numel()) return rest;
  return b.CreateAdd(b.CreateMul(b.CreateUDiv(e, b.getInt64(run)), b.getInt64((na + b_size_) * inner_)), rest);
}

llvm::Value* ConcatLayout::valid(llvm::IRBuilder<>& b, llvm::Value* thread, int64_t slot) const {
  return slot < a_->slots() ? a_->valid(b, thread, slot) : b_->valid(b, thread, slot - a_->slots());
}

int64_t ConcatLayout::element_at(int64_t thread, int64_t slot) const {
  const int k = slot < a_->slots() ? 0 : 1;
  const int64_t e = k == 0 ? a_->element_at(thread, slot) : b_->element_at(thread, slot - a_->slots());
  return e < 0 ? -1 : placed(k, e);
}

bool ConcatLayout::same_as(const Layout& other) const {
  auto* o = dynamic_cast<const ConcatLayout*>(&other);
  return o != nullptr && o->axis_ == axis_ && o->a_shape_ == a_shape_ && o->b_size_ == b_size_ && o->a_->same_as(*a_) &&
         o->b_->same_as(*b_);
}

int64_t contiguous_run(const Layout& l, int64_t limit) {
  auto holds_runs = [&](int64_t r) {
    if (l.slots() % r != 0) return false;
    for (int t = 0; t < l.threads(); ++t) {
      for (int64_t s = 0; s < l.slots(); s += r) {
        int64_t first = l.element_at(t, s);
        if (first >= 0 && first % r != 0) return false;
        for (int64_t i = 1; i < r; ++i) {
          int64_t e = l.element_at(t, s + i);
          if (first < 0 ? e >= 0 : e != first + i) return false;
        }
      }
    }
    return true;
  };
  int64_t run = 1;
  while (run * 2 <= limit && holds_runs(run * 2)) run *= 2;
  return run;
}

std::optional<std::vector<SlotSources>> register_moves(const Layout& from, const Layout& to, int warp_size) {
  const int threads = to.threads();
  if (from.threads() != threads || from.numel() != to.numel() || from.slots() == 0) return std::nullopt;
  std::vector<std::vector<std::pair<int, int64_t>>> holders(from.numel());
  for (int t = 0; t < threads; ++t) {
    for (int64_t s = 0; s < from.slots(); ++s) {
      const int64_t e = from.element_at(t, s);
      if (e >= 0) holders[e].emplace_back(t, s);
    }
  }
  // The sources within a warp of slot `slot`'s element in thread t, its own first.
  auto sources_of = [&](int64_t slot, int t) {
    std::vector<SlotSource> found;
    for (const auto& [holder, s] : holders[to.element_at(t, slot)]) {
      if ((holder ^ t) < warp_size) found.push_back({.from = s, .lanes = holder ^ t});
    }
    std::stable_sort(found.begin(), found.end(),
                     [](const SlotSource& a, const SlotSource& b) { return a.lanes == 0 && b.lanes != 0; });
    return found;
  };
  auto held = [&](int t, const SlotSource& src) {
    const int peer = t ^ src.lanes;
    return peer < threads ? from.element_at(peer, src.from) : -1;
  };
  // The first thread that `sources` leaves without its element (the
  // first source whose slot holds one where it is read is taken), or -1.
  auto unserved = [&](int64_t slot, const SlotSources& sources) {
    for (int t = 0; t < threads; ++t) {
      const int64_t e = to.element_at(t, slot);
      if (e < 0) continue;
      int64_t got = -1;
      for (const SlotSource& src : sources) {
        got = held(t, src);
        if (got >= 0) break;
      }
      if (got != e) return t;
    }
    return -1;
  };
  std::vector<SlotSources> moves(to.slots(), SlotSources{SlotSource{}});
  for (int64_t slot = 0; slot < to.slots(); ++slot) {
    int t0 = 0;
    while (t0 < threads && to.element_at(t0, slot) < 0) ++t0;
    if (t0 == threads) continue;
    // One source for every thread, else a first one for the threads where
    // its slot holds an element and a second for the rest.
    bool found = false;
    for (const SlotSource& first : sources_of(slot, t0)) {
      const int t = unserved(slot, {first});
      if (t < 0) {
        moves[slot] = {first};
        found = true;
        break;
      }
      if (held(t, first) >= 0) continue;
      for (const SlotSource& second : sources_of(slot, t)) {
        if (unserved(slot, {first, second}) < 0) {
          moves[slot] = {first, second};
          found = true;
          break;
        }
      }
      if (found) break;
    }
    if (!found) return std::nullopt;
  }
  return moves;
}

std::optional<int> holder_bits(const Layout& l) {
  const int threads = l.threads();
  const int64_t slots = l.slots();
  // The first holder of each position; every other holder must use the
  // same slot, and the thread-index bits in which holders differ make the
  // butterfly.
  std::vector<int64_t> first_thread(l.numel(), -1), first_slot(l.numel(), -1);
  int lanes = 0;
  for (int t = 0; t < threads; ++t) {
    for (int64_t s = 0; s < slots; ++s) {
      int64_t e = l.element_at(t, s);
      if (e < 0) continue;
      if (first_thread[e] < 0) {
        first_thread[e] = t;
        first_slot[e] = s;
      } else if (first_slot[e] != s) {
        return std::nullopt;
      } else {
        lanes |= static_cast<int>(t ^ first_thread[e]);
      }
    }
  }
  // Combining slot s over a class t0 ^ span(lanes) must meet one position
  // there, or nothing: one pass over each class from its lowest thread.
  for (int t0 = 0; t0 < threads; ++t0) {
    if ((t0 & lanes) != 0) continue;
    for (int64_t s = 0; s < slots; ++s) {
      int64_t seen = -1;
      for (int m = lanes;; m = (m - 1) & lanes) {
        if ((t0 | m) >= threads) return std::nullopt;
        int64_t e = l.element_at(t0 | m, s);
        if (e >= 0 && seen >= 0 && e != seen) return std::nullopt;
        if (e >= 0) seen = e;
        if (m == 0) break;
      }
    }
  }
  return lanes;
}

std::optional<int> butterfly_lanes(const Layout& l, int warp_size) {
  TESSEL_CHECK(warp_size > 0 && (warp_size & (warp_size - 1)) == 0, "warp size must be a power of two");
  std::optional<int> bits = holder_bits(l);
  if (!bits.has_value() || (*bits & ~(warp_size - 1)) != 0) return std::nullopt;
  return bits;
}

std::optional<ScanPlan> scan_plan(const Layout& l, const std::vector<int64_t>& shape, int axis) {
  const int threads = l.threads();
  const int64_t slots = l.slots(), numel = l.numel(), n = shape[axis];
  int64_t inner = 1;
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  if (threads * slots != numel) return std::nullopt;
  auto coord = [&](int64_t e) { return e / inner % n; };
  auto line = [&](int64_t e) { return e / (inner * n) * inner + e % inner; };
  auto line_at = [&](int t, int64_t s) {
    int64_t e = l.element_at(t, s);
    return e < 0 ? -1 : line(e);
  };
  ScanPlan plan;
  for (int bit = 1; bit < threads; bit *= 2) {
    bool same = true;
    for (int64_t s = 0; s < slots && same; ++s) same = line_at(bit, s) == line_at(0, s);
    if (same) plan.holder_bits |= bit;
  }
  const int64_t holders = int64_t{1} << std::popcount(static_cast<unsigned>(plan.holder_bits));
  if (n % holders != 0) return std::nullopt;
  // Thread 0's lines, in order of their first slot, and its elements of the first.
  std::vector<int64_t> lines;
  std::vector<bool> first_line(n, false);
  for (int64_t s = 0; s < slots; ++s) {
    int64_t e = l.element_at(0, s);
    if (e < 0) return std::nullopt;
    if (std::find(lines.begin(), lines.end(), line(e)) == lines.end()) lines.push_back(line(e));
    if (line(e) == lines[0]) first_line[coord(e)] = true;
  }
  while (plan.run < n && first_line[plan.run]) ++plan.run;
  if ((n / holders) % plan.run != 0) return std::nullopt;
  plan.rounds = n / holders / plan.run;
  const int64_t stride = holders * plan.run;
  plan.slots.assign(lines.size(), std::vector<std::vector<int64_t>>(plan.rounds, std::vector<int64_t>(plan.run, -1)));
  std::vector<int64_t> group(slots), round(slots), index(slots);
  for (int64_t s = 0; s < slots; ++s) {
    const int64_t e = l.element_at(0, s), c = coord(e);
    group[s] = std::find(lines.begin(), lines.end(), line(e)) - lines.begin();
    round[s] = c / stride;
    index[s] = c % stride;
    if (index[s] >= plan.run) return std::nullopt;
    int64_t& slot = plan.slots[group[s]][round[s]][index[s]];
    if (slot >= 0) return std::nullopt;
    slot = s;
  }
  // Every thread holds its lines' elements where the plan says, and every
  // element is held once.
  std::vector<bool> held(numel, false);
  for (int t = 0; t < threads; ++t) {
    int64_t rank = 0;
    for (int bit = 1, r = 1; bit < threads; bit *= 2) {
      if ((plan.holder_bits & bit) == 0) continue;
      if ((t & bit) != 0) rank |= r;
      r *= 2;
    }
    const int base = t & ~plan.holder_bits;
    for (int64_t s = 0; s < slots; ++s) {
      const int64_t e = l.element_at(t, s);
      if (e < 0 || held[e]) return std::nullopt;
      held[e] = true;
      if (coord(e) != (round[s] * holders + rank) * plan.run + index[s]) return std::nullopt;
      if (line(e) != line_at(base, s) || line(e) != line_at(t, plan.slots[group[s]][0][0])) return std::nullopt;
    }
  }
  return plan;
}

std::optional<SortPlan> sort_plan(const Layout& l, const std::vector<int64_t>& shape, int axis) {
  const int threads = l.threads();
  const int64_t slots = l.slots(), numel = l.numel(), n = shape[axis];
  int64_t inner = 1;
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  if (n < 2 || !std::has_single_bit(static_cast<uint64_t>(n)) || threads * slots != numel) return std::nullopt;
  // Which thread and slot hold each element.
  std::vector<std::pair<int, int64_t>> holder(numel, {-1, -1});
  for (int t = 0; t < threads; ++t) {
    for (int64_t s = 0; s < slots; ++s) {
      const int64_t e = l.element_at(t, s);
      if (e < 0 || holder[e].first >= 0) return std::nullopt;
      holder[e] = {t, s};
    }
  }
  SortPlan plan;
  for (int64_t bit = 1; bit < n; bit *= 2) {
    // Whether the element in slot s of thread t has bit `bit` set in its
    // position, and where its partner is held.
    auto upper = [&](int t, int64_t s) { return (l.element_at(t, s) / inner & bit) != 0; };
    auto partner = [&](int t, int64_t s) {
      const int64_t e = l.element_at(t, s);
      return holder[upper(t, s) ? e - bit * inner : e + bit * inner];
    };
    SortBit step;
    step.threads = partner(0, 0).first;
    for (int t = 0; t < threads; ++t) {
      for (int64_t s = 0; s < slots; ++s) {
        const auto [pt, ps] = partner(t, s);
        const bool fits = step.threads == 0
                              ? pt == t && ps == partner(0, s).second && upper(t, s) == upper(0, s)
                              : pt == (t ^ step.threads) && ps == s && upper(t, s) == ((t & step.threads) != 0);
        if (!fits) return std::nullopt;
      }
    }
    if (step.threads == 0) {
      for (int64_t s = 0; s < slots; ++s) {
        if (!upper(0, s)) step.pairs.push_back({s, partner(0, s).second});
      }
    }
    plan.bits.push_back(std::move(step));
  }
  return plan;
}

}  // namespace tessel::codegen
