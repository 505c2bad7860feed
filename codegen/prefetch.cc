#include "codegen/prefetch.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "codegen/hazards.h"
#include "dsl/opcode_traits.h"

namespace tessel::codegen {
namespace {

// The ops of one block (directly) that values depend on, and the block's
// arguments they read; or nothing where one of those ops is not pure.
struct Slice {
  std::set<int> ops;   // indices into ir.ops
  std::set<int> args;  // value ids of the block's arguments
};

// What the passes below ask of a kernel's loops.
class LoopFacts {
 public:
  explicit LoopFacts(const KernelIR& ir) : kernel_(ir), params_(pointer_parameters(ir)), owner_(ir.blocks.size(), -1) {
    for (size_t i = 0; i < ir.ops.size(); ++i) {
      for (int b : ir.ops[i].blocks) owner_[b] = static_cast<int>(i);
    }
  }

  int param(int v) const { return v < static_cast<int>(params_.size()) ? params_[v] : kAnyParameter; }

  bool specialized(const Op& o) const { return o.op == OpCode::kFor && o.ints.size() > 1 && o.ints[1] != 0; }

  // Whether the loop may have its loads moved at all, and the parameters
  // its body (with nested blocks) stores through.
  bool movable(int f, std::set<int>& written) const {
    const Op& o = kernel_.ops[f];
    if (!o.ints.empty() && o.ints[0] == 1) return false;
    // (The loop itself holds its body, block by block out to the kernel's.)
    for (int b = o.blocks[0]; b >= 0; b = kernel_.blocks[b].parent) {
      if (owner_[b] >= 0 && specialized(kernel_.ops[owner_[b]])) return false;
    }
    for (int id : kernel_.blocks[o.blocks[0]].ops) {
      const OpCode code = kernel_.ops[id].op;
      if (code == OpCode::kTmaLoad || code == OpCode::kFor || code == OpCode::kWhile) return false;
    }
    return writes(o.blocks[0], written);
  }

  // Whether load `ld` of a loop whose body stores through `written` reads
  // memory none of those stores may touch.
  bool untouched(int ld, const std::set<int>& written) const {
    const int from = param(kernel_.ops[ld].operands[0]);
    return !written.contains(from) && !written.contains(kAnyParameter) && (from != kAnyParameter || written.empty());
  }

  // Adds the parameters `block` stores through to `written`; false where it
  // takes an atomic, a triggered view or an assert (which may guard a load).
  bool writes(int block, std::set<int>& written) const {
    for (int id : kernel_.blocks[block].ops) {
      const Op& o = kernel_.ops[id];
      const OpCategory c = op_traits(o.op).category;
      if (o.op == OpCode::kAtomic || o.op == OpCode::kAtomicCas || o.op == OpCode::kAssert ||
          c == OpCategory::kTriggeredView) {
        return false;
      }
      if (o.op == OpCode::kStore) written.insert(param(o.operands[0]));
      for (int b : o.blocks) {
        if (!writes(b, written)) return false;
      }
    }
    return true;
  }

  // The slice of `values` in `block`; with `written`, loads of memory the
  // loop's stores (`written`, as writes() gives them) do not touch may be
  // part of it (a gathered row's index, read again wherever the slice is).
  std::optional<Slice> slice(int block, const std::vector<int>& values, const std::set<int>* written = nullptr) const {
    Slice s;
    std::vector<int> work = values;
    while (!work.empty()) {
      const int v = work.back();
      work.pop_back();
      const ValueInfo& info = kernel_.values[v];
      if (info.def_block != block) continue;
      if (info.def_op < 0) {
        s.args.insert(v);
        continue;
      }
      if (!s.ops.insert(info.def_op).second) continue;
      const Op& o = kernel_.ops[info.def_op];
      const bool index = written != nullptr && o.op == OpCode::kLoad && untouched(info.def_op, *written);
      if (!is_pure(o) && !index) return std::nullopt;
      work.insert(work.end(), o.operands.begin(), o.operands.end());
    }
    return s;
  }

 protected:
  const KernelIR& kernel_;

 private:
  const std::vector<int> params_;
  std::vector<int> owner_;  // per block: the op that holds it, or -1
};

// Whether value `v` is a zero (a constant, or one splat or broadcast).
bool zero(const KernelIR& ir, int v) {
  const int def = ir.values[v].def_op;
  if (def < 0) return false;
  const Op& o = ir.ops[def];
  if (o.op == OpCode::kSplat || o.op == OpCode::kBroadcast) return zero(ir, o.operands[0]);
  return o.op == OpCode::kConstant && o.fval == 0 && !std::signbit(o.fval) && (o.ints.empty() || o.ints[0] == 0);
}

class Rings : LoopFacts {
 public:
  explicit Rings(const KernelIR& ir) : LoopFacts(ir), users_(ir.values.size()) {
    for (const Op& o : ir.ops) {
      for (int v : o.operands) users_[v].push_back(&o);
    }
  }

  std::vector<RingLoad> run() const {
    std::vector<RingLoad> out;
    for (size_t f = 0; f < kernel_.ops.size(); ++f) {
      std::set<int> written;
      if (kernel_.ops[f].op != OpCode::kFor || !movable(static_cast<int>(f), written)) continue;
      const int body = kernel_.ops[f].blocks[0];
      for (int id : kernel_.blocks[body].ops) {
        const Op& l = kernel_.ops[id];
        if (l.op != OpCode::kLoad || !kernel_.type(l.operands[0]).is_tile() || !untouched(id, written)) continue;
        if (kernel_.type(l.results[0]).rank() != 2 || !only_dots(l.results[0], body)) continue;
        if (l.operands.size() == 3 && !zero(kernel_, l.operands[2])) continue;
        std::optional<Slice> s = slice(body, l.operands, &written);
        if (!s || s->args != std::set<int>{kernel_.blocks[body].args[0]}) continue;
        RingLoad r{id, static_cast<int>(f), {}, {}};
        std::set<int> varying = s->args;
        for (int op : kernel_.blocks[body].ops) {
          if (!s->ops.contains(op)) continue;
          const Op& o = kernel_.ops[op];
          // (A broadcast is made again where it is read: a whole tile of
          // pointers held across the loop costs more registers than it saves.)
          const bool again = o.op == OpCode::kBroadcast || std::any_of(o.operands.begin(), o.operands.end(),
                                                                       [&](int v) { return varying.contains(v); });
          (again ? r.slice : r.invariant).push_back(op);
          if (again) varying.insert(o.results.begin(), o.results.end());
        }
        out.push_back(std::move(r));
      }
    }
    return out;
  }

 private:
  // Whether only dots of `block` read `v`, as a or b (or through transposes).
  bool only_dots(int v, int block) const {
    if (users_[v].empty()) return false;
    for (const Op* u : users_[v]) {
      if (u->results.empty() || kernel_.values[u->results[0]].def_block != block) return false;
      const bool operand = u->op == OpCode::kDot && (u->operands[0] == v || u->operands[1] == v) && u->operands[2] != v;
      if (!operand && !(u->op == OpCode::kTrans && only_dots(u->results[0], block))) return false;
    }
    return true;
  }

  std::vector<std::vector<const Op*>> users_;
};

class Prefetcher : LoopFacts {
 public:
  Prefetcher(KernelIR& ir, int threads, const std::vector<RingLoad>& rings)
      : LoopFacts(ir), ir_(ir), threads_(threads) {
    for (const RingLoad& r : rings) {
      rings_.insert(r.load);
      // (Its index loads too: the ring reads them again for each stage.)
      for (const std::vector<int>* ops : {&r.slice, &r.invariant}) {
        for (int id : *ops) {
          if (ir.ops[id].op == OpCode::kLoad) rings_.insert(id);
        }
      }
    }
  }

  int run() {
    int moved = 0;
    const size_t ops = ir_.ops.size();  // the loops of the kernel as built
    for (size_t i = 0; i < ops; ++i) {
      if (ir_.ops[i].op == OpCode::kFor) moved += loop(static_cast<int>(i));
    }
    return moved;
  }

 private:
  int64_t slots(const Type& t) const { return t.is_tile() ? (t.numel() + threads_ - 1) / threads_ : 1; }

  int new_value(Type t, int def_op, int block, int index) {
    ir_.values.push_back(ValueInfo{t, def_op, block, index});
    return static_cast<int>(ir_.values.size()) - 1;
  }

  // Appends an op of one result to `out`, defining it in `block` (at
  // `like`'s source line).
  int emit(OpCode code, std::vector<int> operands, Type t, int block, const Op& like, std::vector<int>& out) {
    Op o;
    o.op = code;
    o.operands = std::move(operands);
    o.loc = like.loc;
    ir_.ops.push_back(std::move(o));
    const int id = static_cast<int>(ir_.ops.size()) - 1;
    ir_.ops[id].results.push_back(new_value(t, id, block, 0));
    out.push_back(id);
    return ir_.ops[id].results[0];
  }

  // Copies the ops of `s` (in program order) into `out` for `block`, their
  // operands renamed by `map`, which learns their results.
  void clone(int from_block, const Slice& s, std::map<int, int>& map, int block, std::vector<int>& out) {
    for (int id : ir_.blocks[from_block].ops) {
      if (!s.ops.contains(id)) continue;
      Op copy = ir_.ops[id];
      for (int& v : copy.operands) {
        if (auto it = map.find(v); it != map.end()) v = it->second;
      }
      copy.results.clear();
      ir_.ops.push_back(std::move(copy));
      const int nid = static_cast<int>(ir_.ops.size()) - 1;
      for (size_t r = 0; r < ir_.ops[id].results.size(); ++r) {
        const int old = ir_.ops[id].results[r];
        const int nv = new_value(ir_.type(old), nid, block, static_cast<int>(r));
        ir_.ops[nid].results.push_back(nv);
        map[old] = nv;
      }
      out.push_back(nid);
    }
  }

  // The load `ld` as it reads for the iteration whose index is `iv` (its
  // operands already renamed): masked by iv < hi.
  void masked(int ld, int iv, int hi, int block, std::vector<int>& out) {
    const Op like = ir_.ops[ld];
    const Type rt = ir_.type(like.results[0]);
    int runs = emit(OpCode::kLt, {iv, hi}, Type(i1), block, like, out);
    if (rt.is_tile()) runs = emit(OpCode::kSplat, {runs}, rt.with_element(Type(i1)), block, like, out);
    if (like.operands.size() == 1) {  // (a load has no mask or both mask and other)
      int zero = emit(OpCode::kConstant, {}, Type(rt.dtype()), block, like, out);
      if (rt.dtype().is_float())
        ir_.ops[out.back()].fval = 0;
      else
        ir_.ops[out.back()].ints = {0};
      if (rt.is_tile()) zero = emit(OpCode::kSplat, {zero}, rt, block, like, out);
      ir_.ops[ld].operands = {like.operands[0], runs, zero};
      return;
    }
    const int mask = emit(OpCode::kAnd, {like.operands[1], runs}, ir_.type(runs), block, like, out);
    ir_.ops[ld].operands = {like.operands[0], mask, like.operands[2]};
  }

  // What a loop's body needs to compute a carried value's next value at
  // the top of an iteration: nothing for a value from outside the body or
  // an argument; else its slice, which must be pure.
  std::optional<Slice> next_slice(int body, int yielded) const {
    if (ir_.values[yielded].def_block != body) return Slice{};
    return slice(body, {yielded});
  }

  int loop(int f) {
    std::set<int> written;
    if (!movable(f, written)) return 0;
    const int body = ir_.ops[f].blocks[0];
    int64_t carried = 0;
    for (size_t a = 1; a < ir_.blocks[body].args.size(); ++a) {
      const Type& t = ir_.type(ir_.blocks[body].args[a]);
      if (t.is_tile()) carried += slots(t);
    }
    int64_t budget = std::min(kMaxPrefetchSlots, kMaxLiveSlots - carried);
    int moved = 0;
    const std::vector<int> ops = ir_.blocks[body].ops;
    for (int id : ops) {
      if (ir_.ops[id].op != OpCode::kLoad) continue;
      const Type rt = ir_.type(ir_.ops[id].results[0]);
      if (rt.is_pointer() || rt.elements_are_pointers()) continue;  // (no zero to stand in for one)
      if (slots(rt) > budget || !untouched(id, written) || rings_.contains(id)) continue;
      if (move(f, id)) {
        budget -= slots(rt);
        ++moved;
      }
    }
    return moved;
  }

  // Moves load `ld` of loop `f`'s body an iteration ahead, if its slice
  // allows.
  bool move(int f, int ld) {
    const int body = ir_.ops[f].blocks[0];
    std::optional<Slice> s = slice(body, ir_.ops[ld].operands);
    if (!s || s->args.empty()) return false;
    const std::vector<int> args = ir_.blocks[body].args;
    const int yield = ir_.blocks[body].ops.back();
    // The carried values' next values, computed from this iteration's.
    std::vector<std::optional<Slice>> nexts(args.size());
    for (size_t a = 1; a < args.size(); ++a) {
      if (!s->args.contains(args[a])) continue;
      nexts[a] = next_slice(body, ir_.ops[yield].operands[a - 1]);
      if (!nexts[a]) return false;
    }
    const Op& fo = ir_.ops[f];
    const int lo = fo.operands[0], hi = fo.operands[1], step = fo.operands[2];

    // Before the loop: the first iteration's load.
    const int parent = ir_.blocks[body].parent;
    std::vector<int> pre;
    std::map<int, int> first = {{args[0], lo}};
    for (size_t a = 1; a < args.size(); ++a) first[args[a]] = ir_.ops[f].operands[2 + a];
    clone(body, *s, first, parent, pre);
    clone(body, Slice{{ld}, {}}, first, parent, pre);
    const int first_load = pre.back();
    pre.pop_back();
    masked(first_load, lo, hi, parent, pre);
    pre.push_back(first_load);

    // At the top of the body: the next iteration's.
    std::vector<int> top;
    std::map<int, int> next;
    next[args[0]] = emit(OpCode::kAdd, {args[0], step}, ir_.type(args[0]), body, ir_.ops[ld], top);
    for (size_t a = 1; a < args.size(); ++a) {
      if (!nexts[a]) continue;
      std::map<int, int> same;
      clone(body, *nexts[a], same, body, top);
      const int y = ir_.ops[yield].operands[a - 1];
      next[args[a]] = same.contains(y) ? same[y] : y;
    }
    clone(body, *s, next, body, top);
    Op& l = ir_.ops[ld];
    for (int& v : l.operands) {
      if (auto it = next.find(v); it != next.end()) v = it->second;
    }
    masked(ld, next[args[0]], hi, body, top);
    top.push_back(ld);

    // Carry it: this iteration reads the argument, and yields the next.
    const int value = ir_.ops[ld].results[0];
    const Type t = ir_.type(value);
    Block& b = ir_.blocks[body];
    const int arg = new_value(t, -1, body, static_cast<int>(b.args.size()));
    b.args.push_back(arg);
    for (Op& o : ir_.ops) std::replace(o.operands.begin(), o.operands.end(), value, arg);
    std::vector<int>& list = ir_.blocks[body].ops;
    list.erase(std::find(list.begin(), list.end(), ld));
    list.insert(list.begin(), top.begin(), top.end());
    ir_.ops[yield].operands.push_back(value);
    const int first_value = ir_.ops[first_load].results[0];
    std::vector<int>& outer = ir_.blocks[parent].ops;
    outer.insert(std::find(outer.begin(), outer.end(), f), pre.begin(), pre.end());
    Op& fl = ir_.ops[f];
    fl.operands.push_back(first_value);
    fl.results.push_back(new_value(t, f, parent, static_cast<int>(fl.results.size())));
    return true;
  }

  KernelIR& ir_;
  const int threads_;
  std::set<int> rings_;  // loads left to copy rings
};

}  // namespace

std::vector<RingLoad> ring_loads(const KernelIR& ir) { return Rings(ir).run(); }

int prefetch_loads(KernelIR& ir, int threads, const std::vector<RingLoad>& rings) {
  return threads > 0 ? Prefetcher(ir, threads, rings).run() : 0;
}

}  // namespace tessel::codegen
