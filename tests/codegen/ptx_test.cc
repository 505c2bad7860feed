// PTX from the NVPTX target, checked with LLVM's FileCheck and assembled
// with ptxas for sm_90a when the CUDA toolkit is present.
#include <regex>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "codegen/compiler.h"
#include "dsl/ops.h"
#include "dsl/random.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "samples/kernels.h"
#include "tests/codegen/ptx_test_util.h"

namespace tessel {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

Kernel tile_copy(Swizzle swizzle = Swizzle::kNone) {
  KernelBuilder k("tile_copy");
  Value src = k.tensor_map(bf16, {64, 64}, "src", swizzle);
  Value dst = k.tensor_map(bf16, {64, 64}, "dst", swizzle);
  Value m = k.arg(i32, "m"), n = k.arg(i32, "n");
  Value tiles_n = cdiv(n, 64);
  k.for_each_tile(cdiv(m, 64) * tiles_n, [&](Value t) {
    Value row = t / tiles_n * 64, col = t % tiles_n * 64;
    tma_store(dst, {row, col}, tma_load(src, {row, col}));
  });
  return *k.build();
}

TEST(Ptx, TensorMapsArePassedByValueAsGridConstants) {
  if (!have_tool(TESSEL_FILECHECK)) GTEST_SKIP() << "FileCheck not found (it comes with llvm-19-dev)";
  absl::StatusOr<DeviceCode> code = compile_ptx(tile_copy(), {});
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(code->entry, "tile_copy");
  EXPECT_EQ(code->threads, 128);
  EXPECT_EQ(code->error_symbol, "tessel_error");
  EXPECT_GE(code->shared_bytes, 64 * 64 * 2);
  // LLVM 19 copies a byval parameter without the grid_constant annotation to
  // __local_depot, and TMA would then read the wrong memory.
  EXPECT_EQ(file_check(code->binary, R"(
CHECK: .target sm_90a
CHECK: .entry tile_copy(
CHECK: .param .align 64 .b8 tile_copy_param_0[128]
CHECK: .param .align 64 .b8 tile_copy_param_1[128]
CHECK: .maxntid 128
CHECK-NOT: __local_depot
CHECK: mbarrier.init.shared::cta.b64
CHECK: cvta.param.u64
CHECK: cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
CHECK: mbarrier.try_wait.parity.shared::cta.b64
CHECK: fence.proxy.async.shared::cta
CHECK: cp.async.bulk.tensor.2d.global.shared::cta.bulk_group
CHECK: cp.async.bulk.wait_group.read 0
CHECK: cp.async.bulk.wait_group 0
)"),
            0);
  expect_ptxas_accepts(code->binary);
}

// A loop whose body loads and stores boxes is pipelined (a ring of three
// stages: two loads issued before the loop, one ahead in it); one that also
// takes an atomic or waits on a gate is not, since a load issued ahead would
// pass the ordering they give.
TEST(Ptx, LoopsThatStoreArePipelinedButNotPastAtomicsOrGates) {
  const std::string load = "cp.async.bulk.tensor.2d.shared::cluster.global";
  absl::StatusOr<DeviceCode> plain = compile_ptx(tile_copy(), {});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(count(plain->binary, "mbarrier.init"), 3);
  EXPECT_EQ(count(plain->binary, load), 3);
  EXPECT_GE(plain->shared_bytes, 3 * 64 * 64 * 2);
  expect_ptxas_accepts(plain->binary);
  for (bool atomic : {true, false}) {
    SCOPED_TRACE(atomic ? "atomic" : "gate");
    KernelBuilder k("tile_copy_ordered");
    Value src = k.tensor_map(bf16, {64, 64}, "src"), dst = k.tensor_map(bf16, {64, 64}, "dst");
    Value counter = k.arg(ptr(i32), "counter");
    TriggeredView view = k.triggered_view("plan");
    Value m = k.arg(i32, "m");
    k.for_each_tile(cdiv(m, 64), [&](Value t) {
      if (atomic) {
        atomic_add(counter, 1);
      } else {
        view.wait(t);
      }
      tma_store(dst, {t * 64, 0}, tma_load(src, {t * 64, 0}));
    });
    absl::StatusOr<Kernel> kernel = k.build();
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    absl::StatusOr<DeviceCode> code = compile_ptx(*kernel, {});
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(count(code->binary, load), 1);
    EXPECT_LT(code->shared_bytes, 2 * 64 * 64 * 2);
    expect_ptxas_accepts(code->binary);
  }
}

// A loop of 64 x 256 f32 boxes (64 KiB) stored twice under the 128B
// swizzle: three stages do not fit beside the stores' staging, so a loop
// that takes the default count gets two, and one that asks for three is
// an error naming the bytes.
TEST(Ptx, DefaultStagesShrinkToFitButAGivenCountMustFit) {
  auto kernel = [](int stages) {
    KernelBuilder k("wide_boxes");
    Value src = k.tensor_map(f32, {64, 256}, "src", Swizzle::k128B);
    Value dst = k.tensor_map(f32, {64, 256}, "dst", Swizzle::k128B);
    Value dst2 = k.tensor_map(f32, {64, 256}, "dst2", Swizzle::k128B);
    Value m = k.arg(i32, "m");
    k.for_each_tile(cdiv(m, 64),
                    [&](Value t) {
                      Value tile = tma_load(src, {t * 64, 0});
                      tma_store(dst, {t * 64, 0}, tile);
                      tma_store(dst2, {t * 64, 0}, tile);
                    },
                    {.stages = stages});
    return *k.build();
  };
  absl::StatusOr<DeviceCode> fitted = compile_ptx(kernel(0), {});
  ASSERT_TRUE(fitted.ok()) << fitted.status();
  EXPECT_EQ(count(fitted->binary, "mbarrier.init"), 2);
  EXPECT_LE(fitted->shared_bytes, 232448);
  expect_ptxas_accepts(fitted->binary);
  EXPECT_THAT(std::string(compile_ptx(kernel(3), {}).status().message()),
              ContainsRegex("needs [0-9]+ bytes of shared memory per program; sm_90a allows 232448"));
  absl::StatusOr<DeviceCode> unpipelined = compile_ptx(kernel(1), {});
  ASSERT_TRUE(unpipelined.ok()) << unpipelined.status();
  EXPECT_EQ(count(unpipelined->binary, "mbarrier.init"), 1);
}

TEST(Ptx, EveryOpFamilyAssembles) {
  KernelBuilder k("families");
  Value x = k.arg(ptr(f32), "x"), y = k.arg(ptr(bf16), "y"), c = k.arg(ptr(i32), "counter");
  Value n = k.arg(i32, "n");
  Value offs = k.program_id() * 64 + k.arange(0, 64);  // [64] i32
  Value mask = offs < n;
  Value v = load(x + offs, mask, 0.0);                            // [64] f32
  Value b = cast(load(y + offs, mask, 0.0), f32);                 // [64] f32
  Value e = exp(v - max(v, 0)) + sqrt(abs(b)) * rsqrt(b * b + 1.0);
  Value m2 = expand_dims(e, 1) * expand_dims(e, 0);               // [64, 64] f32
  Value r = sum(trans(m2), 1) + select(mask, v, b);               // [64] f32
  store(x + offs, r, mask);
  store(y + offs, cast(r, bf16), mask);
  atomic_add(c, 1);
  atomic_rmw(AtomicOp::kAdd, c + (offs % 4), 1, mask);
  Var acc = k.var(k.zeros({32, 32}, f32));
  k.for_range(0, n, 32, [&](Value i) {
    Value t = reshape(expand_dims(load(x + k.arange(0, 32) + i), 1) * 1.0f, {32, 1});
    acc = dot(broadcast_to(t, {32, 32}), broadcast_to(trans(t), {32, 32}), acc);
  });
  k.if_(k.program_id() == 0, [&] { store(x + k.arange(0, 32), sum(acc, 0)); });
  absl::StatusOr<Kernel> kernel = k.build();
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  absl::StatusOr<DeviceCode> code = compile_ptx(*kernel, {});
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_THAT(code->binary, HasSubstr("bar.sync"));
  expect_ptxas_accepts(code->binary);
}

// The test's last check: `k`'s PTX passes FileCheck with `checks`, and
// ptxas accepts it (skipped without FileCheck or ptxas).
void expect_ptx_matches(KernelBuilder& k, const std::string& checks) {
  if (!have_tool(TESSEL_FILECHECK)) GTEST_SKIP() << "FileCheck not found (it comes with llvm-19-dev)";
  absl::StatusOr<Kernel> kernel = k.build();
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  absl::StatusOr<DeviceCode> code = compile_ptx(*kernel, {});
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(file_check(code->binary, checks), 0);
  expect_ptxas_accepts(code->binary);
}

TEST(Ptx, TriggeredViewsCountAtGpuScopeAndReleaseAtSystemScope) {
  KernelBuilder k("views");
  TriggeredView view = k.triggered_view("plan");
  Value out = k.arg(ptr(i32), "out");
  store(out + k.program_id(), 1);
  view.publish(0);
  view.wait(1);
  store(out, cast(view.arrived(1), i32) + cast(view.reusable(0), i32));
  expect_ptx_matches(k, R"(
CHECK: bar.sync
CHECK: atom.acq_rel.gpu.add.u64
CHECK: st.release.sys.u64
CHECK: ld.acquire.sys.u64
)");
}

// An acq_rel scalar atomic after a tma_store: the store's writes done, the
// program's threads met, a release fence (async proxy, then device scope),
// the atomic in one thread, an acquire fence, and the barrier that hands its
// result (and what it acquired) to every thread. A relaxed atomic has no
// fence. A tile's acquire fences every thread, then meets them.
TEST(Ptx, AtomicsFenceTheWholeProgramAsTheirOrderSays) {
  KernelBuilder k("orders");
  Value map = k.tensor_map(f32, {8, 32}, "map");
  Value c = k.arg(ptr(i32), "counter");
  tma_store(map, {k.program_id() * 8, 0}, k.zeros({8, 32}, f32));
  Value last = atomic_add(c, 1);
  Value claimed = atomic_add(c + 1, last, MemoryOrder::kRelaxed);
  atomic_rmw(AtomicOp::kMax, c + 2 + k.arange(0, 4), claimed, MemoryOrder::kAcquire);
  expect_ptx_matches(k, R"(
CHECK: cp.async.bulk.tensor.2d.global.shared::cta.bulk_group
CHECK: cp.async.bulk.wait_group 0;
CHECK: bar.sync
CHECK: fence.proxy.async.global; fence.acq_rel.gpu;
CHECK-NEXT: // end inline asm
CHECK-NEXT: atom.global.add.u32
CHECK-NEXT: // begin inline asm
CHECK-NEXT: fence.acq_rel.gpu; fence.proxy.async.global;
CHECK: bar.sync
CHECK-NOT: fence
CHECK: atom.global.add.u32
CHECK-NOT: fence
CHECK: atom{{(.global)?}}.max.s32
CHECK: fence.acq_rel.gpu; fence.proxy.async.global;
CHECK: bar.sync
)");
}

// A deferring publish looks at the carry word (relaxed), counts, takes out
// and releases what it found, then either releases its own batch or
// exchanges it into the carry word, releasing what that took out.
TEST(Ptx, DeferredPublishesExchangeTheCarryWordAtGpuScope) {
  KernelBuilder k("defers");
  TriggeredView view = k.triggered_view("plan");
  Value more = k.arg(i1, "more");
  view.publish(0, more);
  expect_ptx_matches(k, R"(
CHECK: bar.sync
CHECK: ld.relaxed.gpu.u64
CHECK: atom.acq_rel.gpu.add.u64
CHECK: atom.acq_rel.gpu.exch.b64
CHECK: st.release.sys.u64
CHECK: st.release.sys.u64
CHECK: atom.acq_rel.gpu.exch.b64
CHECK: st.release.sys.u64
)");
}

// A persistent loop of waits and publishes reads the view's header once,
// before the loop: each acquire empties L1, and a header read inside the
// loop would go to L2 on every publish.
TEST(Ptx, ViewHeaderIsReadOnceBeforeTheLoop) {
  KernelBuilder k("publishes");
  TriggeredView view = k.triggered_view("plan");
  Value n = k.arg(i32, "n");
  k.for_each_tile(n, [&](Value t) {
    view.wait(t);
    view.publish(t);
  });
  CompileArtifacts a;
  absl::StatusOr<DeviceCode> code = compile_ptx(*k.build(), {}, &a);
  ASSERT_TRUE(code.ok()) << code.status();
  const size_t loop = a.llvm.find("\nfor.body:");
  ASSERT_NE(loop, std::string::npos) << a.llvm;
  // Header fields are loads from fixed offsets of the view argument (%plan,
  // or its global-space cast %planN).
  std::regex field(R"((%[\w.]+) = getelementptr inbounds i8, ptr addrspace\(1\) %plan\d*, i64 \d+)");
  std::regex load(R"(= load [^,]+, ptr addrspace\(1\) (%[\w.]+))");
  std::set<std::string> fields_at;
  for (auto it = std::sregex_iterator(a.llvm.begin(), a.llvm.end(), field); it != std::sregex_iterator(); ++it) {
    fields_at.insert((*it)[1].str());
  }
  int fields = 0;
  for (auto it = std::sregex_iterator(a.llvm.begin(), a.llvm.end(), load); it != std::sregex_iterator(); ++it) {
    if (!fields_at.contains((*it)[1].str())) continue;
    EXPECT_LT(static_cast<size_t>(it->position()), loop) << it->str() << " is in the loop";
    ++fields;
  }
  EXPECT_GE(fields, 4);  // batch count, batch table, gates, epoch, spin limit, ...
}

// A [32, 64] tile carried through a for_range (and a branch in it) or a
// while_ loop stays in registers: the loop's phis hold each thread's
// slots, and no shared memory or barrier is needed.
TEST(Ptx, LoopCarriedTilesStayInRegisters) {
  for (bool is_while : {false, true}) {
    SCOPED_TRACE(is_while ? "while_" : "for_range");
    KernelBuilder k("carried");
    Value out = k.arg(ptr(i32), "out");
    Value n = k.arg(i32, "n");
    Value idx = expand_dims(k.arange(0, 32), 1) * 64 + expand_dims(k.arange(0, 64), 0);
    Var x = k.var(idx), count = k.var(n);
    if (is_while) {
      k.while_([&] { return Value(count) > 0; },
               [&] {
                 x = x * 3 + count;
                 count = count - 1;
               });
    } else {
      k.for_range(0, n, 1, [&](Value i) {
        k.if_(i % 2 == 0, [&] { x = x * 3 + 1; }, [&] { x = x - i; });
      });
    }
    store(out + idx, x);
    absl::StatusOr<DeviceCode> code = compile_ptx(*k.build(), {});
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_THAT(code->binary, Not(HasSubstr(".shared")));
    EXPECT_THAT(code->binary, Not(HasSubstr("bar.sync")));
    expect_ptxas_accepts(code->binary);
  }
}

// A loop whose body takes shared memory (here the scratch area where the
// two warps holding each row meet) meets again at the end of each
// iteration: the next one writes the area again, perhaps while a slower
// warp still reads this one's. Before the loop's end, each iteration
// would meet once. The same for a while loop.
TEST(Ptx, LoopsWhoseBodiesTakeSharedMemoryMeetAtTheirEnd) {
  for (bool is_while : {false, true}) {
    SCOPED_TRACE(is_while ? "while_" : "for_range");
    KernelBuilder k("rows");
    Value x = k.arg(ptr(f32), "x"), out = k.arg(ptr(f32), "out"), n = k.arg(i32, "n");
    Value offs = expand_dims(k.arange(0, 2), 1) * 1024 + expand_dims(k.arange(0, 1024), 0);  // [2, 1024]
    auto body = [&](const Value& i) {
      Value v = load(x + i * 2048 + offs);
      store(out + i * 2048 + offs, v - expand_dims(sum(v, 1), 1));
    };
    if (is_while) {
      Var i = k.var(0);
      k.while_([&] { return Value(i) < n; },
               [&] {
                 body(i);
                 i = i + 1;
               });
    } else {
      k.for_range(0, n, 1, body);
    }
    absl::StatusOr<DeviceCode> code = compile_ptx(*k.build(), {});
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(count(code->binary, "bar.sync"), 2) << code->binary;
    expect_ptxas_accepts(code->binary);
  }
}

// Column sums over blocks of rows: the loop loads the next block (eight
// 16-byte loads a thread) before it reduces this one, and the first
// block's loads go before the loop (codegen/prefetch.h), all in registers.
TEST(Ptx, LoopsLoadTheNextIterationsRowsBeforeReducingTheseOnes) {
  absl::StatusOr<Kernel> sums = samples::matrix_reduce_kernel(0, samples::Reduction::kSum, {.rows = 32, .cols = 128});
  ASSERT_TRUE(sums.ok()) << sums.status();
  CompileOptions aligned;
  aligned.specialization.multiple_of_16 = 0xf;
  absl::StatusOr<DeviceCode> code = compile_ptx(*sums, aligned);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(file_check(code->binary,
                       "CHECK-COUNT-8: ld.global.v4.b32\n"
                       "CHECK: {{^\\$L__BB}}\n"
                       "CHECK-COUNT-8: ld.global.v4.b32\n"
                       "CHECK-NOT: ld.global\n"
                       "CHECK: add.rn.f32\n"),
            0);
  expect_ptxas_accepts(code->binary);
}

// A dot's accumulator carried through a loop stays in its buffer: dot
// reads and writes buffers, so registers would add a round trip through
// shared memory each iteration (and spilled in the matmul sample).
TEST(Ptx, DotAccumulatorsStayInBuffers) {
  KernelBuilder k("accumulate");
  Value a = k.arg(ptr(f32), "a"), b = k.arg(ptr(f32), "b"), out = k.arg(ptr(f32), "out");
  Value n = k.arg(i32, "n");
  Value idx = expand_dims(k.arange(0, 32), 1) * 32 + expand_dims(k.arange(0, 32), 0);
  Var acc = k.var(k.zeros({32, 32}, f32));
  k.for_range(0, n, 1, [&](Value i) { acc = dot(load(a + i * 1024 + idx), load(b + idx), acc); });
  store(out + idx, acc);
  CompileArtifacts art;
  absl::StatusOr<DeviceCode> code = compile_ptx(*k.build(), {}, &art);
  ASSERT_TRUE(code.ok()) << code.status();
  // The loop's own block carries only its index; phis of the dot's inner
  // loops are elsewhere.
  const size_t body = art.llvm.find("\nfor.body:");
  ASSERT_NE(body, std::string::npos) << art.llvm;
  const std::string block = art.llvm.substr(body, art.llvm.find("\n\n", body) - body);
  EXPECT_THAT(block, HasSubstr("phi i64"));
  EXPECT_THAT(block, Not(HasSubstr("phi float"))) << block;
}

// A swizzled box read by another op gets a plain copy (the XOR of row bits
// into chunk bits), and one stored through a swizzled map is staged swizzled;
// tiles start where the pattern does, which needs 1 KiB of slack.
TEST(Ptx, SwizzledMapsCopyThroughThePattern) {
  absl::StatusOr<DeviceCode> plain = compile_ptx(tile_copy(), {});
  absl::StatusOr<DeviceCode> code = compile_ptx(tile_copy(Swizzle::k128B), {});
  ASSERT_TRUE(code.ok()) << code.status();
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_THAT(code->binary, HasSubstr("xor.b"));
  EXPECT_GE(code->shared_bytes, plain->shared_bytes + 1024);
  expect_ptxas_accepts(code->binary);
}

// Dynamic shared memory is only sure to start at a multiple of 16 bytes (the
// driver's JIT linker puts it right after the static shared memory), so the
// kernel rounds its start up to the tiles' alignment at run time: 128 bytes,
// or 1024 with swizzled maps, never assuming the PTX declaration's.
TEST(Ptx, SharedTilesAlignWhereverDynamicSharedMemoryStarts) {
  for (auto [swizzle, mask] : {std::pair{Swizzle::kNone, 112}, std::pair{Swizzle::k128B, 1008}}) {
    absl::StatusOr<DeviceCode> code = compile_ptx(tile_copy(swizzle), {});
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_THAT(code->binary, HasSubstr(".extern .shared .align 16 .b8 tessel_smem[];"));
    EXPECT_THAT(code->binary, ContainsRegex(absl::StrCat("and\\.b32[ \t]+%r[0-9]+, %r[0-9]+, ", mask, ";")));
    expect_ptxas_accepts(code->binary);
  }
}

// Philox's rounds take each product's high half from one mul.hi.u32 (LLVM
// may widen the first two rounds, whose words it knows to be narrow).
TEST(Ptx, RandomNumbersMultiplyInHalves) {
  KernelBuilder k("dropout_mask");
  Value seed = k.arg(u64, "seed"), out = k.arg(ptr(f32), "out");
  Value idx = k.program_id() * 256 + k.arange(0, 256);
  store(out + idx, rand(seed, idx));
  absl::StatusOr<DeviceCode> code = compile_ptx(*k.build(), {});
  ASSERT_TRUE(code.ok()) << code.status();
  auto count = [&](const std::string& what) {
    int n = 0;
    for (size_t at = 0; (at = code->binary.find(what, at)) != std::string::npos; ++at) ++n;
    return n;
  };
  EXPECT_GE(count("mul.hi.u32"), 2 * (kPhiloxRounds - 2));
  expect_ptxas_accepts(code->binary);
}

// tma_reduce is the copy engine's add into the tensor (its dtype the map's),
// straight from the tile or staged through a swizzled one.
TEST(Ptx, TmaReduceAddsThroughTheCopyEngine) {
  for (Swizzle swizzle : {Swizzle::kNone, Swizzle::k128B}) {
    KernelBuilder k("tile_add");
    Value src = k.tensor_map(f32, {32, 32}, "src", swizzle);
    Value dst = k.tensor_map(f32, {32, 32}, "dst", swizzle);
    Value tiles = k.arg(i32, "tiles");
    k.for_each_tile(tiles, [&](Value t) {
      tma_reduce(AtomicOp::kAdd, dst, {t * 32, 0}, tma_load(src, {t * 32, 0}) * 2.0f);
    });
    absl::StatusOr<Kernel> kernel = k.build();
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    absl::StatusOr<DeviceCode> code = compile_ptx(*kernel, {});
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_THAT(code->binary, HasSubstr("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group"));
    EXPECT_THAT(code->binary, Not(HasSubstr("cp.async.bulk.tensor.2d.global")));
    expect_ptxas_accepts(code->binary);
  }
}

TEST(Ptx, SwizzledBoxesNarrowerThanTheSwizzleAreRefused) {
  KernelBuilder k("narrow");
  Value src = k.tensor_map(bf16, {16, 32}, "src", Swizzle::k128B);  // rows of 64 bytes
  Value out = k.arg(ptr(bf16), "out");
  store(out + k.arange(0, 16 * 32), reshape(tma_load(src, {0, 0}), {16 * 32}));
  absl::StatusOr<DeviceCode> code = compile_ptx(*k.build(), {});
  EXPECT_EQ(code.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(code.status().message(),
              HasSubstr("tensor map 'src' has 128B swizzle with rows of 64 bytes; on NVIDIA GPUs tessel reads swizzled "
                        "boxes whose innermost dimension spans at least the swizzle width (128 bytes)"));
}

// NVPTX has no f64 exp or log instruction: the expansion is plain f64
// arithmetic (fma, rounding, bit operations) and calls nothing.
TEST(Ptx, ExpandsF64ExpAndLog) {
  KernelBuilder k("exp_log64");
  Value x = k.arg(ptr(f64), "x");
  store(x, exp(load(x)) + log(load(x + 1)));
  absl::StatusOr<DeviceCode> code = compile_ptx(*k.build(), {});
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_THAT(code->binary, HasSubstr("fma.rn.f64"));
  EXPECT_THAT(code->binary, HasSubstr("cvt.rni.f64.f64"));
  EXPECT_THAT(code->binary, Not(HasSubstr("call")));
  expect_ptxas_accepts(code->binary);
}

TEST(Ptx, RejectsChipsBeforeAmpereAndTooManyWarps) {
  CompileOptions options;
  options.arch = "sm_75";
  EXPECT_THAT(compile_ptx(tile_copy(), options).status().message(), HasSubstr("tessel compiles for sm_80 to sm_89"));
  options.arch = "sm_90a";
  options.num_warps = 64;
  EXPECT_THAT(compile_ptx(tile_copy(), options).status().message(), HasSubstr("num_warps must be 1 to 32"));
}

TEST(Ptx, RejectsKernelsOverTheSharedMemoryLimit) {
  KernelBuilder k("big");
  Value x = k.arg(ptr(f32), "x");
  Value t = load(x + k.arange(0, 65536));                   // [65536] f32: 256 KiB
  store(x + k.arange(0, 65536), t + 1.0f);
  EXPECT_THAT(compile_ptx(*k.build(), {}).status().message(), HasSubstr("bytes of shared memory per program"));
}

// narrow, split and concat of register tiles choose and join their
// operands' registers, and a store through affine pointers stores them
// from there: a row's halves swapped (rotary embeddings' rotate_half) and
// a part of the rows move no data through shared memory.
TEST(Ptx, NarrowSplitAndConcatStayInRegisters) {
  KernelBuilder k("halves");
  Value x = k.arg(ptr(f32), "x"), out = k.arg(ptr(f32), "out"), rows_out = k.arg(ptr(f32), "rows_out");
  Value rows = expand_dims(k.arange(0, 32), 1) * 64, cols = expand_dims(k.arange(0, 64), 0);
  Value t = load(x + rows + cols);  // [32, 64]
  auto [x1, x2] = split(t, 1);
  store(out + rows + cols, concat(-x2, x1 * 2.0f, 1));
  Value part = narrow(t, 0, 8, 8);                              // [8, 64]
  store(rows_out + narrow(rows, 0, 8, 8) + cols, part * part);  // (another parameter: no barrier between the stores)
  absl::StatusOr<Kernel> kernel = k.build();
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  CompileOptions options;
  options.num_warps = 4;
  absl::StatusOr<DeviceCode> code = compile_ptx(*kernel, options);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_THAT(code->binary, Not(HasSubstr("st.shared")));
  EXPECT_THAT(code->binary, Not(HasSubstr("bar.sync")));
  expect_ptxas_accepts(code->binary);
}

// Rotary embeddings as a user writes them: x * cos + rotate_half(x) * sin.
// With aligned rows, loaded 16 bytes at a time, rotate_half's elements lie
// in the registers of lanes of the same warp that hold x's, so they come
// by shuffles (bf16 two to a shuffle), not through shared memory; so does
// the product of a row's two halves, and so do samples::rope_kernel's.
TEST(Ptx, RotateHalfMeetsItsTileThroughShuffles) {
  for (DType d : {f32, bf16}) {
    SCOPED_TRACE(d.name());
    KernelBuilder k("rope");
    Value x = k.arg(ptr(d), "x"), cos = k.arg(ptr(d), "cos"), sin = k.arg(ptr(d), "sin");
    Value out = k.arg(ptr(d), "out"), halves = k.arg(ptr(d), "halves");
    Value rows = expand_dims(k.arange(0, 32), 1) * 128, cols = expand_dims(k.arange(0, 128), 0);
    Value t = load(x + rows + cols);  // [32, 128]
    auto [x1, x2] = split(t, 1);      // [32, 64] each
    store(out + rows + cols, t * load(cos + rows + cols) + concat(-x2, x1, 1) * load(sin + rows + cols));
    store(halves + expand_dims(k.arange(0, 32), 1) * 64 + expand_dims(k.arange(0, 64), 0), x1 * x2);
    absl::StatusOr<Kernel> kernel = k.build();
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    CompileOptions options;
    options.num_warps = 4;
    options.specialization.multiple_of_16 = 0b11111;
    absl::StatusOr<DeviceCode> code = compile_ptx(*kernel, options);
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_THAT(code->binary, HasSubstr("ld.global.v4"));
    EXPECT_THAT(code->binary, Not(HasSubstr("st.shared")));
    EXPECT_THAT(code->binary, Not(HasSubstr("bar.sync")));
    EXPECT_THAT(code->binary, HasSubstr("shfl.sync.bfly.b32"));
    expect_ptxas_accepts(code->binary);
    // The sample's rotary kernel, on its pointers' 16-byte alignment.
    for (int dim : {64, 128}) {
      SCOPED_TRACE(dim);
      const samples::RowBlock block = samples::row_block(dim);
      absl::StatusOr<Kernel> rope = samples::rope_kernel(block, d);
      ASSERT_TRUE(rope.ok()) << rope.status();
      options.num_warps = block.warps;
      options.specialization.multiple_of_16 = 0b1111;
      code = compile_ptx(*rope, options);
      ASSERT_TRUE(code.ok()) << code.status();
      EXPECT_THAT(code->binary, Not(HasSubstr("st.shared")));
      EXPECT_THAT(code->binary, HasSubstr("shfl.sync.bfly.b32"));
      expect_ptxas_accepts(code->binary);
    }
  }
}

// GPT-J's rotary form rotates every two elements: (x0, x1) -> (-x1, x0)
// of each pair, as split and concat of a [.., n/2, 2] view. A thread's
// 16-byte runs hold whole pairs, so the parts and the row meet in the
// thread's own registers: neither shuffles nor shared memory.
TEST(Ptx, RotateEveryTwoStaysInEachThread) {
  for (DType d : {f32, bf16}) {
    SCOPED_TRACE(d.name());
    KernelBuilder k("rope_pairs");
    Value x = k.arg(ptr(d), "x"), out = k.arg(ptr(d), "out");
    Value rows = expand_dims(k.arange(0, 32), 1) * 128, cols = expand_dims(k.arange(0, 128), 0);
    Value t = reshape(load(x + rows + cols), {32, 64, 2});  // [32, 64, 2]
    auto [even, odd] = split(t, 2);                         // [32, 64, 1] each
    store(out + rows + cols, reshape(t + concat(-odd, even, 2), {32, 128}));
    absl::StatusOr<Kernel> kernel = k.build();
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    CompileOptions options;
    options.specialization.multiple_of_16 = 0b11;
    absl::StatusOr<DeviceCode> code = compile_ptx(*kernel, options);
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_THAT(code->binary, HasSubstr("ld.global.v4"));
    EXPECT_THAT(code->binary, Not(HasSubstr("st.shared")));
    EXPECT_THAT(code->binary, Not(HasSubstr("shfl")));
    expect_ptxas_accepts(code->binary);
  }
}

// 8-bit floats compile for NVIDIA GPUs: loads and stores of bytes,
// widening as integer arithmetic (the same as the host's), and narrowing
// in the hardware's conversion, rounded to nearest even and saturated as
// the host's: one cvt each for the cast and the sum's rounding.
TEST(Ptx, Float8CastsAndArithmetic) {
  for (DType d : {f8e4m3, f8e5m2}) {
    SCOPED_TRACE(d.name());
    KernelBuilder k("float8");
    Value x = k.arg(ptr(f32), "x"), y = k.arg(ptr(d), "y"), out = k.arg(ptr(d), "out");
    Value idx = k.program_id() * 128 + k.arange(0, 128);
    store(out + idx, cast(load(x + idx), d) + load(y + idx));
    absl::StatusOr<DeviceCode> code = compile_ptx(*k.build(), {});
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_THAT(code->binary, HasSubstr("st.global.u8"));
    const std::string cvt = absl::StrCat("cvt.rn.satfinite.", d == f8e4m3 ? "e4m3x2" : "e5m2x2", ".f32");
    EXPECT_GE(count(code->binary, cvt), 2);
    expect_ptxas_accepts(code->binary);
  }
}

}  // namespace
}  // namespace tessel
