#include "dsl/passes.h"

#include <algorithm>
#include <optional>

#include "dsl/opcode_traits.h"

namespace tessel {
namespace {

void replace_uses(KernelIR& ir, int from, int to) {
  for (Op& op : ir.ops) std::replace(op.operands.begin(), op.operands.end(), from, to);
}

void renumber(KernelIR& ir, const Op& op) {
  for (size_t i = 0; i < op.results.size(); ++i) ir.values[op.results[i]].index = static_cast<int>(i);
}

// Drops the for op's carried value i, whose argument and result nothing reads.
void erase_carried(KernelIR& ir, Op& op, size_t i) {
  Block& body = ir.blocks[op.blocks[0]];
  Op& yield = ir.ops[body.ops.back()];
  op.operands.erase(op.operands.begin() + 3 + static_cast<std::ptrdiff_t>(i));
  op.results.erase(op.results.begin() + static_cast<std::ptrdiff_t>(i));
  yield.operands.erase(yield.operands.begin() + static_cast<std::ptrdiff_t>(i));
  body.args.erase(body.args.begin() + 1 + static_cast<std::ptrdiff_t>(i));
  for (size_t a = 0; a < body.args.size(); ++a) ir.values[body.args[a]].index = static_cast<int>(a);
  renumber(ir, op);
}

bool simplify_for(KernelIR& ir, Op& op) {
  Block& body = ir.blocks[op.blocks[0]];
  Op& yield = ir.ops[body.ops.back()];
  for (size_t i = 0; i < op.results.size(); ++i) {
    int arg = body.args[i + 1];
    if (yield.operands[i] != arg) continue;
    replace_uses(ir, arg, op.operands[3 + i]);
    replace_uses(ir, op.results[i], op.operands[3 + i]);
    erase_carried(ir, op, i);
    return true;
  }
  return false;
}

bool simplify_while(KernelIR& ir, Op& op) {
  Block& body = ir.blocks[op.blocks[1]];
  Op& yield = ir.ops[body.ops.back()];
  for (size_t i = 0; i < op.results.size(); ++i) {
    if (yield.operands[i] != body.args[i]) continue;
    const int init = op.operands[i];
    replace_uses(ir, op.results[i], init);
    for (int b : op.blocks) {
      Block& blk = ir.blocks[b];
      replace_uses(ir, blk.args[i], init);
      blk.args.erase(blk.args.begin() + i);
      for (size_t a = 0; a < blk.args.size(); ++a) ir.values[blk.args[a]].index = static_cast<int>(a);
    }
    op.operands.erase(op.operands.begin() + i);
    op.results.erase(op.results.begin() + i);
    yield.operands.erase(yield.operands.begin() + i);
    renumber(ir, op);
    return true;
  }
  return false;
}

bool simplify_if(KernelIR& ir, int index) {
  Op& op = ir.ops[index];
  Op& then_yield = ir.ops[ir.blocks[op.blocks[0]].ops.back()];
  Op& else_yield = ir.ops[ir.blocks[op.blocks[1]].ops.back()];
  for (size_t i = 0; i < op.results.size(); ++i) {
    int v = then_yield.operands[i];
    if (v != else_yield.operands[i] || ir.defined_within(v, op.blocks[0]) || ir.defined_within(v, op.blocks[1])) {
      continue;
    }
    replace_uses(ir, op.results[i], v);
    op.results.erase(op.results.begin() + i);
    then_yield.operands.erase(then_yield.operands.begin() + i);
    else_yield.operands.erase(else_yield.operands.begin() + i);
    renumber(ir, op);
    return true;
  }
  return false;
}

std::optional<int64_t> int_constant(const KernelIR& ir, int v) {
  const int def = ir.values[v].def_op;
  if (def < 0 || ir.ops[def].op != OpCode::kConstant || ir.ops[def].ints.empty()) return std::nullopt;
  return ir.ops[def].ints[0];
}

// How many ops of the kernel's blocks read each value.
std::vector<int> use_counts(const KernelIR& ir) {
  std::vector<int> out(ir.values.size(), 0);
  for (const Block& b : ir.blocks) {
    for (int id : b.ops) {
      for (int v : ir.ops[id].operands) ++out[v];
    }
  }
  return out;
}

// A for loop's carried values that step by the same amount every
// iteration, rewritten into their closed form (see passes.h).
class Stepped {
 public:
  Stepped(KernelIR& ir, int loop) : ir_(ir), loop_(loop), body_(ir.ops[loop].blocks[0]) {}

  void run() {
    const std::optional<int64_t> step = int_constant(ir_, ir_.ops[loop_].operands[2]);
    if (!step || *step == 0) return;  // (a division by a step unknown costs more than a step)
    for (size_t i = ir_.ops[loop_].results.size(); i-- > 0;) close(i);
    std::vector<int>& ops = ir_.blocks[body_].ops;
    ops.insert(ops.begin(), top_.begin(), top_.end());
    erase_dead(top_);  // (a splat whose scalar the offsets took)
  }

 private:
  int emit(OpCode code, std::vector<int> operands, const Type& t, std::vector<int>& out, int64_t constant = 0) {
    Op o;
    o.op = code;
    o.operands = std::move(operands);
    if (code == OpCode::kConstant) o.ints = {constant};
    o.loc = ir_.ops[loop_].loc;
    ir_.ops.push_back(std::move(o));
    const int id = static_cast<int>(ir_.ops.size()) - 1;
    ir_.values.push_back(ValueInfo{t, id, body_, 0});
    const int v = static_cast<int>(ir_.values.size()) - 1;
    ir_.ops[id].results.push_back(v);
    out.push_back(id);
    return v;
  }

  int cast(int v, DType d, std::vector<int>& out) {
    const Type& t = ir_.type(v);
    return t.dtype() == d ? v : emit(OpCode::kCast, {v}, t.with_element(Type(d)), out);
  }

  // The ops of the body (directly) that `v` is computed by, in program
  // order, where all are pure and none reads the body's arguments.
  std::optional<std::vector<int>> invariant(int v) const {
    std::vector<int> work = {v}, found;
    while (!work.empty()) {
      const int x = work.back();
      work.pop_back();
      const ValueInfo& info = ir_.values[x];
      if (!ir_.defined_within(x, body_)) continue;
      if (info.def_block != body_ || info.def_op < 0 || !is_pure(ir_.ops[info.def_op])) return std::nullopt;
      if (std::find(found.begin(), found.end(), info.def_op) != found.end()) continue;
      found.push_back(info.def_op);
      work.insert(work.end(), ir_.ops[info.def_op].operands.begin(), ir_.ops[info.def_op].operands.end());
    }
    std::vector<int> ordered;
    for (int id : ir_.blocks[body_].ops) {
      if (std::find(found.begin(), found.end(), id) != found.end()) ordered.push_back(id);
    }
    return ordered;
  }

  // Copies `ops` (in order) into `out`; returns what `v` is among the copies.
  int clone(const std::vector<int>& ops, int v, std::vector<int>& out) {
    std::vector<std::pair<int, int>> renamed;
    for (int id : ops) {
      Op copy = ir_.ops[id];
      for (int& x : copy.operands) {
        for (auto [from, to] : renamed) x = x == from ? to : x;
      }
      copy.results.clear();
      ir_.ops.push_back(std::move(copy));
      const int nid = static_cast<int>(ir_.ops.size()) - 1;
      const int old = ir_.ops[id].results[0];
      ir_.values.push_back(ValueInfo{ir_.type(old), nid, body_, 0});
      ir_.ops[nid].results.push_back(static_cast<int>(ir_.values.size()) - 1);
      renamed.push_back({old, ir_.ops[nid].results[0]});
      out.push_back(nid);
    }
    for (auto [from, to] : renamed) v = v == from ? to : v;
    return v;
  }

  // The iteration's index, (iv - lo) / step, computed once per loop, in
  // 64 bits (iv - lo may not fit the bounds' type: i8 from -128 to 127).
  int index(std::vector<int>& out) {
    if (index_ >= 0) return index_;
    const int lo = ir_.ops[loop_].operands[0], iv = ir_.blocks[body_].args[0];
    const DType wide = ir_.type(iv).dtype().bytes() == 8 ? ir_.type(iv).dtype() : i64;
    int n = cast(iv, wide, out);
    if (int_constant(ir_, lo) != 0) n = emit(OpCode::kSub, {n, cast(lo, wide, out)}, Type(wide), out);
    const int64_t step = *int_constant(ir_, ir_.ops[loop_].operands[2]);
    if (step != 1) n = emit(OpCode::kDiv, {n, emit(OpCode::kConstant, {}, Type(wide), out, step)}, Type(wide), out);
    return index_ = n;
  }

  // Carried value i, if its next value is itself plus (or, for pointers,
  // offset by) an amount the same in every iteration: what it is in each
  // iteration, init + index * amount, takes its place in the body; it is
  // dropped where then only its step reads it.
  void close(size_t i) {
    const int arg = ir_.blocks[body_].args[1 + i];
    const int next = ir_.ops[ir_.blocks[body_].ops.back()].operands[i];
    const int def = ir_.values[next].def_op;
    if (def < 0 || ir_.values[next].def_block != body_) return;
    const Op& up = ir_.ops[def];
    const Type t = ir_.type(arg);
    const bool pointers = up.op == OpCode::kPtrAdd && up.operands[0] == arg;
    const bool ints = up.op == OpCode::kAdd && t.is_int() && !t.dtype().is_bool() &&
                      (up.operands[0] == arg || up.operands[1] == arg) && up.operands[0] != up.operands[1];
    if (!pointers && !ints) return;
    const int amount = up.operands[0] == arg ? up.operands[1] : up.operands[0];
    std::optional<std::vector<int>> slice = invariant(amount);
    if (!slice) return;
    std::vector<int>& top = top_;
    int x = clone(*slice, amount, top);
    const int n = index(top);
    // Offsets of pointers in i64, as ptr_add widens them: exact where the
    // steps' sum would be.
    const DType d = pointers ? i64 : t.dtype();
    const Op* splat = ir_.values[x].def_op >= 0 ? &ir_.ops[ir_.values[x].def_op] : nullptr;
    int offset;
    if (splat != nullptr && splat->op == OpCode::kSplat) {
      const Type xt = ir_.type(x);
      const int s = splat->operands[0];
      const int scalar = emit(OpCode::kMul, {cast(n, d, top), cast(s, d, top)}, Type(d), top);
      offset = emit(OpCode::kSplat, {scalar}, xt.with_element(Type(d)), top);
    } else if (ir_.type(x).is_tile()) {
      const int ns = emit(OpCode::kSplat, {n}, ir_.type(x).with_element(ir_.type(n)), top);
      offset = emit(OpCode::kMul, {cast(ns, d, top), cast(x, d, top)}, ir_.type(x).with_element(Type(d)), top);
    } else {
      offset = emit(OpCode::kMul, {cast(n, d, top), cast(x, d, top)}, Type(d), top);
    }
    const int init = ir_.ops[loop_].operands[3 + i];
    const int here = emit(pointers ? OpCode::kPtrAdd : OpCode::kAdd, {init, offset}, t, top);
    replace_uses(ir_, arg, here);
    std::replace(ir_.ops[def].operands.begin(), ir_.ops[def].operands.end(), here, arg);
    // (The ops above join the body once every carried value is done: none reads these.)
    const std::vector<int> uses = use_counts(ir_);
    if (uses[arg] != 1 || uses[next] != 1 || uses[ir_.ops[loop_].results[i]] != 0) return;
    erase_carried(ir_, ir_.ops[loop_], i);
    std::vector<int>& ops = ir_.blocks[body_].ops;
    ops.erase(std::find(ops.begin(), ops.end(), def));
    erase_dead(*slice);
  }

  // Drops those of `ops` (pure ops of the body, in program order) that
  // nothing reads now, or only those dropped before them.
  void erase_dead(const std::vector<int>& ops) {
    std::vector<int>& list = ir_.blocks[body_].ops;
    std::vector<int> uses = use_counts(ir_);
    for (auto id = ops.rbegin(); id != ops.rend(); ++id) {
      if (uses[ir_.ops[*id].results[0]] != 0) continue;
      for (int v : ir_.ops[*id].operands) --uses[v];
      list.erase(std::find(list.begin(), list.end(), *id));
    }
  }

  KernelIR& ir_;
  const int loop_, body_;
  int index_ = -1;
  std::vector<int> top_;  // the ops that go at the top of the body
};

}  // namespace

void close_stepped_carried(KernelIR& ir) {
  for (size_t i = 0; i < ir.ops.size(); ++i) {
    if (ir.ops[i].op == OpCode::kFor && !ir.blocks[ir.ops[i].blocks[0]].ops.empty()) {
      Stepped(ir, static_cast<int>(i)).run();
    }
  }
}

void drop_unchanged_carried(KernelIR& ir) {
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < ir.ops.size(); ++i) {
      Op& op = ir.ops[i];
      if (op.op == OpCode::kFor && !ir.blocks[op.blocks[0]].ops.empty()) changed |= simplify_for(ir, op);
      if (op.op == OpCode::kIf) changed |= simplify_if(ir, static_cast<int>(i));
      if (op.op == OpCode::kWhile && !ir.blocks[op.blocks[1]].ops.empty()) changed |= simplify_while(ir, op);
    }
  }
}

}  // namespace tessel
