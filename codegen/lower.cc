// Kernel IR -> LLVM IR. Scalars are SSA values; a tile is registers spread
// over the program's threads, a dense row-major buffer of its elements
// written once by the op that defines it, or (on the host) computed inline
// where it is read; tile ops are loops over elements that LLVM's O3
// pipeline vectorizes. Views (expand_dims, reshape) alias their operand's
// buffer or registers. f16 and bf16 values
// are their 16 bits (i16): arithmetic widens them to f32, computes, and
// rounds once to nearest even, which gives the correctly rounded result for
// + - * / sqrt (and, with care in ScalarOps::fma, for fma).
//
// This file is the driver: the kernel's entry, blocks, the dispatch of ops
// to the files of their concern (see lowering.h), shared-memory buffers
// and the conversions between registers and buffers.
#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "base/float8.h"
#include "base/status.h"
#include "base/tma_rules.h"
#include "codegen/hazards.h"
#include "codegen/lowering.h"
#include "codegen/prefetch.h"
#include "dsl/printer.h"
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
  smem_base_ = cta_smem_ = target_.shared_base(b_);
  TESSEL_RETURN_IF_ERROR(plan_roles());
  threads_ = target_.register_tile_threads();
  if (threads_ > 0) ring_loads_ = copy_ring_loads(ir_, analysis_, target_);
  std::vector<int> copied;
  for (const RingLoad& l : ring_loads_) copied.push_back(l.load);
  blocking_ = plan_blocking(ir_, analysis_, threads_, target_.warp_size(), copied);
  pointer_params_ = pointer_parameters(ir_);
  hazards_ = hazard_barriers(ir_, pointer_params_);
  plan_inline();
  wanted_.assign(ir_.values.size(), nullptr);
  mma_only_.assign(ir_.values.size(), false);
  if (threads_ > 0) {
    thread_ = target_.thread_index(b_);
    plan_copy_loads();
    TESSEL_RETURN_IF_ERROR(plan_mma());
    if (drop_copy_loads_read_elsewhere()) {
      mma_dots_.clear();
      wanted_.assign(ir_.values.size(), nullptr);
      mma_only_.assign(ir_.values.size(), false);
      TESSEL_RETURN_IF_ERROR(plan_mma());
    }
    plan_pipelines();
    plan_copy_rings();
    if (specialized_ != nullptr) {
      TESSEL_RETURN_IF_ERROR(check_roles());
      group_ = target_.group_of_thread(b_, thread_, threads_);
      smem_base_ = consumer_smem(
          b_.CreateSelect(b_.CreateICmpULT(group_, b_.getInt64(consumers_)), group_, b_.getInt64(consumers_ - 1)));
    }
    want_slices();
  }
  alloca_point_ = b_.CreateBr(body);
  b_.SetInsertPoint(body);
  reserve_tma_barriers();
  // The cluster's programs may reach into each other's shared memory (its
  // mbarriers set up first) until every one is done.
  if (ir_.cluster > 1) target_.cluster_barrier(b_);
  TESSEL_RETURN_IF_ERROR(block(0));
  target_.epilogue(b_);
  if (ir_.cluster > 1) target_.cluster_barrier(b_);
  b_.CreateRetVoid();
  int64_t bytes = smem_peak_;
  if (consumer_span_ != nullptr) {
    const int64_t span = round_up(smem_peak_ - consumer_region_, tma::kSwizzledTileAlignment);
    consumer_span_->replaceAllUsesWith(b_.getInt64(span));
    consumer_span_->eraseFromParent();
    bytes = consumer_region_ + consumers_ * span;
  }
  std::string err;
  llvm::raw_string_ostream os(err);
  if (llvm::verifyModule(*module, &os)) {
    return absl::InternalError(absl::StrCat("codegen produced invalid LLVM IR for kernel '", ir_.name, "': ", err));
  }
  const int64_t shared = bytes > 0 ? bytes + target_.shared_base_slack() : 0;
  // (A warp-specialized loop's ring runs across it whatever the choice.)
  return LoweredKernel{std::move(module),
                       fn_->getName().str(),
                       shared,
                       !store_tiles_.empty() || (!outer_pipelines_.empty() && specialized_ == nullptr),
                       pipelined_by_default_,
                       !staged_stores_.empty()};
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

llvm::Value* Lowering::new_buffer(const Type& tile) {
  int64_t bytes = tile.numel() * module_->getDataLayout().getTypeAllocSize(elem_mem_type(tile));
  if (target_.tiles_in_shared()) return smem_alloc(bytes);
  return stack_slot(elem_mem_type(tile), tile.numel(), 64);
}

llvm::Value* Lowering::stack_slot(llvm::Type* type, int64_t count, uint64_t align) {
  IRBuilder<> eb(alloca_point_);
  const unsigned space = module_->getDataLayout().getAllocaAddrSpace();
  auto* a = eb.CreateAlloca(type, space, eb.getInt64(count));
  if (align > 0) a->setAlignment(llvm::Align(align));
  return space == 0 ? static_cast<llvm::Value*>(a) : eb.CreateAddrSpaceCast(a, eb.getPtrTy());
}

std::vector<llvm::Value*> Lowering::unravel(llvm::Value* lin, const Shape& shape) {
  std::vector<int64_t> st = strides(shape);
  std::vector<llvm::Value*> idx(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    idx[d] = b_.CreateURem(b_.CreateUDiv(lin, b_.getInt64(st[d])), b_.getInt64(shape[d]));
  }
  return idx;
}

llvm::Value* Lowering::linear_index(const std::vector<llvm::Value*>& idx, const std::vector<int64_t>& stride) {
  llvm::Value* lin = b_.getInt64(0);
  for (size_t d = 0; d < idx.size(); ++d) {
    if (stride[d] != 0) lin = b_.CreateAdd(lin, b_.CreateMul(idx[d], b_.getInt64(stride[d])));
  }
  return lin;
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
    if (hazards_.contains(ops[i])) target_.program_barrier(b_);
    stage_point(ir_.ops[ops[i]], /*after=*/false);
    stage_hoisted(ir_.ops[ops[i]]);
    TESSEL_RETURN_IF_ERROR(op(ir_.ops[ops[i]]));
    free_hoisted(ir_.ops[ops[i]]);
    stage_point(ir_.ops[ops[i]], /*after=*/true);
    release_dead_buffers(last_use, static_cast<int>(i));
  }
  block_ = outer;
  shared_ = std::move(outer_buffers);
  return absl::OkStatus();
}

llvm::Value* Lowering::smem_alloc(int64_t bytes, int64_t align) {
  std::vector<std::pair<int64_t, int64_t>> taken;  // [begin, end) of live buffers, sorted
  for (const auto& [ptr, buf] : shared_) taken.push_back({buf.offset, buf.offset + buf.bytes});
  std::sort(taken.begin(), taken.end());
  // Every buffer may be a TMA box's tile: at least kSharedTileAlignment.
  int64_t offset = round_up(smem_reserved_, align);
  for (const auto& [begin, end] : taken) {
    if (offset + bytes <= begin) break;
    offset = std::max(offset, round_up(end, align));
  }
  if (offset < smem_peak_) target_.program_barrier(b_);  // reusing memory others may still read
  smem_peak_ = std::max(smem_peak_, offset + bytes);
  ++smem_allocations_;
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
  TESSEL_CHECK(!inline_[id], "an inline tile has no buffer");
  if (vals_[id] != nullptr || regs_[id].slots.empty()) return vals_[id];
  const Type& t = ir_.type(id);
  llvm::Value* buf = new_buffer(t);
  llvm::Type* mt = elem_mem_type(t);
  store_regs(id, [&](llvm::Value* i) { return b_.CreateInBoundsGEP(mt, buf, i); });
  if (ir_.values[id].def_block == block_) vals_[id] = buf;
  return buf;
}

void Lowering::store_regs(int id, const std::function<llvm::Value*(llvm::Value*)>& address, bool barrier,
                          const SlotFilter& keep) {
  const RegTile& r = regs_[id];
  const Layout& layout = *r.layout;
  llvm::Type* mt = elem_mem_type(ir_.type(id));
  auto stored = [&](int64_t slot) { return to_memory(r.slots[slot], mt); };
  // Whether slots `slot` and `slot + 1` hold an even element and the one
  // after it in every thread (so both are valid everywhere): then one store
  // of both.
  auto pair = [&](int64_t slot) {
    if (slot % 2 != 0 || slot + 1 >= layout.slots()) return false;
    for (int t = 0; t < layout.threads(); ++t) {
      const int64_t e = layout.element_at(t, slot);
      if (e < 0 || e % 2 != 0 || layout.element_at(t, slot + 1) != e + 1) return false;
    }
    return true;
  };
  const uint64_t bytes = module_->getDataLayout().getTypeStoreSize(mt);  // (pointers too)
  for (int64_t slot = 0; slot < layout.slots(); ++slot) {
    if (keep && !keep(slot)) continue;
    if (pair(slot) && (!keep || keep(slot + 1))) {
      llvm::Value* both = llvm::PoisonValue::get(llvm::FixedVectorType::get(mt, 2));
      both = b_.CreateInsertElement(both, stored(slot), uint64_t{0});
      both = b_.CreateInsertElement(both, stored(slot + 1), uint64_t{1});
      b_.CreateAlignedStore(both, address(layout.element(b_, thread_, slot)), llvm::Align(2 * bytes));
      ++slot;
      continue;
    }
    guarded(layout.valid(b_, thread_, slot), [&] { b_.CreateStore(stored(slot), address(layout.element(b_, thread_, slot))); });
  }
  if (barrier) target_.program_barrier(b_);
}

std::vector<llvm::Value*> Lowering::regs(int id, const Layout& want) {
  const Type& t = ir_.type(id);
  if (!regs_[id].slots.empty() && regs_[id].layout->same_as(want)) return regs_[id].slots;
  if (!regs_[id].slots.empty() && is_splat(id)) return std::vector<llvm::Value*>(want.slots(), regs_[id].slots[0]);
  if (!regs_[id].slots.empty()) {
    if (std::optional<std::vector<SlotSources>> moves = register_moves(*regs_[id].layout, want, target_.warp_size())) {
      return moved(regs_[id].slots, *regs_[id].layout, *moves);
    }
  }
  llvm::Value* buf = val(id);
  std::vector<llvm::Value*> out;
  for (int64_t slot = 0; slot < want.slots(); ++slot) {
    llvm::Value* e = want.element(b_, thread_, slot);
    if (llvm::Value* ok = want.valid(b_, thread_, slot)) e = b_.CreateSelect(ok, e, b_.getInt64(t.numel() - 1));
    out.push_back(load_elem(buf, t, e));
  }
  return out;
}

std::vector<llvm::Value*> Lowering::moved(const std::vector<llvm::Value*>& slots, const Layout& from,
                                          const std::vector<SlotSources>& moves) {
  // The registers each shuffle distance reads, each once.
  std::map<int, std::vector<int64_t>> shuffled;
  for (const SlotSources& sources : moves) {
    for (const SlotSource& m : sources) {
      if (m.lanes == 0) continue;
      std::vector<int64_t>& read = shuffled[m.lanes];
      if (std::find(read.begin(), read.end(), m.from) == read.end()) read.push_back(m.from);
    }
  }
  std::map<std::pair<int, int64_t>, llvm::Value*> got;
  for (const auto& [lanes, read] : shuffled) {
    for (size_t i = 0; i < read.size(); ++i) {
      llvm::Value* v = slots[read[i]];
      llvm::Type* t = v->getType();
      const bool narrow = t->isIntegerTy() && t->getIntegerBitWidth() <= 16;
      if (narrow && i + 1 < read.size() && slots[read[i + 1]]->getType() == t) {
        // Two values of 16 bits or fewer share one 32-bit shuffle.
        llvm::Value* both = b_.CreateOr(b_.CreateZExt(v, b_.getInt32Ty()),
                                        b_.CreateShl(b_.CreateZExt(slots[read[i + 1]], b_.getInt32Ty()), 16));
        both = target_.shuffle_xor(b_, both, lanes);
        got[{lanes, read[i]}] = b_.CreateTrunc(both, t);
        got[{lanes, read[i + 1]}] = b_.CreateTrunc(b_.CreateLShr(both, 16), t);
        ++i;
      } else if (t->isPointerTy()) {
        llvm::Value* p = target_.shuffle_xor(b_, b_.CreatePtrToInt(v, b_.getInt64Ty()), lanes);
        got[{lanes, read[i]}] = b_.CreateIntToPtr(p, t);
      } else {
        got[{lanes, read[i]}] = target_.shuffle_xor(b_, v, lanes);
      }
    }
  }
  auto source = [&](const SlotSource& m) { return m.lanes == 0 ? slots[m.from] : got.at({m.lanes, m.from}); };
  std::vector<llvm::Value*> out;
  for (const SlotSources& sources : moves) {
    // The first source whose slot holds an element where it was read.
    llvm::Value* v = source(sources.back());
    for (auto m = sources.rbegin() + 1; m != sources.rend(); ++m) {
      llvm::Value* ok = from.valid(b_, b_.CreateXor(thread_, b_.getInt64(m->lanes)), m->from);
      if (ok != nullptr) v = b_.CreateSelect(ok, source(*m), v);
    }
    out.push_back(v);
  }
  return out;
}

llvm::Value* Lowering::constant(const Op& o) {
  DType d = ir_.type(o.results[0]).dtype();
  llvm::Type* t = reg_type(d);
  if (d == f8e4m3 || d == f8e5m2) {
    return b_.getInt8(float_to_float8(static_cast<float>(o.fval), d == f8e4m3 ? Float8::kE4M3 : Float8::kE5M2));
  }
  if (is_narrow_float(d)) {
    llvm::APFloat f(o.fval);
    bool lost;
    f.convert(d == f16 ? llvm::APFloat::IEEEhalf() : llvm::APFloat::BFloat(), llvm::APFloat::rmNearestTiesToEven,
              &lost);
    return b_.getInt(f.bitcastToAPInt());
  }
  return d.is_float() ? llvm::ConstantFP::get(t, o.fval) : llvm::ConstantInt::get(t, o.ints[0], d.is_signed());
}

absl::Status Lowering::op(const Op& o) {
  const Type rt = o.results.empty() ? Type() : ir_.type(o.results[0]);
  if (is_elementwise(o.op)) return elementwise_op(o, rt);
  switch (o.op) {
    case OpCode::kConstant:
      set(o, constant(o));
      return absl::OkStatus();
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
      define_elements(o);
      return absl::OkStatus();
    }
    case OpCode::kSplat: {
      llvm::Value* x = val(o.operands[0]);
      if (in_registers(rt) || wanted_[o.results[0]] != nullptr) {
        set_regs(o, std::vector<llvm::Value*>(layout(o.results[0])->slots(), x));
        return absl::OkStatus();
      }
      define_elements(o);
      return absl::OkStatus();
    }
    case OpCode::kExpandDims:
    case OpCode::kReshape:
      return view(o);
    case OpCode::kTrans:
      // A transposed operand of a matrix instruction is read in place (or,
      // held in registers, staged from them: Lowering::stage).
      if (mma_only_[o.results[0]]) {
        if (regs_[o.operands[0]].slots.empty()) set(o, val(o.operands[0]));
        return absl::OkStatus();
      }
      return permute(o, rt);
    case OpCode::kBroadcast:
      return permute(o, rt);
    case OpCode::kNarrow:
      return narrow(o, rt);
    case OpCode::kConcat:
      return concat(o, rt);
    case OpCode::kGather:
      return gather(o, rt);
    case OpCode::kHistogram:
      return histogram(o, rt);
    case OpCode::kPrint:
    case OpCode::kAssert:
      return debug(o);
    case OpCode::kReduceFn:
      return reduce_fn(o);
    case OpCode::kScanFn:
      return scan_fn(o);
    case OpCode::kReduce:
      return reduce(o, rt);
    case OpCode::kScan:
      return scan(o, rt);
    case OpCode::kSort:
      return sort(o, rt);
    case OpCode::kLoad:
      return load(o, rt);
    case OpCode::kStore:
      return store(o);
    case OpCode::kAtomic:
      return atomic(o, rt);
    case OpCode::kAtomicCas:
      return atomic_cas(o, rt);
    case OpCode::kTmaLoad:
      return tma_load(o, rt);
    case OpCode::kTmaStore:
      return tma_store(o);
    case OpCode::kDot:
      return dot(o, rt);
    case OpCode::kFor:
      return for_op(o);
    case OpCode::kIf:
      return if_op(o);
    case OpCode::kWhile:
      return while_op(o);
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

absl::StatusOr<LoweredKernel> lower(const KernelIR& built, TargetInfo& target, llvm::LLVMContext& ctx,
                                    Specialization facts, int64_t shared_limit, bool debug) {
  // Without debug, asserts are compiled away before anything looks at them.
  if (!debug && std::any_of(built.ops.begin(), built.ops.end(), [](const Op& o) { return o.op == OpCode::kAssert; })) {
    KernelIR stripped = built;
    for (Block& b : stripped.blocks) {
      std::erase_if(b.ops, [&](int id) { return stripped.ops[id].op == OpCode::kAssert; });
    }
    return lower(stripped, target, ctx, facts, shared_limit, true);
  }
  // Where tiles live in registers, loads in loops are issued an iteration
  // ahead (but those that copy rings bring in, further ahead).
  const int threads = target.register_tile_threads();
  KernelIR prefetched;
  if (threads > 0) prefetched = built;
  std::vector<RingLoad> rings;
  if (target.async_copies()) rings = copy_ring_loads(built, AffineAnalysis(built, facts), target);
  const KernelIR& ir = threads > 0 && prefetch_loads(prefetched, threads, rings) > 0 ? prefetched : built;
  // The most overlap that fits: held store tiles and rings across loops,
  // the same with tiles staged a panel at a time, then with only streamed
  // stores' tiles held, then one of them, then neither; each with the
  // default stage count, then 2, then 1 (a kernel that overlaps nothing in
  // loops with no stages of their own is as small as it gets: the last
  // choice always returns).
  static constexpr Lowering::Overlap kChoices[] = {{true, true, false},       {true, true, true},
                                                   {true, true, false, true}, {true, false, false},
                                                   {false, true, false},      {false, false, false}};
  auto any_store = [&](const std::function<bool(const Op&)>& pred) {
    return std::any_of(ir.ops.begin(), ir.ops.end(), [&](const Op& o) { return o.op == OpCode::kTmaStore && pred(o); });
  };
  const bool panelled =
      target.swizzles_shared_tiles() && any_store([&](const Op& o) { return store_panels(ir, o) > 2; });
  // Some stores streamed and some not (else holding only those is one of the other choices).
  const bool streamed = any_store([&](const Op& o) { return streamed_store(ir, o); }) &&
                        any_store([&](const Op& o) { return !streamed_store(ir, o); });
  auto fits = [&](const LoweredKernel& l) { return shared_limit == 0 || l.shared_bytes <= shared_limit; };
  for (int stages = Lowering::kDefaultStages; stages >= 1; --stages) {
    for (Lowering::Overlap overlap : kChoices) {
      if ((overlap.stage_panels && !panelled) || (overlap.hold_streamed_only && !streamed)) continue;
      overlap.default_stages = stages;
      TESSEL_ASSIGN_OR_RETURN(LoweredKernel lowered, Lowering(ir, target, ctx, facts, overlap).run());
      if (!fits(lowered) && lowered.staged_stores) {  // stores from registers first
        overlap.stage_stores = false;
        TESSEL_ASSIGN_OR_RETURN(lowered, Lowering(ir, target, ctx, facts, overlap).run());
      }
      if (fits(lowered)) return lowered;
      if (lowered.overlapped) continue;
      if (!lowered.pipelined_by_default) return lowered;
      break;
    }
  }
  return absl::InternalError("lower: no overlap choice");
}

absl::Status check_shared_limit(const KernelIR& ir, const LoweredKernel& lowered, const std::string& arch,
                                int64_t limit, const char* memory, int programs, const char* unit) {
  if (lowered.shared_bytes <= limit) return absl::OkStatus();
  return absl::ResourceExhaustedError(
      absl::StrCat("kernel '", ir.name, "' needs ", lowered.shared_bytes, " bytes of ", memory, " per program; ", arch,
                   " allows ", limit, programs > 1 ? absl::StrCat(" with ", programs, " programs on ", unit) : "",
                   " (use smaller tiles, or fewer stages in pipelined loops)"));
}

}  // namespace tessel::codegen
