// sort and argsort along every axis of 1-D, 2-D and 3-D tiles on the host
// target, both ways, lines of power-of-two lengths and others, against
// std::sort and std::stable_sort: each line must come out in order (a NaN
// above every number) and hold the same elements, bit for bit, as it went
// in, and argsort must give the stable order's positions exactly.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include "tests/codegen/host_test_util.h"

namespace tessel::testing {
namespace {

struct Case {
  Shape in;
  int axis;
  bool descending;
  int offset;  // where its result starts in the output
};

// Whether a comes before b ascending: a NaN after every number.
template <class T>
bool before(T a, T b) {
  if constexpr (kIsFloat<T>) {
    if (is_nan(a)) return false;
    if (is_nan(b)) return true;
    return to_f64(a) < to_f64(b);
  } else {
    return a < b;
  }
}

template <class T>
std::vector<uint64_t> bits_of(const std::vector<T>& v) {
  std::vector<uint64_t> bits;
  for (const T& x : v) {
    uint64_t b = 0;
    std::memcpy(&b, &x, sizeof(T));
    bits.push_back(b);
  }
  std::sort(bits.begin(), bits.end());
  return bits;
}

template <class T>
void check(const Case& c, const std::vector<T>& xs, const std::vector<T>& got, const std::vector<int32_t>& places) {
  for (const std::vector<int64_t>& line : lines_of(c.in, c.axis)) {
    std::vector<T> in, out;
    for (int64_t i : line) {
      in.push_back(xs[i]);
      out.push_back(got[c.offset + i]);
    }
    std::vector<T> want = in;
    std::sort(want.begin(), want.end(), [&](T a, T b) { return c.descending ? before(b, a) : before(a, b); });
    for (size_t i = 0; i < line.size(); ++i) {
      // -0 and +0 are equal, in either order.
      ASSERT_TRUE(same(out[i], want[i], /*zero_sign_matters=*/false))
          << "sort of " << shape_str(c.in) << " along axis " << c.axis << (c.descending ? " descending" : "")
          << ", element " << i << " of the line at " << line[0] << ": got " << show(out[i]) << ", want "
          << show(want[i]);
    }
    ASSERT_EQ(bits_of(out), bits_of(in)) << "the line at " << line[0] << " of " << shape_str(c.in) << " along axis "
                                         << c.axis << " lost or changed elements";
    std::vector<int32_t> order(line.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return c.descending ? before(in[b], in[a]) : before(in[a], in[b]); });
    for (size_t i = 0; i < line.size(); ++i) {
      ASSERT_EQ(places[c.offset + line[i]], order[i])
          << "argsort of " << shape_str(c.in) << " along axis " << c.axis << (c.descending ? " descending" : "")
          << ", element " << i << " of the line at " << line[0];
    }
  }
}

template <class T>
class SortTest : public ::testing::Test {};
using SortTypes = ::testing::Types<int8_t, int32_t, uint8_t, int64_t, uint64_t, Half, BFloat16, float, double>;
TYPED_TEST_SUITE(SortTest, SortTypes);

// One kernel sorts a [512] tile and its reshapes along each axis, and the
// first 300 elements and theirs (lines of 1, 3, 5, 15, 20, 100 and 300), both
// ways; random values with duplicates, and for floats zeros of both signs,
// infinities and NaNs.
TYPED_TEST(SortTest, AlongEveryAxisMatchesTheStdSorts) {
  using T = TypeParam;
  Rng rng;
  SCOPED_TRACE(rng.trace());
  constexpr int kSize = 512, kOdd = 300;
  std::vector<Case> cases;
  for (const Shape& in : {Shape{kSize}, Shape{16, 32}, Shape{4, 8, 16}, Shape{kOdd}, Shape{3, 100}, Shape{20, 15},
                          Shape{5, 6, 10}, Shape{kOdd, 1}}) {
    for (int axis = 0; axis < static_cast<int>(in.size()); ++axis) {
      for (bool descending : {false, true})
        cases.push_back({in, axis, descending, static_cast<int>(cases.size()) * kSize});
    }
  }
  KernelBuilder k("sort");
  Value x = k.arg(ptr(dtype_v<T>()), "x"), out = k.arg(ptr(dtype_v<T>()), "out"), pos = k.arg(ptr(i32), "pos");
  Value flat = load(x + k.arange(0, kSize)), odd = load(x + k.arange(0, kOdd));
  std::map<Shape, Value> index_tiles;
  for (const Case& c : cases) {
    if (!index_tiles.contains(c.in)) index_tiles[c.in] = index_tile(k, c.in);
    const Value& line = numel(c.in) == kSize ? flat : odd;
    const Value shaped = c.in.size() == 1 ? line : reshape(line, c.in);
    store(out + c.offset + index_tiles[c.in], sort(shaped, c.axis, c.descending));
    store(pos + c.offset + index_tiles[c.in], argsort(shaped, c.axis, c.descending));
  }
  // Few distinct values half the time: runs of equal elements.
  std::vector<T> xs = make_vector<T>(kSize, [&] {
    if (rng.chance(0.5))
      return from_f64<T>(static_cast<double>(rng.uniform(0, 6)) - (kIsFloat<T> || std::is_signed_v<T> ? 3 : 0));
    return random_value<T>(rng);
  });
  std::vector<T> got = poisoned<T>(cases.size() * kSize);
  std::vector<int32_t> places = poisoned<int32_t>(cases.size() * kSize);
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), got.data(), places.data()));
  for (const Case& c : cases) ASSERT_NO_FATAL_FAILURE(check(c, xs, got, places));
}

// Adds to `k` args x [n] of dtype `d` and out: x sorted (argsorted with
// `positions`) into out[0, n), and descending into out[n, 2n).
void sort_both_ways(KernelBuilder& k, DType d, int n, bool positions) {
  Value x = k.arg(ptr(d), "x"), out = k.arg(ptr(positions ? i32 : d), "out");
  Value t = load(x + k.arange(0, n));
  for (bool descending : {false, true}) {
    store(out + (descending ? n : 0) + k.arange(0, n), positions ? argsort(t, 0, descending) : sort(t, 0, descending));
  }
}

// A NaN counts above every number, infinities included.
TEST(Sort, SpecialValues) {
  KernelBuilder k("sort_specials");
  sort_both_ways(k, f32, 8, /*positions=*/false);
  std::vector<float> xs = {NAN, 2, -INFINITY, 1, INFINITY, -NAN, -1, 0.5f};
  std::vector<float> got = poisoned<float>(16);
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), got.data()));
  const std::vector<float> ascending = {-INFINITY, -1, 0.5f, 1, 2, INFINITY};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(got[i], ascending[i]) << i;
    EXPECT_EQ(got[8 + 2 + i], ascending[5 - i]) << 8 + 2 + i;
  }
  for (int i : {6, 7, 8, 9}) EXPECT_TRUE(std::isnan(got[i])) << i;
}

// The order is total, so that every target gives the same bits: -0 just
// before +0, then the numbers above, then NaNs, positive ones first, each
// sign's in the order of their bits; descending, the reverse. For f32, f16
// and f8e4m3 (whose top number is the finite 448), as raw bits.
template <class Bits>
void expect_total_order(DType d, const std::vector<Bits>& in, const std::vector<Bits>& ascending) {
  const int n = static_cast<int>(in.size());
  KernelBuilder k("sort_total");
  sort_both_ways(k, d, n, /*positions=*/false);
  std::vector<Bits> xs = in, got(2 * n, 0);
  TESSEL_ASSERT_OK(run(k, 1, static_cast<void*>(xs.data()), static_cast<void*>(got.data())));
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(got[i], ascending[i]) << d.name() << " ascending, element " << i;
    EXPECT_EQ(got[n + i], ascending[n - 1 - i]) << d.name() << " descending, element " << i;
  }
}

TEST(Sort, TheOrderIsTotal) {
  expect_total_order<uint32_t>(
      f32, {0x00000000, 0x7fc00001, 0x80000000, 0xffc00000, 0x3f800000, 0x80000000, 0x7fc00000, 0xff800000},
      {0xff800000, 0x80000000, 0x80000000, 0x00000000, 0x3f800000, 0x7fc00000, 0x7fc00001, 0xffc00000});
  expect_total_order<uint16_t>(f16, {0x7e00, 0x8000, 0x7c00, 0x0000, 0xfe00, 0xbc00, 0x3c00, 0x8000},
                               {0xbc00, 0x8000, 0x8000, 0x0000, 0x3c00, 0x7c00, 0x7e00, 0xfe00});
  expect_total_order<uint8_t>(f8e4m3, {0x7f, 0x00, 0xff, 0x80, 0x7e, 0xfe, 0x38, 0xb8},
                              {0xfe, 0xb8, 0x80, 0x00, 0x38, 0x7e, 0x7f, 0xff});
}

// Top-k rows: the positions of each row's k largest scores, largest first
// (argsort descending), and their scores loaded through them, as a
// mixture-of-experts router picks experts; rows in a loop, one program.
TEST(Sort, TopKOfRowsInALoop) {
  constexpr int kRows = 6, kExperts = 64, kTop = 4;
  KernelBuilder k("top_k");
  Value x = k.arg(ptr(f32), "x"), top = k.arg(ptr(f32), "top"), experts = k.arg(ptr(i32), "experts");
  Value cols = k.arange(0, kExperts);
  k.for_range(0, kRows / 2, 1, [&](Value pair) {
    Value rows = pair * 2 + k.arange(0, 2);
    Value row_start = expand_dims(rows, 1) * kExperts;
    Value picked = argsort(load(x + row_start + expand_dims(cols, 0)), 1, /*descending=*/true);
    Value at = expand_dims(rows, 1) * kTop + expand_dims(cols, 0);
    Value first = expand_dims(cols < kTop, 0);
    store(experts + at, picked, first);
    store(top + at, load(x + row_start + picked), first);
  });
  Rng rng;
  SCOPED_TRACE(rng.trace());
  std::vector<float> xs(kRows * kExperts);
  for (float& v : xs) v = static_cast<float>(rng.real(-1, 1));
  std::vector<float> got = poisoned<float>(kRows * kTop);
  std::vector<int32_t> picked = poisoned<int32_t>(kRows * kTop);
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), got.data(), picked.data()));
  for (int r = 0; r < kRows; ++r) {
    std::vector<int32_t> order(kExperts);
    for (int e = 0; e < kExperts; ++e) order[e] = e;
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return xs[r * kExperts + a] > xs[r * kExperts + b]; });
    for (int i = 0; i < kTop; ++i) {
      EXPECT_EQ(picked[r * kTop + i], order[i]) << "row " << r << ", " << i;
      EXPECT_EQ(got[r * kTop + i], xs[r * kExperts + order[i]]) << "row " << r << ", " << i;
    }
  }
}

// Equal keys keep their order in argsort, both ways; NaNs count as equal.
TEST(Sort, ArgsortIsStable) {
  KernelBuilder k("argsort_ties");
  sort_both_ways(k, f32, 8, /*positions=*/true);
  std::vector<float> xs = {1, NAN, 0.0f, 1, -0.0f, NAN, 1, -2};
  std::vector<int32_t> got = poisoned<int32_t>(16);
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), got.data()));
  EXPECT_EQ(got, (std::vector<int32_t>{7, 2, 4, 0, 3, 6, 1, 5, 1, 5, 0, 3, 6, 2, 4, 7}));
}

}  // namespace
}  // namespace tessel::testing
