// Builder diagnostics: each mistake yields kInvalidArgument with the file and
// line of the user's call and a message naming what went wrong.
#include <functional>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "dsl/builder.h"
#include "dsl/ops.h"
#include "dsl/random.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Whether building `k` fails with kInvalidArgument at `line` of this file
// with a message that contains `words`.
::testing::AssertionResult FailsAt(KernelBuilder& k, int line, absl::string_view words) {
  absl::StatusOr<Kernel> kernel = k.build();
  if (kernel.ok()) return ::testing::AssertionFailure() << "the kernel built:\n" << kernel->str();
  const absl::Status& s = kernel.status();
  std::string where = absl::StrCat("diagnostics_test.cc:", line, ": ");
  if (s.code() != absl::StatusCode::kInvalidArgument || !absl::StrContains(s.message(), where) ||
      !absl::StrContains(s.message(), words)) {
    return ::testing::AssertionFailure() << "expected kInvalidArgument at " << where << "containing '" << words
                                         << "', got " << s;
  }
  return ::testing::AssertionSuccess();
}

TEST(Diagnostics, ClustersTakeTwoToEightProgramsSetFirst) {
  for (int programs : {1, 9}) {
    KernelBuilder k("k");
    const int line = __LINE__ + 1;
    k.cluster(programs);
    EXPECT_TRUE(FailsAt(k, line, absl::StrCat("cluster: a cluster takes 2 to 8 programs, got ", programs)));
  }
  KernelBuilder k("k");
  k.program_id();
  const int line = __LINE__ + 1;
  k.cluster(2);
  EXPECT_TRUE(FailsAt(k, line, "cluster: must be set once, before any op is built"));
}

TEST(Diagnostics, MulticastNeedsClustersAndBoxesOnWholeBlocks) {
  {
    KernelBuilder k("k");
    Value map = k.tensor_map(bf16, {64, 64}, "map", Swizzle::k128B);
    const int line = __LINE__ + 1;
    tma_multicast(map, {0, 0});
    EXPECT_TRUE(FailsAt(k, line, "tma_multicast: the kernel has no clusters (KernelBuilder::cluster sets them)"));
  }
  // 4 rows of 128 bytes, swizzled: half of a 1 KiB block; unswizzled, 3
  // rows of 32 bytes: 96 bytes, short of a 128-byte block.
  for (auto [box, swizzle, words] :
       {std::tuple{Shape{4, 64}, Swizzle::k128B, "fills 512 bytes of each panel of the tile, not a multiple of 1024"},
        std::tuple{Shape{3, 16}, Swizzle::kNone, "fills 96 bytes of each panel of the tile, not a multiple of 128"}}) {
    KernelBuilder k("k");
    k.cluster(2);
    Value map = k.tensor_map(bf16, box, "map", swizzle);
    const int line = __LINE__ + 1;
    tma_multicast(map, {0, 0});
    EXPECT_TRUE(FailsAt(k, line, words));
  }
}

TEST(Diagnostics, MismatchedOperandTypes) {
  KernelBuilder k("k");
  Value x = cast(k.arange(0, 64), u32);
  Value i = k.arange(0, 64);
  const int line = __LINE__ + 1;
  x + i;
  EXPECT_TRUE(FailsAt(
      k, line, "operator+: mismatched types tile<u32>[64] and tile<i32>[64] (neither holds the other); cast one side"));
}

TEST(Diagnostics, FastDivisionOfIntegers) {
  KernelBuilder k("k");
  Value i = k.arange(0, 64);
  const int line = __LINE__ + 1;
  div(i, 3, MathForm::kFast);
  EXPECT_TRUE(FailsAt(k, line, "operator/: MathForm::kFast needs floating-point operands, got tile<i32>[64]"));
}

TEST(Diagnostics, RankMismatchInBroadcasting) {
  KernelBuilder k("k");
  Value row = k.zeros({64}, f32);
  Value block = k.zeros({64, 64}, f32);
  const int line = __LINE__ + 1;
  row / block;
  EXPECT_TRUE(FailsAt(k, line, "operator/: rank mismatch between tile<f32>[64] and tile<f32>[64,64]"));
}

TEST(Diagnostics, ShapesThatDoNotBroadcast) {
  KernelBuilder k("k");
  Value a = k.zeros({64, 8}, f32);
  Value b = k.zeros({32, 8}, f32);
  const int line = __LINE__ + 1;
  a - b;
  EXPECT_TRUE(FailsAt(k, line,
                      "operator-: shapes of tile<f32>[64,8] and tile<f32>[32,8] do not broadcast "
                      "(dimension 0: 64 vs 32)"));
}

TEST(Diagnostics, FloatLiteralStoredThroughAnIntegerPointer) {
  KernelBuilder k("k");
  Value p = k.arg(ptr(i32), "p");
  const int line = __LINE__ + 1;
  store(p, 0.5);
  EXPECT_TRUE(FailsAt(k, line, "store: float literal 0.5 cannot combine with i32 (cast one side)"));
}

TEST(Diagnostics, IntegerLiteralThatDoesNotFit) {
  KernelBuilder k("k");
  Value small = cast(k.arg(i32, "n"), i8);
  const int line = __LINE__ + 1;
  small + 300;
  EXPECT_TRUE(FailsAt(k, line, "operator+: integer literal 300 does not fit in i8"));
}

TEST(Diagnostics, NegativeLiteralForUnsigned) {
  KernelBuilder k("k");
  Value u = k.arg(u32, "u");
  const int line = __LINE__ + 1;
  u < -1;
  EXPECT_TRUE(FailsAt(k, line, "operator<: integer literal -1 does not fit in u32"));
}

TEST(Diagnostics, TmaLoadWithWrongCoordinateCount) {
  KernelBuilder k("k");
  Value map = k.tensor_map(bf16, {64, 128}, "a");
  const int line = __LINE__ + 1;
  tma_load(map, {0});
  EXPECT_TRUE(FailsAt(k, line, "tma_load: 1 coordinates for a rank-2 tensor map"));
}

TEST(Diagnostics, TmaLoadOnNonTensorMap) {
  KernelBuilder k("k");
  Value p = k.arg(ptr(bf16), "p");
  const int line = __LINE__ + 1;
  tma_load(p, {0, 0});
  EXPECT_TRUE(FailsAt(k, line, "tma_load: needs a tensor map, got ptr<bf16>"));
}

TEST(Diagnostics, TensorMapBoxLargerThan256) {
  KernelBuilder k("k");
  const int line = __LINE__ + 1;
  k.tensor_map(f32, {512, 64}, "a");
  EXPECT_TRUE(FailsAt(k, line, "tensor_map 'a': box[0] = 512 is outside [1, 256]"));
}

TEST(Diagnostics, TensorMapInnerBoxBytesNotMultipleOf16) {
  KernelBuilder k("k");
  const int line = __LINE__ + 1;
  k.tensor_map(f32, {64, 2}, "a");
  EXPECT_TRUE(FailsAt(k, line, "tensor_map 'a': box[1] * 4 bytes = 8 bytes is not a multiple of 16"));
}

TEST(Diagnostics, SwizzleTooSmallForInnerBox) {
  KernelBuilder k("k");
  const int line = __LINE__ + 1;
  k.tensor_map(bf16, {64, 40}, "a", Swizzle::k64B);
  EXPECT_TRUE(FailsAt(k, line,
                      "tensor_map 'a': 64B swizzle copies an inner box wider than 64 bytes as panels of 64 bytes, "
                      "but box[1] * 2 bytes = 80 bytes is not a whole number of them"));
}

TEST(Diagnostics, TensorMapOfI1) {
  KernelBuilder k("k");
  const int line = __LINE__ + 1;
  k.tensor_map(i1, {16, 16}, "a");
  EXPECT_TRUE(FailsAt(k, line, "tensor_map 'a': dtype i1 is not a TMA data type"));
}

TEST(Diagnostics, TmaStoreTileNotMatchingBox) {
  KernelBuilder k("k");
  Value map = k.tensor_map(bf16, {64, 128}, "a");
  Value tile = k.zeros({32, 128}, bf16);
  const int line = __LINE__ + 1;
  tma_store(map, {0, 0}, tile);
  EXPECT_TRUE(FailsAt(k, line,
                      "tma_store: the tile tile<bf16>[32,128] does not match the tensor map's box "
                      "tile<bf16>[64,128]"));
}

TEST(Diagnostics, TmaReduceTakesAddIntoItsTypes) {
  {
    KernelBuilder k("k");
    Value map = k.tensor_map(f32, {64, 32}, "a");
    const int line = __LINE__ + 1;
    tma_reduce(AtomicOp::kMax, map, {0, 0}, k.zeros({64, 32}, f32));
    EXPECT_TRUE(FailsAt(k, line, "tma_reduce: only AtomicOp::kAdd is supported, got max"));
  }
  {
    KernelBuilder k("k");
    Value map = k.tensor_map(i8, {64, 32}, "a");
    const int line = __LINE__ + 1;
    tma_reduce(AtomicOp::kAdd, map, {0, 0}, k.zeros({64, 32}, i8));
    EXPECT_TRUE(FailsAt(k, line, "tma_reduce: adds into f32, f16, bf16 or i32 tensor maps, got i8"));
  }
  {
    KernelBuilder k("k");
    Value map = k.tensor_map(f32, {64, 32}, "a");
    const int line = __LINE__ + 1;
    tma_reduce(AtomicOp::kAdd, map, {0, 0}, k.zeros({64, 32}, bf16));
    EXPECT_TRUE(FailsAt(k, line,
                        "tma_reduce: the tile tile<bf16>[64,32] does not match the tensor map's box "
                        "tile<f32>[64,32]"));
  }
}

TEST(Diagnostics, ValueFromAnotherKernel) {
  KernelBuilder other("other");
  Value foreign = other.arg(i32, "n");
  KernelBuilder k("k");
  Value n = k.arg(i32, "n");
  const int line = __LINE__ + 1;
  n + foreign;
  EXPECT_TRUE(FailsAt(k, line, "operator+: operand belongs to another kernel (kernel 'other')"));
  EXPECT_TRUE(other.build().ok());
}

TEST(Diagnostics, EmptyValue) {
  KernelBuilder k("k");
  Value n = k.arg(i32, "n");
  Value empty;
  const int line = __LINE__ + 1;
  n + empty;
  EXPECT_TRUE(FailsAt(k, line, "operator+: operand is an empty Value"));
}

TEST(Diagnostics, LoopBodyValueUsedAfterTheLoop) {
  KernelBuilder k("k");
  Value inner;
  k.for_range(0, 4, 1, [&](Value i) { inner = i * 2; });
  const int line = __LINE__ + 1;
  inner + 1;
  EXPECT_TRUE(FailsAt(k, line, "was defined inside a loop body or if_ branch that has ended; carry it out with a Var"));
}

TEST(Diagnostics, LoopCarriedValueChangesType) {
  KernelBuilder k("k");
  Value acc = k.zeros({64}, f32);
  auto body = [](Value, std::span<const Value> c) { return std::vector<Value>{cast(c[0], f16)}; };
  const int line = __LINE__ + 1;
  k.for_range(0, 4, 1, {acc}, body);
  EXPECT_TRUE(FailsAt(k, line, "for_range: loop-carried value 0 changes type from tile<f32>[64] to tile<f16>[64]"));
}

TEST(Diagnostics, LoopBodyReturnsWrongNumberOfValues) {
  KernelBuilder k("k");
  Value acc = k.zeros({64}, f32);
  auto body = [](Value, std::span<const Value>) { return std::vector<Value>{}; };
  const int line = __LINE__ + 1;
  k.for_range(0, 4, 1, {acc}, body);
  EXPECT_TRUE(FailsAt(k, line, "for_range: the body returned 0 values for 1 carried values"));
}

TEST(Diagnostics, LoopBoundsNotIntegers) {
  KernelBuilder k("k");
  Value x = k.arg(f32, "x");
  const int line = __LINE__ + 1;
  k.for_range(0, x, 1, [](Value) {});
  EXPECT_TRUE(FailsAt(k, line, "for_range: loop bounds must be integer scalars, got f32"));
}

TEST(Diagnostics, LoopBoundsOfDifferentTypes) {
  KernelBuilder k("k");
  Value lo = k.arg(i32, "lo");
  Value hi = k.arg(i64, "hi");
  const int line = __LINE__ + 1;
  k.for_range(lo, hi, 1, [](Value) {});
  EXPECT_TRUE(FailsAt(k, line, "for_range: loop bounds have different types i32 and i64"));
}

TEST(Diagnostics, VarAssignedValueOfAnotherType) {
  KernelBuilder k("k");
  Var v = k.var(0.0);
  Value n = k.arg(i32, "n");
  const int line = __LINE__ + 1;
  v = n;
  EXPECT_TRUE(FailsAt(k, line,
                      "Var assignment: a Var of type f32 cannot take a value of type i32; a Var keeps its "
                      "type"));
}

TEST(Diagnostics, IfConditionNotI1) {
  KernelBuilder k("k");
  Value n = k.arg(i32, "n");
  const int line = __LINE__ + 1;
  k.if_(n, [] {});
  EXPECT_TRUE(FailsAt(k, line, "if_: the condition must be a scalar i1, got i32"));
}

TEST(Diagnostics, IfConditionIsATile) {
  KernelBuilder k("k");
  Value lanes = k.arange(0, 64) < 3;
  const int line = __LINE__ + 1;
  k.if_(lanes, [] {});
  EXPECT_TRUE(FailsAt(k, line, "if_: the condition must be a scalar i1, got tile<i1>[64]"));
}

TEST(Diagnostics, WhileConditions) {
  {
    KernelBuilder k("k");
    Value n = k.arg(i32, "n");
    const int line = __LINE__ + 1;
    k.while_([&] { return n; }, [] {});
    EXPECT_TRUE(FailsAt(k, line, "while_: the condition must be a scalar i1, got i32"));
  }
  {
    KernelBuilder k("k");
    Value lanes = k.arange(0, 64) < 3;
    const int line = __LINE__ + 1;
    k.while_([&] { return lanes; }, [] {});
    EXPECT_TRUE(FailsAt(k, line, "while_: the condition must be a scalar i1, got tile<i1>[64]"));
  }
  {
    KernelBuilder k("k");
    Var v = k.var(0);
    const int line = __LINE__ + 1;
    k.while_(
        [&] {
          v = v + 1;
          return v < 10;
        },
        [] {});
    EXPECT_TRUE(FailsAt(k, line, "while_: the condition assigned a Var; assign Vars in the body"));
  }
}

// A Var keeps one type, so a branch that assigns another type fails at the
// assignment, before if_ compares the branches.
TEST(Diagnostics, VarAssignedDifferentTypesInThenAndElse) {
  KernelBuilder k("k");
  Value n = k.arg(i32, "n");
  Value c = n > 0;
  Var v = k.var(n);
  int line = 0;
  k.if_(
      c, [&] { v = n + 1; },
      [&] {
        Value wide = cast(n, i64);
        line = __LINE__ + 1;
        v = wide;
      });
  EXPECT_TRUE(FailsAt(k, line, "Var assignment: a Var of type i32 cannot take a value of type i64"));
}

TEST(Diagnostics, LoadOnNonPointer) {
  KernelBuilder k("k");
  Value offs = k.arange(0, 64);
  const int line = __LINE__ + 1;
  load(offs);
  EXPECT_TRUE(FailsAt(k, line, "load: needs a pointer or a tile of pointers, got tile<i32>[64]"));
}

TEST(Diagnostics, StoreValueNotMatchingPointee) {
  KernelBuilder k("k");
  Value x = k.arg(ptr(f32), "x");
  Value offs = k.arange(0, 64);
  Value ptrs = x + offs;
  const int line = __LINE__ + 1;
  store(ptrs, offs);
  EXPECT_TRUE(FailsAt(k, line, "store: value of type tile<i32>[64] does not match the pointee type f32"));
}

TEST(Diagnostics, StoreValueLargerThanPointers) {
  KernelBuilder k("k");
  Value x = k.arg(ptr(f32), "x");
  Value tile = k.zeros({64}, f32);
  const int line = __LINE__ + 1;
  store(x, tile);
  EXPECT_TRUE(FailsAt(k, line, "store: value tile<f32>[64] is larger than the pointer operand ptr<f32>"));
}

TEST(Diagnostics, MaskNotI1) {
  KernelBuilder k("k");
  Value x = k.arg(ptr(f32), "x");
  Value offs = k.arange(0, 64);
  Value ptrs = x + offs;
  const int line = __LINE__ + 1;
  load(ptrs, offs, 0.0);
  EXPECT_TRUE(FailsAt(k, line, "load: the mask must be i1, got tile<i32>[64]"));
}

TEST(Diagnostics, DotShapesDoNotChain) {
  KernelBuilder k("k");
  Value a = k.zeros({64, 32}, bf16);
  Value b = k.zeros({16, 64}, bf16);
  Value acc = k.zeros({64, 64}, f32);
  const int line = __LINE__ + 1;
  dot(a, b, acc);
  EXPECT_TRUE(FailsAt(k, line, "dot: shapes do not chain: [64,32] @ [16,64] + [64,64]"));
}

TEST(Diagnostics, DotDtypeCombinationNotAllowed) {
  KernelBuilder k("k");
  Value a = k.zeros({64, 32}, bf16);
  Value b = k.zeros({32, 64}, bf16);
  Value acc = k.zeros({64, 64}, bf16);
  const int line = __LINE__ + 1;
  dot(a, b, acc);
  EXPECT_TRUE(FailsAt(k, line, "dot: no matrix product of bf16 operands into a bf16 accumulator"));
}

TEST(Diagnostics, ReductionAxisOutOfRange) {
  KernelBuilder k("k");
  Value x = k.zeros({64, 32}, f32);
  const int line = __LINE__ + 1;
  sum(x, 2);
  EXPECT_TRUE(FailsAt(k, line, "sum: axis 2 is out of range for tile<f32>[64,32]"));
}

TEST(Diagnostics, ArgReductionsNameWhatTheyNeed) {
  {
    KernelBuilder k("k");
    Value x = k.zeros({64, 32}, f32);
    const int line = __LINE__ + 1;
    argmax(x, -1);
    EXPECT_TRUE(FailsAt(k, line, "argmax: axis -1 is out of range for tile<f32>[64,32]"));
  }
  {
    KernelBuilder k("k");
    Value flags = k.arange(0, 64) < 3;
    const int line = __LINE__ + 1;
    argmin(flags, 0);
    EXPECT_TRUE(FailsAt(k, line, "argmin: not defined on i1 tiles"));
  }
  {
    KernelBuilder k("k");
    Value x = k.constant(1.0f, f32);
    const int line = __LINE__ + 1;
    argmax(x, 0);
    EXPECT_TRUE(FailsAt(k, line, "argmax: needs a tile of numbers, got f32"));
  }
}

TEST(Diagnostics, ScansAndSortsNameWhatTheyNeed) {
  {
    KernelBuilder k("k");
    Value x = k.zeros({64, 32}, f32);
    const int line = __LINE__ + 1;
    cumsum(x, 2);
    EXPECT_TRUE(FailsAt(k, line, "cumsum: axis 2 is out of range for tile<f32>[64,32]"));
  }
  {
    KernelBuilder k("k");
    Value flags = k.arange(0, 64) < 3;
    const int line = __LINE__ + 1;
    cumprod(flags, 0);
    EXPECT_TRUE(FailsAt(k, line, "cumprod: not defined on i1 tiles; cast them to an integer type first"));
  }
  {
    KernelBuilder k("k");
    Value x = k.constant(1.0f, f32);
    const int line = __LINE__ + 1;
    cummax(x, 0);
    EXPECT_TRUE(FailsAt(k, line, "cummax: needs a tile of numbers, got f32"));
  }
  {
    KernelBuilder k("k");
    Value p = k.arg(ptr(f32), "p");
    Value ptrs = p + k.arange(0, 16);
    const int line = __LINE__ + 1;
    cummin(ptrs, 0, /*reverse=*/true);
    EXPECT_TRUE(FailsAt(k, line, "cummin: needs a tile of numbers, got tile<ptr<f32>>[16]"));
  }
  {
    KernelBuilder k("k");
    Value x = k.zeros({64, 32}, f32);
    const int line = __LINE__ + 1;
    sort(x, 2, /*descending=*/true);
    EXPECT_TRUE(FailsAt(k, line, "sort: axis 2 is out of range for tile<f32>[64,32]"));
  }
  {
    KernelBuilder k("k");
    Value flags = k.arange(0, 64) < 3;
    const int line = __LINE__ + 1;
    sort(flags, 0);
    EXPECT_TRUE(FailsAt(k, line, "sort: not defined on i1 tiles; cast them to an integer type first"));
  }
  {
    KernelBuilder k("k");
    Value x = k.constant(1, i32);
    const int line = __LINE__ + 1;
    sort(x, 0);
    EXPECT_TRUE(FailsAt(k, line, "sort: needs a tile of numbers, got i32"));
  }
  {
    KernelBuilder k("k");
    Value x = k.zeros({8}, f32);
    const int line = __LINE__ + 1;
    argsort(x, 1);
    EXPECT_TRUE(FailsAt(k, line, "argsort: axis 1 is out of range for tile<f32>[8]"));
  }
}

TEST(Diagnostics, GatherOperands) {
  {
    KernelBuilder k("k");
    Value x = k.zeros({8, 16}, f32);
    const int line = __LINE__ + 1;
    gather(x, k.zeros({8, 4}, f32), 1);
    EXPECT_TRUE(FailsAt(k, line, "gather: the index is a tile of integers, got tile<f32>[8,4]"));
  }
  {
    KernelBuilder k("k");
    Value x = k.zeros({8, 16}, f32);
    const int line = __LINE__ + 1;
    gather(x, k.arange(0, 4) < 2, 0);
    EXPECT_TRUE(FailsAt(k, line, "gather: the index is a tile of integers, got tile<i1>[4]"));
  }
  {
    KernelBuilder k("k");
    Value p = k.arg(ptr(f32), "p");
    const int line = __LINE__ + 1;
    gather(p + k.arange(0, 16), k.arange(0, 4), 0);
    EXPECT_TRUE(FailsAt(k, line, "gather: the source is a tile of numbers or i1, got tile<ptr<f32>>[16]"));
  }
  {
    KernelBuilder k("k");
    Value x = k.constant(1.0, f32);
    const int line = __LINE__ + 1;
    gather(x, k.arange(0, 4), 0);
    EXPECT_TRUE(FailsAt(k, line, "gather: the source is a tile of numbers or i1, got f32"));
  }
  {
    KernelBuilder k("k");
    Value x = k.zeros({8, 16}, f32);
    const int line = __LINE__ + 1;
    gather(x, k.zeros({8, 16}, i32), 2);
    EXPECT_TRUE(FailsAt(k, line, "gather: axis 2 is out of range for tile<f32>[8,16]"));
  }
  {
    KernelBuilder k("k");
    Value x = k.zeros({8, 16}, f32);
    const int line = __LINE__ + 1;
    gather(x, k.zeros({4, 4}, i32), 1);
    EXPECT_TRUE(FailsAt(k, line,
                        "gather: the index [4,4] must have the source's rank and its sizes but along axis 1 "
                        "(the source is [8,16])"));
  }
  {
    KernelBuilder k("k");
    Value x = k.zeros({8, 16}, f32);
    const int line = __LINE__ + 1;
    gather(x, k.arange(0, 16), 1);
    EXPECT_TRUE(FailsAt(k, line,
                        "gather: the index [16] must have the source's rank and its sizes but along axis 1 "
                        "(the source is [8,16])"));
  }
}

// A builder call that must fail, and words its error must hold.
struct BadCall {
  std::function<void(KernelBuilder&, Loc)> build;
  const char* message;
};

// Each call fails the build with its message (reported at the call's line
// where `at_line`).
void ExpectEachFails(const std::vector<BadCall>& bad, bool at_line) {
  for (const BadCall& b : bad) {
    KernelBuilder k("k");
    const Loc at = Loc::current();
    b.build(k, at);
    if (at_line) {
      EXPECT_TRUE(FailsAt(k, static_cast<int>(at.line()), b.message)) << b.message;
      continue;
    }
    absl::StatusOr<Kernel> kernel = k.build();
    ASSERT_FALSE(kernel.ok()) << b.message;
    EXPECT_THAT(kernel.status().message(), HasSubstr(b.message));
  }
}

TEST(Diagnostics, HistogramOperands) {
  const std::vector<BadCall> bad = {
      {[](KernelBuilder& k, Loc at) { histogram(k.zeros({16}, f32), 8, at); },
       "histogram: counts a tile of integers, got tile<f32>[16]"},
      {[](KernelBuilder& k, Loc at) { histogram(k.arange(0, 16) < 4, 8, at); },
       "histogram: counts a tile of integers, got tile<i1>[16]"},
      {[](KernelBuilder& k, Loc at) { histogram(k.constant(3, i32), 8, at); },
       "histogram: counts a tile of integers, got i32"},
      {[](KernelBuilder& k, Loc at) { histogram(k.arg(ptr(i32), "p") + k.arange(0, 16), 8, at); },
       "histogram: counts a tile of integers, got tile<ptr<i32>>[16]"},
      {[](KernelBuilder& k, Loc at) { histogram(k.arange(0, 16), 0, at); }, "histogram: bins must be positive, got 0"},
      {[](KernelBuilder& k, Loc at) { histogram(k.arange(0, 16), -4, at); },
       "histogram: bins must be positive, got -4"},
      {[](KernelBuilder& k, Loc at) { histogram(k.arange(0, 16), (int64_t{1} << 20) + 1, at); },
       "histogram: tile [1048577] has more than 2^20 elements"},
      {[](KernelBuilder& k, Loc at) { histogram(k.arange(0, 16), 8, k.arange(0, 16), at); },
       "histogram: the mask must be i1, got tile<i32>[16]"},
      {[](KernelBuilder& k, Loc at) { histogram(k.arange(0, 16), 8, k.arange(0, 32) < 4, at); },
       "histogram: shapes of tile<i32>[16] and tile<i1>[32] do not broadcast (dimension 0: 16 vs 32)"},
      {[](KernelBuilder& k, Loc at) {
         histogram(k.zeros({1, 16}, i32), 8, k.zeros({4, 16}, i32) < 4, at);
       },
       "histogram: mask tile<i1>[4,16] is larger than the counted tile tile<i32>[1,16]"},
  };
  ExpectEachFails(bad, /*at_line=*/true);
}

TEST(Diagnostics, ReduceFnOperands) {
  using Tuple = std::span<const Value>;
  auto pick_a = [](Tuple a, Tuple) { return std::vector<Value>(a.begin(), a.end()); };
  const std::vector<BadCall> bad = {
      {[](KernelBuilder&, Loc at) { reduce(std::vector<Value>{}, 0, {}, at); }, "reduce: needs at least one tile"},
      {[&](KernelBuilder& k, Loc at) {
         reduce({k.zeros({8}, f32), k.zeros({4}, f32)}, 0, pick_a, at);
       },
       "reduce: the tiles must have one shape, got tile<f32>[8] and tile<f32>[4]"},
      {[&](KernelBuilder& k, Loc at) { reduce({k.arg(ptr(f32), "p") + k.arange(0, 8)}, 0, pick_a, at); },
       "reduce: needs tiles of numbers or i1, got tile<ptr<f32>>[8]"},
      {[&](KernelBuilder& k, Loc at) { reduce({k.constant(1.0, f32)}, 0, pick_a, at); },
       "reduce: needs tiles of numbers or i1, got f32"},
      {[&](KernelBuilder& k, Loc at) {
         reduce({k.zeros({8, 4}, f32)}, 2, pick_a, at);
       },
       "reduce: axis 2 is out of range for tile<f32>[8,4]"},
      {[](KernelBuilder& k, Loc at) {
         reduce(
             {k.zeros({8}, f32), k.zeros({8}, i32)}, 0, [](Tuple a, Tuple) { return std::vector<Value>{a[0]}; }, at);
       },
       "reduce: the combine function returned 1 values for 2 tiles"},
      {[](KernelBuilder& k, Loc at) {
         reduce(
             {k.zeros({8}, f32)}, 0, [](Tuple a, Tuple b) { return std::vector<Value>{cast(a[0] + b[0], f64)}; }, at);
       },
       "reduce: the combine function's value 0 must be f32, got f64"},
      {[](KernelBuilder& k, Loc at) {
         reduce(
             {k.zeros({8}, i32)}, 0, [](Tuple, Tuple b) { return std::vector<Value>{load(b[0])}; }, at);
       },
       "load: needs a pointer"},
  };
  ExpectEachFails(bad, /*at_line=*/false);
}

// associative_scan checks its tiles and its combine function as reduce
// does, under its own name.
TEST(Diagnostics, AssociativeScanOperands) {
  using Tuple = std::span<const Value>;
  auto pick_a = [](Tuple a, Tuple) { return std::vector<Value>(a.begin(), a.end()); };
  const std::vector<BadCall> bad = {
      {[](KernelBuilder&, Loc at) { associative_scan(std::vector<Value>{}, 0, {}, false, at); },
       "associative_scan: needs at least one tile"},
      {[&](KernelBuilder& k, Loc at) {
         associative_scan({k.zeros({8}, f32), k.zeros({4}, f32)}, 0, pick_a, false, at);
       },
       "associative_scan: the tiles must have one shape, got tile<f32>[8] and tile<f32>[4]"},
      {[&](KernelBuilder& k, Loc at) { associative_scan({k.constant(1, i32)}, 0, pick_a, true, at); },
       "associative_scan: needs tiles of numbers or i1, got i32"},
      {[&](KernelBuilder& k, Loc at) {
         associative_scan({k.zeros({8, 4}, f32)}, -1, pick_a, false, at);
       },
       "associative_scan: axis -1 is out of range for tile<f32>[8,4]"},
      {[](KernelBuilder& k, Loc at) {
         associative_scan(
             {k.zeros({8}, f32), k.zeros({8}, i32)}, 0, [](Tuple a, Tuple) { return std::vector<Value>{a[0]}; }, false,
             at);
       },
       "associative_scan: the combine function returned 1 values for 2 tiles"},
      {[](KernelBuilder& k, Loc at) {
         associative_scan(
             {k.zeros({8}, u8)}, 0, [](Tuple a, Tuple b) { return std::vector<Value>{cast(a[0] + b[0], i32)}; }, false,
             at);
       },
       "associative_scan: the combine function's value 0 must be u8, got i32"},
  };
  ExpectEachFails(bad, /*at_line=*/false);
  KernelBuilder k("k");
  Value p = k.arg(ptr(f32), "p");
  int line = 0;
  associative_scan(k.zeros({8}, f32), 0, [&](const Value& a, const Value& b) {
    line = __LINE__ + 1;
    store(p, a);
    return a + b;
  });
  EXPECT_TRUE(
      FailsAt(k, line, "associative_scan: the combine function may use elementwise ops on scalars only, got store"));
}

// The combine function names the op it may not hold, at that op's line.
TEST(Diagnostics, ReduceFnCombinesScalarsOnly) {
  {
    KernelBuilder k("k");
    Value x = k.zeros({8}, f32), other = k.zeros({4}, f32);
    int line = 0;
    reduce(x, 0, [&](const Value& a, const Value&) {
      line = __LINE__ + 1;
      Value t = a + other;
      return max(t, 0);
    });
    EXPECT_TRUE(FailsAt(k, line,
                        "reduce: the combine function may use elementwise ops on scalars only, got splat making "
                        "tile<f32>[4]"));
  }
  {
    KernelBuilder k("k");
    Value p = k.arg(ptr(f32), "p");
    int line = 0;
    reduce(k.zeros({8}, f32), 0, [&](const Value& a, const Value& b) {
      line = __LINE__ + 1;
      store(p, a);
      return a + b;
    });
    EXPECT_TRUE(FailsAt(k, line, "reduce: the combine function may use elementwise ops on scalars only, got store"));
  }
}

TEST(Diagnostics, ExpandDimsAxisOutOfRange) {
  KernelBuilder k("k");
  Value x = k.arange(0, 64);
  const int line = __LINE__ + 1;
  expand_dims(x, 2);
  EXPECT_TRUE(FailsAt(k, line, "expand_dims: axis 2 is out of range for tile<i32>[64]"));
}

TEST(Diagnostics, ReshapeElementCountMismatch) {
  KernelBuilder k("k");
  Value x = k.arange(0, 64);
  const int line = __LINE__ + 1;
  reshape(x, {16, 8});
  EXPECT_TRUE(FailsAt(k, line, "reshape: cannot reshape tile<i32>[64] to [16,8]"));
}

TEST(Diagnostics, TransWithBadPermutation) {
  KernelBuilder k("k");
  Value x = k.zeros({64, 32}, f32);
  const int line = __LINE__ + 1;
  trans(x, {0, 0});
  EXPECT_TRUE(FailsAt(k, line, "trans: [0,0] is not a permutation of the 2 dimensions of tile<f32>[64,32]"));
}

TEST(Diagnostics, NarrowOutsideTheTile) {
  struct Case {
    int axis;
    int64_t start, size;
    std::string message;
  };
  for (const Case& c :
       {Case{2, 0, 1, "narrow: axis 2 is out of range for tile<f32>[64,32]"},
        Case{-1, 0, 1, "narrow: axis -1 is out of range for tile<f32>[64,32]"},
        Case{1, 16, 17, "narrow: 17 elements from 16 do not lie within the 32 along axis 1 of tile<f32>[64,32]"},
        Case{0, -1, 4, "narrow: 4 elements from -1 do not lie within the 64 along axis 0 of tile<f32>[64,32]"},
        Case{0, 0, 0, "narrow: 0 elements from 0 do not lie within the 64 along axis 0 of tile<f32>[64,32]"}}) {
    KernelBuilder k("k");
    Value x = k.zeros({64, 32}, f32);
    const int line = __LINE__ + 1;
    narrow(x, c.axis, c.start, c.size);
    EXPECT_TRUE(FailsAt(k, line, c.message));
  }
  KernelBuilder k("k");
  const int line = __LINE__ + 1;
  narrow(k.constant(1.0, f32), 0, 0, 1);
  EXPECT_TRUE(FailsAt(k, line, "narrow: needs a tile, got f32"));
}

TEST(Diagnostics, SplitOfAnOddSize) {
  KernelBuilder k("k");
  Value x = k.zeros({64, 30, 3}, bf16);
  const int line = __LINE__ + 1;
  auto [a, b] = split(x, 2);
  EXPECT_TRUE(FailsAt(k, line, "split: needs a tile with an even size along axis 2, got tile<bf16>[64,30,3]"));
  EXPECT_FALSE(a.valid());
  EXPECT_FALSE(b.valid());
}

TEST(Diagnostics, ConcatOfTilesThatDoNotFit) {
  for (const auto& [a, b, axis, message] : std::vector<std::tuple<Shape, Shape, int, std::string>>{
           {{4, 8}, {4, 8}, 2, "got tile<f32>[4,8] and tile<f32>[4,8]"},
           {{4, 8}, {5, 8}, 1, "equal but along axis 1; got tile<f32>[4,8] and tile<f32>[5,8]"},
           {{4, 8}, {4, 8, 1}, 0, "got tile<f32>[4,8] and tile<f32>[4,8,1]"}}) {
    KernelBuilder k("k");
    Value x = k.zeros(a, f32), y = k.zeros(b, f32);
    const int line = __LINE__ + 1;
    concat(x, y, axis);
    EXPECT_TRUE(FailsAt(k, line, message));
  }
  KernelBuilder k("k");
  Value x = k.zeros({4, 8}, f32), y = k.zeros({4, 8}, bf16);
  const int line = __LINE__ + 1;
  concat(x, y, 0);
  EXPECT_TRUE(FailsAt(k, line,
                      "concat: needs two tiles of one element type and rank, equal but along axis 0; got "
                      "tile<f32>[4,8] and tile<bf16>[4,8]"));
}

TEST(Diagnostics, ArangeWithHiNotAboveLo) {
  KernelBuilder k("k");
  const int line = __LINE__ + 1;
  k.arange(8, 8);
  EXPECT_TRUE(FailsAt(k, line, "arange(8, 8): hi must exceed lo"));
}

TEST(Diagnostics, NonPositiveTileDimension) {
  KernelBuilder k("k");
  const int line = __LINE__ + 1;
  k.zeros({48, 0}, f32);
  EXPECT_TRUE(FailsAt(k, line, "full: tile dimensions must be positive, got shape [48,0]"));
}

TEST(Diagnostics, DuplicateArgumentName) {
  KernelBuilder k("k");
  k.arg(i32, "n");
  const int line = __LINE__ + 1;
  k.arg(ptr(f32), "n");
  EXPECT_TRUE(FailsAt(k, line, "arg 'n': the name is used by another argument"));
}

TEST(Diagnostics, ArgumentOfTileType) {
  KernelBuilder k("k");
  const int line = __LINE__ + 1;
  k.arg(Type::tile(f32, {64}), "t");
  EXPECT_TRUE(FailsAt(k, line,
                      "arg 't': arguments are scalars or pointers, got tile<f32>[64] (use tensor_map or "
                      "triggered_view)"));
}

TEST(Diagnostics, ProgramIdAxis3) {
  KernelBuilder k("k");
  const int line = __LINE__ + 1;
  k.program_id(3);
  EXPECT_TRUE(FailsAt(k, line, "program_id: axis 3 is not 0, 1 or 2"));
}

TEST(Diagnostics, BitwiseOperatorOnFloats) {
  KernelBuilder k("k");
  Value x = k.arg(f32, "x");
  const int line = __LINE__ + 1;
  x ^ x;
  EXPECT_TRUE(FailsAt(k, line, "operator^: needs integer operands, got f32"));
}

TEST(Diagnostics, LogicalNotOnIntegers) {
  KernelBuilder k("k");
  Value n = k.arg(i32, "n");
  const int line = __LINE__ + 1;
  !n;
  EXPECT_TRUE(FailsAt(k, line, "operator!: needs i1, got i32"));
}

TEST(Diagnostics, ExpOnIntegers) {
  KernelBuilder k("k");
  Value offs = k.arange(0, 64);
  const int line = __LINE__ + 1;
  exp(offs);
  EXPECT_TRUE(FailsAt(k, line, "exp: needs a floating-point operand, got tile<i32>[64]; cast it first"));
}

TEST(Diagnostics, FmaOnIntegers) {
  KernelBuilder k("k");
  Value n = k.arg(i32, "n");
  const int line = __LINE__ + 1;
  fma(n, n, n);
  EXPECT_TRUE(FailsAt(k, line, "fma: needs three floating-point operands of one type, got i32, i32, i32"));
}

TEST(Diagnostics, SelectConditionNotI1) {
  KernelBuilder k("k");
  Value offs = k.arange(0, 64);
  const int line = __LINE__ + 1;
  select(offs, 1, 2);
  EXPECT_TRUE(FailsAt(k, line, "select: the condition must be i1, got tile<i32>[64]"));
}

TEST(Diagnostics, AtomicOnI8) {
  KernelBuilder k("k");
  Value p = k.arg(ptr(i8), "p");
  const int line = __LINE__ + 1;
  atomic_add(p, 1);
  EXPECT_TRUE(FailsAt(k, line, "atomic_rmw: i8 atomics are not supported (use 32 or 64 bits)"));
}

TEST(Diagnostics, AtomicCasOnFloat) {
  KernelBuilder k("k");
  Value p = k.arg(ptr(f32), "p");
  const int line = __LINE__ + 1;
  atomic_cas(p, 0.0, 1.0);
  EXPECT_TRUE(FailsAt(k, line, "atomic_cas: needs one pointer to a 32- or 64-bit integer, got ptr<f32>"));
}

TEST(Diagnostics, AtomicWithAnOpOutsideItsEnum) {
  KernelBuilder k("k");
  Value p = k.arg(ptr(i32), "p");
  const int line = __LINE__ + 1;
  atomic_rmw(static_cast<AtomicOp>(7), p, 1);
  EXPECT_TRUE(FailsAt(k, line, "atomic_rmw: AtomicOp 7 is not an operation (kAdd to kExchange)"));
}

TEST(Diagnostics, AtomicsWithAnOrderOutsideItsEnum) {
  for (bool cas : {false, true}) {
    KernelBuilder k("k");
    Value p = k.arg(ptr(i32), "p");
    const int line = __LINE__ + 1;
    cas ? atomic_cas(p, 0, 1, static_cast<MemoryOrder>(4)) : atomic_add(p, 1, static_cast<MemoryOrder>(-1));
    EXPECT_TRUE(FailsAt(k, line,
                        cas ? "atomic_cas: MemoryOrder 4 is not an order (kRelaxed, kAcquire, kRelease or kAcqRel)"
                            : "atomic_rmw: MemoryOrder -1 is not an order (kRelaxed, kAcquire, kRelease or kAcqRel)"));
  }
}

TEST(Diagnostics, PointerMinusPointer) {
  KernelBuilder k("k");
  Value p = k.arg(ptr(f32), "p");
  Value q = k.arg(ptr(f32), "q");
  const int line = __LINE__ + 1;
  p - q;
  EXPECT_TRUE(FailsAt(k, line, "operator-: not defined on pointers (ptr<f32>, ptr<f32>)"));
}

TEST(Diagnostics, CdivOfAPointer) {
  KernelBuilder k("k");
  Value p = k.arg(ptr(f32), "p");
  const int line = __LINE__ + 1;
  cdiv(p, 4);
  EXPECT_TRUE(FailsAt(k, line, "not defined on pointers"));
}

TEST(Diagnostics, FullWithValueOfAnotherType) {
  KernelBuilder k("k");
  Value n = k.arg(i32, "n");
  const int line = __LINE__ + 1;
  k.full({64}, n, f32);
  EXPECT_TRUE(FailsAt(k, line, "full: value of type i32 does not match dtype f32"));
}

TEST(Diagnostics, ConstantOfAValue) {
  KernelBuilder k("k");
  Value n = k.arg(i32, "n");
  const int line = __LINE__ + 1;
  k.constant(n, i32);
  EXPECT_TRUE(FailsAt(k, line, "constant: expects a literal, not a Value"));
}

TEST(Diagnostics, BatchNotI32) {
  KernelBuilder k("k");
  TriggeredView view = k.triggered_view("plan");
  Value batch = k.arg(i64, "batch");
  const int line = __LINE__ + 1;
  view.publish(batch);
  EXPECT_TRUE(FailsAt(k, line, "publish: the batch must be an i32 scalar, got i64"));
}

TEST(Diagnostics, DeferNotACondition) {
  KernelBuilder k("k");
  TriggeredView view = k.triggered_view("plan");
  Value n = k.arg(i32, "n");
  const int line = __LINE__ + 1;
  view.publish(0, n);
  EXPECT_TRUE(FailsAt(k, line, "publish: defer must be an i1 scalar (a condition), got i32"));
  KernelBuilder tiles("tiles");
  TriggeredView tile_view = tiles.triggered_view("plan");
  const int tile_line = __LINE__ + 1;
  tile_view.publish(0, tiles.arange(0, 4) < 2);
  EXPECT_TRUE(FailsAt(tiles, tile_line, "publish: defer must be an i1 scalar (a condition), got tile<i1>[4]"));
}

// Tensor maps and views are operands of TMA and view calls only.
TEST(Diagnostics, TensorMapAsArithmeticOperand) {
  KernelBuilder k("k");
  Value map = k.tensor_map(bf16, {64, 128}, "a");
  Value tile = k.zeros({64, 128}, bf16);
  const int line = __LINE__ + 1;
  map + tile;
  EXPECT_TRUE(FailsAt(k, line, "operator+: tensor_map<bf16>[64,128] is not a number, pointer or tile"));
}

TEST(Diagnostics, TensorMapSplatOrBroadcast) {
  KernelBuilder splat_kernel("k");
  Value map = splat_kernel.tensor_map(bf16, {64, 128}, "a");
  const int splat_line = __LINE__ + 1;
  splat(map, {64});
  EXPECT_TRUE(FailsAt(splat_kernel, splat_line, "splat: needs a scalar, got tensor_map<bf16>[64,128]"));

  KernelBuilder broadcast_kernel("k");
  TriggeredView view = broadcast_kernel.triggered_view("plan");
  const int broadcast_line = __LINE__ + 1;
  broadcast_to(view.value(), {64});
  EXPECT_TRUE(
      FailsAt(broadcast_kernel, broadcast_line, "broadcast_to: triggered_view is not a number, pointer or tile"));
}

TEST(Diagnostics, TensorMapStoredThroughAPointer) {
  KernelBuilder k("k");
  Value map = k.tensor_map(bf16, {64, 128}, "a");
  Value p = k.arg(ptr(bf16), "p");
  const int line = __LINE__ + 1;
  store(p, map);
  EXPECT_TRUE(FailsAt(k, line, "store: tensor_map<bf16>[64,128] is not a number, pointer or tile"));
}

TEST(Diagnostics, OnlyTheFirstErrorIsReported) {
  KernelBuilder k("k");
  Value n = k.arg(i32, "n");
  const int line = __LINE__ + 1;
  n + cast(n, u32);
  exp(n);
  k.arg(i32, "n");
  k.program_id(7);
  EXPECT_TRUE(FailsAt(k, line, "mismatched types i32 and u32"));
  absl::Status again = k.build().status();
  EXPECT_THAT(again.message(), HasSubstr("mismatched types i32 and u32"));
  EXPECT_THAT(again.message(), Not(HasSubstr("exp")));
  EXPECT_THAT(again.message(), Not(HasSubstr("program_id")));
}

// After an error every call still returns (invalid Values; one per carried
// value from for_range) and the first error stands.
TEST(Diagnostics, BuilderCallsAfterAnErrorDoNotCrash) {
  KernelBuilder k("k");
  Value x = k.arg(ptr(f32), "x");
  Value map = k.tensor_map(bf16, {64, 64}, "a");
  TriggeredView view = k.triggered_view("plan");
  const int line = __LINE__ + 1;
  Value bad = k.arange(4, 0);
  EXPECT_FALSE(bad.valid());
  EXPECT_TRUE(bad.type().is_void());

  Value offs = k.arange(0, 64);
  Value ptrs = x + offs;
  Value v = load(ptrs, offs < 8, 0.0) + bad;
  store(ptrs, exp(v) * 2.0, offs < bad);
  Var acc = k.var(k.zeros({64}, f32));
  k.for_each_tile(bad, [&](Value t) { acc = acc + cast(t, f32); });
  std::vector<Value> out = k.for_range(0, 4, 1, {bad, offs}, [&](Value, std::span<const Value> c) {
    return std::vector<Value>{c[0], c[1]};
  });
  ASSERT_EQ(out.size(), 2u);
  EXPECT_FALSE(out[0].valid());
  k.if_(
      bad > 0, [&] { acc = bad; }, [&] { view.publish(bad); });
  tma_store(map, {bad, 0}, tma_load(map, {0, bad}));
  dot(bad, bad, bad);
  atomic_add(ptrs, bad);
  atomic_cas(x, bad, bad);
  sum(trans(reshape(expand_dims(broadcast_to(bad, {64}), 0), {64}), {0}), 0);
  select(bad, bad, bad);
  view.wait(view.arrived(bad));
  EXPECT_TRUE(FailsAt(k, line, "arange(4, 0): hi must exceed lo"));
}

TEST(Diagnostics, RandomNumbersNeedIntegerSeedsAndOffsets) {
  // Each case's call is two lines after its `line`.
  auto fails = [](int line, const char* words, const std::function<void(KernelBuilder&)>& call) {
    KernelBuilder k("k");
    call(k);
    EXPECT_TRUE(FailsAt(k, line, words)) << words;
  };
  int line = __LINE__ + 2;
  fails(line, "rand: the seed must be an integer scalar, got tile<i32>[64]", [](KernelBuilder& k) {
    rand(k.arange(0, 64), k.arange(0, 64));
  });
  line = __LINE__ + 2;
  fails(line, "randn: the seed must be an integer scalar, got f32", [](KernelBuilder& k) {
    randn(k.arg(f32, "s"), 0);
  });
  line = __LINE__ + 2;
  fails(line, "randint: the offsets must be integers, got tile<f32>[64]", [](KernelBuilder& k) {
    randint(7, cast(k.arange(0, 64), f32));
  });
  line = __LINE__ + 2;
  fails(line, "rand4x: needs at least one Philox round, got 0", [](KernelBuilder& k) {
    rand4x(7, k.arange(0, 64), 0);
  });
  line = __LINE__ + 2;
  fails(line, "philox: the counter's words must be integers, got ptr<u32>", [](KernelBuilder& k) {
    philox(1, {0, 0, k.arg(ptr(u32), "p"), 0});
  });
  line = __LINE__ + 2;
  fails(line, "umulhi: needs two 32-bit integers of one dtype (i32 or u32), got tile<i64>[64] and tile<i64>[64]",
        [](KernelBuilder& k) { umulhi(cast(k.arange(0, 64), i64), cast(k.arange(0, 64), i64)); });
  line = __LINE__ + 2;
  fails(line, "umulhi: needs two 32-bit integers of one dtype (i32 or u32), got tile<i32>[64] and u32",
        [](KernelBuilder& k) { umulhi(k.arange(0, 64), k.arg(u32, "x")); });
}

TEST(Diagnostics, DevicePrintAndAssertNameWhatTheyCannotTake) {
  {
    KernelBuilder k("k");
    std::vector<Value> many(17, k.program_id());
    device_print("p", many);
    EXPECT_TRUE(FailsAt(k, __LINE__ - 1, "device_print: takes at most 16 values, got 17"));
  }
  {
    KernelBuilder k("k");
    device_print("p", {k.arange(0, 4), k.arange(0, 8)});
    EXPECT_TRUE(FailsAt(k, __LINE__ - 1, "device_print"));
  }
  {
    KernelBuilder k("k");
    Value map = k.tensor_map(bf16, {64, 64}, "map");
    device_print("p", {map});
    EXPECT_TRUE(FailsAt(k, __LINE__ - 1, "device_print: tensor_map"));
  }
  {
    KernelBuilder k("k");
    device_assert(k.arange(0, 4), "not a condition");
    EXPECT_TRUE(FailsAt(k, __LINE__ - 1, "device_assert: the condition must be i1, got tile<i32>[4]"));
  }
}

TEST(Diagnostics, DevicePrintTakesValuesOfItsOwnKernel) {
  KernelBuilder other("other");
  Value foreign = other.arange(0, 4);
  KernelBuilder k("k");
  device_print("p", {k.arange(0, 4), foreign});
  EXPECT_FALSE(k.build().ok());
}

TEST(Diagnostics, BitcastKeepsTheWidthOfNumbers) {
  {
    KernelBuilder k("k");
    bitcast(k.arg(f32, "x"), f16);
    EXPECT_TRUE(FailsAt(k, __LINE__ - 1, "bitcast: f32 has 32 bits and f16 16; a bitcast keeps the width"));
  }
  {
    KernelBuilder k("k");
    bitcast(k.arange(0, 4) < 2, u8);
    EXPECT_TRUE(FailsAt(k, __LINE__ - 1, "bitcast: reinterprets numbers other than i1, got tile<i1>[4] to u8"));
  }
  {
    KernelBuilder k("k");
    bitcast(k.arg(ptr(f32), "p"), i64);
    EXPECT_TRUE(FailsAt(k, __LINE__ - 1, "bitcast: reinterprets numbers other than i1, got ptr<f32> to i64"));
  }
}

}  // namespace
}  // namespace tessel
