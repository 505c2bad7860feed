// Unary operators, math functions, fma and select on the host target against
// a C++ reference: exact where the result is correctly rounded (neg, abs,
// floor, sqrt, fma), within a few ulps for exp, log and rsqrt.
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "tests/codegen/host_test_util.h"

namespace tessel::testing {
namespace {

constexpr int kBlock = 256;

template <class T>
class FloatUnaryTest : public ::testing::Test {};
using FloatTypes = ::testing::Types<Half, BFloat16, float, double>;
TYPED_TEST_SUITE(FloatUnaryTest, FloatTypes);

enum class Fn { kNeg, kAbs, kFloor, kSqrt, kExp, kLog, kRsqrt };
constexpr Fn kFns[] = {Fn::kNeg, Fn::kAbs, Fn::kFloor, Fn::kSqrt, Fn::kExp, Fn::kLog, Fn::kRsqrt};
const char* name(Fn f) {
  constexpr const char* kNames[] = {"neg", "abs", "floor", "sqrt", "exp", "log", "rsqrt"};
  return kNames[static_cast<int>(f)];
}

Value apply(Fn f, const Value& x) {
  switch (f) {
    case Fn::kNeg:
      return -x;
    case Fn::kAbs:
      return abs(x);
    case Fn::kFloor:
      return floor(x);
    case Fn::kSqrt:
      return sqrt(x);
    case Fn::kExp:
      return exp(x);
    case Fn::kLog:
      return log(x);
    case Fn::kRsqrt:
      return rsqrt(x);
  }
  return Value();
}

double reference(Fn f, double x) {
  switch (f) {
    case Fn::kNeg:
      return -x;
    case Fn::kAbs:
      return std::fabs(x);
    case Fn::kFloor:
      return std::floor(x);
    case Fn::kSqrt:
      return std::sqrt(x);
    case Fn::kExp:
      return std::exp(x);
    case Fn::kLog:
      return std::log(x);
    case Fn::kRsqrt:
      return 1 / std::sqrt(x);
  }
  return 0;
}

// Ulps allowed between the result and the f64 reference rounded to T. exp,
// log and rsqrt are not correctly rounded in f32 or f64 (nor on GPUs); f16 and
// bf16 compute them in f32 and round once, which can land one ulp off.
template <class T>
int64_t tolerance(Fn f) {
  if (f == Fn::kExp || f == Fn::kLog || f == Fn::kRsqrt) return kIsNarrow<T> ? 1 : 2;
  return 0;
}

// Each function on tiles of random operands with infinities, NaN, zeros and
// subnormals mixed in; exp gets operands where it neither overflows nor
// underflows everywhere.
TYPED_TEST(FloatUnaryTest, MathFunctionsMatchTheReference) {
  using T = TypeParam;
  constexpr DType kD = dtype_v<T>();
  Rng rng;
  SCOPED_TRACE(rng.trace());
  KernelBuilder k("float_unary");
  Value x = k.arg(ptr(kD), "x"), e = k.arg(ptr(kD), "e"), out = k.arg(ptr(kD), "out");
  Value n = k.arg(i32, "n"), ld = k.arg(i32, "ld");
  Value offs = k.program_id() * kBlock + k.arange(0, kBlock);  // [256] i32
  Value mask = offs < n;
  Value xv = load(x + offs, mask, 1.0), ev = load(e + offs, mask, 0);  // [256]
  for (int j = 0; j < 7; ++j) store(out + j * ld + offs, apply(kFns[j], kFns[j] == Fn::kExp ? ev : xv), mask);

  const int n_value = static_cast<int>(rng.uniform(1, 4 * kBlock)), ld_value = n_value + kBlock;
  std::vector<T> xs = make_vector<T>(n_value, [&] { return random_float_with_edges<T>(rng, -12, 12); });
  std::vector<T> es = make_vector<T>(n_value, [&] { return random_float<T>(rng, -8, 4); });
  std::vector<T> got = poisoned<T>(7 * ld_value);
  TESSEL_ASSERT_OK(run(k, (n_value + kBlock - 1) / kBlock, xs.data(), es.data(), got.data(), n_value, ld_value));

  for (int j = 0; j < 7; ++j) {
    for (int i = 0; i < ld_value; ++i) {
      T g = got[j * ld_value + i];
      if (i >= n_value) {
        ASSERT_TRUE(is_poison(g)) << name(kFns[j]) << ": wrote past n at " << i;
        continue;
      }
      T in = kFns[j] == Fn::kExp ? es[i] : xs[i];
      T want = from_f64<T>(reference(kFns[j], to_f64(in)));
      ASSERT_LE(ulp_distance(g, want), tolerance<T>(kFns[j]))
          << name(kFns[j]) << "(" << show(in) << ") = " << show(g) << ", want " << show(want);
    }
  }
}

// The exact fma rounded once: std::fma in f32 and f64; for f16 and bf16 the
// product is exact in f64 and the sum's rounding error (TwoSum) breaks a tie.
template <class T>
T fma_reference(T a, T b, T c) {
  if constexpr (std::is_same_v<T, float>) {
    return std::fmaf(a, b, c);
  } else if constexpr (std::is_same_v<T, double>) {
    return std::fma(a, b, c);
  } else {
    double p = to_f64(a) * to_f64(b), z = to_f64(c);
    double s = p + z, bb = s - p, err = (p - (s - bb)) + (z - bb);
    return from_f64<T>(s, std::isnan(err) ? 0 : (err > 0) - (err < 0));
  }
}

// fma is one rounding of a * b + c. The fixed cases are ties of T's format
// plus a term too small for a wider intermediate to keep: rounding twice
// (through f32 for f16 and bf16, through f64 for f32) gets them wrong.
TYPED_TEST(FloatUnaryTest, FmaRoundsOnce) {
  using T = TypeParam;
  constexpr DType kD = dtype_v<T>();
  Rng rng;
  SCOPED_TRACE(rng.trace());
  std::vector<std::array<double, 3>> fixed = {
      {1.0625, 1.0625, std::ldexp(1.0, -30)},
      {1.5, 1027.0 / 1024, std::ldexp(1.0, -24)},
      {-1.5, 1027.0 / 1024, -std::ldexp(1.0, -24)},
      {1 + std::ldexp(1.0, -12), 1 + std::ldexp(1.0, -12), std::ldexp(1.0, -60)},
      {INFINITY, 0, 1},
      {2, 3, NAN}};
  KernelBuilder k("fma");
  Value a = k.arg(ptr(kD), "a"), b = k.arg(ptr(kD), "b"), c = k.arg(ptr(kD), "c");
  Value out = k.arg(ptr(kD), "out"), n = k.arg(i32, "n");
  Value offs = k.program_id() * kBlock + k.arange(0, kBlock);  // [256] i32
  Value mask = offs < n;
  store(out + offs, fma(load(a + offs, mask, 0), load(b + offs, mask, 0), load(c + offs, mask, 0)), mask);
  // A scalar fma of the first elements and a literal addend.
  store(out + n, fma(load(a), load(b), 0.5));

  const int n_value = static_cast<int>(fixed.size() + rng.uniform(1, 3 * kBlock));
  std::vector<T> as(n_value), bs(n_value), cs(n_value);
  for (int i = 0; i < n_value; ++i) {
    if (i < static_cast<int>(fixed.size())) {
      as[i] = from_f64<T>(fixed[i][0]);
      bs[i] = from_f64<T>(fixed[i][1]);
      cs[i] = from_f64<T>(fixed[i][2]);
    } else {
      as[i] = random_float_with_edges<T>(rng, -8, 8);
      bs[i] = random_float_with_edges<T>(rng, -8, 8);
      // Addends from comparable to far below the product.
      cs[i] = random_float<T>(rng, kIsNarrow<T> ? -24 : -60, 8);
    }
  }
  std::vector<T> got = poisoned<T>(n_value + 2);
  TESSEL_ASSERT_OK(run(k, (n_value + kBlock - 1) / kBlock, as.data(), bs.data(), cs.data(), got.data(), n_value));
  for (int i = 0; i < n_value; ++i) {
    T want = fma_reference(as[i], bs[i], cs[i]);
    ASSERT_TRUE(same(got[i], want)) << "fma(" << show(as[i]) << ", " << show(bs[i]) << ", " << show(cs[i])
                                    << ") = " << show(got[i]) << ", want " << show(want) << " (element " << i << ")";
  }
  EXPECT_TRUE(same(got[n_value], fma_reference(as[0], bs[0], from_f64<T>(0.5))));
  EXPECT_TRUE(is_poison(got[n_value + 1]));
}

template <class T>
class IntUnaryTest : public ::testing::Test {};
using IntTypes = ::testing::Types<int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t>;
TYPED_TEST_SUITE(IntUnaryTest, IntTypes);

// Negation wraps (-MIN = MIN), ~ flips every bit, abs(MIN) = MIN and abs of
// an unsigned value is the value.
TYPED_TEST(IntUnaryTest, NegNotAbsWrap) {
  using T = TypeParam;
  constexpr DType kD = dtype_v<T>();
  constexpr int kN = 128;
  Rng rng;
  SCOPED_TRACE(rng.trace());
  KernelBuilder k("int_unary");
  Value x = k.arg(ptr(kD), "x"), out = k.arg(ptr(kD), "out");
  Value idx = k.arange(0, kN);  // [128] i32
  Value xv = load(x + idx);
  store(out + idx, -xv);
  store(out + kN + idx, ~xv);
  store(out + 2 * kN + idx, abs(xv));

  std::vector<T> xs = make_vector<T>(kN, [&] { return random_int<T>(rng); });
  xs[0] = std::numeric_limits<T>::min();
  xs[1] = std::numeric_limits<T>::max();
  xs[2] = 0;
  std::vector<T> got = poisoned<T>(3 * kN);
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), got.data()));
  for (int i = 0; i < kN; ++i) {
    const auto u = static_cast<uint64_t>(xs[i]);
    const T neg = static_cast<T>(0 - u);
    const T abs_value = std::is_signed_v<T> && xs[i] < 0 ? neg : xs[i];
    ASSERT_EQ(got[i], neg) << "-" << show(xs[i]);
    ASSERT_EQ(got[kN + i], static_cast<T>(~u)) << "~" << show(xs[i]);
    ASSERT_EQ(got[2 * kN + i], abs_value) << "abs " << show(xs[i]);
  }
}

template <class T>
class SelectTest : public ::testing::Test {};
using SelectTypes = ::testing::Types<int8_t, int32_t, uint64_t, Half, BFloat16, float, double>;
TYPED_TEST_SUITE(SelectTest, SelectTypes);

// select with a tile condition, a scalar condition (splat), a scalar operand
// and a literal operand.
TYPED_TEST(SelectTest, PicksPerElement) {
  using T = TypeParam;
  constexpr DType kD = dtype_v<T>();
  constexpr int kN = 64;
  Rng rng;
  SCOPED_TRACE(rng.trace());
  KernelBuilder k("select");
  Value c = k.arg(ptr(i1), "c"), a = k.arg(ptr(kD), "a"), b = k.arg(ptr(kD), "b");
  Value flag = k.arg(i1, "flag"), s = k.arg(kD, "s"), out = k.arg(ptr(kD), "out");
  Value idx = k.arange(0, kN);  // [64] i32
  Value cv = load(c + idx), av = load(a + idx), bv = load(b + idx);
  store(out + idx, select(cv, av, bv));
  store(out + kN + idx, select(flag, av, bv));
  store(out + 2 * kN + idx, select(cv, av, s));
  store(out + 3 * kN + idx, select(av > bv, 1, bv));

  std::vector<uint8_t> cs(kN);
  for (uint8_t& v : cs) v = rng.chance(0.5);
  std::vector<T> as = make_vector<T>(kN, [&] { return random_value<T>(rng); });
  std::vector<T> bs = make_vector<T>(kN, [&] { return random_value<T>(rng); });
  const bool flag_value = rng.chance(0.5);
  const T s_value = random_value<T>(rng);
  std::vector<T> got = poisoned<T>(4 * kN);
  TESSEL_ASSERT_OK(run(k, 1, static_cast<void*>(cs.data()), as.data(), bs.data(), flag_value, s_value, got.data()));
  for (int i = 0; i < kN; ++i) {
    bool greater;
    if constexpr (kIsNarrow<T>)
      greater = to_f64(as[i]) > to_f64(bs[i]);
    else
      greater = as[i] > bs[i];
    ASSERT_TRUE(same(got[i], cs[i] ? as[i] : bs[i])) << i;
    ASSERT_TRUE(same(got[kN + i], flag_value ? as[i] : bs[i])) << i;
    ASSERT_TRUE(same(got[2 * kN + i], cs[i] ? as[i] : s_value)) << i;
    ASSERT_TRUE(same(got[3 * kN + i], greater ? from_f64<T>(1) : bs[i])) << i;
  }
}

}  // namespace
}  // namespace tessel::testing
