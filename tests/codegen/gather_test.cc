// gather along every axis of 1-D, 2-D and 3-D tiles on the host target,
// index tiles shorter and longer than the source along the axis, indices of
// several integer dtypes, some outside the axis (those give 0), against a
// loop over the same inputs: a move, so the bits must match exactly.
#include <algorithm>
#include <cstring>
#include <vector>

#include "tests/codegen/host_test_util.h"

namespace tessel::testing {
namespace {

struct Case {
  Shape src, index;  // index: src's shape but along the axis
  int axis;
  int64_t at;  // where its index values and its result start
};

// The row-major position in `shape` of element `linear` of `index_shape`,
// its coordinate along `axis` replaced by `i`.
int64_t source_position(const Shape& shape, const Shape& index_shape, int axis, int64_t linear, int64_t i) {
  std::vector<int64_t> dims(index_shape.size());
  for (int d = static_cast<int>(index_shape.size()) - 1; d >= 0; --d) {
    dims[d] = linear % index_shape[d];
    linear /= index_shape[d];
  }
  dims[axis] = i;
  int64_t pos = 0;
  for (size_t d = 0; d < shape.size(); ++d) pos = pos * shape[d] + dims[d];
  return pos;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  int64_t at = 0;
  auto add = [&](Shape src, Shape index, int axis) {
    out.push_back({src, index, axis, at});
    at += numel(index);
  };
  add({64}, {40}, 0);
  add({20}, {96}, 0);
  add({8, 16}, {8, 24}, 1);
  add({8, 16}, {5, 16}, 0);
  add({3, 100}, {3, 7}, 1);
  add({4, 6, 8}, {4, 3, 8}, 1);
  add({4, 6, 8}, {4, 6, 2}, 2);
  add({4, 6, 8}, {9, 6, 8}, 0);
  return out;
}

// One kernel gathers each case's source (the first elements of x, in its shape)
// with its index values (read from idx) into out.
template <class T, class I>
void gather_matches_a_loop() {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  const std::vector<Case> all = cases();
  const int64_t total = all.back().at + numel(all.back().index);
  KernelBuilder k("gather");
  Value x = k.arg(ptr(dtype_v<T>()), "x"), idx = k.arg(ptr(dtype_v<I>()), "idx"), out = k.arg(ptr(dtype_v<T>()), "out");
  int64_t source = 0;  // the largest source's elements
  for (const Case& c : all) source = std::max(source, numel(c.src));
  for (const Case& c : all) {
    const Value src = load(x + index_tile(k, c.src));
    const Value positions = index_tile(k, c.index);
    store(out + c.at + positions, gather(src, load(idx + c.at + positions), c.axis));
  }
  std::vector<T> xs = make_vector<T>(source, [&] { return random_value<T>(rng); });
  std::vector<I> index(total);
  for (const Case& c : all) {
    const int64_t n = c.src[c.axis];
    // Mostly inside the axis; some just past either end, and far past.
    for (int64_t e = 0; e < numel(c.index); ++e) {
      int64_t i = rng.uniform(0, n - 1);
      if (rng.chance(0.15)) i = rng.chance(0.5) ? n + rng.uniform(0, 2) : int64_t{1} << 40;
      if (std::is_signed_v<I> && rng.chance(0.1)) i = -1 - rng.uniform(0, 2);
      index[c.at + e] = static_cast<I>(i);
    }
  }
  std::vector<T> got = poisoned<T>(total);
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), index.data(), got.data()));
  for (const Case& c : all) {
    const int64_t n = c.src[c.axis];
    for (int64_t e = 0; e < numel(c.index); ++e) {
      const I i = index[c.at + e];
      const bool inside = i >= 0 && static_cast<int64_t>(i) < n;
      const T want = inside ? xs[source_position(c.src, c.index, c.axis, e, static_cast<int64_t>(i))] : T{};
      ASSERT_TRUE(same(got[c.at + e], want))
          << "gather of " << shape_str(c.src) << " by " << shape_str(c.index) << " along axis " << c.axis
          << ", element " << e << " (index " << static_cast<int64_t>(i) << "): got " << show(got[c.at + e]) << ", want "
          << show(want);
    }
  }
}

template <class T>
class GatherTest : public ::testing::Test {};
using GatherTypes = ::testing::Types<int8_t, uint16_t, int32_t, int64_t, Half, BFloat16, float, double>;
TYPED_TEST_SUITE(GatherTest, GatherTypes);

TYPED_TEST(GatherTest, AlongEveryAxisMatchesALoop) { gather_matches_a_loop<TypeParam, int32_t>(); }

TEST(Gather, IndicesOfEveryIntegerWidth) {
  gather_matches_a_loop<float, int8_t>();
  gather_matches_a_loop<float, uint8_t>();
  gather_matches_a_loop<float, int16_t>();
  gather_matches_a_loop<float, uint32_t>();
  gather_matches_a_loop<float, int64_t>();
  gather_matches_a_loop<float, uint64_t>();
}

// i1 tiles move as bytes in memory; outside the axis gives false.
TEST(Gather, FlagsAndIndicesOutsideGiveFalse) {
  KernelBuilder k("gather_flags");
  Value x = k.arg(ptr(i32), "x"), out = k.arg(ptr(i32), "out");
  Value flags = load(x + k.arange(0, 8)) != 0;
  Value index = k.arange(0, 12) - 2;  // -2 ... 9: four outside [0, 8)
  store(out + k.arange(0, 12), cast(gather(flags, index, 0), i32));
  std::vector<int32_t> xs = {1, 0, 0, 1, 1, 0, 1, 1};
  std::vector<int32_t> got = poisoned<int32_t>(12);
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), got.data()));
  EXPECT_EQ(got, (std::vector<int32_t>{0, 0, 1, 0, 0, 1, 1, 0, 1, 1, 0, 0}));
}

// A router's top k without a trip through memory: argsort's first k
// positions per row (a gather of the order by 0 ... k - 1), then the scores
// at them.
TEST(Gather, TopKOfEachRow) {
  constexpr int kRows = 8, kExperts = 64, kTop = 4;
  KernelBuilder k("top_k");
  Value x = k.arg(ptr(f32), "x"), top = k.arg(ptr(f32), "top"), experts = k.arg(ptr(i32), "experts");
  Value scores = load(x + index_tile(k, {kRows, kExperts}));  // [R, E] f32
  Value order = argsort(scores, 1, /*descending=*/true);      // [R, E] i32
  Value first = broadcast_to(expand_dims(k.arange(0, kTop), 0), {kRows, kTop});
  Value picked = gather(order, first, 1);  // [R, K] i32
  store(experts + index_tile(k, {kRows, kTop}), picked);
  store(top + index_tile(k, {kRows, kTop}), gather(scores, picked, 1));
  Rng rng;
  SCOPED_TRACE(rng.trace());
  std::vector<float> xs(kRows * kExperts);
  for (float& v : xs) v = static_cast<float>(rng.real(-1, 1));
  std::vector<float> got = poisoned<float>(kRows * kTop);
  std::vector<int32_t> chosen = poisoned<int32_t>(kRows * kTop);
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), got.data(), chosen.data()));
  for (int r = 0; r < kRows; ++r) {
    std::vector<int32_t> want(kExperts);
    for (int e = 0; e < kExperts; ++e) want[e] = e;
    std::stable_sort(want.begin(), want.end(),
                     [&](int32_t a, int32_t b) { return xs[r * kExperts + a] > xs[r * kExperts + b]; });
    for (int i = 0; i < kTop; ++i) {
      EXPECT_EQ(chosen[r * kTop + i], want[i]) << "row " << r << ", " << i;
      EXPECT_EQ(got[r * kTop + i], xs[r * kExperts + want[i]]) << "row " << r << ", " << i;
    }
  }
}

}  // namespace
}  // namespace tessel::testing
