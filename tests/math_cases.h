// The math library's accuracy cases, shared by the host test
// (tests/codegen/math_test.cc) and the GPU test (tests/gpu/math_agree_test.cc):
// each f32 function with its long double reference, the inputs it is measured
// on (its whole range, the places where it is hardest, special values) and
// the bound in ulps that docs/math.md promises.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "dsl/ops.h"

namespace tessel::math_cases {

struct Case {
  std::string name;
  int arity = 1;  // 2: pow(x, y), atan2(y, x)
  std::function<Value(const Value&, const Value&)> apply;
  std::function<long double(long double, long double)> reference;
  // Inputs (y is ignored for arity 1), `n` random ones plus fixed ones.
  std::function<void(std::mt19937_64&, int n, std::vector<float>& x, std::vector<float>& y)> inputs;
  double bound;  // worst error in ulps of the exact result
};

// A float with random bits in [lo, hi] of its exponent: every binade alike.
inline float any_binade(std::mt19937_64& g, int lo, int hi, bool negative_too) {
  std::uniform_int_distribution<int> e(lo, hi);
  std::uniform_int_distribution<uint32_t> m(0, (1u << 23) - 1);
  float v = std::ldexp(1.0f + static_cast<float>(m(g)) * 0x1p-23f, e(g));
  return negative_too && (g() & 1) ? -v : v;
}

// Uniform over [lo, hi] plus the fixed values.
inline auto uniform(double lo, double hi, std::vector<float> fixed = {}) {
  return [=](std::mt19937_64& g, int n, std::vector<float>& x, std::vector<float>&) {
    std::uniform_real_distribution<double> d(lo, hi);
    for (int i = 0; i < n; ++i) x.push_back(static_cast<float>(d(g)));
    x.insert(x.end(), fixed.begin(), fixed.end());
  };
}

// Two ranges: a wide one and one where the function is hardest.
inline auto two_ranges(double lo, double hi, double lo2, double hi2, std::vector<float> fixed = {}) {
  return [=](std::mt19937_64& g, int n, std::vector<float>& x, std::vector<float>& y) {
    uniform(lo, hi)(g, n - n / 4, x, y);
    uniform(lo2, hi2, fixed)(g, n / 4, x, y);
  };
}

inline const float kInf = std::numeric_limits<float>::infinity();
inline const float kNaN = std::numeric_limits<float>::quiet_NaN();
inline const float kMin = std::numeric_limits<float>::min();
inline const float kTrue0 = std::numeric_limits<float>::denorm_min();

inline std::vector<Case> cases() {
  using L = long double;
  auto un = [](Value (*f)(const Operand&, MathForm, Loc)) {
    return [f](const Value& x, const Value&) { return f(x, MathForm::kAccurate, Loc::current()); };
  };
  auto un1 = [](Value (*f)(const Operand&, Loc)) {
    return [f](const Value& x, const Value&) { return f(x, Loc::current()); };
  };
  auto logs = [](std::mt19937_64& g, int n, std::vector<float>& x, std::vector<float>& y) {
    for (int i = 0; i < n / 2; ++i) x.push_back(any_binade(g, -149, 127, false));
    uniform(0.5, 2)(g, n / 4, x, y);
    uniform(1 - 1e-3, 1 + 1e-3,
            {kTrue0, kMin, 1.0f, 2.0f, 0x1p-126f, 0x1.fffffep127f, 0.0f, -0.0f, -1.0f, kInf, -kInf, kNaN})(g, n / 4, x,
                                                                                                           y);
  };
  auto trig = [](std::mt19937_64& g, int n, std::vector<float>& x, std::vector<float>& y) {
    uniform(-10, 10)(g, n / 2, x, y);
    uniform(-105615, 105615)(g, n / 4, x, y);
    for (int i = 0; i < n / 4; ++i) x.push_back(any_binade(g, 16, 127, true));
    // Near multiples of pi/2, below and above the large-argument threshold,
    // and 16367173 * 2^72, which is very near one.
    for (float v : {1.5707964f, 3.1415927f, 4.712389f, 6.2831855f, 105613.56f, 105616.39f, 0x1.f37a8ap+95f, 0x1p-140f,
                    -0.0f, 0.0f, kInf, -kInf, kNaN, 0x1.fffffep127f}) {
      x.push_back(v);
    }
  };
  std::vector<Case> c;
  c.push_back(
      {"exp", 1, un(exp), [](L x, L) { return std::exp(x); },
       two_ranges(-104, 89, -1, 1, {88.72283f, 88.7229f, -87.3f, -103.97f, -103.98f, 0.0f, -0.0f, kInf, -kInf, kNaN}),
       1.0});
  c.push_back({"exp2", 1, un(exp2), [](L x, L) { return std::exp2(x); },
               two_ranges(-151, 128, -1, 1,
                          {127.99999f, 128.0f, -126.0f, -149.0f, -149.5f, -150.0f, -151.0f, 0.0f, kInf, -kInf, kNaN}),
               1.0});
  c.push_back({"log", 1, un(log), [](L x, L) { return std::log(x); }, logs, 1.0});
  c.push_back({"log2", 1, un(log2), [](L x, L) { return std::log2(x); }, logs, 1.5});
  c.push_back({"tanh", 1, un(tanh), [](L x, L) { return std::tanh(x); },
               two_ranges(-10, 10, -0.6, 0.6, {0.55f, -0.55f, 0x1p-140f, -0.0f, 9.1f, 50.0f, kInf, -kInf, kNaN}), 2.0});
  c.push_back({"sigmoid", 1, un1(sigmoid), [](L x, L) { return 1 / (1 + std::exp(-x)); },
               two_ranges(-104, 90, -5, 5, {0.0f, -0.0f, -87.0f, -103.0f, -104.0f, 17.0f, kInf, -kInf, kNaN}), 3.0});
  c.push_back({"erf", 1, un1(erf), [](L x, L) { return std::erf(x); },
               two_ranges(-5, 5, -1.2, 1.2, {1.0f, -1.0f, 3.92f, 3.9199998f, 0x1p-140f, -0.0f, kInf, -kInf, kNaN}),
               2.5});
  c.push_back({"sin", 1, un(sin), [](L x, L) { return std::sin(x); }, trig, 2.0});
  c.push_back({"cos", 1, un(cos), [](L x, L) { return std::cos(x); }, trig, 2.0});
  c.push_back({"sinh", 1, un1(sinh), [](L x, L) { return std::sinh(x); },
               two_ranges(-90, 90, -1.2, 1.2, {1.0f, 9.0f, 89.41f, 89.42f, 0x1p-140f, -0.0f, kInf, -kInf, kNaN}), 3.0});
  c.push_back({"cosh", 1, un1(cosh), [](L x, L) { return std::cosh(x); },
               two_ranges(-90, 90, -1.2, 1.2, {0.0f, 9.0f, 89.41f, 89.42f, kInf, -kInf, kNaN}), 3.0});
  c.push_back({"log1p", 1, un1(log1p), [](L x, L) { return std::log1p(x); },
               [](std::mt19937_64& g, int n, std::vector<float>& x, std::vector<float>& y) {
                 uniform(-1, 1)(g, n / 4, x, y);
                 uniform(-1e-3, 1e-3)(g, n / 4, x, y);
                 for (int i = 0; i < n / 4; ++i) x.push_back(any_binade(g, -149, 127, false));
                 uniform(-1, -0.999,
                         {-1.0f, -0.99999994f, 0.0f, -0.0f, 0x1p-140f, -0x1p-140f, 0x1p-30f, 0x1p29f, 0x1.fffffep127f,
                          -2.0f, kInf, -kInf, kNaN})(g, n / 4, x, y);
               },
               1.0});
  c.push_back({"expm1", 1, un1(expm1), [](L x, L) { return std::expm1(x); },
               two_ranges(-104, 89, -0.5, 0.5,
                          {0.35f, 0.34999999f, -0.35f, -0.34999999f, 88.72283f, 88.7229f, -17.0f, -104.0f, 0x1p-140f,
                           -0.0f, 0.0f, kInf, -kInf, kNaN}),
               1.0});
  c.push_back({"tan", 1, un1(tan), [](L x, L) { return std::tan(x); }, trig, 1.0});
  auto inverse = [](std::mt19937_64& g, int n, std::vector<float>& x, std::vector<float>& y) {
    uniform(-1, 1)(g, n / 2, x, y);
    uniform(0.999, 1)(g, n / 8, x, y);
    uniform(-1, -0.999)(g, n / 8, x, y);
    for (int i = 0; i < n / 4; ++i) x.push_back(any_binade(g, -149, -1, true));
    for (float v :
         {1.0f, -1.0f, 0.99999994f, -0.99999994f, 0.5f, 0.0f, -0.0f, 0x1p-149f, 1.0000001f, -2.0f, kInf, -kInf, kNaN}) {
      x.push_back(v);
    }
  };
  c.push_back({"asin", 1, un1(asin), [](L x, L) { return std::asin(x); }, inverse, 1.0});
  c.push_back({"acos", 1, un1(acos), [](L x, L) { return std::acos(x); }, inverse, 1.0});
  c.push_back({"atan", 1, un1(atan), [](L x, L) { return std::atan(x); },
               [](std::mt19937_64& g, int n, std::vector<float>& x, std::vector<float>& y) {
                 uniform(-4, 4)(g, n / 2, x, y);
                 for (int i = 0; i < n / 2; ++i) x.push_back(any_binade(g, -149, 127, true));
                 for (float v : {0.41421354f, 0.41421357f, 1.0f, -1.0f, 0.0f, -0.0f, 0x1p-149f, 0x1p100f,
                                 0x1.fffffep127f, kInf, -kInf, kNaN}) {
                   x.push_back(v);
                 }
               },
               1.0});
  c.push_back({"atan2", 2, [](const Value& y, const Value& x) { return atan2(y, x); },
               [](L y, L x) { return std::atan2(y, x); },
               [](std::mt19937_64& g, int n, std::vector<float>& y, std::vector<float>& x) {
                 std::uniform_real_distribution<double> d(-10, 10);
                 for (int i = 0; i < n / 2; ++i) {
                   y.push_back(static_cast<float>(d(g)));
                   x.push_back(static_cast<float>(d(g)));
                 }
                 for (int i = n / 2; i < n; ++i) {  // far apart in size
                   y.push_back(any_binade(g, -149, 127, true));
                   x.push_back(any_binade(g, -149, 127, true));
                 }
                 const float specials[] = {0.0f, -0.0f, 1.0f, -1.0f, 0x1p-149f, 0x1.fffffep127f, kInf, -kInf, kNaN};
                 for (float a : specials) {
                   for (float b : specials) y.push_back(a), x.push_back(b);
                 }
               },
               1.0});
  c.push_back({"pow", 2, [](const Value& x, const Value& y) { return pow(x, y); },
               [](L x, L y) { return std::pow(x, y); },
               [](std::mt19937_64& g, int n, std::vector<float>& x, std::vector<float>& y) {
                 std::uniform_real_distribution<double> e(-20, 20), p(-30, 30), small(-4, 4);
                 for (int i = 0; i < n / 2; ++i) {
                   x.push_back(static_cast<float>(std::exp2(e(g))));
                   y.push_back(static_cast<float>(p(g)));
                 }
                 for (int i = n / 2; i < n; ++i) {  // negative bases with integer powers
                   x.push_back(-static_cast<float>(std::exp2(small(g))));
                   y.push_back(static_cast<float>(std::lround(p(g))));
                 }
                 const float specials[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 2.0f, -2.0f, kInf, -kInf, kNaN, 3.0f, -3.0f};
                 for (float a : specials) {
                   for (float b : specials) x.push_back(a), y.push_back(b);
                 }
               },
               1.0});
  return c;
}

// The error of `got` in ulps of the f32 spacing at `exact` (subnormal
// spacing below the normal range); 0 where both are the same special value.
inline double ulps(float got, long double exact) {
  if (std::isnan(exact)) return std::isnan(got) ? 0 : INFINITY;
  if (std::isnan(got)) return INFINITY;
  if (exact == 0) return got == 0 && std::signbit(got) == std::signbit(exact) ? 0 : INFINITY;
  if (std::fabs(exact) >= 0x1.ffffffp127L) {  // rounds to infinity
    return std::isinf(got) && std::signbit(got) == std::signbit(exact) ? 0 : INFINITY;
  }
  if (std::isinf(got)) return INFINITY;
  int e = 0;
  std::frexp(static_cast<double>(std::fabs(exact)), &e);
  const long double spacing = std::ldexp(1.0L, std::max(e - 24, -149));
  return static_cast<double>(std::fabs(static_cast<long double>(got) - exact) / spacing);
}

}  // namespace tessel::math_cases
