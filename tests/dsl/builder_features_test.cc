// Every builder call on well-formed kernels: result types and shapes, and
// the structure of the IR it leaves.
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dsl/builder.h"
#include "dsl/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;

Type Tile(const Type& element, Shape shape) { return Type::tile(element, std::move(shape)); }

int CountOps(const Kernel& k, OpCode op) {
  int n = 0;
  for (const Op& o : k.ir().ops) n += o.op == op;
  return n;
}

// Builds `k`, failing the test if it does not build.
Kernel Build(KernelBuilder& k) {
  absl::StatusOr<Kernel> kernel = k.build();
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  return kernel.ok() ? *kernel : Kernel();
}

TEST(BuilderFeatures, Arguments) {
  KernelBuilder k("args");
  Value n = k.arg(i64, "n");
  Value x = k.arg(ptr(bf16), "x");
  Value map = k.tensor_map(f16, {64, 64}, "map", Swizzle::k128B);
  TriggeredView view = k.triggered_view("plan");
  EXPECT_EQ(n.type(), Type(i64));
  EXPECT_EQ(x.type(), ptr(bf16));
  EXPECT_EQ(map.type(), Type::tensor_map(f16, {64, 64}, Swizzle::k128B));
  EXPECT_EQ(view.value().type(), Type::triggered_view());
  Kernel kernel = Build(k);
  EXPECT_EQ(kernel.name(), "args");
  ASSERT_EQ(kernel.params().size(), 4u);
  const std::vector<std::string> names = {"n", "x", "map", "plan"};
  const std::vector<Type> types = {i64, ptr(bf16), map.type(), Type::triggered_view()};
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(kernel.params()[i].name, names[i]);
    EXPECT_EQ(kernel.params()[i].type, types[i]);
    EXPECT_EQ(kernel.params()[i].value, kernel.ir().blocks[0].args[i]);
  }
}

TEST(BuilderFeatures, ProgramIndexSpace) {
  KernelBuilder k("index");
  for (int axis = 0; axis < 3; ++axis) {
    EXPECT_EQ(k.program_id(axis).type(), Type(i32));
    EXPECT_EQ(k.num_programs(axis).type(), Type(i32));
  }
  Kernel kernel = Build(k);
  EXPECT_EQ(CountOps(kernel, OpCode::kProgramId), 3);
  EXPECT_EQ(CountOps(kernel, OpCode::kNumPrograms), 3);
}

TEST(BuilderFeatures, TilesFromNothing) {
  KernelBuilder k("tiles");
  Value p = k.arg(ptr(f32), "p");
  EXPECT_EQ(k.arange(0, 128).type(), Tile(i32, {128}));
  EXPECT_EQ(k.arange(-8, 8).type(), Tile(i32, {16}));
  EXPECT_EQ(k.full({4, 8}, 2, f16).type(), Tile(f16, {4, 8}));
  EXPECT_EQ(k.full({4}, k.constant(1, u8), u8).type(), Tile(u8, {4}));
  EXPECT_EQ(k.zeros({2, 2, 2, 2}, i64).type(), Tile(i64, {2, 2, 2, 2}));
  EXPECT_EQ(k.constant(3, bf16).type(), Type(bf16));
  EXPECT_EQ(k.constant(1, i1).type(), Type(i1));
  EXPECT_EQ(splat(k.constant(1.5, f64), {32}).type(), Tile(f64, {32}));
  EXPECT_EQ(splat(p, {8, 8}).type(), Tile(ptr(f32), {8, 8}));
  Build(k);
}

// Ops on literals alone belong to the newest builder alive on the thread.
TEST(BuilderFeatures, LiteralsAloneUseTheBuilderInScope) {
  KernelBuilder outer("outer");
  EXPECT_EQ(splat(1.0f, {64}).type(), Tile(f32, {64}));
  EXPECT_EQ(exp(2.0).type(), Type(f32));
  {
    KernelBuilder inner("inner");
    EXPECT_EQ(splat(3, {8}).type(), Tile(i32, {8}));
    EXPECT_EQ(Build(inner).str().find("splat") != std::string::npos, true);
  }
  EXPECT_EQ(cast(7, f16).type(), Type(f16));
  Kernel kernel = Build(outer);
  EXPECT_EQ(CountOps(kernel, OpCode::kSplat), 1);
}

TEST(BuilderFeatures, LiteralsWithNoBuilderAreEmpty) {
  // No builder on this thread: nothing to record the op in.
  EXPECT_FALSE(splat(1.0f, {64}).valid());
}

TEST(BuilderFeatures, ShapeOps) {
  KernelBuilder k("shapes");
  Value col = expand_dims(k.arange(0, 64), 1);
  EXPECT_EQ(col.type(), Tile(i32, {64, 1}));
  EXPECT_EQ(expand_dims(k.arange(0, 64), 0).type(), Tile(i32, {1, 64}));
  EXPECT_EQ(broadcast_to(col, {64, 32}).type(), Tile(i32, {64, 32}));
  EXPECT_EQ(broadcast_to(col, {64, 1}).id(), col.id());  // already that shape
  EXPECT_EQ(broadcast_to(k.constant(1.0, f32), {8}).type(), Tile(f32, {8}));
  EXPECT_EQ(reshape(k.arange(0, 64), {4, 16}).type(), Tile(i32, {4, 16}));
  Value cube = k.zeros({2, 4, 8}, f32);
  EXPECT_EQ(trans(cube).type(), Tile(f32, {8, 4, 2}));
  EXPECT_EQ(trans(cube, {1, 2, 0}).type(), Tile(f32, {4, 8, 2}));
  EXPECT_EQ(trans(k.zeros({16, 32}, bf16)).type(), Tile(bf16, {32, 16}));
  Kernel kernel = Build(k);
  EXPECT_THAT(kernel.str(), HasSubstr("trans %"));
  EXPECT_THAT(kernel.str(), HasSubstr(" [1,2,0] : tile<f32>[4,8,2]"));
  EXPECT_EQ(CountOps(kernel, OpCode::kBroadcast), 1);
}

TEST(BuilderFeatures, ArithmeticBroadcastsLikeNumpy) {
  KernelBuilder k("arith");
  Value rows = expand_dims(cast(k.arange(0, 64), f32), 1);  // [64, 1]
  Value cols = expand_dims(cast(k.arange(0, 32), f32), 0);  // [1, 32]
  Value grid = rows * cols;
  EXPECT_EQ(grid.type(), Tile(f32, {64, 32}));
  EXPECT_EQ((grid + 1).type(), grid.type());  // an integer literal joins floats
  EXPECT_EQ((0.5 - grid).type(), grid.type());
  EXPECT_EQ((grid / k.arg(f32, "s")).type(), grid.type());
  EXPECT_EQ((grid < rows).type(), Tile(i1, {64, 32}));
  Value n = k.arg(u32, "n");
  for (Value v : {n + 1, n - 1, n * 3, n / 2, n % 2, n & 1, n | 1, n ^ 1, n << 1, n >> 1, -n, ~n}) {
    EXPECT_EQ(v.type(), Type(u32));
  }
  for (Value v : {n == 1, n != 1, n<1, n <= 1, n> 1, n >= 1}) EXPECT_EQ(v.type(), Type(i1));
  Value flag = n > 0;
  EXPECT_EQ((!flag).type(), Type(i1));
  EXPECT_EQ((flag & (n < 9)).type(), Type(i1));
  Build(k);
}

TEST(BuilderFeatures, Reductions) {
  KernelBuilder k("reduce");
  Value x = k.zeros({64, 32}, f32);
  EXPECT_EQ(sum(x, 0).type(), Tile(f32, {32}));
  EXPECT_EQ(max(x, 1).type(), Tile(f32, {64}));
  EXPECT_EQ(min(k.arange(0, 16), 0).type(), Type(i32));  // rank 1 reduces to a scalar
  Kernel kernel = Build(k);
  EXPECT_THAT(kernel.str(), HasSubstr("axis=0 add : tile<f32>[32]"));
  EXPECT_THAT(kernel.str(), HasSubstr("axis=1 max : tile<f32>[64]"));
  EXPECT_THAT(kernel.str(), HasSubstr("axis=0 min : i32"));
}

TEST(BuilderFeatures, ElementwiseFunctions) {
  KernelBuilder k("elementwise");
  Value x = k.zeros({16}, f32);
  Value i = k.arange(0, 16);
  EXPECT_EQ(cast(i, f16).type(), Tile(f16, {16}));
  EXPECT_EQ(cast(x, i1).type(), Tile(i1, {16}));
  EXPECT_EQ(cast(x, f32).id(), x.id());  // a cast to the same dtype is the value itself
  EXPECT_EQ(select(i < 8, x, 1.0).type(), x.type());
  EXPECT_EQ(select(k.arg(i1, "c"), x, x).type(), x.type());  // a scalar condition splats
  EXPECT_EQ(minimum(x, 0).type(), x.type());
  EXPECT_EQ(maximum(i, 3).type(), i.type());
  for (Value v : {exp(x), log(x), sqrt(x), rsqrt(x), abs(x), floor(x), -x}) EXPECT_EQ(v.type(), x.type());
  EXPECT_EQ(abs(i).type(), i.type());
  EXPECT_EQ(fma(x, x, 1.0).type(), x.type());
  EXPECT_EQ(fma(k.arg(f64, "a"), 2.0, k.zeros({4, 4}, f64)).type(), Tile(f64, {4, 4}));
  Value n = k.arg(i32, "n");
  EXPECT_EQ(cdiv(n, 64).type(), Type(i32));
  Kernel kernel = Build(k);
  for (OpCode op : {OpCode::kExp, OpCode::kLog, OpCode::kSqrt, OpCode::kRsqrt, OpCode::kFloor, OpCode::kFma,
                    OpCode::kSelect, OpCode::kMin, OpCode::kMax, OpCode::kNeg}) {
    EXPECT_GE(CountOps(kernel, op), 1) << opcode_name(op);
  }
}

TEST(BuilderFeatures, LoadsAndStoresWithMasks) {
  KernelBuilder k("memory");
  Value x = k.arg(ptr(f32), "x");
  Value y = k.arg(ptr(f32), "y");
  Value stride = k.arg(i32, "stride");
  Value rows = expand_dims(k.arange(0, 64), 1);
  Value cols = expand_dims(k.arange(0, 32), 0);
  Value ptrs = x + (rows * stride + cols);
  EXPECT_EQ(ptrs.type(), Tile(ptr(f32), {64, 32}));
  EXPECT_EQ((rows + y).type(), Tile(ptr(f32), {64, 1}));  // offsets on either side
  Value mask = cols < stride;                             // [1, 32] broadcasts over the pointers
  Value tile = load(ptrs, mask, 0.0);
  EXPECT_EQ(tile.type(), Tile(f32, {64, 32}));
  EXPECT_EQ(load(ptrs).type(), Tile(f32, {64, 32}));
  EXPECT_EQ(load(x).type(), Type(f32));
  EXPECT_EQ(load(x, stride > 0, 1).type(), Type(f32));
  store(ptrs, tile * 2.0, mask);
  store(ptrs, 0.0);  // a scalar value splats
  store(y, load(x));
  Kernel kernel = Build(k);
  EXPECT_EQ(CountOps(kernel, OpCode::kLoad), 5);
  EXPECT_EQ(CountOps(kernel, OpCode::kStore), 3);
  for (const Op& o : kernel.ir().ops) {
    if (o.op == OpCode::kStore) {
      EXPECT_EQ(kernel.ir().type(o.operands[1]).element(), Type(f32));
    }
  }
}

TEST(BuilderFeatures, Atomics) {
  KernelBuilder k("atomics");
  Value counts = k.arg(ptr(i32), "counts");
  Value sums = k.arg(ptr(f32), "sums");
  Value halves = k.arg(ptr(f16), "halves");
  Value words = k.arg(ptr(u64), "words");
  Value offs = k.arange(0, 32);
  EXPECT_EQ(atomic_add(counts + offs, 1).type(), Tile(i32, {32}));
  EXPECT_EQ(atomic_add(sums, 1.5).type(), Type(f32));
  EXPECT_EQ(atomic_add(halves + offs, 1.0).type(), Tile(f16, {32}));
  for (AtomicOp op : {AtomicOp::kAdd, AtomicOp::kMin, AtomicOp::kMax, AtomicOp::kAnd, AtomicOp::kOr, AtomicOp::kXor,
                      AtomicOp::kExchange}) {
    EXPECT_EQ(atomic_rmw(op, counts + offs, offs, offs < 16).type(), Tile(i32, {32}));
  }
  EXPECT_EQ(atomic_rmw(AtomicOp::kExchange, sums, 2.0).type(), Type(f32));
  EXPECT_EQ(atomic_cas(counts, 0, 1).type(), Type(i32));
  EXPECT_EQ(atomic_cas(words, 0, 7).type(), Type(u64));
  Kernel kernel = Build(k);
  EXPECT_EQ(CountOps(kernel, OpCode::kAtomic), 11);
  EXPECT_EQ(CountOps(kernel, OpCode::kAtomicCas), 2);
}

TEST(BuilderFeatures, TmaLoadAndStore) {
  KernelBuilder k("tma");
  Value src = k.tensor_map(bf16, {64, 128}, "src");
  Value dst = k.tensor_map(bf16, {64, 128}, "dst");
  Value cube = k.tensor_map(f32, {2, 8, 16}, "cube", Swizzle::k64B);
  Value row = k.arg(i32, "row");
  Value tile = tma_load(src, {row, 0});
  EXPECT_EQ(tile.type(), Tile(bf16, {64, 128}));
  tma_store(dst, {row, 128}, tile);
  tma_store(dst, std::vector<Operand>{0, row}, k.zeros({64, 128}, bf16));
  EXPECT_EQ(tma_load(cube, std::vector<Operand>{0, row, 16}).type(), Tile(f32, {2, 8, 16}));
  Kernel kernel = Build(k);
  EXPECT_EQ(CountOps(kernel, OpCode::kTmaLoad), 2);
  EXPECT_EQ(CountOps(kernel, OpCode::kTmaStore), 2);
  for (const Op& o : kernel.ir().ops) {
    if (o.op == OpCode::kTmaStore) {
      EXPECT_EQ(o.operands.size(), 4u);  // map, tile, two coordinates
    }
  }
}

TEST(BuilderFeatures, DotOfEveryAllowedDtypeCombination) {
  struct Combination {
    DType in, acc;
  };
  for (Combination c : {Combination{f16, f32}, Combination{f16, f16}, Combination{bf16, f32}, Combination{f32, f32},
                        Combination{f64, f64}, Combination{i8, i32}}) {
    KernelBuilder k("dot");
    Value a = k.zeros({64, 16}, c.in);
    Value b = k.zeros({16, 32}, c.in);
    Value acc = k.zeros({64, 32}, c.acc);
    EXPECT_EQ(dot(a, b, acc).type(), Tile(c.acc, {64, 32})) << c.in.name() << "->" << c.acc.name();
    EXPECT_EQ(CountOps(Build(k), OpCode::kDot), 1);
  }
}

TEST(BuilderFeatures, TriggeredViewCalls) {
  KernelBuilder k("view");
  TriggeredView view = k.triggered_view("plan");
  Value batch = k.arg(i32, "batch");
  EXPECT_EQ(view.arrived(batch).type(), Type(i1));
  EXPECT_EQ(view.reusable(0).type(), Type(i1));
  view.wait(batch + 1);
  view.publish(batch);
  Kernel kernel = Build(k);
  for (OpCode op : {OpCode::kArrived, OpCode::kReusable, OpCode::kWait, OpCode::kPublish}) {
    ASSERT_EQ(CountOps(kernel, op), 1) << opcode_name(op);
  }
  for (const Op& o : kernel.ir().ops) {
    if (o.op == OpCode::kPublish) {
      EXPECT_EQ(o.operands[0], kernel.params()[0].value);
    }
  }
}

TEST(BuilderFeatures, NestedLoopsAndIfsCarryVars) {
  KernelBuilder k("nested");
  Value out = k.arg(ptr(f32), "out");
  Value n = k.arg(i32, "n");
  Var acc = k.var(k.zeros({16}, f32));
  Var steps = k.var(0);
  k.for_range(0, n, 1, [&](Value i) {
    k.for_range(i, n, 2, [&](Value j) {
      k.if_(
          j < 8, [&] { acc = acc + cast(j, f32); }, [&] { steps = steps + 1; });
    });
    acc = acc * 0.5;
  });
  EXPECT_EQ(acc.type(), Tile(f32, {16}));
  EXPECT_EQ(steps.type(), Type(i32));
  store(out + k.arange(0, 16), acc + cast(steps, f32));
  Kernel kernel = Build(k);
  ASSERT_EQ(CountOps(kernel, OpCode::kFor), 2);
  ASSERT_EQ(CountOps(kernel, OpCode::kIf), 1);
  for (const Op& o : kernel.ir().ops) {
    // Both loops and the if carry both Vars: each is changed somewhere inside.
    if (o.op == OpCode::kFor || o.op == OpCode::kIf) {
      ASSERT_EQ(o.results.size(), 2u) << opcode_name(o.op);
      EXPECT_EQ(kernel.ir().type(o.results[0]), Tile(f32, {16}));
      EXPECT_EQ(kernel.ir().type(o.results[1]), Type(i32));
    }
  }
}

TEST(BuilderFeatures, WhileLoopsCarryTheVarsTheirBodyAssigns) {
  KernelBuilder k("collatz");
  Value out = k.arg(ptr(i32), "out");
  Value n = k.arg(i32, "n");
  Var x = k.var(n), steps = k.var(0);
  Var untouched = k.var(k.zeros({8}, f32));
  k.while_([&] { return Value(x) > 1; },
           [&] {
             x = select(x % 2 == 0, x / 2, x * 3 + 1);
             steps = steps + 1;
           });
  store(out, steps);
  store(out + 1, cast(sum(untouched, 0), i32));
  Kernel kernel = Build(k);
  ASSERT_EQ(CountOps(kernel, OpCode::kWhile), 1);
  for (const Op& o : kernel.ir().ops) {
    if (o.op != OpCode::kWhile) continue;
    // x and steps; the tile the body leaves alone is not carried.
    ASSERT_EQ(o.results.size(), 2u);
    ASSERT_EQ(o.blocks.size(), 2u);
    for (int b : o.blocks) EXPECT_EQ(kernel.ir().blocks[b].args.size(), 2u);
    const Op& test = kernel.ir().ops[kernel.ir().blocks[o.blocks[0]].ops.back()];
    ASSERT_EQ(test.operands.size(), 1u);
    EXPECT_EQ(kernel.ir().type(test.operands[0]), Type(i1));
  }
  EXPECT_THAT(kernel.str(), HasSubstr("while"));
}

TEST(BuilderFeatures, VarsTakeLiteralsOfTheirType) {
  KernelBuilder k("literals");
  Var wide = k.var(k.constant(0, f64));
  Var half = k.var(k.constant(0, f16));
  Var byte = k.var(k.constant(0, u8));
  wide = 2;
  half = 0.25;
  byte = 255;
  EXPECT_EQ(wide.type(), Type(f64));
  EXPECT_EQ(half.type(), Type(f16));
  EXPECT_EQ(byte.type(), Type(u8));
  Kernel kernel = Build(k);
  EXPECT_THAT(kernel.str(), HasSubstr("constant 2 : f64"));
  EXPECT_THAT(kernel.str(), HasSubstr("constant 0.25 : f16"));
  EXPECT_THAT(kernel.str(), HasSubstr("constant [255] : u8"));
}

TEST(BuilderFeatures, ExplicitLoopCarriedValues) {
  KernelBuilder k("explicit");
  Value out = k.arg(ptr(f32), "out");
  Value acc = k.zeros({32}, f32);
  Value count = k.constant(0, i64);
  std::vector<Value> final_values = k.for_range(0, 8, 1, {acc, count}, [&](Value i, std::span<const Value> carried) {
    EXPECT_EQ(i.type(), Type(i32));
    EXPECT_EQ(carried[0].type(), acc.type());
    return std::vector<Value>{carried[0] + 1.0, carried[1] + 1};
  });
  ASSERT_EQ(final_values.size(), 2u);
  EXPECT_EQ(final_values[0].type(), Tile(f32, {32}));
  EXPECT_EQ(final_values[1].type(), Type(i64));
  store(out + k.arange(0, 32), final_values[0]);
  store(out + 32, cast(final_values[1], f32));
  Kernel kernel = Build(k);
  ASSERT_EQ(CountOps(kernel, OpCode::kFor), 1);
  for (const Op& o : kernel.ir().ops) {
    if (o.op == OpCode::kFor) {
      EXPECT_EQ(o.results.size(), 2u);
    }
  }
}

// Materializing a literal grows the value table; the checks around it must
// not hold references into the table (found with AddressSanitizer).
TEST(BuilderFeatures, ManyLiteralOperands) {
  KernelBuilder k("literals_everywhere");
  Value p = k.arg(ptr(f32), "p");
  Value q = k.arg(ptr(i32), "q");
  Var v = k.var(0.0);
  for (int i = 0; i < 100; ++i) {
    v = 1.0;
    store(p, 2.0);
    EXPECT_EQ(atomic_cas(q, 0, i).type(), Type(i32));
  }
  Kernel kernel = Build(k);
  EXPECT_EQ(CountOps(kernel, OpCode::kStore), 100);
  EXPECT_EQ(CountOps(kernel, OpCode::kAtomicCas), 100);
}

TEST(BuilderFeatures, LoopBoundsTakeTheTypeOfTheirValue) {
  KernelBuilder k("wide_loop");
  Value n = k.arg(i64, "n");
  k.for_range(0, n, 4, [&](Value i) { EXPECT_EQ(i.type(), Type(i64)); });
  Build(k);
}

TEST(BuilderFeatures, ForEachTileIsThePersistentLoop) {
  KernelBuilder k("persistent");
  Value out = k.arg(ptr(i32), "out");
  Value num_tiles = k.arg(i32, "num_tiles");
  k.for_each_tile(num_tiles, [&](Value t) {
    EXPECT_EQ(t.type(), Type(i32));
    store(out + t, t);
  });
  Kernel kernel = Build(k);
  const KernelIR& ir = kernel.ir();
  const Op* loop = nullptr;
  for (const Op& o : ir.ops) {
    if (o.op == OpCode::kFor) loop = &o;
  }
  ASSERT_NE(loop, nullptr);
  ASSERT_EQ(loop->operands.size(), 3u);
  EXPECT_EQ(ir.ops[ir.values[loop->operands[0]].def_op].op, OpCode::kProgramId);
  EXPECT_EQ(loop->operands[1], num_tiles.id());
  EXPECT_EQ(ir.ops[ir.values[loop->operands[2]].def_op].op, OpCode::kNumPrograms);
}

// In a kernel of clusters, for_each_tile hands each tile to a cluster
// (program_id / 2 by num_programs / 2), cluster_rank is program_id % 2 and
// tma_multicast's tile stacks the cluster's two boxes; the IR names the
// cluster.
TEST(BuilderFeatures, ClustersShareTilesAndMulticastBoxes) {
  KernelBuilder k("clustered");
  k.cluster(2);
  Value map = k.tensor_map(bf16, {64, 64}, "map", Swizzle::k128B);
  Value out = k.arg(ptr(i32), "out");
  k.for_each_tile(k.arg(i32, "tiles"), [&](Value t) {
    EXPECT_EQ(tma_multicast(map, {t * 128, 0}).type(), Tile(bf16, {128, 64}));
    store(out + t * 2 + k.cluster_rank(), t);
  });
  Kernel kernel = Build(k);
  const KernelIR& ir = kernel.ir();
  EXPECT_EQ(ir.cluster, 2);
  const Op* loop = nullptr;
  for (const Op& o : ir.ops) {
    if (o.op == OpCode::kFor) loop = &o;
  }
  ASSERT_NE(loop, nullptr);
  EXPECT_EQ(ir.ops[ir.values[loop->operands[0]].def_op].op, OpCode::kDiv);
  EXPECT_EQ(ir.ops[ir.values[loop->operands[2]].def_op].op, OpCode::kDiv);
  EXPECT_EQ(CountOps(kernel, OpCode::kRem), 1);
  EXPECT_THAT(kernel.str(), HasSubstr(") cluster(2) {"));
  EXPECT_THAT(kernel.str(), HasSubstr("[2] : tile<bf16>[128,64]"));
}

}  // namespace
}  // namespace tessel
