// The math library on the host (codegen/math.h): each f32 function against
// long double libm within its bound over its range and special values
// (tests/math_cases.h), the f64 forms of tanh, sigmoid, sinh and cosh, the
// narrow dtypes through f32, and the builder's refusals.
#include <cmath>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "tests/codegen/host_test_util.h"
#include "tests/math_cases.h"

namespace tessel::testing {
namespace {

constexpr int kBlock = 1024;

// out[i] = f(x[i] [, y[i]]) in dtype T, on the host.
template <class T>
std::vector<T> run(const std::function<Value(const Value&, const Value&)>& f, int arity, const std::vector<T>& x,
                   const std::vector<T>& y) {
  DType d = dtype_v<T>();
  KernelBuilder k("math");
  Value px = k.arg(ptr(d), "x"), py = k.arg(ptr(d), "y"), out = k.arg(ptr(d), "out"), n = k.arg(i32, "n");
  Value offs = k.program_id() * kBlock + k.arange(0, kBlock);
  Value mask = offs < n;
  const Operand zero = d.is_float() ? Operand(0.0) : Operand(0);
  Value vx = load(px + offs, mask, zero);
  Value vy = arity == 2 ? load(py + offs, mask, zero) : vx;
  store(out + offs, f(vx, vy), mask);
  std::vector<T> result(x.size());
  absl::StatusOr<Kernel> ir = k.build();
  EXPECT_TRUE(ir.ok()) << ir.status();
  if (!ir.ok()) return result;
  Device device = *Device::open("host:2");
  absl::StatusOr<Function> fn = device.compile(*ir);
  EXPECT_TRUE(fn.ok()) << fn.status();
  if (!fn.ok()) return result;
  const int count = static_cast<int>(x.size());
  const T* ys = arity == 2 ? y.data() : x.data();
  EXPECT_TRUE(fn->launch({.grid = (count + kBlock - 1) / kBlock}, x.data(), ys, result.data(), count).ok());
  return result;
}

TEST(Math, EachF32FunctionIsWithinItsBound) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (const math_cases::Case& c : math_cases::cases()) {
    std::vector<float> x, y;
    c.inputs(rng.gen, 1 << 18, x, y);
    std::vector<float> got = run<float>(c.apply, c.arity, x, y);
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      long double exact = c.reference(x[i], c.arity == 2 ? y[i] : 0.0f);
      double u = math_cases::ulps(got[i], exact);
      if (u > worst) worst = u, at = i;
    }
    EXPECT_LE(worst, c.bound) << c.name << " at x = " << absl::StrFormat("%a", x[at])
                              << (c.arity == 2 ? absl::StrFormat(", y = %a", y[at]) : "") << ": got "
                              << absl::StrFormat("%a", got[at]);
    RecordProperty(c.name + "_worst_ulps", absl::StrFormat("%.3f", worst));
    std::printf("%-8s worst %.3f ulp over %zu inputs\n", c.name.c_str(), worst, x.size());
  }
}

// exp2, log2, tanh, sigmoid, sinh and cosh of f64 through f64 exp and log:
// within 3 ulp.
TEST(Math, F64FormsAreWithinThreeUlps) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  struct F64Case {
    const char* name;
    Value (*apply)(const Value&);
    long double (*reference)(long double);
    double lo, hi;
  };
  const F64Case cases[] = {
      {"exp2", [](const Value& v) { return exp2(v); }, [](long double v) { return std::exp2(v); }, -1080, 1025},
      {"log2", [](const Value& v) { return log2(v); }, [](long double v) { return std::log2(v); }, 1e-300, 1e300},
      {"tanh", [](const Value& v) { return tanh(v); }, [](long double v) { return std::tanh(v); }, -25, 25},
      {"sigmoid", [](const Value& v) { return sigmoid(v); }, [](long double v) { return 1 / (1 + std::exp(-v)); }, -745,
       40},
      {"sinh", [](const Value& v) { return sinh(v); }, [](long double v) { return std::sinh(v); }, -710, 710},
      {"cosh", [](const Value& v) { return cosh(v); }, [](long double v) { return std::cosh(v); }, -710, 710},
  };
  for (const F64Case& c : cases) {
    std::vector<double> x;
    for (int i = 0; i < 60000; ++i) x.push_back(rng.real(c.lo, c.hi));
    for (int i = 0; i < 20000; ++i) x.push_back(rng.real(-1.5, 1.5));
    for (double v : {0.0, -0.0, 0.55, 1.0, 20.0, 1e-300}) x.push_back(v);
    std::vector<double> got = run<double>([&](const Value& v, const Value&) { return c.apply(v); }, 1, x, x);
    double worst = 0, at = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      long double exact = c.reference(x[i]);
      double e = static_cast<double>(exact);
      double spacing = std::nextafter(std::fabs(e), INFINITY) - std::fabs(e);
      if (std::isinf(e) || spacing == 0) {
        EXPECT_EQ(got[i], e) << c.name << " at " << x[i];
        continue;
      }
      double u = static_cast<double>(std::fabs(got[i] - exact) / spacing);
      if (u > worst) worst = u, at = x[i];
    }
    EXPECT_LE(worst, 3.0) << c.name << " at x = " << absl::StrFormat("%a", at);
    std::printf("%-8s f64 worst %.3f ulp\n", c.name, worst);
  }
}

// f16 and bf16 compute in f32 and round once more: within one ulp of their
// own type, and the ops keep the operand's dtype.
TEST(Math, NarrowTypesRoundTheF32Result) {
  std::vector<float> x;
  for (int i = -400; i <= 400; ++i) x.push_back(i / 64.0f);
  for (bool is_f16 : {true, false}) {
    for (const math_cases::Case& c : math_cases::cases()) {
      if (c.arity != 1) continue;
      std::vector<float> got;
      if (is_f16) {
        std::vector<Half> h;
        for (float v : x) h.push_back(from_f64<Half>(v));
        for (Half v : run<Half>(c.apply, 1, h, h)) got.push_back(static_cast<float>(to_f64(v)));
      } else {
        std::vector<BFloat16> h;
        for (float v : x) h.push_back(from_f64<BFloat16>(v));
        for (BFloat16 v : run<BFloat16>(c.apply, 1, h, h)) got.push_back(static_cast<float>(to_f64(v)));
      }
      const double ulp_bits = is_f16 ? 0x1p-10 : 0x1p-7;
      for (size_t i = 0; i < x.size(); ++i) {
        double in = is_f16 ? to_f64(from_f64<Half>(x[i])) : to_f64(from_f64<BFloat16>(x[i]));
        long double exact = c.reference(in, 0);
        if (!std::isfinite(static_cast<double>(exact)) || std::fabs(exact) > 60000) continue;
        int e = 0;
        std::frexp(static_cast<double>(std::fabs(exact)), &e);
        double spacing = std::ldexp(ulp_bits, std::max(e - 1, is_f16 ? -14 : -126));
        EXPECT_LE(std::fabs(got[i] - exact), spacing) << c.name << (is_f16 ? " f16" : " bf16") << " at " << in;
      }
    }
  }
}

TEST(Math, FastFormsOnTheHostAreTheAccurateOnes) {
  std::vector<float> x;
  for (int i = -300; i <= 300; ++i) x.push_back(i / 16.0f + 0.01f);
  using F = Value (*)(const Operand&, MathForm, Loc);
  for (F f : {F(exp), F(exp2), F(log), F(log2), F(tanh), F(sin), F(cos)}) {
    auto form = [f](MathForm m) { return [f, m](const Value& v, const Value&) { return f(v, m, Loc::current()); }; };
    std::vector<float> accurate = run<float>(form(MathForm::kAccurate), 1, x, x);
    std::vector<float> fast = run<float>(form(MathForm::kFast), 1, x, x);
    ASSERT_EQ(0, std::memcmp(accurate.data(), fast.data(), x.size() * sizeof(float)));
  }
}

// log2 of every power of two, subnormals included, is its exponent, and
// exp2 of every integer in range its power, in f32 and f64.
TEST(Math, Log2AndExp2AreExactOnPowersOfTwo) {
  std::vector<float> p32, k32;
  for (int k = -149; k <= 127; ++k) p32.push_back(std::ldexp(1.0f, k)), k32.push_back(static_cast<float>(k));
  std::vector<float> l32 = run<float>([](const Value& v, const Value&) { return log2(v); }, 1, p32, p32);
  std::vector<float> e32 = run<float>([](const Value& v, const Value&) { return exp2(v); }, 1, k32, k32);
  EXPECT_EQ(l32, k32);
  EXPECT_EQ(e32, p32);
  std::vector<double> p64, k64;
  for (int k = -1074; k <= 1023; ++k) p64.push_back(std::ldexp(1.0, k)), k64.push_back(k);
  std::vector<double> l64 = run<double>([](const Value& v, const Value&) { return log2(v); }, 1, p64, p64);
  std::vector<double> e64 = run<double>([](const Value& v, const Value&) { return exp2(v); }, 1, k64, k64);
  EXPECT_EQ(l64, k64);
  EXPECT_EQ(e64, p64);
}

TEST(Math, RoundingAndClampingOps) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  std::vector<float> x = {-2.5f, -1.5f, -0.5f, -0.4f, 0.0f, 0.4f, 0.5f, 1.5f, 2.5f, 7.0f};
  for (int i = 0; i < 2000; ++i) {  // random values, and random halves
    x.push_back(static_cast<float>(rng.real(-100, 100)));
    x.push_back(static_cast<float>(rng.uniform(-200, 200)) + 0.5f);
  }
  std::vector<float> c = run<float>([](const Value& v, const Value&) { return ceil(v); }, 1, x, x);
  std::vector<float> r = run<float>([](const Value& v, const Value&) { return round(v); }, 1, x, x);
  std::vector<float> k = run<float>([](const Value& v, const Value&) { return clamp(v, -1.0, 2.0); }, 1, x, x);
  std::vector<float> w =
      run<float>([](const Value& v, const Value&) { return where(v < 0.0f, -v, v * 2.0f); }, 1, x, x);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(c[i], std::ceil(x[i])) << x[i];
    EXPECT_EQ(r[i], std::round(x[i])) << x[i];
    EXPECT_EQ(k[i], std::min(std::max(x[i], -1.0f), 2.0f)) << x[i];
    EXPECT_EQ(w[i], x[i] < 0 ? -x[i] : x[i] * 2) << x[i];
  }
  std::vector<int32_t> xi = {-7, -1, 0, 3, 9};
  for (int i = 0; i < 2000; ++i) xi.push_back(static_cast<int32_t>(rng.uniform(-1000, 1000)));
  std::vector<int32_t> m = run<int32_t>(
      [](const Value& v, const Value&) { return maximum(minimum(abs(v), 5), clamp(v, -2, 1)); }, 1, xi, xi);
  for (size_t i = 0; i < xi.size(); ++i) {
    EXPECT_EQ(m[i], std::max(std::min(std::abs(xi[i]), 5), std::min(std::max(xi[i], -2), 1))) << xi[i];
  }
}

// What the builder refuses, each at the caller's line with the fix.
TEST(Math, BadOperandsAreNamed) {
  auto error = [](DType d, const std::function<Value(const Value&)>& f) {
    KernelBuilder k("bad_math");
    Value x = k.arg(d, "x");
    f(x);
    absl::StatusOr<Kernel> ir = k.build();
    return ir.ok() ? std::string() : std::string(ir.status().message());
  };
  EXPECT_THAT(error(f64, [](const Value& v) { return erf(v); }),
              ::testing::HasSubstr("erf: has no f64 form; cast the operand to f32"));
  EXPECT_THAT(error(f64, [](const Value& v) { return log1p(v); }),
              ::testing::HasSubstr("log1p: has no f64 form; cast the operand to f32"));
  EXPECT_THAT(error(f64, [](const Value& v) { return sin(v); }), ::testing::HasSubstr("sin: has no f64 form"));
  EXPECT_THAT(error(f64, [](const Value& v) { return pow(v, v); }), ::testing::HasSubstr("pow: has no f64 form"));
  EXPECT_THAT(error(f64, [](const Value& v) { return atan2(v, v); }), ::testing::HasSubstr("atan2: has no f64 form"));
  EXPECT_THAT(error(f64, [](const Value& v) { return tan(v); }), ::testing::HasSubstr("tan: has no f64 form"));
  EXPECT_THAT(error(i32, [](const Value& v) { return pow(v, v); }),
              ::testing::HasSubstr("pow: needs floating-point operands, got i32; cast them first"));
  EXPECT_THAT(error(i32, [](const Value& v) { return tanh(v); }),
              ::testing::HasSubstr("tanh: needs a floating-point operand, got i32"));
  EXPECT_THAT(error(i32, [](const Value& v) { return where(v > 0, cast(v, u32), v); }),
              ::testing::HasSubstr("where: mismatched types u32 and i32 (neither holds the other); cast one side"));
  EXPECT_THAT(error(f32, [](const Value& v) { return where(v, v, v); }),
              ::testing::HasSubstr("where: the condition must be i1, got f32"));
  EXPECT_EQ(error(f64, [](const Value& v) {
              return tanh(v) + sigmoid(v) + sinh(v) + cosh(v) + exp(v) + log(v) + exp2(v) + log2(v);
            }),
            "");
}

}  // namespace
}  // namespace tessel::testing
