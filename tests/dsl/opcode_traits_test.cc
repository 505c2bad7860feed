// The opcode table: a row for every OpCode, in order, with distinct names,
// and the categories and flags its callers rely on.
#include "dsl/opcode_traits.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace tessel {
namespace {

// The enum's last value bounds the table; a new opcode after it must move it.
static_assert(kNumOpCodes == static_cast<int>(OpCode::kYield) + 1);

TEST(OpcodeTraits, EveryOpcodeHasItsOwnRow) {
  std::set<std::string> names;
  for (int i = 0; i < kNumOpCodes; ++i) {
    const auto op = static_cast<OpCode>(i);
    const OpTraits& t = op_traits(op);
    EXPECT_EQ(t.op, op) << "row " << i;
    EXPECT_FALSE(t.name.empty()) << "row " << i;
    EXPECT_EQ(opcode_name(op), t.name);
    EXPECT_TRUE(names.insert(std::string(t.name)).second) << "name '" << t.name << "' repeats";
    // Flags that only make sense together.
    if (t.commutative || t.integers_only || t.floats_only) {
      EXPECT_TRUE(t.elementwise) << t.name;
    }
    EXPECT_FALSE(t.integers_only && t.floats_only) << t.name;
    if (t.view) {
      EXPECT_EQ(t.category, OpCategory::kShape) << t.name;
    }
  }
  EXPECT_EQ(opcode_name(static_cast<OpCode>(kNumOpCodes)), "?");
}

TEST(OpcodeTraits, ElementwiseOpsAreTheArithmeticOnes) {
  for (int i = 0; i < kNumOpCodes; ++i) {
    const auto op = static_cast<OpCode>(i);
    const OpCategory c = op_traits(op).category;
    const bool arithmetic = c == OpCategory::kBinary || c == OpCategory::kComparison || c == OpCategory::kUnary ||
                            c == OpCategory::kOtherElementwise;
    EXPECT_EQ(is_elementwise(op), arithmetic) << opcode_name(op);
  }
  EXPECT_FALSE(is_elementwise(OpCode::kSplat));
  EXPECT_FALSE(is_elementwise(OpCode::kReduce));
  EXPECT_TRUE(is_elementwise(OpCode::kPtrAdd));
  EXPECT_TRUE(is_elementwise(OpCode::kSelect));
}

TEST(OpcodeTraits, Categories) {
  EXPECT_EQ(op_traits(OpCode::kArange).category, OpCategory::kLeaf);
  EXPECT_EQ(op_traits(OpCode::kTrans).category, OpCategory::kShape);
  EXPECT_EQ(op_traits(OpCode::kShr).category, OpCategory::kBinary);
  EXPECT_EQ(op_traits(OpCode::kFloor).category, OpCategory::kUnary);
  EXPECT_EQ(op_traits(OpCode::kAtomicCas).category, OpCategory::kMemory);
  EXPECT_EQ(op_traits(OpCode::kTmaStore).category, OpCategory::kTma);
  EXPECT_EQ(op_traits(OpCode::kDot).category, OpCategory::kMatrix);
  EXPECT_EQ(op_traits(OpCode::kReusable).category, OpCategory::kTriggeredView);
  EXPECT_EQ(op_traits(OpCode::kYield).category, OpCategory::kControl);
  for (OpCode op : {OpCode::kEq, OpCode::kNe, OpCode::kLt, OpCode::kLe, OpCode::kGt, OpCode::kGe}) {
    EXPECT_TRUE(is_comparison(op)) << opcode_name(op);
  }
  EXPECT_FALSE(is_comparison(OpCode::kSub));
}

TEST(OpcodeTraits, Flags) {
  EXPECT_TRUE(op_traits(OpCode::kAdd).commutative);
  EXPECT_FALSE(op_traits(OpCode::kSub).commutative);
  EXPECT_TRUE(op_traits(OpCode::kEq).commutative);
  EXPECT_FALSE(op_traits(OpCode::kLt).commutative);
  EXPECT_TRUE(op_traits(OpCode::kReshape).view);
  EXPECT_TRUE(op_traits(OpCode::kExpandDims).view);
  EXPECT_FALSE(op_traits(OpCode::kTrans).view);

  EXPECT_EQ(op_traits(OpCode::kStore).results, OpResults::kNone);
  EXPECT_EQ(op_traits(OpCode::kLoad).results, OpResults::kOne);
  EXPECT_EQ(op_traits(OpCode::kFor).results, OpResults::kPerCarried);
  EXPECT_EQ(op_traits(OpCode::kWait).results, OpResults::kNone);

  EXPECT_TRUE(op_traits(OpCode::kLoad).reads_memory);
  EXPECT_FALSE(op_traits(OpCode::kLoad).writes_memory);
  EXPECT_TRUE(op_traits(OpCode::kTmaStore).writes_memory);
  EXPECT_TRUE(op_traits(OpCode::kAtomic).reads_memory && op_traits(OpCode::kAtomic).writes_memory);
  EXPECT_FALSE(op_traits(OpCode::kDot).reads_memory || op_traits(OpCode::kDot).writes_memory);

  EXPECT_TRUE(op_traits(OpCode::kXor).integers_only && op_traits(OpCode::kXor).takes_i1);
  EXPECT_TRUE(op_traits(OpCode::kShl).integers_only && !op_traits(OpCode::kShl).takes_i1);
  EXPECT_TRUE(op_traits(OpCode::kSqrt).floats_only);
  EXPECT_FALSE(op_traits(OpCode::kNeg).takes_i1);
  EXPECT_TRUE(op_traits(OpCode::kNot).takes_i1);
}

}  // namespace
}  // namespace tessel
