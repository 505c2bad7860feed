#include "dsl/passes.h"

#include <algorithm>

namespace tessel {
namespace {

void replace_uses(KernelIR& ir, int from, int to) {
  for (Op& op : ir.ops) std::replace(op.operands.begin(), op.operands.end(), from, to);
}

// Whether `value` is defined inside `block` or a block nested in it.
bool defined_within(const KernelIR& ir, int value, int block) {
  for (int b = ir.values[value].def_block; b >= 0; b = ir.blocks[b].parent) {
    if (b == block) return true;
  }
  return false;
}

void renumber(KernelIR& ir, const Op& op) {
  for (size_t i = 0; i < op.results.size(); ++i) ir.values[op.results[i]].index = static_cast<int>(i);
}

bool simplify_for(KernelIR& ir, Op& op) {
  Block& body = ir.blocks[op.blocks[0]];
  Op& yield = ir.ops[body.ops.back()];
  for (size_t i = 0; i < op.results.size(); ++i) {
    int arg = body.args[i + 1];
    if (yield.operands[i] != arg) continue;
    int init = op.operands[3 + i];
    int result = op.results[i];
    replace_uses(ir, arg, init);
    replace_uses(ir, result, init);
    op.operands.erase(op.operands.begin() + 3 + i);
    op.results.erase(op.results.begin() + i);
    yield.operands.erase(yield.operands.begin() + i);
    body.args.erase(body.args.begin() + i + 1);
    for (size_t a = 0; a < body.args.size(); ++a) ir.values[body.args[a]].index = static_cast<int>(a);
    renumber(ir, op);
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
    if (v != else_yield.operands[i] || defined_within(ir, v, op.blocks[0]) || defined_within(ir, v, op.blocks[1])) {
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

}  // namespace

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
