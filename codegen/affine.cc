#include "codegen/affine.h"

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

class Analysis {
 public:
  explicit Analysis(const KernelIR& ir) : ir_(ir), out_(ir.values.size()) {}

  std::vector<std::optional<Affine>> run() {
    for (const Op& op : ir_.ops) visit(op);
    return std::move(out_);
  }

 private:
  // A compile-time integer scalar, if `v` is one.
  std::optional<int64_t> constant(int v) const {
    const ValueInfo& info = ir_.values[v];
    if (info.def_op < 0) return std::nullopt;
    const Op& op = ir_.ops[info.def_op];
    if (op.op != OpCode::kConstant || !info.type.dtype().is_int()) return std::nullopt;
    return op.ints[0];
  }
  // A tile's constant value (a splat of a constant), if it has one.
  std::optional<int64_t> splat_constant(int v) const {
    const ValueInfo& info = ir_.values[v];
    if (info.def_op < 0 || ir_.ops[info.def_op].op != OpCode::kSplat) return std::nullopt;
    return constant(ir_.ops[info.def_op].operands[0]);
  }

  void visit(const Op& op) {
    if (op.results.size() != 1) return;
    int r = op.results[0];
    const Type& t = ir_.type(r);
    if (!t.is_tile() || !(t.is_int() || t.elements_are_pointers()) || t.is_bool()) return;
    auto operand = [&](size_t i) -> const std::optional<Affine>& { return out_[op.operands[i]]; };
    switch (op.op) {
      case OpCode::kArange: {
        Affine a;
        a.constant = op.ints[0];
        a.strides = {1};
        out_[r] = a;
        break;
      }
      case OpCode::kSplat: {
        Affine a;
        int s = op.operands[0];
        if (t.elements_are_pointers()) {
          a.pointer = s;
        } else if (std::optional<int64_t> c = constant(s)) {
          a.constant = *c;
        } else {
          a.terms[s] = 1;
        }
        a.strides.assign(t.rank(), 0);
        out_[r] = a;
        break;
      }
      case OpCode::kBroadcast:
        if (operand(0)) {
          Affine a = *operand(0);
          const Shape& in = ir_.type(op.operands[0]).shape();
          for (size_t d = 0; d < in.size(); ++d) {
            if (in[d] == 1) a.strides[d] = 0;
          }
          out_[r] = a;
        }
        break;
      case OpCode::kExpandDims:
        if (operand(0)) {
          Affine a = *operand(0);
          a.strides.insert(a.strides.begin() + op.ints[0], 0);
          out_[r] = a;
        }
        break;
      case OpCode::kTrans:
        if (operand(0)) {
          Affine a = *operand(0);
          for (size_t d = 0; d < op.ints.size(); ++d) a.strides[d] = operand(0)->strides[op.ints[d]];
          out_[r] = a;
        }
        break;
      case OpCode::kAdd:
        if (operand(0) && operand(1)) out_[r] = add(*operand(0), *operand(1));
        break;
      case OpCode::kMul:
        for (int side = 0; side < 2 && !out_[r]; ++side) {
          std::optional<int64_t> k = splat_constant(op.operands[1 - side]);
          if (k && operand(side)) out_[r] = scale(*operand(side), *k);
        }
        break;
      case OpCode::kPtrAdd:
        if (operand(0) && operand(1) && operand(0)->pointer >= 0 && operand(1)->pointer < 0) {
          Affine a = *operand(1);
          for (auto [v, c] : operand(0)->terms) a.terms[v] += c;
          a.constant += operand(0)->constant;
          for (size_t d = 0; d < a.strides.size(); ++d) a.strides[d] += operand(0)->strides[d];
          a.pointer = operand(0)->pointer;
          out_[r] = a;
        }
        break;
      default:
        break;
    }
  }

  const KernelIR& ir_;
  std::vector<std::optional<Affine>> out_;
};

}  // namespace

std::vector<std::optional<Affine>> analyze_affine(const KernelIR& ir) { return Analysis(ir).run(); }

}  // namespace tessel::codegen
