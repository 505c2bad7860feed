// Kernel IR -> LLVM IR. Scalars are SSA values; a tile is a dense row-major
// buffer of its elements, written once by the op that defines it, and tile
// ops are loops over elements that LLVM's O3 pipeline vectorizes. Views
// (expand_dims, reshape) alias their operand's buffer. f16 and bf16 values
// are their 16 bits (i16): arithmetic widens them to f32, computes, and
// rounds once to nearest even, which gives the correctly rounded result for
// + - * / sqrt (and, with care in ScalarOps::fma, for fma).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "codegen/loops.h"
#include "codegen/lowering.h"
#include "codegen/views.h"
#include "dsl/ops.h"
#include "dsl/printer.h"
#include "base/status.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

namespace tessel::codegen {

using llvm::IRBuilder;

absl::StatusOr<LoweredKernel> Lowering::run() {
  auto module = std::make_unique<llvm::Module>(ir_.name, ctx_);
  module->setTargetTriple(target_.machine().getTargetTriple().str());
  module->setDataLayout(target_.machine().createDataLayout());
  module_ = module.get();
  fn_ = target_.declare_kernel(*module, ir_);
  entry_ = llvm::BasicBlock::Create(ctx_, "entry", fn_);
  llvm::BasicBlock* body = llvm::BasicBlock::Create(ctx_, "body", fn_);
  b_.SetInsertPoint(entry_);
  vals_.assign(ir_.values.size(), nullptr);
  regs_.assign(ir_.values.size(), {});
  std::vector<llvm::Value*> params = target_.params(b_, ir_);
  for (size_t i = 0; i < ir_.params.size(); ++i) vals_[ir_.params[i].value] = params[i];
  assume_facts(params);
  smem_base_ = target_.shared_base(b_);
  threads_ = target_.register_tile_threads();
  per_thread_ = plan_per_thread(ir_, analysis_, threads_);
  wanted_.assign(ir_.values.size(), nullptr);
  if (threads_ > 0) {
    thread_ = target_.thread_index(b_);
    want_slices();
  }
  alloca_point_ = b_.CreateBr(body);
  b_.SetInsertPoint(body);
  reserve_tma_barriers();
  TESSEL_RETURN_IF_ERROR(block(0));
  target_.epilogue(b_);
  b_.CreateRetVoid();
  std::string err;
  llvm::raw_string_ostream os(err);
  if (llvm::verifyModule(*module, &os)) {
    return absl::InternalError(absl::StrCat("codegen produced invalid LLVM IR for kernel '", ir_.name, "': ", err));
  }
  return LoweredKernel{std::move(module), fn_->getName().str(), smem_peak_};
}

void Lowering::assume_facts(const std::vector<llvm::Value*>& params) {
  for (size_t i = 0; i < ir_.params.size(); ++i) {
    if (!facts_.has(static_cast<int>(i))) continue;
    const Type& t = ir_.params[i].type;
    if (t.is_pointer()) {
      b_.CreateAlignmentAssumption(module_->getDataLayout(), params[i], kVectorBytes);
    } else if (t.is_int() && !t.is_bool()) {
      llvm::Value* low = b_.CreateAnd(params[i], llvm::ConstantInt::get(params[i]->getType(), kVectorBytes - 1));
      b_.CreateAssumption(b_.CreateICmpEQ(low, llvm::ConstantInt::get(params[i]->getType(), 0)));
    }
  }
}

void Lowering::reserve_tma_barriers() {
  std::vector<const Op*> loads;
  for (const Op& o : ir_.ops) {
    if (o.op == OpCode::kTmaLoad) loads.push_back(&o);
  }
  for (size_t i = 0; i < loads.size(); ++i) {
    IRBuilder<> eb(alloca_point_);
    llvm::Value* phase = eb.CreateAlloca(b_.getInt32Ty());
    eb.CreateStore(eb.getInt32(0), phase);
    tma_barriers_[loads[i]] = {b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), smem_base_, 8 * i), phase};
  }
  smem_reserved_ = smem_peak_ = 8 * static_cast<int64_t>(loads.size());
  if (!loads.empty()) target_.init_tma_barriers(b_, smem_base_, static_cast<int>(loads.size()));
}

void Lowering::want_slices() {
  auto wish = [&](int v, const std::shared_ptr<const Layout>& l) {
    if (ir_.type(v).is_tile() && wanted_[v] == nullptr) wanted_[v] = l;
  };
  for (auto o = ir_.ops.rbegin(); o != ir_.ops.rend(); ++o) {
    if (o->results.empty() || !ir_.type(o->results[0]).is_tile()) continue;
    int r = o->results[0];
    const Type& rt = ir_.type(r);
    if (o->op == OpCode::kBroadcast && in_registers(rt)) {
      const Shape& from = ir_.type(o->operands[0]).shape();
      std::vector<int> stretched;
      for (int d = 0; d < rt.rank(); ++d) {
        if (from[d] != rt.shape()[d]) stretched.push_back(d);
      }
      if (stretched.size() == 1) wish(o->operands[0], std::make_shared<SliceLayout>(layout(r), rt.shape(), stretched[0]));
    } else if (wanted_[r] != nullptr && (is_elementwise(o->op) || o->op == OpCode::kExpandDims ||
                                         o->op == OpCode::kReshape || o->op == OpCode::kLoad)) {
      for (int v : o->operands) wish(v, wanted_[r]);
    }
  }
}

llvm::Value* Lowering::new_buffer(const Type& tile) {
  int64_t bytes = tile.numel() * module_->getDataLayout().getTypeAllocSize(elem_mem_type(tile));
  if (target_.tiles_in_shared()) return smem_alloc(bytes);
  IRBuilder<> eb(alloca_point_);
  auto* a = eb.CreateAlloca(elem_mem_type(tile), eb.getInt64(tile.numel()), "tile");
  a->setAlignment(llvm::Align(64));
  return a;
}

void Lowering::tile_loop(const Shape& shape,
                         const std::function<void(const std::vector<llvm::Value*>&, llvm::Value*)>& body) {
  std::vector<int64_t> st = strides(shape);
  tile_loop(numel(shape), [&](llvm::Value* lin) {
    std::vector<llvm::Value*> idx(shape.size());
    for (size_t d = 0; d < shape.size(); ++d) {
      idx[d] = b_.CreateURem(b_.CreateUDiv(lin, b_.getInt64(st[d])), b_.getInt64(shape[d]));
    }
    body(idx, lin);
  });
}

llvm::Value* Lowering::linear_index(const std::vector<llvm::Value*>& idx, const std::vector<int64_t>& stride) {
  llvm::Value* lin = b_.getInt64(0);
  for (size_t d = 0; d < idx.size(); ++d) {
    if (stride[d] != 0) lin = b_.CreateAdd(lin, b_.CreateMul(idx[d], b_.getInt64(stride[d])));
  }
  return lin;
}

llvm::Value* Lowering::elementwise(const Op& o, const std::vector<llvm::Value*>& args) {
  const Type& t0 = ir_.type(o.operands[0]);
  DType d = t0.dtype();
  switch (o.op) {
    case OpCode::kAdd:
    case OpCode::kSub:
    case OpCode::kMul:
    case OpCode::kDiv:
    case OpCode::kRem:
    case OpCode::kMin:
    case OpCode::kMax:
    case OpCode::kAnd:
    case OpCode::kOr:
    case OpCode::kXor:
    case OpCode::kShl:
    case OpCode::kShr:
    case OpCode::kEq:
    case OpCode::kNe:
    case OpCode::kLt:
    case OpCode::kLe:
    case OpCode::kGt:
    case OpCode::kGe:
      return ops_.binary(o.op, d, args[0], args[1]);
    case OpCode::kNeg:
    case OpCode::kNot:
    case OpCode::kExp:
    case OpCode::kLog:
    case OpCode::kSqrt:
    case OpCode::kRsqrt:
    case OpCode::kAbs:
    case OpCode::kFloor:
      return ops_.unary(o.op, d, args[0]);
    case OpCode::kFma:
      return ops_.fma(d, args[0], args[1], args[2]);
    case OpCode::kPtrAdd: {
      llvm::Value* off = b_.CreateIntCast(args[1], b_.getInt64Ty(), ir_.type(o.operands[1]).dtype().is_signed());
      return b_.CreateGEP(elem_mem_type(Type(d)), args[0], off);
    }
    case OpCode::kCast:
      return ops_.convert(args[0], d, ir_.type(o.results[0]).dtype());
    case OpCode::kSelect:
      return b_.CreateSelect(args[0], args[1], args[2]);
    case OpCode::kSplat:
      return args[0];
    default:
      TESSEL_CHECK(false, "not an elementwise op");
  }
  return nullptr;
}

absl::Status Lowering::block(int b) {
  std::map<llvm::Value*, SharedBuffer> outer_buffers = shared_;
  int outer = block_;
  block_ = b;
  // The position in this block of each value's last use (uses in nested
  // blocks count at the op that owns them).
  const std::vector<int>& ops = ir_.blocks[b].ops;
  std::vector<int> last_use(ir_.values.size(), -1);
  std::function<void(int, int)> mark = [&](int op, int position) {
    for (int v : ir_.ops[op].operands) last_use[v] = position;
    for (int nested : ir_.ops[op].blocks) {
      for (int inner : ir_.blocks[nested].ops) mark(inner, position);
    }
  };
  for (size_t i = 0; i < ops.size(); ++i) mark(ops[i], static_cast<int>(i));
  for (size_t i = 0; i < ops.size(); ++i) {
    TESSEL_RETURN_IF_ERROR(op(ir_.ops[ops[i]]));
    release_dead_buffers(last_use, static_cast<int>(i));
  }
  block_ = outer;
  shared_ = std::move(outer_buffers);
  return absl::OkStatus();
}

llvm::Value* Lowering::smem_alloc(int64_t bytes) {
  std::vector<std::pair<int64_t, int64_t>> taken;  // [begin, end) of live buffers, sorted
  for (const auto& [ptr, buf] : shared_) taken.push_back({buf.offset, buf.offset + buf.bytes});
  std::sort(taken.begin(), taken.end());
  int64_t offset = (smem_reserved_ + 127) / 128 * 128;
  for (const auto& [begin, end] : taken) {
    if (offset + bytes <= begin) break;
    offset = std::max(offset, (end + 127) / 128 * 128);
  }
  if (offset < smem_peak_) target_.program_barrier(b_);  // reusing memory others may still read
  smem_peak_ = std::max(smem_peak_, offset + bytes);
  llvm::Value* ptr = b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), smem_base_, offset);
  shared_[ptr] = {offset, bytes, block_};
  return ptr;
}

void Lowering::release_dead_buffers(const std::vector<int>& last_use, int position) {
  std::map<llvm::Value*, bool> still_needed;
  for (size_t v = 0; v < ir_.values.size(); ++v) {
    llvm::Value* ptr = vals_[v];
    if (ptr == nullptr || !shared_.contains(ptr)) continue;
    bool needed = last_use[v] > position || (ir_.values[v].def_block != block_ && last_use[v] == -1);
    still_needed[ptr] = still_needed[ptr] || needed;
  }
  for (const auto& [ptr, needed] : still_needed) {
    if (!needed && shared_.at(ptr).block == block_) shared_.erase(ptr);
  }
}

llvm::Value* Lowering::val(int id) {
  if (vals_[id] != nullptr || regs_[id].slots.empty()) return vals_[id];
  const Type& t = ir_.type(id);
  const RegTile& r = regs_[id];
  llvm::Value* buf = new_buffer(t);
  for (int64_t slot = 0; slot < r.layout->slots(); ++slot) {
    guarded(r.layout->valid(b_, thread_, slot),
            [&] { store_elem(buf, t, r.layout->element(b_, thread_, slot), r.slots[slot]); });
  }
  target_.program_barrier(b_);
  if (ir_.values[id].def_block == block_) vals_[id] = buf;
  return buf;
}

std::vector<llvm::Value*> Lowering::regs(int id, const Layout& want) {
  const Type& t = ir_.type(id);
  if (!regs_[id].slots.empty() && regs_[id].layout->same_as(want)) return regs_[id].slots;
  if (!regs_[id].slots.empty() && is_splat(id)) return std::vector<llvm::Value*>(want.slots(), regs_[id].slots[0]);
  llvm::Value* buf = val(id);
  std::vector<llvm::Value*> out;
  for (int64_t slot = 0; slot < want.slots(); ++slot) {
    llvm::Value* e = want.element(b_, thread_, slot);
    if (llvm::Value* ok = want.valid(b_, thread_, slot)) e = b_.CreateSelect(ok, e, b_.getInt64(t.numel() - 1));
    out.push_back(load_elem(buf, t, e));
  }
  return out;
}

absl::Status Lowering::op(const Op& o) {
  const Type rt = o.results.empty() ? Type() : ir_.type(o.results[0]);
  if (is_elementwise(o.op)) {
    if (!rt.is_tile()) {
      std::vector<llvm::Value*> args;
      for (int v : o.operands) args.push_back(val(v));
      set(o, elementwise(o, args));
      return absl::OkStatus();
    }
    if (in_registers(rt)) {
      std::shared_ptr<const Layout> l = elementwise_layout(o);
      std::vector<std::vector<llvm::Value*>> args;
      for (int v : o.operands) args.push_back(regs(v, *l));
      std::vector<llvm::Value*> out(args[0].size());
      for (size_t slot = 0; slot < out.size(); ++slot) {
        std::vector<llvm::Value*> elems;
        for (const auto& a : args) elems.push_back(a[slot]);
        out[slot] = elementwise(o, elems);
      }
      regs_[o.results[0]] = {std::move(l), std::move(out)};
      return absl::OkStatus();
    }
    std::vector<llvm::Value*> bufs;
    for (int v : o.operands) bufs.push_back(val(v));
    llvm::Value* out = new_buffer(rt);
    tile_loop(rt.numel(), [&](llvm::Value* i) {
      std::vector<llvm::Value*> args;
      for (size_t k = 0; k < bufs.size(); ++k) args.push_back(load_elem(bufs[k], ir_.type(o.operands[k]), i));
      store_elem(out, rt, i, elementwise(o, args));
    });
    set(o, out);
    return absl::OkStatus();
  }
  switch (o.op) {
    case OpCode::kConstant: {
      DType d = rt.dtype();
      llvm::Type* t = reg_type(d);
      if (is_narrow_float(d)) {
        llvm::APFloat f(o.fval);
        bool lost;
        f.convert(d == f16 ? llvm::APFloat::IEEEhalf() : llvm::APFloat::BFloat(), llvm::APFloat::rmNearestTiesToEven,
                  &lost);
        set(o, b_.getInt(f.bitcastToAPInt()));
      } else {
        set(o, d.is_float() ? llvm::ConstantFP::get(t, o.fval) : llvm::ConstantInt::get(t, o.ints[0], d.is_signed()));
      }
      return absl::OkStatus();
    }
    case OpCode::kProgramId:
      set(o, target_.program_id(b_, static_cast<int>(o.ints[0])));
      return absl::OkStatus();
    case OpCode::kNumPrograms:
      set(o, target_.num_programs(b_, static_cast<int>(o.ints[0])));
      return absl::OkStatus();
    case OpCode::kArange: {
      if (in_registers(rt)) {
        const Layout& l = *layout(o.results[0]);
        std::vector<llvm::Value*> out;
        for (int64_t slot = 0; slot < l.slots(); ++slot) {
          out.push_back(
              b_.CreateTrunc(b_.CreateAdd(l.element(b_, thread_, slot), b_.getInt64(o.ints[0])), b_.getInt32Ty()));
        }
        set_regs(o, std::move(out));
        return absl::OkStatus();
      }
      llvm::Value* out = new_buffer(rt);
      tile_loop(rt.numel(), [&](llvm::Value* i) {
        store_elem(out, rt, i, b_.CreateTrunc(b_.CreateAdd(i, b_.getInt64(o.ints[0])), b_.getInt32Ty()));
      });
      set(o, out);
      return absl::OkStatus();
    }
    case OpCode::kSplat: {
      llvm::Value* x = val(o.operands[0]);
      if (in_registers(rt)) {
        set_regs(o, std::vector<llvm::Value*>(layout(o.results[0])->slots(), x));
        return absl::OkStatus();
      }
      llvm::Value* out = new_buffer(rt);
      tile_loop(rt.numel(), [&](llvm::Value* i) { store_elem(out, rt, i, x); });
      set(o, out);
      return absl::OkStatus();
    }
    case OpCode::kExpandDims:
    case OpCode::kReshape:
      // The same elements in the same row-major order: the same buffer, or
      // the same registers (the plan gives a view its operand's layout).
      if (!regs_[o.operands[0]].slots.empty()) {
        regs_[o.results[0]] = regs_[o.operands[0]];
      } else {
        set(o, val(o.operands[0]));
      }
      return absl::OkStatus();
    case OpCode::kBroadcast:
    case OpCode::kTrans:
      return permute(o, rt);
    case OpCode::kReduce:
      return reduce(o, rt);
    case OpCode::kLoad:
      return load(o, rt);
    case OpCode::kStore:
      return store(o);
    case OpCode::kAtomic:
      return atomic(o, rt);
    case OpCode::kAtomicCas: {
      DType d = rt.dtype();
      set(o, target_.uniform(b_, [&] {
        auto* cx = b_.CreateAtomicCmpXchg(val(o.operands[0]), val(o.operands[1]), val(o.operands[2]),
                                          llvm::MaybeAlign(d.bytes()), llvm::AtomicOrdering::AcquireRelease,
                                          llvm::AtomicOrdering::Acquire);
        return b_.CreateExtractValue(cx, 0);
      }));
      return absl::OkStatus();
    }
    case OpCode::kTmaLoad: {
      int64_t bytes = rt.numel() * rt.dtype().bytes();
      llvm::Value* smem = smem_alloc(bytes);
      TmaBarrier& bar = tma_barriers_.at(&o);
      target_.tma_load(b_, val(o.operands[0]), coords(o, 1), smem, bytes, bar.address, bar.phase);
      set(o, smem);
      return absl::OkStatus();
    }
    case OpCode::kTmaStore:
      target_.tma_store(b_, val(o.operands[0]), coords(o, 2), val(o.operands[1]));
      return absl::OkStatus();
    case OpCode::kDot:
      return dot(o, rt);
    case OpCode::kFor:
      return for_op(o);
    case OpCode::kIf:
      return if_op(o);
    case OpCode::kYield:
      return absl::OkStatus();  // handled by the owner
    case OpCode::kPublish:
      views().publish(val(o.operands[0]), val(o.operands[1]), o.operands.size() > 2 ? val(o.operands[2]) : nullptr);
      return absl::OkStatus();
    case OpCode::kArrived:
      set(o, views().arrived(val(o.operands[0]), val(o.operands[1])));
      return absl::OkStatus();
    case OpCode::kWait:
      views().wait(val(o.operands[0]), val(o.operands[1]));
      return absl::OkStatus();
    case OpCode::kReusable:
      set(o, views().reusable(val(o.operands[0]), val(o.operands[1])));
      return absl::OkStatus();
    default:
      return absl::InternalError(absl::StrCat("codegen: no lowering for ", opcode_name(o.op)));
  }
}

std::shared_ptr<const Layout> Lowering::elementwise_layout(const Op& o) {
  std::shared_ptr<const Layout> common;
  for (int v : o.operands) {
    if (!ir_.type(v).is_tile() || regs_[v].slots.empty() || is_splat(v)) continue;
    if (common == nullptr) {
      common = regs_[v].layout;
    } else if (!common->same_as(*regs_[v].layout)) {
      return layout(o.results[0]);
    }
  }
  return common != nullptr ? common : layout(o.results[0]);
}

absl::Status Lowering::permute(const Op& o, const Type& rt) {
  const Type& in = ir_.type(o.operands[0]);
  if (o.op == OpCode::kBroadcast && in_registers(rt) && !regs_[o.operands[0]].slots.empty()) {
    // A slice broadcast back along its axis to its parent layout: each slot
    // takes its row's value from this thread's own registers.
    const RegTile& src = regs_[o.operands[0]];
    auto* slice = dynamic_cast<const SliceLayout*>(src.layout.get());
    const Layout& want = *layout(o.results[0]);
    if (slice != nullptr && slice->shape() == rt.shape() && slice->parent().same_as(want)) {
      Shape kept = rt.shape();
      kept[slice->axis()] = 1;
      if (in.shape() == kept) {
        std::vector<llvm::Value*> out;
        for (int64_t slot = 0; slot < want.slots(); ++slot) out.push_back(src.slots[slice->slot_of(slot)]);
        set_regs(o, std::move(out));
        return absl::OkStatus();
      }
    }
  }
  std::vector<int64_t> in_strides = strides(in.shape());
  std::vector<int64_t> map(rt.rank());
  for (int d = 0; d < rt.rank(); ++d) {
    if (o.op == OpCode::kTrans) {
      map[d] = in_strides[o.ints[d]];
    } else {
      map[d] = in.shape()[d] == 1 ? 0 : in_strides[d];
    }
  }
  llvm::Value* out = new_buffer(rt);
  llvm::Value* src = val(o.operands[0]);
  tile_loop(rt.shape(), [&](const std::vector<llvm::Value*>& idx, llvm::Value* lin) {
    store_elem(out, rt, lin, load_elem(src, in, linear_index(idx, map)));
  });
  set(o, out);
  return absl::OkStatus();
}

void Lowering::combine_warps(std::vector<llvm::Value*>& acc, int warp_bits,
                             const std::function<llvm::Value*(llvm::Value*, llvm::Value*)>& combine) {
  const int64_t slots = static_cast<int64_t>(acc.size());
  llvm::Type* t = acc[0]->getType();
  llvm::Value* scratch = smem_alloc(threads_ * slots * module_->getDataLayout().getTypeAllocSize(t));
  // Slot-major: the lanes of a warp touch consecutive words (no bank conflicts).
  auto at = [&](llvm::Value* thread, int64_t slot) {
    return b_.CreateGEP(t, scratch, b_.CreateAdd(thread, b_.getInt64(slot * threads_)));
  };
  for (int64_t s = 0; s < slots; ++s) b_.CreateStore(acc[s], at(thread_, s));
  target_.program_barrier(b_);
  // Every holder reads the same threads' parts in the same order (lowest
  // thread first), so all of them compute the same bits.
  llvm::Value* base = b_.CreateAnd(thread_, b_.getInt64(~static_cast<int64_t>(warp_bits)));
  std::vector<int> parts;
  for (int m = 0;; m = (m - warp_bits) & warp_bits) {
    parts.push_back(m);
    if (((m - warp_bits) & warp_bits) == 0) break;
  }
  for (int64_t s = 0; s < slots; ++s) {
    llvm::Value* all = nullptr;
    for (int m : parts) {
      llvm::Value* part = b_.CreateLoad(t, at(b_.CreateOr(base, b_.getInt64(m)), s));
      all = all == nullptr ? part : combine(all, part);
    }
    acc[s] = all;
  }
  // Freed at once; whatever reuses the memory waits for these reads first.
  shared_.erase(scratch);
}

llvm::Value* Lowering::reduce_identity(OpCode combiner, DType d, llvm::Type* t) {
  if (d.is_float()) {
    if (combiner == OpCode::kAdd) return llvm::ConstantFP::get(t, 0.0);
    return llvm::ConstantFP::getInfinity(t, combiner == OpCode::kMax);
  }
  unsigned bits = t->getIntegerBitWidth();
  if (combiner == OpCode::kAdd) return llvm::ConstantInt::get(t, 0);
  bool s = d.is_signed();
  if (combiner == OpCode::kMax) {
    return llvm::ConstantInt::get(t, s ? llvm::APInt::getSignedMinValue(bits) : llvm::APInt::getMinValue(bits));
  }
  return llvm::ConstantInt::get(t, s ? llvm::APInt::getSignedMaxValue(bits) : llvm::APInt::getMaxValue(bits));
}

absl::Status Lowering::reduce(const Op& o, const Type& rt) {
  const Type& in = ir_.type(o.operands[0]);
  int axis = static_cast<int>(o.ints[0]);
  auto combiner = static_cast<OpCode>(o.ints[1]);
  DType d = in.dtype();
  DType acc_d = is_narrow_float(d) ? f32 : d;
  llvm::Type* acc_t = reg_type(acc_d);
  if (!rt.is_tile() && in_registers(in)) {
    // A whole tile to one scalar: each thread combines its own elements,
    // then the target combines the threads' partial results. A planned
    // layout holds each element once; a slice may hold it in several threads.
    const Layout& l = *planned(o.operands[0]);
    std::vector<llvm::Value*> elems = regs(o.operands[0], l);
    llvm::Value* acc = reduce_identity(combiner, acc_d, acc_t);
    for (size_t slot = 0; slot < elems.size(); ++slot) {
      llvm::Value* next = ops_.binary(combiner, acc_d, acc, ops_.widen(elems[slot], d));
      llvm::Value* valid = l.valid(b_, thread_, static_cast<int64_t>(slot));
      acc = valid == nullptr ? next : b_.CreateSelect(valid, next, acc);
    }
    llvm::Value* all = target_.combine_threads(
        b_, acc, [&](llvm::Value* x, llvm::Value* y) { return ops_.binary(combiner, acc_d, x, y); });
    set(o, ops_.narrow(all, d));
    return absl::OkStatus();
  }
  if (rt.is_tile() && in_registers(in)) {
    // Along one axis, in the slice of the operand's layout: each thread
    // combines its own parts of each position, then a butterfly of
    // shuffles combines the parts other lanes hold, then (for positions
    // spread over warps) the warps' parts meet in a small scratch area.
    // Positions over several slots of a thread take the buffer path below.
    auto slice = std::make_shared<SliceLayout>(planned(o.operands[0]), in.shape(), axis);
    std::optional<int> holders = holder_bits(*slice);
    const int warp_bits = holders.has_value() ? *holders & ~(target_.warp_size() - 1) : 0;
    // Across warps only where the scratch area is no larger than the
    // operand's buffer would be (f16 accumulates in f32, for instance).
    const bool across_warps_fits =
        target_.tiles_in_shared() &&
        threads_ * slice->slots() * module_->getDataLayout().getTypeAllocSize(acc_t) <=
            in.numel() * module_->getDataLayout().getTypeAllocSize(elem_mem_type(in));
    if (holders.has_value() && (warp_bits == 0 || across_warps_fits)) {
      const int lanes = *holders & (target_.warp_size() - 1);
      const Layout& l = slice->parent();
      std::vector<llvm::Value*> elems = regs(o.operands[0], l);
      std::vector<llvm::Value*> acc(slice->slots(), reduce_identity(combiner, acc_d, acc_t));
      for (int64_t slot = 0; slot < l.slots(); ++slot) {
        llvm::Value*& a = acc[slice->slot_of(slot)];
        llvm::Value* next = ops_.binary(combiner, acc_d, a, ops_.widen(elems[slot], d));
        llvm::Value* valid = l.valid(b_, thread_, slot);
        a = valid == nullptr ? next : b_.CreateSelect(valid, next, a);
      }
      for (llvm::Value*& a : acc) {
        for (int bit = 1; bit <= lanes; bit *= 2) {
          if (lanes & bit) a = ops_.binary(combiner, acc_d, a, target_.shuffle_xor(b_, a, bit));
        }
      }
      if (warp_bits != 0) {
        combine_warps(acc, warp_bits,
                      [&](llvm::Value* x, llvm::Value* y) { return ops_.binary(combiner, acc_d, x, y); });
      }
      for (llvm::Value*& a : acc) a = ops_.narrow(a, d);
      regs_[o.results[0]] = {std::move(slice), std::move(acc)};
      return absl::OkStatus();
    }
  }
  std::vector<int64_t> in_strides = strides(in.shape());
  Shape outer = in.shape();
  outer.erase(outer.begin() + axis);
  std::vector<int64_t> outer_map = in_strides;
  outer_map.erase(outer_map.begin() + axis);
  llvm::Value* src = val(o.operands[0]);
  llvm::Value* out = rt.is_tile() ? new_buffer(rt) : nullptr;
  llvm::Value* scalar_result = nullptr;
  auto body = [&](const std::vector<llvm::Value*>& idx, llvm::Value* lin) {
    llvm::Value* base = linear_index(idx, outer_map);
    llvm::Value* acc_slot = nullptr;
    {
      IRBuilder<> eb(alloca_point_);
      acc_slot = eb.CreateAlloca(acc_t);
    }
    b_.CreateStore(reduce_identity(combiner, acc_d, acc_t), acc_slot);
    loop(in.shape()[axis], [&](llvm::Value* k) {
      llvm::Value* e = load_elem(src, in, b_.CreateAdd(base, b_.CreateMul(k, b_.getInt64(in_strides[axis]))));
      llvm::Value* acc = b_.CreateLoad(acc_t, acc_slot);
      b_.CreateStore(ops_.binary(combiner, acc_d, acc, ops_.widen(e, d)), acc_slot);
    });
    llvm::Value* r = ops_.narrow(b_.CreateLoad(acc_t, acc_slot), d);
    if (out != nullptr)
      store_elem(out, rt, lin, r);
    else
      scalar_result = r;
  };
  if (outer.empty()) {
    body({}, b_.getInt64(0));
  } else {
    tile_loop(outer, body);
  }
  set(o, out != nullptr ? out : scalar_result);
  return absl::OkStatus();
}

absl::Status Lowering::dot(const Op& o, const Type& rt) {
  const Type& at = ir_.type(o.operands[0]);
  const Type& bt = ir_.type(o.operands[1]);
  int64_t m = at.shape()[0], k = at.shape()[1], n = bt.shape()[1];
  DType in = at.dtype(), out_d = rt.dtype();
  DType acc_d = in == f64 ? f64 : (in == i8 ? i32 : f32);
  Type acc_tile = Type::tile(acc_d, rt.shape());
  llvm::Value* acc = acc_d == out_d ? new_buffer(rt) : new_buffer(acc_tile);
  llvm::Value* c = val(o.operands[2]);
  if (acc_d == out_d) {
    copy_tile(acc, c, rt);
  } else {
    tile_loop(rt.numel(),
              [&](llvm::Value* i) { store_elem(acc, acc_tile, i, ops_.convert(load_elem(c, rt, i), out_d, acc_d)); });
  }
  llvm::Value* a = val(o.operands[0]);
  llvm::Value* bv = val(o.operands[1]);
  // Rows are spread over the program's threads; each owns its rows of acc.
  tile_loop(m, [&](llvm::Value* mi) {
    loop(k, [&](llvm::Value* ki) {
      llvm::Value* av = ops_.convert(load_elem(a, at, b_.CreateAdd(b_.CreateMul(mi, b_.getInt64(k)), ki)), in, acc_d);
      loop(n, [&](llvm::Value* ni) {
        llvm::Value* bval =
            ops_.convert(load_elem(bv, bt, b_.CreateAdd(b_.CreateMul(ki, b_.getInt64(n)), ni)), in, acc_d);
        llvm::Value* idx = b_.CreateAdd(b_.CreateMul(mi, b_.getInt64(n)), ni);
        llvm::Value* cur = load_elem(acc, acc_tile, idx);
        llvm::Value* prod = acc_d.is_float() ? b_.CreateFMul(av, bval) : b_.CreateMul(av, bval);
        store_elem(acc, acc_tile, idx, acc_d.is_float() ? b_.CreateFAdd(cur, prod) : b_.CreateAdd(cur, prod));
      });
    });
  });
  if (acc_d == out_d) {
    set(o, acc);
    return absl::OkStatus();
  }
  llvm::Value* result = new_buffer(rt);
  tile_loop(rt.numel(), [&](llvm::Value* i) {
    store_elem(result, rt, i, ops_.convert(load_elem(acc, acc_tile, i), acc_d, out_d));
  });
  set(o, result);
  return absl::OkStatus();
}

absl::Status Lowering::for_op(const Op& o) {
  const Block& body = ir_.blocks[o.blocks[0]];
  const Op& yield = ir_.ops[body.ops.back()];
  DType d = ir_.type(o.operands[0]).dtype();
  bool s = d.is_signed();
  llvm::Type* it = reg_type(d);
  llvm::Value* lo = val(o.operands[0]);
  llvm::Value* hi = val(o.operands[1]);
  llvm::Value* step = val(o.operands[2]);
  size_t n = o.results.size();
  std::vector<llvm::Value*> bufs(n, nullptr);
  std::vector<std::shared_ptr<const Layout>> in_regs(n);  // tiles carried in registers, in this layout
  // What a value not in a buffer carries: a scalar's one value, or a
  // register tile's slots.
  auto slots = [&](size_t i, int id) {
    return in_regs[i] != nullptr ? regs(id, *in_regs[i]) : std::vector<llvm::Value*>{val(id)};
  };
  std::vector<std::vector<llvm::Value*>> init(n);
  for (size_t i = 0; i < n; ++i) {
    const Type& t = ir_.type(o.results[i]);
    if (t.is_tile() && !carried_in_registers(t, {yield.operands[i]})) {
      bufs[i] = new_buffer(t);
      copy_tile(bufs[i], val(o.operands[3 + i]), t);
      continue;
    }
    if (t.is_tile()) in_regs[i] = layout(o.results[i]);
    init[i] = slots(i, o.operands[3 + i]);
  }
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  llvm::BasicBlock* head = llvm::BasicBlock::Create(ctx_, "for", fn_);
  llvm::BasicBlock* loop_body = llvm::BasicBlock::Create(ctx_, "for.body", fn_);
  llvm::BasicBlock* exit = llvm::BasicBlock::Create(ctx_, "for.end", fn_);
  // A step <= 0 runs no iteration rather than forever. The induction
  // variable is kept in i64 so that iv + step cannot wrap.
  llvm::Value* positive = b_.CreateICmpSGT(step, llvm::ConstantInt::get(it, 0));
  auto to64 = [&](llvm::Value* v) { return s ? b_.CreateSExt(v, b_.getInt64Ty()) : b_.CreateZExt(v, b_.getInt64Ty()); };
  llvm::Value* lo64 = to64(lo);
  llvm::Value* hi64 = to64(hi);
  llvm::Value* step64 = to64(step);
  b_.CreateBr(head);
  b_.SetInsertPoint(head);
  llvm::PHINode* iv64 = b_.CreatePHI(b_.getInt64Ty(), 2, "iv");
  iv64->addIncoming(lo64, pre);
  std::vector<std::vector<llvm::PHINode*>> phis(n);  // per carried value, one per slot
  for (size_t i = 0; i < n; ++i) {
    for (llvm::Value* v : init[i]) {
      phis[i].push_back(b_.CreatePHI(v->getType(), 2));
      phis[i].back()->addIncoming(v, pre);
    }
  }
  // A carried value is its buffer or its phis, inside the loop and after it.
  auto carried = [&](size_t i, int id) {
    if (in_regs[i] != nullptr) {
      regs_[id] = {in_regs[i], std::vector<llvm::Value*>(phis[i].begin(), phis[i].end())};
      vals_[id] = nullptr;
    } else {
      vals_[id] = bufs[i] != nullptr ? bufs[i] : phis[i][0];
    }
  };
  llvm::Value* go = b_.CreateAnd(positive, b_.CreateICmpSLT(iv64, hi64));
  b_.CreateCondBr(go, loop_body, exit);
  b_.SetInsertPoint(loop_body);
  vals_[body.args[0]] = b_.CreateTrunc(iv64, it);
  for (size_t i = 0; i < n; ++i) carried(i, body.args[1 + i]);
  TESSEL_RETURN_IF_ERROR(block(o.blocks[0]));
  carry_tiles(yield, bufs);
  std::vector<std::vector<llvm::Value*>> next(n);
  for (size_t i = 0; i < n; ++i) {
    if (bufs[i] == nullptr) next[i] = slots(i, yield.operands[i]);
  }
  llvm::BasicBlock* latch = b_.GetInsertBlock();
  iv64->addIncoming(b_.CreateAdd(iv64, step64), latch);
  for (size_t i = 0; i < n; ++i) {
    for (size_t slot = 0; slot < phis[i].size(); ++slot) phis[i][slot]->addIncoming(next[i][slot], latch);
  }
  b_.CreateBr(head);
  b_.SetInsertPoint(exit);
  for (size_t i = 0; i < n; ++i) carried(i, o.results[i]);
  return absl::OkStatus();
}

void Lowering::carry_tiles(const Op& yield, const std::vector<llvm::Value*>& bufs) {
  std::vector<llvm::Value*> srcs(bufs.size(), nullptr);
  for (size_t i = 0; i < bufs.size(); ++i) {
    if (bufs[i] == nullptr || val(yield.operands[i]) == bufs[i]) continue;
    srcs[i] = val(yield.operands[i]);
    if (std::find(bufs.begin(), bufs.end(), srcs[i]) != bufs.end()) {
      const Type& t = ir_.type(yield.operands[i]);
      llvm::Value* tmp = new_buffer(t);
      copy_tile(tmp, srcs[i], t);
      srcs[i] = tmp;
    }
  }
  for (size_t i = 0; i < bufs.size(); ++i) {
    if (srcs[i] != nullptr) copy_tile(bufs[i], srcs[i], ir_.type(yield.operands[i]));
  }
}

absl::Status Lowering::if_op(const Op& o) {
  const size_t n = o.results.size();
  std::vector<llvm::Value*> bufs(n, nullptr);
  std::vector<std::shared_ptr<const Layout>> in_regs(n);  // tile results in registers, in this layout
  auto yields = [&](size_t r) {
    std::vector<int> v;
    for (int b : o.blocks) v.push_back(ir_.ops[ir_.blocks[b].ops.back()].operands[r]);
    return v;
  };
  for (size_t r = 0; r < n; ++r) {
    const Type& t = ir_.type(o.results[r]);
    if (t.is_tile() && carried_in_registers(t, yields(r))) {
      in_regs[r] = layout(o.results[r]);
    } else if (t.is_tile()) {
      bufs[r] = new_buffer(t);
    }
  }
  llvm::BasicBlock* blocks[2] = {llvm::BasicBlock::Create(ctx_, "then", fn_),
                                 llvm::BasicBlock::Create(ctx_, "else", fn_)};
  llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx_, "endif", fn_);
  b_.CreateCondBr(val(o.operands[0]), blocks[0], blocks[1]);
  // Per branch and result: the scalar, or the register tile's slots.
  std::vector<std::vector<llvm::Value*>> yielded[2];
  llvm::BasicBlock* ends[2];
  for (int i = 0; i < 2; ++i) {
    b_.SetInsertPoint(blocks[i]);
    TESSEL_RETURN_IF_ERROR(block(o.blocks[i]));
    const Op& y = ir_.ops[ir_.blocks[o.blocks[i]].ops.back()];
    for (size_t r = 0; r < n; ++r) {
      if (bufs[r] != nullptr) {
        copy_tile(bufs[r], val(y.operands[r]), ir_.type(y.operands[r]));
        yielded[i].emplace_back();
      } else if (in_regs[r] != nullptr) {
        yielded[i].push_back(regs(y.operands[r], *in_regs[r]));
      } else {
        yielded[i].push_back({val(y.operands[r])});
      }
    }
    ends[i] = b_.GetInsertBlock();
    b_.CreateBr(done);
  }
  b_.SetInsertPoint(done);
  for (size_t r = 0; r < n; ++r) {
    if (bufs[r] != nullptr) {
      vals_[o.results[r]] = bufs[r];
      continue;
    }
    std::vector<llvm::Value*> merged;
    for (size_t slot = 0; slot < yielded[0][r].size(); ++slot) {
      llvm::PHINode* phi = b_.CreatePHI(yielded[0][r][slot]->getType(), 2);
      phi->addIncoming(yielded[0][r][slot], ends[0]);
      phi->addIncoming(yielded[1][r][slot], ends[1]);
      merged.push_back(phi);
    }
    if (in_regs[r] != nullptr) {
      regs_[o.results[r]] = {in_regs[r], std::move(merged)};
    } else {
      vals_[o.results[r]] = merged[0];
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<LoweredKernel> lower(const KernelIR& ir, TargetInfo& target, llvm::LLVMContext& ctx,
                                    Specialization facts) {
  return Lowering(ir, target, ctx, facts).run();
}

}  // namespace tessel::codegen
