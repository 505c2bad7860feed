// What each OpCode is, in one table (opcode_traits.cc): its printed name,
// its category and the facts the builder, the verifier and codegen ask
// about it. A new opcode is described there once, and the table's size is
// tied to the enum, so a missing row does not compile.
#pragma once

#include <cstdint>

#include "absl/strings/string_view.h"
#include "dsl/ir.h"

namespace tessel {

enum class OpCategory : uint8_t {
  kLeaf,              // constant, program_id, num_programs, arange: no operands
  kShape,             // splat, broadcast, expand_dims, reshape, trans, gather
  kBinary,            // elementwise binary arithmetic: add .. max, bitwise ops, shifts
  kComparison,        // elementwise eq .. ge, with i1 results
  kUnary,             // elementwise neg .. cosh
  kOtherElementwise,  // fma, ptr_add, cast, select: three operands or mixed types
  kReduction,         // reduce, scan, sort, reduce_fn, scan_fn: along an axis; histogram
  kMemory,            // load, store, atomic, atomic_cas
  kTma,               // tma_load, tma_store
  kMatrix,            // dot
  kTriggeredView,     // publish, arrived, wait, reusable
  kDebug,             // print, assert
  kControl,           // for, if, yield
};

// How many values an op defines.
enum class OpResults : uint8_t {
  kNone,
  kOne,
  kPerCarried,  // for, if and while: one per value their blocks carry or yield; reduce_fn and scan_fn: one per operand
};

struct OpTraits {
  OpCode op;
  absl::string_view name;  // as printed
  OpCategory category;
  OpResults results;
  // Element i of the result is a function of element i of each operand
  // (for scalars: a scalar function of the operands).
  bool elementwise;
  // A binary op whose operands may be swapped.
  bool commutative;
  // The operand's elements in the same row-major order under another shape
  // (expand_dims, reshape): codegen reuses the operand's buffer or registers.
  bool view;
  // Reads or writes global or shared memory other than its tile operands
  // (the ops of for and if bodies count for those ops, not for for and if).
  bool reads_memory;
  bool writes_memory;
  // The element types an elementwise op takes; meaningless for other ops.
  bool integers_only;  // integers or i1, never floats
  bool floats_only;
  bool takes_i1;  // i1 operands are allowed
  bool no_f64;     // a math function without an f64 form (codegen/math.h)
  bool fast_form;  // a math function or division with a fast form (MathForm::kFast)
};

inline constexpr int kNumOpCodes = static_cast<int>(kLastOpCode) + 1;

// The row of `op`.
const OpTraits& op_traits(OpCode op);

inline bool is_elementwise(OpCode op) { return op_traits(op).elementwise; }
inline bool is_comparison(OpCode op) { return op_traits(op).category == OpCategory::kComparison; }
// Whether op `o`'s result is a function of its operands alone (no memory,
// no blocks): it may be computed again elsewhere, or dropped when unread.
inline bool is_pure(const Op& o) {
  switch (op_traits(o.op).category) {
    case OpCategory::kLeaf:
    case OpCategory::kShape:
    case OpCategory::kBinary:
    case OpCategory::kComparison:
    case OpCategory::kUnary:
    case OpCategory::kOtherElementwise:
      return o.blocks.empty();
    default:
      return false;
  }
}

}  // namespace tessel
