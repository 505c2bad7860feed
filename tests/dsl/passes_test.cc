// close_stepped_carried (dsl/passes.h), which KernelBuilder::build runs:
// which values a for loop carries it closes, what takes their place, and
// which it leaves. That the closed values are what the steps made is
// ForRange.SteppedValuesAreWhatTheirStepsMake's (tests/codegen), on the
// host; that stepped pointers then take copy rings is
// Rings.SteppedPointersTakeRings's.
#include "dsl/passes.h"

#include <functional>

#include "dsl/builder.h"
#include "dsl/ops.h"
#include "dsl/verifier.h"
#include "gtest/gtest.h"

namespace tessel {
namespace {

KernelIR built(KernelBuilder& k) {
  absl::StatusOr<Kernel> kernel = k.build();
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_TRUE(verify(kernel->ir()).ok());
  return kernel->ir();
}

// The first for op of the kernel's top block.
const Op& loop_of(const KernelIR& ir) {
  for (int id : ir.blocks[0].ops) {
    if (ir.ops[id].op == OpCode::kFor) return ir.ops[id];
  }
  ADD_FAILURE() << "no loop";
  return ir.ops[0];
}

// The op of `block` (directly) with opcode `op`, the first of them.
const Op* find(const KernelIR& ir, int block, OpCode op) {
  for (int id : ir.blocks[block].ops) {
    if (ir.ops[id].op == op) return &ir.ops[id];
  }
  return nullptr;
}

const Op& def(const KernelIR& ir, int v) {
  EXPECT_GE(ir.values[v].def_op, 0);
  return ir.ops[ir.values[v].def_op];
}

// Sums x's rows through a pointer tile stepped by a row each iteration,
// and an i32 counter stepped by 3 beside it; `after` reads what the loop
// leaves them at.
KernelIR stepped(const Operand& lo, const Operand& step, bool after = false) {
  KernelBuilder k("stepped");
  Value x = k.arg(ptr(f32), "x"), y = k.arg(ptr(f32), "y"), n = k.arg(i32, "n");
  Value c = k.arange(0, 64);
  Var p = k.var(x + c), count = k.var(0), acc = k.var(k.zeros({64}, f32));
  k.for_range(lo, n, step, [&](Value) {
    acc = acc + load(p) + cast(count, f32);
    p = Value(p) + 64;
    count = count + 3;
  });
  store(y + c, acc);
  if (after) store(p, cast(count, f32));
  return built(k);
}

TEST(CloseStepped, PointersAndCountersSteppedAlikeEachIterationAreNoLongerCarried) {
  KernelIR ir = stepped(0, 1);
  const Op& f = loop_of(ir);
  const int body = f.blocks[0], iv = ir.blocks[body].args[0];
  ASSERT_EQ(f.results.size(), 1u);  // the sum alone
  // The load reads the start offset by iv * 64 elements, in i64.
  const Op& at = def(ir, find(ir, body, OpCode::kLoad)->operands[0]);
  ASSERT_EQ(at.op, OpCode::kPtrAdd);
  EXPECT_EQ(ir.values[at.operands[0]].def_block, 0);
  const Op& offsets = def(ir, at.operands[1]);
  ASSERT_EQ(offsets.op, OpCode::kSplat);
  const Op& times = def(ir, offsets.operands[0]);
  ASSERT_EQ(times.op, OpCode::kMul);
  EXPECT_EQ(ir.type(times.results[0]), Type(i64));
  const Op& index = def(ir, times.operands[0]);
  ASSERT_EQ(index.op, OpCode::kCast);
  EXPECT_EQ(index.operands[0], iv);
  // The counter is 0 + 3 * the index, in its own type; nothing steps
  // either any more.
  EXPECT_EQ(find(ir, body, OpCode::kPtrAdd), &at);
  EXPECT_EQ(find(ir, body, OpCode::kDiv), nullptr);
}

TEST(CloseStepped, LoopsFromElsewhereOrByLargerStepsDivideTheirDistance) {
  KernelIR ir = stepped(5, 2);
  const Op& f = loop_of(ir);
  ASSERT_EQ(f.results.size(), 1u);
  const int body = f.blocks[0];
  const Op* div = find(ir, body, OpCode::kDiv);
  ASSERT_NE(div, nullptr);
  EXPECT_EQ(def(ir, div->operands[0]).op, OpCode::kSub);
  EXPECT_EQ(def(ir, div->operands[1]).op, OpCode::kConstant);
  EXPECT_EQ(def(ir, div->operands[1]).ints[0], 2);
}

TEST(CloseStepped, ValuesReadAfterTheLoopStayCarriedButTheBodyReadsTheirClosedForm) {
  KernelIR ir = stepped(0, 1, /*after=*/true);
  const Op& f = loop_of(ir);
  ASSERT_EQ(f.results.size(), 3u);
  const int body = f.blocks[0];
  const Op* load = find(ir, body, OpCode::kLoad);
  for (int arg : ir.blocks[body].args) EXPECT_NE(load->operands[0], arg);
}

TEST(CloseStepped, StepsThatChangeOrLoopsOfUnknownStepAreLeftAlone) {
  auto carried = [](const std::function<void(KernelBuilder&, Var&, Value i)>& step, bool constant_step = true) {
    KernelBuilder k("left");
    Value x = k.arg(ptr(f32), "x"), y = k.arg(ptr(f32), "y"), n = k.arg(i32, "n");
    Value c = k.arange(0, 64);
    Var p = k.var(x + c), acc = k.var(k.zeros({64}, f32));
    k.for_range(0, n, constant_step ? k.constant(1, i32) : n / n, [&](Value i) {
      acc = acc + load(p);
      step(k, p, i);
    });
    store(y + c, acc);
    KernelIR ir = built(k);
    return loop_of(ir).results.size();
  };
  // By the induction variable: a step that grows.
  EXPECT_EQ(carried([](KernelBuilder&, Var& p, Value i) { p = Value(p) + i; }), 2u);
  // By a loaded amount.
  EXPECT_EQ(carried([](KernelBuilder& k, Var& p, Value) { p = Value(p) + load(k.arg(ptr(i32), "by")); }), 2u);
  // Only in some iterations.
  EXPECT_EQ(carried([](KernelBuilder& k, Var& p, Value i) { k.if_(i > 2, [&] { p = Value(p) + 64; }); }), 2u);
  // A loop whose step is known only at launch.
  EXPECT_EQ(carried([](KernelBuilder&, Var& p, Value) { p = Value(p) + 64; }, false), 2u);
  EXPECT_EQ(carried([](KernelBuilder&, Var& p, Value) { p = Value(p) + 64; }), 1u);
  // Sums of floats round at every step: the accumulator stays.
  KernelBuilder k("floats");
  Value y = k.arg(ptr(f32), "y"), n = k.arg(i32, "n");
  Var s = k.var(k.constant(0.0, f32));
  k.for_range(0, n, 1, [&](Value) { s = s + 0.1f; });
  store(y, s);
  EXPECT_EQ(loop_of(built(k)).results.size(), 1u);
}

}  // namespace
}  // namespace tessel
