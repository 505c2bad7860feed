// Kernel IR -> LLVM IR. Scalars are SSA values; a tile is a dense row-major
// buffer of its elements, written once by the op that defines it, and tile
// ops are loops over elements that LLVM's O3 pipeline vectorizes. Views
// (expand_dims, reshape) alias their operand's buffer. f16 and bf16 values
// are their 16 bits (i16): arithmetic widens them to f32, computes, and
// rounds once to nearest even, which gives the correctly rounded result for
// + - * / sqrt (and, with care in ScalarOps::fma, for fma).
#include "codegen/lower.h"

#include <algorithm>
#include <functional>
#include <map>

#include "absl/strings/str_cat.h"
#include "codegen/affine.h"
#include "codegen/layout.h"
#include "codegen/loops.h"
#include "codegen/scalar_ops.h"
#include "codegen/views.h"
#include "dsl/ops.h"
#include "dsl/printer.h"
#include "dsl/status.h"
#include "llvm/IR/Intrinsics.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

namespace tessel::codegen {
namespace {

using llvm::IRBuilder;

class Lowering {
 public:
  Lowering(const KernelIR& ir, TargetInfo& target, llvm::LLVMContext& ctx)
      : ir_(ir), target_(target), ctx_(ctx), b_(ctx), ops_(b_, target) {}

  absl::StatusOr<LoweredKernel> run() {
    auto module = std::make_unique<llvm::Module>(ir_.name, ctx_);
    module->setTargetTriple(target_.machine().getTargetTriple().str());
    module->setDataLayout(target_.machine().createDataLayout());
    module_ = module.get();
    fn_ = target_.declare_kernel(*module, ir_);
    entry_ = llvm::BasicBlock::Create(ctx_, "entry", fn_);
    llvm::BasicBlock* body = llvm::BasicBlock::Create(ctx_, "body", fn_);
    b_.SetInsertPoint(entry_);
    vals_.assign(ir_.values.size(), nullptr);
    affine_ = analyze_affine(ir_);
    regs_.assign(ir_.values.size(), {});
    std::vector<llvm::Value*> params = target_.params(b_, ir_);
    for (size_t i = 0; i < ir_.params.size(); ++i) vals_[ir_.params[i].value] = params[i];
    smem_base_ = target_.shared_base(b_);
    threads_ = target_.register_tile_threads();
    if (threads_ > 0) thread_ = target_.thread_index(b_);
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

 private:
  // ---- Types -------------------------------------------------------------
  llvm::Type* reg_type(DType d) { return ops_.reg_type(d); }
  llvm::Type* ptr_type() { return llvm::PointerType::get(ctx_, target_.global_address_space()); }
  // The register type of a scalar, pointer, or a tile's element.
  llvm::Type* elem_type(const Type& t) {
    if (t.is_pointer() || (t.is_tile() && t.elements_are_pointers())) return ptr_type();
    return reg_type(t.dtype());
  }
  // In memory an i1 takes a byte.
  llvm::Type* elem_mem_type(const Type& t) {
    llvm::Type* r = elem_type(t);
    return r->isIntegerTy(1) ? b_.getInt8Ty() : r;
  }

  // Each tma_load op gets an mbarrier at the start of shared memory, set up
  // once per kernel, and a phase bit that flips with each use.
  void reserve_tma_barriers() {
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
    smem_top_ = smem_peak_ = 8 * static_cast<int64_t>(loads.size());
    if (!loads.empty()) target_.init_tma_barriers(b_, smem_base_, static_cast<int>(loads.size()));
  }

  // ---- Buffers and loops ---------------------------------------------------
  // Shared memory is handed out per block: what a block allocates is free
  // again when it ends (values never outlive their block but through yields,
  // which copy). Host tiles other than TMA boxes live on the stack.
  llvm::Value* smem_alloc(int64_t bytes) {
    int64_t offset = (smem_top_ + 127) / 128 * 128;
    smem_top_ = offset + bytes;
    smem_peak_ = std::max(smem_peak_, smem_top_);
    return b_.CreateConstInBoundsGEP1_64(b_.getInt8Ty(), smem_base_, offset);
  }
  llvm::Value* new_buffer(const Type& tile) {
    int64_t bytes = tile.numel() * module_->getDataLayout().getTypeAllocSize(elem_mem_type(tile));
    if (target_.tiles_in_shared()) return smem_alloc(bytes);
    IRBuilder<> eb(alloca_point_);
    auto* a = eb.CreateAlloca(elem_mem_type(tile), eb.getInt64(tile.numel()), "tile");
    a->setAlignment(llvm::Align(64));
    return a;
  }
  llvm::Value* load_elem(llvm::Value* buf, const Type& tile, llvm::Value* i) {
    llvm::Type* mt = elem_mem_type(tile);
    llvm::Value* v = b_.CreateLoad(mt, b_.CreateInBoundsGEP(mt, buf, i));
    return mt == elem_type(tile) ? v : b_.CreateTrunc(v, b_.getInt1Ty());
  }
  void store_elem(llvm::Value* buf, const Type& tile, llvm::Value* i, llvm::Value* v) {
    llvm::Type* mt = elem_mem_type(tile);
    if (mt != v->getType()) v = b_.CreateZExt(v, mt);
    b_.CreateStore(v, b_.CreateInBoundsGEP(mt, buf, i));
  }
  // One thread's loop: for (i = 0; i < n; ++i) body(i), with an i64 index.
  void loop(int64_t n, const std::function<void(llvm::Value*)>& body) {
    emit_loop(b_, b_.getInt64(0), b_.getInt64(n), b_.getInt64(1), body);
  }
  // The program's loop over the elements of a tile: the target spreads it
  // over its threads and makes the writes visible to all of them.
  void tile_loop(int64_t n, const std::function<void(llvm::Value*)>& body) { target_.tile_loop(b_, n, body); }
  // tile_loop over a shape: body gets each index and the row-major linear one.
  void tile_loop(const Shape& shape, const std::function<void(const std::vector<llvm::Value*>&, llvm::Value*)>& body) {
    std::vector<int64_t> st = strides(shape);
    tile_loop(numel(shape), [&](llvm::Value* lin) {
      std::vector<llvm::Value*> idx(shape.size());
      for (size_t d = 0; d < shape.size(); ++d) {
        idx[d] = b_.CreateURem(b_.CreateUDiv(lin, b_.getInt64(st[d])), b_.getInt64(shape[d]));
      }
      body(idx, lin);
    });
  }
  static std::vector<int64_t> strides(const Shape& shape) {
    std::vector<int64_t> s(shape.size(), 1);
    for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) s[d] = s[d + 1] * shape[d + 1];
    return s;
  }
  llvm::Value* linear_index(const std::vector<llvm::Value*>& idx, const std::vector<int64_t>& stride) {
    llvm::Value* lin = b_.getInt64(0);
    for (size_t d = 0; d < idx.size(); ++d) {
      if (stride[d] != 0) lin = b_.CreateAdd(lin, b_.CreateMul(idx[d], b_.getInt64(stride[d])));
    }
    return lin;
  }
  void copy_tile(llvm::Value* dst, llvm::Value* src, const Type& tile) {
    tile_loop(tile.numel(), [&](llvm::Value* i) { store_elem(dst, tile, i, load_elem(src, tile, i)); });
  }


  // One element of an elementwise op; `args` are element values.
  llvm::Value* elementwise(const Op& o, const std::vector<llvm::Value*>& args) {
    const Type& t0 = ir_.type(o.operands[0]);
    DType d = t0.dtype();
    switch (o.op) {
      case OpCode::kAdd: case OpCode::kSub: case OpCode::kMul: case OpCode::kDiv: case OpCode::kRem:
      case OpCode::kMin: case OpCode::kMax: case OpCode::kAnd: case OpCode::kOr: case OpCode::kXor:
      case OpCode::kShl: case OpCode::kShr: case OpCode::kEq: case OpCode::kNe: case OpCode::kLt:
      case OpCode::kLe: case OpCode::kGt: case OpCode::kGe:
        return ops_.binary(o.op, d, args[0], args[1]);
      case OpCode::kNeg: case OpCode::kNot: case OpCode::kExp: case OpCode::kLog: case OpCode::kSqrt:
      case OpCode::kRsqrt: case OpCode::kAbs: case OpCode::kFloor:
        return ops_.unary(o.op, d, args[0]);
      case OpCode::kFma:
        return ops_.fma(d, args[0], args[1], args[2]);
      case OpCode::kPtrAdd: {
        llvm::Value* off = b_.CreateIntCast(args[1], b_.getInt64Ty(), ir_.type(o.operands[1]).dtype().is_signed());
        return b_.CreateGEP(elem_mem_type(Type(d)), args[0], off);
      }
      case OpCode::kCast: return ops_.convert(args[0], d, ir_.type(o.results[0]).dtype());
      case OpCode::kSelect: return b_.CreateSelect(args[0], args[1], args[2]);
      case OpCode::kSplat: return args[0];
      default: TESSEL_CHECK(false, "not an elementwise op");
    }
    return nullptr;
  }

  static bool is_elementwise(OpCode op) {
    return (op >= OpCode::kAdd && op <= OpCode::kFma) || op == OpCode::kPtrAdd || op == OpCode::kCast ||
           op == OpCode::kSelect;
  }

  // ---- Ops -------------------------------------------------------------------
  absl::Status block(int b) {
    int64_t top = smem_top_;
    int outer = block_;
    block_ = b;
    for (int o : ir_.blocks[b].ops) TESSEL_RETURN_IF_ERROR(op(ir_.ops[o]));
    block_ = outer;
    smem_top_ = top;
    return absl::OkStatus();
  }

  // A scalar's value, or a tile's buffer (written from registers when the
  // tile is held there; kept when this is the block that defines the tile).
  llvm::Value* val(int id) {
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
  void set(const Op& o, llvm::Value* v) { vals_[o.results[0]] = v; }
  // Results of register-tile ops take the default layout of their type.
  void set_regs(const Op& o, std::vector<llvm::Value*> r) {
    regs_[o.results[0]] = {layout(ir_.type(o.results[0])), std::move(r)};
  }

  // ---- Addresses of pointer tiles ----------------------------------------------
  // The address of element i (linear, i64) of pointer tile `id`: computed
  // from its affine form when it has one, else read from its buffer.
  std::function<llvm::Value*(llvm::Value*)> addresses(int id) {
    const Type& t = ir_.type(id);
    if (!affine_[id]) {
      llvm::Value* buf = val(id);
      return [this, buf, t](llvm::Value* i) { return load_elem(buf, t, i); };
    }
    const Affine& a = *affine_[id];
    llvm::Value* base = affine_base(a, t);
    std::vector<int64_t> st = strides(t.shape());
    return [this, base, a, st, t](llvm::Value* i) {
      llvm::Value* offset = b_.getInt64(0);
      for (size_t d = 0; d < st.size(); ++d) {
        if (a.strides[d] == 0) continue;
        llvm::Value* idx = b_.CreateURem(b_.CreateUDiv(i, b_.getInt64(st[d])), b_.getInt64(t.shape()[d]));
        offset = b_.CreateAdd(offset, b_.CreateMul(idx, b_.getInt64(a.strides[d])));
      }
      return b_.CreateGEP(elem_mem_type(Type(t.dtype())), base, offset);
    };
  }
  // The scalar part of an affine pointer tile: pointer + sum of terms.
  llvm::Value* affine_base(const Affine& a, const Type& t) {
    llvm::Value* offset = b_.getInt64(a.constant);
    for (auto [v, c] : a.terms) {
      llvm::Value* x = b_.CreateIntCast(val(v), b_.getInt64Ty(), ir_.type(v).dtype().is_signed());
      offset = b_.CreateAdd(offset, b_.CreateMul(x, b_.getInt64(c)));
    }
    return b_.CreateGEP(elem_mem_type(Type(t.dtype())), val(a.pointer), offset);
  }
  std::vector<llvm::Value*> register_addresses(int id) {
    if (!affine_[id]) return regs(id);
    std::function<llvm::Value*(llvm::Value*)> address = addresses(id);
    std::vector<llvm::Value*> out;
    const Type& t = ir_.type(id);
    for (int64_t slot = 0; slot < slots(t); ++slot) out.push_back(address(element_of(t, slot)));
    return out;
  }

  // ---- Register tiles ---------------------------------------------------------
  // On targets whose programs have several threads, elementwise ops, splat,
  // arange, loads and stores through pointer tiles and whole-tile reductions
  // keep tiles in registers, spread over the threads by a Layout
  // (codegen/layout.h); each tile type's default is blocked with one element
  // per thread and step, so that a warp's accesses coalesce. Ops that move
  // elements between threads (broadcast, trans, row reductions, dot, TMA,
  // loop-carried values) read buffers in shared memory, which val() writes
  // from the registers: the conversion through shared memory, also taken
  // between two register layouts.
  static constexpr int64_t kMaxSlots = 64;  // larger tiles stay in shared memory
  bool in_registers(const Type& t) const {
    return threads_ > 0 && t.is_tile() && (t.numel() + threads_ - 1) / threads_ <= kMaxSlots;
  }
  // The default layout of a tile type: blocked, one element per thread and step.
  const std::shared_ptr<const Layout>& layout(const Type& t) {
    std::shared_ptr<const Layout>& l = layouts_[t.numel()];
    if (l == nullptr) l = blocked_layout(t.numel(), threads_);
    return l;
  }
  int64_t slots(const Type& t) { return layout(t)->slots(); }
  llvm::Value* element_of(const Type& t, int64_t slot) { return layout(t)->element(b_, thread_, slot); }
  // Whether the slot holds an element (nullptr: always).
  llvm::Value* slot_valid(const Type& t, int64_t slot) { return layout(t)->valid(b_, thread_, slot); }
  // A tile's elements of this thread in its type's default layout: its own
  // registers, or loaded from its buffer (written there first when the
  // registers have another layout).
  std::vector<llvm::Value*> regs(int id) {
    const Type& t = ir_.type(id);
    const std::shared_ptr<const Layout>& want = layout(t);
    if (!regs_[id].slots.empty() && regs_[id].layout->same_as(*want)) return regs_[id].slots;
    llvm::Value* buf = val(id);
    std::vector<llvm::Value*> out;
    for (int64_t slot = 0; slot < want->slots(); ++slot) {
      llvm::Value* e = want->element(b_, thread_, slot);
      if (llvm::Value* ok = want->valid(b_, thread_, slot)) e = b_.CreateSelect(ok, e, b_.getInt64(t.numel() - 1));
      out.push_back(load_elem(buf, t, e));
    }
    return out;
  }

  absl::Status op(const Op& o) {
    const Type rt = o.results.empty() ? Type() : ir_.type(o.results[0]);
    if (is_elementwise(o.op)) {
      if (!rt.is_tile()) {
        std::vector<llvm::Value*> args;
        for (int v : o.operands) args.push_back(val(v));
        set(o, elementwise(o, args));
        return absl::OkStatus();
      }
      if (in_registers(rt)) {
        std::vector<std::vector<llvm::Value*>> args;
        for (int v : o.operands) args.push_back(regs(v));
        std::vector<llvm::Value*> out(args[0].size());
        for (size_t slot = 0; slot < out.size(); ++slot) {
          std::vector<llvm::Value*> elems;
          for (const auto& a : args) elems.push_back(a[slot]);
          out[slot] = elementwise(o, elems);
        }
        set_regs(o, std::move(out));
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
          f.convert(d == f16 ? llvm::APFloat::IEEEhalf() : llvm::APFloat::BFloat(),
                    llvm::APFloat::rmNearestTiesToEven, &lost);
          set(o, b_.getInt(f.bitcastToAPInt()));
        } else {
          set(o, d.is_float() ? llvm::ConstantFP::get(t, o.fval) : llvm::ConstantInt::get(t, o.ints[0], d.is_signed()));
        }
        return absl::OkStatus();
      }
      case OpCode::kProgramId: set(o, target_.program_id(b_, static_cast<int>(o.ints[0]))); return absl::OkStatus();
      case OpCode::kNumPrograms:
        set(o, target_.num_programs(b_, static_cast<int>(o.ints[0])));
        return absl::OkStatus();
      case OpCode::kArange: {
        if (in_registers(rt)) {
          std::vector<llvm::Value*> out;
          for (int64_t slot = 0; slot < slots(rt); ++slot) {
            out.push_back(b_.CreateTrunc(b_.CreateAdd(element_of(rt, slot), b_.getInt64(o.ints[0])), b_.getInt32Ty()));
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
          set_regs(o, std::vector<llvm::Value*>(slots(rt), x));
          return absl::OkStatus();
        }
        llvm::Value* out = new_buffer(rt);
        tile_loop(rt.numel(), [&](llvm::Value* i) { store_elem(out, rt, i, x); });
        set(o, out);
        return absl::OkStatus();
      }
      case OpCode::kExpandDims: case OpCode::kReshape:
        // The same elements in the same row-major order: the same buffer, or
        // the same registers (the layout depends on the element count only).
        if (!regs_[o.operands[0]].slots.empty()) {
          regs_[o.results[0]] = regs_[o.operands[0]];
        } else {
          set(o, val(o.operands[0]));
        }
        return absl::OkStatus();
      case OpCode::kBroadcast: case OpCode::kTrans: return permute(o, rt);
      case OpCode::kReduce: return reduce(o, rt);
      case OpCode::kLoad: return load(o, rt);
      case OpCode::kStore: return store(o);
      case OpCode::kAtomic: return atomic(o, rt);
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
      case OpCode::kDot: return dot(o, rt);
      case OpCode::kFor: return for_op(o);
      case OpCode::kIf: return if_op(o);
      case OpCode::kYield: return absl::OkStatus();  // handled by the owner
      case OpCode::kPublish:
        ViewLowering(b_, target_).publish(val(o.operands[0]), val(o.operands[1]));
        return absl::OkStatus();
      case OpCode::kArrived:
        set(o, ViewLowering(b_, target_).arrived(val(o.operands[0]), val(o.operands[1])));
        return absl::OkStatus();
      case OpCode::kWait:
        ViewLowering(b_, target_).wait(val(o.operands[0]), val(o.operands[1]));
        return absl::OkStatus();
      case OpCode::kReusable:
        set(o, ViewLowering(b_, target_).reusable(val(o.operands[0]), val(o.operands[1])));
        return absl::OkStatus();
      default:
        return absl::InternalError(absl::StrCat("codegen: no lowering for ", opcode_name(o.op)));
    }
  }

  std::vector<llvm::Value*> coords(const Op& o, size_t first) {
    std::vector<llvm::Value*> c;
    for (size_t i = first; i < o.operands.size(); ++i) c.push_back(val(o.operands[i]));
    return c;
  }

  // Broadcast and transpose: out[idx] = in[map(idx)].
  absl::Status permute(const Op& o, const Type& rt) {
    const Type& in = ir_.type(o.operands[0]);
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

  llvm::Value* reduce_identity(OpCode combiner, DType d, llvm::Type* t) {
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

  // f16 and bf16 reductions accumulate in f32 and round once.
  absl::Status reduce(const Op& o, const Type& rt) {
    const Type& in = ir_.type(o.operands[0]);
    int axis = static_cast<int>(o.ints[0]);
    auto combiner = static_cast<OpCode>(o.ints[1]);
    DType d = in.dtype();
    DType acc_d = is_narrow_float(d) ? f32 : d;
    llvm::Type* acc_t = reg_type(acc_d);
    if (!rt.is_tile() && in_registers(in)) {
      // A whole tile to one scalar: each thread combines its own elements,
      // then the target combines the threads' partial results.
      std::vector<llvm::Value*> elems = regs(o.operands[0]);
      llvm::Value* acc = reduce_identity(combiner, acc_d, acc_t);
      for (size_t slot = 0; slot < elems.size(); ++slot) {
        llvm::Value* next = ops_.binary(combiner, acc_d, acc, ops_.widen(elems[slot], d));
        llvm::Value* valid = slot_valid(in, static_cast<int64_t>(slot));
        acc = valid == nullptr ? next : b_.CreateSelect(valid, next, acc);
      }
      llvm::Value* all = target_.combine_threads(
          b_, acc, [&](llvm::Value* x, llvm::Value* y) { return ops_.binary(combiner, acc_d, x, y); });
      set(o, ops_.narrow(all, d));
      return absl::OkStatus();
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
      if (out != nullptr) store_elem(out, rt, lin, r);
      else scalar_result = r;
    };
    if (outer.empty()) {
      body({}, b_.getInt64(0));
    } else {
      tile_loop(outer, body);
    }
    set(o, out != nullptr ? out : scalar_result);
    return absl::OkStatus();
  }

  // A masked element reads `other` through a select of addresses, so that
  // masked-off lanes never touch memory and the loop stays branch-free.
  absl::Status load(const Op& o, const Type& rt) {
    const Type& pt = ir_.type(o.operands[0]);
    llvm::Type* mt = elem_mem_type(rt);
    bool masked = o.operands.size() == 3;
    auto one = [&](llvm::Value* p, llvm::Value* mask, llvm::Value* other_addr) {
      if (mask != nullptr) p = b_.CreateSelect(mask, p, other_addr);
      llvm::Value* v = b_.CreateLoad(mt, p);
      return mt == elem_type(rt) ? v : b_.CreateTrunc(v, b_.getInt1Ty());
    };
    if (!pt.is_tile()) {
      llvm::Value* other_addr = nullptr;
      if (masked) {
        IRBuilder<> eb(alloca_point_);
        other_addr = eb.CreateAlloca(mt);
        llvm::Value* other = val(o.operands[2]);
        b_.CreateStore(mt == other->getType() ? other : b_.CreateZExt(other, mt), other_addr);
      }
      set(o, one(val(o.operands[0]), masked ? val(o.operands[1]) : nullptr, other_addr));
      return absl::OkStatus();
    }
    if (in_registers(rt)) return load_registers(o, rt);
    std::function<llvm::Value*(llvm::Value*)> address = addresses(o.operands[0]);
    llvm::Value* masks = masked ? val(o.operands[1]) : nullptr;
    llvm::Value* others = masked ? val(o.operands[2]) : nullptr;
    bool affine = affine_[o.operands[0]].has_value();
    llvm::Value* out = new_buffer(rt);
    tile_loop(rt.numel(), [&](llvm::Value* i) {
      llvm::Value* p = address(i);
      llvm::Value* mask = masked ? load_elem(masks, ir_.type(o.operands[1]), i) : nullptr;
      if (masked && affine) {
        // Computed addresses: a guarded load, which the vectorizer turns into
        // a masked vector load.
        llvm::Value* other = load_elem(others, rt, i);
        llvm::BasicBlock* pre = b_.GetInsertBlock();
        llvm::Value* loaded = nullptr;
        llvm::BasicBlock* in = nullptr;
        emit_if(b_, mask, [&] {
          loaded = one(p, nullptr, nullptr);
          in = b_.GetInsertBlock();
        });
        llvm::PHINode* v = b_.CreatePHI(other->getType(), 2);
        v->addIncoming(loaded, in);
        v->addIncoming(other, pre);
        store_elem(out, rt, i, v);
        return;
      }
      llvm::Value* other_addr = masked ? b_.CreateInBoundsGEP(mt, others, i) : nullptr;
      store_elem(out, rt, i, one(p, mask, other_addr));
    });
    set(o, out);
    return absl::OkStatus();
  }

  // A thread loads its own elements; lanes past the tile's end or masked
  // off read `other` (or nothing) from a private slot instead of memory.
  absl::Status load_registers(const Op& o, const Type& rt) {
    bool masked = o.operands.size() == 3;
    llvm::Type* mt = elem_mem_type(rt);
    std::vector<llvm::Value*> ptrs = register_addresses(o.operands[0]);
    std::vector<llvm::Value*> masks = masked ? regs(o.operands[1]) : std::vector<llvm::Value*>();
    std::vector<llvm::Value*> others = masked ? regs(o.operands[2]) : std::vector<llvm::Value*>();
    llvm::Value* dummy = nullptr;
    {
      IRBuilder<> eb(alloca_point_);
      dummy = eb.CreateAlloca(b_.getInt64Ty());
      eb.CreateStore(eb.getInt64(0), dummy);
    }
    std::vector<llvm::Value*> out;
    for (int64_t slot = 0; slot < slots(rt); ++slot) {
      llvm::Value* ok = slot_valid(rt, slot);
      if (masked) ok = ok == nullptr ? masks[slot] : b_.CreateAnd(ok, masks[slot]);
      llvm::Value* p = ok == nullptr ? ptrs[slot] : b_.CreateSelect(ok, ptrs[slot], dummy);
      llvm::Value* v = b_.CreateLoad(mt, p);
      if (mt != elem_type(rt)) v = b_.CreateTrunc(v, b_.getInt1Ty());
      if (masked) v = b_.CreateSelect(ok, v, others[slot]);
      out.push_back(v);
    }
    set_regs(o, std::move(out));
    return absl::OkStatus();
  }

  // Runs `body` only where `mask` (may be null) holds.
  void guarded(llvm::Value* mask, const std::function<void()>& body) {
    if (mask == nullptr) {
      body();
    } else {
      emit_if(b_, mask, body);
    }
  }

  absl::Status store(const Op& o) {
    const Type& pt = ir_.type(o.operands[0]);
    const Type& vt = ir_.type(o.operands[1]);
    bool masked = o.operands.size() == 3;
    llvm::Type* mt = elem_mem_type(vt);
    auto one = [&](llvm::Value* p, llvm::Value* v, llvm::Value* mask) {
      guarded(mask, [&] { b_.CreateStore(mt == v->getType() ? v : b_.CreateZExt(v, mt), p); });
    };
    if (!pt.is_tile()) {
      one(val(o.operands[0]), val(o.operands[1]), masked ? val(o.operands[2]) : nullptr);
      return absl::OkStatus();
    }
    if (in_registers(pt)) {
      std::vector<llvm::Value*> ptrs = register_addresses(o.operands[0]), values = regs(o.operands[1]);
      std::vector<llvm::Value*> masks = masked ? regs(o.operands[2]) : std::vector<llvm::Value*>();
      for (int64_t slot = 0; slot < slots(pt); ++slot) {
        llvm::Value* ok = slot_valid(pt, slot);
        if (masked) ok = ok == nullptr ? masks[slot] : b_.CreateAnd(ok, masks[slot]);
        one(ptrs[slot], values[slot], ok);
      }
      return absl::OkStatus();
    }
    std::function<llvm::Value*(llvm::Value*)> address = addresses(o.operands[0]);
    llvm::Value* values = val(o.operands[1]);
    llvm::Value* masks = masked ? val(o.operands[2]) : nullptr;
    tile_loop(pt.numel(), [&](llvm::Value* i) {
      one(address(i), load_elem(values, vt, i),
          masked ? load_elem(masks, ir_.type(o.operands[2]), i) : nullptr);
    });
    return absl::OkStatus();
  }

  absl::Status atomic(const Op& o, const Type& rt) {
    const Type& pt = ir_.type(o.operands[0]);
    DType d = rt.dtype();
    auto kind = static_cast<AtomicOp>(o.ints[0]);
    llvm::AtomicRMWInst::BinOp bin;
    switch (kind) {
      case AtomicOp::kAdd: bin = d.is_float() ? llvm::AtomicRMWInst::FAdd : llvm::AtomicRMWInst::Add; break;
      case AtomicOp::kMin: bin = d.is_signed() ? llvm::AtomicRMWInst::Min : llvm::AtomicRMWInst::UMin; break;
      case AtomicOp::kMax: bin = d.is_signed() ? llvm::AtomicRMWInst::Max : llvm::AtomicRMWInst::UMax; break;
      case AtomicOp::kAnd: bin = llvm::AtomicRMWInst::And; break;
      case AtomicOp::kOr: bin = llvm::AtomicRMWInst::Or; break;
      case AtomicOp::kXor: bin = llvm::AtomicRMWInst::Xor; break;
      default: bin = llvm::AtomicRMWInst::Xchg; break;
    }
    bool masked = o.operands.size() == 3;
    llvm::Type* t = reg_type(d);
    // f16 and bf16 values are i16 bits: their atomic add is a compare-and-swap
    // loop around the same rounded add as elementwise code (an atomicrmw fadd
    // of half/bfloat needs libcalls such as __truncsfbf2 on x86, which a JIT-ed
    // kernel cannot count on finding).
    auto rmw = [&](llvm::Value* p, llvm::Value* v) -> llvm::Value* {
      if (!(is_narrow_float(d) && kind == AtomicOp::kAdd)) {
        return b_.CreateAtomicRMW(bin, p, v, llvm::MaybeAlign(d.bytes()), llvm::AtomicOrdering::AcquireRelease);
      }
      llvm::BasicBlock* pre = b_.GetInsertBlock();
      llvm::LoadInst* first = b_.CreateAlignedLoad(t, p, llvm::MaybeAlign(2));
      first->setAtomic(llvm::AtomicOrdering::Monotonic);
      llvm::BasicBlock* retry = llvm::BasicBlock::Create(ctx_, "atomic.retry", fn_);
      llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx_, "atomic.done", fn_);
      b_.CreateBr(retry);
      b_.SetInsertPoint(retry);
      llvm::PHINode* old = b_.CreatePHI(t, 2);
      old->addIncoming(first, pre);
      auto* cx = b_.CreateAtomicCmpXchg(p, old, ops_.binary(OpCode::kAdd, d, old, v), llvm::MaybeAlign(2),
                                        llvm::AtomicOrdering::AcquireRelease, llvm::AtomicOrdering::Monotonic);
      old->addIncoming(b_.CreateExtractValue(cx, 0), retry);
      b_.CreateCondBr(b_.CreateExtractValue(cx, 1), done, retry);
      b_.SetInsertPoint(done);
      return old;
    };
    // A masked-off lane returns 0 and touches nothing.
    auto one = [&](llvm::Value* p, llvm::Value* v, llvm::Value* mask) -> llvm::Value* {
      if (mask == nullptr) return rmw(p, v);
      llvm::BasicBlock* pre = b_.GetInsertBlock();
      llvm::Value* old = nullptr;
      llvm::BasicBlock* in = nullptr;
      guarded(mask, [&] {
        old = rmw(p, v);
        in = b_.GetInsertBlock();
      });
      llvm::PHINode* phi = b_.CreatePHI(t, 2);
      phi->addIncoming(old, in);
      phi->addIncoming(llvm::Constant::getNullValue(t), pre);
      return phi;
    };
    if (!pt.is_tile()) {
      // One thread of the program does a scalar atomic; all see its result.
      set(o, target_.uniform(b_, [&] {
        return one(val(o.operands[0]), val(o.operands[1]), masked ? val(o.operands[2]) : nullptr);
      }));
      return absl::OkStatus();
    }
    llvm::Value* ptrs = val(o.operands[0]);
    llvm::Value* values = val(o.operands[1]);
    llvm::Value* masks = masked ? val(o.operands[2]) : nullptr;
    llvm::Value* out = new_buffer(rt);
    tile_loop(pt.numel(), [&](llvm::Value* i) {
      llvm::Value* r = one(load_elem(ptrs, pt, i), load_elem(values, rt, i),
                           masked ? load_elem(masks, ir_.type(o.operands[2]), i) : nullptr);
      store_elem(out, rt, i, r);
    });
    set(o, out);
    return absl::OkStatus();
  }

  // acc + a @ b, accumulating in f32 (f16, bf16, f32 inputs), f64 or i32.
  absl::Status dot(const Op& o, const Type& rt) {
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
      tile_loop(rt.numel(), [&](llvm::Value* i) { store_elem(acc, acc_tile, i, ops_.convert(load_elem(c, rt, i), out_d, acc_d)); });
    }
    llvm::Value* a = val(o.operands[0]);
    llvm::Value* bv = val(o.operands[1]);
    // Rows are spread over the program's threads; each owns its rows of acc.
    tile_loop(m, [&](llvm::Value* mi) {
      loop(k, [&](llvm::Value* ki) {
        llvm::Value* av = ops_.convert(load_elem(a, at, b_.CreateAdd(b_.CreateMul(mi, b_.getInt64(k)), ki)), in, acc_d);
        loop(n, [&](llvm::Value* ni) {
          llvm::Value* bval = ops_.convert(load_elem(bv, bt, b_.CreateAdd(b_.CreateMul(ki, b_.getInt64(n)), ni)), in, acc_d);
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
    tile_loop(rt.numel(), [&](llvm::Value* i) { store_elem(result, rt, i, ops_.convert(load_elem(acc, acc_tile, i), acc_d, out_d)); });
    set(o, result);
    return absl::OkStatus();
  }

  // Carried scalars are phis; carried tiles live in a buffer per carried
  // value, filled from the init before the loop and from the yield at the
  // end of each iteration.
  absl::Status for_op(const Op& o) {
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
    for (size_t i = 0; i < n; ++i) {
      const Type& t = ir_.type(o.results[i]);
      if (t.is_tile()) {
        bufs[i] = new_buffer(t);
        copy_tile(bufs[i], val(o.operands[3 + i]), t);
      }
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
    std::vector<llvm::PHINode*> phis(n, nullptr);
    for (size_t i = 0; i < n; ++i) {
      if (bufs[i] != nullptr) continue;
      phis[i] = b_.CreatePHI(elem_type(ir_.type(o.results[i])), 2);
      phis[i]->addIncoming(val(o.operands[3 + i]), pre);
    }
    llvm::Value* go = b_.CreateAnd(positive, b_.CreateICmpSLT(iv64, hi64));
    b_.CreateCondBr(go, loop_body, exit);
    b_.SetInsertPoint(loop_body);
    vals_[body.args[0]] = b_.CreateTrunc(iv64, it);
    for (size_t i = 0; i < n; ++i) vals_[body.args[1 + i]] = bufs[i] != nullptr ? bufs[i] : phis[i];
    TESSEL_RETURN_IF_ERROR(block(o.blocks[0]));
    carry_tiles(yield, bufs);
    iv64->addIncoming(b_.CreateAdd(iv64, step64), b_.GetInsertBlock());
    for (size_t i = 0; i < n; ++i) {
      if (phis[i] != nullptr) phis[i]->addIncoming(val(yield.operands[i]), b_.GetInsertBlock());
    }
    b_.CreateBr(head);
    b_.SetInsertPoint(exit);
    for (size_t i = 0; i < n; ++i) vals_[o.results[i]] = bufs[i] != nullptr ? bufs[i] : phis[i];
    return absl::OkStatus();
  }

  // Copies yielded tiles into the carried buffers; through temporaries when
  // a yielded tile is itself one of those buffers (a swap, a view).
  void carry_tiles(const Op& yield, const std::vector<llvm::Value*>& bufs) {
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

  // Results of an if: scalars are phis; tiles are copied into buffers made
  // before the branch (a branch's own buffers end with it).
  absl::Status if_op(const Op& o) {
    std::vector<llvm::Value*> bufs(o.results.size(), nullptr);
    for (size_t r = 0; r < o.results.size(); ++r) {
      if (ir_.type(o.results[r]).is_tile()) bufs[r] = new_buffer(ir_.type(o.results[r]));
    }
    llvm::BasicBlock* blocks[2] = {llvm::BasicBlock::Create(ctx_, "then", fn_),
                                   llvm::BasicBlock::Create(ctx_, "else", fn_)};
    llvm::BasicBlock* done = llvm::BasicBlock::Create(ctx_, "endif", fn_);
    b_.CreateCondBr(val(o.operands[0]), blocks[0], blocks[1]);
    std::vector<llvm::Value*> yielded[2];
    llvm::BasicBlock* ends[2];
    for (int i = 0; i < 2; ++i) {
      b_.SetInsertPoint(blocks[i]);
      TESSEL_RETURN_IF_ERROR(block(o.blocks[i]));
      const Op& y = ir_.ops[ir_.blocks[o.blocks[i]].ops.back()];
      for (size_t r = 0; r < y.operands.size(); ++r) {
        if (bufs[r] != nullptr) copy_tile(bufs[r], val(y.operands[r]), ir_.type(y.operands[r]));
        yielded[i].push_back(val(y.operands[r]));
      }
      ends[i] = b_.GetInsertBlock();
      b_.CreateBr(done);
    }
    b_.SetInsertPoint(done);
    for (size_t r = 0; r < o.results.size(); ++r) {
      if (bufs[r] != nullptr) {
        vals_[o.results[r]] = bufs[r];
        continue;
      }
      llvm::PHINode* phi = b_.CreatePHI(yielded[0][r]->getType(), 2);
      phi->addIncoming(yielded[0][r], ends[0]);
      phi->addIncoming(yielded[1][r], ends[1]);
      vals_[o.results[r]] = phi;
    }
    return absl::OkStatus();
  }

  const KernelIR& ir_;
  TargetInfo& target_;
  llvm::LLVMContext& ctx_;
  IRBuilder<> b_;
  ScalarOps ops_;
  llvm::Module* module_ = nullptr;
  llvm::Function* fn_ = nullptr;
  llvm::BasicBlock* entry_ = nullptr;
  llvm::Instruction* alloca_point_ = nullptr;
  std::vector<llvm::Value*> vals_;
  struct RegTile {
    std::shared_ptr<const Layout> layout;
    std::vector<llvm::Value*> slots;  // empty: the tile is a buffer
  };
  std::vector<RegTile> regs_;
  std::map<int64_t, std::shared_ptr<const Layout>> layouts_;  // default layouts by element count
  std::vector<std::optional<Affine>> affine_;     // per value: its affine form, if it has one
  int threads_ = 0;                // threads of a program holding register tiles; 0: none
  llvm::Value* thread_ = nullptr;  // this thread's index (i64)
  int block_ = 0;                  // the IR block being lowered
  llvm::Value* smem_base_ = nullptr;
  int64_t smem_top_ = 0;   // next free byte of shared memory in this block
  int64_t smem_peak_ = 0;  // the most any point of the kernel uses
  struct TmaBarrier {
    llvm::Value* address;  // the mbarrier in shared memory
    llvm::Value* phase;    // i32 slot holding the parity to wait for
  };
  std::map<const Op*, TmaBarrier> tma_barriers_;
};

}  // namespace

absl::StatusOr<LoweredKernel> lower(const KernelIR& ir, TargetInfo& target, llvm::LLVMContext& ctx) {
  return Lowering(ir, target, ctx).run();
}

}  // namespace tessel::codegen
