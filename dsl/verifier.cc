#include "dsl/verifier.h"

#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "base/debug_abi.h"
#include "dsl/opcode_traits.h"
#include "dsl/ops.h"
#include "dsl/printer.h"

namespace tessel {
namespace {

class Verifier {
 public:
  explicit Verifier(const KernelIR& ir) : ir_(ir) {}

  absl::Status run() {
    if (ir_.blocks.empty()) return fail("kernel has no body");
    for (const Param& p : ir_.params) visible_.insert(p.value);
    return block(0, nullptr);
  }

 private:
  absl::Status fail(absl::string_view msg) {
    return absl::InternalError(absl::StrCat("verifier: kernel '", ir_.name, "': ", msg));
  }
  absl::Status fail(const Op& op, absl::string_view msg) {
    return fail(absl::StrCat(opcode_name(op.op), ": ", msg));
  }

  // Checks block `b`; `owner` is the op that owns it (null for the body).
  absl::Status block(int b, const Op* owner) {
    const Block& blk = ir_.blocks[b];
    for (int a : blk.args) visible_.insert(a);
    for (size_t i = 0; i < blk.ops.size(); ++i) {
      const Op& o = ir_.ops[blk.ops[i]];
      bool last = i + 1 == blk.ops.size();
      if (o.op == OpCode::kYield && (!last || owner == nullptr)) return fail(o, "yield must end a nested block");
      absl::Status s = op(o, owner);
      if (!s.ok()) return s;
    }
    if (owner != nullptr && (blk.ops.empty() || ir_.ops[blk.ops.back()].op != OpCode::kYield)) {
      return fail(*owner, "nested block does not end in yield");
    }
    // Values of this block go out of scope with it.
    for (int a : blk.args) visible_.erase(a);
    for (int o : blk.ops) {
      for (int r : ir_.ops[o].results) visible_.erase(r);
    }
    return absl::OkStatus();
  }

  absl::Status op(const Op& o, const Op* owner) {
    for (int v : o.operands) {
      if (v < 0 || v >= static_cast<int>(ir_.values.size()) || !visible_.contains(v)) {
        return fail(o, absl::StrCat("operand %", v, " is not defined in scope"));
      }
    }
    auto type = [&](int i) -> const Type& { return ir_.type(o.operands[i]); };
    const OpCategory category = op_traits(o.op).category;
    if (category == OpCategory::kBinary &&
        (o.operands.size() != 2 || type(0) != type(1) || ir_.type(o.results[0]) != type(0))) {
      return fail(o, "operands and result must have one type");
    }
    if (category == OpCategory::kUnary &&
        (o.operands.size() != 1 || ir_.type(o.results[0]) != type(0))) {
      return fail(o, "operand and result must have one type");
    }
    if (category == OpCategory::kUnary || category == OpCategory::kBinary) {
      const bool fast = o.ints.size() == 1 && o.ints[0] == static_cast<int64_t>(MathForm::kFast);
      if (!o.ints.empty() && !(fast && op_traits(o.op).fast_form && type(0).dtype().is_float())) {
        return fail(o, "malformed math form");
      }
    }
    if (category == OpCategory::kComparison &&
        (o.operands.size() != 2 || type(0) != type(1) || ir_.type(o.results[0]) != type(0).with_element(i1))) {
      return fail(o, "comparison types are inconsistent");
    }
    switch (o.op) {
      case OpCode::kYield: {
        if (owner->op == OpCode::kWhile && ir_.blocks[owner->blocks[0]].ops.back() == &o - ir_.ops.data()) {
          // A while's test yields its condition.
          if (o.operands.size() != 1 || type(0) != Type(i1)) return fail(o, "a while's condition must be a scalar i1");
          break;
        }
        if (o.operands.size() != owner->results.size()) return fail(o, "yields a different number of values");
        for (size_t i = 0; i < o.operands.size(); ++i) {
          // A combine function yields one element of each result.
          const Type& want = ir_.type(owner->results[i]);
          const bool combine = owner->op == OpCode::kReduceFn || owner->op == OpCode::kScanFn;
          if (type(i) != (combine ? Type(want.dtype()) : want)) {
            return fail(o, absl::StrCat("value ", i, " changes type"));
          }
        }
        break;
      }
      case OpCode::kReduceFn:
      case OpCode::kScanFn: {
        const bool scan = o.op == OpCode::kScanFn;
        if (o.operands.empty() || o.results.size() != o.operands.size() || o.ints.size() != (scan ? 2 : 1) ||
            o.blocks.size() != 1 || !type(0).is_tile() || o.ints[0] < 0 || o.ints[0] >= type(0).rank() ||
            (scan && o.ints[1] != 0 && o.ints[1] != 1)) {
          return fail(o, "malformed");
        }
        Shape shape = type(0).shape();
        if (!scan) shape.erase(shape.begin() + o.ints[0]);
        const Block& body = ir_.blocks[o.blocks[0]];
        if (body.args.size() != 2 * o.operands.size()) return fail(o, "block arguments do not match");
        for (size_t i = 0; i < o.operands.size(); ++i) {
          const Type elem(type(i).dtype());
          if (!type(i).is_tile() || type(i).elements_are_pointers() || type(i).shape() != type(0).shape() ||
              ir_.type(o.results[i]) != (shape.empty() ? elem : Type::tile(elem.dtype(), shape)) ||
              ir_.type(body.args[i]) != elem || ir_.type(body.args[o.operands.size() + i]) != elem) {
            return fail(o, absl::StrCat("operand ", i, " does not match its result or arguments"));
          }
        }
        for (int id : body.ops) {
          const Op& inner = ir_.ops[id];
          if (inner.op == OpCode::kYield) continue;
          if (inner.results.size() != 1 || !ir_.type(inner.results[0]).is_scalar() ||
              (inner.op != OpCode::kConstant && !is_elementwise(inner.op))) {
            return fail(o, "the combine function holds an op other than elementwise ones on scalars");
          }
        }
        absl::Status st = block(o.blocks[0], &o);
        if (!st.ok()) return st;
        break;
      }
      case OpCode::kFor: {
        if (o.operands.size() != 3 + o.results.size() || o.blocks.size() != 1) return fail(o, "malformed");
        const Block& body = ir_.blocks[o.blocks[0]];
        if (body.args.size() != 1 + o.results.size()) return fail(o, "block arguments do not match");
        for (int i = 0; i < 3; ++i) {
          if (type(i) != type(0) || !type(i).is_int()) return fail(o, "bounds must be integers of one type");
        }
        for (size_t i = 0; i < o.results.size(); ++i) {
          if (type(3 + i) != ir_.type(o.results[i]) || ir_.type(body.args[1 + i]) != ir_.type(o.results[i])) {
            return fail(o, absl::StrCat("carried value ", i, " changes type"));
          }
        }
        absl::Status s = block(o.blocks[0], &o);
        if (!s.ok()) return s;
        break;
      }
      case OpCode::kWhile: {
        if (o.operands.size() != o.results.size() || o.blocks.size() != 2) return fail(o, "malformed");
        for (int b : o.blocks) {
          const Block& blk = ir_.blocks[b];
          if (blk.args.size() != o.results.size()) return fail(o, "block arguments do not match");
          for (size_t i = 0; i < o.results.size(); ++i) {
            if (type(i) != ir_.type(o.results[i]) || ir_.type(blk.args[i]) != ir_.type(o.results[i])) {
              return fail(o, absl::StrCat("carried value ", i, " changes type"));
            }
          }
          absl::Status s = block(b, &o);
          if (!s.ok()) return s;
        }
        break;
      }
      case OpCode::kIf: {
        if (o.operands.size() != 1 || o.blocks.size() != 2 || type(0) != Type(i1)) return fail(o, "malformed");
        for (int b : o.blocks) {
          absl::Status s = block(b, &o);
          if (!s.ok()) return s;
        }
        break;
      }
      case OpCode::kScan: {
        if (o.operands.size() != 1 || o.ints.size() != 3 || !type(0).is_tile() || ir_.type(o.results[0]) != type(0)) {
          return fail(o, "malformed");
        }
        const auto combiner = static_cast<OpCode>(o.ints[1]);
        if (o.ints[0] < 0 || o.ints[0] >= type(0).rank() || (o.ints[2] != 0 && o.ints[2] != 1) ||
            (combiner != OpCode::kAdd && combiner != OpCode::kMul && combiner != OpCode::kMax &&
             combiner != OpCode::kMin)) {
          return fail(o, "needs an axis of its operand, a combiner of add, mul, max or min, and a reverse flag");
        }
        break;
      }
      case OpCode::kSort: {
        if (o.operands.size() != 1 || o.ints.size() != 3 || !type(0).is_tile()) return fail(o, "malformed");
        if (o.ints[0] < 0 || o.ints[0] >= type(0).rank() || (o.ints[1] != 0 && o.ints[1] != 1) ||
            (o.ints[2] != 0 && o.ints[2] != 1)) {
          return fail(o, "needs an axis of its operand, a descending flag and a positions flag");
        }
        const Type want = o.ints[2] != 0 ? Type::tile(i32, type(0).shape()) : type(0);
        if (ir_.type(o.results[0]) != want) return fail(o, "malformed");
        break;
      }
      case OpCode::kNarrow: {
        // The part of its operand's shape along ints[0] from ints[1] on.
        const Type& rt = ir_.type(o.results[0]);
        bool ok = o.operands.size() == 1 && o.ints.size() == 2 && type(0).is_tile() && rt.is_tile() &&
                  rt.rank() == type(0).rank() && o.ints[0] >= 0 && o.ints[0] < rt.rank() &&
                  rt.dtype() == type(0).dtype();
        for (int d = 0; ok && d < rt.rank(); ++d) {
          const int64_t want = type(0).shape()[d];
          ok = d == o.ints[0] ? rt.shape()[d] >= 1 && o.ints[1] >= 0 && o.ints[1] + rt.shape()[d] <= want
                              : rt.shape()[d] == want;
        }
        if (!ok) return fail(o, "malformed");
        break;
      }
      case OpCode::kConcat: {
        const Type& rt = ir_.type(o.results[0]);
        bool ok = o.operands.size() == 2 && o.ints.size() == 1 && type(0).is_tile() && type(1).is_tile() &&
                  rt.is_tile() && type(0).element() == type(1).element() && rt.element() == type(0).element() &&
                  type(0).rank() == rt.rank() && type(1).rank() == rt.rank() && o.ints[0] >= 0 && o.ints[0] < rt.rank();
        for (int d = 0; ok && d < rt.rank(); ++d) {
          const int64_t a = type(0).shape()[d], b = type(1).shape()[d];
          ok = d == o.ints[0] ? rt.shape()[d] == a + b : a == b && rt.shape()[d] == a;
        }
        if (!ok) return fail(o, "malformed");
        break;
      }
      case OpCode::kGather: {
        if (o.operands.size() != 2 || o.ints.size() != 1 || !type(0).is_tile() || !type(1).is_tile() ||
            type(1).rank() != type(0).rank() || o.ints[0] < 0 || o.ints[0] >= type(0).rank() ||
            ir_.type(o.results[0]) != Type::tile(type(0).dtype(), type(1).shape())) {
          return fail(o, "malformed");
        }
        break;
      }
      case OpCode::kHistogram: {
        if (o.operands.empty() || o.operands.size() > 2 || o.ints.size() != 1 || !type(0).is_tile() ||
            !type(0).is_int() || type(0).is_bool() || o.ints[0] < 1 ||
            ir_.type(o.results[0]) != Type::tile(i32, {o.ints[0]}) ||
            (o.operands.size() == 2 && type(1) != Type::tile(i1, type(0).shape()))) {
          return fail(o, "malformed");
        }
        break;
      }
      case OpCode::kDot:
        if (o.operands.size() != 3 || ir_.type(o.results[0]) != type(2) || o.ints.size() > 1) return fail(o, "malformed");
        if (!o.ints.empty() && (o.ints[0] != static_cast<int64_t>(Precision::kTf32) || type(0).dtype() != f32)) {
          return fail(o, "precision is tf32 on f32 operands or absent");
        }
        break;
      case OpCode::kPrint:
      case OpCode::kAssert: {
        if (o.ints.size() != 1 || o.ints[0] < 0 || o.ints[0] >= static_cast<int64_t>(ir_.texts.size()) ||
            !o.results.empty() || o.operands.size() > kMaxPrintValues ||
            (o.op == OpCode::kAssert && (o.operands.size() != 1 || !type(0).is_bool()))) {
          return fail(o, "malformed");
        }
        for (size_t i = 0; i < o.operands.size(); ++i) {
          const Type& t = type(i);
          if (t.is_tensor_map() || t.is_triggered_view() || t.is_tile() != type(0).is_tile() ||
              (t.is_tile() && t.shape() != type(0).shape())) {
            return fail(o, "malformed");
          }
        }
        break;
      }
      default:
        break;
    }
    for (int r : o.results) visible_.insert(r);
    return absl::OkStatus();
  }

  const KernelIR& ir_;
  std::unordered_set<int> visible_;
};

}  // namespace

absl::Status verify(const KernelIR& ir) { return Verifier(ir).run(); }

}  // namespace tessel
