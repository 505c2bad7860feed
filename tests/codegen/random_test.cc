// Philox random numbers (dsl/random.h) on the host target: against the
// generator's published known answers, an independent C++ Philox4x32 and
// double-precision references of the uniform and normal transforms.
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "dsl/random.h"
#include "tests/codegen/host_test_util.h"

namespace tessel::testing {
namespace {

using Block = std::array<uint32_t, 4>;

// Philox4x32 as the paper states it, independently of the DSL's.
Block philox_reference(Block c, uint64_t seed, int rounds = kPhiloxRounds) {
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < rounds; ++r) {
    const uint64_t p0 = uint64_t{0xD2511F53} * c[0], p1 = uint64_t{0xCD9E8D57} * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k0, static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k1, static_cast<uint32_t>(p0)};
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}

struct KnownAnswer {
  Block counter;
  uint64_t seed;  // key 1 in the high word
  Block out;
};
// Philox4x32-10's known answers, published with the generator (Random123's kat_vectors).
constexpr KnownAnswer kKnownAnswers[] = {
    {{0, 0, 0, 0}, 0, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
    {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
     0xffffffffffffffff,
     {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
    {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
     0x299f31d0a4093822,
     {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
};

TEST(Random, PhiloxGivesThePublishedAnswers) {
  KernelBuilder k("philox_kat");
  Value seed = k.arg(u64, "seed"), out = k.arg(ptr(u32), "out");
  std::array<Operand, 4> counter = {k.arg(u32, "c0"), k.arg(u32, "c1"), k.arg(u32, "c2"), k.arg(u32, "c3")};
  std::array<Value, 4> w = philox(seed, counter);
  for (int i = 0; i < 4; ++i) store(out + i, w[i]);
  absl::StatusOr<Function> fn = compile(k);
  ASSERT_TRUE(fn.ok()) << fn.status();
  for (const KnownAnswer& a : kKnownAnswers) {
    EXPECT_EQ(philox_reference(a.counter, a.seed), a.out);
    Block got{};
    TESSEL_ASSERT_OK(fn->launch({.grid = 1}, a.seed, got.data(), a.counter[0], a.counter[1], a.counter[2],
                                a.counter[3]));
    EXPECT_EQ(got, a.out);
  }
}

// Scalar counter words meet tile ones in the tiles' shape; fewer rounds are
// the same bijection stopped early.
TEST(Random, PhiloxTakesTilesAndScalarsAndFewerRounds) {
  constexpr int kN = 64;
  KernelBuilder k("philox_mixed");
  Value seed = k.arg(u64, "seed"), out = k.arg(ptr(u32), "out");
  Value idx = k.arange(0, kN);
  std::array<Value, 4> w = philox(seed, {idx, 7, k.arg(i64, "c2"), idx * 3}, 7);
  for (int i = 0; i < 4; ++i) store(out + i * kN + idx, w[i]);
  const uint64_t seed_value = 0x0123456789abcdef;
  const int64_t c2 = int64_t{-2};  // taken modulo 2^32
  std::vector<uint32_t> got(4 * kN);
  TESSEL_ASSERT_OK(run(k, 1, seed_value, got.data(), c2));
  for (uint32_t i = 0; i < kN; ++i) {
    const Block want = philox_reference({i, 7, 0xfffffffe, 3 * i}, seed_value, 7);
    for (int j = 0; j < 4; ++j) ASSERT_EQ(got[j * kN + i], want[j]) << "element " << i << " word " << j;
  }
}

// Each offset's block: the offset's value modulo 2^64 in the counter's first
// two words, under the seed's value modulo 2^64 (an i32 seed sign-extends).
TEST(Random, RandintDrawsTheBlockOfEachOffset) {
  constexpr int kBlock = 1024, kGrid = 2, kN = kBlock * kGrid;
  for (bool wide : {false, true}) {
    SCOPED_TRACE(wide ? "i64 offsets, i32 seed" : "i32 offsets, u64 seed");
    KernelBuilder k("randint");
    Value seed = k.arg(wide ? i32 : u64, "seed"), base = k.arg(i64, "base"), out = k.arg(ptr(u32), "out");
    Value idx = k.program_id() * kBlock + k.arange(0, kBlock);
    Value offsets = wide ? cast(idx, i64) + base : idx;
    std::array<Value, 4> w = randint4x(seed, offsets);
    for (int i = 0; i < 4; ++i) store(out + i * kN + idx, w[i]);
    store(out + 4 * kN + idx, randint(seed, offsets));
    const int64_t base_value = int64_t{5} << 32 | 0xfffffff0;  // the low word wraps within the grid
    const uint64_t seed_value = wide ? static_cast<uint64_t>(int64_t{-12345}) : 0xfedcba9876543210;
    std::vector<uint32_t> got(5 * kN);
    if (wide) {
      TESSEL_ASSERT_OK(run(k, kGrid, int32_t{-12345}, base_value, got.data()));
    } else {
      TESSEL_ASSERT_OK(run(k, kGrid, seed_value, base_value, got.data()));
    }
    for (int i = 0; i < kN; ++i) {
      const uint64_t offset = wide ? static_cast<uint64_t>(base_value + i) : static_cast<uint64_t>(i);
      const Block want =
          philox_reference({static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32), 0, 0}, seed_value);
      for (int j = 0; j < 4; ++j) ASSERT_EQ(got[j * kN + i], want[j]) << "offset " << offset << " word " << j;
      ASSERT_EQ(got[4 * kN + i], want[0]);
    }
  }
}

// rand: a word's top 24 bits over 2^24, exactly; randn: Box-Muller of two
// words, against the same transform in double. Both are checked for their
// first moments over 2^18 draws.
TEST(Random, RandAndRandnTransformTheWords) {
  constexpr int kBlock = 1024, kGrid = 64, kN = kBlock * kGrid;
  KernelBuilder k("rand");
  Value seed = k.arg(u64, "seed"), bits = k.arg(ptr(u32), "bits"), uni = k.arg(ptr(f32), "uniform");
  Value normal = k.arg(ptr(f32), "normal");
  Value idx = k.program_id() * kBlock + k.arange(0, kBlock);
  std::array<Value, 4> w = randint4x(seed, idx), u = rand4x(seed, idx), n = randn4x(seed, idx);
  for (int i = 0; i < 4; ++i) {
    store(bits + i * kN + idx, w[i]);
    store(uni + i * kN + idx, u[i]);
    store(normal + i * kN + idx, n[i]);
  }
  store(uni + 4 * kN + idx, rand(seed, idx));
  store(normal + 4 * kN + idx, randn(seed, idx));
  std::vector<uint32_t> words(4 * kN);
  std::vector<float> uniforms(5 * kN), normals(5 * kN);
  TESSEL_ASSERT_OK(run(k, kGrid, uint64_t{42}, words.data(), uniforms.data(), normals.data()));

  double sum_u = 0, sum_n = 0, sum_n2 = 0, worst = 0;
  for (int i = 0; i < kN; ++i) {
    for (int j = 0; j < 4; ++j) {
      const float u_ij = uniforms[j * kN + i];
      ASSERT_EQ(u_ij, std::ldexp(static_cast<float>(words[j * kN + i] >> 8), -24)) << i << " " << j;
      ASSERT_GE(u_ij, 0.0f);
      ASSERT_LT(u_ij, 1.0f);
      sum_u += u_ij;
    }
    for (int pair = 0; pair < 2; ++pair) {
      const double r = std::sqrt(-2 * std::log(std::ldexp((words[2 * pair * kN + i] >> 8) + 1.0, -24)));
      const double theta = 2 * M_PI * std::ldexp(words[(2 * pair + 1) * kN + i] >> 8, -24);
      const double want[2] = {r * std::cos(theta), r * std::sin(theta)};
      for (int j = 0; j < 2; ++j) {
        const double got = normals[(2 * pair + j) * kN + i];
        worst = std::max(worst, std::fabs(got - want[j]) / std::max(1.0, std::fabs(want[j])));
        sum_n += got;
        sum_n2 += got * got;
      }
    }
    ASSERT_EQ(uniforms[4 * kN + i], uniforms[i]);
    ASSERT_EQ(normals[4 * kN + i], normals[i]);
  }
  EXPECT_LT(worst, 4e-6);
  const double draws = 4.0 * kN;
  EXPECT_NEAR(sum_u / draws, 0.5, 0.005);
  EXPECT_NEAR(sum_n / draws, 0.0, 0.01);
  EXPECT_NEAR(sum_n2 / draws, 1.0, 0.01);
}

TEST(Random, UmulhiIsTheProductsHighWord) {
  constexpr int kN = 256;
  Rng rng;
  SCOPED_TRACE(rng.trace());
  for (DType d : {u32, i32}) {
    SCOPED_TRACE(d.name());
    KernelBuilder k("umulhi");
    Value a = k.arg(ptr(d), "a"), b = k.arg(ptr(d), "b"), out = k.arg(ptr(d), "out");
    Value idx = k.arange(0, kN);
    Value x = load(a + idx), y = load(b + idx);
    store(out + idx, umulhi(x, y));
    store(out + kN + idx, umulhi(0x12345679, x));  // a literal takes the other operand's dtype
    std::vector<uint32_t> xs(kN), ys(kN), got(2 * kN);
    for (int i = 0; i < kN; ++i) {
      xs[i] = static_cast<uint32_t>(rng.gen());
      ys[i] = static_cast<uint32_t>(rng.gen());
    }
    xs[0] = ys[0] = 0xffffffff;
    xs[1] = 0x80000000, ys[1] = 2;
    if (d == i32) {
      auto as_i32 = [](std::vector<uint32_t>& v) { return reinterpret_cast<int32_t*>(v.data()); };
      TESSEL_ASSERT_OK(run(k, 1, as_i32(xs), as_i32(ys), as_i32(got)));
    } else {
      TESSEL_ASSERT_OK(run(k, 1, xs.data(), ys.data(), got.data()));
    }
    for (int i = 0; i < kN; ++i) {
      ASSERT_EQ(got[i], static_cast<uint32_t>((uint64_t{xs[i]} * ys[i]) >> 32)) << i;
      ASSERT_EQ(got[kN + i], static_cast<uint32_t>((uint64_t{0x12345679} * xs[i]) >> 32)) << i;
    }
  }
}

}  // namespace
}  // namespace tessel::testing
