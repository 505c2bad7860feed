// The affine analysis's divisibility, alignment and constancy, the
// parameters worth specializing on, and the layout plan built on them.
#include "codegen/affine.h"

#include <algorithm>
#include <functional>
#include <random>
#include <vector>

#include "codegen/layout_plan.h"
#include "dsl/builder.h"
#include "dsl/ops.h"
#include "gtest/gtest.h"
#include "runtime/device.h"
#include "samples/kernels.h"

namespace tessel::codegen {
namespace {

constexpr uint64_t kAll = ~uint64_t{0};

// The op defining `v`.
const Op& def(const Kernel& k, Value v) { return k.ir().ops[k.ir().values[v.id()].def_op]; }

const Op& only_store(const Kernel& k) {
  for (const Op& o : k.ir().ops) {
    if (o.op == OpCode::kStore) return o;
  }
  ADD_FAILURE() << "no store";
  return k.ir().ops[0];
}

// z = x + y over a block of `block` elements of `d`, masked by offs < n.
struct VectorAdd {
  Kernel kernel;
  Value n, scaled_pid, offs, mask, x_ptrs, x_load;
};

VectorAdd vector_add(DType d, int block = 1024) {
  KernelBuilder k("add");
  Value x = k.arg(ptr(d), "x"), y = k.arg(ptr(d), "y"), z = k.arg(ptr(d), "z");
  Value n = k.arg(i32, "n");
  Value scaled_pid = k.program_id() * block;
  Value offs = scaled_pid + k.arange(0, block);  // [block] i32
  Value mask = offs < n;
  Value x_ptrs = x + offs;
  Value a = load(x_ptrs, mask, 0);
  store(z + offs, a + load(y + offs, mask, 0), mask);
  absl::StatusOr<Kernel> kernel = k.build();
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return {*kernel, n, scaled_pid, offs, mask, x_ptrs, a};
}

Specialization facts(uint64_t bits) { return {bits}; }

TEST(Divisibility, ComesFromFactsConstantsAndArithmetic) {
  VectorAdd v = vector_add(f32);
  AffineAnalysis with(v.kernel.ir(), facts(kAll)), without(v.kernel.ir(), facts(0));
  EXPECT_EQ(with.divisibility(v.n.id()), 16);
  EXPECT_EQ(without.divisibility(v.n.id()), 1);
  EXPECT_EQ(without.divisibility(v.scaled_pid.id()), 1024);  // program_id * 1024
}

TEST(Divisibility, OfLoopIndicesProductsAndPointerOffsets) {
  KernelBuilder k("rows");
  Value x = k.arg(ptr(f16), "x"), rows = k.arg(i32, "rows"), cols = k.arg(i32, "cols");
  Value row = k.program_id() + 0;
  Value product = row * cols;
  Value row_ptr = x + product;
  Value iv;
  k.for_range(0, rows, 32, [&](Value i) {
    iv = i;
    store(row_ptr + i, load(row_ptr + i));
  });
  absl::StatusOr<Kernel> kernel = k.build();
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  AffineAnalysis all(kernel->ir(), facts(kAll));
  AffineAnalysis no_cols(kernel->ir(), facts(0b011));
  EXPECT_EQ(all.divisibility(iv.id()), 32);          // 0 + k * 32
  EXPECT_EQ(all.divisibility(product.id()), 16);     // row * (16 k)
  EXPECT_EQ(no_cols.divisibility(product.id()), 1);
  EXPECT_EQ(all.alignment(x.id()), 16);
  EXPECT_EQ(all.alignment(row_ptr.id()), 16);         // min(16, 16 * 2 bytes)
  EXPECT_EQ(no_cols.alignment(row_ptr.id()), 2);      // an f16's own
  EXPECT_EQ(AffineAnalysis(kernel->ir(), facts(0)).alignment(x.id()), 2);
}

TEST(AlignedRun, NeedsTheAlignedPointerAndAnAlignedBase) {
  VectorAdd v = vector_add(f32);
  EXPECT_EQ(AffineAnalysis(v.kernel.ir(), facts(kAll)).aligned_run(v.x_ptrs.id()), 4);  // 16 bytes of f32
  EXPECT_EQ(AffineAnalysis(v.kernel.ir(), facts(0b1110)).aligned_run(v.x_ptrs.id()), 1);
  VectorAdd h = vector_add(f16);
  EXPECT_EQ(AffineAnalysis(h.kernel.ir(), facts(kAll)).aligned_run(h.x_ptrs.id()), 8);
  VectorAdd d = vector_add(f64);
  EXPECT_EQ(AffineAnalysis(d.kernel.ir(), facts(kAll)).aligned_run(d.x_ptrs.id()), 2);
}

TEST(AlignedRun, OfTwoDimensionalTilesNeedsRowStridesThatKeepTheAlignment) {
  for (int stride : {64, 62, 63}) {
    KernelBuilder k("tile");
    Value x = k.arg(ptr(f32), "x");
    Value rows = expand_dims(k.arange(0, 16), 1) * stride;  // [16, 1] i32
    Value cols = expand_dims(k.arange(0, 64), 0);           // [1, 64] i32
    Value ptrs = x + broadcast_to(rows, {16, 64}) + broadcast_to(cols, {16, 64});
    store(ptrs, load(ptrs));
    absl::StatusOr<Kernel> kernel = k.build();
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    AffineAnalysis a(kernel->ir(), facts(kAll));
    EXPECT_EQ(a.aligned_run(ptrs.id()), stride == 64 ? 4 : stride == 62 ? 2 : 1) << stride;
  }
}

TEST(AlignedRun, OfRowsAtARuntimeStrideFollowsTheStridesDivisibility) {
  // The row softmax's x + r * cols + c: no constant strides, but each row
  // of the tile rises by one from an offset that is a multiple of cols.
  absl::StatusOr<Kernel> softmax = samples::row_softmax_kernel(4, 64);
  ASSERT_TRUE(softmax.ok()) << softmax.status();
  const Op& load_op = [&]() -> const Op& {
    for (const Op& o : softmax->ir().ops) {
      if (o.op == OpCode::kLoad) return o;
    }
    return softmax->ir().ops[0];
  }();
  ASSERT_EQ(load_op.op, OpCode::kLoad);
  int ptrs = load_op.operands[0];
  const uint64_t x = 1, cols = 8;
  EXPECT_EQ(AffineAnalysis(softmax->ir(), facts(x | cols)).aligned_run(ptrs), 4);
  EXPECT_EQ(AffineAnalysis(softmax->ir(), facts(x | cols)).access_run(load_op), 4);
  EXPECT_EQ(AffineAnalysis(softmax->ir(), facts(x)).aligned_run(ptrs), 1);     // rows at any offset
  EXPECT_EQ(AffineAnalysis(softmax->ir(), facts(cols)).aligned_run(ptrs), 1);  // x aligned to 4 bytes only
}

TEST(AlignedRun, SurvivesWideningCastsButNotOthers) {
  // Gathered rows (a paged cache's slots, read from memory) widened to i64
  // before they scale: x + i64(slot * 64) + i64(c) keeps the 16-byte runs
  // of bf16 rows. A cast to a narrower type, or of signed values to an
  // unsigned one, may change values, and keeps nothing.
  for (DType to : {i64, i16, u64}) {
    KernelBuilder k("widened");
    Value x = k.arg(ptr(bf16), "x"), slots = k.arg(ptr(i32), "slots");
    Value slot = load(slots + k.arange(0, 8));
    Value row = cast(expand_dims(slot * 64, 1), to), c = cast(expand_dims(k.arange(0, 64), 0), to);
    Value ptrs = x + row + c;
    store(ptrs, load(ptrs));
    absl::StatusOr<Kernel> kernel = k.build();
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    SCOPED_TRACE(to.name());
    EXPECT_EQ(AffineAnalysis(kernel->ir(), facts(kAll)).aligned_run(ptrs.id()), to == i64 ? 8 : 1);
  }
}

TEST(AlignedRun, OfAPointerTileRisingAlongItsRowsThenOffsetByRows) {
  // (x + c) + r * cols: the pointer side rises, the offsets are constant
  // along each row; alignment counts in bytes on one side, elements on the
  // other.
  KernelBuilder k("rows_then_offsets");
  Value x = k.arg(ptr(f32), "x"), cols = k.arg(i32, "cols");
  // Rows of four f32: one 16-byte run each, so the pointer side's 16 bytes
  // of alignment must not be read as 16 elements, nor 4 elements as 4 bytes.
  Value c = broadcast_to(expand_dims(k.arange(0, 4), 0), {8, 4});
  Value r = broadcast_to(expand_dims(k.arange(0, 8), 1) * cols, {8, 4});
  Value ptrs = (x + c) + r;
  store(ptrs, load(ptrs));
  absl::StatusOr<Kernel> kernel = k.build();
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(AffineAnalysis(kernel->ir(), facts(0b11)).aligned_run(ptrs.id()), 4);
  EXPECT_EQ(AffineAnalysis(kernel->ir(), facts(0b01)).aligned_run(ptrs.id()), 1);
  EXPECT_EQ(AffineAnalysis(kernel->ir(), facts(0b10)).aligned_run(ptrs.id()), 1);
}

// Random offset tiles built from aranges along either axis, parameters
// (multiples of 16 where the facts say so), constants, sums, differences
// and products with scalars, evaluated on the host: every run the analysis
// claims holds in the values.
TEST(Runs, ClaimsHoldInRandomOffsetTiles) {
  std::mt19937 gen(std::random_device{}());
  unsigned seed = gen();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  gen.seed(seed);
  absl::StatusOr<Device> host = Device::open("host:1");
  ASSERT_TRUE(host.ok()) << host.status();
  for (int trial = 0; trial < 100; ++trial) {
    const int rows = 1 << (gen() % 4), cols = 1 << (gen() % 7);
    KernelBuilder k("offsets");
    Value out = k.arg(ptr(i32), "out");
    std::vector<Value> params = {k.arg(i32, "p"), k.arg(i32, "q")};
    // A leaf: a [rows, cols] tile.
    auto leaf = [&]() -> Value {
      int start = static_cast<int>(gen() % 3) * static_cast<int>(gen() % 9);
      switch (gen() % 4) {
        case 0:
          return broadcast_to(expand_dims(k.arange(start, start + cols), 0), {rows, cols});
        case 1:
          return broadcast_to(expand_dims(k.arange(start, start + rows), 1), {rows, cols});
        case 2:
          return broadcast_to(k.constant(static_cast<int>(gen() % 64), i32), {rows, cols});
        default:
          return broadcast_to(params[gen() % 2] * static_cast<int>(1 + gen() % 4), {rows, cols});
      }
    };
    std::function<Value(int)> tile = [&](int depth) -> Value {
      if (depth == 0 || gen() % 3 == 0) return leaf();
      Value a = tile(depth - 1);
      switch (gen() % 6) {
        case 0:
        case 1:
          return a + tile(depth - 1);
        case 2:
          return a - tile(depth - 1);
        case 3:
          return a * params[gen() % 2];
        default:  // rows at a runtime stride, as 2-D kernels address them
          return expand_dims(k.arange(0, rows), 1) * params[gen() % 2] + a;
      }
    };
    Value v = tile(3);
    store(out + expand_dims(k.arange(0, rows), 1) * cols + expand_dims(k.arange(0, cols), 0), v);
    absl::StatusOr<Kernel> kernel = k.build();
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    const uint64_t known = gen() % 8;  // bits 1, 2: p, q are multiples of 16
    int32_t p = static_cast<int32_t>(gen() % 50) * ((known & 2) ? 16 : 1);
    int32_t q = static_cast<int32_t>(gen() % 50) * ((known & 4) ? 16 : 1);
    Runs r = AffineAnalysis(kernel->ir(), facts(known & 6)).runs(v.id());
    absl::StatusOr<Function> fn = host->compile(*kernel);
    ASSERT_TRUE(fn.ok()) << fn.status();
    std::vector<int32_t> got(rows * cols);
    ASSERT_TRUE(fn->launch({}, got.data(), p, q).ok());
    SCOPED_TRACE(::testing::Message() << "trial " << trial << ": [" << rows << ", " << cols << "] p " << p << " q "
                                      << q << " runs " << r.contiguous << "/" << r.constant << "/" << r.divisor);
    ASSERT_EQ(cols % r.contiguous, 0);
    ASSERT_EQ(cols % r.constant, 0);
    for (int i = 0; i < rows; ++i) {
      for (int j = 0; j < cols; ++j) {
        int32_t e = got[i * cols + j];
        int start_c = j / r.contiguous * r.contiguous, start_k = j / r.constant * r.constant;
        ASSERT_EQ(e, got[i * cols + start_c] + (j - start_c)) << "not contiguous at " << i << ", " << j;
        ASSERT_EQ(e, got[i * cols + start_k]) << "not constant at " << i << ", " << j;
        if (j == start_c) {
          ASSERT_EQ(e % std::min<int64_t>(r.divisor, int64_t{1} << 30), 0) << "not divisible at " << i << ", " << j;
        }
      }
    }
  }
}

TEST(Constancy, OfBoundsChecksFollowsTheBoundsDivisibility) {
  KernelBuilder k("masks");
  Value n = k.arg(i32, "n");
  Value offs = k.program_id() * 256 + k.arange(0, 256);
  Value lt = offs < n, le_minus_one = offs <= n - 1, le = offs <= n, gt = n > offs, ge = offs >= n;
  Value eq = offs == n, both = lt & (k.program_id() < 3);
  Value rowwise = broadcast_to(expand_dims(k.arange(0, 16) < n, 1), {16, 32});
  absl::StatusOr<Kernel> kernel = k.build();
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  AffineAnalysis a(kernel->ir(), facts(kAll)), none(kernel->ir(), facts(0));
  EXPECT_EQ(a.constancy(lt.id()), 16);
  EXPECT_EQ(a.constancy(le_minus_one.id()), 16);
  EXPECT_EQ(a.constancy(le.id()), 1);
  EXPECT_EQ(a.constancy(gt.id()), 16);
  EXPECT_EQ(a.constancy(ge.id()), 16);
  EXPECT_EQ(a.constancy(eq.id()), 1);
  EXPECT_EQ(a.constancy(both.id()), 16);
  EXPECT_EQ(none.constancy(lt.id()), 1);
  EXPECT_EQ(none.constancy(both.id()), 1);
  EXPECT_EQ(none.constancy(rowwise.id()), 32);  // one value per row, whatever n is
}

// Offsets with no affine form (a group's columns: (i % groups) * 128 + j,
// as quantize_groups_kernel computes them) against a bound: the runs of the
// rising side and the bound's divisibility say how long the mask holds.
TEST(Constancy, OfComparesWithoutAffineFormsFollowsTheRuns) {
  KernelBuilder k("groups");
  Value n = k.arg(i32, "n"), groups = k.arg(i32, "groups");
  Value index = k.program_id() * 8 + k.arange(0, 8);
  Value c = expand_dims(index % groups * 128, 1) + expand_dims(k.arange(0, 128), 0);  // [8, 128]
  Value lt = c<n, le = c <= n, gt = n> c, ge = c >= n, flipped_le = n <= c, eq = c == n;
  absl::StatusOr<Kernel> kernel = k.build();
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  AffineAnalysis a(kernel->ir(), facts(kAll)), none(kernel->ir(), facts(0));
  ASSERT_FALSE(a.affine(c.id()).has_value());
  EXPECT_EQ(a.constancy(lt.id()), 16);
  EXPECT_EQ(a.constancy(le.id()), 1);
  EXPECT_EQ(a.constancy(gt.id()), 16);
  EXPECT_EQ(a.constancy(ge.id()), 16);
  EXPECT_EQ(a.constancy(flipped_le.id()), 16);
  EXPECT_EQ(a.constancy(eq.id()), 1);
  EXPECT_EQ(none.constancy(lt.id()), 1);
}

// The same claims, checked against the masks the host computes.
TEST(Constancy, ClaimsOfComparesWithoutAffineFormsHold) {
  std::mt19937 gen(std::random_device{}());
  unsigned seed = gen();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  gen.seed(seed);
  absl::StatusOr<Device> host = Device::open("host:1");
  ASSERT_TRUE(host.ok()) << host.status();
  for (int trial = 0; trial < 60; ++trial) {
    const int rows = 1 << (gen() % 4), cols = 1 << (gen() % 7), step = 1 << (gen() % 8);
    const int start = static_cast<int>(gen() % 3) * static_cast<int>(gen() % 9);
    const int op = static_cast<int>(gen() % 5);
    KernelBuilder k("masks");
    Value out = k.arg(ptr(i32), "out");
    Value p = k.arg(i32, "p"), q = k.arg(i32, "q");
    Value x = expand_dims(k.arange(0, rows) % p * step, 1) + expand_dims(k.arange(start, start + cols), 0);
    Value bound = broadcast_to(q, {rows, cols});
    Value mask = op == 0 ? x < bound : op == 1 ? x >= bound : op == 2 ? bound > x : op == 3 ? bound <= x : x <= bound;
    store(out + expand_dims(k.arange(0, rows), 1) * cols + expand_dims(k.arange(0, cols), 0), cast(mask, i32));
    absl::StatusOr<Kernel> kernel = k.build();
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    const uint64_t known = gen() % 2 == 0 ? 4 : 0;  // bit 2: q is a multiple of 16
    const int32_t pv = 1 + static_cast<int32_t>(gen() % 5);
    const int32_t qv = static_cast<int32_t>(gen() % 40) * (known != 0 ? 16 : 1) + (known != 0 ? 0 : 1);
    const int64_t run = AffineAnalysis(kernel->ir(), facts(known)).constancy(mask.id());
    absl::StatusOr<Function> fn = host->compile(*kernel);
    ASSERT_TRUE(fn.ok()) << fn.status();
    std::vector<int32_t> got(rows * cols);
    ASSERT_TRUE(fn->launch({}, got.data(), pv, qv).ok());
    SCOPED_TRACE(::testing::Message() << "trial " << trial << ": [" << rows << ", " << cols << "] step " << step
                                      << " start " << start << " op " << op << " p " << pv << " q " << qv << " run "
                                      << run);
    ASSERT_EQ(cols % std::min<int64_t>(run, cols), 0);
    for (int i = 0; i < rows; ++i) {
      for (int j = 0; j < cols; ++j) {
        const int first = j / std::min<int64_t>(run, cols) * std::min<int64_t>(run, cols);
        ASSERT_EQ(got[i * cols + j], got[i * cols + first]) << "not constant at " << i << ", " << j;
      }
    }
  }
}

TEST(AccessRun, IsSixteenBytesWhereEverythingLinesUp) {
  for (DType d : {f32, f16, bf16, f64, i8}) {
    VectorAdd v = vector_add(d);
    const Op& load_x = def(v.kernel, v.x_load);
    const Op& store_z = only_store(v.kernel);
    AffineAnalysis all(v.kernel.ir(), facts(kAll));
    EXPECT_EQ(all.access_run(load_x), 16 / d.bytes()) << d.name();
    EXPECT_EQ(all.access_run(store_z), 16 / d.bytes()) << d.name();
    EXPECT_EQ(AffineAnalysis(v.kernel.ir(), facts(0b0111)).access_run(load_x), 1) << "n not divisible";
    EXPECT_EQ(AffineAnalysis(v.kernel.ir(), facts(0b1011)).access_run(store_z), 1) << "z unaligned";
    EXPECT_EQ(AffineAnalysis(v.kernel.ir(), facts(0b1011)).access_run(load_x), 16 / d.bytes());
  }
}

TEST(Specializable, NamesTheParametersAccessesCanUse) {
  VectorAdd v = vector_add(f32);
  EXPECT_EQ(specializable(v.kernel.ir()).multiple_of_16, 0b1111u);

  KernelBuilder k("scaled");
  Value x = k.arg(ptr(f32), "x"), seed = k.arg(i32, "seed"), flag = k.arg(ptr(i32), "flag");
  Value offs = k.program_id() * 128 + k.arange(0, 128);
  store(x + offs, load(x + offs) * cast(seed, f32));
  store(flag, seed);  // a scalar access: nothing to vectorize
  absl::StatusOr<Kernel> scaled = k.build();
  ASSERT_TRUE(scaled.ok()) << scaled.status();
  EXPECT_EQ(specializable(scaled->ir()).multiple_of_16, 0b001u);

  KernelBuilder t("copy");
  Value src = t.tensor_map(bf16, {64, 64}, "src"), dst = t.tensor_map(bf16, {64, 64}, "dst");
  tma_store(dst, {t.program_id(), t.program_id()}, tma_load(src, {t.program_id(), t.program_id()}));
  absl::StatusOr<Kernel> copy = t.build();
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ(specializable(copy->ir()).multiple_of_16, 0u);
}

// Elements per thread and step of each value's planned layout.
std::vector<int> per_thread(const Kernel& kernel, uint64_t fact_bits) {
  std::vector<int> out;
  for (const Blocking& k : plan_blocking(kernel.ir(), AffineAnalysis(kernel.ir(), facts(fact_bits)), 128, 32)) {
    out.push_back(k.per_thread);
  }
  return out;
}

TEST(LayoutPlan, GivesEachGroupTheRunItsAccessesWant) {
  VectorAdd v = vector_add(f32);
  std::vector<int> all = per_thread(v.kernel, kAll);
  for (Value t : {v.offs, v.mask, v.x_ptrs, v.x_load}) EXPECT_EQ(all[t.id()], 4);
  EXPECT_EQ(all[v.n.id()], 1);  // a scalar
  // x alone unaligned: the group still takes y's and z's runs.
  EXPECT_EQ(per_thread(v.kernel, 0b1110)[v.x_load.id()], 4);
  EXPECT_EQ(per_thread(v.kernel, 0b0111)[v.x_load.id()], 1);
  VectorAdd h = vector_add(bf16);
  EXPECT_EQ(per_thread(h.kernel, kAll)[h.x_load.id()], 8);
  // Every thread keeps a whole run: 256 elements over 128 threads is 2 each.
  VectorAdd small = vector_add(f32, 256);
  EXPECT_EQ(per_thread(small.kernel, kAll)[small.x_load.id()], 2);
}

// A [rows, cols] f32 tile loaded, reduced along `axis` and broadcast back.
struct Reduced {
  Kernel kernel;
  Value tile;
};
Reduced reduced(int64_t rows, int64_t cols, int axis) {
  KernelBuilder k("reduced");
  Value x = k.arg(ptr(f32), "x"), y = k.arg(ptr(f32), "y");
  Value offs = expand_dims(k.arange(0, rows), 1) * cols + expand_dims(k.arange(0, cols), 0);
  Value v = load(x + offs);
  store(y + offs, v - expand_dims(sum(v, axis), axis));
  absl::StatusOr<Kernel> kernel = k.build();
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return {*std::move(kernel), v};
}

Blocking planned(const Reduced& r) {
  return plan_blocking(r.kernel.ir(), AffineAnalysis(r.kernel.ir(), facts(kAll)), 128, 32)[r.tile.id()];
}

TEST(LayoutPlan, KeepsReducedRowsWithinWarps) {
  // Four rows of 1024 over four warps: a warp per row, runs of four.
  EXPECT_EQ(planned(reduced(4, 1024, 1)), (Blocking{.per_thread = 4, .inner = 1024, .threads_inner = 32}));
  // Rows of 32 in runs of four: eight threads per row, several rows per warp.
  EXPECT_EQ(planned(reduced(64, 32, 1)), (Blocking{.per_thread = 4, .inner = 32, .threads_inner = 8}));
  // Two rows: two warps per row keep every thread busy.
  EXPECT_EQ(planned(reduced(2, 1024, 1)), (Blocking{.per_thread = 4, .inner = 1024, .threads_inner = 64}));
  // One row, or a reduction down the columns: the whole tile over all threads.
  EXPECT_EQ(planned(reduced(1, 1024, 1)), (Blocking{.per_thread = 4}));
  EXPECT_EQ(planned(reduced(4, 1024, 0)), (Blocking{.per_thread = 4}));
}

}  // namespace
}  // namespace tessel::codegen
