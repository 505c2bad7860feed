// Tiles element by element: the positions of elements in the loops over
// tiles, the tiles computed inline where they are read, and the buffers of
// the others.
#include <algorithm>

#include "base/status.h"
#include "codegen/hazards.h"
#include "codegen/lowering.h"

namespace tessel::codegen {
namespace {

// The dimensions of `s` other than those of size 1.
std::vector<int64_t> without_ones(const Shape& s) {
  std::vector<int64_t> out;
  for (int64_t d : s) {
    if (d != 1) out.push_back(d);
  }
  return out;
}

// Whether op `o` reads its operand `v` element by element: then `v` may be
// inline.
bool reads_elements(const KernelIR& ir, const Op& o, int v) {
  if (is_elementwise(o.op)) return ir.type(o.results[0]).is_tile();
  switch (o.op) {
    case OpCode::kExpandDims:
    case OpCode::kReshape:
    case OpCode::kBroadcast:
    case OpCode::kTrans:
    case OpCode::kNarrow:
    case OpCode::kConcat:
    case OpCode::kLoad:
    case OpCode::kStore:
      return ir.type(o.operands[0]).is_tile();
    case OpCode::kReduce:
    case OpCode::kScan:
    case OpCode::kSort:
      return o.operands[0] == v;
    case OpCode::kGather:
      return o.operands[1] == v;
    case OpCode::kHistogram:
    case OpCode::kReduceFn:
    case OpCode::kScanFn:
      return true;
    default:
      return false;
  }
}

// Whether op `o` may be inline.
bool inlinable(const KernelIR& ir, const Op& o) {
  if (o.results.size() != 1 || !ir.type(o.results[0]).is_tile()) return false;
  if (is_elementwise(o.op)) return true;
  switch (o.op) {
    case OpCode::kArange:
    case OpCode::kSplat:
    case OpCode::kExpandDims:
    case OpCode::kReshape:
    case OpCode::kBroadcast:
    case OpCode::kTrans:
    case OpCode::kNarrow:
    case OpCode::kConcat:
      return true;
    case OpCode::kLoad:
      return ir.type(o.operands[0]).is_tile();
    default:
      return false;
  }
}

// Whether `o` (or an op in its blocks) writes memory or waits for others'
// writes: an inline load may not be computed after it.
bool orders_loads(const KernelIR& ir, const Op& o) {
  const OpTraits& t = op_traits(o.op);
  if (o.op != OpCode::kLoad && (t.reads_memory || t.writes_memory)) return true;
  for (int b : o.blocks) {
    for (int inner : ir.blocks[b].ops) {
      if (orders_loads(ir, ir.ops[inner])) return true;
    }
  }
  return false;
}

// Whether `writer` (a store or atomic) may write what `load` reads: through
// a pointer of the same parameter, or of one it cannot tell.
bool may_overwrite(const Op& writer, const Op& load, const std::vector<int>& params) {
  if (writer.op != OpCode::kStore && writer.op != OpCode::kAtomic) return false;
  const int w = params[writer.operands[0]], r = params[load.operands[0]];
  return w == r || w == kAnyParameter || r == kAnyParameter;
}

}  // namespace

Lowering::ElemIndex Lowering::at_dims(const Shape& shape, std::vector<llvm::Value*> dims) {
  ElemIndex at;
  at.linear = linear_index(dims, strides(shape));
  at.dims = std::move(dims);
  return at;
}

Lowering::ElemIndex Lowering::at_linear(const Shape& shape, llvm::Value* linear) {
  ElemIndex at;
  at.dims = unravel(linear, shape);
  at.linear = linear;
  return at;
}

void Lowering::each_element(const Shape& shape, const std::function<void(ElemIndex&)>& body) {
  if (!walks_alone()) {
    tile_loop(numel(shape), [&](llvm::Value* linear) {
      ElemIndex at = at_linear(shape, linear);
      body(at);
    });
    return;
  }
  std::vector<llvm::Value*> dims(shape.size());
  std::function<void(size_t)> nest = [&](size_t d) {
    if (d == shape.size()) {
      ElemIndex at = at_dims(shape, dims);
      body(at);
      return;
    }
    loop(shape[d], [&](llvm::Value* i) {
      dims[d] = i;
      nest(d + 1);
    });
  };
  nest(0);
}

bool Lowering::costly(const Op& o) const {
  switch (o.op) {
    case OpCode::kDiv:
    case OpCode::kRem:
    case OpCode::kPow:
    case OpCode::kAtan2:
      return true;
    case OpCode::kNeg:
    case OpCode::kNot:
    case OpCode::kAbs:
    case OpCode::kFloor:
    case OpCode::kCeil:
    case OpCode::kRound:
      return false;
    default:
      return op_traits(o.op).category == OpCategory::kUnary;
  }
}

void Lowering::plan_inline() {
  inline_.assign(ir_.values.size(), false);
  // Index tiles may also be computed inline in the blocks nested in theirs:
  // recomputed in a loop's body, they keep the body's addresses visibly
  // consecutive where a buffer would hide them.
  index_tile_.assign(ir_.values.size(), false);
  for (const Op& o : ir_.ops) {
    if (!inlinable(ir_, o) || o.op == OpCode::kLoad || costly(o)) continue;
    bool ok = true;
    for (int v : o.operands) ok = ok && (!ir_.type(v).is_tile() || index_tile_[v]);
    index_tile_[o.results[0]] = ok;
  }
  if (!walks_alone()) return;
  std::vector<std::vector<int>> users(ir_.values.size());
  for (size_t i = 0; i < ir_.ops.size(); ++i) {
    for (int v : ir_.ops[i].operands) {
      if (users[v].empty() || users[v].back() != static_cast<int>(i)) users[v].push_back(static_cast<int>(i));
    }
  }
  std::vector<int> block_of(ir_.ops.size(), -1), position(ir_.ops.size(), -1);
  for (size_t b = 0; b < ir_.blocks.size(); ++b) {
    const std::vector<int>& ops = ir_.blocks[b].ops;
    for (size_t i = 0; i < ops.size(); ++i) {
      block_of[ops[i]] = static_cast<int>(b);
      position[ops[i]] = static_cast<int>(i);
    }
  }
  // Per inline value: the elements computed in all (as often as its
  // readers ask), the loops computing them, and the position in its block
  // of the last op whose loop computes some.
  std::vector<int64_t> computed(ir_.values.size(), 0);
  std::vector<int> loops(ir_.values.size(), 0), last(ir_.values.size(), -1);
  // Nested blocks first (a block's index is above its parent's), so that
  // readers there are decided before what they read.
  for (size_t b = ir_.blocks.size(); b-- > 0;) {
    const std::vector<int>& ops = ir_.blocks[b].ops;
    // orders[i]: the ops before position i that order loads.
    std::vector<int> orders(ops.size() + 1, 0);
    for (size_t i = 0; i < ops.size(); ++i) orders[i + 1] = orders[i] + (orders_loads(ir_, ir_.ops[ops[i]]) ? 1 : 0);
    // Readers come after what they read: decide from the block's end.
    for (int i = static_cast<int>(ops.size()) - 1; i >= 0; --i) {
      const Op& o = ir_.ops[ops[i]];
      if (!inlinable(ir_, o)) continue;
      const int r = o.results[0];
      bool ok = true;
      int64_t elements = 0;
      int n = 0, end = i;
      for (int u : users[r]) {
        const Op& user = ir_.ops[u];
        const bool here = block_of[u] == static_cast<int>(b);
        if (!(here || index_tile_[r]) || !reads_elements(ir_, user, r)) {
          ok = false;
          break;
        }
        const int ur = user.results.empty() ? -1 : user.results[0];
        if (ur >= 0 && inline_[ur]) {
          elements += computed[ur];
          n += loops[ur];
          if (here) end = std::max(end, last[ur]);
        } else {
          // A loop of its own: over the result, or over the tile it
          // stores or reduces.
          elements += ir_.type(ur >= 0 && user.op != OpCode::kReduce ? ur : user.operands[0]).numel();
          n += 1;
          if (here) end = std::max(end, position[u]);
        }
      }
      ok = ok && n <= kInlineLoops && !(costly(o) && elements > ir_.type(r).numel());
      if (o.op == OpCode::kLoad && orders[end] > orders[i + 1]) ok = false;
      // Nor into the loop of a store that may overwrite what it reads: the
      // store would read elements it has already written.
      if (o.op == OpCode::kLoad && end > i && may_overwrite(ir_.ops[ops[end]], o, pointer_params_)) ok = false;
      if (!ok) continue;
      inline_[r] = true;
      computed[r] = elements;
      loops[r] = n;
      last[r] = end;
    }
  }
}

llvm::Value* Lowering::element(int id, ElemIndex& at) {
  const Type& t = ir_.type(id);
  if (!t.is_tile()) return val(id);
  if (!inline_[id] && !(recompute_index_ && index_tile_[id])) {
    auto buf = held_.find(id);
    TESSEL_CHECK(buf != held_.end(), "a tile read element by element is held first");
    return load_elem(buf->second, t, at.linear);
  }
  if (auto done = at.computed.find(id); done != at.computed.end()) return done->second;
  llvm::Value* e = compute(ir_.ops[ir_.values[id].def_op], at);
  at.computed[id] = e;
  return e;
}

void Lowering::hold(int id) {
  if (!ir_.type(id).is_tile()) return;
  if (!inline_[id]) {
    if (!held_.contains(id)) held_[id] = val(id);
    return;
  }
  hold_operands(ir_.ops[ir_.values[id].def_op]);
}

void Lowering::hold_operands(const Op& o) {
  for (size_t k = 0; k < o.operands.size(); ++k) {
    // Affine pointer tiles are computed, not read.
    if ((o.op == OpCode::kLoad || o.op == OpCode::kStore) && k == 0 && analysis_.affine(o.operands[0])) continue;
    hold(o.operands[k]);
  }
}

void Lowering::hold(const Op& o) {
  held_.clear();
  hold_operands(o);
}

Lowering::ElemIndex& Lowering::operand_index(const Op& o, ElemIndex& at) {
  std::unique_ptr<ElemIndex>& slot = at.derived[o.results[0]];
  if (slot != nullptr) return *slot;
  const Shape& in = ir_.type(o.operands[0]).shape();
  const Shape& out = ir_.type(o.results[0]).shape();
  std::vector<llvm::Value*> dims(in.size(), b_.getInt64(0));
  if (o.op == OpCode::kTrans) {
    for (size_t d = 0; d < out.size(); ++d) dims[o.ints[d]] = at.dims[d];
  } else if (o.op == OpCode::kNarrow) {
    dims = at.dims;
    dims[o.ints[0]] = b_.CreateAdd(dims[o.ints[0]], b_.getInt64(o.ints[1]));
  } else if (o.op == OpCode::kBroadcast) {
    for (size_t d = 0; d < out.size(); ++d) {
      if (in[d] != 1) dims[d] = at.dims[d];
    }
  } else if (without_ones(in) == without_ones(out)) {
    // A view that adds or drops dimensions of size 1: the others in order.
    size_t d = 0;
    for (size_t e = 0; e < out.size(); ++e) {
      if (out[e] == 1) continue;
      while (in[d] == 1) ++d;
      dims[d++] = at.dims[e];
    }
  } else {
    // Any other reshape keeps the row-major order.
    slot = std::make_unique<ElemIndex>(at_linear(in, at.linear));
    return *slot;
  }
  slot = std::make_unique<ElemIndex>(at_dims(in, std::move(dims)));
  return *slot;
}

llvm::Value* Lowering::offset_element(int id, ElemIndex& at) {
  const Type& t = ir_.type(id);
  auto widened = [&] { return b_.CreateSExt(element(id, at), b_.getInt64Ty()); };
  if (!t.is_tile() || !inline_[id]) return widened();
  const Op& o = ir_.ops[ir_.values[id].def_op];
  switch (o.op) {
    case OpCode::kAdd:
    case OpCode::kSub:
    case OpCode::kMul: {
      llvm::Value* x = offset_element(o.operands[0], at);
      llvm::Value* y = offset_element(o.operands[1], at);
      if (o.op == OpCode::kAdd) return b_.CreateNSWAdd(x, y);
      return o.op == OpCode::kSub ? b_.CreateNSWSub(x, y) : b_.CreateNSWMul(x, y);
    }
    case OpCode::kArange:
      return b_.CreateAdd(at.dims[0], b_.getInt64(o.ints[0]));
    case OpCode::kSplat:
      return b_.CreateSExt(val(o.operands[0]), b_.getInt64Ty());
    case OpCode::kExpandDims:
    case OpCode::kReshape:
    case OpCode::kBroadcast:
    case OpCode::kTrans:
    case OpCode::kNarrow:
      return offset_element(o.operands[0], operand_index(o, at));
    default:
      return widened();
  }
}

llvm::Value* Lowering::compute(const Op& o, ElemIndex& at) {
  if (o.op == OpCode::kPtrAdd && walks_alone() && !target_.checks_accesses() &&
      (ir_.type(o.operands[1]).dtype() == i32 || ir_.type(o.operands[1]).dtype() == i64)) {
    // Offsets in 64 bits, so that LLVM sees consecutive elements'
    // addresses as consecutive (the 32-bit sums, sign-extended, could wrap).
    return b_.CreateGEP(elem_mem_type(Type(ir_.type(o.results[0]).dtype())), element(o.operands[0], at),
                        offset_element(o.operands[1], at));
  }
  if (is_elementwise(o.op)) {
    std::vector<llvm::Value*> args;
    for (int v : o.operands) args.push_back(element(v, at));
    return elementwise(o, args);
  }
  switch (o.op) {
    case OpCode::kArange:
      return b_.CreateTrunc(b_.CreateAdd(at.dims[0], b_.getInt64(o.ints[0])), b_.getInt32Ty());
    case OpCode::kSplat:
      return val(o.operands[0]);
    case OpCode::kExpandDims:
    case OpCode::kReshape:
    case OpCode::kBroadcast:
    case OpCode::kTrans:
    case OpCode::kNarrow:
      return element(o.operands[0], operand_index(o, at));
    case OpCode::kConcat:
      return concat_element(o, at);
    case OpCode::kLoad:
      return load_element(o, at);
    case OpCode::kGather:
      return gathered(o, at, element(o.operands[1], at));
    default:
      TESSEL_CHECK(false, "not an op computed element by element");
  }
  return nullptr;
}

llvm::Value* Lowering::concat_element(const Op& o, ElemIndex& at) {
  // Both operands' elements at the position, each along the axis clamped
  // into its own tile, then the one the position lies in.
  const int axis = static_cast<int>(o.ints[0]);
  const int64_t first = ir_.type(o.operands[0]).shape()[axis];
  llvm::Value* along = at.dims[axis];
  llvm::Value* in_a = b_.CreateICmpSLT(along, b_.getInt64(first));
  auto part = [&](int k, llvm::Value* i) {
    std::vector<llvm::Value*> dims = at.dims;
    dims[axis] = i;
    ElemIndex from = at_dims(ir_.type(o.operands[k]).shape(), std::move(dims));
    return element(o.operands[k], from);
  };
  llvm::Value* a = part(0, b_.CreateSelect(in_a, along, b_.getInt64(first - 1)));
  llvm::Value* b = part(1, b_.CreateSelect(in_a, b_.getInt64(0), b_.CreateSub(along, b_.getInt64(first))));
  return b_.CreateSelect(in_a, a, b);
}

void Lowering::define_elements(const Op& o) {
  if (inline_[o.results[0]]) return;
  const Type& rt = ir_.type(o.results[0]);
  hold(o);
  llvm::Value* out = new_buffer(rt);
  each_element(rt.shape(), [&](ElemIndex& at) { store_elem(out, rt, at.linear, compute(o, at)); });
  set(o, out);
}

}  // namespace tessel::codegen
