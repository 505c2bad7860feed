// sum, max and min (and argmax and argmin) along every axis of 1-D, 2-D and
// 3-D tiles on the host target. Integer sums wrap and max/min are exact; float sums are compared
// with an f64 reference within the error bound of f32 (or f64) accumulation,
// and f16/bf16 sums, accumulated in f32, within one ulp of their type more.
#include <cmath>
#include <functional>
#include <map>
#include <vector>

#include "tests/codegen/host_test_util.h"

namespace tessel::testing {
namespace {

enum class Red { kSum, kMax, kMin, kArgMax, kArgMin };
const char* name(Red r) {
  static constexpr const char* kNames[] = {"sum", "max", "min", "argmax", "argmin"};
  return kNames[static_cast<int>(r)];
}

Value apply(Red r, const Value& x, int axis) {
  switch (r) {
    case Red::kSum:
      return sum(x, axis);
    case Red::kMax:
      return max(x, axis);
    case Red::kMin:
      return min(x, axis);
    case Red::kArgMax:
      return argmax(x, axis);
    case Red::kArgMin:
      return argmin(x, axis);
  }
  return Value();
}

// One reduction to check: the reduced tile's shape, the input's shape and
// the axis, and where its result starts in the output.
struct Case {
  Shape in;
  int axis;
  Red red;
  int offset;
};

Shape reduced(const Shape& in, int axis) {
  Shape s = in;
  s.erase(s.begin() + axis);
  return s;
}

// Calls f(output index, input indices along the axis) for each result element.
void for_each_result(const Shape& in, int axis, const std::function<void(int64_t, const std::vector<int64_t>&)>& f) {
  std::vector<int64_t> stride(in.size(), 1);
  for (int d = static_cast<int>(in.size()) - 2; d >= 0; --d) stride[d] = stride[d + 1] * in[d + 1];
  const Shape out = reduced(in, axis);
  for (int64_t o = 0; o < std::max<int64_t>(numel(out), 1); ++o) {
    // Input index of element o with the reduced axis at 0.
    int64_t rest = o, base = 0;
    for (int d = static_cast<int>(in.size()) - 1; d >= 0; --d) {
      if (d == axis) continue;
      base += rest % in[d] * stride[d];
      rest /= in[d];
    }
    std::vector<int64_t> along;
    for (int64_t i = 0; i < in[axis]; ++i) along.push_back(base + i * stride[axis]);
    f(o, along);
  }
}

// Half an ulp of T at |v| (its spacing there, halved), for the final
// rounding of f16 and bf16 results.
template <class T>
double half_ulp(double v) {
  const FloatFormat f = std::is_same_v<T, Half> ? kF16Format : kBF16Format;
  int e = v == 0 ? f.emin : std::max(std::ilogb(v), f.emin);
  return std::ldexp(1.0, e - f.precision);
}

template <class T>
void check(const Case& c, const std::vector<T>& xs, const std::vector<T>& got) {
  for_each_result(c.in, c.axis, [&](int64_t o, const std::vector<int64_t>& along) {
    const T g = got[c.offset + o];
    const std::string where = absl::StrCat(name(c.red), " of ", shape_str(c.in), " along axis ", c.axis,
                                           ", result element ", o, ": got ", show(g));
    if (c.red != Red::kSum) {
      auto less = [](T a, T b) {
        if constexpr (kIsNarrow<T>)
          return to_f64(a) < to_f64(b);
        else
          return a < b;
      };
      T want = xs[along[0]];
      for (int64_t i : along) {
        if (c.red == Red::kMax ? less(want, xs[i]) : less(xs[i], want)) want = xs[i];
      }
      ASSERT_TRUE(same(g, want)) << where << ", want " << show(want);
    } else if constexpr (kIsFloat<T>) {
      double exact = 0, magnitude = 0;
      for (int64_t i : along) {
        exact += to_f64(xs[i]);
        magnitude += std::fabs(to_f64(xs[i]));
      }
      const double eps = std::is_same_v<T, double> ? std::ldexp(1.0, -53) : std::ldexp(1.0, -24);
      double bound = static_cast<double>(along.size()) * eps * magnitude;
      if constexpr (kIsNarrow<T>) bound += half_ulp<T>(std::fabs(exact) + bound);
      ASSERT_LE(std::fabs(to_f64(g) - exact), bound) << where << ", want " << exact;
    } else {
      uint64_t acc = 0;
      for (int64_t i : along) acc += static_cast<uint64_t>(xs[i]);
      ASSERT_EQ(g, static_cast<T>(acc)) << where;
    }
  });
}

constexpr int kSize = 512;

// Each of `reds` along each axis of a [512] tile and of its [16,32] and
// [4,8,16] reshapes, each result at its own offset of the output.
std::vector<Case> cases_of(std::initializer_list<Red> reds) {
  std::vector<Case> cases;
  for (const Shape& in : {Shape{kSize}, Shape{16, 32}, Shape{4, 8, 16}}) {
    for (int axis = 0; axis < static_cast<int>(in.size()); ++axis) {
      for (Red r : reds) cases.push_back({in, axis, r, static_cast<int>(cases.size()) * kSize});
    }
  }
  return cases;
}

// The kernel's body: x [512] of `in` in, every case's result into out (of
// `out_d`).
void reduce_cases(KernelBuilder& k, DType in, DType out_d, const std::vector<Case>& cases) {
  Value x = k.arg(ptr(in), "x"), out = k.arg(ptr(out_d), "out");
  Value flat = load(x + k.arange(0, kSize));  // [512]
  std::map<Shape, Value> index_tiles;         // of the results' shapes
  for (const Case& c : cases) {
    Value r = apply(c.red, c.in.size() == 1 ? flat : reshape(flat, c.in), c.axis);
    Shape rs = reduced(c.in, c.axis);
    if (rs.empty()) {
      store(out + c.offset, r);  // a scalar
      continue;
    }
    if (!index_tiles.contains(rs)) index_tiles[rs] = index_tile(k, rs);
    store(out + c.offset + index_tiles[rs], r);
  }
}

template <class T>
class ReduceTest : public ::testing::Test {};
using ReduceTypes = ::testing::Types<int8_t, int32_t, uint8_t, int64_t, uint64_t, Half, BFloat16, float, double>;
TYPED_TEST_SUITE(ReduceTest, ReduceTypes);

// One kernel reduces a [512] tile to a scalar, and its [16,32] and [4,8,16]
// reshapes along each axis, with each combiner.
TYPED_TEST(ReduceTest, AlongEveryAxisMatchesTheReference) {
  using T = TypeParam;
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const std::vector<Case> cases = cases_of({Red::kSum, Red::kMax, Red::kMin});
  KernelBuilder k("reduce");
  reduce_cases(k, dtype_v<T>(), dtype_v<T>(), cases);

  std::vector<T> xs = make_vector<T>(kSize, [&] {
    if constexpr (kIsFloat<T>)
      return random_float<T>(rng, -4, 4);
    else
      return random_int<T>(rng);
  });
  std::vector<T> got = poisoned<T>(cases.size() * kSize);
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), got.data()));
  for (const Case& c : cases) {
    ASSERT_NO_FATAL_FAILURE(check(c, xs, got));
    const int64_t results = std::max<int64_t>(numel(reduced(c.in, c.axis)), 1);
    for (int64_t i = c.offset + results; i < c.offset + kSize; ++i) ASSERT_TRUE(is_poison(got[i])) << i;
  }
}

// argmax and argmin along each axis of the same tiles, into i32 positions:
// the first greatest (least) element, a NaN losing to any number. Narrow
// random values make ties common.
TYPED_TEST(ReduceTest, ArgMaxAndArgMinFindTheFirstBest) {
  using T = TypeParam;
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const std::vector<Case> cases = cases_of({Red::kArgMax, Red::kArgMin});
  KernelBuilder k("arg_reduce");
  reduce_cases(k, dtype_v<T>(), i32, cases);
  std::vector<T> xs = make_vector<T>(kSize, [&] {
    if constexpr (kIsFloat<T>)
      return from_f64<T>(rng.chance(1.0 / 16) ? NAN : static_cast<double>(rng.uniform(-6, 6)) / 2);
    else
      return static_cast<T>(rng.uniform(0, 9));
  });
  std::vector<int32_t> got = poisoned<int32_t>(cases.size() * kSize);
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), got.data()));
  for (const Case& c : cases) {
    const bool is_max = c.red == Red::kArgMax;
    for_each_result(c.in, c.axis, [&](int64_t o, const std::vector<int64_t>& along) {
      int32_t want = -1;
      double best = 0;
      for (size_t i = 0; i < along.size(); ++i) {
        const double v = to_f64(xs[along[i]]);
        if (std::isnan(v)) continue;
        if (want < 0 || (is_max ? v > best : v < best)) want = static_cast<int32_t>(i), best = v;
      }
      if (want < 0) want = 0;  // every element NaN
      ASSERT_EQ(got[c.offset + o], want) << name(c.red) << " of " << shape_str(c.in)
                                         << " along axis " << c.axis << ", result element " << o;
    });
  }
}

// Float max and min skip NaN (like the GPU's max/min), and infinities win.
TEST(Reduce, FloatMaxMinIgnoreNanAndKeepInfinities) {
  KernelBuilder k("reduce_specials");
  Value x = k.arg(ptr(f32), "x"), out = k.arg(ptr(f32), "out");
  Value t = load(x + index_tile(k, {2, 4}));  // [2, 4]
  store(out + k.arange(0, 2), max(t, 1));
  store(out + 2 + k.arange(0, 2), min(t, 1));
  std::vector<float> xs = {NAN, 1, -2, NAN, INFINITY, 0, -INFINITY, 3};
  std::vector<float> got = poisoned<float>(4);
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), got.data()));
  EXPECT_EQ(got, (std::vector<float>{1, INFINITY, -2, -INFINITY}));
}

// Ties of -0 and +0 are ties; NaN loses to infinities; a row of NaN gives 0.
TEST(Reduce, ArgMaxAndArgMinOfSpecials) {
  KernelBuilder k("arg_specials");
  Value x = k.arg(ptr(f32), "x"), out = k.arg(ptr(i32), "out");
  Value t = load(x + index_tile(k, {4, 4}));  // [4, 4]
  store(out + k.arange(0, 4), argmax(t, 1));
  store(out + 4 + k.arange(0, 4), argmin(t, 1));
  std::vector<float> xs = {-0.0f, 0.0f, -1, NAN,  NAN, -INFINITY, NAN, INFINITY,
                           NAN,   NAN,  NAN, NAN, 2,   2,         -3,  -3};
  std::vector<int32_t> got = poisoned<int32_t>(8);
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), got.data()));
  EXPECT_EQ(got, (std::vector<int32_t>{0, 3, 0, 0, 2, 1, 0, 2}));
}

// A reduction along an axis of size 1 copies; one over a [1, N] tile's
// first axis keeps N results.
TEST(Reduce, SizeOneAxes) {
  KernelBuilder k("reduce_size_one");
  Value x = k.arg(ptr(i32), "x"), out = k.arg(ptr(i32), "out");
  Value flat = load(x + k.arange(0, 8));  // [8]
  store(out + index_tile(k, {2, 4}), sum(reshape(flat, {2, 1, 4}), 1));
  store(out + 8 + index_tile(k, {8}), max(reshape(flat, {1, 8}), 0));
  store(out + 16 + index_tile(k, {1}), min(reshape(flat, {1, 8}), 1));
  std::vector<int32_t> xs = {5, -3, 8, 0, 2, -7, 4, 1};
  std::vector<int32_t> got = poisoned<int32_t>(18);
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), got.data()));
  EXPECT_EQ(std::vector<int32_t>(got.begin(), got.begin() + 16),
            (std::vector<int32_t>{5, -3, 8, 0, 2, -7, 4, 1, 5, -3, 8, 0, 2, -7, 4, 1}));
  EXPECT_EQ(got[16], -7);
  EXPECT_TRUE(is_poison(got[17]));
}

}  // namespace
}  // namespace tessel::testing
