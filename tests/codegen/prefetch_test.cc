// Loads issued an iteration ahead (codegen/prefetch.h): which loops' loads
// move, and the IR they leave: the first iteration's load before the loop,
// the next iteration's at the top of the body, masked by whether it runs,
// carried to it. Whether the results agree with the host's is
// OpsAgree.LoadsIssuedAnIterationAhead's (tests/gpu). And which loads the
// copy rings bring in instead (ring_loads); their code is
// Wgmma.PointerOperandsAreCopiedIntoRings's, their results
// Gemm.PointerGemmMatchesADoubleReferenceAndTheHost's.
#include "codegen/prefetch.h"

#include <algorithm>
#include <functional>
#include <vector>

#include "dsl/builder.h"
#include "dsl/ops.h"
#include "dsl/verifier.h"
#include "gtest/gtest.h"
#include "samples/decode.h"
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
    if (o.op == OpCode::kLoad) {
      EXPECT_EQ(o.operands.size(), 3u);
    }
  }
}

TEST(Prefetch, CarriedPointersAdvanceAsTheBodyAdvancesThem) {
  // The pointers are carried and stepped each iteration, by an amount that
  // changes (one stepped alike every time the builder computes from the
  // induction variable instead, dsl/passes.h).
  KernelBuilder k("carried_pointer");
  Value x = k.arg(ptr(f32), "x"), y = k.arg(ptr(f32), "y"), n = k.arg(i32, "n");
  Var p = k.var(x + k.arange(0, 64)), acc = k.var(k.zeros({64}, f32));
  k.for_range(0, n, 1, [&](Value i) {
    acc = acc + load(p);
    p = Value(p) + 64 + i % 2;
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

// A K loop of a GEMM through pointers: A [m, 64] and B [64, 64] tiles
// loaded and multiplied; `body` may change what the loop does beside.
struct GemmLoop {
  std::function<Value(KernelBuilder&, Value a, Value ks, Value kk)>
      a_tile;  // the A tile's load (nullptr: masked zeros)
  std::function<void(KernelBuilder&, Value a, Value a_tile, Value kk)> body;
  LoopOptions options;
};
KernelIR gemm_loop(const GemmLoop& g = {}) {
  KernelBuilder k("gemm_loop");
  Value a = k.arg(ptr(bf16), "a"), b = k.arg(ptr(bf16), "b"), c = k.arg(ptr(f32), "c"), kdim = k.arg(i32, "k");
  Value rows = expand_dims(k.arange(0, 64), 1);
  Var acc = k.var(k.zeros({64, 64}, f32));
  k.for_range(
      0, kdim, 64,
      [&](Value kk) {
        Value ks = expand_dims(kk + k.arange(0, 64), 0);  // [1, 64]
        Value at = g.a_tile ? g.a_tile(k, a, ks, kk) : load(a + rows * kdim + ks, ks < kdim, 0.0);
        Value bt = load(b + rows * kdim + ks, ks < kdim, 0.0);  // [64 n, 64 k]
        acc = dot(at, trans(bt), acc);
        if (g.body) g.body(k, a, at, kk);
      },
      g.options);
  store(c + rows * 64 + expand_dims(k.arange(0, 64), 0), acc);
  return built(k);
}

TEST(Rings, LoadsOnlyDotsReadTakeRings) {
  KernelIR ir = gemm_loop();
  std::vector<RingLoad> rings = ring_loads(ir);
  ASSERT_EQ(rings.size(), 2u);
  const Op& loop = first_loop(ir);
  for (const RingLoad& r : rings) {
    EXPECT_EQ(ir.ops[r.load].op, OpCode::kLoad);
    EXPECT_EQ(&ir.ops[r.loop], &loop);
    // The slice computes the addresses and the mask, in program order,
    // from the induction variable: ks, its pointers, its comparison.
    ASSERT_FALSE(r.slice.empty());
    const std::vector<int>& body = ir.blocks[loop.blocks[0]].ops;
    std::vector<int> order;
    for (int op : r.slice) order.push_back(static_cast<int>(std::find(body.begin(), body.end(), op) - body.begin()));
    EXPECT_TRUE(std::is_sorted(order.begin(), order.end()));
    EXPECT_LT(order.back(), static_cast<int>(body.size()));
    // What no iteration changes (the rows' offsets) is apart, but not the
    // broadcasts, which are made again where they are read.
    EXPECT_FALSE(r.invariant.empty());
    for (int op : r.invariant) {
      EXPECT_NE(ir.ops[op].op, OpCode::kBroadcast);
      for (int v : ir.ops[op].operands) EXPECT_NE(v, ir.blocks[loop.blocks[0]].args[0]);
    }
  }
  // Loads that rings bring in are not issued ahead in registers as well.
  EXPECT_EQ(prefetch_loads(ir, kThreads, rings), 0);
  EXPECT_EQ(prefetch_loads(ir, kThreads), 2);
}

TEST(Rings, ThePointerGemmsOperandsTakeRings) {
  absl::StatusOr<Kernel> gemm = samples::pointer_gemm_kernel({});
  ASSERT_TRUE(gemm.ok()) << gemm.status();
  EXPECT_EQ(ring_loads(gemm->ir()).size(), 2u);
}

// A paged decode's keys and values: their rows' addresses come through a
// load of the block table in the same loop, which each ring reads again
// for the iteration whose copies it issues, and which is not moved ahead.
TEST(Rings, RowsGatheredThroughALoadOfTheLoopTakeRings) {
  absl::StatusOr<Kernel> decode = samples::decode_kernel({});
  ASSERT_TRUE(decode.ok()) << decode.status();
  KernelIR ir = decode->ir();
  std::vector<RingLoad> rings = ring_loads(ir);
  ASSERT_EQ(rings.size(), 2u);
  std::vector<int> tables;
  for (const RingLoad& r : rings) {
    for (int op : r.slice) {
      if (ir.ops[op].op == OpCode::kLoad) tables.push_back(op);
    }
  }
  ASSERT_EQ(tables.size(), 2u);
  EXPECT_EQ(tables[0], tables[1]);
  // (The loads that move are the combining loop's.)
  const int keys = ir.ops[rings[0].loop].blocks[0];
  const std::vector<int> before = ir.blocks[keys].ops;
  prefetch_loads(ir, kThreads, rings);
  EXPECT_EQ(ir.blocks[keys].ops, before);
  // A table the loop writes is not read again ahead of it.
  KernelBuilder k("written_table");
  Value table = k.arg(ptr(i32), "table"), x = k.arg(ptr(bf16), "x"), out = k.arg(ptr(f32), "out");
  Value a = k.zeros({16, 64}, bf16);
  Var acc = k.var(k.zeros({16, 64}, f32));
  k.for_range(0, 256, 64, [&](Value j) {
    Value row = load(table + j + k.arange(0, 64));
    store(table + j + k.arange(0, 64), row + 1);
    Value bt = load(x + expand_dims(row * 64, 1) + expand_dims(k.arange(0, 64), 0));
    acc = dot(a, trans(bt), acc);
  });
  store(out + expand_dims(k.arange(0, 16) * 64, 1) + expand_dims(k.arange(0, 64), 0), Value(acc));
  EXPECT_TRUE(ring_loads(built(k)).empty());
}

TEST(Rings, LoadsAnythingElseReadsOrThatFillOtherValuesKeepToRegisters) {
  // A is summed beside the product: only B takes a ring.
  KernelIR summed = gemm_loop({.body = [](KernelBuilder& k, Value, Value at, Value) {
    store(k.arg(ptr(f32), "s") + k.arange(0, 64), sum(cast(at, f32), 1));
  }});
  EXPECT_EQ(ring_loads(summed).size(), 1u);
  // A masked-off element of A is 1, which a copy does not write.
  KernelIR ones = gemm_loop({.a_tile = [](KernelBuilder& k, Value a, Value ks, Value) {
    return load(a + expand_dims(k.arange(0, 64), 1) * 64 + ks, ks < 64, 1.0);
  }});
  EXPECT_EQ(ring_loads(ones).size(), 1u);
  // A 1-D load feeds no dot.
  EXPECT_TRUE(ring_loads(row_sums()).empty());
}

TEST(Rings, LoopsAndAddressesRingsCannotRunAhead) {
  // Turned off.
  EXPECT_TRUE(ring_loads(gemm_loop({.options = {.stages = 1}})).empty());
  // A store through A's parameter (the next tile may be what this
  // iteration writes): only B takes a ring; one through another, both.
  KernelIR into_a =
      gemm_loop({.body = [](KernelBuilder&, Value a, Value, Value kk) { store(a + kk, cast(kk, bf16)); }});
  EXPECT_EQ(ring_loads(into_a).size(), 1u);
  KernelIR elsewhere = gemm_loop(
      {.body = [](KernelBuilder& k, Value, Value, Value kk) { store(k.arg(ptr(bf16), "z") + kk, cast(kk, bf16)); }});
  EXPECT_EQ(ring_loads(elsewhere).size(), 2u);
  // A's rows read from memory the loop writes: A stays in registers.
  KernelIR gathered = gemm_loop({.a_tile = [](KernelBuilder& k, Value a, Value ks, Value kk) {
    Value rows = k.arg(ptr(i32), "rows");
    Value row = load(rows + kk + k.arange(0, 64));
    store(rows + kk + k.arange(0, 64), row);
    return load(a + expand_dims(row, 1) * 64 + ks, ks < 64, 0.0);
  }});
  EXPECT_EQ(ring_loads(gathered).size(), 1u);
}

TEST(Rings, SteppedPointersTakeRings) {
  // Triton's tutorial steps its pointers in the loop. Stepped by the same
  // amount every iteration, they are computed from the induction variable
  // (dsl/passes.h), and both operands take rings; stepped by an amount
  // that changes, A's stay carried and A in registers.
  auto gemm = [](bool changing) {
    KernelBuilder k("carried");
    Value a = k.arg(ptr(bf16), "a"), b = k.arg(ptr(bf16), "b"), c = k.arg(ptr(f32), "c"), kdim = k.arg(i32, "k");
    Value rows = expand_dims(k.arange(0, 64), 1), cols = expand_dims(k.arange(0, 64), 0);
    Var pa = k.var(a + rows * 64 + cols), pb = k.var(b + rows * kdim + cols);
    Var acc = k.var(k.zeros({64, 64}, f32));
    k.for_range(0, cdiv(kdim, 64), 1, [&](Value kk) {
      acc = dot(load(pa), trans(load(pb)), acc);
      pa = Value(pa) + (changing ? 64 + kk % 2 : Value(k.constant(64, i32)));
      pb = Value(pb) + 64;
    });
    store(c + rows * 64 + cols, acc);
    return built(k);
  };
  KernelIR ir = gemm(false);
  EXPECT_EQ(ring_loads(ir).size(), 2u);
  KernelIR changing = gemm(true);
  std::vector<RingLoad> rings = ring_loads(changing);
  EXPECT_EQ(rings.size(), 1u);
  EXPECT_EQ(prefetch_loads(changing, 256, rings), 1);
  // The pointer GEMM written so compiles to rings as the one that computes
  // its addresses does (Wgmma.PointerOperandsAreCopiedIntoRings).
  absl::StatusOr<Kernel> tutorial = samples::pointer_gemm_kernel({.stepped = true});
  ASSERT_TRUE(tutorial.ok()) << tutorial.status();
  EXPECT_EQ(ring_loads(tutorial->ir()).size(), 2u);
}

}  // namespace
}  // namespace tessel::codegen
