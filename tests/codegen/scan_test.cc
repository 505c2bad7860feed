// cumsum, cumprod, cummax and cummin along every axis of 1-D, 2-D and 3-D
// tiles on the host target, forwards and in reverse, against a reference
// that combines in the same order in the same types: the host walks each
// line one element after another, so every result agrees bit for bit
// (f16 and bf16 accumulate in f32 and round each result).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <type_traits>
#include <vector>

#include "tests/codegen/host_test_util.h"

namespace tessel::testing {
namespace {

enum class Scan { kSum, kProd, kMax, kMin };
const char* name(Scan s) {
  static constexpr const char* kNames[] = {"cumsum", "cumprod", "cummax", "cummin"};
  return kNames[static_cast<int>(s)];
}

Value apply(Scan s, const Value& x, int axis, bool reverse) {
  switch (s) {
    case Scan::kSum:
      return cumsum(x, axis, reverse);
    case Scan::kProd:
      return cumprod(x, axis, reverse);
    case Scan::kMax:
      return cummax(x, axis, reverse);
    case Scan::kMin:
      return cummin(x, axis, reverse);
  }
  return Value();
}

struct Case {
  Shape in;
  int axis;
  Scan scan;
  bool reverse;
  int offset;  // where its result starts in the output
};

// The accumulator type: f32 for f16 and bf16, else T.
template <class T>
using Acc = std::conditional_t<kIsNarrow<T>, float, T>;

template <class T>
Acc<T> widen(T v) {
  if constexpr (kIsNarrow<T>)
    return static_cast<float>(to_f64(v));
  else
    return v;
}

// The combine of the reference: wrapping integer arithmetic, and max and
// min in which a NaN loses to a number.
template <class A>
A combine(Scan s, A a, A b) {
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;
    if (s == Scan::kSum) return static_cast<A>(static_cast<U>(a) + static_cast<U>(b));
    if (s == Scan::kProd) return static_cast<A>(static_cast<U>(a) * static_cast<U>(b));
    return s == Scan::kMax ? std::max(a, b) : std::min(a, b);
  } else {
    if (s == Scan::kSum) return a + b;
    if (s == Scan::kProd) return a * b;
    return s == Scan::kMax ? std::fmax(a, b) : std::fmin(a, b);
  }
}

template <class A>
A identity(Scan s) {
  if (s == Scan::kSum) return A(0);
  if (s == Scan::kProd) return A(1);
  if constexpr (std::is_floating_point_v<A>) return s == Scan::kMax ? -INFINITY : INFINITY;
  return s == Scan::kMax ? std::numeric_limits<A>::min() : std::numeric_limits<A>::max();
}

template <class T>
void check(const Case& c, const std::vector<T>& xs, const std::vector<T>& got) {
  for (std::vector<int64_t> line : lines_of(c.in, c.axis)) {
    if (c.reverse) std::reverse(line.begin(), line.end());
    Acc<T> acc = identity<Acc<T>>(c.scan);
    for (size_t i = 0; i < line.size(); ++i) {
      acc = combine(c.scan, acc, widen(xs[line[i]]));
      T want;
      if constexpr (kIsNarrow<T>)
        want = from_f64<T>(acc);
      else
        want = acc;
      const T g = got[c.offset + line[i]];
      ASSERT_TRUE(same(g, want)) << name(c.scan) << (c.reverse ? " reversed" : "") << " of " << shape_str(c.in)
                                 << " along axis " << c.axis << ", element " << line[i] << ": got " << show(g)
                                 << ", want " << show(want);
    }
  }
}

constexpr int kSize = 512;

template <class T>
class ScanTest : public ::testing::Test {};
using ScanTypes = ::testing::Types<int8_t, int32_t, uint8_t, int64_t, uint64_t, Half, BFloat16, float, double>;
TYPED_TEST_SUITE(ScanTest, ScanTypes);

// One kernel scans a [512] tile, and its [16,32] and [4,8,16] reshapes
// along each axis, with each combiner, both ways.
TYPED_TEST(ScanTest, AlongEveryAxisMatchesTheReference) {
  using T = TypeParam;
  Rng rng;
  SCOPED_TRACE(rng.trace());
  std::vector<Case> cases;
  for (const Shape& in : {Shape{kSize}, Shape{16, 32}, Shape{4, 8, 16}}) {
    for (int axis = 0; axis < static_cast<int>(in.size()); ++axis) {
      for (Scan s : {Scan::kSum, Scan::kProd, Scan::kMax, Scan::kMin}) {
        for (bool reverse : {false, true})
          cases.push_back({in, axis, s, reverse, static_cast<int>(cases.size()) * kSize});
      }
    }
  }
  KernelBuilder k("scan");
  Value x = k.arg(ptr(dtype_v<T>()), "x"), out = k.arg(ptr(dtype_v<T>()), "out");
  Value flat = load(x + k.arange(0, kSize));
  std::map<Shape, Value> index_tiles;
  for (const Case& c : cases) {
    if (!index_tiles.contains(c.in)) index_tiles[c.in] = index_tile(k, c.in);
    store(out + c.offset + index_tiles[c.in],
          apply(c.scan, c.in.size() == 1 ? flat : reshape(flat, c.in), c.axis, c.reverse));
  }
  // Products stay finite near 1; sums and extremes take a wide range.
  std::vector<T> xs = make_vector<T>(kSize, [&] {
    if constexpr (kIsFloat<T>)
      return from_f64<T>(rng.chance(0.5) ? rng.real(-4, 4) : rng.real(0.9, 1.1));
    else
      return random_int<T>(rng);
  });
  std::vector<T> got = poisoned<T>(cases.size() * kSize);
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), got.data()));
  for (const Case& c : cases) ASSERT_NO_FATAL_FAILURE(check(c, xs, got));
}

// NaN loses in cummax and cummin (a leading NaN gives -inf and +inf), and
// propagates through cumsum; infinities stay.
TEST(Scan, SpecialValues) {
  KernelBuilder k("scan_specials");
  Value x = k.arg(ptr(f32), "x"), out = k.arg(ptr(f32), "out");
  Value t = load(x + k.arange(0, 4));
  store(out + k.arange(0, 4), cummax(t, 0));
  store(out + 4 + k.arange(0, 4), cummin(t, 0, /*reverse=*/true));
  store(out + 8 + k.arange(0, 4), cumsum(t, 0));
  std::vector<float> xs = {NAN, 2, -INFINITY, 1};
  std::vector<float> got = poisoned<float>(12);
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), got.data()));
  EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + 8),
            (std::vector<float>{-INFINITY, 2, 2, 2, -INFINITY, -INFINITY, -INFINITY, 1}));
  for (int i = 8; i < 12; ++i) EXPECT_TRUE(std::isnan(got[i])) << i;
}

// A scan inside a loop over blocks, its result carried: a running prefix
// sum over a long vector, as a stream compaction computes its offsets.
TEST(Scan, RunningSumOverBlocks) {
  constexpr int kBlock = 64, kBlocks = 5;
  KernelBuilder k("running_sum");
  Value x = k.arg(ptr(i32), "x"), out = k.arg(ptr(i32), "out");
  Var carry = k.var(k.constant(0, i32));
  k.for_range(0, kBlocks, 1, [&](Value b) {
    Value offs = b * kBlock + k.arange(0, kBlock);
    Value sums = cumsum(load(x + offs), 0) + carry;
    store(out + offs, sums);
    carry = sum(load(x + offs), 0) + carry;
  });
  std::vector<int32_t> xs(kBlock * kBlocks);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<int32_t>(i % 7) - 3;
  std::vector<int32_t> got = poisoned<int32_t>(xs.size());
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), got.data()));
  int32_t acc = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    acc += xs[i];
    ASSERT_EQ(got[i], acc) << i;
  }
}

}  // namespace
}  // namespace tessel::testing
