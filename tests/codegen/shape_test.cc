// Shape operations on the host target: broadcasting ([N,1] x [1,M], scalar
// splats, full, zeros), expand_dims, reshape and trans in 2-D and 3-D, and
// narrow and split.
#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "tests/codegen/host_test_util.h"

namespace tessel::testing {
namespace {

// a - b: wrapping for integers, rounded once for floats.
template <class T>
T sub_reference(T a, T b) {
  if constexpr (kIsFloat<T>)
    return from_f64<T>(to_f64(a) - to_f64(b));
  else
    return static_cast<T>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}

// maximum ignores a NaN operand.
template <class T>
T max_reference(T a, T b) {
  if constexpr (kIsFloat<T>)
    return from_f64<T>(std::fmax(to_f64(a), to_f64(b)));
  else
    return std::max(a, b);
}

template <class T>
class BroadcastTest : public ::testing::Test {};
using BroadcastTypes = ::testing::Types<int8_t, int64_t, uint16_t, BFloat16, float, double>;
TYPED_TEST_SUITE(BroadcastTest, BroadcastTypes);

// A column [16,1] and a row [1,32] stretch to [16,32]; scalars (arguments
// and literals) splat to any shape.
TYPED_TEST(BroadcastTest, ColumnTimesRowAndScalarSplats) {
  using T = TypeParam;
  constexpr DType kD = dtype_v<T>();
  constexpr int kN = 16, kM = 32, kSize = kN * kM;
  Rng rng;
  SCOPED_TRACE(rng.trace());
  KernelBuilder k("broadcast");
  Value a = k.arg(ptr(kD), "a"), b = k.arg(ptr(kD), "b"), s = k.arg(kD, "s"), out = k.arg(ptr(kD), "out");
  Value col = expand_dims(load(a + k.arange(0, kN)), 1);  // [16, 1]
  Value row = expand_dims(load(b + k.arange(0, kM)), 0);  // [1, 32]
  Value idx = index_tile(k, {kN, kM});                    // [16, 32] i32
  store(out + idx, col - row);
  store(out + kSize + idx, maximum(row, col));
  store(out + 2 * kSize + idx, broadcast_to(col, {kN, kM}));
  store(out + 3 * kSize + idx, row - s);
  store(out + 4 * kSize + idx, k.full({kN, kM}, s, kD));
  store(out + 5 * kSize + idx, splat(s, {kN, kM}) - k.zeros({kN, kM}, kD));
  store(out + 6 * kSize + idx, maximum(col, 3));
  // A pointer tile broadcast from a [16,1] base and a [1,32] offset.
  store(expand_dims(out + 7 * kSize + k.arange(0, kN) * kM, 1) + expand_dims(k.arange(0, kM), 0), col);

  std::vector<T> as = make_vector<T>(kN, [&] { return random_value<T>(rng); });
  std::vector<T> bs = make_vector<T>(kM, [&] { return random_value<T>(rng); });
  const T s_value = random_value<T>(rng);
  std::vector<T> got = poisoned<T>(8 * kSize + 1);
  TESSEL_ASSERT_OK(run(k, 1, as.data(), bs.data(), s_value, got.data()));
  const T zero = from_f64<T>(0), three = from_f64<T>(3);
  for (int i = 0; i < kN; ++i) {
    for (int j = 0; j < kM; ++j) {
      const int e = i * kM + j;
      const T want[] = {
          sub_reference(as[i], bs[j]),  max_reference(bs[j], as[i]), as[i], sub_reference(bs[j], s_value), s_value,
          sub_reference(s_value, zero), max_reference(as[i], three), as[i]};
      for (int r = 0; r < 8; ++r) {
        ASSERT_TRUE(same(got[r * kSize + e], want[r], r != 1 && r != 6))
            << "result " << r << " at [" << i << ", " << j << "]: " << show(got[r * kSize + e]) << ", want "
            << show(want[r]);
      }
    }
  }
  EXPECT_TRUE(is_poison(got[8 * kSize]));
}

// expand_dims and reshape only relabel the row-major order; a reshaped or
// expanded tile feeds arithmetic, stores and other views like any tile.
TEST(Shape, ExpandDimsAndReshapeKeepRowMajorOrder) {
  Rng rng;
  SCOPED_TRACE(rng.trace());
  constexpr int kN = 128;
  KernelBuilder k("views");
  Value x = k.arg(ptr(i32), "x"), out = k.arg(ptr(i32), "out");
  Value xv = load(x + k.arange(0, kN));  // [128]
  Value r = reshape(xv, {8, 16});        // [8, 16]
  store(out + index_tile(k, {8, 16}), r);
  store(out + kN + index_tile(k, {16, 8}), reshape(r, {16, 8}) + 1);
  store(out + 2 * kN + index_tile(k, {1, kN}), expand_dims(xv, 0));
  store(out + 3 * kN + index_tile(k, {kN, 1}), expand_dims(xv, 1) * 2);
  store(out + 4 * kN + index_tile(k, {8, 1, 16}), expand_dims(r, 1));
  store(out + 5 * kN + index_tile(k, {2, 4, 16}), reshape(r, {2, 4, 16}) * 3);
  // A view of a transposed tile: the transposed order, flattened.
  store(out + 6 * kN + k.arange(0, kN), reshape(trans(r), {kN}));
  // A view used as a broadcast operand: [8,16] + [8,1].
  store(out + 7 * kN + index_tile(k, {8, 16}), r + expand_dims(reshape(load(x + k.arange(0, 8)), {8}), 1));
  // arange(lo, hi) starts at lo.
  store(out + 8 * kN + k.arange(0, kN), k.arange(-4, kN - 4));

  std::vector<int32_t> xs = make_vector<int32_t>(kN, [&] { return static_cast<int32_t>(rng.uniform(-1000, 1000)); });
  std::vector<int32_t> got = poisoned<int32_t>(9 * kN + 1);
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), got.data()));
  for (int i = 0; i < kN; ++i) {
    // Element i of the flattened [16, 8] transpose is r[i % 8][i / 8].
    const int32_t want[] = {
        xs[i], xs[i] + 1, xs[i], 2 * xs[i], xs[i], 3 * xs[i], xs[(i % 8) * 16 + i / 8], xs[i] + xs[i / 16], i - 4};
    for (int v = 0; v < 9; ++v) ASSERT_EQ(got[v * kN + i], want[v]) << "view " << v << ", element " << i;
  }
  EXPECT_TRUE(is_poison(got[9 * kN]));
}

template <class T>
class TransTest : public ::testing::Test {};
using TransTypes = ::testing::Types<int8_t, double>;
TYPED_TEST_SUITE(TransTest, TransTypes);

// trans in 2-D (default and explicit permutation) and every permutation of
// a [2,4,8] tile: out[j] = in[i] where j is i's index permuted.
TYPED_TEST(TransTest, PermutesEveryAxisOrder) {
  using T = TypeParam;
  constexpr DType kD = dtype_v<T>();
  constexpr int kSize = 64;
  const Shape in3 = {2, 4, 8};
  const std::array<std::array<int64_t, 3>, 6> perms = {
      {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}};
  Rng rng;
  SCOPED_TRACE(rng.trace());
  KernelBuilder k("trans");
  Value x = k.arg(ptr(kD), "x"), out = k.arg(ptr(kD), "out");
  Value m = load(x + index_tile(k, {8, 8}));   // [8, 8]
  Value w = load(x + index_tile(k, {4, 16}));  // [4, 16]
  store(out + index_tile(k, {8, 8}), trans(m));
  store(out + kSize + index_tile(k, {16, 4}), trans(w, {1, 0}));
  Value t = load(x + index_tile(k, in3));  // [2, 4, 8]
  for (int p = 0; p < 6; ++p) {
    const auto& perm = perms[p];
    Shape shape = {in3[perm[0]], in3[perm[1]], in3[perm[2]]};
    store(out + (2 + p) * kSize + index_tile(k, shape), trans(t, {perm[0], perm[1], perm[2]}));
  }

  std::vector<T> xs = make_vector<T>(kSize, [&] { return random_value<T>(rng); });
  std::vector<T> got = poisoned<T>(8 * kSize + 1);
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), got.data()));
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 8; ++j) ASSERT_TRUE(same(got[j * 8 + i], xs[i * 8 + j])) << "8x8 at " << i << "," << j;
  }
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 16; ++j)
      ASSERT_TRUE(same(got[kSize + j * 4 + i], xs[i * 16 + j])) << "4x16 at " << i << "," << j;
  }
  for (int p = 0; p < 6; ++p) {
    const auto& perm = perms[p];
    for (int i = 0; i < kSize; ++i) {
      const int64_t idx[3] = {i / 32, i / 8 % 4, i % 8};
      const int64_t j = (idx[perm[0]] * in3[perm[1]] + idx[perm[1]]) * in3[perm[2]] + idx[perm[2]];
      ASSERT_TRUE(same(got[(2 + p) * kSize + j], xs[i]))
          << "perm " << perm[0] << perm[1] << perm[2] << ", input element " << i;
    }
  }
  EXPECT_TRUE(is_poison(got[8 * kSize]));
}

using NarrowTypes = ::testing::Types<int16_t, float>;
template <class T>
class NarrowTest : public ::testing::Test {};
TYPED_TEST_SUITE(NarrowTest, NarrowTypes);

// narrow along each axis of a [4, 8, 16] tile, split's halves (combined
// elementwise, as a SwiGLU epilogue combines a product's), a part of a
// part, and a part of a pointer tile: out = the parts' elements in order.
TYPED_TEST(NarrowTest, TakesThePartAlongEachAxis) {
  using T = TypeParam;
  constexpr DType kD = dtype_v<T>();
  const Shape in = {4, 8, 16};
  constexpr int kSize = 4 * 8 * 16;
  struct Part {
    int axis;
    int64_t start, size;
  };
  const std::vector<Part> parts = {{0, 1, 2}, {1, 3, 5}, {2, 0, 16}, {2, 15, 1}, {2, 4, 8}};
  Rng rng;
  SCOPED_TRACE(rng.trace());
  KernelBuilder k("narrow");
  Value x = k.arg(ptr(kD), "x"), out = k.arg(ptr(kD), "out");
  Value t = load(x + index_tile(k, in));  // [4, 8, 16]
  int64_t at = 0;
  std::vector<int64_t> offsets;
  for (const Part& p : parts) {
    Value part = narrow(t, p.axis, p.start, p.size);
    offsets.push_back(at);
    store(out + at + index_tile(k, part.type().shape()), part);
    at += part.type().numel();
  }
  auto [lo, hi] = split(t, 2);  // [4, 8, 8] each
  store(out + at + index_tile(k, {4, 8, 8}), lo - hi);
  store(out + at + 256 + index_tile(k, {4, 2, 8}), narrow(narrow(hi, 1, 4, 4), 1, 1, 2));  // rows 5, 6 of hi
  Value ptrs = narrow(x + index_tile(k, in), 1, 6, 2);                                     // [4, 2, 16] pointers
  store(out + at + 320 + index_tile(k, {4, 2, 16}), load(ptrs));
  const int64_t total = at + 320 + 128;

  std::vector<T> xs = make_vector<T>(kSize, [&] { return random_value<T>(rng); });
  std::vector<T> got = poisoned<T>(total + 1);
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), got.data()));
  auto elem = [&](int64_t i, int64_t j, int64_t l) { return xs[(i * 8 + j) * 16 + l]; };
  for (size_t p = 0; p < parts.size(); ++p) {
    Shape shape = in;
    shape[parts[p].axis] = parts[p].size;
    for (int64_t e = 0; e < shape[0] * shape[1] * shape[2]; ++e) {
      int64_t idx[3] = {e / (shape[1] * shape[2]), e / shape[2] % shape[1], e % shape[2]};
      idx[parts[p].axis] += parts[p].start;
      ASSERT_TRUE(same(got[offsets[p] + e], elem(idx[0], idx[1], idx[2]))) << "part " << p << " element " << e;
    }
  }
  for (int64_t e = 0; e < 256; ++e) {
    const int64_t i = e / 64, j = e / 8 % 8, l = e % 8;
    ASSERT_TRUE(same(got[at + e], sub_reference(elem(i, j, l), elem(i, j, l + 8)), false)) << "halves at " << e;
  }
  for (int64_t e = 0; e < 64; ++e) {
    ASSERT_TRUE(same(got[at + 256 + e], elem(e / 16, 5 + e / 8 % 2, 8 + e % 8))) << "part of a part at " << e;
  }
  for (int64_t e = 0; e < 128; ++e) {
    ASSERT_TRUE(same(got[at + 320 + e], elem(e / 32, 6 + e / 16 % 2, e % 16))) << "pointers at " << e;
  }
  EXPECT_TRUE(is_poison(got[total]));
}

// concat along each axis of [4, 8, 16] tiles with parts of other sizes, a
// splat part, and a rotation of each row's halves (rotary embeddings'
// rotate_half: concat(-x2, x1) of split's halves).
TYPED_TEST(NarrowTest, ConcatJoinsPartsAlongEachAxis) {
  using T = TypeParam;
  constexpr DType kD = dtype_v<T>();
  const Shape in = {4, 8, 16};
  constexpr int kSize = 4 * 8 * 16;
  Rng rng;
  SCOPED_TRACE(rng.trace());
  KernelBuilder k("concat");
  Value x = k.arg(ptr(kD), "x"), out = k.arg(ptr(kD), "out");
  Value t = load(x + index_tile(k, in));  // [4, 8, 16]
  std::vector<int64_t> offsets;
  int64_t at = 0;
  for (int axis = 0; axis < 3; ++axis) {
    Shape other = in;
    other[axis] = 1;
    Value part = narrow(t, axis, 0, 1) + 1;  // [.., 1 along axis, ..]
    Value joined = concat(t, part, axis);
    offsets.push_back(at);
    store(out + at + index_tile(k, joined.type().shape()), joined);
    at += joined.type().numel();
  }
  Value seven = k.full({4, 8, 2}, 7, kD);
  store(out + at + index_tile(k, {4, 8, 18}), concat(seven, t, 2));
  auto [x1, x2] = split(t, 2);
  store(out + at + 576 + index_tile(k, in), concat(-x2, x1, 2));
  const int64_t total = at + 576 + kSize;

  std::vector<T> xs = make_vector<T>(kSize, [&] { return random_value<T>(rng); });
  std::vector<T> got = poisoned<T>(total + 1);
  TESSEL_ASSERT_OK(run(k, 1, xs.data(), got.data()));
  auto elem = [&](int64_t i, int64_t j, int64_t l) { return xs[(i * 8 + j) * 16 + l]; };
  const T one = from_f64<T>(1);
  for (int axis = 0; axis < 3; ++axis) {
    Shape shape = in;
    shape[axis] += 1;
    for (int64_t e = 0; e < shape[0] * shape[1] * shape[2]; ++e) {
      int64_t idx[3] = {e / (shape[1] * shape[2]), e / shape[2] % shape[1], e % shape[2]};
      const bool added = idx[axis] == in[axis];
      if (added) idx[axis] = 0;
      T want = elem(idx[0], idx[1], idx[2]);
      if (added) want = kIsFloat<T> ? from_f64<T>(to_f64(want) + 1) : static_cast<T>(want + one);
      ASSERT_TRUE(same(got[offsets[axis] + e], want)) << "axis " << axis << " element " << e;
    }
  }
  for (int64_t e = 0; e < 576; ++e) {
    const int64_t r = e / 18, l = e % 18;
    ASSERT_TRUE(same(got[at + e], l < 2 ? from_f64<T>(7) : elem(r / 8, r % 8, l - 2))) << "splat part at " << e;
  }
  for (int64_t e = 0; e < kSize; ++e) {
    const int64_t r = e / 16, l = e % 16;
    const T v = elem(r / 8, r % 8, (l + 8) % 16);
    const T want = l < 8 ? (kIsFloat<T> ? from_f64<T>(-to_f64(v)) : static_cast<T>(-v)) : v;
    ASSERT_TRUE(same(got[at + 576 + e], want)) << "rotated halves at " << e;
  }
  EXPECT_TRUE(is_poison(got[total]));
}

}  // namespace
}  // namespace tessel::testing
