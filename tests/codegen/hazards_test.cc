// Where a program's threads meet so that its pointer accesses keep program
// order (codegen/hazards.h): after a store, before a load or store through
// the same parameter; not between parameters; around loops and branches;
// and in none of the samples' kernels, whose speed a barrier would cost.
#include "codegen/hazards.h"

#include <vector>

#include "dsl/builder.h"
#include "dsl/ops.h"
#include "gtest/gtest.h"
#include "samples/kernels.h"

namespace tessel::codegen {
namespace {

Kernel built(KernelBuilder& k) {
  absl::StatusOr<Kernel> kernel = k.build();
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return *kernel;
}

// The opcodes of the ops a barrier goes before, in program order.
std::vector<OpCode> barriers_before(const Kernel& k) {
  std::vector<OpCode> ops;
  for (int id : hazard_barriers(k.ir(), pointer_parameters(k.ir()))) ops.push_back(k.ir().ops[id].op);
  return ops;
}

Value square_index(KernelBuilder& k, bool transposed) {
  Value r = k.arange(0, 32), c = k.arange(0, 32);
  return transposed ? expand_dims(r, 0) * 32 + expand_dims(c, 1) : expand_dims(r, 1) * 32 + expand_dims(c, 0);
}

TEST(Hazards, ALoadOfWhatTheProgramStoredAndAStoreOverWhatItRead) {
  KernelBuilder k("k");
  Value p = k.arg(ptr(f32), "p"), q = k.arg(ptr(f32), "q");
  store(p + square_index(k, false), k.zeros({32, 32}, f32));
  Value back = load(p + square_index(k, true));  // after p's store
  store(q + square_index(k, false), back);       // q: nothing of q touched before
  store(p + square_index(k, false), back + 1);   // over what was read from p
  EXPECT_EQ(barriers_before(built(k)), (std::vector<OpCode>{OpCode::kLoad, OpCode::kStore}));
}

TEST(Hazards, ValuesALoopNoLongerCarriesAreSkipped) {
  // The builder carries every live Var; drop_unchanged_carried drops the
  // ones a body leaves alone but keeps their values in ir.values, which
  // name a result and an argument the loop no longer has (here past the
  // end of the ones it keeps: the sanitizer build catches a read there). A
  // copy of the IR, which loads moved ahead start from, holds no slack
  // past its vectors' ends.
  KernelBuilder k("k");
  Value x = k.arg(ptr(f32), "x");
  Var sum = k.var(k.constant(0.0, f32)), unchanged = k.var(x);
  [[maybe_unused]] Var also = k.var(x + 1);
  k.for_range(0, 8, 1, [&](Value i) { sum = sum + load(Value(unchanged) + i); });
  store(x, sum);
  const KernelIR copy = built(k).ir();
  const std::vector<int> params = pointer_parameters(copy);
  ASSERT_EQ(params.size(), copy.values.size());
  EXPECT_EQ(params[copy.params[0].value], copy.params[0].value);
}

TEST(Hazards, AccessesThroughDifferentParametersNeedNone) {
  KernelBuilder k("k");
  Value x = k.arg(ptr(f32), "x"), y = k.arg(ptr(f32), "y");
  Value idx = square_index(k, false);
  k.for_range(0, 8, 1, [&](Value i) {
    Value ps = x + i * 1024 + idx;
    store(y + i * 1024 + square_index(k, true), load(ps));
  });
  EXPECT_TRUE(barriers_before(built(k)).empty());
}

// An update in place inside a loop: its store follows its load in the
// iteration; iterations are taken to touch other elements, so the next
// load is not ordered after it. A load after the loop is, and the store
// over what that load read.
TEST(Hazards, ALoopsAccessesAreOrderedWithinAnIterationAndWithWhatFollows) {
  KernelBuilder k("k");
  Value p = k.arg(ptr(f32), "p");
  Value idx = k.arange(0, 128);
  k.for_range(0, 8, 1, [&](Value i) {
    Value at = p + i * 128 + idx;
    store(at, load(at) * 2);
  });
  store(p + 1024 + idx, load(p + (127 - idx)));
  EXPECT_EQ(barriers_before(built(k)), (std::vector<OpCode>{OpCode::kStore, OpCode::kLoad, OpCode::kStore}));
}

TEST(Hazards, AStoreInABranchReachesTheLoadAfterIt) {
  KernelBuilder k("k");
  Value p = k.arg(ptr(f32), "p"), flag = k.arg(i32, "flag");
  Value idx = k.arange(0, 128);
  k.if_(flag > 0, [&] { store(p + idx, k.zeros({128}, f32)); });
  store(p + 128 + idx, load(p + (127 - idx)) + 1);
  EXPECT_EQ(barriers_before(built(k)), (std::vector<OpCode>{OpCode::kLoad, OpCode::kStore}));
}

// A pointer chosen between parameters may be either's; one carried through
// a loop keeps its parameter while the loop only adds to it.
TEST(Hazards, PointersOfEitherParameterAndCarriedOnes) {
  KernelBuilder k("k");
  Value x = k.arg(ptr(f32), "x"), y = k.arg(ptr(f32), "y"), z = k.arg(ptr(f32), "z");
  Value flag = k.arg(i32, "flag");
  Value idx = k.arange(0, 64);
  Var out = k.var(y);
  k.for_range(0, 4, 1, [&](Value) {
    store(out + idx, load(x + idx));
    out = out + 64;
  });
  store(z + idx, load(x + (63 - idx)));
  EXPECT_TRUE(barriers_before(built(k)).empty());
  store(select(flag > 0, x, z) + idx, k.zeros({64}, f32));  // may be over x's elements read before
  EXPECT_EQ(barriers_before(built(k)), std::vector<OpCode>{OpCode::kStore});
}

// A scalar atomic meets the program's threads itself (dsl/ops.h's
// MemoryOrder); a relaxed one after a store does not.
TEST(Hazards, ScalarAtomicsMeetTheThreadsThemselves) {
  KernelBuilder k("k");
  Value p = k.arg(ptr(i32), "p");
  Value idx = k.arange(0, 128);
  store(p + 1 + idx, idx);
  atomic_add(p, 1);
  store(p + 1 + idx, load(p + (128 - idx)));
  EXPECT_EQ(barriers_before(built(k)), std::vector<OpCode>{OpCode::kStore});  // only the WAR at the end
  atomic_add(p, 1, MemoryOrder::kRelaxed);  // after a store to p: one thread reads p[0] after others wrote
  EXPECT_EQ(barriers_before(built(k)), (std::vector<OpCode>{OpCode::kStore, OpCode::kAtomic}));
}

TEST(Hazards, TheSamplesKernelsNeedNone) {
  std::vector<absl::StatusOr<Kernel>> kernels = {samples::vector_add_kernel(),
                                                 samples::softmax_kernel(),
                                                 samples::row_softmax_kernel(),
                                                 samples::layer_norm_kernel({}),
                                                 samples::rms_norm_kernel({}, bf16),
                                                 samples::matrix_reduce_kernel(0, samples::Reduction::kSum, {}),
                                                 samples::tile_copy_kernel(),
                                                 samples::tile_transpose_kernel(),
                                                 samples::matmul_kernel(),
                                                 samples::gemm_kernel({.bias_gelu = true, .warp_specialize = true}),
                                                 samples::gemm_kernel({.split_k = 2}),
                                                 samples::attention_kernel({}),
                                                 samples::attention_kernel({.causal = true}),
                                                 samples::attention_kernel({.bm = 64, .warp_specialize = true}),
                                                 samples::attention_kernel({.lse = true}),
                                                 samples::attention_bwd_delta_kernel({}),
                                                 samples::attention_bwd_kernel({.causal = true}),
                                                 samples::allgather_producer_kernel(),
                                                 samples::allgather_check_kernel()};
  for (const absl::StatusOr<Kernel>& k : kernels) {
    ASSERT_TRUE(k.ok()) << k.status();
    EXPECT_TRUE(hazard_barriers(k->ir(), pointer_parameters(k->ir())).empty()) << k->name();
  }
}

}  // namespace
}  // namespace tessel::codegen
