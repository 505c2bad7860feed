// The kernel IR: SSA values defined by ops in structured blocks. A kernel is
// a top-level block; `for` and `if` ops own nested blocks that end in a
// `yield`. The IR holds no LLVM types; codegen/ lowers it.
#pragma once

#include <cstdint>
#include <memory>
#include <source_location>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "dsl/types.h"

namespace tessel {

// Laid out by hand: opcodes of a kind share lines.
// clang-format off
enum class OpCode : uint8_t {
  // Leaves.
  kConstant,     // ints[0] or fval: the literal; type scalar
  kProgramId,    // ints[0] = axis
  kNumPrograms,  // ints[0] = axis
  kArange,       // ints = {lo, hi}; tile<i32>[hi-lo]
  // Shape ops.
  kSplat,       // scalar -> tile
  kBroadcast,   // tile -> tile of a larger shape (size-1 dims stretch)
  kExpandDims,  // ints[0] = axis
  kReshape,
  kTrans,       // ints = permutation
  kNarrow,      // ints = {axis, start}: the elements from `start` on along the axis (as many as the type says)
  kConcat,      // operands: a, b; ints = {axis}: a's elements, then b's, along the axis
  // Elementwise arithmetic: operands of one type (tile shapes equal).
  kAdd, kSub, kMul, kDiv, kRem, kMin, kMax, kAnd, kOr, kXor, kShl, kShr, kPow, kAtan2,
  kEq, kNe, kLt, kLe, kGt, kGe,
  // Unary; the math functions take ints = {MathForm} (dsl/ops.h) where they
  // have a fast form (OpTraits::fast_form), else none.
  kNeg, kNot, kExp, kLog, kSqrt, kRsqrt, kAbs, kFloor, kCeil, kRound,
  kExp2, kLog2, kTanh, kSigmoid, kErf, kSin, kCos, kSinh, kCosh, kLog1p, kExpm1,
  kTan, kAsin, kAcos, kAtan,
  kFma,
  kPtrAdd,  // pointer(s) + integer offset(s) in elements
  kCast,
  kBitcast,  // the same bits as another dtype of the same width
  kSelect,
  kReduce,  // ints = {axis, combiner opcode}
  kScan,    // ints = {axis, combiner opcode, reverse}: inclusive, the shape kept
  kSort,    // ints = {axis, descending, positions}: each line along the axis in order, the shape kept
            // (with positions, the i32 positions that order it, ties in their order)
  kGather,  // operands: src, index; ints = {axis}: src's elements at index's positions along the axis
  kHistogram,  // operands: x [, mask]; ints = {bins}: i32 counts of x's elements equal to 0 ... bins - 1
  kReduceFn,   // operands: tiles of one shape; ints = {axis}; block 0: the combine function, its args
               // a tuple of scalars then another (the operands' dtypes), ops on scalars, and a yield of
               // one scalar per operand; results: the operands reduced along the axis together
  kScanFn,     // as reduce_fn, ints = {axis, reverse}; results: inclusive scans of the operands together,
               // their shapes kept (the function's first tuple the earlier elements in the scan's order)
  // Memory.
  kLoad,     // operands: ptrs [, mask [, other]]
  kStore,    // operands: ptrs, value [, mask]
  kAtomic,   // ints = AtomicOp, MemoryOrder (dsl/ops.h); operands ptrs, value [, mask]
  kAtomicCas,  // ints = MemoryOrder; operands ptr, compare, value
  kTmaLoad,   // operands: map, coords...; ints = {parts} of a tma_multicast; result: shared tile of the box
              // (of `parts` boxes stacked along dim 0)
  kTmaStore,  // operands: map, tile, coords...
  kDot,       // operands: a, b, acc
  // Triggered views.
  kPublish, kArrived, kWait, kReusable,  // operands: view, batch
  // Debugging (base/debug_abi.h): ints[0] indexes KernelIR::texts.
  kPrint,   // operands: scalars, or tiles of one shape; each element's values, after the text
  kAssert,  // operands: an i1 scalar or tile; the text is the message of an element that is false
  // Control flow.
  kFor,    // operands: lo, hi, step, inits...; block 0 args: iv, carried...
  kIf,     // operands: cond; blocks: then, else
  kWhile,  // operands: inits...; blocks: cond (args: carried...; yields an i1), body (args: carried...)
  kYield,  // operands: values passed to the enclosing op's results; keep last (kLastOpCode)
};
// clang-format on
inline constexpr OpCode kLastOpCode = OpCode::kYield;

// The printed name (dsl/opcode_traits.h has everything else about an opcode).
absl::string_view opcode_name(OpCode op);

struct Op;

// A value is defined by an op result, a block argument or a kernel parameter.
struct ValueInfo {
  Type type;
  int def_op = -1;     // index in KernelIR::ops, or -1 for block arguments
  int def_block = -1;  // the block that defines it (holds the op, or has the argument)
  int index = 0;       // result index, or argument index in the block
};

struct Block {
  std::vector<int> args;  // value ids
  std::vector<int> ops;   // op ids in program order
  int parent = -1;        // the enclosing block; -1 for the kernel body
};

struct Op {
  OpCode op;
  std::vector<int> operands;  // value ids
  std::vector<int> results;   // value ids
  std::vector<int> blocks;    // block ids
  std::vector<int64_t> ints;  // attributes
  double fval = 0;
  std::source_location loc;
};

// Kernel parameters are the arguments of block 0, in order.
struct Param {
  std::string name;
  Type type;
  int value = -1;
};

struct KernelIR {
  std::string name;
  std::vector<Param> params;
  std::vector<ValueInfo> values;
  std::vector<Op> ops;
  std::vector<Block> blocks;  // blocks[0] is the kernel body
  int cluster = 1;            // programs per cluster (KernelBuilder::cluster)
  std::vector<std::string> texts;  // what kPrint and kAssert say

  const Type& type(int value) const { return values[value].type; }
  // Whether `value` is defined inside `block` or a block nested in it.
  bool defined_within(int value, int block) const {
    for (int b = values[value].def_block; b >= 0; b = blocks[b].parent) {
      if (b == block) return true;
    }
    return false;
  }
};

}  // namespace tessel
