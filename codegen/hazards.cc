#include "codegen/hazards.h"

#include <map>
#include <utility>
#include <vector>

#include "dsl/ops.h"

namespace tessel::codegen {
namespace {

constexpr int kUnknown = kAnyParameter;
constexpr int kUnset = -2;

// The parameters a stretch of the program has read and written through
// since its threads last met (kUnknown: possibly any).
struct Touched {
  std::set<int> reads, writes;

  void clear() {
    reads.clear();
    writes.clear();
  }
  void add(const Touched& o) {
    reads.insert(o.reads.begin(), o.reads.end());
    writes.insert(o.writes.begin(), o.writes.end());
  }
};

// Whether `by` holds an access of what `base` may be.
bool touches(const std::set<int>& by, int base) {
  return by.contains(base) || by.contains(kUnknown) || (base == kUnknown && !by.empty());
}

class Origins {
 public:
  explicit Origins(const KernelIR& ir) : ir_(ir), owner_(ir.blocks.size(), -1) {
    for (const Param& p : ir.params) params_.insert(p.value);
    for (size_t i = 0; i < ir.ops.size(); ++i) {
      for (int b : ir.ops[i].blocks) owner_[b] = static_cast<int>(i);
    }
    resolve_bases();
  }

  std::vector<int> bases() && { return std::move(base_); }

 private:
  // Every value's parameter, assuming first that each loop-carried pointer
  // keeps its initial value's; a loop whose yield breaks that makes the
  // value kUnknown, and the bases are worked out again.
  void resolve_bases() {
    for (;;) {
      base_.assign(ir_.values.size(), kUnset);
      for (size_t v = 0; v < ir_.values.size(); ++v) base(static_cast<int>(v));
      bool settled = true;
      for (const auto& [arg, yielded] : carried_) {
        if (base_[arg] != base_[yielded] && !unknown_.contains(arg)) {
          unknown_.insert(arg);
          settled = false;
        }
      }
      if (settled) return;
    }
  }

  int base(int v) {
    if (base_[v] != kUnset) return base_[v];
    base_[v] = kUnknown;  // while it is worked out (a cycle through a loop stays unknown)
    base_[v] = origin(v);
    return base_[v];
  }

  // Whether `v` is still defined: drop_unchanged_carried leaves the values
  // it drops (a loop's result and argument) in ir.values.
  bool defined(int v) const {
    const ValueInfo& info = ir_.values[v];
    const std::vector<int>& defs = info.def_op < 0 ? ir_.blocks[info.def_block].args : ir_.ops[info.def_op].results;
    return info.index < static_cast<int>(defs.size()) && defs[info.index] == v;
  }

  int origin(int v) {
    if (params_.contains(v)) return v;
    if (!defined(v)) return kUnknown;
    const ValueInfo& info = ir_.values[v];
    if (info.def_op < 0) {  // a block's argument: a loop's carried value (argument 0 is its index)
      const int loop = owner_[info.def_block];
      if (loop < 0 || ir_.ops[loop].op != OpCode::kFor || info.index == 0 || unknown_.contains(v)) return kUnknown;
      const Op& o = ir_.ops[loop];
      const Op& yield = ir_.ops[ir_.blocks[o.blocks[0]].ops.back()];
      carried_[v] = yield.operands[info.index - 1];
      return base(o.operands[3 + info.index - 1]);
    }
    const Op& o = ir_.ops[info.def_op];
    switch (o.op) {
      case OpCode::kPtrAdd:
      case OpCode::kSplat:
      case OpCode::kBroadcast:
      case OpCode::kExpandDims:
      case OpCode::kReshape:
      case OpCode::kTrans:
      case OpCode::kNarrow:
        return base(o.operands[0]);
      case OpCode::kSelect:
        return same(base(o.operands[1]), base(o.operands[2]));
      case OpCode::kConcat:
        return same(base(o.operands[0]), base(o.operands[1]));
      case OpCode::kFor:  // the carried value's, as the loop's body leaves it
        return base(ir_.blocks[o.blocks[0]].args[info.index + 1]);
      case OpCode::kIf: {
        int b = kUnset;
        for (int block : o.blocks) {
          const Op& yield = ir_.ops[ir_.blocks[block].ops.back()];
          const int here = base(yield.operands[info.index]);
          b = b == kUnset ? here : same(b, here);
        }
        return b == kUnset ? kUnknown : b;
      }
      default:
        return kUnknown;
    }
  }
  static int same(int a, int b) { return a == b ? a : kUnknown; }

  const KernelIR& ir_;
  std::set<int> params_;
  std::vector<int> owner_;      // block -> the op that holds it
  std::vector<int> base_;       // value -> parameter, kUnknown
  std::map<int, int> carried_;  // a loop's carried argument -> the value its yield passes on
  std::set<int> unknown_;       // carried arguments whose loop changes their parameter
};

class Hazards {
 public:
  Hazards(const KernelIR& ir, const std::vector<int>& params) : ir_(ir), base_(params) {}

  std::set<int> run() {
    Touched t;
    walk(0, t);
    return barriers_;
  }

 private:
  int base(int v) const { return base_[v]; }

  // What op `id` reads and writes through pointers.
  Touched access(int id) const {
    const Op& o = ir_.ops[id];
    Touched t;
    switch (o.op) {
      case OpCode::kLoad:
        t.reads.insert(base(o.operands[0]));
        break;
      case OpCode::kStore:
        t.writes.insert(base(o.operands[0]));
        break;
      case OpCode::kAtomic:
      case OpCode::kAtomicCas:
        t.reads.insert(base(o.operands[0]));
        t.writes.insert(base(o.operands[0]));
        break;
      default:
        break;
    }
    return t;
  }

  // Whether the threads meet before (release) and after (acquire, or any
  // scalar atomic, whose result a barrier hands to every thread) atomic `o`.
  std::pair<bool, bool> meets(const Op& o) const {
    if (o.op != OpCode::kAtomic && o.op != OpCode::kAtomicCas) return {o.op == OpCode::kPublish, false};
    const auto order = static_cast<MemoryOrder>(o.op == OpCode::kAtomic ? o.ints[1] : o.ints[0]);
    const bool scalar = o.op == OpCode::kAtomicCas || !ir_.type(o.operands[0]).is_tile();
    return {releases(order), scalar || acquires(order)};
  }

  void walk(int block, Touched& t) {
    for (int id : ir_.blocks[block].ops) {
      const Op& o = ir_.ops[id];
      if (o.op == OpCode::kFor || o.op == OpCode::kWhile) {
        // Within an iteration (a while's test, then its body), after what
        // came before the loop; and what any iteration touched, for what
        // comes after it.
        Touched body = t;
        for (int b : o.blocks) walk(b, body);
        t.add(body);
        continue;
      }
      if (o.op == OpCode::kIf) {
        Touched joined = t;
        for (int b : o.blocks) {
          Touched branch = t;
          walk(b, branch);
          joined.add(branch);
        }
        t = joined;
        continue;
      }
      const auto [before, after] = meets(o);
      if (before) t.clear();
      const Touched mine = access(id);
      bool hazard = false;
      for (int b : mine.reads) hazard = hazard || touches(t.writes, b);
      for (int b : mine.writes) hazard = hazard || touches(t.writes, b) || touches(t.reads, b);
      if (hazard) {
        barriers_.insert(id);
        t.clear();
      }
      t.add(mine);
      if (after) t.clear();
    }
  }

  const KernelIR& ir_;
  const std::vector<int>& base_;  // value -> parameter, kUnknown
  std::set<int> barriers_;
};

}  // namespace

std::vector<int> pointer_parameters(const KernelIR& ir) { return Origins(ir).bases(); }

std::set<int> hazard_barriers(const KernelIR& ir, const std::vector<int>& params) {
  return Hazards(ir, params).run();
}

}  // namespace tessel::codegen
