// histogram on the host target: tiles of every integer width and rank 1 to
// 3, bins of several counts, elements outside the bins (negative, just past
// the last, far past), masks of the tile's shape and broadcast ones, in a
// loop and from several programs, against counts taken by a loop.
#include <algorithm>
#include <limits>
#include <vector>

#include "tests/codegen/host_test_util.h"

namespace tessel::testing {
namespace {

struct Case {
  Shape shape;
  int64_t bins;
  int64_t at;      // where its elements start in x
  int64_t counts;  // where its counts start in out
};

std::vector<Case> cases() {
  std::vector<Case> out;
  int64_t at = 0, counts = 0;
  auto add = [&](Shape shape, int64_t bins) {
    out.push_back({shape, bins, at, counts});
    at += numel(shape);
    counts += bins;
  };
  add({64}, 1);
  add({256}, 7);
  add({8, 16}, 64);
  add({3, 100}, 200);
  add({4, 6, 8}, 12);
  add({5}, 300);
  return out;
}

// Elements mostly inside [0, bins); some just past either end and far past.
template <class T>
std::vector<T> elements(Rng& rng, const std::vector<Case>& all) {
  std::vector<T> xs(all.back().at + numel(all.back().shape));
  for (const Case& c : all) {
    for (int64_t e = 0; e < numel(c.shape); ++e) {
      int64_t v = rng.uniform(0, c.bins - 1);
      if (rng.chance(0.1)) v = c.bins + rng.uniform(0, 2);
      if (rng.chance(0.05)) v = std::numeric_limits<T>::max();
      if (std::is_signed_v<T> && rng.chance(0.1)) v = -1 - rng.uniform(0, 2);
      xs[c.at + e] = static_cast<T>(v);
    }
  }
  return xs;
}

// The counts of `xs` in [at, at + n) per bin, where `keep` holds.
template <class T, class Keep>
std::vector<int32_t> counted(const std::vector<T>& xs, int64_t at, int64_t n, int64_t bins, Keep keep) {
  std::vector<int32_t> out(bins, 0);
  for (int64_t e = 0; e < n; ++e) {
    const T v = xs[at + e];
    if (keep(e) && v >= 0 && static_cast<uint64_t>(v) < static_cast<uint64_t>(bins)) ++out[static_cast<size_t>(v)];
  }
  return out;
}

// One kernel counts each case's elements, unmasked into out and masked by
// `x is even` into masked.
template <class T>
void histogram_matches_a_loop() {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const std::vector<Case> all = cases();
  KernelBuilder k("histogram");
  Value x = k.arg(ptr(dtype_v<T>()), "x"), out = k.arg(ptr(i32), "out"), masked = k.arg(ptr(i32), "masked");
  for (const Case& c : all) {
    const Value v = load(x + c.at + index_tile(k, c.shape));
    const Value bins = k.arange(0, static_cast<int32_t>(c.bins));
    store(out + c.counts + bins, histogram(v, c.bins));
    store(masked + c.counts + bins, histogram(v, c.bins, (v & 1) == 0));
  }
  const std::vector<T> xs = elements<T>(rng, all);
  const int64_t total = all.back().counts + all.back().bins;
  std::vector<int32_t> got = poisoned<int32_t>(total), got_masked = poisoned<int32_t>(total);
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), got.data(), got_masked.data()));
  for (const Case& c : all) {
    const int64_t n = numel(c.shape);
    const std::vector<int32_t> want = counted(xs, c.at, n, c.bins, [](int64_t) { return true; });
    const std::vector<int32_t> want_masked =
        counted(xs, c.at, n, c.bins, [&](int64_t e) { return (xs[c.at + e] & 1) == 0; });
    EXPECT_EQ(std::vector<int32_t>(got.begin() + c.counts, got.begin() + c.counts + c.bins), want)
        << shape_str(c.shape) << " into " << c.bins << " bins";
    EXPECT_EQ(std::vector<int32_t>(got_masked.begin() + c.counts, got_masked.begin() + c.counts + c.bins), want_masked)
        << shape_str(c.shape) << " into " << c.bins << " bins, masked";
  }
}

template <class T>
class HistogramTest : public ::testing::Test {};
using HistogramTypes = ::testing::Types<int8_t, uint8_t, int16_t, uint16_t, int32_t, uint32_t, int64_t, uint64_t>;
TYPED_TEST_SUITE(HistogramTest, HistogramTypes);

TYPED_TEST(HistogramTest, MatchesALoop) { histogram_matches_a_loop<TypeParam>(); }

// A scalar mask counts all or nothing; a column mask [R, 1] broadcasts
// along the rows.
TEST(Histogram, BroadcastMasks) {
  KernelBuilder k("histogram_masks");
  Value x = k.arg(ptr(i32), "x"), rows = k.arg(i32, "rows"), out = k.arg(ptr(i32), "out");
  Value v = load(x + index_tile(k, {4, 8}));  // [4, 8] i32
  Value bins = k.arange(0, 10);
  store(out + bins, histogram(v, 10, true));
  store(out + 10 + bins, histogram(v, 10, rows > 100));
  store(out + 20 + bins, histogram(v, 10, expand_dims(k.arange(0, 4), 1) < rows));
  std::vector<int32_t> xs(32);
  for (int i = 0; i < 32; ++i) xs[i] = i % 10;
  std::vector<int32_t> got = poisoned<int32_t>(30);
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), 2, got.data()));
  std::vector<int32_t> all(10, 0), first_rows(10, 0);
  for (int i = 0; i < 32; ++i) ++all[i % 10];
  for (int i = 0; i < 16; ++i) ++first_rows[i % 10];
  EXPECT_EQ(std::vector<int32_t>(got.begin(), got.begin() + 10), all);
  EXPECT_EQ(std::vector<int32_t>(got.begin() + 10, got.begin() + 20), std::vector<int32_t>(10, 0));
  EXPECT_EQ(std::vector<int32_t>(got.begin() + 20, got.end()), first_rows);
}

// Blocks of a longer input counted in a loop and summed in a Var, and the
// programs' sums added into one histogram by atomics: the pattern of an
// MoE's tokens-per-expert count.
TEST(Histogram, BlocksInALoopAndProgramsByAtomics) {
  constexpr int kBlock = 128, kBins = 40, kPrograms = 5;
  KernelBuilder k("histogram_blocks");
  Value x = k.arg(ptr(i16), "x"), n = k.arg(i32, "n"), out = k.arg(ptr(i32), "out");
  Var sum = k.var(k.zeros({kBins}, i32));
  Value start = k.program_id(0) * kBlock, step = k.num_programs(0) * kBlock;
  k.for_range(start, n, step, [&](Value i) {
    Value offs = i + k.arange(0, kBlock);  // [B] i32
    Value inside = offs < n;
    sum = sum + histogram(load(x + offs, inside, 0), kBins, inside);
  });
  atomic_add(out + k.arange(0, kBins), sum, MemoryOrder::kRelaxed);
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const int count = 3000;
  std::vector<int16_t> xs(count);
  for (int16_t& v : xs) v = static_cast<int16_t>(rng.uniform(-3, kBins + 3));
  std::vector<int32_t> got(kBins, 0);
  TESSEL_ASSERT_OK(run(k, kPrograms, xs.data(), count, got.data()));
  EXPECT_EQ(got, counted(xs, 0, count, kBins, [](int64_t) { return true; }));
}

// An MoE's routing: each token's top k experts (argsort of its logits),
// then the tokens per expert.
TEST(Histogram, TokensPerExpertOfATopK) {
  constexpr int kTokens = 16, kExperts = 32, kTop = 4;
  KernelBuilder k("tokens_per_expert");
  Value x = k.arg(ptr(f32), "x"), out = k.arg(ptr(i32), "out");
  Value logits = load(x + index_tile(k, {kTokens, kExperts}));  // [T, E] f32
  Value first = broadcast_to(expand_dims(k.arange(0, kTop), 0), {kTokens, kTop});
  Value experts = gather(argsort(logits, 1, /*descending=*/true), first, 1);  // [T, K] i32
  store(out + k.arange(0, kExperts), histogram(experts, kExperts));
  Rng rng;
  SCOPED_TRACE(rng.trace());
  std::vector<float> xs(kTokens * kExperts);
  for (float& v : xs) v = static_cast<float>(rng.real(-1, 1));
  std::vector<int32_t> got = poisoned<int32_t>(kExperts);
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), got.data()));
  std::vector<int32_t> want(kExperts, 0);
  for (int t = 0; t < kTokens; ++t) {
    std::vector<int32_t> order(kExperts);
    for (int e = 0; e < kExperts; ++e) order[e] = e;
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return xs[t * kExperts + a] > xs[t * kExperts + b]; });
    for (int i = 0; i < kTop; ++i) ++want[order[i]];
  }
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace tessel::testing
