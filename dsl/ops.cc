// Type rules of the DSL's operators and free functions.
#include "dsl/ops.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "base/debug_abi.h"
#include "base/tma_rules.h"
#include "dsl/opcode_traits.h"
#include "dsl/state.h"

namespace tessel {
namespace {

using detail::BuilderState;

// Why a math function refuses f64 (OpTraits::no_f64).
constexpr absl::string_view no_f64_message =
    "has no f64 form; cast the operand to f32 (docs/math.md lists each function's dtypes)";

absl::string_view symbol(OpCode op) {
  switch (op) {
    case OpCode::kAdd: return "operator+";
    case OpCode::kSub: return "operator-";
    case OpCode::kMul: return "operator*";
    case OpCode::kDiv: return "operator/";
    case OpCode::kRem: return "operator%";
    case OpCode::kAnd: return "operator&";
    case OpCode::kOr: return "operator|";
    case OpCode::kXor: return "operator^";
    case OpCode::kShl: return "operator<<";
    case OpCode::kShr: return "operator>>";
    case OpCode::kEq: return "operator==";
    case OpCode::kNe: return "operator!=";
    case OpCode::kLt: return "operator<";
    case OpCode::kLe: return "operator<=";
    case OpCode::kGt: return "operator>";
    case OpCode::kGe: return "operator>=";
    case OpCode::kMin: return "minimum";
    case OpCode::kMax: return "maximum";
    default: return opcode_name(op);
  }
}

bool is_pointerish(const Type& t) { return t.is_pointer() || (t.is_tile() && t.elements_are_pointers()); }

// The dtype literal `lit` takes next to `o`, if `o` is a value: o's, except
// that a float literal next to integers is f32 (the integers are promoted).
std::optional<DType> hint_of(BuilderState& s, const Operand& o, const Operand& lit) {
  if (!o.is_value() || !o.value().valid() || o.value().state() != &s) return std::nullopt;
  const Type& t = o.value().type();
  if (t.is_pointer() || (t.is_tile() && t.elements_are_pointers())) return std::nullopt;
  if (!lit.is_value() && lit.is_float() && !t.dtype().is_float() && !t.dtype().is_bool()) return f32;
  return t.dtype();
}

// The dtype two numbers of dtypes a and b combine in (docs/guide.md, "Types
// and promotion"): an integer meets a float in the float; two floats in the
// wider (two 16-bit kinds, or two fp8 kinds, in f32); two integers of one
// signedness in the wider, of two in the signed one if it is wider. None
// where no dtype holds both (i1 with anything else, u32 with i32).
std::optional<DType> promoted(DType a, DType b) {
  if (a == b) return a;
  if (a.is_bool() || b.is_bool()) return std::nullopt;
  if (a.is_float() != b.is_float()) return a.is_float() ? a : b;
  if (a.is_float()) {
    if (a.bits() != b.bits()) return a.bits() > b.bits() ? a : b;
    return f32;
  }
  if (a.is_signed() == b.is_signed()) return a.bits() > b.bits() ? a : b;
  const DType& sgn = a.is_signed() ? a : b;
  const DType& uns = a.is_signed() ? b : a;
  if (sgn.bits() > uns.bits()) return sgn;
  return std::nullopt;
}

// Casts value `id` to dtype `d` (its shape kept) where it differs.
int to_dtype(BuilderState& s, int id, DType d, std::source_location loc) {
  const Type& t = s.type(id);
  if (t.dtype() == d) return id;
  return s.emit1(OpCode::kCast, {id}, t.with_element(Type(d)), loc).id();
}

Shape shape_of(const Type& t) { return t.is_tile() ? t.shape() : Shape{}; }

// Splats or broadcasts value `id` to `shape` (no-op when it has it already).
int to_shape(BuilderState& s, int id, const Shape& shape, std::source_location loc) {
  const Type& t = s.type(id);
  if (shape.empty() || (t.is_tile() && t.shape() == shape)) return id;
  if (!t.is_tile()) return s.emit1(OpCode::kSplat, {id}, Type::tile(t, shape), loc).id();
  return s.emit1(OpCode::kBroadcast, {id}, Type::tile(t.element(), shape), loc).id();
}

// The numpy-style common shape of two operands (equal ranks; size-1 dims
// stretch; a scalar goes anywhere). Empty for two scalars.
std::optional<Shape> common_shape(BuilderState& s, const Type& a, const Type& b, absl::string_view what,
                                  std::source_location loc) {
  for (const Type* t : {&a, &b}) {
    if (!(t->is_scalar() || t->is_pointer() || t->is_tile())) {
      s.fail(loc, absl::StrCat(what, ": ", t->str(), " is not a number, pointer or tile"));
      return std::nullopt;
    }
  }
  Shape sa = shape_of(a), sb = shape_of(b);
  if (sa.empty()) return sb;
  if (sb.empty()) return sa;
  if (sa.size() != sb.size()) {
    s.fail(loc, absl::StrCat(what, ": rank mismatch between ", a.str(), " and ", b.str(),
                             " (use expand_dims to line up dimensions)"));
    return std::nullopt;
  }
  Shape out(sa.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    if (sa[i] == sb[i] || sb[i] == 1) {
      out[i] = sa[i];
    } else if (sa[i] == 1) {
      out[i] = sb[i];
    } else {
      s.fail(loc, absl::StrCat(what, ": shapes of ", a.str(), " and ", b.str(), " do not broadcast (dimension ", i,
                               ": ", sa[i], " vs ", sb[i], ")"));
      return std::nullopt;
    }
  }
  return out;
}

// Materializes two operands, promotes two numbers to one dtype and
// broadcasts both to one shape.
bool unify(BuilderState& s, const Operand& a, const Operand& b, absl::string_view what, std::source_location loc,
           int& ia, int& ib) {
  std::optional<DType> ha = hint_of(s, b, a), hb = hint_of(s, a, b);
  ia = s.operand(a, ha, what, loc);
  ib = s.operand(b, hb, what, loc);
  if (ia < 0 || ib < 0) return false;
  std::optional<Shape> shape = common_shape(s, s.type(ia), s.type(ib), what, loc);
  if (!shape) return false;
  const Type &ta = s.type(ia), &tb = s.type(ib);
  const bool numbers = !is_pointerish(ta) && !is_pointerish(tb);
  if (numbers && ta.dtype() != tb.dtype()) {
    std::optional<DType> d = promoted(ta.dtype(), tb.dtype());
    if (!d) {
      s.fail(loc, absl::StrCat(what, ": mismatched types ", ta.str(), " and ", tb.str(),
                               ta.dtype().is_bool() || tb.dtype().is_bool() ? "" : " (neither holds the other)",
                               "; cast one side"));
      return false;
    }
    ia = to_dtype(s, ia, *d, loc);
    ib = to_dtype(s, ib, *d, loc);
  }
  ia = to_shape(s, ia, *shape, loc);
  ib = to_shape(s, ib, *shape, loc);
  return true;
}


Value pointer_add(BuilderState& s, int p, int off, std::source_location loc) {
  if (!s.type(off).is_int() || s.type(off).is_bool()) {
    return s.fail(loc, absl::StrCat("operator+: a pointer takes integer offsets, got ", s.type(off).str()));
  }
  std::optional<Shape> shape = common_shape(s, s.type(p), s.type(off), "operator+", loc);
  if (!shape) return Value();
  p = to_shape(s, p, *shape, loc);
  off = to_shape(s, off, *shape, loc);
  return s.emit1(OpCode::kPtrAdd, {p, off}, s.type(p), loc);
}

Value binary(OpCode op, const Operand& a, const Operand& b, std::source_location loc,
             MathForm form = MathForm::kAccurate) {
  BuilderState* sp = detail::state_of({&a, &b});
  if (sp == nullptr) return Value();
  BuilderState& s = *sp;
  absl::string_view what = symbol(op);
  bool pa = a.is_value() && is_pointerish(a.value().type());
  bool pb = b.is_value() && is_pointerish(b.value().type());
  if ((pa || pb) && op == OpCode::kAdd && !(pa && pb)) {
    const Operand& p = pa ? a : b;
    int ip = s.use(p.value(), what, loc);
    int io = s.operand(pa ? b : a, i32, what, loc);
    if (ip < 0 || io < 0) return Value();
    return pointer_add(s, ip, io, loc);
  }
  int ia, ib;
  if (!unify(s, a, b, what, loc, ia, ib)) return Value();
  const Type& ta = s.type(ia);
  const Type& tb = s.type(ib);
  if (is_pointerish(ta) || is_pointerish(tb)) {
    return s.fail(loc, absl::StrCat(what, ": not defined on pointers (", ta.str(), ", ", tb.str(), ")"));
  }
  DType d = ta.dtype();  // unify() promoted both numbers to it
  const OpTraits& traits = op_traits(op);
  if (traits.integers_only && d.is_float()) {
    return s.fail(loc, absl::StrCat(what, ": needs integer operands, got ", ta.str()));
  }
  if (traits.floats_only && !d.is_float()) {
    return s.fail(loc, absl::StrCat(what, ": needs floating-point operands, got ", ta.str(), "; cast them first"));
  }
  if (traits.no_f64 && d == f64) return s.fail(loc, absl::StrCat(what, ": ", no_f64_message));
  if (d.is_bool() && !traits.takes_i1) {
    return s.fail(loc, absl::StrCat(what, ": not defined on i1 (", ta.str(), ")"));
  }
  Type result = is_comparison(op) ? ta.with_element(i1) : ta;
  if (form == MathForm::kFast) {
    if (!d.is_float()) {
      return s.fail(loc, absl::StrCat(what, ": MathForm::kFast needs floating-point operands, got ", ta.str()));
    }
    return s.emit1(op, {ia, ib}, result, loc, {static_cast<int64_t>(form)});
  }
  return s.emit1(op, {ia, ib}, result, loc);
}

Value unary(OpCode op, const Operand& x, absl::string_view what, std::source_location loc,
            MathForm form = MathForm::kAccurate) {
  BuilderState* sp = detail::state_of({&x});
  if (sp == nullptr) return Value();
  BuilderState& s = *sp;
  int ix = s.operand(x, std::nullopt, what, loc);
  if (ix < 0) return Value();
  const Type& t = s.type(ix);
  if (is_pointerish(t) || !(t.is_scalar() || t.is_tile())) {
    return s.fail(loc, absl::StrCat(what, ": needs a number or a tile of numbers, got ", t.str()));
  }
  DType d = t.dtype();
  const OpTraits& traits = op_traits(op);
  if (traits.floats_only && !d.is_float()) {
    return s.fail(loc, absl::StrCat(what, ": needs a floating-point operand, got ", t.str(), "; cast it first"));
  }
  if (traits.integers_only && d.is_float()) return s.fail(loc, absl::StrCat(what, ": needs an integer or i1 operand"));
  if (!traits.takes_i1 && d.is_bool()) return s.fail(loc, absl::StrCat(what, ": not defined on i1"));
  if (traits.no_f64 && d == f64) return s.fail(loc, absl::StrCat(what, ": ", no_f64_message));
  if (form == MathForm::kFast) return s.emit1(op, {ix}, t, loc, {static_cast<int64_t>(form)});
  return s.emit1(op, {ix}, t, loc);
}

// The operand of a reduction, scan or sort along `axis`: a tile of
// numbers (not i1) with that axis; -1 after reporting what is wrong.
int along_axis_operand(BuilderState& s, const Value& x, int axis, absl::string_view what, std::source_location loc) {
  int ix = s.use(x, what, loc);
  if (ix < 0) return -1;
  const Type& t = s.type(ix);
  if (!t.is_tile() || t.elements_are_pointers()) {
    s.fail(loc, absl::StrCat(what, ": needs a tile of numbers, got ", t.str()));
    return -1;
  }
  if (axis < 0 || axis >= t.rank()) {
    s.fail(loc, absl::StrCat(what, ": axis ", axis, " is out of range for ", t.str()));
    return -1;
  }
  if (t.dtype().is_bool()) {
    s.fail(loc, absl::StrCat(what, ": not defined on i1 tiles; cast them to an integer type first"));
    return -1;
  }
  return ix;
}

Value reduce(OpCode combiner, const Value& x, int axis, absl::string_view what, std::source_location loc) {
  BuilderState* s = x.state();
  if (s == nullptr) return Value();
  int ix = along_axis_operand(*s, x, axis, what, loc);
  if (ix < 0) return Value();
  const Type& t = s->type(ix);
  Shape shape = t.shape();
  shape.erase(shape.begin() + axis);
  Type result = shape.empty() ? Type(t.dtype()) : Type::tile(t.dtype(), shape);
  return s->emit1(OpCode::kReduce, {ix}, result, loc, {axis, static_cast<int64_t>(combiner)});
}

Value scan(OpCode combiner, const Value& x, int axis, bool reverse, absl::string_view what, std::source_location loc) {
  BuilderState* s = x.state();
  if (s == nullptr) return Value();
  int ix = along_axis_operand(*s, x, axis, what, loc);
  if (ix < 0) return Value();
  Type result = s->type(ix);  // a copy: emitting moves the types
  return s->emit1(OpCode::kScan, {ix}, result, loc, {axis, static_cast<int64_t>(combiner), reverse ? 1 : 0});
}

// The pointee dtype and shape behind a pointer operand.
bool pointer_operand(BuilderState& s, const Operand& ptrs, absl::string_view what, std::source_location loc, int& ip) {
  ip = s.operand(ptrs, std::nullopt, what, loc);
  if (ip < 0) return false;
  if (!is_pointerish(s.type(ip))) {
    s.fail(loc, absl::StrCat(what, ": needs a pointer or a tile of pointers, got ", s.type(ip).str()));
    return false;
  }
  return true;
}

// Materializes `o` as a value of `ptrs`'s pointee dtype in `ptrs`'s shape.
int element_operand(BuilderState& s, int ip, const Operand& o, absl::string_view what, absl::string_view role,
                    std::source_location loc) {
  Type pt = s.type(ip);  // a copy: materializing `o` may grow the value table
  int io = s.operand(o, pt.dtype(), what, loc);
  if (io < 0) return -1;
  const Type& t = s.type(io);
  if (is_pointerish(t) || t.dtype() != pt.dtype()) {
    s.fail(loc, absl::StrCat(what, ": ", role, " of type ", t.str(), " does not match the pointee type ",
                             pt.dtype().name()));
    return -1;
  }
  std::optional<Shape> shape = common_shape(s, pt, t, what, loc);
  if (!shape) return -1;
  if (*shape != shape_of(pt)) {
    s.fail(loc, absl::StrCat(what, ": ", role, " ", t.str(), " is larger than the pointer operand ", pt.str()));
    return -1;
  }
  return to_shape(s, io, *shape, loc);
}

int mask_operand(BuilderState& s, int ip, const Operand& mask, absl::string_view what, std::source_location loc) {
  int im = s.operand(mask, i1, what, loc);
  if (im < 0) return -1;
  const Type& t = s.type(im);
  if (!t.is_bool()) {
    s.fail(loc, absl::StrCat(what, ": the mask must be i1, got ", t.str()));
    return -1;
  }
  std::optional<Shape> shape = common_shape(s, s.type(ip), t, what, loc);
  if (!shape) return -1;
  if (*shape != shape_of(s.type(ip))) {
    s.fail(loc, absl::StrCat(what, ": mask ", t.str(), " is larger than the pointer operand ", s.type(ip).str()));
    return -1;
  }
  return to_shape(s, im, *shape, loc);
}

Type loaded_type(const Type& ptrs) { return ptrs.with_element(Type(ptrs.dtype())); }

bool tma_coords(BuilderState& s, int map, const std::vector<Operand>& coords, absl::string_view what,
                std::source_location loc, std::vector<int>& out) {
  const Type& mt = s.type(map);
  if (!mt.is_tensor_map()) {
    s.fail(loc, absl::StrCat(what, ": needs a tensor map, got ", mt.str()));
    return false;
  }
  if (static_cast<int>(coords.size()) != mt.rank()) {
    s.fail(loc, absl::StrCat(what, ": ", coords.size(), " coordinates for a rank-", mt.rank(), " tensor map"));
    return false;
  }
  for (const Operand& c : coords) {
    int ic = s.operand(c, i32, what, loc);
    if (ic < 0) return false;
    if (s.type(ic) != Type(i32)) {
      s.fail(loc, absl::StrCat(what, ": coordinates are i32 scalars, got ", s.type(ic).str()));
      return false;
    }
    out.push_back(ic);
  }
  return true;
}

}  // namespace

Value operator+(const Operand& a, const Operand& b) { return binary(OpCode::kAdd, a, b, a.loc()); }
Value operator-(const Operand& a, const Operand& b) { return binary(OpCode::kSub, a, b, a.loc()); }
Value operator*(const Operand& a, const Operand& b) { return binary(OpCode::kMul, a, b, a.loc()); }
Value operator/(const Operand& a, const Operand& b) { return binary(OpCode::kDiv, a, b, a.loc()); }
Value operator%(const Operand& a, const Operand& b) { return binary(OpCode::kRem, a, b, a.loc()); }
Value operator&(const Operand& a, const Operand& b) { return binary(OpCode::kAnd, a, b, a.loc()); }
Value operator|(const Operand& a, const Operand& b) { return binary(OpCode::kOr, a, b, a.loc()); }
Value operator^(const Operand& a, const Operand& b) { return binary(OpCode::kXor, a, b, a.loc()); }
Value operator<<(const Operand& a, const Operand& b) { return binary(OpCode::kShl, a, b, a.loc()); }
Value operator>>(const Operand& a, const Operand& b) { return binary(OpCode::kShr, a, b, a.loc()); }
Value operator==(const Operand& a, const Operand& b) { return binary(OpCode::kEq, a, b, a.loc()); }
Value operator!=(const Operand& a, const Operand& b) { return binary(OpCode::kNe, a, b, a.loc()); }
Value operator<(const Operand& a, const Operand& b) { return binary(OpCode::kLt, a, b, a.loc()); }
Value operator<=(const Operand& a, const Operand& b) { return binary(OpCode::kLe, a, b, a.loc()); }
Value operator>(const Operand& a, const Operand& b) { return binary(OpCode::kGt, a, b, a.loc()); }
Value operator>=(const Operand& a, const Operand& b) { return binary(OpCode::kGe, a, b, a.loc()); }
Value operator-(const Operand& a) { return unary(OpCode::kNeg, a, "operator- (negation)", a.loc()); }
Value operator~(const Operand& a) { return unary(OpCode::kNot, a, "operator~", a.loc()); }
Value operator!(const Operand& a) {
  if (a.is_value() && a.value().valid() && !a.value().type().is_bool()) {
    return a.value().state()->fail(a.loc(), absl::StrCat("operator!: needs i1, got ", a.value().type().str()));
  }
  return unary(OpCode::kNot, a, "operator!", a.loc());
}

Value minimum(const Operand& a, const Operand& b, Loc loc) { return binary(OpCode::kMin, a, b, loc); }
Value maximum(const Operand& a, const Operand& b, Loc loc) { return binary(OpCode::kMax, a, b, loc); }
Value clamp(const Operand& x, const Operand& lo, const Operand& hi, Loc loc) {
  return minimum(maximum(x, lo, loc), hi, loc);
}
Value sqrt(const Operand& x, Loc loc) { return unary(OpCode::kSqrt, x, "sqrt", loc); }
Value rsqrt(const Operand& x, Loc loc) { return unary(OpCode::kRsqrt, x, "rsqrt", loc); }
Value abs(const Operand& x, Loc loc) { return unary(OpCode::kAbs, x, "abs", loc); }
Value floor(const Operand& x, Loc loc) { return unary(OpCode::kFloor, x, "floor", loc); }
Value ceil(const Operand& x, Loc loc) { return unary(OpCode::kCeil, x, "ceil", loc); }
Value round(const Operand& x, Loc loc) { return unary(OpCode::kRound, x, "round", loc); }
Value exp(const Operand& x, MathForm form, Loc loc) { return unary(OpCode::kExp, x, "exp", loc, form); }
Value exp2(const Operand& x, MathForm form, Loc loc) { return unary(OpCode::kExp2, x, "exp2", loc, form); }
Value log(const Operand& x, MathForm form, Loc loc) { return unary(OpCode::kLog, x, "log", loc, form); }
Value log2(const Operand& x, MathForm form, Loc loc) { return unary(OpCode::kLog2, x, "log2", loc, form); }
Value tanh(const Operand& x, MathForm form, Loc loc) { return unary(OpCode::kTanh, x, "tanh", loc, form); }
Value sin(const Operand& x, MathForm form, Loc loc) { return unary(OpCode::kSin, x, "sin", loc, form); }
Value cos(const Operand& x, MathForm form, Loc loc) { return unary(OpCode::kCos, x, "cos", loc, form); }
Value sigmoid(const Operand& x, Loc loc) { return unary(OpCode::kSigmoid, x, "sigmoid", loc); }
Value erf(const Operand& x, Loc loc) { return unary(OpCode::kErf, x, "erf", loc); }
Value sinh(const Operand& x, Loc loc) { return unary(OpCode::kSinh, x, "sinh", loc); }
Value cosh(const Operand& x, Loc loc) { return unary(OpCode::kCosh, x, "cosh", loc); }
Value log1p(const Operand& x, Loc loc) { return unary(OpCode::kLog1p, x, "log1p", loc); }
Value expm1(const Operand& x, Loc loc) { return unary(OpCode::kExpm1, x, "expm1", loc); }
Value tan(const Operand& x, Loc loc) { return unary(OpCode::kTan, x, "tan", loc); }
Value asin(const Operand& x, Loc loc) { return unary(OpCode::kAsin, x, "asin", loc); }
Value acos(const Operand& x, Loc loc) { return unary(OpCode::kAcos, x, "acos", loc); }
Value atan(const Operand& x, Loc loc) { return unary(OpCode::kAtan, x, "atan", loc); }
Value atan2(const Operand& y, const Operand& x, Loc loc) { return binary(OpCode::kAtan2, y, x, loc); }
Value pow(const Operand& x, const Operand& y, Loc loc) { return binary(OpCode::kPow, x, y, loc); }
Value div(const Operand& a, const Operand& b, MathForm form, Loc loc) { return binary(OpCode::kDiv, a, b, loc, form); }

Value fma(const Operand& a, const Operand& b, const Operand& c, Loc loc) {
  BuilderState* sp = detail::state_of({&a, &b, &c});
  if (sp == nullptr) return Value();
  BuilderState& s = *sp;
  int ia, ib, ic, ic2;
  if (!unify(s, a, b, "fma", loc, ia, ib)) return Value();
  if (!unify(s, s.value(ia), c, "fma", loc, ia, ic)) return Value();
  if (!unify(s, s.value(ib), s.value(ic), "fma", loc, ib, ic2)) return Value();
  const Type& t = s.type(ia);
  if (!t.is_float() || s.type(ib) != t || s.type(ic2) != t) {
    return s.fail(loc, absl::StrCat("fma: needs three floating-point operands of one type, got ", t.str(), ", ",
                                    s.type(ib).str(), ", ", s.type(ic2).str()));
  }
  return s.emit1(OpCode::kFma, {ia, ib, ic2}, t, loc);
}

Value cdiv(const Operand& a, const Operand& b, Loc loc) {
  // The intermediate operands carry the caller's location into diagnostics.
  Operand sum(a + b, loc);
  Operand sum_minus_one(sum - 1, loc);
  return sum_minus_one / b;
}

Value sum(const Value& x, int axis, Loc loc) { return reduce(OpCode::kAdd, x, axis, "sum", loc); }
Value max(const Value& x, int axis, Loc loc) { return reduce(OpCode::kMax, x, axis, "max", loc); }
Value min(const Value& x, int axis, Loc loc) { return reduce(OpCode::kMin, x, axis, "min", loc); }

Value cumsum(const Value& x, int axis, bool reverse, Loc loc) {
  return scan(OpCode::kAdd, x, axis, reverse, "cumsum", loc);
}
Value cumprod(const Value& x, int axis, bool reverse, Loc loc) {
  return scan(OpCode::kMul, x, axis, reverse, "cumprod", loc);
}
Value cummax(const Value& x, int axis, bool reverse, Loc loc) {
  return scan(OpCode::kMax, x, axis, reverse, "cummax", loc);
}
Value cummin(const Value& x, int axis, bool reverse, Loc loc) {
  return scan(OpCode::kMin, x, axis, reverse, "cummin", loc);
}
namespace {

Value sort_op(const Value& x, int axis, bool descending, bool positions, absl::string_view what, Loc loc) {
  BuilderState* s = x.state();
  if (s == nullptr) return Value();
  int ix = along_axis_operand(*s, x, axis, what, loc);
  if (ix < 0) return Value();
  const Type& t = s->type(ix);
  Type result = positions ? Type::tile(i32, t.shape()) : t;  // a copy: emitting moves the types
  return s->emit1(OpCode::kSort, {ix}, result, loc, {axis, descending ? 1 : 0, positions ? 1 : 0});
}

}  // namespace

Value sort(const Value& x, int axis, bool descending, Loc loc) {
  return sort_op(x, axis, descending, false, "sort", loc);
}
Value argsort(const Value& x, int axis, bool descending, Loc loc) {
  return sort_op(x, axis, descending, true, "argsort", loc);
}

Value gather(const Value& src, const Value& index, int axis, Loc loc) {
  BuilderState* s = src.state();
  if (s == nullptr) return Value();
  const int is = s->use(src, "gather", loc);
  const int ii = is < 0 ? -1 : s->use(index, "gather", loc);
  if (ii < 0) return Value();
  const Type &ts = s->type(is), &ti = s->type(ii);
  if (!ts.is_tile() || ts.elements_are_pointers()) {
    return s->fail(loc, absl::StrCat("gather: the source is a tile of numbers or i1, got ", ts.str()));
  }
  if (!ti.is_tile() || ti.elements_are_pointers() || ti.dtype().is_float() || ti.dtype().is_bool()) {
    return s->fail(loc, absl::StrCat("gather: the index is a tile of integers, got ", ti.str()));
  }
  if (axis < 0 || axis >= ts.rank()) {
    return s->fail(loc, absl::StrCat("gather: axis ", axis, " is out of range for ", ts.str()));
  }
  bool fits = ti.rank() == ts.rank();
  for (int d = 0; fits && d < ts.rank(); ++d) fits = d == axis || ti.shape()[d] == ts.shape()[d];
  if (!fits) {
    return s->fail(loc, absl::StrCat("gather: the index ", shape_str(ti.shape()),
                                     " must have the source's rank and its sizes but along axis ", axis,
                                     " (the source is ", shape_str(ts.shape()), ")"));
  }
  return s->emit1(OpCode::kGather, {is, ii}, Type::tile(ts.dtype(), ti.shape()), loc, {axis});
}

namespace {

// reduce_fn and scan_fn: the tiles `xs` of one shape along `axis`, their
// combine function made in a block of the op (what: the op's name in errors).
std::vector<Value> combine_op(OpCode opcode, absl::string_view what, const std::vector<Value>& xs, int axis,
                              const CombineFn& combine, std::vector<int64_t> ints, Loc loc) {
  std::vector<Value> failed(xs.size());
  BuilderState* s = xs.empty() ? detail::state_of({}) : xs[0].state();
  if (s == nullptr) return failed;
  if (xs.empty()) {
    s->fail(loc, absl::StrCat(what, ": needs at least one tile"));
    return failed;
  }
  std::vector<int> ids;
  for (const Value& x : xs) {
    const int id = s->use(x, what, loc);
    if (id < 0) return failed;
    const Type& t = s->type(id);
    if (!t.is_tile() || t.elements_are_pointers()) {
      s->fail(loc, absl::StrCat(what, ": needs tiles of numbers or i1, got ", t.str()));
      return failed;
    }
    if (t.shape() != s->type(ids.empty() ? id : ids[0]).shape()) {
      s->fail(loc,
              absl::StrCat(what, ": the tiles must have one shape, got ", s->type(ids[0]).str(), " and ", t.str()));
      return failed;
    }
    ids.push_back(id);
  }
  const Type& first = s->type(ids[0]);
  if (axis < 0 || axis >= first.rank()) {
    s->fail(loc, absl::StrCat(what, ": axis ", axis, " is out of range for ", first.str()));
    return failed;
  }
  Shape shape = first.shape();
  if (opcode == OpCode::kReduceFn) shape.erase(shape.begin() + axis);
  std::vector<Type> elems, results;
  for (int id : ids) {
    elems.push_back(Type(s->type(id).dtype()));
    results.push_back(shape.empty() ? elems.back() : Type::tile(elems.back().dtype(), shape));
  }
  ints.insert(ints.begin(), axis);
  const int op = s->emit(opcode, ids, results, loc, std::move(ints));
  const int block = s->new_block();
  s->ir.ops[op].blocks.push_back(block);
  std::vector<Value> args;
  for (int side = 0; side < 2; ++side) {
    for (const Type& t : elems) args.push_back(s->value(s->add_block_arg(block, t)));
  }
  const size_t n = ids.size();
  s->open(block);
  const std::vector<Value> out =
      combine(std::span<const Value>(args).first(n), std::span<const Value>(args).subspan(n));
  std::vector<int> yields;
  if (!s->failed() && out.size() != n) {
    s->fail(loc, absl::StrCat(what, ": the combine function returned ", out.size(), " values for ", n, " tiles"));
  }
  for (const int o : s->ir.blocks[block].ops) {
    const Op& made = s->ir.ops[o];
    if (s->failed()) break;
    const bool scalar = !made.results.empty() && s->type(made.results[0]).is_scalar();
    if (!scalar || (made.op != OpCode::kConstant && !is_elementwise(made.op))) {
      s->fail(made.loc, absl::StrCat(what, ": the combine function may use elementwise ops on scalars only, got ",
                                     opcode_name(made.op),
                                     made.results.empty() ? "" : " making " + s->type(made.results[0]).str()));
    }
  }
  for (size_t i = 0; i < out.size() && !s->failed(); ++i) {
    const int id = s->use(out[i], what, loc);
    if (id < 0) break;
    if (s->type(id) != elems[i]) {
      s->fail(loc, absl::StrCat(what, ": the combine function's value ", i, " must be ", elems[i].str(), ", got ",
                                s->type(id).str()));
      break;
    }
    yields.push_back(id);
  }
  if (!s->failed()) s->emit(OpCode::kYield, yields, {}, loc);
  s->close(block);
  if (s->failed()) return failed;
  std::vector<Value> made;
  for (int r : s->ir.ops[op].results) made.push_back(s->value(r));
  return made;
}

// A combine function of scalars as one of tuples.
CombineFn on_tuples(const std::function<Value(const Value& a, const Value& b)>& combine) {
  return [&combine](std::span<const Value> a, std::span<const Value> b) {
    return std::vector<Value>{combine(a[0], b[0])};
  };
}

}  // namespace

std::vector<Value> reduce(const std::vector<Value>& xs, int axis, const CombineFn& combine, Loc loc) {
  return combine_op(OpCode::kReduceFn, "reduce", xs, axis, combine, {}, loc);
}

Value reduce(const Value& x, int axis, const std::function<Value(const Value& a, const Value& b)>& combine, Loc loc) {
  return reduce(std::vector<Value>{x}, axis, on_tuples(combine), loc)[0];
}

std::vector<Value> associative_scan(const std::vector<Value>& xs, int axis, const CombineFn& combine, bool reverse,
                                    Loc loc) {
  return combine_op(OpCode::kScanFn, "associative_scan", xs, axis, combine, {reverse ? 1 : 0}, loc);
}

Value associative_scan(const Value& x, int axis, const std::function<Value(const Value& a, const Value& b)>& combine,
                       bool reverse, Loc loc) {
  return associative_scan(std::vector<Value>{x}, axis, on_tuples(combine), reverse, loc)[0];
}

namespace {

void debug_op(OpCode op, absl::string_view what, absl::string_view text, absl::Span<const Operand> values, Loc loc) {
  std::vector<const Operand*> operands;
  for (const Operand& v : values) operands.push_back(&v);
  BuilderState* s = detail::state_of(operands);
  if (s == nullptr) return;
  if (values.size() > kMaxPrintValues) {
    s->fail(loc, absl::StrCat(what, ": takes at most ", kMaxPrintValues, " values, got ", values.size()));
    return;
  }
  std::vector<int> ids;
  Shape shape;
  for (const Operand& v : values) {
    const int id = s->operand(v, std::nullopt, what, loc);
    if (id < 0) return;
    const Type& t = s->type(id);
    if (!t.is_scalar() && !t.is_pointer() && !t.is_tile()) {
      s->fail(loc, absl::StrCat(what, ": ", t.str(), " is not a number, pointer or tile"));
      return;
    }
    if (op == OpCode::kAssert && !t.is_bool()) {
      s->fail(loc, absl::StrCat(what, ": the condition must be i1, got ", t.str()));
      return;
    }
    if (!ids.empty()) {
      std::optional<Shape> common = common_shape(*s, s->type(ids[0]), t, what, loc);
      if (!common) return;
      if (!common->empty()) shape = *common;
    } else if (t.is_tile()) {
      shape = t.shape();
    }
    ids.push_back(id);
  }
  for (int& id : ids) id = to_shape(*s, id, shape, loc);
  s->ir.texts.emplace_back(text);
  s->emit(op, std::move(ids), {}, loc, {static_cast<int64_t>(s->ir.texts.size() - 1)});
}

}  // namespace

void device_print(absl::string_view prefix, std::initializer_list<Operand> values, Loc loc) {
  debug_op(OpCode::kPrint, "device_print", prefix, values, loc);
}

void device_print(absl::string_view prefix, const std::vector<Value>& values, Loc loc) {
  debug_op(OpCode::kPrint, "device_print", prefix, std::vector<Operand>(values.begin(), values.end()), loc);
}

void device_assert(const Operand& cond, absl::string_view message, Loc loc) {
  debug_op(OpCode::kAssert, "device_assert", message, {cond}, loc);
}

namespace {

Value histogram_op(const Value& x, int64_t bins, const Operand* mask, Loc loc) {
  BuilderState* s = x.state();
  if (s == nullptr) return Value();
  const int ix = s->use(x, "histogram", loc);
  if (ix < 0) return Value();
  const Type& t = s->type(ix);
  if (!t.is_tile() || !t.is_int() || t.is_bool()) {
    return s->fail(loc, absl::StrCat("histogram: counts a tile of integers, got ", t.str()));
  }
  if (bins < 1) return s->fail(loc, absl::StrCat("histogram: bins must be positive, got ", bins));
  if (!s->check_shape({bins}, "histogram", loc)) return Value();
  if (mask == nullptr) return s->emit1(OpCode::kHistogram, {ix}, Type::tile(i32, {bins}), loc, {bins});
  const int im = s->operand(*mask, i1, "histogram", loc);
  if (im < 0) return Value();
  const Type& mt = s->type(im);
  if (!mt.is_bool()) return s->fail(loc, absl::StrCat("histogram: the mask must be i1, got ", mt.str()));
  std::optional<Shape> shape = common_shape(*s, t, mt, "histogram", loc);
  if (!shape) return Value();
  if (*shape != t.shape()) {
    return s->fail(loc, absl::StrCat("histogram: mask ", mt.str(), " is larger than the counted tile ", t.str()));
  }
  const int ib = to_shape(*s, im, t.shape(), loc);
  return s->emit1(OpCode::kHistogram, {ix, ib}, Type::tile(i32, {bins}), loc, {bins});
}

}  // namespace

Value histogram(const Value& x, int64_t bins, Loc loc) { return histogram_op(x, bins, nullptr, loc); }
Value histogram(const Value& x, int64_t bins, const Operand& mask, Loc loc) {
  return histogram_op(x, bins, &mask, loc);
}

namespace {

// The position along `axis` of the first element equal to the combiner's
// result (max or min, whose NaN loses to a number): two reductions, so
// every dtype and target takes the paths sum, max and min take.
Value arg_reduce(OpCode combiner, const Value& x, int axis, absl::string_view what, Loc loc) {
  Value best = reduce(combiner, x, axis, what, loc);
  if (!best.valid()) return Value();
  BuilderState& s = *x.state();
  const Shape shape = s.type(s.use(x, what, loc)).shape();  // a copy: emitting ops below moves the types
  const int64_t n = shape[axis];
  Value at = broadcast_to(shape.size() == 1 ? best : expand_dims(best, axis, loc), shape, loc);
  Shape along(shape.size(), 1);
  along[axis] = n;
  Value positions = s.emit1(OpCode::kArange, {}, Type::tile(i32, {n}), loc, {0, n});
  Value pos = broadcast_to(reshape(positions, along, loc), shape, loc);
  Value first = reduce(OpCode::kMin, where(x == at, pos, static_cast<int32_t>(n), loc), axis, what, loc);
  // No element equals the result only where every one is NaN (the result
  // is then the combiner's identity): the first is the answer.
  return where(first == static_cast<int32_t>(n), 0, first, loc);
}

}  // namespace

Value argmax(const Value& x, int axis, Loc loc) { return arg_reduce(OpCode::kMax, x, axis, "argmax", loc); }
Value argmin(const Value& x, int axis, Loc loc) { return arg_reduce(OpCode::kMin, x, axis, "argmin", loc); }

Value cast(const Operand& x, DType to, Loc loc) {
  BuilderState* s = detail::state_of({&x});
  if (s == nullptr) return Value();
  int ix = s->operand(x, std::nullopt, "cast", loc);
  if (ix < 0) return Value();
  const Type& t = s->type(ix);
  if (is_pointerish(t) || !(t.is_scalar() || t.is_tile())) {
    return s->fail(loc, absl::StrCat("cast: converts numbers, got ", t.str()));
  }
  if (t.dtype() == to) return s->value(ix);
  return s->emit1(OpCode::kCast, {ix}, t.with_element(Type(to)), loc);
}

Value bitcast(const Operand& x, DType to, Loc loc) {
  BuilderState* s = detail::state_of({&x});
  if (s == nullptr) return Value();
  int ix = s->operand(x, std::nullopt, "bitcast", loc);
  if (ix < 0) return Value();
  const Type& t = s->type(ix);
  if (is_pointerish(t) || !(t.is_scalar() || t.is_tile()) || t.is_bool() || to.is_bool()) {
    return s->fail(loc, absl::StrCat("bitcast: reinterprets numbers other than i1, got ", t.str(), " to ", to.name()));
  }
  if (t.dtype().bits() != to.bits()) {
    return s->fail(loc, absl::StrCat("bitcast: ", t.dtype().name(), " has ", t.dtype().bits(), " bits and ", to.name(),
                                     " ", to.bits(), "; a bitcast keeps the width"));
  }
  if (t.dtype() == to) return s->value(ix);
  return s->emit1(OpCode::kBitcast, {ix}, t.with_element(Type(to)), loc);
}

namespace {

Value choose(const Operand& cond, const Operand& a, const Operand& b, absl::string_view what, Loc loc) {
  BuilderState* sp = detail::state_of({&cond, &a, &b});
  if (sp == nullptr) return Value();
  BuilderState& s = *sp;
  int ia, ib;
  if (!unify(s, a, b, what, loc, ia, ib)) return Value();
  if (s.type(ia).element() != s.type(ib).element()) {
    return s.fail(loc, absl::StrCat(what, ": mismatched types ", s.type(ia).str(), " and ", s.type(ib).str()));
  }
  int ic = s.operand(cond, i1, what, loc);
  if (ic < 0) return Value();
  if (!s.type(ic).is_bool()) {
    return s.fail(loc, absl::StrCat(what, ": the condition must be i1, got ", s.type(ic).str()));
  }
  std::optional<Shape> shape = common_shape(s, s.type(ic), s.type(ia), what, loc);
  if (!shape) return Value();
  ic = to_shape(s, ic, *shape, loc);
  ia = to_shape(s, ia, *shape, loc);
  ib = to_shape(s, ib, *shape, loc);
  return s.emit1(OpCode::kSelect, {ic, ia, ib}, s.type(ia), loc);
}

}  // namespace

Value select(const Operand& cond, const Operand& a, const Operand& b, Loc loc) {
  return choose(cond, a, b, "select", loc);
}
Value where(const Operand& cond, const Operand& a, const Operand& b, Loc loc) {
  return choose(cond, a, b, "where", loc);
}

Value splat(const Operand& scalar, const Shape& shape, Loc loc) {
  BuilderState* s = detail::state_of({&scalar});
  if (s == nullptr) return Value();
  int ix = s->operand(scalar, std::nullopt, "splat", loc);
  if (ix < 0 || !s->check_shape(shape, "splat", loc)) return Value();
  if (!s->type(ix).is_scalar() && !s->type(ix).is_pointer()) {
    return s->fail(loc, absl::StrCat("splat: needs a scalar, got ", s->type(ix).str()));
  }
  return s->emit1(OpCode::kSplat, {ix}, Type::tile(s->type(ix), shape), loc);
}

Value broadcast_to(const Value& x, const Shape& shape, Loc loc) {
  BuilderState* s = x.state();
  if (s == nullptr) return Value();
  int ix = s->use(x, "broadcast_to", loc);
  if (ix < 0 || !s->check_shape(shape, "broadcast_to", loc)) return Value();
  const Type& t = s->type(ix);
  if (!(t.is_scalar() || t.is_pointer() || t.is_tile())) {
    return s->fail(loc, absl::StrCat("broadcast_to: ", t.str(), " is not a number, pointer or tile"));
  }
  std::optional<Shape> common = common_shape(*s, t, Type::tile(t.element(), shape), "broadcast_to", loc);
  if (!common) return Value();
  if (*common != shape) {
    return s->fail(loc, absl::StrCat("broadcast_to: ", t.str(), " does not broadcast to ", shape_str(shape)));
  }
  return s->value(to_shape(*s, ix, shape, loc));
}

Value expand_dims(const Value& x, int axis, Loc loc) {
  BuilderState* s = x.state();
  if (s == nullptr) return Value();
  int ix = s->use(x, "expand_dims", loc);
  if (ix < 0) return Value();
  const Type& t = s->type(ix);
  if (!t.is_tile()) return s->fail(loc, absl::StrCat("expand_dims: needs a tile, got ", t.str()));
  if (axis < 0 || axis > t.rank()) {
    return s->fail(loc, absl::StrCat("expand_dims: axis ", axis, " is out of range for ", t.str()));
  }
  Shape shape = t.shape();
  shape.insert(shape.begin() + axis, 1);
  if (!s->check_shape(shape, "expand_dims", loc)) return Value();
  return s->emit1(OpCode::kExpandDims, {ix}, Type::tile(t.element(), shape), loc, {axis});
}

Value reshape(const Value& x, const Shape& shape, Loc loc) {
  BuilderState* s = x.state();
  if (s == nullptr) return Value();
  int ix = s->use(x, "reshape", loc);
  if (ix < 0 || !s->check_shape(shape, "reshape", loc)) return Value();
  const Type& t = s->type(ix);
  if (!t.is_tile() || t.numel() != numel(shape)) {
    return s->fail(loc, absl::StrCat("reshape: cannot reshape ", t.str(), " to ", shape_str(shape)));
  }
  return s->emit1(OpCode::kReshape, {ix}, Type::tile(t.element(), shape), loc);
}

Value trans(const Value& x, std::vector<int64_t> perm, Loc loc) {
  BuilderState* s = x.state();
  if (s == nullptr) return Value();
  int ix = s->use(x, "trans", loc);
  if (ix < 0) return Value();
  const Type& t = s->type(ix);
  if (!t.is_tile()) return s->fail(loc, absl::StrCat("trans: needs a tile, got ", t.str()));
  if (perm.empty()) {
    perm.resize(t.rank());
    std::iota(perm.rbegin(), perm.rend(), 0);
  }
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool valid = static_cast<int>(perm.size()) == t.rank();
  for (size_t i = 0; valid && i < sorted.size(); ++i) valid = sorted[i] == static_cast<int64_t>(i);
  if (!valid) {
    return s->fail(loc, absl::StrCat("trans: ", shape_str(perm), " is not a permutation of the ", t.rank(),
                                     " dimensions of ", t.str()));
  }
  Shape shape(t.rank());
  for (int i = 0; i < t.rank(); ++i) shape[i] = t.shape()[perm[i]];
  return s->emit1(OpCode::kTrans, {ix}, Type::tile(t.element(), shape), loc, perm);
}

Value narrow(const Value& x, int axis, int64_t start, int64_t size, Loc loc) {
  BuilderState* s = x.state();
  if (s == nullptr) return Value();
  const int ix = s->use(x, "narrow", loc);
  if (ix < 0) return Value();
  const Type& t = s->type(ix);
  if (!t.is_tile()) return s->fail(loc, absl::StrCat("narrow: needs a tile, got ", t.str()));
  if (axis < 0 || axis >= t.rank()) {
    return s->fail(loc, absl::StrCat("narrow: axis ", axis, " is out of range for ", t.str()));
  }
  const int64_t n = t.shape()[axis];
  if (start < 0 || size < 1 || start > n - size) {
    return s->fail(loc, absl::StrCat("narrow: ", size, " elements from ", start, " do not lie within the ", n,
                                     " along axis ", axis, " of ", t.str()));
  }
  Shape shape = t.shape();
  shape[axis] = size;
  return s->emit1(OpCode::kNarrow, {ix}, Type::tile(t.element(), shape), loc, {axis, start});
}

std::pair<Value, Value> split(const Value& x, int axis, Loc loc) {
  BuilderState* s = x.state();
  if (s == nullptr) return {};
  const int ix = s->use(x, "split", loc);
  if (ix < 0) return {};
  const Type& t = s->type(ix);
  if (!t.is_tile() || axis < 0 || axis >= t.rank() || t.shape()[axis] % 2 != 0) {
    s->fail(loc, absl::StrCat("split: needs a tile with an even size along axis ", axis, ", got ", t.str()));
    return {};
  }
  const int64_t half = t.shape()[axis] / 2;
  return {narrow(x, axis, 0, half, loc), narrow(x, axis, half, half, loc)};
}

Value concat(const Value& a, const Value& b, int axis, Loc loc) {
  BuilderState* s = a.state();
  if (s == nullptr) return Value();
  const int ia = s->use(a, "concat", loc);
  const int ib = ia < 0 ? -1 : s->use(b, "concat", loc);
  if (ib < 0) return Value();
  const Type &ta = s->type(ia), &tb = s->type(ib);
  bool fits = ta.is_tile() && tb.is_tile() && ta.element() == tb.element() && ta.rank() == tb.rank() && axis >= 0 &&
              axis < ta.rank();
  for (int d = 0; fits && d < ta.rank(); ++d) fits = d == axis || ta.shape()[d] == tb.shape()[d];
  if (!fits) {
    return s->fail(loc, absl::StrCat("concat: needs two tiles of one element type and rank, equal but along axis ",
                                     axis, "; got ", ta.str(), " and ", tb.str()));
  }
  Shape shape = ta.shape();
  shape[axis] += tb.shape()[axis];
  if (!s->check_shape(shape, "concat", loc)) return Value();
  return s->emit1(OpCode::kConcat, {ia, ib}, Type::tile(ta.element(), shape), loc, {axis});
}

Value load(const Operand& ptrs, Loc loc) {
  BuilderState* s = detail::state_of({&ptrs});
  int ip;
  if (s == nullptr || !pointer_operand(*s, ptrs, "load", loc, ip)) return Value();
  return s->emit1(OpCode::kLoad, {ip}, loaded_type(s->type(ip)), loc);
}

Value load(const Operand& ptrs, const Operand& mask, const Operand& other, Loc loc) {
  BuilderState* s = detail::state_of({&ptrs});
  int ip;
  if (s == nullptr || !pointer_operand(*s, ptrs, "load", loc, ip)) return Value();
  int im = mask_operand(*s, ip, mask, "load", loc);
  if (im < 0) return Value();
  int io = element_operand(*s, ip, other, "load", "other", loc);
  if (io < 0) return Value();
  return s->emit1(OpCode::kLoad, {ip, im, io}, loaded_type(s->type(ip)), loc);
}

void store(const Operand& ptrs, const Operand& value, Loc loc) {
  BuilderState* s = detail::state_of({&ptrs});
  int ip;
  if (s == nullptr || !pointer_operand(*s, ptrs, "store", loc, ip)) return;
  int iv = element_operand(*s, ip, value, "store", "value", loc);
  if (iv >= 0) s->emit(OpCode::kStore, {ip, iv}, {}, loc);
}

void store(const Operand& ptrs, const Operand& value, const Operand& mask, Loc loc) {
  BuilderState* s = detail::state_of({&ptrs});
  int ip;
  if (s == nullptr || !pointer_operand(*s, ptrs, "store", loc, ip)) return;
  int iv = element_operand(*s, ip, value, "store", "value", loc);
  int im = iv < 0 ? -1 : mask_operand(*s, ip, mask, "store", loc);
  if (im >= 0) s->emit(OpCode::kStore, {ip, iv, im}, {}, loc);
}

const char* atomic_op_name(AtomicOp op) {
  static constexpr const char* kNames[] = {"add", "min", "max", "and", "or", "xor", "exchange"};
  const int i = static_cast<int>(op);
  return i >= 0 && i <= static_cast<int>(AtomicOp::kExchange) ? kNames[i] : "?";
}
const char* memory_order_name(MemoryOrder order) {
  static constexpr const char* kNames[] = {"relaxed", "acquire", "release", "acq_rel"};
  const int i = static_cast<int>(order);
  return i >= 0 && i <= static_cast<int>(MemoryOrder::kAcqRel) ? kNames[i] : "?";
}

namespace {

// The ints of an atomic that `order` qualifies: AtomicOp then MemoryOrder
// for kAtomic, MemoryOrder for kAtomicCas. False (and the builder failed)
// where either is not one of its enum's values.
bool atomic_ints(BuilderState& s, const char* what, const AtomicOp* op, MemoryOrder order, Loc loc,
                 std::vector<int64_t>& ints) {
  if (op != nullptr) {
    if (static_cast<int>(*op) < 0 || *op > AtomicOp::kExchange) {
      s.fail(loc, absl::StrCat(what, ": AtomicOp ", static_cast<int>(*op), " is not an operation (kAdd to kExchange)"));
      return false;
    }
    ints.push_back(static_cast<int64_t>(*op));
  }
  if (static_cast<int>(order) < 0 || order > MemoryOrder::kAcqRel) {
    s.fail(loc, absl::StrCat(what, ": MemoryOrder ", static_cast<int>(order),
                             " is not an order (kRelaxed, kAcquire, kRelease or kAcqRel)"));
    return false;
  }
  ints.push_back(static_cast<int64_t>(order));
  return true;
}

Value atomic(AtomicOp op, const Operand& ptrs, const Operand& value, const Operand* mask, MemoryOrder order, Loc loc) {
  BuilderState* s = detail::state_of({&ptrs});
  int ip;
  if (s == nullptr || !pointer_operand(*s, ptrs, "atomic_rmw", loc, ip)) return Value();
  std::vector<int64_t> ints;
  if (!atomic_ints(*s, "atomic_rmw", &op, order, loc, ints)) return Value();
  DType d = s->type(ip).dtype();
  bool bitwise = op == AtomicOp::kAnd || op == AtomicOp::kOr || op == AtomicOp::kXor;
  bool minmax = op == AtomicOp::kMin || op == AtomicOp::kMax;
  if ((bitwise || minmax) && d.is_float()) {
    return s->fail(loc, absl::StrCat("atomic_rmw: this operation needs an integer pointee, got ", d.name()));
  }
  if (d.bits() < 32 && !(op == AtomicOp::kAdd && (d == f16 || d == bf16))) {
    return s->fail(loc, absl::StrCat("atomic_rmw: ", d.name(), " atomics are not supported (use 32 or 64 bits)"));
  }
  int iv = element_operand(*s, ip, value, "atomic_rmw", "value", loc);
  if (iv < 0) return Value();
  std::vector<int> operands = {ip, iv};
  if (mask != nullptr) {
    int im = mask_operand(*s, ip, *mask, "atomic_rmw", loc);
    if (im < 0) return Value();
    operands.push_back(im);
  }
  return s->emit1(OpCode::kAtomic, operands, loaded_type(s->type(ip)), loc, std::move(ints));
}

}  // namespace

Value atomic_rmw(AtomicOp op, const Operand& ptrs, const Operand& value, Loc loc) {
  return atomic(op, ptrs, value, nullptr, MemoryOrder::kAcqRel, loc);
}
Value atomic_rmw(AtomicOp op, const Operand& ptrs, const Operand& value, MemoryOrder order, Loc loc) {
  return atomic(op, ptrs, value, nullptr, order, loc);
}
Value atomic_rmw(AtomicOp op, const Operand& ptrs, const Operand& value, const Operand& mask, Loc loc) {
  return atomic(op, ptrs, value, &mask, MemoryOrder::kAcqRel, loc);
}
Value atomic_rmw(AtomicOp op, const Operand& ptrs, const Operand& value, const Operand& mask, MemoryOrder order,
                 Loc loc) {
  return atomic(op, ptrs, value, &mask, order, loc);
}
Value atomic_add(const Operand& ptrs, const Operand& value, Loc loc) {
  return atomic(AtomicOp::kAdd, ptrs, value, nullptr, MemoryOrder::kAcqRel, loc);
}
Value atomic_add(const Operand& ptrs, const Operand& value, MemoryOrder order, Loc loc) {
  return atomic(AtomicOp::kAdd, ptrs, value, nullptr, order, loc);
}

Value atomic_cas(const Operand& ptr, const Operand& compare, const Operand& value, Loc loc) {
  return atomic_cas(ptr, compare, value, MemoryOrder::kAcqRel, loc);
}
Value atomic_cas(const Operand& ptr, const Operand& compare, const Operand& value, MemoryOrder order, Loc loc) {
  BuilderState* s = detail::state_of({&ptr});
  int ip;
  if (s == nullptr || !pointer_operand(*s, ptr, "atomic_cas", loc, ip)) return Value();
  std::vector<int64_t> ints;
  if (!atomic_ints(*s, "atomic_cas", nullptr, order, loc, ints)) return Value();
  Type pt = s->type(ip);  // a copy: element_operand may grow the value table
  if (!pt.is_pointer() || !pt.dtype().is_int() || pt.dtype().bits() < 32) {
    return s->fail(loc, absl::StrCat("atomic_cas: needs one pointer to a 32- or 64-bit integer, got ", pt.str()));
  }
  int ic = element_operand(*s, ip, compare, "atomic_cas", "compare", loc);
  int iv = ic < 0 ? -1 : element_operand(*s, ip, value, "atomic_cas", "value", loc);
  if (iv < 0) return Value();
  return s->emit1(OpCode::kAtomicCas, {ip, ic, iv}, Type(pt.dtype()), loc, std::move(ints));
}

Value tma_load(const Value& map, std::initializer_list<Operand> coords, Loc loc) {
  return tma_load(map, std::vector<Operand>(coords), loc);
}

namespace {

// A TMA load's operands, the map and its coordinates; empty after an error.
std::vector<int> tma_load_operands(BuilderState& s, const Value& map, const std::vector<Operand>& coords,
                                   absl::string_view what, Loc loc) {
  int im = s.use(map, what, loc);
  std::vector<int> operands = {im};
  if (im < 0 || !tma_coords(s, im, coords, what, loc, operands)) return {};
  return operands;
}

}  // namespace

Value tma_load(const Value& map, const std::vector<Operand>& coords, Loc loc) {
  BuilderState* s = map.state();
  if (s == nullptr) return Value();
  std::vector<int> operands = tma_load_operands(*s, map, coords, "tma_load", loc);
  if (operands.empty()) return Value();
  const Type& mt = s->type(operands[0]);
  return s->emit1(OpCode::kTmaLoad, operands, Type::tile(mt.dtype(), mt.shape()), loc);
}

Value tma_multicast(const Value& map, std::initializer_list<Operand> coords, Loc loc) {
  return tma_multicast(map, std::vector<Operand>(coords), loc);
}

Value tma_multicast(const Value& map, const std::vector<Operand>& coords, Loc loc) {
  BuilderState* s = map.state();
  if (s == nullptr) return Value();
  std::vector<int> operands = tma_load_operands(*s, map, coords, "tma_multicast", loc);
  if (operands.empty()) return Value();
  const Type& mt = s->type(operands[0]);
  const int parts = s->ir.cluster;
  if (parts < 2) {
    return s->fail(loc, "tma_multicast: the kernel has no clusters (KernelBuilder::cluster sets them)");
  }
  const Shape& box = mt.shape();
  const int64_t elem = mt.dtype().bytes(), inner = box.back();
  const int64_t panel_row = tma::panel_elems(inner, elem, mt.swizzle()) * elem;
  const int64_t block = mt.swizzle() == Swizzle::kNone ? tma::kSharedTileAlignment : tma::kSwizzledTileAlignment;
  const int64_t part = box.size() < 2 ? box[0] * elem : mt.numel() / inner * panel_row;
  if (part % block != 0) {
    return s->fail(loc, absl::StrCat("tma_multicast: the map's box ", mt.str(), " fills ", part,
                                     " bytes of each panel of the tile, not a multiple of ", block,
                                     "; each program's box must start on a ", block, "-byte boundary"));
  }
  Shape stacked = box;
  stacked[0] *= parts;
  return s->emit1(OpCode::kTmaLoad, operands, Type::tile(mt.dtype(), stacked), loc, {parts});
}

namespace {

// tma_store and tma_reduce: a kTmaStore, with the reduction's AtomicOp in
// its ints where there is one.
void tma_write(const Value& map, const std::vector<Operand>& coords, const Value& tile, const AtomicOp* op,
               absl::string_view what, Loc loc) {
  BuilderState* s = map.state();
  if (s == nullptr) return;
  int im = s->use(map, what, loc);
  int it = im < 0 ? -1 : s->use(tile, what, loc);
  if (it < 0) return;
  std::vector<int> operands = {im, it};
  if (!tma_coords(*s, im, coords, what, loc, operands)) return;
  const Type& mt = s->type(im);
  Type want = Type::tile(mt.dtype(), mt.shape());
  if (s->type(it) != want) {
    s->fail(loc, absl::StrCat(what, ": the tile ", s->type(it).str(), " does not match the tensor map's box ",
                              want.str()));
    return;
  }
  std::vector<int64_t> ints;
  if (op != nullptr) {
    if (*op != AtomicOp::kAdd) {
      s->fail(loc, absl::StrCat(what, ": only AtomicOp::kAdd is supported, got ", atomic_op_name(*op)));
      return;
    }
    const DType d = mt.dtype();
    if (!(d == f32 || d == f16 || d == bf16 || d == i32)) {
      s->fail(loc, absl::StrCat(what, ": adds into f32, f16, bf16 or i32 tensor maps, got ", d.name()));
      return;
    }
    ints.push_back(static_cast<int64_t>(*op));
  }
  s->emit(OpCode::kTmaStore, operands, {}, loc, ints);
}

}  // namespace

void tma_store(const Value& map, std::initializer_list<Operand> coords, const Value& tile, Loc loc) {
  tma_write(map, std::vector<Operand>(coords), tile, nullptr, "tma_store", loc);
}

void tma_store(const Value& map, const std::vector<Operand>& coords, const Value& tile, Loc loc) {
  tma_write(map, coords, tile, nullptr, "tma_store", loc);
}

void tma_reduce(AtomicOp op, const Value& map, std::initializer_list<Operand> coords, const Value& tile, Loc loc) {
  tma_write(map, std::vector<Operand>(coords), tile, &op, "tma_reduce", loc);
}

void tma_reduce(AtomicOp op, const Value& map, const std::vector<Operand>& coords, const Value& tile, Loc loc) {
  tma_write(map, coords, tile, &op, "tma_reduce", loc);
}

Value dot(const Value& a, const Value& b, const Value& acc, Loc loc) { return dot(a, b, acc, Precision::kIeee, loc); }

Value dot(const Value& a, const Value& b, const Value& acc, Precision precision, Loc loc) {
  BuilderState* s = a.state();
  if (s == nullptr) return Value();
  int ia = s->use(a, "dot", loc);
  int ib = ia < 0 ? -1 : s->use(b, "dot", loc);
  int ic = ib < 0 ? -1 : s->use(acc, "dot", loc);
  if (ic < 0) return Value();
  const Type &ta = s->type(ia), &tb = s->type(ib), &tc = s->type(ic);
  for (const Type* t : {&ta, &tb, &tc}) {
    if (!t->is_tile() || t->rank() != 2 || t->elements_are_pointers()) {
      return s->fail(loc, absl::StrCat("dot: operands are 2-D tiles of numbers, got ", t->str()));
    }
  }
  if (ta.shape()[1] != tb.shape()[0] || tc.shape()[0] != ta.shape()[0] || tc.shape()[1] != tb.shape()[1]) {
    return s->fail(loc, absl::StrCat("dot: shapes do not chain: ", shape_str(ta.shape()), " @ ", shape_str(tb.shape()),
                                     " + ", shape_str(tc.shape())));
  }
  if (ta.dtype() != tb.dtype() && !(ta.dtype().is_float8() && tb.dtype().is_float8())) {
    return s->fail(loc, absl::StrCat("dot: a and b must have one dtype (or be two fp8 kinds), got ", ta.dtype().name(),
                                     " and ", tb.dtype().name()));
  }
  DType in = ta.dtype(), out = tc.dtype();
  bool ok = (in == f16 && (out == f32 || out == f16)) || (in == bf16 && out == f32) || (in == f32 && out == f32) ||
            (in == f64 && out == f64) || (in == i8 && out == i32) || (in.is_float8() && out == f32);
  if (!ok) {
    return s->fail(loc, absl::StrCat("dot: no matrix product of ", in.name(), " operands into a ", out.name(),
                                     " accumulator (f16->f32|f16, bf16->f32, f32->f32, f64->f64, i8->i32, fp8->f32)"));
  }
  if (precision == Precision::kTf32 && in != f32) {
    return s->fail(loc, absl::StrCat("dot: tf32 precision multiplies f32 operands, got ", in.name(),
                                     " (other dtypes take Precision::kIeee)"));
  }
  std::vector<int64_t> ints;
  if (precision != Precision::kIeee) ints.push_back(static_cast<int64_t>(precision));
  return s->emit1(OpCode::kDot, {ia, ib, ic}, tc, loc, std::move(ints));
}

}  // namespace tessel
