#include "codegen/affine.h"

#include <algorithm>
#include <cstdlib>

namespace tessel::codegen {
namespace {

std::optional<Affine> add(const Affine& a, const Affine& b) {
  if (a.pointer >= 0 || b.pointer >= 0 || a.strides.size() != b.strides.size()) return std::nullopt;
  Affine r = a;
  for (auto [v, c] : b.terms) r.terms[v] += c;
  r.constant += b.constant;
  for (size_t d = 0; d < r.strides.size(); ++d) r.strides[d] += b.strides[d];
  return r;
}

std::optional<Affine> scale(const Affine& a, int64_t k) {
  if (a.pointer >= 0) return std::nullopt;
  Affine r = a;
  for (auto& [v, c] : r.terms) c *= k;
  r.constant *= k;
  for (int64_t& s : r.strides) s *= k;
  return r;
}

// The largest power of two dividing x, at most kMaxDivisor.
int64_t pow2_divisor(int64_t x) {
  if (x == 0) return kMaxDivisor;
  uint64_t u = static_cast<uint64_t>(std::llabs(x));
  return std::min<int64_t>(static_cast<int64_t>(u & (~u + 1)), kMaxDivisor);
}

int64_t times(int64_t a, int64_t b) { return std::min(a * b, kMaxDivisor); }  // both <= 2^20

}  // namespace

AffineAnalysis::AffineAnalysis(const KernelIR& ir, Specialization facts)
    : ir_(ir),
      facts_(facts),
      affine_(ir.values.size()),
      runs_(ir.values.size()),
      owner_(ir.blocks.size(), -1),
      divisibility_(ir.values.size(), 0),
      alignment_(ir.values.size(), 0),
      constancy_(ir.values.size(), 0) {
  for (size_t i = 0; i < ir_.ops.size(); ++i) {
    for (int b : ir_.ops[i].blocks) owner_[b] = static_cast<int>(i);
  }
  for (const Op& op : ir_.ops) {
    visit(op);
    visit_runs(op);
  }
}

std::optional<int64_t> AffineAnalysis::constant(int v) const {
  const ValueInfo& info = ir_.values[v];
  if (info.def_op < 0) return std::nullopt;
  const Op& op = ir_.ops[info.def_op];
  if (op.op != OpCode::kConstant || !info.type.dtype().is_int()) return std::nullopt;
  return op.ints[0];
}

std::optional<int64_t> AffineAnalysis::splat_constant(int v) const {
  const ValueInfo& info = ir_.values[v];
  if (info.def_op < 0 || ir_.ops[info.def_op].op != OpCode::kSplat) return std::nullopt;
  return constant(ir_.ops[info.def_op].operands[0]);
}

namespace {

// Whether `op` is a cast that keeps every integer's value: to a wider
// integer type, signed ones to a signed one (an i32 row offset widened to
// i64 before it scales a pointer).
bool widening(const KernelIR& ir, const Op& op) {
  if (op.op != OpCode::kCast) return false;
  const DType from = ir.type(op.operands[0]).dtype(), to = ir.type(op.results[0]).dtype();
  return from.is_int() && !from.is_bool() && to.is_int() && to.bits() > from.bits() &&
         (!from.is_signed() || to.is_signed());
}

}  // namespace

void AffineAnalysis::visit(const Op& op) {
  if (op.results.size() != 1) return;
  int r = op.results[0];
  const Type& t = ir_.type(r);
  if (!t.is_tile() || !(t.is_int() || t.elements_are_pointers()) || t.is_bool()) return;
  auto operand = [&](size_t i) -> const std::optional<Affine>& { return affine_[op.operands[i]]; };
  switch (op.op) {
    case OpCode::kArange: {
      Affine a;
      a.constant = op.ints[0];
      a.strides = {1};
      affine_[r] = a;
      break;
    }
    case OpCode::kSplat: {
      Affine a;
      int s = op.operands[0];
      if (t.elements_are_pointers()) {
        a.pointer = s;
      } else {
        add_scalar(a, s, 1);
      }
      a.strides.assign(t.rank(), 0);
      affine_[r] = a;
      break;
    }
    case OpCode::kBroadcast:
      if (operand(0)) {
        Affine a = *operand(0);
        const Shape& in = ir_.type(op.operands[0]).shape();
        for (size_t d = 0; d < in.size(); ++d) {
          if (in[d] == 1) a.strides[d] = 0;
        }
        affine_[r] = a;
      }
      break;
    case OpCode::kExpandDims:
      if (operand(0)) {
        Affine a = *operand(0);
        a.strides.insert(a.strides.begin() + op.ints[0], 0);
        affine_[r] = a;
      }
      break;
    case OpCode::kTrans:
      if (operand(0)) {
        Affine a = *operand(0);
        for (size_t d = 0; d < op.ints.size(); ++d) a.strides[d] = operand(0)->strides[op.ints[d]];
        affine_[r] = a;
      }
      break;
    case OpCode::kNarrow:
      if (operand(0)) {
        Affine a = *operand(0);
        a.constant += op.ints[1] * a.strides[op.ints[0]];
        affine_[r] = a;
      }
      break;
    case OpCode::kAdd:
      if (operand(0) && operand(1)) affine_[r] = add(*operand(0), *operand(1));
      break;
    case OpCode::kSub:
      if (operand(0) && operand(1)) {
        if (std::optional<Affine> negated = scale(*operand(1), -1)) affine_[r] = add(*operand(0), *negated);
      }
      break;
    case OpCode::kMul:
      for (int side = 0; side < 2 && !affine_[r]; ++side) {
        std::optional<int64_t> k = splat_constant(op.operands[1 - side]);
        if (k && operand(side)) affine_[r] = scale(*operand(side), *k);
      }
      break;
    case OpCode::kCast:
      if (operand(0) && widening(ir_, op)) affine_[r] = operand(0);
      break;
    case OpCode::kPtrAdd:
      if (operand(0) && operand(1) && operand(0)->pointer >= 0 && operand(1)->pointer < 0) {
        Affine a = *operand(1);
        for (auto [v, c] : operand(0)->terms) a.terms[v] += c;
        a.constant += operand(0)->constant;
        for (size_t d = 0; d < a.strides.size(); ++d) a.strides[d] += operand(0)->strides[d];
        a.pointer = operand(0)->pointer;
        affine_[r] = a;
      }
      break;
    default:
      break;
  }
}

// Runs of a + b (or a - b when `negate`), where ra and rb are the operands'
// runs and `scale` the bytes one element moves a pointer a (1 for integers):
// b's units are elements, a's are bytes when a holds pointers.
Runs sum_runs(const Runs& ra, const Runs& rb, bool negate, int64_t scale) {
  Runs r;
  r.constant = std::min(ra.constant, rb.constant);
  // Rising runs of one side over constant runs of the other (a falling
  // side, -b, never rises).
  int64_t from_a = std::min(ra.contiguous, rb.constant);
  int64_t from_b = negate ? 1 : std::min(ra.constant, rb.contiguous);
  r.contiguous = std::max(from_a, from_b);
  // At multiples of r.contiguous: a rising side holds its run's first value
  // plus a multiple of r.contiguous steps; a constant side its own value.
  auto at_starts = [&](const Runs& x, int64_t step) {
    if (r.contiguous == 1) return x.each_divisor();
    return x.contiguous == 1 ? x.divisor : std::min(x.divisor, times(r.contiguous, step));
  };
  r.divisor = std::min(at_starts(ra, scale), times(at_starts(rb, 1), scale));
  return r;
}

void AffineAnalysis::visit_runs(const Op& op) {
  if (op.results.size() != 1) return;
  int v = op.results[0];
  const Type& t = ir_.type(v);
  if (!t.is_tile() || !(t.is_int() || t.elements_are_pointers()) || t.is_bool()) return;
  const int64_t last = pow2_divisor(t.shape().back());
  auto of = [&](size_t i) -> const Runs& { return runs_[op.operands[i]]; };
  Runs& r = runs_[v];
  switch (op.op) {
    case OpCode::kArange:
      r.contiguous = std::min(last, pow2_divisor(op.ints[1] - op.ints[0]));
      r.divisor = std::min(pow2_divisor(op.ints[0]), r.contiguous);
      break;
    case OpCode::kSplat:
      r.constant = last;
      r.divisor = t.elements_are_pointers() ? alignment(op.operands[0]) : divisibility(op.operands[0]);
      break;
    case OpCode::kNarrow:
      // Whole rows keep their runs; a part of each row starts elsewhere in them.
      if (op.ints[0] + 1 < t.rank()) r = of(0);
      break;
    case OpCode::kBroadcast:
    case OpCode::kExpandDims: {
      const Shape& in = ir_.type(op.operands[0]).shape();
      bool same_last = op.op == OpCode::kBroadcast ? in.back() == t.shape().back()
                                                    : op.ints[0] < static_cast<int64_t>(in.size());
      if (same_last) {
        r = of(0);
      } else {
        // A new or stretched last dimension: each row repeats one element.
        r.constant = last;
        r.divisor = of(0).each_divisor();
      }
      break;
    }
    case OpCode::kAdd:
    case OpCode::kSub:
      r = sum_runs(of(0), of(1), op.op == OpCode::kSub, 1);
      break;
    case OpCode::kPtrAdd:
      r = sum_runs(of(0), of(1), false, std::max(1, t.dtype().bytes()));
      break;
    case OpCode::kMul:
      r.constant = std::min(of(0).constant, of(1).constant);
      r.divisor = times(of(0).each_divisor(), of(1).each_divisor());
      break;
    case OpCode::kCast:
      if (widening(ir_, op)) r = of(0);
      break;
    default:
      break;
  }
}

void AffineAnalysis::add_scalar(Affine& a, int s, int64_t k) const {
  if (std::optional<int64_t> c = constant(s)) {
    a.constant += k * *c;
    return;
  }
  const ValueInfo& info = ir_.values[s];
  if (info.def_op >= 0) {
    const Op& op = ir_.ops[info.def_op];
    if (op.op == OpCode::kAdd || op.op == OpCode::kSub) {
      add_scalar(a, op.operands[0], k);
      add_scalar(a, op.operands[1], op.op == OpCode::kAdd ? k : -k);
      return;
    }
    if (op.op == OpCode::kMul) {
      for (int side = 0; side < 2; ++side) {
        if (std::optional<int64_t> c = constant(op.operands[1 - side])) {
          add_scalar(a, op.operands[side], k * *c);
          return;
        }
      }
    }
  }
  a.terms[s] += k;
}

int64_t AffineAnalysis::divisibility(int v) const {
  if (divisibility_[v] != 0) return divisibility_[v];
  const ValueInfo& info = ir_.values[v];
  int64_t d = 1;
  if (info.def_op < 0) {
    if (info.def_block == 0) {
      d = facts_.has(info.index) ? 16 : 1;  // a kernel parameter
    } else if (int owner = owner_[info.def_block]; owner >= 0 && ir_.ops[owner].op == OpCode::kFor && info.index == 0) {
      // The induction variable: lo + k * step.
      d = std::min(divisibility(ir_.ops[owner].operands[0]), divisibility(ir_.ops[owner].operands[2]));
    }
  } else {
    const Op& op = ir_.ops[info.def_op];
    auto of = [&](size_t i) { return divisibility(op.operands[i]); };
    switch (op.op) {
      case OpCode::kConstant:
        if (info.type.dtype().is_int()) d = pow2_divisor(op.ints[0]);
        break;
      case OpCode::kAdd:
      case OpCode::kSub:
      case OpCode::kMin:
      case OpCode::kMax:
      case OpCode::kRem:
        d = std::min(of(0), of(1));
        break;
      case OpCode::kMul:
        d = times(of(0), of(1));
        break;
      case OpCode::kAnd:
        d = std::max(of(0), of(1));
        break;
      case OpCode::kShl:
        if (std::optional<int64_t> c = constant(op.operands[1]); c && *c >= 0 && *c < 21) {
          d = times(of(0), int64_t{1} << *c);
        } else {
          d = of(0);
        }
        break;
      case OpCode::kNeg:
        d = of(0);
        break;
      case OpCode::kSelect:
        d = std::min(of(1), of(2));
        break;
      case OpCode::kCast:
        // Truncation keeps the low bits, hence divisors up to the width.
        if (ir_.type(op.operands[0]).is_int() && !ir_.type(op.operands[0]).is_bool()) {
          d = std::min(of(0), info.type.dtype().bits() >= 21 ? kMaxDivisor : int64_t{1} << info.type.dtype().bits());
        }
        break;
      default:
        break;
    }
  }
  divisibility_[v] = d;
  return d;
}

int64_t AffineAnalysis::alignment(int v) const {
  if (alignment_[v] != 0) return alignment_[v];
  const ValueInfo& info = ir_.values[v];
  int64_t elem = std::max(1, info.type.dtype().bytes());
  int64_t a = elem;
  if (info.def_op < 0) {
    if (info.def_block == 0 && facts_.has(info.index)) a = std::max(elem, kVectorBytes);
  } else if (const Op& op = ir_.ops[info.def_op]; op.op == OpCode::kPtrAdd) {
    a = std::min(alignment(op.operands[0]), times(divisibility(op.operands[1]), elem));
  }
  alignment_[v] = a;
  return a;
}

int64_t AffineAnalysis::divisibility_of(const Affine& a) const {
  int64_t d = pow2_divisor(a.constant);
  for (auto [v, c] : a.terms) {
    if (c != 0) d = std::min(d, times(pow2_divisor(c), divisibility(v)));
  }
  return d;
}

int64_t AffineAnalysis::aligned_run(int v) const {
  const std::optional<Affine>& a = affine_[v];
  if (!a && ir_.type(v).elements_are_pointers()) {
    // No constant strides: what the runs along the last dimension say.
    const Runs& r = runs_[v];
    int64_t elem = std::max(1, ir_.type(v).dtype().bytes());
    return std::min(r.contiguous, std::max<int64_t>(1, r.divisor / elem));
  }
  if (!a || a->pointer < 0 || !a->contiguous()) return 1;
  const Shape& shape = ir_.type(v).shape();
  int64_t elem = std::max(1, ir_.type(v).dtype().bytes());
  int64_t run = std::min({pow2_divisor(shape.back()), divisibility_of(*a), std::max<int64_t>(1, alignment(a->pointer) / elem)});
  for (size_t d = 0; d + 1 < shape.size(); ++d) {
    if (shape[d] > 1) run = std::min(run, pow2_divisor(a->strides[d]));
  }
  return run;
}

int64_t AffineAnalysis::runs_constancy(const Op& op) const {
  const Runs& x = runs_[op.operands[0]];
  const Runs& y = runs_[op.operands[1]];
  int64_t run = std::min(x.constant, y.constant);  // both sides constant
  if (op.op == OpCode::kEq || op.op == OpCode::kNe) return std::max<int64_t>(run, 1);
  // One side rising by 1 over runs whose first values the other side's
  // constant value and the run's length divide: the predicate's boundary
  // (the constant, or one past it) falls at a run's start only where it is
  // the constant itself, so x < c, x >= c, c <= x and c > x.
  const bool strict = op.op == OpCode::kLt || op.op == OpCode::kGe;
  auto rising = [&](const Runs& up, const Runs& flat) {
    return std::min({up.contiguous, up.divisor, flat.constant, flat.each_divisor()});
  };
  if (strict && x.contiguous > 1) run = std::max(run, rising(x, y));
  if (!strict && y.contiguous > 1) run = std::max(run, rising(y, x));
  return std::max<int64_t>(run, 1);
}

int64_t AffineAnalysis::compare_constancy(const Op& op) const {
  const std::optional<Affine>& x = affine_[op.operands[0]];
  const std::optional<Affine>& y = affine_[op.operands[1]];
  if (!x || !y) return runs_constancy(op);
  std::optional<Affine> negated = scale(*y, -1);
  std::optional<Affine> f = negated ? add(*x, *negated) : std::nullopt;  // x - y
  if (!f) return 1;
  const Shape& shape = ir_.type(op.results[0]).shape();
  int64_t last = f->strides.back();
  if (last == 0) return pow2_divisor(shape.back());  // the same along each row
  if (std::abs(last) != 1 || op.op == OpCode::kEq || op.op == OpCode::kNe) return 1;
  // Rewrite the predicate as g < 0 or g >= 0 with g = sign * f + shift
  // rising by 1 along the row: over a run of R starting at a multiple of R,
  // g takes G..G+R-1, all of one sign when R divides G.
  bool strict = op.op == OpCode::kLt || op.op == OpCode::kGe;  // x < y, x >= y: f < 0, f >= 0
  int64_t sign = last;
  int64_t shift = (last == 1) == strict ? 0 : -1;
  std::optional<Affine> g = scale(*f, sign);
  g->constant += shift;
  int64_t run = std::min(pow2_divisor(shape.back()), divisibility_of(*g));
  for (size_t d = 0; d + 1 < shape.size(); ++d) {
    if (shape[d] > 1) run = std::min(run, pow2_divisor(g->strides[d]));
  }
  return run;
}

int64_t AffineAnalysis::constancy(int v) const {
  if (constancy_[v] != 0) return constancy_[v];
  const ValueInfo& info = ir_.values[v];
  int64_t c = 1;
  if (info.def_op >= 0 && info.type.is_tile()) {
    const Op& op = ir_.ops[info.def_op];
    switch (op.op) {
      case OpCode::kSplat:
        c = kMaxDivisor;
        break;
      case OpCode::kEq:
      case OpCode::kNe:
      case OpCode::kLt:
      case OpCode::kLe:
      case OpCode::kGt:
      case OpCode::kGe:
        c = compare_constancy(op);
        break;
      case OpCode::kAnd:
      case OpCode::kOr:
      case OpCode::kXor:
      case OpCode::kNot:
      case OpCode::kSelect:
        c = kMaxDivisor;
        for (int o : op.operands) c = std::min(c, constancy(o));
        break;
      case OpCode::kExpandDims:
      case OpCode::kReshape:
        c = constancy(op.operands[0]);
        break;
      case OpCode::kNarrow:
        if (op.ints[0] + 1 < info.type.rank()) c = constancy(op.operands[0]);
        break;
      case OpCode::kBroadcast: {
        int64_t in_last = ir_.type(op.operands[0]).shape().back(), out_last = info.type.shape().back();
        c = pow2_divisor(out_last);
        if (in_last == out_last) c = std::min(c, constancy(op.operands[0]));
        break;
      }
      default:
        break;
    }
  }
  constancy_[v] = c;
  return c;
}

int64_t AffineAnalysis::access_run(const Op& o) const {
  if (!ir_.type(o.operands[0]).is_tile()) return 1;
  int64_t elem = std::max(1, ir_.type(o.operands[0]).dtype().bytes());
  int64_t run = std::min(aligned_run(o.operands[0]), std::max<int64_t>(1, kVectorBytes / elem));
  size_t mask = o.op == OpCode::kLoad ? 1 : 2;
  if (o.operands.size() > mask) run = std::min(run, constancy(o.operands[mask]));
  return run;
}

Specialization specializable(const KernelIR& ir) {
  std::vector<const Op*> accesses;
  for (const Op& o : ir.ops) {
    if ((o.op == OpCode::kLoad || o.op == OpCode::kStore) && ir.type(o.operands[0]).is_tile()) accesses.push_back(&o);
  }
  Specialization all;
  for (size_t i = 0; i < ir.params.size() && i < 64; ++i) {
    const Type& t = ir.params[i].type;
    if (t.is_pointer() || (t.is_scalar() && t.is_int() && !t.is_bool())) all.multiple_of_16 |= uint64_t{1} << i;
  }
  if (accesses.empty()) return {};
  auto runs = [&](Specialization facts) {
    AffineAnalysis a(ir, facts);
    std::vector<int64_t> out;
    for (const Op* o : accesses) out.push_back(a.access_run(*o));
    return out;
  };
  // Runs are minimums of terms that grow with the facts, so a fact that
  // changes nothing when all others hold changes nothing with fewer (but
  // for products of several parameters, where this misses a use).
  std::vector<int64_t> with_all = runs(all);
  Specialization used;
  for (int i = 0; i < 64; ++i) {
    uint64_t bit = uint64_t{1} << i;
    if ((all.multiple_of_16 & bit) != 0 && runs({all.multiple_of_16 & ~bit}) != with_all) used.multiple_of_16 |= bit;
  }
  return used;
}

}  // namespace tessel::codegen
