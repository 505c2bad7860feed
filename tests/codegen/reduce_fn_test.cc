// reduce with a combine function on the host target, against loops over the
// same inputs: an argmax that keeps the lowest index of the largest value
// (exact, along every axis of 2-D and 3-D tiles with many ties), Welford's
// mean and variance and a log-sum-exp (floats, against double references),
// the minimum and maximum of a tile together, an xor, i1 tiles, and a
// combine that reads a scalar from outside.
#include <algorithm>
#include <cmath>
#include <vector>

#include "tests/codegen/host_test_util.h"

namespace tessel::testing {
namespace {

// (value, index) pairs: the larger value, the lower index on a tie.
std::vector<Value> argmax_combine(std::span<const Value> a, std::span<const Value> b) {
  Value take_b = (b[0] > a[0]) | ((b[0] == a[0]) & (b[1] < a[1]));
  return {where(take_b, b[0], a[0]), where(take_b, b[1], a[1])};
}

TEST(ReduceFn, ArgmaxWithTiesAlongEveryAxis) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const Shape& shape : std::vector<Shape>{{8, 16}, {3, 100}, {4, 6, 5}, {1, 7}}) {
    for (int axis = 0; axis < static_cast<int>(shape.size()); ++axis) {
      SCOPED_TRACE(::testing::Message() << shape_str(shape) << " along axis " << axis);
      KernelBuilder k("argmax_fn");
      Value x = k.arg(ptr(i32), "x"), best = k.arg(ptr(i32), "best"), where_ = k.arg(ptr(i32), "where");
      Value v = load(x + index_tile(k, shape));
      // Each element's index along the axis.
      Shape ones(shape.size(), 1);
      ones[axis] = shape[axis];
      Value idx = broadcast_to(reshape(k.arange(0, static_cast<int32_t>(shape[axis])), ones), shape);
      std::vector<Value> r = reduce({v, idx}, axis, argmax_combine);
      Shape out = shape;
      out.erase(out.begin() + axis);
      store(best + index_tile(k, out), r[0]);
      store(where_ + index_tile(k, out), r[1]);
      std::vector<int32_t> xs(numel(shape));
      for (int32_t& e : xs) e = static_cast<int32_t>(rng.uniform(-3, 3));  // many ties
      std::vector<int32_t> got = poisoned<int32_t>(numel(out)), at = poisoned<int32_t>(numel(out));
      TESSEL_ASSERT_OK(run(k, 1, xs.data(), got.data(), at.data()));
      std::vector<int64_t> strides(shape.size(), 1);
      for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) strides[d] = strides[d + 1] * shape[d + 1];
      for (int64_t o = 0; o < numel(out); ++o) {
        // The line's first element: o's indices with the axis's put back at 0.
        int64_t rest = o, base = 0;
        for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
          if (d == axis) continue;
          base += rest % shape[d] * strides[d];
          rest /= shape[d];
        }
        int32_t want = xs[base], want_at = 0;
        for (int64_t i = 1; i < shape[axis]; ++i) {
          if (xs[base + i * strides[axis]] > want) {
            want = xs[base + i * strides[axis]];
            want_at = static_cast<int32_t>(i);
          }
        }
        ASSERT_EQ(got[o], want) << "line " << o;
        ASSERT_EQ(at[o], want_at) << "line " << o;
      }
    }
  }
}

// Welford's parallel form: (count, mean, M2) of two parts joined.
std::vector<Value> welford_combine(std::span<const Value> a, std::span<const Value> b) {
  Value n = a[0] + b[0];
  Value delta = b[1] - a[1];
  Value share = b[0] / n;
  return {n, a[1] + delta * share, a[2] + b[2] + delta * delta * a[0] * share};
}

TEST(ReduceFn, WelfordMeanAndVarianceOfRows) {
  constexpr int kRows = 6, kCols = 300;
  KernelBuilder k("welford");
  Value x = k.arg(ptr(f32), "x"), mean = k.arg(ptr(f32), "mean"), var = k.arg(ptr(f32), "var");
  Value v = load(x + index_tile(k, {kRows, kCols}));  // [R, C] f32
  std::vector<Value> r =
      reduce({k.full({kRows, kCols}, 1.0, f32), v, k.zeros({kRows, kCols}, f32)}, 1, welford_combine);
  store(mean + k.arange(0, kRows), r[1]);
  store(var + k.arange(0, kRows), r[2] / r[0]);
  Rng rng;
  SCOPED_TRACE(rng.trace());
  std::vector<float> xs(kRows * kCols);
  for (float& e : xs) e = static_cast<float>(1000 + rng.real(-1, 1));  // a large mean: a two-pass sum would lose it
  std::vector<float> got_mean = poisoned<float>(kRows), got_var = poisoned<float>(kRows);
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), got_mean.data(), got_var.data()));
  for (int r = 0; r < kRows; ++r) {
    double m = 0, m2 = 0;
    for (int c = 0; c < kCols; ++c) m += xs[r * kCols + c];
    m /= kCols;
    for (int c = 0; c < kCols; ++c) m2 += (xs[r * kCols + c] - m) * (xs[r * kCols + c] - m);
    // Each step rounds the running mean near 1000 (an ulp is 6e-5).
    EXPECT_NEAR(got_mean[r], m, 2e-3) << "row " << r;
    EXPECT_NEAR(got_var[r], m2 / kCols, 1e-3) << "row " << r;
  }
}

TEST(ReduceFn, LogSumExpOfATile) {
  KernelBuilder k("logsumexp");
  Value x = k.arg(ptr(f32), "x"), out = k.arg(ptr(f32), "out");
  Value v = load(x + k.arange(0, 1000));  // [1000] f32
  std::vector<Value> r =
      reduce({v, k.full({1000}, 1.0, f32)}, 0, [](std::span<const Value> a, std::span<const Value> b) {
        Value m = maximum(a[0], b[0]);
        return std::vector<Value>{m, a[1] * exp(a[0] - m) + b[1] * exp(b[0] - m)};
      });
  store(out, r[0] + log(r[1]));
  Rng rng;
  SCOPED_TRACE(rng.trace());
  std::vector<float> xs(1000);
  for (float& e : xs) e = static_cast<float>(rng.real(-30, 30));
  std::vector<float> got = poisoned<float>(1);
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), got.data()));
  double m = -INFINITY, s = 0;
  for (float e : xs) m = std::max(m, double{e});
  for (float e : xs) s += std::exp(e - m);
  EXPECT_NEAR(got[0], m + std::log(s), 1e-4);
}

// The minimum and maximum together, an xor, i1 tiles (any and all), and a
// maximum clamped by a scalar argument.
TEST(ReduceFn, PairsXorFlagsAndAScalarFromOutside) {
  KernelBuilder k("misc");
  Value x = k.arg(ptr(u32), "x"), cap = k.arg(u32, "cap"), out = k.arg(ptr(u32), "out");
  Value v = load(x + index_tile(k, {4, 64}));  // [4, 64] u32
  std::vector<Value> lohi = reduce({v, v}, 1, [](std::span<const Value> a, std::span<const Value> b) {
    return std::vector<Value>{minimum(a[0], b[0]), maximum(a[1], b[1])};
  });
  Value rows = k.arange(0, 4);
  store(out + rows, lohi[0]);
  store(out + 4 + rows, lohi[1]);
  store(out + 8 + rows, reduce(v, 1, [](const Value& a, const Value& b) { return a ^ b; }));
  Value odd = (v & 1) == 1;  // [4, 64] i1
  store(out + 12 + rows, cast(reduce(odd, 1, [](const Value& a, const Value& b) { return a | b; }), u32));
  store(out + 16 + rows, cast(reduce(odd, 1, [](const Value& a, const Value& b) { return a & b; }), u32));
  store(out + 20 + rows, reduce(v, 1, [&](const Value& a, const Value& b) { return minimum(maximum(a, b), cap); }));
  Rng rng;
  SCOPED_TRACE(rng.trace());
  std::vector<uint32_t> xs(256);
  for (uint32_t& e : xs) e = static_cast<uint32_t>(rng.uniform(0, 1 << 20));
  for (int c = 0; c < 64; ++c) xs[2 * 64 + c] |= 1;  // row 2: all odd
  const uint32_t limit = 1 << 19;
  std::vector<uint32_t> got = poisoned<uint32_t>(24);
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), limit, got.data()));
  for (int r = 0; r < 4; ++r) {
    const auto row = xs.begin() + r * 64;
    uint32_t x_or = 0;
    bool any = false, all = true;
    for (int c = 0; c < 64; ++c) {
      x_or ^= row[c];
      any = any || (row[c] & 1) != 0;
      all = all && (row[c] & 1) != 0;
    }
    EXPECT_EQ(got[r], *std::min_element(row, row + 64)) << "row " << r;
    EXPECT_EQ(got[4 + r], *std::max_element(row, row + 64)) << "row " << r;
    EXPECT_EQ(got[8 + r], x_or) << "row " << r;
    EXPECT_EQ(got[12 + r], any ? 1u : 0u) << "row " << r;
    EXPECT_EQ(got[16 + r], all ? 1u : 0u) << "row " << r;
    EXPECT_EQ(got[20 + r], std::min(*std::max_element(row, row + 64), limit)) << "row " << r;
  }
}

}  // namespace
}  // namespace tessel::testing
