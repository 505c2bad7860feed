// tma_load / tma_store through TensorMap::tiled on the host target, in a
// persistent loop over a matrix whose sizes are not multiples of the box:
// every in-bounds element is copied, out-of-bounds parts of a box read zero
// (also at negative coordinates), and stores are clipped to the tensor;
// tma_reduce adds boxes into it.
#include <algorithm>
#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "runtime/tensor_map.h"
#include "tests/codegen/host_test_util.h"

namespace tessel::testing {
namespace {

template <class T>
class TmaTest : public ::testing::Test {};
using TmaTypes = ::testing::Types<int8_t, BFloat16, float>;
TYPED_TEST_SUITE(TmaTest, TmaTypes);

template <class T>
T plus_one(T x) {
  if constexpr (kIsFloat<T>)
    return from_f64<T>(to_f64(x) + 1);
  else
    return static_cast<T>(x + 1);
}

// Boxes of 64 bytes per row: [16, 64] i8, [16, 32] bf16, [8, 16] f32.
TYPED_TEST(TmaTest, PersistentCopyCoversRaggedEdges) {
  using T = TypeParam;
  constexpr DType kD = dtype_v<T>();
  constexpr int kBoxCols = 64 / static_cast<int>(sizeof(T)), kBoxRows = sizeof(T) == 4 ? 8 : 16;
  constexpr int kBox = kBoxRows * kBoxCols;
  // Row strides must be multiples of 16 bytes, so columns come in 16-byte steps.
  constexpr int kColStep = 16 / static_cast<int>(sizeof(T));
  Rng rng;
  SCOPED_TRACE(rng.trace());
  KernelBuilder k("tma_copy");
  Value src = k.tensor_map(kD, {kBoxRows, kBoxCols}, "src"), dst = k.tensor_map(kD, {kBoxRows, kBoxCols}, "dst");
  Value boxes = k.arg(ptr(kD), "boxes"), shifted = k.arg(ptr(kD), "shifted");
  Value m = k.arg(i32, "m"), n = k.arg(i32, "n");
  Value col_tiles = cdiv(n, kBoxCols);
  Value in_box = index_tile(k, {kBoxRows, kBoxCols});  // [R, C] i32
  k.for_each_tile(cdiv(m, kBoxRows) * col_tiles, [&](Value t) {
    Value row = t / col_tiles * kBoxRows, col = t % col_tiles * kBoxCols;
    Value tile = tma_load(src, {row, col});  // [R, C], shared memory
    store(boxes + t * kBox + in_box, tile);
    tma_store(dst, {row, col}, tile + 1);
    // The box half a box up and left: negative coordinates on the first row and column.
    store(shifted + t * kBox + in_box, tma_load(src, {row - kBoxRows / 2, col - kBoxCols / 2}));
  });

  const int rows = static_cast<int>(kBoxRows * rng.uniform(0, 3) + rng.uniform(1, kBoxRows - 1));
  const int cols = static_cast<int>(kBoxCols * rng.uniform(0, 2) + kColStep * rng.uniform(1, kBoxCols / kColStep - 1));
  const int tiles = (rows + kBoxRows - 1) / kBoxRows * ((cols + kBoxCols - 1) / kBoxCols);
  const int grid = static_cast<int>(rng.uniform(1, 4));
  SCOPED_TRACE(absl::StrCat(rows, " x ", cols, " on ", grid, " programs"));
  std::vector<T> in = make_vector<T>(rows * cols, [&] {
    if constexpr (kIsFloat<T>)
      return random_float<T>(rng, -4, 4);
    else
      return random_int<T>(rng);
  });
  std::vector<T> out = poisoned<T>(rows * cols + kBox);
  std::vector<T> got_boxes = poisoned<T>(tiles * kBox), got_shifted = poisoned<T>(tiles * kBox);
  absl::StatusOr<TensorMap> src_map = TensorMap::tiled(kD, in.data(), {rows, cols}, {kBoxRows, kBoxCols});
  absl::StatusOr<TensorMap> dst_map = TensorMap::tiled(kD, out.data(), {rows, cols}, {kBoxRows, kBoxCols});
  TESSEL_ASSERT_OK(src_map.status());
  TESSEL_ASSERT_OK(dst_map.status());
  TESSEL_ASSERT_OK(run(k, grid, *src_map, *dst_map, got_boxes.data(), got_shifted.data(), rows, cols));

  for (int i = 0; i < rows * cols; ++i) {
    ASSERT_TRUE(same(out[i], plus_one(in[i]))) << "element [" << i / cols << ", " << i % cols << "]";
  }
  for (int i = rows * cols; i < rows * cols + kBox; ++i) ASSERT_TRUE(is_poison(out[i])) << "store not clipped at " << i;
  const int tiles_n = (cols + kBoxCols - 1) / kBoxCols;
  const T zero = from_f64<T>(0);
  for (int t = 0; t < tiles; ++t) {
    for (int e = 0; e < kBox; ++e) {
      const int r = t / tiles_n * kBoxRows + e / kBoxCols, c = t % tiles_n * kBoxCols + e % kBoxCols;
      const bool inside = r < rows && c < cols;
      ASSERT_TRUE(same(got_boxes[t * kBox + e], inside ? in[r * cols + c] : zero))
          << "box " << t << " at [" << r << ", " << c << "]";
      const int rs = r - kBoxRows / 2, cs = c - kBoxCols / 2;
      const bool shifted_inside = rs >= 0 && cs >= 0 && rs < rows && cs < cols;
      ASSERT_TRUE(same(got_shifted[t * kBox + e], shifted_inside ? in[rs * cols + cs] : zero))
          << "shifted box " << t << " at [" << rs << ", " << cs << "]";
    }
  }
}

// tma_multicast in clusters of two: both programs of a cluster run each
// tile (for_each_tile hands tiles to clusters) and each gets the two boxes
// one above the other, zeros past the tensor's edge; a grid that is not
// whole clusters is refused.
TEST(Tma, MulticastTilesStackTheClustersBoxes) {
  constexpr int kBoxRows = 32, kCols = 32, kTile = 2 * kBoxRows * kCols;
  KernelBuilder k("multicast");
  k.cluster(2);
  Value src = k.tensor_map(f32, {kBoxRows, kCols}, "src");
  Value out = k.arg(ptr(f32), "out");
  Value rows = k.arg(i32, "rows");
  Value in_tile = index_tile(k, {2 * kBoxRows, kCols});  // [2R, C] i32
  k.for_each_tile(cdiv(rows, 2 * kBoxRows), [&](Value t) {
    Value tile = tma_multicast(src, {t * (2 * kBoxRows), 0});  // [2R, C], shared memory
    store(out + (t * 2 + k.cluster_rank()) * kTile + in_tile, tile);
  });
  const int n = 150;  // 3 tiles of 64 rows, the last 22 rows deep
  std::vector<float> in(n * kCols);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<float>(i + 1);
  const int tiles = 3;
  std::vector<float> got(2 * tiles * kTile, -1.0f);
  absl::StatusOr<TensorMap> map = TensorMap::tiled(f32, in.data(), {n, kCols}, {kBoxRows, kCols});
  TESSEL_ASSERT_OK(map.status());
  for (int grid : {2, 4}) {
    SCOPED_TRACE(absl::StrCat(grid, " programs"));
    std::fill(got.begin(), got.end(), -1.0f);
    TESSEL_ASSERT_OK(run(k, grid, *map, got.data(), n));
    for (int t = 0; t < tiles; ++t) {
      for (int rank = 0; rank < 2; ++rank) {
        for (int e = 0; e < kTile; ++e) {
          const int r = t * 2 * kBoxRows + e / kCols;
          ASSERT_EQ(got[(t * 2 + rank) * kTile + e], r < n ? in[r * kCols + e % kCols] : 0.0f)
              << "tile " << t << ", rank " << rank << ", element " << e;
        }
      }
    }
  }
  absl::Status odd = run(k, 3, *map, got.data(), n);
  EXPECT_THAT(odd.message(), ::testing::HasSubstr("runs clusters of 2 programs, so its grid along axis 0 must be a "
                                                  "multiple of 2, got 3"));
}

// tma_reduce adds boxes into the tensor: `repeats` programs' worth of adds
// of every box, from programs running at once (the host runs four), land
// whole on every in-bounds element, none past the edges. Small integers, so
// that every order of the float sums is exact.
template <class T>
class TmaReduceTest : public ::testing::Test {};
using TmaReduceTypes = ::testing::Types<int32_t, float, BFloat16>;
TYPED_TEST_SUITE(TmaReduceTest, TmaReduceTypes);

TYPED_TEST(TmaReduceTest, AddsEveryBoxIntoTheTensor) {
  using T = TypeParam;
  constexpr DType kD = dtype_v<T>();
  constexpr int kBoxRows = 8, kBoxCols = 64 / static_cast<int>(sizeof(T));
  constexpr int kColStep = 16 / static_cast<int>(sizeof(T));
  Rng rng;
  SCOPED_TRACE(rng.trace());
  KernelBuilder k("tma_reduce");
  Value src = k.tensor_map(kD, {kBoxRows, kBoxCols}, "src"), dst = k.tensor_map(kD, {kBoxRows, kBoxCols}, "dst");
  Value m = k.arg(i32, "m"), n = k.arg(i32, "n"), times = k.arg(i32, "repeats");
  Value col_tiles = cdiv(n, kBoxCols), tiles = cdiv(m, kBoxRows) * col_tiles;
  k.for_each_tile(tiles * times, [&](Value t) {
    Value box = t % tiles;
    Value row = box / col_tiles * kBoxRows, col = box % col_tiles * kBoxCols;
    tma_reduce(AtomicOp::kAdd, dst, {row, col}, tma_load(src, {row, col}));
  });

  const int rows = static_cast<int>(kBoxRows * rng.uniform(0, 3) + rng.uniform(1, kBoxRows - 1));
  const int cols = static_cast<int>(kBoxCols * rng.uniform(0, 2) + kColStep * rng.uniform(1, kBoxCols / kColStep - 1));
  const int repeats = static_cast<int>(rng.uniform(1, 6));
  const int grid = static_cast<int>(rng.uniform(1, 8));
  SCOPED_TRACE(absl::StrCat(rows, " x ", cols, ", each box ", repeats, " times on ", grid, " programs"));
  auto small = [&] { return from_f64<T>(static_cast<double>(rng.uniform(0, 16)) - 8); };
  std::vector<T> in = make_vector<T>(rows * cols, small);
  std::vector<T> init = make_vector<T>(rows * cols, small);
  std::vector<T> out = poisoned<T>(rows * cols + kBoxRows * kBoxCols);
  std::copy(init.begin(), init.end(), out.begin());
  absl::StatusOr<TensorMap> src_map = TensorMap::tiled(kD, in.data(), {rows, cols}, {kBoxRows, kBoxCols});
  absl::StatusOr<TensorMap> dst_map = TensorMap::tiled(kD, out.data(), {rows, cols}, {kBoxRows, kBoxCols});
  TESSEL_ASSERT_OK(src_map.status());
  TESSEL_ASSERT_OK(dst_map.status());
  TESSEL_ASSERT_OK(run(k, grid, *src_map, *dst_map, rows, cols, repeats));
  for (int i = 0; i < rows * cols; ++i) {
    const T want = from_f64<T>(to_f64(init[i]) + repeats * to_f64(in[i]));
    ASSERT_TRUE(same(out[i], want)) << "element [" << i / cols << ", " << i % cols << "]";
  }
  for (size_t i = rows * cols; i < out.size(); ++i) ASSERT_TRUE(is_poison(out[i])) << "add not clipped at " << i;
}

// The matmul pattern: per output tile, a K loop feeds TMA boxes of A and B
// (zero past every edge, so a ragged K adds nothing) straight into dot, and
// the f32 accumulator goes out with a clipped tma_store.
TEST(Tma, BoxesFeedDotInAPersistentMatmul) {
  constexpr int kBM = 16, kBN = 16, kBK = 16;
  Rng rng;
  SCOPED_TRACE(rng.trace());
  KernelBuilder k("tma_matmul");
  Value a = k.tensor_map(bf16, {kBM, kBK}, "a"), b = k.tensor_map(bf16, {kBK, kBN}, "b");
  Value c = k.tensor_map(f32, {kBM, kBN}, "c");
  Value m = k.arg(i32, "m"), n = k.arg(i32, "n"), kdim = k.arg(i32, "k");
  Value col_tiles = cdiv(n, kBN);
  k.for_each_tile(cdiv(m, kBM) * col_tiles, [&](Value t) {
    Value row = t / col_tiles * kBM, col = t % col_tiles * kBN;
    Var acc = k.var(k.zeros({kBM, kBN}, f32));  // [16, 16] f32
    k.for_range(0, kdim, kBK, [&](Value kk) { acc = dot(tma_load(a, {row, kk}), tma_load(b, {kk, col}), acc); });
    tma_store(c, {row, col}, acc);
  });

  // Rows are 16-byte multiples: K and N step by 8 bf16 (and N by 4 f32).
  const int rows = static_cast<int>(rng.uniform(1, 50)), cols = static_cast<int>(8 * rng.uniform(1, 6));
  const int depth = static_cast<int>(8 * rng.uniform(1, 7));
  SCOPED_TRACE(absl::StrCat("M=", rows, " N=", cols, " K=", depth));
  std::vector<BFloat16> as = make_vector<BFloat16>(rows * depth, [&] { return random_float<BFloat16>(rng, -2, 2); });
  std::vector<BFloat16> bs = make_vector<BFloat16>(depth * cols, [&] { return random_float<BFloat16>(rng, -2, 2); });
  std::vector<float> cs = poisoned<float>(rows * cols + kBM * kBN);
  absl::StatusOr<TensorMap> ma = TensorMap::tiled(bf16, as.data(), {rows, depth}, {kBM, kBK});
  absl::StatusOr<TensorMap> mb = TensorMap::tiled(bf16, bs.data(), {depth, cols}, {kBK, kBN});
  absl::StatusOr<TensorMap> mc = TensorMap::tiled(f32, cs.data(), {rows, cols}, {kBM, kBN});
  TESSEL_ASSERT_OK(ma.status());
  TESSEL_ASSERT_OK(mb.status());
  TESSEL_ASSERT_OK(mc.status());
  TESSEL_ASSERT_OK(run(k, static_cast<int>(rng.uniform(1, 4)), *ma, *mb, *mc, rows, cols, depth));
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < cols; ++j) {
      double exact = 0, magnitude = 0;
      for (int p = 0; p < depth; ++p) {
        const double term = to_f64(as[i * depth + p]) * to_f64(bs[p * cols + j]);
        exact += term;
        magnitude += std::fabs(term);
      }
      ASSERT_LE(std::fabs(cs[i * cols + j] - exact), (depth + 2) * std::ldexp(1.0, -24) * magnitude)
          << "C[" << i << ", " << j << "]";
    }
  }
  for (size_t i = rows * cols; i < cs.size(); ++i) ASSERT_TRUE(is_poison(cs[i])) << "store not clipped at " << i;
}

}  // namespace
}  // namespace tessel::testing
