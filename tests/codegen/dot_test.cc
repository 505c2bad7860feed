// dot(a, b, acc) on the host target for every supported pair of input and
// accumulator dtypes, at several shapes, against an f64 reference: within
// the error bound of f32 (or f64) accumulation, exact for i8 -> i32.
#include <cmath>
#include <vector>

#include "tests/codegen/host_test_util.h"

namespace tessel::testing {
namespace {

template <class In, class Acc>
struct DotTypes {
  using A = In;
  using C = Acc;
};

template <class P>
class DotTest : public ::testing::Test {};
using DotCases = ::testing::Types<DotTypes<float, float>, DotTypes<BFloat16, float>, DotTypes<Half, float>,
                                  DotTypes<Half, Half>, DotTypes<double, double>, DotTypes<int8_t, int32_t>>;
TYPED_TEST_SUITE(DotTest, DotCases);

struct DotShape {
  int m, k, n;
};

template <class T>
T random_operand(Rng& rng) {
  if constexpr (kIsFloat<T>)
    return random_float<T>(rng, -3, 2);
  else
    return static_cast<T>(
        rng.uniform(std::is_same_v<T, int8_t> ? -128 : -1000, std::is_same_v<T, int8_t> ? 127 : 1000));
}

// |got - exact| allowed for an accumulation of k products onto c in the
// accumulator type, plus the final rounding to an f16 accumulator.
template <class A, class C>
double dot_tolerance(int k, double magnitude, double exact) {
  if constexpr (!kIsFloat<A>) return 0;
  const double eps = std::is_same_v<A, double> ? std::ldexp(1.0, -53) : std::ldexp(1.0, -24);
  double bound = (k + 2) * eps * magnitude;
  if constexpr (std::is_same_v<C, Half>) {
    int e = std::max(std::ilogb(std::fabs(exact) + bound), kF16Format.emin);
    bound += std::ldexp(1.0, e - kF16Format.precision);
  }
  return bound;
}

// One kernel computes acc + a @ b at four shapes (square, long K, wide N,
// and two rows) from tiles loaded out of one buffer per operand.
TYPED_TEST(DotTest, MatchesTheReferenceAtSeveralShapes) {
  using A = typename TypeParam::A;
  using C = typename TypeParam::C;
  constexpr DType kA = dtype_v<A>(), kC = dtype_v<C>();
  const DotShape shapes[] = {{16, 16, 16}, {8, 128, 16}, {32, 16, 64}, {2, 32, 4}};
  Rng rng;
  SCOPED_TRACE(rng.trace());
  KernelBuilder k("dot");
  Value a = k.arg(ptr(kA), "a"), b = k.arg(ptr(kA), "b"), c = k.arg(ptr(kC), "c"), out = k.arg(ptr(kC), "out");
  int a_off = 0, b_off = 0, c_off = 0;
  for (const DotShape& s : shapes) {
    Value at = load(a + a_off + index_tile(k, {s.m, s.k}));  // [M, K]
    Value bt = load(b + b_off + index_tile(k, {s.k, s.n}));  // [K, N]
    Value ct = load(c + c_off + index_tile(k, {s.m, s.n}));  // [M, N]
    store(out + c_off + index_tile(k, {s.m, s.n}), dot(at, bt, ct));
    a_off += s.m * s.k;
    b_off += s.k * s.n;
    c_off += s.m * s.n;
  }

  std::vector<A> as = make_vector<A>(a_off, [&] { return random_operand<A>(rng); });
  std::vector<A> bs = make_vector<A>(b_off, [&] { return random_operand<A>(rng); });
  std::vector<C> cs = make_vector<C>(c_off, [&] { return random_operand<C>(rng); });
  std::vector<C> got = poisoned<C>(c_off + 1);
  TESSEL_ASSERT_OK(run(k, 1, as.data(), bs.data(), cs.data(), got.data()));

  a_off = b_off = c_off = 0;
  for (const DotShape& s : shapes) {
    SCOPED_TRACE(absl::StrCat("M=", s.m, " K=", s.k, " N=", s.n));
    for (int i = 0; i < s.m; ++i) {
      for (int j = 0; j < s.n; ++j) {
        double exact = to_f64(cs[c_off + i * s.n + j]), magnitude = std::fabs(exact);
        for (int p = 0; p < s.k; ++p) {
          const double term = to_f64(as[a_off + i * s.k + p]) * to_f64(bs[b_off + p * s.n + j]);
          exact += term;
          magnitude += std::fabs(term);
        }
        const C g = got[c_off + i * s.n + j];
        ASSERT_LE(std::fabs(to_f64(g) - exact), (dot_tolerance<A, C>(s.k, magnitude, exact)))
            << "[" << i << ", " << j << "] = " << show(g) << ", want " << exact;
      }
    }
    a_off += s.m * s.k;
    b_off += s.k * s.n;
    c_off += s.m * s.n;
  }
  EXPECT_TRUE(is_poison(got[c_off]));
}

// The matmul pattern: a K loop loads [32, 16] and [16, 32] blocks and
// accumulates dot products into a tile Var.
TEST(Dot, AccumulatesAcrossAKLoop) {
  constexpr int kM = 32, kN = 32, kBlockK = 16;
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const int k_blocks = static_cast<int>(rng.uniform(0, 6)), kk = k_blocks * kBlockK;
  KernelBuilder k("matmul");
  Value a = k.arg(ptr(bf16), "a"), b = k.arg(ptr(bf16), "b"), out = k.arg(ptr(f32), "out");
  Value kdim = k.arg(i32, "k");
  Var acc = k.var(k.zeros({kM, kN}, f32));
  Value rows = expand_dims(k.arange(0, kM), 1), cols = expand_dims(k.arange(0, kN), 0);        // [32,1], [1,32]
  Value kr = expand_dims(k.arange(0, kBlockK), 0), kc = expand_dims(k.arange(0, kBlockK), 1);  // [1,16], [16,1]
  k.for_range(0, kdim, kBlockK, [&](Value k0) {
    Value at = load(a + rows * kdim + (kr + k0));  // [32, 16] bf16
    Value bt = load(b + (kc + k0) * kN + cols);    // [16, 32] bf16
    acc = dot(at, bt, acc);
  });
  store(out + rows * kN + cols, acc);

  std::vector<BFloat16> as = make_vector<BFloat16>(kM * kk, [&] { return random_float<BFloat16>(rng, -2, 2); });
  std::vector<BFloat16> bs = make_vector<BFloat16>(kk * kN, [&] { return random_float<BFloat16>(rng, -2, 2); });
  std::vector<float> got = poisoned<float>(kM * kN);
  TESSEL_ASSERT_OK(run(k, 1, as.data(), bs.data(), got.data(), kk));
  for (int i = 0; i < kM; ++i) {
    for (int j = 0; j < kN; ++j) {
      double exact = 0, magnitude = 0;
      for (int p = 0; p < kk; ++p) {
        const double term = to_f64(as[i * kk + p]) * to_f64(bs[p * kN + j]);
        exact += term;
        magnitude += std::fabs(term);
      }
      ASSERT_LE(std::fabs(got[i * kN + j] - exact), (kk + 2) * std::ldexp(1.0, -24) * magnitude)
          << "[" << i << ", " << j << "] with K = " << kk;
    }
  }
}

}  // namespace
}  // namespace tessel::testing
