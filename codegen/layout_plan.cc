#include "codegen/layout_plan.h"

#include <algorithm>
#include <numeric>

#include "dsl/opcode_traits.h"

namespace tessel::codegen {
namespace {

class Groups {
 public:
  explicit Groups(size_t n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }
  int find(int v) {
    while (parent_[v] != v) v = parent_[v] = parent_[parent_[v]];
    return v;
  }
  void join(int a, int b) { parent_[find(a)] = find(b); }

 private:
  std::vector<int> parent_;
};

bool pairs_slots(OpCode op) {
  return is_elementwise(op) || op_traits(op).view || op == OpCode::kLoad || op == OpCode::kStore ||
         op == OpCode::kScan || op == OpCode::kScanFn || op == OpCode::kSort;
}

}  // namespace

std::vector<std::vector<int>> carried_tiles(const KernelIR& ir, const Op& o) {
  std::vector<std::vector<int>> out;
  for (size_t r = 0; r < o.results.size(); ++r) {
    if (!ir.type(o.results[r]).is_tile()) continue;
    std::vector<int> same = {o.results[r]};
    const size_t first_arg = o.op == OpCode::kFor ? 1 : 0;
    for (int b : o.blocks) {
      const Block& block = ir.blocks[b];
      if (o.op != OpCode::kIf) same.push_back(block.args[first_arg + r]);
      const bool test = o.op == OpCode::kWhile && b == o.blocks[0];  // (yields its condition)
      if (!test) same.push_back(ir.ops[block.ops.back()].operands[r]);
    }
    if (o.op == OpCode::kFor) same.push_back(o.operands[3 + r]);
    if (o.op == OpCode::kWhile) same.push_back(o.operands[r]);
    out.push_back(std::move(same));
  }
  return out;
}

std::vector<Blocking> plan_blocking(const KernelIR& ir, const AffineAnalysis& analysis, int threads, int warp_size,
                                    const std::vector<int>& copied) {
  Groups groups(ir.values.size());
  for (const Op& o : ir.ops) {
    if (o.op == OpCode::kGather) {
      // The index and the result share a shape; the source is read from
      // shared memory in any layout.
      groups.join(o.operands[1], o.results[0]);
      continue;
    }
    if (o.op == OpCode::kReduceFn) {
      // The operands are read in one layout; the results come in its slice.
      for (int v : o.operands) groups.join(v, o.operands[0]);
      continue;
    }
    if (o.op == OpCode::kHistogram) {
      // The mask is read in the counted tile's layout; the counts in any.
      if (o.operands.size() == 2) groups.join(o.operands[1], o.operands[0]);
      continue;
    }
    if (o.op == OpCode::kFor || o.op == OpCode::kWhile || o.op == OpCode::kIf) {
      // A carried tile is one tile at every point: where it starts, the
      // body's argument, what the body yields and the result.
      for (const std::vector<int>& same : carried_tiles(ir, o)) {
        for (int v : same) groups.join(v, same[0]);
      }
      continue;
    }
    if (!pairs_slots(o.op) || o.operands.empty() || !ir.type(o.operands[0]).is_tile()) continue;
    int first = o.operands[0];
    for (int v : o.operands) {
      if (ir.type(v).is_tile()) groups.join(v, first);
    }
    for (int v : o.results) {
      if (ir.type(v).is_tile()) groups.join(v, first);
    }
  }
  std::vector<int64_t> want(ir.values.size(), 1);
  // Per group: the row length its reductions along the last axis want, 0
  // for none, -1 where two disagree.
  std::vector<int64_t> rows_of(ir.values.size(), 0);
  for (const Op& o : ir.ops) {
    if (o.op == OpCode::kLoad || o.op == OpCode::kStore) {
      int g = groups.find(o.operands[0]);
      want[g] = std::max(want[g], analysis.access_run(o));
    }
    if ((o.op == OpCode::kReduce || o.op == OpCode::kScan || o.op == OpCode::kSort || o.op == OpCode::kReduceFn ||
         o.op == OpCode::kScanFn) &&
        ir.type(o.results[0]).is_tile()) {
      const Shape& shape = ir.type(o.operands[0]).shape();
      const int g = groups.find(o.operands[0]);
      int64_t& row = rows_of[g];
      int64_t inner = o.ints[0] == static_cast<int64_t>(shape.size()) - 1 ? shape.back() : -1;
      row = row == 0 || row == inner ? inner : -1;
      // A sort's compare-exchanges between a thread's own slots cost no
      // shuffle: it wants each thread's share of a row in one run.
      if (o.op == OpCode::kSort && inner > 0) want[g] = std::max(want[g], inner);
    }
  }
  for (int id : copied) {
    const Op& o = ir.ops[id];
    const int64_t elem = std::max(1, ir.type(o.results[0]).dtype().bytes());
    int g = groups.find(o.operands[0]);
    want[g] = std::max(want[g], std::min(analysis.runs(o.operands[0]).contiguous, kVectorBytes / elem));
  }
  std::vector<Blocking> out(ir.values.size());
  for (size_t v = 0; v < ir.values.size(); ++v) {
    const Type& t = ir.values[v].type;
    if (!t.is_tile() || threads <= 0) continue;
    const int g = groups.find(static_cast<int>(v));
    int64_t cap = 1;
    while (cap * 2 * threads <= t.numel()) cap *= 2;
    Blocking& k = out[v];
    k.per_thread = static_cast<int>(std::min(want[g], cap));
    const int64_t inner = rows_of[g], rows = inner > 0 ? t.numel() / inner : 0;
    if (rows < 2 || t.numel() % inner != 0 || inner % k.per_thread != 0) continue;
    // A row over up to a warp's threads (fewer for short rows), and more
    // where there are too few rows to keep every thread busy.
    int64_t per_row = 1, fill = 1;
    while (per_row < warp_size && per_row * k.per_thread < inner) per_row *= 2;
    while (fill * 2 <= rows) fill *= 2;
    while (per_row * fill < threads) per_row *= 2;
    if (per_row < threads && threads % per_row == 0) {
      k.inner = inner;
      k.threads_inner = static_cast<int>(per_row);
    }
  }
  return out;
}

}  // namespace tessel::codegen
