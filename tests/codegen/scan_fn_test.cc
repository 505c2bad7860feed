// associative_scan on the host target, against loops over the same inputs:
// a linear recurrence h = a h + b (associative, not commutative: the order
// of the combines shows) along every axis of 1-D, 2-D and 3-D tiles,
// forwards and in reverse, exact in wrapping u32; a sum restarted at flags
// (an i1 in the tuple); a running argmax with the lowest index on ties; and
// a combine that reads a scalar from outside.
#include <cstdint>
#include <span>
#include <vector>

#include "tests/codegen/host_test_util.h"

namespace tessel::testing {
namespace {

// (a, b) pairs of h -> a h + b: the earlier map first, then the later.
std::vector<Value> affine_combine(std::span<const Value> first, std::span<const Value> then) {
  return {first[0] * then[0], then[0] * first[1] + then[1]};
}

// The strides of a row-major tile of `shape`, and the offset of the first
// element of line `o` along `axis` (o counts the lines in row-major order of
// the other axes).
std::vector<int64_t> strides_of(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}
int64_t line_base(const Shape& shape, int axis, int64_t o) {
  const std::vector<int64_t> strides = strides_of(shape);
  int64_t base = 0;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    if (d == axis) continue;
    base += o % shape[d] * strides[d];
    o /= shape[d];
  }
  return base;
}

TEST(ScanFn, LinearRecurrenceAlongEveryAxisBothWays) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const Shape& shape : std::vector<Shape>{{37}, {8, 16}, {3, 100}, {4, 6, 5}, {1, 7}}) {
    for (int axis = 0; axis < static_cast<int>(shape.size()); ++axis) {
      for (bool reverse : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << shape_str(shape) << " along axis " << axis << (reverse ? " in reverse" : ""));
        KernelBuilder k("recurrence");
        Value a = k.arg(ptr(u32), "a"), b = k.arg(ptr(u32), "b");
        Value ga = k.arg(ptr(u32), "ga"), gh = k.arg(ptr(u32), "gh");
        Value offs = index_tile(k, shape);
        std::vector<Value> r = associative_scan({load(a + offs), load(b + offs)}, axis, affine_combine, reverse);
        store(ga + offs, r[0]);
        store(gh + offs, r[1]);
        const int64_t n = numel(shape);
        std::vector<uint32_t> as(n), bs(n);
        for (uint32_t& e : as) e = static_cast<uint32_t>(rng.uniform(0, 7));
        for (uint32_t& e : bs) e = static_cast<uint32_t>(rng.uniform(0, 1000));
        std::vector<uint32_t> got_a = poisoned<uint32_t>(n), got_h = poisoned<uint32_t>(n);
        TESSEL_ASSERT_OK(run(k, 1, as.data(), bs.data(), got_a.data(), got_h.data()));
        const int64_t len = shape[axis], stride = strides_of(shape)[axis];
        for (int64_t o = 0; o < n / len; ++o) {
          const int64_t base = line_base(shape, axis, o);
          uint32_t prod = 1, h = 0;
          for (int64_t step = 0; step < len; ++step) {
            const int64_t at = base + (reverse ? len - 1 - step : step) * stride;
            prod *= as[at];
            h = as[at] * h + bs[at];
            ASSERT_EQ(got_a[at], prod) << "line " << o << " step " << step;
            ASSERT_EQ(got_h[at], h) << "line " << o << " step " << step;
          }
        }
      }
    }
  }
}

TEST(ScanFn, SumsRestartAtFlags) {
  constexpr int kRows = 5, kCols = 200;
  KernelBuilder k("segmented");
  Value x = k.arg(ptr(f32), "x"), starts = k.arg(ptr(u8), "starts"), out = k.arg(ptr(f32), "out");
  Value offs = index_tile(k, {kRows, kCols});
  Value flag = load(starts + offs) != 0;  // [R, C] i1
  std::vector<Value> r =
      associative_scan({flag, load(x + offs)}, 1, [](std::span<const Value> first, std::span<const Value> then) {
        return std::vector<Value>{first[0] | then[0], where(then[0], then[1], first[1] + then[1])};
      });
  store(out + offs, r[1]);
  Rng rng;
  SCOPED_TRACE(rng.trace());
  std::vector<float> xs(kRows * kCols);
  std::vector<uint8_t> fs(kRows * kCols);
  for (float& e : xs) e = static_cast<float>(rng.uniform(-50, 50));  // integers: the sums are exact
  for (uint8_t& f : fs) f = rng.chance(0.1) ? 1 : 0;
  std::vector<float> got = poisoned<float>(kRows * kCols);
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), fs.data(), got.data()));
  for (int r = 0; r < kRows; ++r) {
    float sum = 0;
    for (int c = 0; c < kCols; ++c) {
      const int at = r * kCols + c;
      sum = fs[at] != 0 ? xs[at] : sum + xs[at];
      ASSERT_EQ(got[at], sum) << "row " << r << " column " << c;
    }
  }
}

TEST(ScanFn, RunningArgmaxAndAScalarFromOutside) {
  constexpr int kN = 300;
  KernelBuilder k("running");
  Value x = k.arg(ptr(i32), "x"), cap = k.arg(i32, "cap"), out = k.arg(ptr(i32), "out");
  Value v = load(x + k.arange(0, kN));
  std::vector<Value> best =
      associative_scan({v, k.arange(0, kN)}, 0, [](std::span<const Value> first, std::span<const Value> then) {
        Value take = (then[0] > first[0]) | ((then[0] == first[0]) & (then[1] < first[1]));
        return std::vector<Value>{where(take, then[0], first[0]), where(take, then[1], first[1])};
      });
  store(out + k.arange(0, kN), best[1]);
  Value capped = associative_scan(v, 0, [&](const Value& a, const Value& b) { return minimum(maximum(a, b), cap); });
  store(out + kN + k.arange(0, kN), capped);
  Rng rng;
  SCOPED_TRACE(rng.trace());
  std::vector<int32_t> xs(kN);
  for (int32_t& e : xs) e = static_cast<int32_t>(rng.uniform(-20, 20));  // many ties
  const int32_t limit = 15;
  std::vector<int32_t> got = poisoned<int32_t>(2 * kN);
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), limit, got.data()));
  int32_t at = 0, top = xs[0];
  for (int i = 0; i < kN; ++i) {
    if (xs[i] > xs[at]) at = i;
    if (i > 0) top = std::min(std::max(top, xs[i]), limit);  // the first element stands alone
    ASSERT_EQ(got[i], at) << "element " << i;
    ASSERT_EQ(got[kN + i], top) << "element " << i;
  }
}

}  // namespace
}  // namespace tessel::testing
