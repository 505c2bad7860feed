// Blocked and slice layouts against a brute-force enumeration of which
// thread holds which element, on random shapes, thread counts and runs per
// thread; both the emitted IR (folded for constant threads) and the
// compile-time mapping. Butterfly plans are checked by simulating them.
#include <algorithm>
#include <bit>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/layout_table.h"
#include "codegen/nvptx/wgmma_fragment.h"
#include "gtest/gtest.h"

namespace tessel::codegen {
namespace {

int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// The element index with `axis` dropped.
int64_t drop_axis(const std::vector<int64_t>& shape, int axis, int64_t e) {
  int64_t inner = 1;
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  return e / (shape[axis] * inner) * inner + e % inner;
}

// Blocked by definition: element e is in run e / p, which thread
// run % threads holds in step run / threads.
std::vector<int64_t> blocked_by_enumeration(int64_t numel, int threads, int p, int64_t slots) {
  std::vector<int64_t> table(threads * slots, -1);
  for (int64_t e = 0; e < numel; ++e) {
    int64_t run = e / p;
    table[run % threads * slots + run / threads * p + e % p] = e;
  }
  return table;
}

// Row-blocked by definition: element (row, col) is in run col / p of its
// row; thread (row % threads_outer) * threads_inner + run % threads_inner
// holds it in step (row / threads_outer, run / threads_inner).
std::vector<int64_t> rows_by_enumeration(int64_t numel, int threads, Blocking k, int64_t slots) {
  const int64_t outer = threads / k.threads_inner;
  const int64_t col_rounds = (k.inner + k.threads_inner * k.per_thread - 1) / (k.threads_inner * k.per_thread);
  std::vector<int64_t> table(threads * slots, -1);
  for (int64_t e = 0; e < numel; ++e) {
    int64_t row = e / k.inner, col = e % k.inner, run = col / k.per_thread;
    int64_t thread = row % outer * k.threads_inner + run % k.threads_inner;
    int64_t slot = (row / outer * col_rounds + run / k.threads_inner) * k.per_thread + col % k.per_thread;
    table[thread * slots + slot] = e;
  }
  return table;
}

// A random tile of rank 1 to 3 (sides powers of two up to 32, at least as
// many elements as threads), an axis, 32 to 128 threads and a blocking of
// up to `max_run` elements a run, rows over some threads half the time.
struct RandomTile {
  std::vector<int64_t> shape;
  int axis;
  int threads;
  Blocking k;
  std::string trace;
};
RandomTile random_tile(std::mt19937& gen, int max_run) {
  RandomTile c;
  const int rank = 1 + gen() % 3, p = 1 << (gen() % (std::countr_zero(static_cast<unsigned>(max_run)) + 1));
  c.threads = 32 << (gen() % 3);
  c.shape.resize(rank);
  for (int64_t& d : c.shape) d = 1 << (gen() % 6);
  if (product(c.shape) < c.threads) c.shape[0] *= c.threads;
  c.axis = static_cast<int>(gen() % rank);
  std::ostringstream trace;
  trace << "shape";
  for (int64_t d : c.shape) trace << " " << d;
  trace << " axis " << c.axis << " threads " << c.threads << " per_thread " << p;
  c.k.per_thread = static_cast<int>(std::min<int64_t>(p, product(c.shape) / c.threads));
  if (gen() % 2 && c.shape.back() % c.k.per_thread == 0) {
    c.k.inner = c.shape.back();
    c.k.threads_inner = 1 << (gen() % 6);
    trace << " threads per row " << c.k.threads_inner;
  }
  c.trace = trace.str();
  return c;
}

// Sums of random values per position after the per-thread combine, the
// butterfly over the holder bits below the warp and the exchange over the
// bits above it, as a GPU would compute them; checks each held position's
// sum.
void check_combine(const LayoutTable& slice, const std::vector<int64_t>& parent, int64_t parent_slots,
                   const std::vector<int64_t>& shape, int axis, std::mt19937& gen) {
  std::vector<uint64_t> value(product(shape));
  std::vector<uint64_t> want(product(shape) / shape[axis], 0);
  for (size_t e = 0; e < value.size(); ++e) {
    value[e] = gen();
    want[drop_axis(shape, axis, static_cast<int64_t>(e))] += value[e];
  }
  std::vector<uint64_t> acc(slice.threads * slice.slots, 0);
  for (int t = 0; t < slice.threads; ++t) {
    for (int64_t s = 0; s < parent_slots; ++s) {
      if (int64_t e = parent[t * parent_slots + s]; e >= 0) acc[t * slice.slots + slice.slot_of[s]] += value[e];
    }
  }
  const int lanes = *slice.holders & 31, warps = *slice.holders & ~31;
  for (int bit = 1; bit <= lanes; bit *= 2) {
    if ((lanes & bit) == 0) continue;
    std::vector<uint64_t> next = acc;
    for (int t = 0; t < slice.threads; ++t) {
      for (int64_t j = 0; j < slice.slots; ++j) next[t * slice.slots + j] += acc[(t ^ bit) * slice.slots + j];
    }
    acc = next;
  }
  if (warps != 0) {
    std::vector<uint64_t> next(acc.size(), 0);
    for (int t = 0; t < slice.threads; ++t) {
      for (int m = warps;; m = (m - 1) & warps) {
        for (int64_t j = 0; j < slice.slots; ++j) next[t * slice.slots + j] += acc[((t & ~warps) | m) * slice.slots + j];
        if (m == 0) break;
      }
    }
    acc = next;
  }
  for (int t = 0; t < slice.threads; ++t) {
    for (int64_t j = 0; j < slice.slots; ++j) {
      int64_t p = slice.at[t * slice.slots + j];
      if (p >= 0) {
        ASSERT_EQ(acc[t * slice.slots + j], want[p]) << "thread " << t << " slot " << j;
      }
    }
  }
}

TEST(Layout, BlockedMatchesEnumeration) {
  std::mt19937 gen(std::random_device{}());
  for (int trial = 0; trial < 200; ++trial) {
    int threads = 32 * (1 + gen() % 8), p = 1 << (gen() % 4);
    int64_t numel = 1 + gen() % 3000;
    SCOPED_TRACE(::testing::Message() << "numel " << numel << " threads " << threads << " per_thread " << p);
    LayoutTable t = tabulate_blocked(numel, threads, {.per_thread = p}, 32);
    std::vector<int64_t> want = blocked_by_enumeration(numel, threads, p, t.slots);
    EXPECT_EQ(t.at, want);
    EXPECT_EQ(t.emitted, want);
  }
}

TEST(Layout, RowBlockedMatchesEnumeration) {
  std::mt19937 gen(std::random_device{}());
  for (int trial = 0; trial < 200; ++trial) {
    int warps_log2 = static_cast<int>(gen() % 3), threads = 32 << warps_log2, p = 1 << (gen() % 4);
    Blocking k{.per_thread = p,
               .inner = p * (1 + static_cast<int64_t>(gen() % 40)),
               .threads_inner = 1 << (gen() % (6 + warps_log2))};
    int64_t numel = k.inner * (1 + gen() % 20);
    SCOPED_TRACE(::testing::Message() << "rows " << numel / k.inner << " of " << k.inner << " threads " << threads
                                      << " per_thread " << p << " threads per row " << k.threads_inner);
    LayoutTable t = tabulate_blocked(numel, threads, k, 32);
    std::vector<int64_t> want = rows_by_enumeration(numel, threads, k, t.slots);
    EXPECT_EQ(t.at, want);
    EXPECT_EQ(t.emitted, want);
  }
}

TEST(Layout, SliceHoldsExactlyThePositionsOfItsParentSlots) {
  std::mt19937 gen(std::random_device{}());
  int butterflies = 0, over_warps = 0;
  for (int trial = 0; trial < 300; ++trial) {
    int rank = 1 + gen() % 3, threads = 32 * (1 + gen() % 4), p = 1 << (gen() % 4);
    std::vector<int64_t> shape(rank);
    for (int64_t& d : shape) d = gen() % 2 ? 1 << (gen() % 7) : 1 + gen() % 40;
    int axis = static_cast<int>(gen() % rank);
    ::testing::Message trace;
    trace << "shape";
    for (int64_t d : shape) trace << " " << d;
    trace << " axis " << axis << " threads " << threads << " per_thread " << p;
    // Half the trials spread rows of the last dimension over fewer threads.
    Blocking k{.per_thread = p};
    if (gen() % 2 && shape.back() % p == 0) {
      k.inner = shape.back();
      k.threads_inner = 1 << (gen() % 6);
      trace << " threads per row " << k.threads_inner;
    }
    SCOPED_TRACE(trace);
    LayoutTable parent = tabulate_blocked(product(shape), threads, k, 32);
    LayoutTable slice = tabulate_slice(shape, axis, threads, k, 32);
    ASSERT_EQ(slice.emitted, slice.at);
    ASSERT_EQ(static_cast<int64_t>(slice.slot_of.size()), parent.slots);
    // Every valid parent slot's position is in its slice slot; every slice
    // slot a thread holds is fed by one of its valid parent slots.
    for (int t = 0; t < threads; ++t) {
      std::vector<bool> fed(slice.slots, false);
      for (int64_t s = 0; s < parent.slots; ++s) {
        int64_t e = parent.at[t * parent.slots + s];
        int64_t j = slice.slot_of[s];
        ASSERT_LT(j, slice.slots);
        if (e < 0) continue;
        ASSERT_EQ(slice.at[t * slice.slots + j], drop_axis(shape, axis, e)) << "thread " << t << " slot " << s;
        fed[j] = true;
      }
      for (int64_t j = 0; j < slice.slots; ++j) {
        EXPECT_EQ(slice.at[t * slice.slots + j] >= 0, fed[j]) << "thread " << t << " slot " << j;
      }
    }
    // A slot holds one position per thread: at most as many slots as the parent.
    EXPECT_LE(slice.slots, parent.slots);
    if (slice.holders) {
      if ((*slice.holders & ~31) != 0) {
        ++over_warps;
      } else {
        ++butterflies;
      }
      EXPECT_EQ(slice.butterfly, *slice.holders & ~31 ? std::nullopt : slice.holders);
      check_combine(slice, parent.at, parent.slots, shape, axis, gen);
    } else {
      EXPECT_FALSE(slice.butterfly.has_value());
    }
  }
  EXPECT_GT(butterflies, 30);
  EXPECT_GT(butterflies + over_warps, 40);
}

// `part` (a narrow_layout table) against its parent's elements, given as
// parent(thread, slot) (-1 for none): each slot holds what the parent slot
// it reads holds where that lies in the part (none elsewhere), as the IR
// computes it too, and every element of the part is held somewhere.
void check_part(const LayoutTable& part, const std::function<int64_t(int, int64_t)>& parent,
                const std::vector<int64_t>& shape, int axis, int64_t start, int64_t size) {
  ASSERT_EQ(part.emitted, part.at);
  ASSERT_EQ(static_cast<int64_t>(part.slot_of.size()), part.slots);
  int64_t inner = 1;
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t n = shape[axis];
  std::vector<bool> held(product(shape) / n * size, false);
  for (int t = 0; t < part.threads; ++t) {
    for (int64_t j = 0; j < part.slots; ++j) {
      const int64_t e = parent(t, part.slot_of[j]), along = e / inner % n - start;
      const int64_t want =
          e < 0 || along < 0 || along >= size ? -1 : (e / (n * inner) * size + along) * inner + e % inner;
      ASSERT_EQ(part.at[t * part.slots + j], want) << "thread " << t << " slot " << j;
      if (want >= 0) held[want] = true;
    }
  }
  EXPECT_EQ(std::count(held.begin(), held.end(), false), 0);
}

TEST(Layout, NarrowKeepsThePartInItsParentsRegisters) {
  std::mt19937 gen(std::random_device{}());
  for (int trial = 0; trial < 300; ++trial) {
    RandomTile c = random_tile(gen, 8);
    const int64_t n = c.shape[c.axis], size = 1 + gen() % n, start = gen() % (n - size + 1);
    SCOPED_TRACE(::testing::Message() << c.trace << " part " << start << " + " << size);
    LayoutTable parent = tabulate_blocked(product(c.shape), c.threads, c.k, 32);
    LayoutTable part = tabulate_narrow(c.shape, c.axis, start, size, c.threads, c.k, 32);
    EXPECT_FALSE(part.own_kind);
    EXPECT_LE(part.slots, parent.slots);
    check_part(
        part, [&](int t, int64_t s) { return parent.at[t * parent.slots + s]; }, c.shape, c.axis, start, size);
  }
}

// Whole 8-column blocks of an accumulator whose warpgroups hold every column
// are a fragment of their own (which stmatrix stores); other parts are held
// as a NarrowLayout, in the same registers.
TEST(Layout, AccumulatorColumnBlocksNarrowToAFragment) {
  struct Case {
    int64_t m, n;
    int warpgroups, col_groups, axis;
    int64_t start, size;
    bool fragment;
  };
  for (const Case& c : {Case{128, 192, 2, 1, 1, 0, 96, true}, Case{128, 192, 2, 1, 1, 96, 96, true},
                        Case{64, 256, 1, 1, 1, 128, 128, true}, Case{256, 128, 2, 1, 1, 8, 24, true},
                        Case{128, 192, 2, 1, 1, 4, 96, false}, Case{128, 192, 2, 1, 0, 64, 64, false},
                        Case{128, 256, 2, 2, 1, 0, 128, false}}) {
    SCOPED_TRACE(::testing::Message() << c.m << " x " << c.n << " on " << c.warpgroups << " in " << c.col_groups
                                      << ", axis " << c.axis << " part " << c.start << " + " << c.size);
    LayoutTable part = tabulate_narrow_accumulator(c.m, c.n, c.warpgroups, c.col_groups, c.axis, c.start, c.size);
    EXPECT_EQ(part.own_kind, c.fragment);
    check_part(
        part, [&](int t, int64_t s) { return nvptx::wgmma_accumulator_element(c.n, c.warpgroups, t, s, c.col_groups); },
        {c.m, c.n}, c.axis, c.start, c.size);
  }
}

// A concat's layout holds a's elements, then b's, each where the result
// has it, as its parts' layouts hold them: every element of the result
// once, as the IR computes it too.
TEST(Layout, ConcatHoldsBothPartsWhereTheResultHasThem) {
  std::mt19937 gen(std::random_device{}());
  for (int trial = 0; trial < 200; ++trial) {
    RandomTile c = random_tile(gen, 4);
    const int64_t b_size = 1 + gen() % 9;
    std::vector<int64_t> b_shape = c.shape;
    b_shape[c.axis] = b_size;
    const Blocking b_blocking = {.per_thread = 1};
    SCOPED_TRACE(::testing::Message() << c.trace << " b along the axis " << b_size);
    LayoutTable a = tabulate_blocked(product(c.shape), c.threads, c.k, 32);
    LayoutTable b = tabulate_blocked(product(b_shape), c.threads, b_blocking, 32);
    LayoutTable t = tabulate_concat(c.shape, b_size, c.axis, c.threads, c.k, b_blocking, 32);
    ASSERT_EQ(t.emitted, t.at);
    ASSERT_EQ(t.slots, a.slots + b.slots);
    int64_t inner = 1;
    for (size_t d = c.axis + 1; d < c.shape.size(); ++d) inner *= c.shape[d];
    const int64_t na = c.shape[c.axis], n = na + b_size;
    std::vector<int> held(product(c.shape) / na * n, 0);
    for (int th = 0; th < c.threads; ++th) {
      for (int64_t s = 0; s < t.slots; ++s) {
        const bool in_a = s < a.slots;
        const int64_t e = in_a ? a.at[th * a.slots + s] : b.at[th * b.slots + s - a.slots];
        const int64_t run = (in_a ? na : b_size) * inner;
        const int64_t want = e < 0 ? -1 : e / run * n * inner + (in_a ? 0 : na * inner) + e % run;
        ASSERT_EQ(t.at[th * t.slots + s], want) << "thread " << th << " slot " << s;
        if (want >= 0) ++held[want];
      }
    }
    EXPECT_EQ(std::count(held.begin(), held.end(), 1), static_cast<int64_t>(held.size()));
  }
}

// Whether some slot of `m.from`, read in the thread whose index differs in
// bits below `warp`, holds slot `s` of `m.to` for every thread: brute force.
bool reachable(const MovesTable& m, int64_t s, int warp) {
  for (int64_t f = 0; f < m.from.slots; ++f) {
    for (int lanes = 0; lanes < warp; ++lanes) {
      bool all = true;
      for (int t = 0; t < m.to.threads && all; ++t) {
        const int64_t e = m.to.at[t * m.to.slots + s];
        all = e < 0 || ((t ^ lanes) < m.from.threads && m.from.at[(t ^ lanes) * m.from.slots + f] == e);
      }
      if (all) return true;
    }
  }
  return false;
}

void check_moves(const MovesTable& m, int warp) {
  if (!m.moves.has_value()) {
    bool some_unreachable = false;
    for (int64_t s = 0; s < m.to.slots && !some_unreachable; ++s) some_unreachable = !reachable(m, s, warp);
    EXPECT_TRUE(some_unreachable) << "every slot has a source, but none was found";
    return;
  }
  ASSERT_EQ(static_cast<int64_t>(m.moves->size()), m.to.slots);
  for (int64_t s = 0; s < m.to.slots; ++s) {
    const std::vector<std::pair<int64_t, int>>& sources = (*m.moves)[s];
    ASSERT_TRUE(sources.size() == 1 || sources.size() == 2) << sources.size();
    for (int t = 0; t < m.to.threads; ++t) {
      const int64_t e = m.to.at[t * m.to.slots + s];
      if (e < 0) continue;
      // The first source whose slot holds an element where it is read.
      int64_t got = -1;
      for (const auto& [f, lanes] : sources) {
        ASSERT_LT(lanes, warp);
        got = m.from.at[(t ^ lanes) * m.from.slots + f];
        if (got >= 0) break;
      }
      ASSERT_EQ(got, e) << "thread " << t << " slot " << s;
    }
  }
}

// A tile reaches another layout in registers where every slot's element
// lies in a fixed slot of a fixed lane partner within the warp, or in one
// of two such where the other holds nothing: then register_moves says
// where, and where no single source serves a slot it may find nothing.
TEST(Layout, RegisterMovesFindEverySourceWithinAWarp) {
  std::mt19937 gen(std::random_device{}());
  int found = 0;
  for (int trial = 0; trial < 200; ++trial) {
    RandomTile c = random_tile(gen, 8);
    SCOPED_TRACE(c.trace);
    if (c.shape[c.axis] >= 2) {
      const MovesTable halves = moves_from_swapped_halves(c.shape, c.axis, c.threads, c.k, 32);
      check_moves(halves, 32);
      found += halves.moves.has_value();
    }
    RandomTile other = random_tile(gen, 8);
    Blocking to = other.k;
    to.per_thread = static_cast<int>(std::min<int64_t>(to.per_thread, product(c.shape) / c.threads));
    if (to.inner != 0 && (c.shape.back() != to.inner || to.inner % to.per_thread != 0)) to = {.per_thread = 1};
    SCOPED_TRACE(::testing::Message() << "to per_thread " << to.per_thread << " inner " << to.inner);
    check_moves(moves_between_blocked(product(c.shape), c.threads, c.k, to, 32), 32);
  }
  EXPECT_GT(found, 0);
  // rotate_half of [32, 128] f32 rows held by 32 lanes in runs of four:
  // each half's run is 16 lanes away, in a slot of the concat's first part
  // for lanes 0-15 and of its second for lanes 16-31.
  const MovesTable rope =
      moves_from_swapped_halves({32, 128}, 1, 128, {.per_thread = 4, .inner = 128, .threads_inner = 32}, 32);
  ASSERT_TRUE(rope.moves.has_value());
  for (const std::vector<std::pair<int64_t, int>>& sources : *rope.moves) {
    ASSERT_EQ(sources.size(), 2u);
    EXPECT_EQ(sources[0].second, 16);
    EXPECT_EQ(sources[1].second, 16);
  }
  // The same layout: each slot its own register.
  const MovesTable same = moves_between_blocked(4096, 128, {.per_thread = 4}, {.per_thread = 4}, 32);
  ASSERT_TRUE(same.moves.has_value());
  for (int64_t s = 0; s < same.to.slots; ++s) {
    EXPECT_EQ((*same.moves)[s], (std::vector<std::pair<int64_t, int>>{{s, 0}}));
  }
  // Runs of four to single elements: element e moves from thread e / 4 to
  // thread e % 128, no fixed lane partner.
  EXPECT_FALSE(moves_between_blocked(4096, 128, {.per_thread = 4}, {.per_thread = 1}, 32).moves.has_value());
}

TEST(Layout, PositionsCombineOverTheThreadsThatHoldThem) {
  // [16, 64] f32 in runs of 4 over 128 threads: 16 lanes per row.
  LayoutTable rows = tabulate_slice({16, 64}, 1, 128, {.per_thread = 4}, 32);
  ASSERT_TRUE(rows.butterfly.has_value());
  EXPECT_EQ(*rows.butterfly, 15);
  EXPECT_EQ(rows.slots, 2);  // the two rows a thread touches, not its eight elements
  // Columns of the same tile: lanes 0-15 of every warp hold them, so a
  // column spreads over warps (and lane bit 4).
  LayoutTable columns_over_warps = tabulate_slice({16, 64}, 0, 128, {.per_thread = 4}, 32);
  EXPECT_FALSE(columns_over_warps.butterfly.has_value());
  EXPECT_EQ(columns_over_warps.holders, 16 | 32 | 64);
  // [4, 256] over 128 threads, one per step: each column has one holder.
  LayoutTable columns = tabulate_slice({4, 256}, 0, 128, {.per_thread = 1}, 32);
  ASSERT_TRUE(columns.butterfly.has_value());
  EXPECT_EQ(*columns.butterfly, 0);
  // Rows of 1024 span all four warps: lanes 0-31 and warps 0-3 hold each.
  LayoutTable wide = tabulate_slice({4, 1024}, 1, 128, {.per_thread = 4}, 32);
  EXPECT_FALSE(wide.butterfly.has_value());
  EXPECT_EQ(wide.holders, 127);
  std::mt19937 gen(std::random_device{}());
  LayoutTable wide_parent = tabulate_blocked(4 * 1024, 128, {.per_thread = 4}, 32);
  check_combine(wide, wide_parent.at, wide_parent.slots, {4, 1024}, 1, gen);
  LayoutTable columns_parent = tabulate_blocked(16 * 64, 128, {.per_thread = 4}, 32);
  check_combine(columns_over_warps, columns_parent.at, columns_parent.slots, {16, 64}, 0, gen);
  // The same rows a warp each: one slot per thread, a butterfly over the lanes.
  Blocking by_warp{.per_thread = 4, .inner = 1024, .threads_inner = 32};
  LayoutTable warp_rows = tabulate_slice({4, 1024}, 1, 128, by_warp, 32);
  EXPECT_EQ(warp_rows.butterfly, 31);
  EXPECT_EQ(warp_rows.slots, 1);
  check_combine(warp_rows, tabulate_blocked(4 * 1024, 128, by_warp, 32).at, 32, {4, 1024}, 1, gen);
  // Rows of 5 over 4 threads: one thread holds parts of row 0 in two slots.
  EXPECT_FALSE(tabulate_slice({3, 5}, 1, 4, {.per_thread = 1}, 32).holders.has_value());
  // Without warps only thread-local positions combine.
  EXPECT_FALSE(tabulate_slice({16, 64}, 1, 128, {.per_thread = 4}, 1).butterfly.has_value());
}

// A scan along `axis` of a tile of `shape` in blocked layout `k` by `plan`,
// as a GPU would run it on random integers (sums, wrapping): each thread's
// chunks, the butterfly over the holder lanes, the exchange over the holder
// warps and the rounds in turn. Checks every element's prefix.
void check_scan(const ScanPlan& plan, const std::vector<int64_t>& shape, int axis, int threads, Blocking k,
                bool reverse, std::mt19937& gen) {
  const LayoutTable table = tabulate_blocked(product(shape), threads, k, 32);
  const int64_t slots = table.slots, lines = static_cast<int64_t>(plan.slots.size()), chunks = lines * plan.rounds;
  std::vector<uint64_t> value(product(shape)), want(product(shape));
  for (uint64_t& v : value) v = gen();
  int64_t inner = 1;
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t n = shape[axis];
  for (int64_t line = 0; line < product(shape) / n; ++line) {
    uint64_t acc = 0;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t i = reverse ? n - 1 - j : j, e = (line / inner * n + i) * inner + line % inner;
      want[e] = acc += value[e];
    }
  }
  std::vector<uint64_t> out(threads * slots), total(threads * chunks), before(threads * chunks, 0);
  for (int t = 0; t < threads; ++t) {
    for (int64_t g = 0; g < lines; ++g) {
      for (int64_t r = 0; r < plan.rounds; ++r) {
        uint64_t acc = 0;
        for (int64_t j = 0; j < plan.run; ++j) {
          const int64_t s = plan.slots[g][r][reverse ? plan.run - 1 - j : j];
          out[t * slots + s] = acc += value[table.at[t * slots + s]];
        }
        total[t * chunks + g * plan.rounds + r] = acc;
      }
    }
  }
  const int lanes = plan.holder_bits & 31, warps = plan.holder_bits & ~31;
  for (int bit = 1; bit <= lanes; bit *= 2) {
    if ((lanes & bit) == 0) continue;
    const std::vector<uint64_t> was = total;
    for (int t = 0; t < threads; ++t) {
      const bool partner_first = ((t & bit) != 0) != reverse;
      for (int64_t c = 0; c < chunks; ++c) {
        const uint64_t theirs = was[(t ^ bit) * chunks + c];
        if (partner_first) before[t * chunks + c] += theirs;
        total[t * chunks + c] += theirs;
      }
    }
  }
  if (warps != 0) {
    const std::vector<uint64_t> was = total;
    for (int t = 0; t < threads; ++t) {
      for (int64_t c = 0; c < chunks; ++c) {
        uint64_t earlier = 0, all = 0;
        for (int m = warps;; m = (m - 1) & warps) {
          const uint64_t theirs = was[((t & ~warps) | m) * chunks + c];
          if (reverse ? m > (t & warps) : m < (t & warps)) earlier += theirs;
          all += theirs;
          if (m == 0) break;
        }
        before[t * chunks + c] += earlier;
        total[t * chunks + c] = all;
      }
    }
  }
  for (int t = 0; t < threads; ++t) {
    for (int64_t g = 0; g < lines; ++g) {
      uint64_t carry = 0;
      for (int64_t step = 0; step < plan.rounds; ++step) {
        const int64_t r = reverse ? plan.rounds - 1 - step : step, c = t * chunks + g * plan.rounds + r;
        for (int64_t s : plan.slots[g][r]) {
          ASSERT_EQ(out[t * slots + s] + carry + before[c], want[table.at[t * slots + s]])
              << "thread " << t << " slot " << s;
        }
        carry += total[c];
      }
    }
  }
}

TEST(Layout, ScanPlansGiveEveryPrefix) {
  std::mt19937 gen(std::random_device{}());
  int planned = 0, over_warps = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const auto [shape, axis, threads, k, trace] = random_tile(gen, /*max_run=*/4);
    SCOPED_TRACE(trace);
    std::optional<ScanPlan> plan = scan_plan_of_blocked(shape, axis, threads, k);
    if (!plan.has_value()) continue;
    ++planned;
    over_warps += (plan->holder_bits & ~31) != 0;
    for (bool reverse : {false, true}) check_scan(*plan, shape, axis, threads, k, reverse, gen);
  }
  EXPECT_GT(planned, 150);
  EXPECT_GT(over_warps, 30);
}

TEST(Layout, ScanPlansOfCommonTiles) {
  // [1024] in runs of 4 over 128 threads: every thread holds two chunks.
  std::optional<ScanPlan> flat = scan_plan_of_blocked({1024}, 0, 128, {.per_thread = 4});
  ASSERT_TRUE(flat.has_value());
  EXPECT_EQ(flat->holder_bits, 127);
  EXPECT_EQ(flat->run, 4);
  EXPECT_EQ(flat->rounds, 2);
  // Rows of 1024 a warp each: a butterfly over the lanes, eight rounds.
  std::optional<ScanPlan> rows =
      scan_plan_of_blocked({4, 1024}, 1, 128, {.per_thread = 4, .inner = 1024, .threads_inner = 32});
  ASSERT_TRUE(rows.has_value());
  EXPECT_EQ(rows->holder_bits, 31);
  EXPECT_EQ(rows->rounds, 8);
  // Columns of [16, 64] in runs of 4: four columns a thread, rows over the
  // threads' bits 4 to 6, twice.
  std::optional<ScanPlan> columns = scan_plan_of_blocked({16, 64}, 0, 128, {.per_thread = 4});
  ASSERT_TRUE(columns.has_value());
  EXPECT_EQ(columns->holder_bits, 16 | 32 | 64);
  EXPECT_EQ(columns->slots.size(), 4u);
  EXPECT_EQ(columns->run, 1);
  EXPECT_EQ(columns->rounds, 2);
  // Fewer elements than threads: some threads hold none, so no plan.
  EXPECT_FALSE(scan_plan_of_blocked({64}, 0, 128, {.per_thread = 1}).has_value());
}

// Runs the bitonic network of `plan` on random keys (many equal) as a GPU
// would: merges of blocks of 2^level positions, ascending where bit level
// of the position is clear, each in steps over bits level-1 down to 0 whose
// pairs lie in one thread's slots or in one slot of two threads. Checks
// that every line comes out in order and holds what went in.
void check_sort(const SortPlan& plan, const std::vector<int64_t>& shape, int axis, int threads, Blocking k,
                std::mt19937& gen) {
  const LayoutTable table = tabulate_blocked(product(shape), threads, k, 32);
  const int64_t slots = table.slots, n = shape[axis];
  const int m = static_cast<int>(plan.bits.size());
  ASSERT_EQ(int64_t{1} << m, n);
  int64_t inner = 1;
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  std::vector<uint64_t> key(threads * slots);
  for (uint64_t& v : key) v = gen() % 8;
  const std::vector<uint64_t> in = key;
  auto ascending = [&](int t, int64_t s, int level) {
    return level == m || (table.at[t * slots + s] / inner >> level & 1) == 0;
  };
  for (int level = 1; level <= m; ++level) {
    for (int h = level - 1; h >= 0; --h) {
      const SortBit& bit = plan.bits[h];
      std::vector<uint64_t> next = key;
      for (int t = 0; t < threads; ++t) {
        if (bit.threads == 0) {
          for (const auto& [lo, hi] : bit.pairs) {
            const uint64_t a = key[t * slots + lo], b = key[t * slots + hi];
            const bool up = ascending(t, lo, level);
            next[t * slots + lo] = up ? std::min(a, b) : std::max(a, b);
            next[t * slots + hi] = up ? std::max(a, b) : std::min(a, b);
          }
          continue;
        }
        const bool lower = (t & bit.threads) == 0;
        for (int64_t s = 0; s < slots; ++s) {
          const uint64_t mine = key[t * slots + s], theirs = key[(t ^ bit.threads) * slots + s];
          next[t * slots + s] = lower == ascending(t, s, level) ? std::min(mine, theirs) : std::max(mine, theirs);
        }
      }
      key = next;
    }
  }
  // Each line's keys by position, before and after.
  std::vector<std::vector<uint64_t>> before(product(shape) / n, std::vector<uint64_t>(n));
  std::vector<std::vector<uint64_t>> after = before;
  for (int64_t i = 0; i < threads * slots; ++i) {
    const int64_t e = table.at[i];
    before[drop_axis(shape, axis, e)][e / inner % n] = in[i];
    after[drop_axis(shape, axis, e)][e / inner % n] = key[i];
  }
  for (size_t line = 0; line < before.size(); ++line) {
    std::sort(before[line].begin(), before[line].end());
    ASSERT_EQ(after[line], before[line]) << "line " << line;
  }
}

TEST(Layout, SortPlansSortEveryLine) {
  std::mt19937 gen(std::random_device{}());
  int planned = 0, over_warps = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const auto [shape, axis, threads, k, trace] = random_tile(gen, /*max_run=*/32);
    SCOPED_TRACE(trace);
    std::optional<SortPlan> plan = sort_plan_of_blocked(shape, axis, threads, k);
    if (!plan.has_value()) continue;
    ++planned;
    for (const SortBit& bit : plan->bits) over_warps += bit.threads >= 32;
    check_sort(*plan, shape, axis, threads, k, gen);
  }
  EXPECT_GT(planned, 150);
  EXPECT_GT(over_warps, 30);
}

TEST(Layout, SortPlansOfCommonTiles) {
  // Rows of 1024 a warp each, 32 consecutive elements a thread: bits 0 to
  // 4 of a position pair slots, bits 5 to 9 lanes.
  std::optional<SortPlan> warp_rows =
      sort_plan_of_blocked({8, 1024}, 1, 256, {.per_thread = 32, .inner = 1024, .threads_inner = 32});
  ASSERT_TRUE(warp_rows.has_value());
  ASSERT_EQ(warp_rows->bits.size(), 10u);
  for (int h = 0; h < 5; ++h) {
    EXPECT_EQ(warp_rows->bits[h].threads, 0);
    EXPECT_EQ(warp_rows->bits[h].pairs.size(), 16u);
  }
  EXPECT_EQ(warp_rows->bits[0].pairs[0], std::make_pair(int64_t{0}, int64_t{1}));
  EXPECT_EQ(warp_rows->bits[4].pairs[1], std::make_pair(int64_t{1}, int64_t{17}));
  for (int h = 5; h < 10; ++h) EXPECT_EQ(warp_rows->bits[h].threads, 1 << (h - 5));
  // Rows over two warps: the top bit pairs warps.
  std::optional<SortPlan> two_warps =
      sort_plan_of_blocked({8, 1024}, 1, 512, {.per_thread = 16, .inner = 1024, .threads_inner = 64});
  ASSERT_TRUE(two_warps.has_value());
  EXPECT_EQ(two_warps->bits[9].threads, 32);
  // Columns: rows over threads' bits 4 to 6, then slots.
  std::optional<SortPlan> columns = sort_plan_of_blocked({16, 64}, 0, 128, {.per_thread = 4});
  ASSERT_TRUE(columns.has_value());
  EXPECT_EQ(columns->bits[0].threads, 16);
  EXPECT_EQ(columns->bits[3].threads, 0);
  // Lines not of a power of two, or fewer elements than threads: no plan.
  EXPECT_FALSE(sort_plan_of_blocked({4, 96}, 1, 128, {.per_thread = 1}).has_value());
  EXPECT_FALSE(sort_plan_of_blocked({64}, 0, 128, {.per_thread = 1}).has_value());
}

}  // namespace
}  // namespace tessel::codegen
