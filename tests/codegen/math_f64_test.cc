// f64 exp and log (codegen/math_f64.cc, the same expansion on every target)
// against long double libm: within 1 ulp over the whole range, including
// subnormal inputs and results, and exact special values.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "dsl/builder.h"
#include "dsl/ops.h"
#include "gtest/gtest.h"
#include "runtime/device.h"

namespace tessel {
namespace {

constexpr int kBlock = 1024;

// y[i] = exp(x[i]) or log(x[i]).
std::vector<double> run(bool is_exp, const std::vector<double>& x) {
  KernelBuilder k(is_exp ? "exp64" : "log64");
  Value in = k.arg(ptr(f64), "x"), out = k.arg(ptr(f64), "y"), n = k.arg(i32, "n");
  Value offs = k.program_id() * kBlock + k.arange(0, kBlock);
  Value v = load(in + offs, offs < n, 1.0);
  store(out + offs, is_exp ? exp(v) : log(v), offs < n);
  Device d = *Device::open("host:2");
  Function fn = *d.compile(*k.build());
  std::vector<double> y(x.size(), std::numeric_limits<double>::quiet_NaN());
  int n_ = static_cast<int>(x.size());
  EXPECT_TRUE(fn.launch({.grid = (n_ + kBlock - 1) / kBlock}, x.data(), y.data(), n_).ok());
  return y;
}

// Distance in ulps from the exact value (long double), in units of the
// double spacing at the exact value.
double ulps(double got, long double exact) {
  if (std::isinf(exact) || exact == 0) return got == static_cast<double>(exact) ? 0 : INFINITY;
  double e = static_cast<double>(exact);
  double spacing = std::nextafter(std::fabs(e), INFINITY) - std::fabs(e);
  if (spacing == 0 || std::isinf(spacing)) spacing = std::numeric_limits<double>::denorm_min();
  return static_cast<double>(std::fabs(static_cast<long double>(got) - exact) / spacing);
}

double worst_ulps(bool is_exp, const std::vector<double>& x, double* at) {
  std::vector<double> y = run(is_exp, x);
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    long double exact = is_exp ? std::exp(static_cast<long double>(x[i])) : std::log(static_cast<long double>(x[i]));
    double u = ulps(y[i], exact);
    if (u > worst) worst = u, *at = x[i];
  }
  return worst;
}

TEST(MathF64, ExpIsWithinOneUlpOverItsRange) {
  std::mt19937_64 rng(std::random_device{}());
  std::vector<double> x;
  std::uniform_real_distribution<double> wide(-745, 709.7), near0(-1, 1), tiny(-1e-12, 1e-12);
  for (int i = 0; i < 200000; ++i) x.push_back(wide(rng));
  for (int i = 0; i < 50000; ++i) x.push_back(near0(rng));
  for (int i = 0; i < 10000; ++i) x.push_back(tiny(rng));
  for (double edge : {-745.13, -740.0, -708.5, -708.3, 700.0, 709.78, 0.5 * M_LN2, -0.5 * M_LN2}) x.push_back(edge);
  double at = 0;
  double worst = worst_ulps(true, x, &at);
  EXPECT_LE(worst, 1.0) << "at x = " << at;
  RecordProperty("worst_ulps", std::to_string(worst));
}

TEST(MathF64, LogIsWithinOneUlpOverItsRange) {
  std::mt19937_64 rng(std::random_device{}());
  std::vector<double> x;
  std::uniform_real_distribution<double> exponent(-1074, 1023), near1(0.5, 2), very_near1(1 - 1e-6, 1 + 1e-6);
  for (int i = 0; i < 200000; ++i) x.push_back(std::exp2(exponent(rng)));  // subnormals to the largest
  for (int i = 0; i < 50000; ++i) x.push_back(near1(rng));
  for (int i = 0; i < 10000; ++i) x.push_back(very_near1(rng));
  for (double edge : {std::numeric_limits<double>::denorm_min(), std::numeric_limits<double>::min(),
                      std::numeric_limits<double>::max(), M_SQRT2, M_SQRT1_2, std::nextafter(1.0, 2.0)}) {
    x.push_back(edge);
  }
  double at = 0;
  double worst = worst_ulps(false, x, &at);
  EXPECT_LE(worst, 1.0) << "at x = " << at;
  RecordProperty("worst_ulps", std::to_string(worst));
}

TEST(MathF64, SpecialValues) {
  const double inf = INFINITY, nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> e = run(true, {0.0, -0.0, inf, -inf, nan, 710.0, -746.0, 1.0});
  EXPECT_EQ(e[0], 1.0);
  EXPECT_EQ(e[1], 1.0);
  EXPECT_EQ(e[2], inf);
  EXPECT_EQ(e[3], 0.0);
  EXPECT_TRUE(std::isnan(e[4]));
  EXPECT_EQ(e[5], inf);
  EXPECT_EQ(e[6], 0.0);
  EXPECT_EQ(e[7], static_cast<double>(std::exp(1.0L)));
  std::vector<double> l = run(false, {1.0, 0.0, -0.0, inf, -1.0, -inf, nan, 2.0});
  EXPECT_EQ(l[0], 0.0);
  EXPECT_FALSE(std::signbit(l[0]));
  EXPECT_EQ(l[1], -inf);
  EXPECT_EQ(l[2], -inf);
  EXPECT_EQ(l[3], inf);
  EXPECT_TRUE(std::isnan(l[4]));
  EXPECT_TRUE(std::isnan(l[5]));
  EXPECT_TRUE(std::isnan(l[6]));
  EXPECT_EQ(l[7], static_cast<double>(std::log(2.0L)));
}

}  // namespace
}  // namespace tessel
