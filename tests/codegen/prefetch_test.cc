// Loads issued an iteration ahead (codegen/prefetch.h): which loops' loads
// move, and the IR they leave: the first iteration's load before the loop,
// the next iteration's at the top of the body, masked by whether it runs,
// carried to it. Whether the results agree with the host's is
// OpsAgree.LoadsIssuedAnIterationAhead's (tests/gpu).
#include "codegen/prefetch.h"

#include <vector>

#include "dsl/builder.h"
#include "dsl/ops.h"
#include "dsl/verifier.h"
#include "gtest/gtest.h"
#include "samples/kernels.h"

namespace tessel::codegen {
namespace {

constexpr int kThreads = 128;

KernelIR built(KernelBuilder& k) {
  absl::StatusOr<Kernel> kernel = k.build();
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return kernel->ir();
}

// The ops of `block` (directly) with opcode `op`.
int count(const KernelIR& ir, int block, OpCode op) {
  int n = 0;
  for (int id : ir.blocks[block].ops) n += ir.ops[id].op == op;
  return n;
}

// The first for op of the kernel's top block.
const Op& first_loop(const KernelIR& ir) {
  for (int id : ir.blocks[0].ops) {
    if (ir.ops[id].op == OpCode::kFor) return ir.ops[id];
  }
  ADD_FAILURE() << "no loop";
  return ir.ops[0];
}

// Sums rows of x in a loop; `body` adds what else the loop does.
KernelIR row_sums(const std::function<void(KernelBuilder&, Value x, Value i)>& body = {}, LoopOptions options = {},
                  int64_t cols = 128) {
  KernelBuilder k("row_sums");
  Value x = k.arg(ptr(f32), "x"), y = k.arg(ptr(f32), "y"), n = k.arg(i32, "n");
  Value c = k.arange(0, cols);
  Var acc = k.var(k.zeros({cols}, f32));
  k.for_range(
      0, n, 1,
      [&](Value i) {
        acc = acc + load(x + i * cols + c, c < n, 0.0f);
        if (body) body(k, x, i);
      },
      options);
  store(y + c, acc);
  return built(k);
}

TEST(Prefetch, ALoadInALoopIsIssuedAnIterationAhead) {
  KernelIR ir = row_sums();
  ASSERT_EQ(prefetch_loads(ir, kThreads), 1);
  EXPECT_TRUE(verify(ir).ok()) << verify(ir);
  const Op& loop = first_loop(ir);
  const Block& body = ir.blocks[loop.blocks[0]];
  // Before the loop: the first iteration's load; in it, the next one's.
  EXPECT_EQ(count(ir, 0, OpCode::kLoad), 1);
  EXPECT_EQ(count(ir, loop.blocks[0], OpCode::kLoad), 1);
  // The loop carries it: the accumulator, then the loaded row.
  ASSERT_EQ(loop.results.size(), 2u);
  ASSERT_EQ(body.args.size(), 3u);
  const Op& yield = ir.ops[body.ops.back()];
  const int next = yield.operands[1];
  const Op& load = ir.ops[ir.values[next].def_op];
  EXPECT_EQ(load.op, OpCode::kLoad);
  // Masked by its own mask and whether the next iteration runs.
  ASSERT_EQ(load.operands.size(), 3u);
  EXPECT_EQ(ir.ops[ir.values[load.operands[1]].def_op].op, OpCode::kAnd);
  // The body's add reads the carried row, not a load.
  bool reads_carried = false;
  for (int id : body.ops) {
    const Op& o = ir.ops[id];
    if (o.op == OpCode::kAdd && ir.type(o.results[0]).is_tile() &&
        std::find(o.operands.begin(), o.operands.end(), body.args[2]) != o.operands.end()) {
      reads_carried = true;
    }
  }
  EXPECT_TRUE(reads_carried);
  // The load goes before everything else it is not computed from.
  EXPECT_LT(std::find(body.ops.begin(), body.ops.end(), ir.values[next].def_op) - body.ops.begin(),
            static_cast<std::ptrdiff_t>(body.ops.size()) - 3);
}

TEST(Prefetch, AnUnmaskedLoadGetsAMaskAndAZero) {
  KernelBuilder k("unmasked");
  Value x = k.arg(ptr(f32), "x"), y = k.arg(ptr(f32), "y"), n = k.arg(i32, "n");
  Var acc = k.var(k.zeros({64}, f32));
  k.for_range(0, n, 1, [&](Value i) { acc = acc + load(x + i * 64 + k.arange(0, 64)); });
  store(y + k.arange(0, 64), acc);
  KernelIR ir = built(k);
  ASSERT_EQ(prefetch_loads(ir, kThreads), 1);
  EXPECT_TRUE(verify(ir).ok()) << verify(ir);
  for (const Op& o : ir.ops) {
    if (o.op == OpCode::kLoad) EXPECT_EQ(o.operands.size(), 3u);
  }
}

TEST(Prefetch, CarriedPointersAdvanceAsTheBodyAdvancesThem) {
  // Triton's style: the pointers are carried and stepped each iteration.
  KernelBuilder k("carried_pointer");
  Value x = k.arg(ptr(f32), "x"), y = k.arg(ptr(f32), "y"), n = k.arg(i32, "n");
  Var p = k.var(x + k.arange(0, 64)), acc = k.var(k.zeros({64}, f32));
  k.for_range(0, n, 1, [&](Value) {
    acc = acc + load(p);
    p = Value(p) + 64;
  });
  store(y + k.arange(0, 64), acc);
  KernelIR ir = built(k);
  ASSERT_EQ(prefetch_loads(ir, kThreads), 1);
  EXPECT_TRUE(verify(ir).ok()) << verify(ir);
}

TEST(Prefetch, StoresThroughOtherParametersAllowIt) {
  KernelIR ir =
      row_sums([](KernelBuilder& k, Value, Value i) { store(k.arg(ptr(f32), "z") + i, k.constant(1.0, f32)); });
  EXPECT_EQ(prefetch_loads(ir, kThreads), 1);
  EXPECT_TRUE(verify(ir).ok()) << verify(ir);
}

TEST(Prefetch, LoopsWhoseOrderCouldChangeWhatALoadReadsKeepIt) {
  // A store through the load's parameter (the next row may be what this
  // iteration writes).
  KernelIR same = row_sums([](KernelBuilder& k, Value x, Value i) { store(x + i * 128 + 128, k.constant(0.0, f32)); });
  EXPECT_EQ(prefetch_loads(same, kThreads), 0);
  // An atomic, which other programs may be waiting on.
  KernelIR atomic = row_sums([](KernelBuilder& k, Value, Value) { atomic_add(k.arg(ptr(i32), "counter"), 1); });
  EXPECT_EQ(prefetch_loads(atomic, kThreads), 0);
  // A store in a branch through a pointer that may be either parameter's.
  KernelIR either = row_sums([](KernelBuilder& k, Value x, Value i) {
    Value z = k.arg(ptr(f32), "z");
    k.if_(i > 2, [&] { store(where(i > 3, x, z), k.constant(0.0, f32)); });
  });
  EXPECT_EQ(prefetch_loads(either, kThreads), 0);
}

TEST(Prefetch, LoopsLeftAloneByOptionOrForm) {
  // Pipelining turned off.
  KernelIR off = row_sums({}, LoopOptions{.stages = 1});
  EXPECT_EQ(prefetch_loads(off, kThreads), 0);
  // Rows of 16384 over 128 threads: 128 slots a thread, more than registers carry.
  KernelIR wide = row_sums({}, {}, 16384);
  EXPECT_EQ(prefetch_loads(wide, kThreads), 0);
  // Tiles in buffers (the host): nothing to gain.
  KernelIR host = row_sums();
  EXPECT_EQ(prefetch_loads(host, 0), 0);
}

TEST(Prefetch, OnlyInnermostLoopsAndLoadsThatMoveWithTheLoop) {
  KernelBuilder k("nest");
  Value x = k.arg(ptr(f32), "x"), idx = k.arg(ptr(i32), "idx"), y = k.arg(ptr(f32), "y"), n = k.arg(i32, "n");
  Value c = k.arange(0, 32);
  Var acc = k.var(k.zeros({32}, f32));
  k.for_range(0, n, 1, [&](Value i) {
    acc = acc + load(x + i * 32 + c);  // the outer loop runs a loop: stays
    k.for_range(0, 4, 1, [&](Value j) {
      Value bias = load(x + c);           // the same every iteration: stays
      Value at = load(idx + i * 4 + j);   // moves
      Value row = load(x + at * 32 + c);  // its address is a load's: stays
      acc = acc + row + bias;
    });
  });
  store(y + c, acc);
  KernelIR ir = built(k);
  EXPECT_EQ(prefetch_loads(ir, kThreads), 1);
  EXPECT_TRUE(verify(ir).ok()) << verify(ir);
}

TEST(Prefetch, LoadsShareABudgetOfSlots) {
  // Three rows of 4096 over 128 threads take 32 slots each: two fit in 64
  // (and beside the carried sum's 32, in 128).
  KernelBuilder k("budget");
  Value x = k.arg(ptr(f32), "x"), y = k.arg(ptr(f32), "y"), n = k.arg(i32, "n");
  Value c = k.arange(0, 4096);
  Var acc = k.var(k.zeros({4096}, f32));
  k.for_range(0, n, 1, [&](Value i) {
    acc = acc + load(x + i * 4096 + c) + load(x + (i + 1) * 4096 + c) + load(x + (i + 2) * 4096 + c);
  });
  store(y + c, acc);
  KernelIR ir = built(k);
  EXPECT_EQ(prefetch_loads(ir, kThreads), 2);
  EXPECT_TRUE(verify(ir).ok()) << verify(ir);
}

TEST(Prefetch, AnAccumulatorsRegistersComeFirst) {
  // The GEMM through pointers: on 8 warps a 128 x 128 accumulator takes 64
  // slots a thread and both operands move (32 each); on 4 warps it takes
  // 128 and neither does, nor beside a 128 x 256 one on 8.
  auto moved = [](int64_t bn, int threads) {
    absl::StatusOr<Kernel> gemm = samples::pointer_gemm_kernel({.bm = 128, .bn = bn, .bk = 64});
    EXPECT_TRUE(gemm.ok()) << gemm.status();
    KernelIR ir = gemm->ir();
    const int n = prefetch_loads(ir, threads);
    EXPECT_TRUE(verify(ir).ok()) << verify(ir);
    return n;
  };
  EXPECT_EQ(moved(128, 256), 2);
  EXPECT_EQ(moved(128, 128), 0);
  EXPECT_EQ(moved(256, 256), 0);
}

}  // namespace
}  // namespace tessel::codegen
