// f8e4m3 and f8e5m2 in kernels on the host target: casts from f32, f64 and
// i32 round to nearest even and saturate, casts to f32 are exact, and
// arithmetic rounds each result once, as base/float8.h does on the host.
#include <cmath>
#include <cstring>
#include <vector>

#include "base/float8.h"
#include "tests/codegen/host_test_util.h"
#include "tests/float8_reference.h"

namespace tessel::testing {
namespace {

constexpr int kN = 512;

bool same(uint8_t got, uint8_t want, Float8 f) {
  return got == want || (std::isnan(float8_to_float(got, f)) && std::isnan(float8_to_float(want, f)));
}

class Float8Kernels : public ::testing::TestWithParam<Float8> {};

TEST_P(Float8Kernels, CastsAndArithmeticRoundLikeTheHostHelpers) {
  const Float8 f = GetParam();
  const DType d = f == Float8::kE4M3 ? f8e4m3 : f8e5m2;
  KernelBuilder k("float8");
  Value xf = k.arg(ptr(f32), "xf"), xd = k.arg(ptr(f64), "xd"), xi = k.arg(ptr(i32), "xi");
  Value x8 = k.arg(ptr(d), "x8"), y8 = k.arg(ptr(d), "y8");
  Value out8 = k.arg(ptr(d), "out8"), out32 = k.arg(ptr(f32), "out32");
  Value idx = k.arange(0, kN);  // [kN] i32
  store(out8 + idx, cast(load(xf + idx), d));
  store(out8 + kN + idx, cast(load(xd + idx), d));
  store(out8 + 2 * kN + idx, cast(load(xi + idx), d));
  store(out8 + 3 * kN + idx, load(x8 + idx) + load(y8 + idx));
  store(out8 + 4 * kN + idx, -load(x8 + idx));
  store(out32 + idx, cast(load(x8 + idx), f32));

  Rng rng;
  SCOPED_TRACE(rng.trace());
  std::vector<float> fs(kN);
  std::vector<double> ds(kN);
  std::vector<int32_t> is(kN);
  std::vector<uint8_t> a(kN), b(kN);
  const double top = f == Float8::kE4M3 ? 600 : 80000;  // past the largest finite value
  for (int i = 0; i < kN; ++i) {
    fs[i] = i < 16 ? std::vector<float>{0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-30f, 448.0f, 464.0f, -480.0f,
                                        57344.0f, 61440.0f, 0.0009765625f, 0.001953125f, 1.0625f, 1.1875f, -1.0625f}[i]
                   : static_cast<float>(rng.real(-top, top) * std::ldexp(1.0, -static_cast<int>(rng.uniform(0, 20))));
    ds[i] = rng.real(-top, top) * std::ldexp(1.0, -static_cast<int>(rng.uniform(0, 20)));
    is[i] = static_cast<int32_t>(rng.uniform(-70000, 70000));
    a[i] = static_cast<uint8_t>(i);  // every value, twice
    b[i] = static_cast<uint8_t>(rng.uniform(0, 255));
  }
  std::vector<uint8_t> got8 = poisoned<uint8_t>(5 * kN);
  std::vector<float> got32 = poisoned<float>(kN);
  TESSEL_ASSERT_OK(run(k, 1, fs.data(), ds.data(), is.data(), static_cast<void*>(a.data()),
                       static_cast<void*>(b.data()), static_cast<void*>(got8.data()), got32.data()));
  int bad = 0;
  for (int i = 0; i < kN; ++i) {
    const float av = float8_to_float(a[i], f), bv = float8_to_float(b[i], f);
    const uint8_t want[5] = {float_to_float8(fs[i], f), nearest_float8(ds[i], f), nearest_float8(is[i], f),
                             float_to_float8(av + bv, f), static_cast<uint8_t>(a[i] ^ 0x80)};
    for (int j = 0; j < 5; ++j) {
      if (!same(got8[j * kN + i], want[j], f) && bad++ < 10) {
        ADD_FAILURE() << "output " << j << " element " << i << ": got 0x" << std::hex << int{got8[j * kN + i]}
                      << ", want 0x" << int{want[j]};
      }
    }
    const float w = av;
    if (!(std::memcmp(&got32[i], &w, 4) == 0 || (std::isnan(w) && std::isnan(got32[i])))) {
      if (bad++ < 10) ADD_FAILURE() << "widening 0x" << std::hex << int{a[i]} << ": got " << got32[i] << ", want " << w;
    }
  }
}

TEST_P(Float8Kernels, LiteralsRoundAndSaturate) {
  const Float8 f = GetParam();
  const DType d = f == Float8::kE4M3 ? f8e4m3 : f8e5m2;
  KernelBuilder k("float8_literals");
  Value out = k.arg(ptr(d), "out");
  store(out, k.constant(1e9, d));
  store(out + 1, k.constant(-0.3, d));
  store(out + 2, k.constant(1.0625, d) * k.constant(3.0, d));
  std::vector<uint8_t> got = poisoned<uint8_t>(3);
  TESSEL_ASSERT_OK(run(k, 1, static_cast<void*>(got.data())));
  EXPECT_EQ(got[0], float8_format(f).max_finite);  // saturated
  EXPECT_EQ(got[1], float_to_float8(-0.3f, f));
  const float product = float8_to_float(float_to_float8(1.0625f, f), f) * 3.0f;
  EXPECT_EQ(got[2], float_to_float8(product, f));
}

INSTANTIATE_TEST_SUITE_P(Formats, Float8Kernels, ::testing::Values(Float8::kE4M3, Float8::kE5M2),
                         [](const auto& info) { return info.param == Float8::kE4M3 ? "E4M3" : "E5M2"; });

}  // namespace
}  // namespace tessel::testing
