// Internal: the mutable state behind a KernelBuilder and its Values.
#pragma once

#include <optional>
#include <source_location>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "dsl/ir.h"
#include "dsl/value.h"

namespace tessel::detail {

// "file:line" of a user's call.
std::string loc_str(std::source_location loc);

struct BuilderState {
  explicit BuilderState(std::string name);

  KernelIR ir;
  std::vector<int> open_blocks;  // innermost last; ops are appended to back()
  std::vector<bool> block_open;  // per block id
  absl::Status error;            // the first error
  std::vector<int> vars;         // Var slot -> current value id, -1 once out of scope
  std::vector<int> var_block;    // Var slot -> block that declared it

  bool failed() const { return !error.ok(); }
  // Records `msg` as the error if it is the first; returns an invalid Value.
  Value fail(std::source_location loc, absl::string_view msg);
  Value value(int id) { return Value(this, id); }
  const Type& type(int id) const { return ir.values[id].type; }

  int new_block();
  int add_block_arg(int block, const Type& type);
  void open(int block);
  void close(int block);
  int current_block() const { return open_blocks.back(); }

  // Appends an op to the current block; returns its index.
  int emit(OpCode op, std::vector<int> operands, const std::vector<Type>& result_types, std::source_location loc,
           std::vector<int64_t> ints = {}, double fval = 0);
  // The same for an op with one result.
  Value emit1(OpCode op, std::vector<int> operands, const Type& type, std::source_location loc,
              std::vector<int64_t> ints = {}, double fval = 0);

  // Checks that `v` may be used here (same kernel, in scope, not from an
  // earlier error). Records an error naming `what` and returns -1 if not.
  int use(const Value& v, absl::string_view what, std::source_location loc);
  // Materializes an operand. A literal takes `hint` as its dtype (an integer
  // literal may become a float); without a hint, i32 or f32.
  int operand(const Operand& o, std::optional<DType> hint, absl::string_view what, std::source_location loc);
  // A scalar constant of `dtype`; -1 if the literal does not fit.
  int constant(const Operand& literal, DType dtype, absl::string_view what, std::source_location loc);

  // Checks a tile shape: rank 1..5, positive dims, bounded size.
  bool check_shape(const Shape& shape, absl::string_view what, std::source_location loc);
};

// The state of the first operand that is a value, or nullptr.
// The builder the first Value among `operands` belongs to; for literals
// only, the newest KernelBuilder alive on this thread (nullptr: none).
BuilderState* state_of(absl::Span<const Operand* const> operands);

}  // namespace tessel::detail
