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
  return is_elementwise(op) || op_traits(op).view || op == OpCode::kLoad || op == OpCode::kStore;
}

}  // namespace

std::vector<int> plan_per_thread(const KernelIR& ir, const AffineAnalysis& analysis, int threads) {
  Groups groups(ir.values.size());
  for (const Op& o : ir.ops) {
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
  for (const Op& o : ir.ops) {
    if (o.op != OpCode::kLoad && o.op != OpCode::kStore) continue;
    int g = groups.find(o.operands[0]);
    want[g] = std::max(want[g], analysis.access_run(o));
  }
  std::vector<int> per_thread(ir.values.size(), 1);
  for (size_t v = 0; v < ir.values.size(); ++v) {
    const Type& t = ir.values[v].type;
    if (!t.is_tile() || threads <= 0) continue;
    int64_t cap = 1;
    while (cap * 2 * threads <= t.numel()) cap *= 2;
    per_thread[v] = static_cast<int>(std::min(want[groups.find(static_cast<int>(v))], cap));
  }
  return per_thread;
}

}  // namespace tessel::codegen
