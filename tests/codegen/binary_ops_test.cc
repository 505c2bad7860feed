// Elementwise binary operators and comparisons on every numeric dtype, run on
// the host target against a C++ reference: exact for integers (with tessel's
// rules for x/0, x%0, INT_MIN/-1 and shifts by the width or more) and for the
// correctly rounded float operations.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "tests/codegen/host_test_util.h"

namespace tessel::testing {
namespace {

enum class Bin { kAdd, kSub, kMul, kDiv, kRem, kMin, kMax, kAnd, kOr, kXor, kShl, kShr };
enum class Cmp { kEq, kNe, kLt, kLe, kGt, kGe };

constexpr Bin kIntOps[] = {Bin::kAdd, Bin::kSub, Bin::kMul, Bin::kDiv, Bin::kRem, Bin::kMin,
                           Bin::kMax, Bin::kAnd, Bin::kOr,  Bin::kXor, Bin::kShl, Bin::kShr};
constexpr Bin kFloatOps[] = {Bin::kAdd, Bin::kSub, Bin::kMul, Bin::kDiv, Bin::kRem, Bin::kMin, Bin::kMax};
constexpr Cmp kCmps[] = {Cmp::kEq, Cmp::kNe, Cmp::kLt, Cmp::kLe, Cmp::kGt, Cmp::kGe};

const char* name(Bin op) {
  constexpr const char* kNames[] = {"+", "-", "*", "/", "%", "minimum", "maximum", "&", "|", "^", "<<", ">>"};
  return kNames[static_cast<int>(op)];
}
const char* name(Cmp op) {
  constexpr const char* kNames[] = {"==", "!=", "<", "<=", ">", ">="};
  return kNames[static_cast<int>(op)];
}

Value apply(Bin op, const Value& a, const Value& b) {
  switch (op) {
    case Bin::kAdd:
      return a + b;
    case Bin::kSub:
      return a - b;
    case Bin::kMul:
      return a * b;
    case Bin::kDiv:
      return a / b;
    case Bin::kRem:
      return a % b;
    case Bin::kMin:
      return minimum(a, b);
    case Bin::kMax:
      return maximum(a, b);
    case Bin::kAnd:
      return a & b;
    case Bin::kOr:
      return a | b;
    case Bin::kXor:
      return a ^ b;
    case Bin::kShl:
      return a << b;
    case Bin::kShr:
      return a >> b;
  }
  return Value();
}

// Integer semantics: wrapping arithmetic, x/0 = -1, x%0 = x, MIN/-1 = MIN,
// MIN%-1 = 0, and shift amounts (read as unsigned) of the width or more give
// 0, or the sign for an arithmetic right shift.
template <class T>
T int_reference(Bin op, T x, T y) {
  using U = std::make_unsigned_t<T>;
  constexpr int kBits = 8 * sizeof(T);
  const auto ux = static_cast<uint64_t>(x), uy = static_cast<uint64_t>(y);
  const bool overflow = std::is_signed_v<T> && x == std::numeric_limits<T>::min() && y == static_cast<T>(-1);
  const U amount = static_cast<U>(y);
  switch (op) {
    case Bin::kAdd:
      return static_cast<T>(ux + uy);
    case Bin::kSub:
      return static_cast<T>(ux - uy);
    case Bin::kMul:
      return static_cast<T>(ux * uy);
    case Bin::kDiv:
      return y == 0 ? static_cast<T>(-1) : overflow ? x : static_cast<T>(x / y);
    case Bin::kRem:
      return y == 0 ? x : overflow ? T(0) : static_cast<T>(x % y);
    case Bin::kMin:
      return std::min(x, y);
    case Bin::kMax:
      return std::max(x, y);
    case Bin::kAnd:
      return static_cast<T>(x & y);
    case Bin::kOr:
      return static_cast<T>(x | y);
    case Bin::kXor:
      return static_cast<T>(x ^ y);
    case Bin::kShl:
      return amount >= kBits ? T(0) : static_cast<T>(ux << amount);
    case Bin::kShr:
      if (amount >= kBits) return std::is_signed_v<T> && x < 0 ? static_cast<T>(-1) : T(0);
      return static_cast<T>(x >> amount);  // arithmetic for signed T (C++20)
  }
  return T(0);
}

// Float semantics: the exact result rounded once to nearest even. Computing
// in f64 and rounding again to T gives that for + - * / (f64 has more than
// twice T's precision plus two bits); % is defined by its formula below; min
// and max ignore a NaN operand.
template <class T>
T float_reference(Bin op, T x, T y) {
  const double a = to_f64(x), b = to_f64(y);
  switch (op) {
    case Bin::kAdd:
      return from_f64<T>(a + b);
    case Bin::kSub:
      return from_f64<T>(a - b);
    case Bin::kMul:
      return from_f64<T>(a * b);
    case Bin::kDiv:
      return from_f64<T>(a / b);
    case Bin::kRem: {
      // tessel's float %: x - trunc(x / y) * y with one rounding, computed in
      // f32 for f16, bf16 and f32 and in f64 for f64, then rounded to T.
      if constexpr (std::is_same_v<T, double>) return std::fma(-std::trunc(a / b), b, a);
      const float xf = static_cast<float>(a), yf = static_cast<float>(b);
      return from_f64<T>(std::fma(-std::trunc(xf / yf), yf, xf));
    }
    case Bin::kMin:
      return from_f64<T>(std::fmin(a, b));
    case Bin::kMax:
      return from_f64<T>(std::fmax(a, b));
    default:
      return T{};
  }
}

template <class T>
T reference(Bin op, T x, T y) {
  if constexpr (kIsFloat<T>)
    return float_reference(op, x, y);
  else
    return int_reference(op, x, y);
}

// A comparison on tessel Values (building the kernel) or on numbers (the
// reference): one switch for both.
template <class V>
auto compare(Cmp op, const V& a, const V& b) -> decltype(a == b) {
  switch (op) {
    case Cmp::kEq:
      return a == b;
    case Cmp::kNe:
      return a != b;
    case Cmp::kLt:
      return a < b;
    case Cmp::kLe:
      return a <= b;
    case Cmp::kGt:
      return a > b;
    case Cmp::kGe:
      return a >= b;
  }
  return decltype(a == b)();
}

// Ordered comparisons (false on NaN) but != (true on NaN), as in C++.
template <class T>
bool reference(Cmp op, T x, T y) {
  if constexpr (kIsNarrow<T>)
    return compare(op, to_f64(x), to_f64(y));
  else
    return compare(op, x, y);
}

// Operand pairs every run includes, so that the rules for edge cases are
// checked every time and not only when random inputs happen to hit them.
template <class T>
std::vector<std::pair<T, T>> edge_pairs() {
  using L = std::numeric_limits<T>;
  if constexpr (kIsFloat<T>) {
    const double inf = INFINITY, nan = NAN;
    const std::pair<double, double> pairs[] = {{1, 0},   {-1, 0},   {0, 0},    {inf, inf}, {inf, -inf}, {nan, 1},
                                               {1, nan}, {-0.0, 0}, {0, -0.0}, {5, inf},   {-inf, 3},   {7, -2}};
    std::vector<std::pair<T, T>> out;
    for (auto [a, b] : pairs) out.push_back({from_f64<T>(a), from_f64<T>(b)});
    return out;
  } else {
    constexpr T kBits = static_cast<T>(8 * sizeof(T));
    return {{L::min(), static_cast<T>(-1)},
            {L::max(), T(0)},
            {L::min(), T(0)},
            {T(0), T(0)},
            {T(7), static_cast<T>(-2)},
            {L::max(), static_cast<T>(-1)},
            {T(1), kBits},
            {L::min(), kBits},
            {L::min(), static_cast<T>(kBits - 1)},
            {static_cast<T>(-5), T(kBits + 1)},
            {static_cast<T>(-5), static_cast<T>(kBits - 1)},
            {T(3), L::max()}};
  }
}

template <class T>
class BinaryOpsTest : public ::testing::Test {};

using NumericTypes = ::testing::Types<int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, Half,
                                      BFloat16, float, double>;
TYPED_TEST_SUITE(BinaryOpsTest, NumericTypes);

// Every operator of the dtype on tiles of random operands (and the edge
// pairs), in blocks of 256 with a partial last block; each op writes its own
// row of a poisoned output whose padding must stay poisoned.
TYPED_TEST(BinaryOpsTest, TilesMatchTheReference) {
  using T = TypeParam;
  constexpr DType kD = dtype_v<T>();
  constexpr int kBlock = 256;
  Rng rng;
  SCOPED_TRACE(rng.trace());
  std::vector<Bin> ops;
  if constexpr (kIsFloat<T>)
    ops.assign(std::begin(kFloatOps), std::end(kFloatOps));
  else
    ops.assign(std::begin(kIntOps), std::end(kIntOps));

  KernelBuilder k("binary_ops");
  Value x = k.arg(ptr(kD), "x"), y = k.arg(ptr(kD), "y");
  Value out = k.arg(ptr(kD), "out"), cmp = k.arg(ptr(i1), "cmp");
  Value n = k.arg(i32, "n"), ld = k.arg(i32, "ld");
  Value offs = k.program_id() * kBlock + k.arange(0, kBlock);  // [256] i32
  Value mask = offs < n;
  Value xv = load(x + offs, mask, 0), yv = load(y + offs, mask, 0);  // [256]
  for (size_t j = 0; j < ops.size(); ++j) store(out + static_cast<int>(j) * ld + offs, apply(ops[j], xv, yv), mask);
  for (int j = 0; j < 6; ++j) store(cmp + j * ld + offs, compare(kCmps[j], xv, yv), mask);

  std::vector<std::pair<T, T>> edges = edge_pairs<T>();
  const int n_value = static_cast<int>(edges.size() + rng.uniform(1, 4 * kBlock));
  const int ld_value = n_value + kBlock;
  std::vector<T> xs(n_value), ys(n_value);
  for (int i = 0; i < n_value; ++i) {
    if (i < static_cast<int>(edges.size())) {
      std::tie(xs[i], ys[i]) = edges[i];
    } else {
      xs[i] = random_value<T>(rng);
      // Shift amounts mostly below the width, sometimes at or past it.
      ys[i] =
          !kIsFloat<T> && rng.chance(0.3) ? static_cast<T>(rng.uniform(0, 8 * sizeof(T) + 2)) : random_value<T>(rng);
    }
  }
  std::vector<T> got = poisoned<T>(ops.size() * ld_value);
  std::vector<uint8_t> got_cmp = poisoned<uint8_t>(6 * ld_value);
  TESSEL_ASSERT_OK(run(k, (n_value + kBlock - 1) / kBlock, xs.data(), ys.data(), got.data(),
                       static_cast<void*>(got_cmp.data()), n_value, ld_value));

  for (size_t j = 0; j < ops.size(); ++j) {
    bool min_max = ops[j] == Bin::kMin || ops[j] == Bin::kMax;
    for (int i = 0; i < ld_value; ++i) {
      T g = got[j * ld_value + i];
      if (i >= n_value) {
        ASSERT_TRUE(is_poison(g)) << name(ops[j]) << ": wrote past n at " << i;
        continue;
      }
      T want = reference(ops[j], xs[i], ys[i]);
      ASSERT_TRUE(same(g, want, !min_max)) << show(xs[i]) << " " << name(ops[j]) << " " << show(ys[i]) << " = "
                                           << show(g) << ", want " << show(want) << " (element " << i << ")";
    }
  }
  for (int j = 0; j < 6; ++j) {
    for (int i = 0; i < ld_value; ++i) {
      uint8_t g = got_cmp[j * ld_value + i];
      if (i >= n_value) {
        ASSERT_EQ(g, kPoison) << name(kCmps[j]) << ": wrote past n at " << i;
        continue;
      }
      ASSERT_EQ(g, reference(kCmps[j], xs[i], ys[i]) ? 1 : 0)
          << show(xs[i]) << " " << name(kCmps[j]) << " " << show(ys[i]) << " (element " << i << ")";
    }
  }
}

// The same operators on scalar kernel arguments (scalars lower without tile
// loops), with one operand a literal folded in as a constant.
TYPED_TEST(BinaryOpsTest, ScalarsAndLiteralsMatchTheReference) {
  using T = TypeParam;
  constexpr DType kD = dtype_v<T>();
  Rng rng;
  SCOPED_TRACE(rng.trace());
  std::vector<Bin> ops;
  if constexpr (kIsFloat<T>)
    ops.assign(std::begin(kFloatOps), std::end(kFloatOps));
  else
    ops.assign(std::begin(kIntOps), std::end(kIntOps));
  std::vector<std::pair<T, T>> edges = edge_pairs<T>();
  const auto [x_value, y_value] = rng.chance(0.5) ? edges[rng.uniform(0, edges.size() - 1)]
                                                  : std::pair<T, T>{random_value<T>(rng), random_value<T>(rng)};
  const int literal = static_cast<int>(rng.uniform(kIsFloat<T> || std::is_signed_v<T> ? -3 : 0, 3));

  KernelBuilder k("binary_scalars");
  Value x = k.arg(kD, "x"), y = k.arg(kD, "y"), out = k.arg(ptr(kD), "out");
  const int count = static_cast<int>(ops.size());
  for (int j = 0; j < count; ++j) {
    store(out + j, apply(ops[j], x, y));
    store(out + (count + j), apply(ops[j], x, k.constant(literal, kD)));
  }
  std::vector<T> got = poisoned<T>(2 * count + 1);
  TESSEL_ASSERT_OK(run(k, 1, x_value, y_value, got.data()));

  const T lit = from_f64<T>(literal);
  for (int j = 0; j < count; ++j) {
    T want = reference(ops[j], x_value, y_value);
    bool min_max = ops[j] == Bin::kMin || ops[j] == Bin::kMax;
    EXPECT_TRUE(same(got[j], want, !min_max)) << show(x_value) << " " << name(ops[j]) << " " << show(y_value) << " = "
                                              << show(got[j]) << ", want " << show(want);
    want = reference(ops[j], x_value, lit);
    EXPECT_TRUE(same(got[count + j], want, !min_max)) << show(x_value) << " " << name(ops[j]) << " literal " << literal
                                                      << " = " << show(got[count + j]) << ", want " << show(want);
  }
  EXPECT_TRUE(is_poison(got[2 * count]));
}

// Literal operands take the dtype of the other side; on i1 tiles the bitwise
// operators and equality are defined.
TEST(BinaryOps, BoolTilesCombineBitwise) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  constexpr int kN = 64;
  KernelBuilder k("bool_ops");
  Value a = k.arg(ptr(i1), "a"), b = k.arg(ptr(i1), "b"), out = k.arg(ptr(i1), "out");
  Value idx = k.arange(0, kN);
  Value av = load(a + idx), bv = load(b + idx);  // [64] i1
  Value results[] = {av & bv, av | bv, av ^ bv, av == bv, av != bv, !av};
  for (int j = 0; j < 6; ++j) store(out + j * kN + idx, results[j]);

  std::vector<uint8_t> as(kN), bs(kN);
  for (int i = 0; i < kN; ++i) as[i] = rng.chance(0.5), bs[i] = rng.chance(0.5);
  std::vector<uint8_t> got = poisoned<uint8_t>(6 * kN);
  TESSEL_ASSERT_OK(
      run(k, 1, static_cast<void*>(as.data()), static_cast<void*>(bs.data()), static_cast<void*>(got.data())));
  for (int i = 0; i < kN; ++i) {
    const int want[] = {as[i] & bs[i], as[i] | bs[i], as[i] ^ bs[i], as[i] == bs[i], as[i] != bs[i], !as[i]};
    for (int j = 0; j < 6; ++j) ASSERT_EQ(got[j * kN + i], want[j]) << "op " << j << ", element " << i;
  }
}

}  // namespace
}  // namespace tessel::testing
