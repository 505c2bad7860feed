#include "dsl/opcode_traits.h"

#include <array>

#include "base/status.h"

namespace tessel {
namespace {

using C = OpCategory;
using R = OpResults;

// A row's flags, or-ed together.
enum : unsigned {
  kElementwise = 1 << 0,
  kCommutative = 1 << 1,
  kView = 1 << 2,
  kReads = 1 << 3,
  kWrites = 1 << 4,
  kIntegers = 1 << 5,
  kFloats = 1 << 6,
  kI1 = 1 << 7,
  kNoF64 = 1 << 8,
  kFast = 1 << 9,
};
// Math functions: floats, elementwise.
constexpr unsigned kMath = kElementwise | kFloats;
// Bitwise ops take integers and i1 in any order.
constexpr unsigned kBitwise = kElementwise | kCommutative | kIntegers | kI1;

constexpr OpTraits row(OpCode op, absl::string_view name, OpCategory category, OpResults results, unsigned flags = 0) {
  return OpTraits{op,
                  name,
                  category,
                  results,
                  (flags & kElementwise) != 0,
                  (flags & kCommutative) != 0,
                  (flags & kView) != 0,
                  (flags & kReads) != 0,
                  (flags & kWrites) != 0,
                  (flags & kIntegers) != 0,
                  (flags & kFloats) != 0,
                  (flags & kI1) != 0,
                  (flags & kNoF64) != 0,
                  (flags & kFast) != 0};
}

// In the enum's order: row i describes OpCode i (checked below).
constexpr std::array<OpTraits, kNumOpCodes> kTable = {{
    row(OpCode::kConstant, "constant", C::kLeaf, R::kOne),
    row(OpCode::kProgramId, "program_id", C::kLeaf, R::kOne),
    row(OpCode::kNumPrograms, "num_programs", C::kLeaf, R::kOne),
    row(OpCode::kArange, "arange", C::kLeaf, R::kOne),
    row(OpCode::kSplat, "splat", C::kShape, R::kOne),
    row(OpCode::kBroadcast, "broadcast", C::kShape, R::kOne),
    row(OpCode::kExpandDims, "expand_dims", C::kShape, R::kOne, kView),
    row(OpCode::kReshape, "reshape", C::kShape, R::kOne, kView),
    row(OpCode::kTrans, "trans", C::kShape, R::kOne),
    row(OpCode::kNarrow, "narrow", C::kShape, R::kOne),
    row(OpCode::kConcat, "concat", C::kShape, R::kOne),
    row(OpCode::kAdd, "add", C::kBinary, R::kOne, kElementwise | kCommutative),
    row(OpCode::kSub, "sub", C::kBinary, R::kOne, kElementwise),
    row(OpCode::kMul, "mul", C::kBinary, R::kOne, kElementwise | kCommutative),
    row(OpCode::kDiv, "div", C::kBinary, R::kOne, kElementwise | kFast),
    row(OpCode::kRem, "rem", C::kBinary, R::kOne, kElementwise),
    row(OpCode::kMin, "min", C::kBinary, R::kOne, kElementwise | kCommutative),
    row(OpCode::kMax, "max", C::kBinary, R::kOne, kElementwise | kCommutative),
    row(OpCode::kAnd, "and", C::kBinary, R::kOne, kBitwise),
    row(OpCode::kOr, "or", C::kBinary, R::kOne, kBitwise),
    row(OpCode::kXor, "xor", C::kBinary, R::kOne, kBitwise),
    row(OpCode::kShl, "shl", C::kBinary, R::kOne, kElementwise | kIntegers),
    row(OpCode::kShr, "shr", C::kBinary, R::kOne, kElementwise | kIntegers),
    row(OpCode::kPow, "pow", C::kBinary, R::kOne, kMath | kNoF64),
    row(OpCode::kAtan2, "atan2", C::kBinary, R::kOne, kMath | kNoF64),
    row(OpCode::kEq, "eq", C::kComparison, R::kOne, kElementwise | kCommutative | kI1),
    row(OpCode::kNe, "ne", C::kComparison, R::kOne, kElementwise | kCommutative | kI1),
    row(OpCode::kLt, "lt", C::kComparison, R::kOne, kElementwise),
    row(OpCode::kLe, "le", C::kComparison, R::kOne, kElementwise),
    row(OpCode::kGt, "gt", C::kComparison, R::kOne, kElementwise),
    row(OpCode::kGe, "ge", C::kComparison, R::kOne, kElementwise),
    row(OpCode::kNeg, "neg", C::kUnary, R::kOne, kElementwise),
    row(OpCode::kNot, "not", C::kUnary, R::kOne, kElementwise | kIntegers | kI1),
    row(OpCode::kExp, "exp", C::kUnary, R::kOne, kMath | kFast),
    row(OpCode::kLog, "log", C::kUnary, R::kOne, kMath | kFast),
    row(OpCode::kSqrt, "sqrt", C::kUnary, R::kOne, kElementwise | kFloats),
    row(OpCode::kRsqrt, "rsqrt", C::kUnary, R::kOne, kElementwise | kFloats),
    row(OpCode::kAbs, "abs", C::kUnary, R::kOne, kElementwise),
    row(OpCode::kFloor, "floor", C::kUnary, R::kOne, kElementwise | kFloats),
    row(OpCode::kCeil, "ceil", C::kUnary, R::kOne, kElementwise | kFloats),
    row(OpCode::kRound, "round", C::kUnary, R::kOne, kElementwise | kFloats),
    row(OpCode::kExp2, "exp2", C::kUnary, R::kOne, kMath | kFast),
    row(OpCode::kLog2, "log2", C::kUnary, R::kOne, kMath | kFast),
    row(OpCode::kTanh, "tanh", C::kUnary, R::kOne, kMath | kFast),
    row(OpCode::kSigmoid, "sigmoid", C::kUnary, R::kOne, kMath),
    row(OpCode::kErf, "erf", C::kUnary, R::kOne, kMath | kNoF64),
    row(OpCode::kSin, "sin", C::kUnary, R::kOne, kMath | kFast | kNoF64),
    row(OpCode::kCos, "cos", C::kUnary, R::kOne, kMath | kFast | kNoF64),
    row(OpCode::kSinh, "sinh", C::kUnary, R::kOne, kMath),
    row(OpCode::kCosh, "cosh", C::kUnary, R::kOne, kMath),
    row(OpCode::kLog1p, "log1p", C::kUnary, R::kOne, kMath | kNoF64),
    row(OpCode::kExpm1, "expm1", C::kUnary, R::kOne, kMath | kNoF64),
    row(OpCode::kTan, "tan", C::kUnary, R::kOne, kMath | kNoF64),
    row(OpCode::kAsin, "asin", C::kUnary, R::kOne, kMath | kNoF64),
    row(OpCode::kAcos, "acos", C::kUnary, R::kOne, kMath | kNoF64),
    row(OpCode::kAtan, "atan", C::kUnary, R::kOne, kMath | kNoF64),
    row(OpCode::kFma, "fma", C::kOtherElementwise, R::kOne, kElementwise | kFloats),
    row(OpCode::kPtrAdd, "ptr_add", C::kOtherElementwise, R::kOne, kElementwise),
    row(OpCode::kCast, "cast", C::kOtherElementwise, R::kOne, kElementwise | kI1),
    row(OpCode::kBitcast, "bitcast", C::kOtherElementwise, R::kOne, kElementwise),
    row(OpCode::kSelect, "select", C::kOtherElementwise, R::kOne, kElementwise | kI1),
    row(OpCode::kReduce, "reduce", C::kReduction, R::kOne),
    row(OpCode::kScan, "scan", C::kReduction, R::kOne),
    row(OpCode::kSort, "sort", C::kReduction, R::kOne),
    row(OpCode::kGather, "gather", C::kShape, R::kOne),
    row(OpCode::kHistogram, "histogram", C::kReduction, R::kOne),
    row(OpCode::kReduceFn, "reduce_fn", C::kReduction, R::kPerCarried),
    row(OpCode::kScanFn, "scan_fn", C::kReduction, R::kPerCarried),
    row(OpCode::kLoad, "load", C::kMemory, R::kOne, kReads),
    row(OpCode::kStore, "store", C::kMemory, R::kNone, kWrites),
    row(OpCode::kAtomic, "atomic", C::kMemory, R::kOne, kReads | kWrites),
    row(OpCode::kAtomicCas, "atomic_cas", C::kMemory, R::kOne, kReads | kWrites),
    row(OpCode::kTmaLoad, "tma_load", C::kTma, R::kOne, kReads),
    row(OpCode::kTmaStore, "tma_store", C::kTma, R::kNone, kWrites),
    row(OpCode::kDot, "dot", C::kMatrix, R::kOne),
    // publish counts contributors on its gate (an atomic), then may open it.
    row(OpCode::kPublish, "publish", C::kTriggeredView, R::kNone, kReads | kWrites),
    row(OpCode::kArrived, "arrived", C::kTriggeredView, R::kOne, kReads),
    row(OpCode::kWait, "wait", C::kTriggeredView, R::kNone, kReads),
    row(OpCode::kReusable, "reusable", C::kTriggeredView, R::kOne, kReads),
    row(OpCode::kPrint, "print", C::kDebug, R::kNone),
    row(OpCode::kAssert, "assert", C::kDebug, R::kNone),
    row(OpCode::kFor, "for", C::kControl, R::kPerCarried),
    row(OpCode::kIf, "if", C::kControl, R::kPerCarried),
    row(OpCode::kWhile, "while", C::kControl, R::kPerCarried),
    row(OpCode::kYield, "yield", C::kControl, R::kNone),
}};

// A missing row leaves a default one (kConstant, no name) at the end; a
// misplaced row names the wrong opcode.
constexpr bool rows_match_the_enum() {
  for (size_t i = 0; i < kTable.size(); ++i) {
    if (kTable[i].op != static_cast<OpCode>(i) || kTable[i].name.empty()) return false;
  }
  return true;
}
static_assert(rows_match_the_enum(), "kTable needs one row per OpCode, in the enum's order");

}  // namespace

const OpTraits& op_traits(OpCode op) {
  const auto i = static_cast<size_t>(op);
  TESSEL_CHECK(i < kTable.size(), "an OpCode past kLastOpCode has no traits (dsl/ir.h)");
  return kTable[i];
}

// Diagnostics may name a value that is no opcode (a corrupt reduce
// combiner): it prints as "?".
absl::string_view opcode_name(OpCode op) {
  const auto i = static_cast<size_t>(op);
  return i < kTable.size() ? kTable[i].name : "?";
}

}  // namespace tessel
