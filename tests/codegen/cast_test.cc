// cast between every pair of numeric dtypes (and i1) on the host target:
// integers wrap or extend, conversions to floats round to nearest even once,
// float -> integer truncates and saturates with NaN -> 0, x -> i1 is x != 0.
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <vector>

#include "tests/codegen/host_test_util.h"

namespace tessel::testing {
namespace {

constexpr int kBlock = 256;

using AllTypes = std::tuple<bool, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, Half,
                            BFloat16, float, double>;
constexpr int kNumTypes = std::tuple_size_v<AllTypes>;

// Calls f.template operator()<T, index>() for each type of AllTypes.
template <class F>
void for_each_type(F&& f) {
  [&]<size_t... I>(std::index_sequence<I...>) { (f.template operator()<std::tuple_element_t<I, AllTypes>, I>(), ...); }
  (std::make_index_sequence<kNumTypes>());
}

// i1 lives in memory as one byte, 0 or 1.
template <class T>
using Stored = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;

template <class T>
int sign_of(T v) {
  return (v > 0) - (v < 0);
}

template <class From, class To>
To cast_reference(From x) {
  if constexpr (std::is_same_v<To, bool>) {
    if constexpr (kIsFloat<From>)
      return to_f64(x) != 0;  // NaN is true
    else
      return x != 0;
  } else if constexpr (std::is_same_v<From, bool>) {
    return from_f64<To>(x ? 1 : 0);
  } else if constexpr (kIsFloat<From> && kIsFloat<To>) {
    return from_f64<To>(to_f64(x));  // every float is exact in f64
  } else if constexpr (kIsFloat<From>) {
    const double v = std::trunc(to_f64(x));
    if (std::isnan(v)) return To(0);
    const double limit = std::ldexp(1.0, std::numeric_limits<To>::digits);
    if (v >= limit) return std::numeric_limits<To>::max();
    if (v <= (std::is_signed_v<To> ? -limit : 0.0)) return std::numeric_limits<To>::min();
    return static_cast<To>(v);
  } else if constexpr (kIsNarrow<To>) {
    // 64-bit integers may be inexact in f64: break a tie by what was lost.
    const double d = static_cast<double>(x);
    return from_f64<To>(d, sign_of(static_cast<__int128>(x) - static_cast<__int128>(d)));
  } else {
    return static_cast<To>(x);  // C++ rounds int -> float to nearest even and wraps int -> int
  }
}

// Random sources: integers over their range with edges; floats of every
// magnitude up to past the i64 range, small values with fractions, f32 with
// bf16 ties, and infinities and NaN.
template <class T>
T random_source(Rng& rng) {
  if constexpr (std::is_same_v<T, bool>) {
    return rng.chance(0.5);
  } else if constexpr (kIsFloat<T>) {
    switch (rng.uniform(0, 3)) {
      case 0:
        return from_f64<T>(rng.real(-300, 300));
      case 1:
        return random_float<T>(rng, -30, 70);
      case 2:
        if constexpr (std::is_same_v<T, float>) {
          uint32_t bits = (static_cast<uint32_t>(rng.gen()) & 0xFFFF0000u) | 0x8000u;
          float f;
          std::memcpy(&f, &bits, 4);
          if (!std::isnan(f)) return f;
        }
        return random_float<T>(rng, -2, 20);
      default:
        return random_float_with_edges<T>(rng, -20, 40);
    }
  } else {
    return random_int<T>(rng);
  }
}

template <class T>
class CastTest : public ::testing::Test {};
using SourceTypes = ::testing::Types<bool, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t,
                                     Half, BFloat16, float, double>;
TYPED_TEST_SUITE(CastTest, SourceTypes);

// One kernel per source dtype casts a tile to all 13 dtypes; each result
// goes to its own poisoned buffer whose tail must stay poisoned.
TYPED_TEST(CastTest, ToEveryDtypeMatchesTheReference) {
  using S = TypeParam;
  constexpr DType kFrom = std::is_same_v<S, bool> ? i1 : dtype_v<S>();
  Rng rng;
  SCOPED_TRACE(rng.trace());
  KernelBuilder k("cast");
  Value x = k.arg(ptr(kFrom), "x");
  std::vector<Value> outs;
  for_each_type([&]<class D, size_t I>() {
    outs.push_back(k.arg(ptr(std::is_same_v<D, bool> ? i1 : dtype_v<D>()), absl::StrCat("out", I)));
  });
  Value n = k.arg(i32, "n");
  Value offs = k.program_id() * kBlock + k.arange(0, kBlock);  // [256] i32
  Value mask = offs < n;
  Value xv = load(x + offs, mask, 0);
  for_each_type(
      [&]<class D, size_t I>() { store(outs[I] + offs, cast(xv, std::is_same_v<D, bool> ? i1 : dtype_v<D>()), mask); });

  const int n_value = static_cast<int>(rng.uniform(1, 3 * kBlock)), size = n_value + 16;
  std::vector<Stored<S>> xs = make_vector<Stored<S>>(n_value, [&] { return Stored<S>(random_source<S>(rng)); });
  std::vector<std::vector<std::byte>> got(kNumTypes);
  std::vector<KernelArg> args = {static_cast<const void*>(xs.data())};
  for_each_type([&]<class D, size_t I>() {
    got[I] = poisoned<std::byte>(size * sizeof(Stored<D>));
    args.push_back(static_cast<void*>(got[I].data()));
  });
  args.push_back(n_value);
  absl::StatusOr<Function> fn = compile(k);
  TESSEL_ASSERT_OK(fn.status());
  TESSEL_ASSERT_OK(fn->launch_packed({.grid = (n_value + kBlock - 1) / kBlock}, args));

  for_each_type([&]<class D, size_t I>() {
    using Out = Stored<D>;
    for (int i = 0; i < size; ++i) {
      Out g;
      std::memcpy(&g, got[I].data() + i * sizeof(Out), sizeof(Out));
      if (i >= n_value) {
        ASSERT_TRUE(is_poison(g)) << "cast to dtype #" << I << " wrote past n at " << i;
        continue;
      }
      const Out want = Out(cast_reference<S, D>(S(xs[i])));
      ASSERT_TRUE(same(g, want)) << "cast(" << show(xs[i]) << ") to dtype #" << I << " = " << show(g) << ", want "
                                 << show(want) << " (element " << i << ")";
    }
  });
}

// Fixed conversions with their expected bits written out (not computed by
// the reference above): ties to even, values a wider intermediate would
// round onto a tie, overflow to infinity and NaN.
TEST(Cast, NarrowingRoundsToNearestEvenOnce) {
  constexpr int kN = 8;
  KernelBuilder k("narrowing");
  Value f = k.arg(ptr(f32), "f"), d = k.arg(ptr(f64), "d"), s = k.arg(ptr(i64), "s"), u = k.arg(ptr(u64), "u");
  Value out = k.arg(ptr(bf16), "out"), out16 = k.arg(ptr(f16), "out16");
  Value idx = k.arange(0, kN);  // [8] i32
  store(out + idx, cast(load(f + idx), bf16));
  store(out + kN + idx, cast(load(d + idx), bf16));
  store(out + 2 * kN + idx, cast(load(s + idx), bf16));
  store(out + 3 * kN + idx, cast(load(u + idx), bf16));
  store(out16 + idx, cast(load(d + idx), f16));
  store(out16 + kN + idx, cast(load(f + idx), f16));

  auto bits_to_f32 = [](uint32_t b) {
    float v;
    std::memcpy(&v, &b, 4);
    return v;
  };
  const double p8 = std::ldexp(1.0, -8), p11 = std::ldexp(1.0, -11), tiny = std::ldexp(1.0, -40);
  std::vector<float> fs = {
      bits_to_f32(0x3F808000), bits_to_f32(0x3F818000), bits_to_f32(0x3F808001),     bits_to_f32(0x7F7FFFFF),
      bits_to_f32(0x7F800001), bits_to_f32(0xBF808000), 1 + static_cast<float>(p11), 65520.0f};
  std::vector<double> ds = {1 + p8 + tiny,  1 + p8,  1 + p8 - tiny, -(1 + p8 + tiny),
                            1 + p11 + tiny, 1 + p11, 65519.99,      1e300};
  std::vector<int64_t> ss = {(int64_t{1} << 62) + (int64_t{1} << 54) + 1,
                             (int64_t{1} << 62) + (int64_t{1} << 54),
                             -((int64_t{1} << 62) + (int64_t{1} << 54) + 1),
                             std::numeric_limits<int64_t>::min(),
                             std::numeric_limits<int64_t>::max(),
                             257,
                             -257,
                             259};
  std::vector<uint64_t> us = {(uint64_t{1} << 63) + (uint64_t{1} << 55) + 1,
                              (uint64_t{1} << 63) + (uint64_t{1} << 55),
                              std::numeric_limits<uint64_t>::max(),
                              0,
                              1,
                              257,
                              259,
                              (uint64_t{1} << 40) + 1};
  std::vector<uint16_t> got = poisoned<uint16_t>(4 * kN), got16 = poisoned<uint16_t>(2 * kN);
  TESSEL_ASSERT_OK(run(k, 1, fs.data(), ds.data(), ss.data(), us.data(), static_cast<void*>(got.data()),
                       static_cast<void*>(got16.data())));

  const uint16_t want[4 * kN] = {// f32 -> bf16: ties to even, above a tie, overflow, a signaling NaN is checked below.
                                 0x3F80, 0x3F82, 0x3F81, 0x7F80, 0, 0xBF80, 0x3F80, 0x4780,
                                 // f64 -> bf16: 1 + 2^-8 + 2^-40 is above the tie though f32 would round it onto it.
                                 0x3F81, 0x3F80, 0x3F80, 0xBF81, 0x3F80, 0x3F80, 0x4780, 0x7F80,
                                 // i64 -> bf16: 2^62 + 2^54 + 1 is just above a tie that f64 rounds it onto.
                                 0x5E81, 0x5E80, 0xDE81, 0xDF00, 0x5F00, 0x4380, 0xC380, 0x4382,
                                 // u64 -> bf16.
                                 0x5F01, 0x5F00, 0x5F80, 0x0000, 0x3F80, 0x4380, 0x4382, 0x5380};
  for (int i = 0; i < 4 * kN; ++i) {
    if (i == 4) continue;
    EXPECT_EQ(got[i], want[i]) << "row " << i / kN << ", element " << i % kN << ": got 0x" << std::hex << got[i];
  }
  EXPECT_EQ(got[4] & 0x7FC0, 0x7FC0) << "a signaling NaN becomes a quiet NaN, got 0x" << std::hex << got[4];
  const uint16_t want16[2 * kN] = {
      // f64 -> f16: 1 + 2^-11 + 2^-40 is above the f16 tie; 65519.99 is the largest finite value.
      0x3C04, 0x3C04, 0x3C04, 0xBC04, 0x3C01, 0x3C00, 0x7BFF, 0x7C00,
      // f32 -> f16: 65520 is the tie between the largest finite value and 2^16, so infinity.
      0x3C04, 0x3C0C, 0x3C04, 0x7C00, 0, 0xBC04, 0x3C00, 0x7C00};
  for (int i = 0; i < 2 * kN; ++i) {
    if (i == kN + 4) continue;
    EXPECT_EQ(got16[i], want16[i]) << "row " << i / kN << ", element " << i % kN << ": got 0x" << std::hex << got16[i];
  }
  EXPECT_EQ(got16[kN + 4] & 0x7E00, 0x7E00) << "NaN stays NaN";
}

// Float literals become constants of the operand's dtype, rounded once to
// nearest even from their f64 value; integer literals convert exactly or
// round the same way.
TEST(Cast, LiteralsRoundToNearestEvenOnce) {
  KernelBuilder k("literals");
  Value hb = k.arg(ptr(bf16), "hb"), hh = k.arg(ptr(f16), "hh"), hf = k.arg(ptr(f32), "hf");
  const double p8 = std::ldexp(1.0, -8), p11 = std::ldexp(1.0, -11), tiny = std::ldexp(1.0, -30);
  const double bf16_literals[] = {1 + p8, 1 + p8 + tiny, 1 + 3 * p8, 1e39, 0.1};
  const double f16_literals[] = {1 + p11, 1 + p11 + tiny, 65520.0, 65519.0, 1e-5};
  for (int i = 0; i < 5; ++i) {
    store(hb + i, k.constant(bf16_literals[i], bf16));
    store(hh + i, k.constant(f16_literals[i], f16));
  }
  store(hf, k.constant(16777217, f32));  // 2^24 + 1: a tie, to even
  store(hf + 1, k.constant(16777219, f32));
  std::vector<uint16_t> got_b = poisoned<uint16_t>(5), got_h = poisoned<uint16_t>(5);
  std::vector<float> got_f = poisoned<float>(2);
  TESSEL_ASSERT_OK(run(k, 1, static_cast<void*>(got_b.data()), static_cast<void*>(got_h.data()), got_f.data()));
  EXPECT_EQ(got_b, (std::vector<uint16_t>{0x3F80, 0x3F81, 0x3F82, 0x7F80, 0x3DCD}));
  EXPECT_EQ(got_h, (std::vector<uint16_t>{0x3C00, 0x3C01, 0x7C00, 0x7BFF, 0x00A8}));
  EXPECT_EQ(got_f, (std::vector<float>{16777216.0f, 16777220.0f}));
}

// Float -> integer conversions truncate toward zero and saturate; NaN gives 0.
TEST(Cast, FloatToIntSaturates) {
  KernelBuilder k("saturate");
  Value f = k.arg(ptr(f32), "f"), d = k.arg(ptr(f64), "d"), h = k.arg(ptr(f16), "h");
  Value o32 = k.arg(ptr(i32), "o32"), o8 = k.arg(ptr(u8), "o8"), o64 = k.arg(ptr(i64), "o64");
  Value oi8 = k.arg(ptr(i8), "oi8"), ou64 = k.arg(ptr(u64), "ou64");
  Value idx = k.arange(0, 8);  // [8] i32
  Value fv = load(f + idx);
  store(o32 + idx, cast(fv, i32));
  store(o8 + idx, cast(fv, u8));
  store(o64 + idx, cast(load(d + idx), i64));
  store(ou64 + idx, cast(load(d + idx), u64));
  store(oi8 + idx, cast(load(h + idx), i8));

  const float inf = INFINITY, nan = NAN;
  std::vector<float> fs = {3e9f, -3e9f, nan, inf, -inf, -0.9f, 2147483520.0f, 255.9f};
  std::vector<double> ds = {9.3e18, -9.3e18, NAN, -0.99, 1.8e19, 1.9e19, 2251799813685247.5, -1};
  std::vector<Half> hs = {Half{0x7BFF}, Half{0xFC00}, Half{0x7E00}, Half{0x57F0}, Half{0xD800},
                          Half{0xBBFF}, Half{0x3C00}, Half{0x0001}};  // 65504, -inf, NaN, 127, -128, -0.9995, 1, 2^-24
  std::vector<int32_t> got32 = poisoned<int32_t>(8);
  std::vector<uint8_t> got8 = poisoned<uint8_t>(8);
  std::vector<int64_t> got64 = poisoned<int64_t>(8);
  std::vector<int8_t> goti8 = poisoned<int8_t>(8);
  std::vector<uint64_t> gotu64 = poisoned<uint64_t>(8);
  TESSEL_ASSERT_OK(
      run(k, 1, fs.data(), ds.data(), hs.data(), got32.data(), got8.data(), got64.data(), goti8.data(), gotu64.data()));
  constexpr int32_t kMax32 = std::numeric_limits<int32_t>::max(), kMin32 = std::numeric_limits<int32_t>::min();
  constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max(), kMin64 = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(got32, (std::vector<int32_t>{kMax32, kMin32, 0, kMax32, kMin32, 0, 2147483520, 255}));
  EXPECT_EQ(got8, (std::vector<uint8_t>{255, 0, 0, 255, 0, 0, 255, 255}));
  EXPECT_EQ(got64, (std::vector<int64_t>{kMax64, kMin64, 0, 0, kMax64, kMax64, 2251799813685247, -1}));
  EXPECT_EQ(gotu64, (std::vector<uint64_t>{9300000000000000000u, 0, 0, 0, 18000000000000000000u,
                                           std::numeric_limits<uint64_t>::max(), 2251799813685247, 0}));
  EXPECT_EQ(goti8, (std::vector<int8_t>{127, -128, 0, 127, -128, 0, 1, 0}));
}

TEST(Bitcast, KeepsTheBitsAndRoundTrips) {
  constexpr int kN = 4;
  KernelBuilder k("bitcasts");
  Value f = k.arg(ptr(f32), "f"), h = k.arg(ptr(bf16), "h"), q = k.arg(ptr(f8e4m3), "q"), d = k.arg(ptr(f64), "d");
  Value bits32 = k.arg(ptr(u32), "bits32"), bits16 = k.arg(ptr(i16), "bits16"), bits8 = k.arg(ptr(u8), "bits8");
  Value back = k.arg(ptr(f32), "back"), half = k.arg(ptr(f16), "half"), bits64 = k.arg(ptr(i64), "bits64");
  Value idx = k.arange(0, kN);
  Value x = load(f + idx);
  store(bits32 + idx, bitcast(x, u32));
  store(back + idx, bitcast(bitcast(x, i32) + 1, f32));  // the next float up
  store(bits16 + idx, bitcast(load(h + idx), i16));
  store(half + idx, bitcast(load(h + idx), f16));
  store(bits8 + idx, bitcast(load(q + idx), u8));
  store(bits64 + idx, bitcast(load(d + idx), i64));
  std::vector<float> fs = {1.0f, -2.0f, 0.0f, std::numeric_limits<float>::infinity()};
  std::vector<BFloat16> hs = {BFloat16{0x3F80}, BFloat16{0xC000}, BFloat16{0x8000}, BFloat16{0x7FC1}};
  std::vector<uint8_t> qs = {0x38, 0xC0, 0x7F, 0x01};
  std::vector<double> ds = {1.0, -0.0, 0.5, 3.0};
  std::vector<uint32_t> got32 = poisoned<uint32_t>(kN);
  std::vector<int16_t> got16 = poisoned<int16_t>(kN);
  std::vector<uint8_t> got8 = poisoned<uint8_t>(kN);
  std::vector<float> gotf = poisoned<float>(kN);
  std::vector<Half> goth = poisoned<Half>(kN);
  std::vector<int64_t> got64 = poisoned<int64_t>(kN);
  TESSEL_ASSERT_OK(run(k, 1, fs.data(), hs.data(), KernelArg(static_cast<const void*>(qs.data())), ds.data(),
                       got32.data(), got16.data(), got8.data(), gotf.data(), goth.data(), got64.data()));
  EXPECT_EQ(got32, (std::vector<uint32_t>{0x3F800000u, 0xC0000000u, 0u, 0x7F800000u}));
  EXPECT_EQ(gotf[0], std::nextafter(1.0f, 2.0f));
  EXPECT_EQ(gotf[2], std::numeric_limits<float>::denorm_min());
  EXPECT_TRUE(std::isnan(gotf[3]));
  EXPECT_EQ(got16, (std::vector<int16_t>{0x3F80, static_cast<int16_t>(0xC000), static_cast<int16_t>(0x8000), 0x7FC1}));
  EXPECT_EQ(goth[1].bits, 0xC000);
  EXPECT_EQ(got8, qs);
  EXPECT_EQ(got64, (std::vector<int64_t>{0x3FF0000000000000, std::numeric_limits<int64_t>::min(), 0x3FE0000000000000,
                                         0x4008000000000000}));
}

}  // namespace
}  // namespace tessel::testing
