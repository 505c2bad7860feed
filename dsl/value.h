// Value handles. A Value names an SSA value of the kernel being built; it is
// cheap to copy. Operators on values append ops to that kernel.
#pragma once

#include <cstdint>
#include <source_location>
#include <variant>

#include "dsl/types.h"

namespace tessel {

namespace detail {
struct BuilderState;
}
class KernelBuilder;

class Value {
 public:
  Value() = default;
  // The value's type; void for a value made after an earlier error.
  Type type() const;
  bool valid() const { return state_ != nullptr && id_ >= 0; }
  int id() const { return id_; }
  detail::BuilderState* state() const { return state_; }

 private:
  friend struct detail::BuilderState;
  Value(detail::BuilderState* state, int id) : state_(state), id_(id) {}
  detail::BuilderState* state_ = nullptr;
  int id_ = -1;
};

class Operand;

// A mutable variable whose assignments the builder turns into SSA: assigned
// inside a loop body it becomes a loop-carried value, inside `if_` a result.
class Var {
 public:
  // Assigns a value (or a literal of the Var's type).
  Var& operator=(const Operand& v);
  Var& operator=(const Var& v);
  Var(const Var&) = default;
  operator Value() const { return get(); }  // NOLINT: implicit by design
  Value get() const;
  Type type() const { return get().type(); }

 private:
  friend class KernelBuilder;
  Var(detail::BuilderState* state, int slot) : state_(state), slot_(slot) {}
  detail::BuilderState* state_ = nullptr;
  int slot_ = -1;
};

// An operand of an op: a value or a literal. Literals take the type of the
// other operand (integer literals also combine with floats); the source
// location is that of the user's expression.
class Operand {
 public:
  Operand(const Value& v, std::source_location loc = std::source_location::current())  // NOLINT
      : v_(v), loc_(loc) {}
  Operand(const Var& v, std::source_location loc = std::source_location::current())  // NOLINT
      : v_(v.get()), loc_(loc) {}
  Operand(int v, std::source_location loc = std::source_location::current())  // NOLINT
      : v_(static_cast<int64_t>(v)), loc_(loc) {}
  Operand(int64_t v, std::source_location loc = std::source_location::current())  // NOLINT
      : v_(v), loc_(loc) {}
  Operand(double v, std::source_location loc = std::source_location::current())  // NOLINT
      : v_(v), loc_(loc) {}

  bool is_value() const { return std::holds_alternative<Value>(v_); }
  bool is_int() const { return std::holds_alternative<int64_t>(v_); }
  bool is_float() const { return std::holds_alternative<double>(v_); }
  const Value& value() const { return std::get<Value>(v_); }
  int64_t int_value() const { return std::get<int64_t>(v_); }
  double float_value() const { return std::get<double>(v_); }
  std::source_location loc() const { return loc_; }

 private:
  std::variant<Value, int64_t, double> v_;
  std::source_location loc_;
};

// Arithmetic: operands of one dtype; tiles broadcast like numpy (equal
// ranks, size-1 dims stretch) and scalars splat. `/` and `%` on integers
// truncate toward zero; `>>` is arithmetic on signed types.
Value operator+(const Operand& a, const Operand& b);
Value operator-(const Operand& a, const Operand& b);
Value operator*(const Operand& a, const Operand& b);
Value operator/(const Operand& a, const Operand& b);
Value operator%(const Operand& a, const Operand& b);
Value operator&(const Operand& a, const Operand& b);
Value operator|(const Operand& a, const Operand& b);
Value operator^(const Operand& a, const Operand& b);
Value operator<<(const Operand& a, const Operand& b);
Value operator>>(const Operand& a, const Operand& b);
Value operator==(const Operand& a, const Operand& b);
Value operator!=(const Operand& a, const Operand& b);
Value operator<(const Operand& a, const Operand& b);
Value operator<=(const Operand& a, const Operand& b);
Value operator>(const Operand& a, const Operand& b);
Value operator>=(const Operand& a, const Operand& b);
Value operator-(const Operand& a);
Value operator!(const Operand& a);
Value operator~(const Operand& a);

}  // namespace tessel
