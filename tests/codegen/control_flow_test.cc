// Structured control flow on the host target: for_range with Vars (scalar
// and tile) and with explicit carried values, nested loops, if_ inside
// loops, steps > 1 and loops that run zero times, while_ loops, the
// persistent for_each_tile loop, and program ids on 1-, 2- and 3-D grids.
#include <algorithm>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include "tests/codegen/host_test_util.h"

namespace tessel::testing {
namespace {

constexpr int kRows = 64, kCols = 16;

// for (i = lo; i < hi; i += step) over rows of a [64, 16] i32 matrix, with
// scalar Vars (i32, f64) and a tile Var, and a second loop with i64 bounds;
// launched with several bounds per compile, including steps > 1, empty
// ranges and negative steps (which run no iteration).
TEST(ForRange, VarsAccumulateScalarsAndTiles) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  KernelBuilder k("for_vars");
  Value x = k.arg(ptr(i32), "x"), out = k.arg(ptr(i32), "out"), fout = k.arg(ptr(f64), "fout");
  Value lo = k.arg(i32, "lo"), hi = k.arg(i32, "hi"), step = k.arg(i32, "step");
  Value lo64 = k.arg(i64, "lo64"), hi64 = k.arg(i64, "hi64");
  Var acc = k.var(0);                       // i32
  Var count = k.var(0);                     // i32
  Var half = k.var(k.constant(0.0, f64));   // f64
  Var rows = k.var(k.zeros({kCols}, i32));  // [16] i32
  Value cols = k.arange(0, kCols);
  k.for_range(lo, hi, step, [&](Value i) {
    acc = acc + load(x + i * kCols);
    count = count + 1;
    half = half + cast(i, f64) * 0.5;
    rows = rows + load(x + i * kCols + cols);
  });
  Var sum64 = k.var(k.constant(0, i64));
  k.for_range(lo64, hi64, 1, [&](Value i) { sum64 = sum64 + i * i; });
  store(out, acc);
  store(out + 1, count);
  store(out + 2 + cols, rows);
  store(fout, half);
  store(fout + 1, cast(sum64, f64));

  absl::StatusOr<Function> fn = compile(k);
  TESSEL_ASSERT_OK(fn.status());
  std::vector<int32_t> xs = make_vector<int32_t>(kRows * kCols, [&] { return int32_t(rng.uniform(-1000, 1000)); });
  struct Bounds {
    int lo, hi, step;
  };
  std::vector<Bounds> bounds = {{0, kRows, 1}, {5, 5, 1}, {9, 3, 1}, {0, kRows, -1}, {0, 10, 0}, {3, 60, 7}};
  for (int r = 0; r < 4; ++r) {
    const int a = static_cast<int>(rng.uniform(0, kRows)), b = static_cast<int>(rng.uniform(0, kRows));
    bounds.push_back({a, b, static_cast<int>(rng.uniform(1, 5))});
  }
  for (const Bounds& bd : bounds) {
    SCOPED_TRACE(absl::StrCat("for i in [", bd.lo, ", ", bd.hi, ") step ", bd.step));
    const int64_t lo64_value = rng.uniform(-1000, 1000), hi64_value = lo64_value + rng.uniform(-2, 50);
    std::vector<int32_t> got = poisoned<int32_t>(2 + kCols + 1);
    std::vector<double> got_f = poisoned<double>(3);
    TESSEL_ASSERT_OK(
        fn->launch({}, xs.data(), got.data(), got_f.data(), bd.lo, bd.hi, bd.step, lo64_value, hi64_value));
    int32_t want_acc = 0, want_count = 0;
    double want_half = 0;
    std::vector<int32_t> want_rows(kCols, 0);
    for (int i = bd.lo; bd.step > 0 && i < bd.hi; i += bd.step) {
      want_acc += xs[i * kCols];
      ++want_count;
      want_half += i * 0.5;
      for (int c = 0; c < kCols; ++c) want_rows[c] += xs[i * kCols + c];
    }
    int64_t want_sum64 = 0;
    for (int64_t i = lo64_value; i < hi64_value; ++i) want_sum64 += i * i;
    EXPECT_EQ(got[0], want_acc);
    EXPECT_EQ(got[1], want_count);
    EXPECT_EQ(std::vector<int32_t>(got.begin() + 2, got.end() - 1), want_rows);
    EXPECT_TRUE(is_poison(got.back()));
    EXPECT_EQ(got_f[0], want_half);
    EXPECT_EQ(got_f[1], static_cast<double>(want_sum64));
    EXPECT_TRUE(is_poison(got_f[2]));
  }
}

// Induction variables of narrow or near-maximal types: i + step would wrap
// in the bounds' type, yet the loop stops at hi.
TEST(ForRange, InductionVariablesDoNotWrap) {
  KernelBuilder k("for_narrow");
  Value out = k.arg(ptr(i64), "out");
  Value lo8 = k.arg(i8, "lo8"), lo_u8 = k.arg(u8, "lo_u8"), lo32 = k.arg(i32, "lo32");
  Var s8 = k.var(k.constant(0, i64)), su8 = k.var(k.constant(0, i64)), s32 = k.var(k.constant(0, i64));
  k.for_range(lo8, 127, 5, [&](Value i) { s8 = s8 + cast(i, i64); });
  k.for_range(lo_u8, 255, 4, [&](Value i) { su8 = su8 + cast(i, i64); });
  k.for_range(lo32, 2147483647, 7, [&](Value i) { s32 = s32 + cast(i, i64); });
  store(out, s8);
  store(out + 1, su8);
  store(out + 2, s32);
  std::vector<int64_t> got = poisoned<int64_t>(3);
  TESSEL_ASSERT_OK(run(k, 1, got.data(), int8_t{118}, uint8_t{246}, int32_t{2147483647 - 20}));
  EXPECT_EQ(got[0], 118 + 123);
  EXPECT_EQ(got[1], 246 + 250 + 254);
  EXPECT_EQ(got[2], int64_t{3} * (2147483647 - 20) + 7 + 14);
}

// Values stepped alike every iteration, which the builder closes into
// start + index * amount (dsl/passes.h): a pointer tile read a row every
// other iteration and one stored through and read after the loop, an i32
// counter and a u8 one that wraps, in a loop from 3 by 2; and a counter in
// a loop of i8 bounds whose distance does not fit i8.
TEST(ForRange, SteppedValuesAreWhatTheirStepsMake) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  KernelBuilder k("stepped");
  Value x = k.arg(ptr(i32), "x"), out = k.arg(ptr(i32), "out"), rows_out = k.arg(ptr(i32), "rows_out");
  Value hi = k.arg(i32, "hi"), lo8 = k.arg(i8, "lo8");
  Value cols = k.arange(0, kCols);
  Var p = k.var(x + cols), q = k.var(rows_out + cols), sum = k.var(k.zeros({kCols}, i32));
  Var count = k.var(7), wrap = k.var(k.constant(250, u8));
  k.for_range(3, hi, 2, [&](Value) {
    sum = sum + load(p) * count + cast(wrap, i32);
    store(q, sum);
    p = Value(p) + 2 * kCols;
    q = Value(q) + kCols;
    count = count + 5;
    wrap = wrap + k.constant(3, u8);
  });
  store(q, k.full({kCols}, -1, i32));
  store(out + cols, sum);
  Var n8 = k.var(0), seen = k.var(-1);
  k.for_range(lo8, 127, 1, [&](Value) {
    seen = maximum(seen, n8);
    n8 = n8 + 1;
  });
  store(out + kCols, seen);

  absl::StatusOr<Function> fn = compile(k);
  TESSEL_ASSERT_OK(fn.status());
  std::vector<int32_t> xs = make_vector<int32_t>(kRows * kCols, [&] { return int32_t(rng.uniform(-1000, 1000)); });
  for (auto [hi_value, lo8_value] : std::vector<std::pair<int, int8_t>>{{66, -128}, {4, 100}, {3, 127}, {20, 0}}) {
    SCOPED_TRACE(absl::StrCat("hi ", hi_value, ", lo8 ", lo8_value));
    std::vector<int32_t> got = poisoned<int32_t>(kCols + 2), rows = poisoned<int32_t>((kRows + 1) * kCols);
    TESSEL_ASSERT_OK(fn->launch({}, xs.data(), got.data(), rows.data(), hi_value, lo8_value));
    std::vector<int32_t> want(kCols, 0), want_rows(rows.size(), 0);
    int j = 0;
    for (int i = 3; i < hi_value; i += 2, ++j) {
      for (int c = 0; c < kCols; ++c) {
        want[c] += xs[2 * j * kCols + c] * (7 + 5 * j) + (250 + 3 * j) % 256;
        want_rows[j * kCols + c] = want[c];
      }
    }
    for (int c = 0; c < kCols; ++c) want_rows[j * kCols + c] = -1;
    EXPECT_EQ(std::vector<int32_t>(got.begin(), got.begin() + kCols), want);
    EXPECT_EQ(got[kCols], 127 - lo8_value - 1);
    EXPECT_TRUE(is_poison(got[kCols + 1]));
    EXPECT_EQ(std::vector<int32_t>(rows.begin(), rows.begin() + (j + 1) * kCols),
              std::vector<int32_t>(want_rows.begin(), want_rows.begin() + (j + 1) * kCols));
    for (size_t e = (j + 1) * kCols; e < rows.size(); ++e) EXPECT_TRUE(is_poison(rows[e])) << e;
  }
}

// Explicit loop-carried values: (a, b) -> (b, a + b) for i64 scalars and
// for i32 tiles, so the tiles swap buffers every iteration.
TEST(ForRange, ExplicitCarriedValuesSwap) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  constexpr int kN = 8;
  KernelBuilder k("for_carried");
  Value t0 = k.arg(ptr(i32), "t0"), t1 = k.arg(ptr(i32), "t1"), out = k.arg(ptr(i32), "out");
  Value out64 = k.arg(ptr(i64), "out64"), n = k.arg(i32, "n");
  Value idx = k.arange(0, kN);
  std::vector<Value> inits = {k.constant(0, i64), k.constant(1, i64), load(t0 + idx), load(t1 + idx)};
  std::vector<Value> r = k.for_range(0, n, 1, inits, [&](Value, std::span<const Value> c) {
    return std::vector<Value>{c[1], c[0] + c[1], c[3], c[2] + c[3]};
  });
  store(out64, r[0]);
  store(out64 + 1, r[1]);
  store(out + idx, r[2]);
  store(out + kN + idx, r[3]);

  absl::StatusOr<Function> fn = compile(k);
  TESSEL_ASSERT_OK(fn.status());
  std::vector<int32_t> a0 = make_vector<int32_t>(kN, [&] { return int32_t(rng.uniform(-9, 9)); });
  std::vector<int32_t> b0 = make_vector<int32_t>(kN, [&] { return int32_t(rng.uniform(-9, 9)); });
  for (int n_value : {0, 1, 2, static_cast<int>(rng.uniform(3, 60))}) {
    SCOPED_TRACE(absl::StrCat(n_value, " iterations"));
    std::vector<int32_t> got = poisoned<int32_t>(2 * kN);
    std::vector<int64_t> got64 = poisoned<int64_t>(2);
    TESSEL_ASSERT_OK(fn->launch({}, a0.data(), b0.data(), got.data(), got64.data(), n_value));
    int64_t a = 0, b = 1;
    std::vector<uint32_t> ta(a0.begin(), a0.end()), tb(b0.begin(), b0.end());
    for (int i = 0; i < n_value; ++i) {
      std::tie(a, b) = std::pair{b, a + b};
      for (int e = 0; e < kN; ++e) std::tie(ta[e], tb[e]) = std::pair{tb[e], ta[e] + tb[e]};
    }
    EXPECT_EQ(got64[0], a);
    EXPECT_EQ(got64[1], b);
    for (int e = 0; e < kN; ++e) {
      EXPECT_EQ(got[e], static_cast<int32_t>(ta[e])) << e;
      EXPECT_EQ(got[kN + e], static_cast<int32_t>(tb[e])) << e;
    }
  }
}

// A triangular nest: the inner bound depends on the outer index; the outer
// loop carries a tile Var, and the inner loops a scalar and a tile Var
// declared outside both.
TEST(ForRange, NestedLoopsCarryOuterAndInnerVars) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  KernelBuilder k("for_nested");
  Value x = k.arg(ptr(i32), "x"), out = k.arg(ptr(i32), "out"), rows_n = k.arg(i32, "rows");
  Value cols = k.arange(0, kCols);
  Var total = k.var(0);
  Var weighted = k.var(k.zeros({kCols}, i32));
  Var shifted = k.var(k.zeros({kCols}, i32));
  k.for_range(0, rows_n, 1, [&](Value i) {
    weighted = weighted + load(x + i * kCols + cols) * (i + 1);
    k.for_range(0, i + 1, 1, [&](Value j) {
      shifted = shifted + load(x + i * kCols + (cols + j) % kCols);
      k.for_range(0, 2, 1, [&](Value) { total = total + load(x + i * kCols + j % kCols); });
    });
  });
  store(out, total);
  store(out + 1 + cols, weighted);
  store(out + 1 + kCols + cols, shifted);

  const int rows = static_cast<int>(rng.uniform(0, kRows));
  std::vector<int32_t> xs = make_vector<int32_t>(kRows * kCols, [&] { return int32_t(rng.uniform(-99, 99)); });
  std::vector<int32_t> got = poisoned<int32_t>(2 + 2 * kCols);
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), got.data(), rows));
  int32_t want_total = 0;
  std::vector<int32_t> want(2 * kCols, 0);  // weighted, then shifted
  for (int i = 0; i < rows; ++i) {
    for (int c = 0; c < kCols; ++c) want[c] += xs[i * kCols + c] * (i + 1);
    for (int j = 0; j <= i; ++j) {
      want_total += 2 * xs[i * kCols + j % kCols];
      for (int c = 0; c < kCols; ++c) want[kCols + c] += xs[i * kCols + (c + j) % kCols];
    }
  }
  EXPECT_EQ(got[0], want_total);
  EXPECT_EQ(std::vector<int32_t>(got.begin() + 1, got.end() - 1), want);
  EXPECT_TRUE(is_poison(got.back()));
}

// if_ inside a loop assigns scalar and tile Vars in one or both branches,
// with an if_ nested in a branch and an if_ without else.
TEST(If, VarsAssignedInBranchesInsideLoops) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  KernelBuilder k("if_vars");
  Value x = k.arg(ptr(i32), "x"), out = k.arg(ptr(i32), "out"), n = k.arg(i32, "n");
  Value cols = k.arange(0, kCols);
  Var pos = k.var(0), neg = k.var(0), big = k.var(0), evens = k.var(0);
  Var pos_rows = k.var(k.zeros({kCols}, i32));
  k.for_range(0, n, 1, [&](Value i) {
    Value v = load(x + i * kCols);
    k.if_(
        v > 0,
        [&] {
          pos = pos + v;
          pos_rows = pos_rows + load(x + i * kCols + cols);
          k.if_(v > 500, [&] { big = big + 1; });
        },
        [&] { neg = neg + v; });
    k.if_(i % 2 == 0, [&] { evens = evens + 1; });
  });
  store(out, pos);
  store(out + 1, neg);
  store(out + 2, big);
  store(out + 3, evens);
  store(out + 4 + cols, pos_rows);

  const int n_value = static_cast<int>(rng.uniform(0, kRows));
  std::vector<int32_t> xs = make_vector<int32_t>(kRows * kCols, [&] { return int32_t(rng.uniform(-1000, 1000)); });
  std::vector<int32_t> got = poisoned<int32_t>(5 + kCols);
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), got.data(), n_value));
  std::vector<int32_t> want(4 + kCols, 0);
  for (int i = 0; i < n_value; ++i) {
    int32_t v = xs[i * kCols];
    if (v > 0) {
      want[0] += v;
      for (int c = 0; c < kCols; ++c) want[4 + c] += xs[i * kCols + c];
      want[2] += v > 500;
    } else {
      want[1] += v;
    }
    want[3] += i % 2 == 0;
  }
  EXPECT_EQ(std::vector<int32_t>(got.begin(), got.end() - 1), want);
  EXPECT_TRUE(is_poison(got.back()));
}

// while_: a Collatz walk per program (scalars, a test that reads them) and
// a tile halved until its largest element is below a bound (a tile carried
// in the loop, a test that reduces it), nested in a for_range; a Var the
// body leaves alone is not carried; loops that run zero times.
TEST(While, CarriesScalarsAndTilesUntilTheTestFails) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  KernelBuilder k("while_vars");
  Value starts = k.arg(ptr(i32), "starts"), x = k.arg(ptr(i32), "x"), out = k.arg(ptr(i32), "out");
  Value bound = k.arg(i32, "bound"), rounds = k.arg(i32, "rounds");
  Value p = k.program_id(), cols = k.arange(0, kCols);
  Var v = k.var(load(starts + p)), steps = k.var(0), top = k.var(0);
  Var same = k.var(7);  // never assigned: not carried
  k.while_([&] { return Value(v) > 1; },
           [&] {
             v = select(v % 2 == 0, v / 2, v * 3 + 1);
             steps = steps + 1;
             top = maximum(top, v);
           });
  Var row = k.var(load(x + p * kCols + cols)), halvings = k.var(0);
  k.for_range(0, rounds, 1, [&](Value) {
    k.while_([&] { return max(row, 0) >= bound; },
             [&] {
               row = row / 2;
               halvings = halvings + 1;
             });
    row = row * 3;
  });
  Value o = out + p * (3 + kCols + 2);
  store(o, steps);
  store(o + 1, top);
  store(o + 2, halvings);
  store(o + 3 + cols, row);
  store(o + 3 + kCols, same);

  absl::StatusOr<Function> fn = compile(k);
  TESSEL_ASSERT_OK(fn.status());
  const int programs = 6;
  std::vector<int32_t> start_values = {1, 0, 27, 97, static_cast<int32_t>(rng.uniform(2, 1000)), -5};
  std::vector<int32_t> xs = make_vector<int32_t>(programs * kCols, [&] { return int32_t(rng.uniform(0, 100000)); });
  for (int32_t bound_value : {1000, 1, 100001}) {
    for (int32_t rounds_value : {0, 1, 3}) {
      SCOPED_TRACE(absl::StrCat("bound ", bound_value, ", ", rounds_value, " rounds"));
      const int per = 3 + kCols + 2;
      std::vector<int32_t> got = poisoned<int32_t>(programs * per);
      TESSEL_ASSERT_OK(
          fn->launch({.grid = Grid(programs)}, start_values.data(), xs.data(), got.data(), bound_value, rounds_value));
      for (int q = 0; q < programs; ++q) {
        SCOPED_TRACE(absl::StrCat("program ", q));
        int32_t c = start_values[q], want_steps = 0, want_top = 0;
        while (c > 1) {
          c = c % 2 == 0 ? c / 2 : c * 3 + 1;
          ++want_steps;
          want_top = std::max(want_top, c);
        }
        std::vector<int32_t> want_row(xs.begin() + q * kCols, xs.begin() + (q + 1) * kCols);
        int32_t want_halvings = 0;
        for (int r = 0; r < rounds_value; ++r) {
          while (*std::max_element(want_row.begin(), want_row.end()) >= bound_value) {
            for (int32_t& e : want_row) e /= 2;
            ++want_halvings;
          }
          for (int32_t& e : want_row) e *= 3;
        }
        const int32_t* g = got.data() + q * per;
        EXPECT_EQ(g[0], want_steps);
        EXPECT_EQ(g[1], want_top);
        EXPECT_EQ(g[2], want_halvings);
        EXPECT_EQ(std::vector<int32_t>(g + 3, g + 3 + kCols), want_row);
        EXPECT_EQ(g[3 + kCols], 7);
        EXPECT_TRUE(is_poison(g[4 + kCols]));
      }
    }
  }
  Kernel kernel = *k.build();
  for (const Op& op : kernel.ir().ops) {
    if (op.op == OpCode::kWhile) {
      EXPECT_LE(op.results.size(), 3u) << "the Var the bodies leave alone is carried";
    }
  }
}

// for_each_tile: t = program_id; t < num_tiles; t += num_programs. Every tile
// is visited exactly once, by program t % grid, also with more programs
// than tiles and with no tiles at all.
TEST(ForEachTile, VisitsEveryTileOnceRoundRobin) {
  KernelBuilder k("persistent");
  Value visits = k.arg(ptr(i32), "visits"), owner = k.arg(ptr(i32), "owner"), tiles = k.arg(i32, "tiles");
  k.for_each_tile(tiles, [&](Value t) {
    atomic_add(visits + t, 1);
    store(owner + t, k.program_id());
  });
  absl::StatusOr<Function> fn = compile(k);
  TESSEL_ASSERT_OK(fn.status());
  for (auto [tiles_n, grid] : {std::pair{37, 5}, std::pair{3, 8}, std::pair{0, 4}, std::pair{64, 64}}) {
    SCOPED_TRACE(absl::StrCat(tiles_n, " tiles on ", grid, " programs"));
    std::vector<int32_t> v(tiles_n + 1, 0), o = poisoned<int32_t>(tiles_n + 1);
    TESSEL_ASSERT_OK(fn->launch({.grid = grid}, v.data(), o.data(), tiles_n));
    for (int t = 0; t < tiles_n; ++t) {
      EXPECT_EQ(v[t], 1) << "tile " << t;
      EXPECT_EQ(o[t], t % grid) << "tile " << t;
    }
    EXPECT_EQ(v[tiles_n], 0);
    EXPECT_TRUE(is_poison(o[tiles_n]));
  }
}

// Each program records its ids and the grid along all three axes.
TEST(ProgramId, CoversOneTwoAndThreeDimensionalGrids) {
  KernelBuilder k("program_ids");
  Value out = k.arg(ptr(i32), "out");
  Value p0 = k.program_id(0), p1 = k.program_id(1), p2 = k.program_id(2);
  Value n0 = k.num_programs(0), n1 = k.num_programs(1), n2 = k.num_programs(2);
  Value base = out + (p0 + n0 * (p1 + n1 * p2)) * 6;
  Value fields[] = {p0, p1, p2, n0, n1, n2};
  for (int f = 0; f < 6; ++f) store(base + f, fields[f]);
  absl::StatusOr<Function> fn = compile(k);
  TESSEL_ASSERT_OK(fn.status());
  for (Grid g : {Grid(7), Grid(3, 5), Grid(2, 3, 4), Grid(1, 1, 6)}) {
    SCOPED_TRACE(absl::StrCat("grid ", g.dims[0], "x", g.dims[1], "x", g.dims[2]));
    std::vector<int32_t> got = poisoned<int32_t>(6 * g.total() + 1);
    TESSEL_ASSERT_OK(fn->launch({.grid = g}, got.data()));
    for (int z = 0; z < g.dims[2]; ++z) {
      for (int y = 0; y < g.dims[1]; ++y) {
        for (int x = 0; x < g.dims[0]; ++x) {
          const int32_t* rec = &got[6 * (x + g.dims[0] * (y + g.dims[1] * z))];
          EXPECT_EQ(std::vector<int32_t>(rec, rec + 6),
                    (std::vector<int32_t>{x, y, z, g.dims[0], g.dims[1], g.dims[2]}));
        }
      }
    }
    EXPECT_TRUE(is_poison(got.back()));
  }
}

}  // namespace
}  // namespace tessel::testing
