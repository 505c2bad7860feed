// Loads and stores with masks and `other`, and atomics, on the host target.
// Inputs and masked outputs sit right before an inaccessible page, so a
// masked-off lane that touched memory past the end would crash the test.
#include <algorithm>
#include <map>
#include <vector>

#include "tests/codegen/host_test_util.h"

namespace tessel::testing {
namespace {

template <class T>
class LoadStoreTest : public ::testing::Test {};
using LoadStoreTypes = ::testing::Types<int8_t, uint16_t, int32_t, int64_t, Half, BFloat16, float, double>;
TYPED_TEST_SUITE(LoadStoreTest, LoadStoreTypes);

// A partial last block: lanes past n read `other` (a literal, or a tile) and
// never touch memory; masked stores leave masked-off elements and the
// memory past n alone; scalar loads and stores take masks too.
TYPED_TEST(LoadStoreTest, MasksLeaveOtherMemoryAlone) {
  using T = TypeParam;
  constexpr DType kD = dtype_v<T>();
  constexpr int kBlock = 64;
  Rng rng;
  SCOPED_TRACE(rng.trace());
  KernelBuilder k("masked_memory");
  Value x = k.arg(ptr(kD), "x"), o = k.arg(ptr(kD), "o"), pick = k.arg(ptr(i1), "pick");
  Value out = k.arg(ptr(kD), "out"), y = k.arg(ptr(kD), "y"), z = k.arg(ptr(kD), "z");
  Value n = k.arg(i32, "n");
  Value pid = k.program_id();
  Value offs = pid * kBlock + k.arange(0, kBlock);  // [64] i32
  Value mask = offs < n;
  Value both = mask & load(pick + offs);
  Value v = load(x + offs, mask, 7);
  store(out + offs, v);
  store(out + k.num_programs() * kBlock + offs, load(x + offs, both, load(o + offs)));
  store(y + offs, v, mask);
  store(z + offs, v, both);
  // Scalars: x + n and y + n are the first bytes of the inaccessible page.
  store(out + 2 * k.num_programs() * kBlock + pid, load(x + n, pid < 0, 5));
  store(y + n, load(x), pid < 0);

  const int n_value = static_cast<int>(rng.uniform(1, 5 * kBlock));
  const int grid = (n_value + kBlock - 1) / kBlock, lanes = grid * kBlock;
  GuardedArray<T> xs(n_value), ys(n_value);
  for (int i = 0; i < n_value; ++i) xs[i] = random_value<T>(rng);
  std::memset(static_cast<void*>(ys.data()), kPoison, n_value * sizeof(T));
  std::vector<T> os = make_vector<T>(lanes, [&] { return random_value<T>(rng); });
  std::vector<uint8_t> picks(lanes);
  for (uint8_t& p : picks) p = rng.chance(0.5);
  std::vector<T> got = poisoned<T>(2 * lanes + grid + 1), zs = poisoned<T>(lanes);
  TESSEL_ASSERT_OK(
      run(k, grid, xs.data(), os.data(), static_cast<void*>(picks.data()), got.data(), ys.data(), zs.data(), n_value));

  const T seven = from_f64<T>(7), five = from_f64<T>(5);
  for (int i = 0; i < lanes; ++i) {
    const bool in = i < n_value;
    ASSERT_TRUE(same(got[i], in ? xs[i] : seven)) << "literal other, lane " << i;
    ASSERT_TRUE(same(got[lanes + i], in && picks[i] ? xs[i] : os[i])) << "tile other, lane " << i;
    if (!in) {
      ASSERT_TRUE(is_poison(zs[i])) << "masked-off element " << i << " was written";
      continue;
    }
    ASSERT_TRUE(same(ys[i], xs[i])) << "masked store, element " << i;
    ASSERT_TRUE(picks[i] ? same(zs[i], xs[i]) : is_poison(zs[i])) << "masked store, element " << i;
  }
  for (int p = 0; p < grid; ++p) ASSERT_TRUE(same(got[2 * lanes + p], five)) << "masked scalar load, program " << p;
  EXPECT_TRUE(is_poison(got[2 * lanes + grid]));
}

// Values whose partial sums are exact in T, so that any order of the atomic
// additions gives the same results.
template <class T>
T small_positive(Rng& rng) {
  if constexpr (kIsNarrow<T>)
    return from_f64<T>(static_cast<double>(rng.uniform(1, 2)));
  else
    return static_cast<T>(rng.uniform(1, 100));
}

template <class T>
T plus(T a, T b) {
  if constexpr (kIsFloat<T>)
    return from_f64<T>(to_f64(a) + to_f64(b));
  else
    return static_cast<T>(a + b);
}

template <class T>
class AtomicAddTest : public ::testing::Test {};
using AtomicAddTypes = ::testing::Types<int32_t, uint32_t, int64_t, uint64_t, Half, BFloat16, float, double>;
TYPED_TEST_SUITE(AtomicAddTest, AtomicAddTypes);

// Every lane of many programs adds a positive value to one of four counters.
// Each returned old value is a distinct partial sum: sorted, they must chain
// from the initial value through each addition to the counter's final value.
TYPED_TEST(AtomicAddTest, ManyProgramsOnFewCounters) {
  using T = TypeParam;
  constexpr DType kD = dtype_v<T>();
  constexpr int kCounters = 4;
  constexpr int kBlock = kIsNarrow<T> ? 16 : 64, kGrid = kIsNarrow<T> ? 8 : 32, kLanes = kBlock * kGrid;
  Rng rng;
  SCOPED_TRACE(rng.trace());
  KernelBuilder k("atomic_add");
  Value counters = k.arg(ptr(kD), "counters"), values = k.arg(ptr(kD), "values"), olds = k.arg(ptr(kD), "olds");
  Value hits = k.arg(ptr(i32), "hits"), hit_olds = k.arg(ptr(i32), "hit_olds");
  Value pid = k.program_id();
  Value lane = pid * kBlock + k.arange(0, kBlock);  // [64] i32
  store(olds + lane, atomic_add(counters + lane % kCounters, load(values + lane)));
  // One scalar atomic per program.
  store(hit_olds + pid, atomic_add(hits + pid % kCounters, 1));

  std::vector<T> vs = make_vector<T>(kLanes, [&] { return small_positive<T>(rng); });
  std::vector<T> init = make_vector<T>(kCounters, [&] { return small_positive<T>(rng); });
  std::vector<T> cs = init, got_olds = poisoned<T>(kLanes);
  std::vector<int32_t> hit_counts(kCounters, 0), got_hit_olds = poisoned<int32_t>(kGrid);
  TESSEL_ASSERT_OK(run(k, kGrid, cs.data(), vs.data(), got_olds.data(), hit_counts.data(), got_hit_olds.data()));

  for (int c = 0; c < kCounters; ++c) {
    std::vector<std::pair<double, int>> chain;  // (old value, lane)
    for (int l = c; l < kLanes; l += kCounters) chain.push_back({to_f64(got_olds[l]), l});
    std::sort(chain.begin(), chain.end());
    T expect = init[c];
    for (auto [old, l] : chain) {
      ASSERT_TRUE(same(got_olds[l], expect)) << "counter " << c << ": lane " << l << " saw " << show(got_olds[l])
                                             << ", want the partial sum " << show(expect);
      expect = plus(expect, vs[l]);
    }
    ASSERT_TRUE(same(cs[c], expect)) << "counter " << c << " = " << show(cs[c]) << ", want " << show(expect);
    std::vector<int32_t> seen;
    for (int p = c; p < kGrid; p += kCounters) seen.push_back(got_hit_olds[p]);
    std::sort(seen.begin(), seen.end());
    for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], static_cast<int32_t>(i)) << "scalar counter " << c;
    EXPECT_EQ(hit_counts[c], static_cast<int32_t>(seen.size()));
  }
}

template <class T>
class AtomicIntTest : public ::testing::Test {};
using AtomicIntTypes = ::testing::Types<int32_t, uint32_t, int64_t, uint64_t>;
TYPED_TEST_SUITE(AtomicIntTest, AtomicIntTypes);

// Programs race to claim slots with compare-and-swap: exactly one program
// per slot sees the initial 0 and stores its id; every other one sees that
// id. A CAS whose compare value does not match returns the value, changing nothing.
TYPED_TEST(AtomicIntTest, CasHasOneWinnerPerSlot) {
  using T = TypeParam;
  constexpr DType kD = dtype_v<T>();
  constexpr int kSlots = 3, kGrid = 40;
  KernelBuilder k("atomic_cas");
  Value slots = k.arg(ptr(kD), "slots"), olds = k.arg(ptr(kD), "olds"), fixed = k.arg(ptr(kD), "fixed");
  Value pid = k.program_id();
  store(olds + pid, atomic_cas(slots + pid % kSlots, 0, cast(pid + 1, kD)));
  store(olds + kGrid + pid, atomic_cas(fixed, 12345, 9));

  std::vector<T> slot_values(kSlots, 0), got = poisoned<T>(2 * kGrid);
  T fixed_value = static_cast<T>(77);
  TESSEL_ASSERT_OK(run(k, kGrid, slot_values.data(), got.data(), &fixed_value));
  for (int s = 0; s < kSlots; ++s) {
    int winners = 0;
    for (int p = s; p < kGrid; p += kSlots) {
      if (got[p] == 0) {
        ++winners;
        EXPECT_EQ(slot_values[s], static_cast<T>(p + 1)) << "slot " << s << " holds another program's id";
      } else {
        EXPECT_EQ(got[p], slot_values[s]) << "program " << p << " saw " << show(got[p]);
      }
    }
    EXPECT_EQ(winners, 1) << "slot " << s;
  }
  EXPECT_EQ(fixed_value, static_cast<T>(77));
  for (int p = 0; p < kGrid; ++p) EXPECT_EQ(got[kGrid + p], static_cast<T>(77)) << p;
}

// min, max, and, or, xor and exchange from every lane of many programs on
// one word each: the folds are order-independent; exchange hands each
// value on exactly once.
TYPED_TEST(AtomicIntTest, RmwOpsCombineEveryLane) {
  using T = TypeParam;
  constexpr DType kD = dtype_v<T>();
  constexpr int kBlock = 32, kGrid = 16, kLanes = kBlock * kGrid;
  constexpr AtomicOp kOps[] = {AtomicOp::kMin, AtomicOp::kMax, AtomicOp::kAnd,
                               AtomicOp::kOr,  AtomicOp::kXor, AtomicOp::kExchange};
  Rng rng;
  SCOPED_TRACE(rng.trace());
  KernelBuilder k("atomic_rmw");
  Value words = k.arg(ptr(kD), "words"), values = k.arg(ptr(kD), "values"), olds = k.arg(ptr(kD), "olds");
  Value lane = k.program_id() * kBlock + k.arange(0, kBlock);  // [32] i32
  Value v = load(values + lane);
  for (int j = 0; j < 6; ++j) {
    store(olds + j * kLanes + lane, atomic_rmw(kOps[j], words + j + k.zeros({kBlock}, i32), v));
  }

  std::vector<T> vs = make_vector<T>(kLanes, [&] { return random_int<T>(rng); });
  std::vector<T> init = make_vector<T>(6, [&] { return random_int<T>(rng); });
  init[2] = static_cast<T>(~T(0));  // and: start from all ones
  std::vector<T> ws = init, got = poisoned<T>(6 * kLanes);
  TESSEL_ASSERT_OK(run(k, kGrid, ws.data(), vs.data(), got.data()));

  T want[5] = {init[0], init[1], init[2], init[3], init[4]};
  for (T x : vs) {
    want[0] = std::min(want[0], x);
    want[1] = std::max(want[1], x);
    want[2] &= x;
    want[3] |= x;
    want[4] ^= x;
  }
  const char* names[] = {"min", "max", "and", "or", "xor"};
  for (int j = 0; j < 5; ++j) EXPECT_EQ(ws[j], want[j]) << names[j];
  // Exchange: the old values and the final word are the initial word and
  // every lane's value, each exactly once.
  std::vector<T> handed(got.begin() + 5 * kLanes, got.end()), given = vs;
  handed.push_back(ws[5]);
  given.push_back(init[5]);
  std::sort(handed.begin(), handed.end());
  std::sort(given.begin(), given.end());
  EXPECT_EQ(handed, given) << "exchange";
}

// Masked-off lanes of a tile atomic point past the end of the counters
// (into the inaccessible page): they must not touch memory, and return 0.
// A scalar atomic takes a scalar mask.
TEST(Atomics, MaskedLanesTouchNothingAndReturnZero) {
  constexpr int kBlock = 64, kGrid = 12;
  Rng rng;
  SCOPED_TRACE(rng.trace());
  KernelBuilder k("masked_atomics");
  Value ci = k.arg(ptr(i32), "ci"), cf = k.arg(ptr(f32), "cf"), cb = k.arg(ptr(bf16), "cb");
  Value pick = k.arg(ptr(i1), "pick"), oi = k.arg(ptr(i32), "oi"), of = k.arg(ptr(f32), "of");
  Value ob = k.arg(ptr(bf16), "ob"), scalar_olds = k.arg(ptr(i32), "scalar_olds");
  Value pid = k.program_id();
  Value lane = k.arange(0, kBlock), global = pid * kBlock + lane;  // [64] i32
  Value m = load(pick + global);
  Value slot = select(m, lane, lane + kBlock);  // masked-off lanes: past the end
  store(oi + global, atomic_rmw(AtomicOp::kAdd, ci + slot, pid + 1, m));
  store(of + global, atomic_rmw(AtomicOp::kAdd, cf + slot, 0.5, m));
  store(ob + global, atomic_rmw(AtomicOp::kAdd, cb + slot, 1.0, m));
  // Even programs add 1 to counter kBlock-2; odd ones are masked off and point past the end.
  store(scalar_olds + pid, atomic_rmw(AtomicOp::kAdd, ci + (kBlock - 2 + pid % 2 * 2), 1, pid % 2 == 0));

  GuardedArray<int32_t> counts(kBlock);
  GuardedArray<float> sums(kBlock);
  GuardedArray<BFloat16> bf_sums(kBlock);
  for (int i = 0; i < kBlock; ++i) {
    counts[i] = 0;
    sums[i] = 0;
    bf_sums[i] = BFloat16{0};
  }
  std::vector<uint8_t> picks(kGrid * kBlock);
  for (uint8_t& p : picks) p = rng.chance(0.5);
  std::vector<int32_t> got_i = poisoned<int32_t>(kGrid * kBlock), got_scalar = poisoned<int32_t>(kGrid);
  std::vector<float> got_f = poisoned<float>(kGrid * kBlock);
  std::vector<BFloat16> got_b = poisoned<BFloat16>(kGrid * kBlock);
  TESSEL_ASSERT_OK(run(k, kGrid, counts.data(), sums.data(), bf_sums.data(), static_cast<void*>(picks.data()),
                       got_i.data(), got_f.data(), got_b.data(), got_scalar.data()));

  for (int l = 0; l < kBlock; ++l) {
    int32_t want_count = 0, hits = 0;
    for (int p = 0; p < kGrid; ++p) {
      const int g = p * kBlock + l;
      if (!picks[g]) {
        ASSERT_EQ(got_i[g], 0) << "masked-off lane " << g;
        ASSERT_EQ(got_f[g], 0.0f) << "masked-off lane " << g;
        ASSERT_EQ(got_b[g].bits, 0) << "masked-off lane " << g;
      }
      want_count += picks[g] ? p + 1 : 0;
      hits += picks[g];
    }
    if (l == kBlock - 2) want_count += kGrid / 2;
    EXPECT_EQ(counts[l], want_count) << "counter " << l;
    EXPECT_EQ(sums[l], 0.5f * static_cast<float>(hits)) << "counter " << l;
    EXPECT_EQ(to_f64(bf_sums[l]), hits) << "counter " << l;
  }
  for (int p = 1; p < kGrid; p += 2) EXPECT_EQ(got_scalar[p], 0) << "masked-off scalar atomic, program " << p;
}

// A store over what the program read through the same pointer, transposed:
// every element read before any is overwritten (a load is not computed in
// the loop of a store that may write what it reads), as on a GPU.
TEST(LoadStore, AStoreOverWhatWasReadTransposedReadsItAllFirst) {
  constexpr int kN = 16;
  KernelBuilder k("transpose_in_place");
  Value p = k.arg(ptr(i32), "p");
  Value r = k.arange(0, kN), c = k.arange(0, kN);
  Value idx = broadcast_to(expand_dims(r, 1) * kN + expand_dims(c, 0), {kN, kN});
  store(p + idx, load(p + trans(idx)) * 2);
  std::vector<int32_t> m(kN * kN);
  for (int i = 0; i < kN * kN; ++i) m[i] = i;
  TESSEL_ASSERT_OK(run(k, 1, m.data()));
  for (int i = 0; i < kN; ++i) {
    for (int j = 0; j < kN; ++j) ASSERT_EQ(m[i * kN + j], 2 * (j * kN + i)) << "element " << i << ", " << j;
  }
}

}  // namespace
}  // namespace tessel::testing
