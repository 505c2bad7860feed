// Golden tests of the printed kernel IR (the JIT cache key) and its hash.
// Each op is built in its own statement so that C++'s unspecified order of
// argument evaluation cannot reorder the IR.
#include "dsl/printer.h"

#include "dsl/builder.h"
#include "dsl/ops.h"
#include "gtest/gtest.h"

namespace tessel {
namespace {

Kernel Build(KernelBuilder& k) {
  absl::StatusOr<Kernel> kernel = k.build();
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return kernel.ok() ? *kernel : Kernel();
}

Kernel VectorAdd() {
  KernelBuilder k("vadd");
  Value x = k.arg(ptr(f32), "x");
  Value y = k.arg(ptr(f32), "y");
  Value out = k.arg(ptr(f32), "out");
  Value n = k.arg(i32, "n");
  Value base = k.program_id(0) * 64;
  Value offs = base + k.arange(0, 64);
  Value mask = offs < n;
  Value xs = load(x + offs, mask, 0.0);
  Value ys = load(y + offs, mask, 0.0);
  Value total = xs + ys;
  Value out_ptrs = out + offs;
  store(out_ptrs, total, mask);
  return Build(k);
}

constexpr char kVectorAdd[] = R"(kernel vadd(%0 x: ptr<f32>, %1 y: ptr<f32>, %2 out: ptr<f32>, %3 n: i32) {
  %4 = program_id [0] : i32
  %5 = constant [64] : i32
  %6 = mul %4, %5 : i32
  %7 = arange [0,64] : tile<i32>[64]
  %8 = splat %6 : tile<i32>[64]
  %9 = add %8, %7 : tile<i32>[64]
  %10 = splat %3 : tile<i32>[64]
  %11 = lt %9, %10 : tile<i1>[64]
  %12 = splat %0 : tile<ptr<f32>>[64]
  %13 = ptr_add %12, %9 : tile<ptr<f32>>[64]
  %14 = constant 0 : f32
  %15 = splat %14 : tile<f32>[64]
  %16 = load %13, %11, %15 : tile<f32>[64]
  %17 = splat %1 : tile<ptr<f32>>[64]
  %18 = ptr_add %17, %9 : tile<ptr<f32>>[64]
  %19 = constant 0 : f32
  %20 = splat %19 : tile<f32>[64]
  %21 = load %18, %11, %20 : tile<f32>[64]
  %22 = add %16, %21 : tile<f32>[64]
  %23 = splat %2 : tile<ptr<f32>>[64]
  %24 = ptr_add %23, %9 : tile<ptr<f32>>[64]
  store %24, %22, %11
}
)";

TEST(Printer, VectorAdd) { EXPECT_EQ(VectorAdd().str(), kVectorAdd); }

// `acc` changes in the loop and stays carried; `limit` does not and is
// replaced by its initial value.
Kernel Loop(bool with_unchanged_var) {
  KernelBuilder k("loop");
  Value out = k.arg(ptr(f32), "out");
  Value n = k.arg(i32, "n");
  Var acc = k.var(0.0);
  Var limit = k.var(n);
  k.for_range(0, n, 1, [&](Value i) {
    Value scaled = with_unchanged_var ? i * limit : i * n;
    Value f = cast(scaled, f32);
    acc = acc + f;
  });
  store(out, acc);
  return Build(k);
}

constexpr char kLoop[] = R"(kernel loop(%0 out: ptr<f32>, %1 n: i32) {
  %2 = constant 0 : f32
  %3 = constant [0] : i32
  %4 = constant [1] : i32
  %5 = for %3, %1, %4, %2 : f32 {
  ^(%6: i32, %7: f32):
    %8 = mul %6, %1 : i32
    %9 = cast %8 : f32
    %10 = add %7, %9 : f32
    yield %10
  }
  store %0, %5
}
)";

TEST(Printer, LoopCarriesOnlyTheVarItChanges) { EXPECT_EQ(Loop(true).str(), kLoop); }

TEST(Printer, NumberingDoesNotDependOnDroppedValues) {
  Kernel with = Loop(true);
  Kernel without = Loop(false);
  EXPECT_EQ(with.str(), without.str());
  EXPECT_EQ(with.hash(), without.hash());
}

// `v` differs between the branches and becomes the if's result; `w` is
// never assigned, so the if does not yield it.
Kernel Branch(int else_value) {
  KernelBuilder k("branch");
  Value out = k.arg(ptr(i32), "out");
  Value n = k.arg(i32, "n");
  Var v = k.var(n);
  Var w = k.var(n);
  Value positive = n > 0;
  k.if_(
      positive, [&] { v = n * 2; }, [&] { v = else_value; });
  Value total = v + w;
  store(out, total);
  return Build(k);
}

constexpr char kBranch[] = R"(kernel branch(%0 out: ptr<i32>, %1 n: i32) {
  %2 = constant [0] : i32
  %3 = gt %1, %2 : i1
  %4 = if %3 : i32 {
    %5 = constant [2] : i32
    %6 = mul %1, %5 : i32
    yield %6
  } else {
    %7 = constant [7] : i32
    yield %7
  }
  %8 = add %4, %1 : i32
  store %0, %8
}
)";

TEST(Printer, IfWithAVarResult) { EXPECT_EQ(Branch(7).str(), kBranch); }

TEST(Printer, IfWithoutResults) {
  KernelBuilder k("guard");
  Value out = k.arg(ptr(i32), "out");
  Value n = k.arg(i32, "n");
  Value positive = n > 0;
  k.if_(positive, [&] { store(out, n); });
  EXPECT_EQ(Build(k).str(), R"(kernel guard(%0 out: ptr<i32>, %1 n: i32) {
  %2 = constant [0] : i32
  %3 = gt %1, %2 : i1
  if %3 {
    store %0, %1
    yield
  } else {
    yield
  }
}
)");
}

TEST(Printer, ConstantsOfEveryKind) {
  KernelBuilder k("constants");
  k.constant(0.1, f64);
  k.constant(-3, i8);
  k.constant(1, i1);
  k.constant(2.5, f16);
  k.constant(3, f32);
  k.full({4}, 1.5, bf16);
  EXPECT_EQ(Build(k).str(), R"(kernel constants() {
  %0 = constant 0.10000000000000001 : f64
  %1 = constant [-3] : i8
  %2 = constant [1] : i1
  %3 = constant 2.5 : f16
  %4 = constant 3 : f32
  %5 = constant 1.5 : bf16
  %6 = splat %5 : tile<bf16>[4]
}
)");
}

TEST(Printer, TmaViewsReductionsScansSortsAndAtomics) {
  KernelBuilder k("misc");
  Value a = k.tensor_map(bf16, {64, 64}, "a", Swizzle::k128B);
  TriggeredView view = k.triggered_view("plan");
  Value counter = k.arg(ptr(i32), "counter");
  Value tile = tma_load(a, {0, 64});
  Value t = trans(tile);
  Value wide = cast(t, f32);
  max(wide, 1);
  cumsum(wide, 0, /*reverse=*/true);
  cummin(wide, 1);
  sort(wide, 1, /*descending=*/true);
  argsort(wide, 0);
  view.publish(0);
  atomic_add(counter, 1);
  atomic_rmw(AtomicOp::kMax, counter, 2, MemoryOrder::kRelaxed);
  atomic_cas(counter, 0, 3, MemoryOrder::kAcquire);
  EXPECT_EQ(Build(k).str(),
            R"(kernel misc(%0 a: tensor_map<bf16>[64,64] swizzle=128B, %1 plan: triggered_view, %2 counter: ptr<i32>) {
  %3 = constant [0] : i32
  %4 = constant [64] : i32
  %5 = tma_load %0, %3, %4 : tile<bf16>[64,64]
  %6 = trans %5 [1,0] : tile<bf16>[64,64]
  %7 = cast %6 : tile<f32>[64,64]
  %8 = reduce %7 axis=1 max : tile<f32>[64]
  %9 = scan %7 axis=0 add reverse : tile<f32>[64,64]
  %10 = scan %7 axis=1 min : tile<f32>[64,64]
  %11 = sort %7 axis=1 descending : tile<f32>[64,64]
  %12 = sort %7 axis=0 positions : tile<i32>[64,64]
  %13 = constant [0] : i32
  publish %1, %13
  %14 = constant [1] : i32
  %15 = atomic %2, %14 add acq_rel : i32
  %16 = constant [2] : i32
  %17 = atomic %2, %16 max relaxed : i32
  %18 = constant [0] : i32
  %19 = constant [3] : i32
  %20 = atomic_cas %2, %18, %19 acquire : i32
}
)");
}

TEST(Printer, PrintIsTheKernelText) {
  Kernel k = VectorAdd();
  EXPECT_EQ(print(k.ir()), k.str());
}

TEST(Hash, SameKernelBuiltTwiceHasTheSameHash) {
  EXPECT_EQ(VectorAdd().hash(), VectorAdd().hash());
  EXPECT_EQ(Branch(7).hash(), Branch(7).hash());
}

TEST(Hash, OneConstantChangesTheHash) {
  EXPECT_NE(Branch(7).str(), Branch(8).str());
  EXPECT_NE(Branch(7).hash(), Branch(8).hash());
}

TEST(Hash, IsTheFnv1a64OfTheText) {
  EXPECT_EQ(stable_hash(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(stable_hash("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(stable_hash("foobar"), 0x85944171f73967e8ull);
  KernelBuilder empty("empty");
  Kernel k = Build(empty);
  EXPECT_EQ(k.str(), "kernel empty() {\n}\n");
  EXPECT_EQ(k.hash(), 0x0c6d4f0a43eb49b8ull);
  EXPECT_EQ(VectorAdd().hash(), stable_hash(kVectorAdd));
}

}  // namespace
}  // namespace tessel
