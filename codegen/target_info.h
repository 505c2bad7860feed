// The seam between targets: everything codegen emits differently for the
// host, NVIDIA or AMD goes through these hooks; the rest is written once.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "codegen/layout.h"
#include "dsl/ir.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"

namespace tessel::codegen {

// A row-major matrix tile in memory, as dot reads and writes it: in shared
// memory where tiles_in_shared(), else in the program's own memory.
struct MatrixTile {
  llvm::Value* data = nullptr;  // the first element
  DType dtype;                  // f16 and bf16 are held as their 16 bits
  int64_t rows = 0, cols = 0;
  int64_t row_stride = 0;  // elements from one row to the next: cols when dense
  bool tf32 = false;       // f32 elements read rounded to tf32 (Precision::kTf32)
};

// A matrix multiply-accumulate a target may run on its matrix instructions
// (tensor cores): acc [m, n] += a [m, k] @ b [k, n].
struct MmaShape {
  DType a, b;  // the operands' dtypes: one, or two fp8 kinds
  DType acc;   // the accumulator's
  int64_t m = 0, n = 0, k = 0;
  bool tf32 = false;  // f32 operands multiplied as tf32 (Precision::kTf32)
};

// An operand of such a product where a TMA copy left it in shared memory:
// the tile as stored, `rows` x `cols` row-major, its rows `swizzle`d the way
// the copy engine swizzles them. K-major: the rows run along m (for a) or n
// (for b) and the columns along k (a stored [m, k]; b stored [n, k], as a
// GEMM given B as N x K reads it); otherwise the rows run along k.
// Or, for a alone, `registers`: a held in the threads' registers in the
// layout mma_register_a_layout() gives, `regs` this thread's slots.
struct SharedMatrix {
  llvm::Value* data = nullptr;  // the tile's first byte, in shared memory
  int64_t rows = 0, cols = 0;
  bool k_major = true;
  Swizzle swizzle = Swizzle::kNone;
  bool registers = false;
  std::vector<llvm::Value*> regs;
};

class TargetInfo {
 public:
  virtual ~TargetInfo() = default;

  virtual std::string name() const = 0;
  virtual llvm::TargetMachine& machine() = 0;
  // The LLVM address space of global (device) memory pointers.
  virtual unsigned global_address_space() const { return 0; }
  // The address space of memory known to be global, whatever pointers
  // arrive as: the tensors a tensor map addresses (for copies of its boxes
  // by the program's threads, where tensor maps are read in software) and
  // the kernel's own device globals (the debug buffer).
  virtual unsigned device_memory_address_space() const { return global_address_space(); }

  // Declares the kernel function with this target's calling convention.
  virtual llvm::Function* declare_kernel(llvm::Module& module, const KernelIR& ir) = 0;
  // At the kernel's entry: the value of each parameter. Scalars and pointers
  // are values; tensor maps and triggered views are pointers to their bytes.
  virtual std::vector<llvm::Value*> params(llvm::IRBuilder<>& b, const KernelIR& ir) = 0;

  virtual llvm::Value* program_id(llvm::IRBuilder<>& b, int axis) = 0;
  virtual llvm::Value* num_programs(llvm::IRBuilder<>& b, int axis) = 0;
  // The start of this program's shared memory, and how many bytes before it
  // the program's allocation may lose to aligning it.
  virtual llvm::Value* shared_base(llvm::IRBuilder<>& b) = 0;
  virtual int64_t shared_base_slack() const { return 0; }

  // Whether the code checks its accesses (the host's checked mode), and
  // then (asked only where it does) whether `bytes` (i64; 0 asks nothing)
  // at `address` lie within parameter `param`'s memory (-1: whichever
  // argument holds them), for the access of op `op`, as an i1.
  virtual bool checks_accesses() const { return false; }
  virtual llvm::Value* access_ok(llvm::IRBuilder<>&, int /*param*/, llvm::Value* /*address*/, llvm::Value* /*bytes*/,
                                 int /*op*/) {
    TESSEL_CHECK(false, "access_ok on a target that does not check accesses");
    return nullptr;
  }
  // The fast form (MathForm::kFast) of math function `op` of an f32 value:
  // the target's hardware approximation, or nullptr where it has none and
  // the accurate expansion (codegen/math.h) serves.
  virtual llvm::Value* fast_math(llvm::IRBuilder<>&, OpCode, llvm::Value*) { return nullptr; }
  // The fast form of x / y for f32 (at most 2 ulp from the quotient), or
  // nullptr where the exact division serves.
  virtual llvm::Value* fast_divide(llvm::IRBuilder<>&, llvm::Value* /*x*/, llvm::Value* /*y*/) { return nullptr; }
  // An f32 as the bits (i8) of `d` (f8e4m3 or f8e5m2), rounded to nearest
  // even and saturated to the largest finite value, in the target's own
  // instruction; nullptr where ScalarOps' integer sequence serves. The
  // results are ScalarOps' but for the sign of a NaN.
  virtual llvm::Value* narrow_float8(llvm::IRBuilder<>&, llvm::Value* /*x*/, DType /*d*/) { return nullptr; }

  // A load of `type` (a scalar or vector of 1 to 16 bytes) from global
  // memory at `ptr` where the i1 `mask` holds, else `other`, without a
  // branch (a predicated ld.global on NVIDIA); nullptr where the target has
  // no such form and the lowering branches around a plain load.
  virtual llvm::Value* masked_load(llvm::IRBuilder<>&, llvm::Type* /*type*/, llvm::Value* /*ptr*/,
                                   llvm::Value* /*mask*/, llvm::Value* /*other*/) {
    return nullptr;
  }
  // The same for a store of `v`; false where the lowering branches instead.
  virtual bool masked_store(llvm::IRBuilder<>&, llvm::Value* /*v*/, llvm::Value* /*ptr*/, llvm::Value* /*mask*/) {
    return false;
  }

  // Programs with several threads may hold tiles in registers, spread over
  // their threads; 0 means tiles are buffers only.
  virtual int register_tile_threads() const { return 0; }
  // This thread's index in the program (i64); called only when the above is nonzero.
  virtual llvm::Value* thread_index(llvm::IRBuilder<>& b) { return b.getInt64(0); }

  // Tiles: whether their buffers live in shared memory (one copy for the
  // program's threads) rather than in each thread's stack.
  virtual bool tiles_in_shared() const = 0;
  // The program's loop over n tile elements: for each i in [0, n) body(i)
  // runs in some thread, and the writes are visible to every thread after.
  virtual void tile_loop(llvm::IRBuilder<>& b, int64_t n, const std::function<void(llvm::Value*)>& body) = 0;
  // Threads of a program that read each other's registers directly (a
  // warp): 1 where they cannot.
  virtual int warp_size() const { return 1; }
  // `v` (an integer of 8 to 64 bits, f32 or f64) as held by the thread
  // whose index differs from this one's in the bits of `lanes` (below
  // warp_size()); every thread of the warp takes part.
  virtual llvm::Value* shuffle_xor(llvm::IRBuilder<>&, llvm::Value* v, int lanes) {
    TESSEL_CHECK(lanes == 0, "shuffle across threads on a target without warps");
    return v;
  }
  // Combines every thread's `partial` (an i32, i64, f32 or f64) with
  // `combine` in a fixed order; every thread gets the result.
  virtual llvm::Value* combine_threads(llvm::IRBuilder<>& b, llvm::Value* partial,
                                       const std::function<llvm::Value*(llvm::Value*, llvm::Value*)>& combine) = 0;
  // A value one thread computes (a scalar atomic) and every thread sees.
  virtual llvm::Value* uniform(llvm::IRBuilder<>& b, const std::function<llvm::Value*()>& compute) = 0;

  // Matrix multiply-accumulate, dot's work: result = acc + lhs @ rhs, with
  // lhs [m, k], rhs [k, n], and acc and result [m, n] in the accumulation
  // type (f32 for f16, bf16 and f32 operands; f64 for f64; i32 for i8), to
  // which operand elements are converted before they are multiplied and
  // added. `result` may be `acc` itself. Every thread of the program calls
  // it, and `result` is complete and visible to every thread after. The
  // default, a loop over rows spread with tile_loop that adds products in
  // order of k, runs on any target; targets with matrix instructions
  // (wgmma, MFMA) override it (lower_dot.cc).
  virtual void dot(llvm::IRBuilder<>& b, const MatrixTile& lhs, const MatrixTile& rhs, const MatrixTile& acc,
                   const MatrixTile& result);

  // Matrix instructions. The register layout in which the target keeps the
  // accumulator of `shape` when it multiplies operands laid out like `a` and
  // `b` (their data unset) with its matrix instructions; nullptr where it
  // has none for them, and dot() runs instead.
  virtual std::shared_ptr<const Layout> mma_layout(const MmaShape& /*shape*/, const SharedMatrix& /*a*/,
                                                   const SharedMatrix& /*b*/) {
    return nullptr;
  }
  // The layout a [m, k] must be in for a product with a in registers and b
  // as `b` in shared memory, where the target has such a form; else nullptr.
  virtual std::shared_ptr<const Layout> mma_register_a_layout(const MmaShape& /*shape*/, const SharedMatrix& /*b*/) {
    return nullptr;
  }
  // acc + a @ b on the matrix instructions, for a shape and operands
  // mma_layout() gave a layout for: `acc` and the result are this thread's
  // slots of that layout. Every thread of the program calls it. With
  // `in_flight` 1 the product may still be running when it returns (a
  // software pipeline's): the result may only be passed to the next mma and
  // to mma_drain, and the operands of the mma before it are free again.
  virtual std::vector<llvm::Value*> mma(llvm::IRBuilder<>& /*b*/, const MmaShape& /*shape*/,
                                        const SharedMatrix& /*a*/, const SharedMatrix& /*b*/,
                                        std::vector<llvm::Value*> acc, int /*in_flight*/) {
    TESSEL_CHECK(false, "mma() on a target that offered no mma_layout()");
    return acc;
  }
  // The accumulator of an mma left in flight, once every product is done.
  virtual std::vector<llvm::Value*> mma_drain(llvm::IRBuilder<>& /*b*/, std::vector<llvm::Value*> acc) { return acc; }
  // After the program's threads wrote an operand tile to shared memory and
  // before an mma reads it: what the writes and the matrix instructions'
  // reads need between them (at least a barrier of the program). Every
  // thread of the program calls it.
  virtual void mma_operands_written(llvm::IRBuilder<>& b) { program_barrier(b); }
  // After an mma that read operand tiles the program wrote (and waited for
  // its product), before they may be written again: what makes every
  // thread's product done reading them (a barrier where the program's
  // threads issue more than one such product). Every thread calls it.
  virtual void mma_operands_read(llvm::IRBuilder<>& b) { program_barrier(b); }
  // Writes `slots`, this thread's part of a tile of `cols` columns of 16-bit
  // elements held in `layout`, to shared memory with the target's matrix
  // stores, element i at address(i) (i64; the 8 elements of every aligned
  // run of 8 in a row contiguous), only the slots `keep` keeps (all without
  // it): true, or false and nothing emitted where it has none for that
  // layout. Every thread of the program calls it.
  virtual bool store_matrix(llvm::IRBuilder<>& /*b*/, const Layout& /*layout*/,
                            const std::vector<llvm::Value*>& /*slots*/, int64_t /*cols*/,
                            const std::function<llvm::Value*(llvm::Value*)>& /*address*/,
                            const SlotFilter& /*keep*/) {
    return false;
  }
  // Asynchronous copies from global to shared memory, issued by every
  // thread (the rings of loads that feed matrix instructions,
  // lower_copies.cc): whether the target has them; one copy of `bytes` (4,
  // 8 or 16, both addresses aligned to it) from `src` to `dst` that writes
  // zeros instead, reading nothing, where `ok` (i1) is false; the end of
  // this thread's group of the copies issued since the last; and a wait
  // until at most `pending` of its groups are in flight. What they wrote
  // is there for an mma once every thread waited and mma_operands_written
  // ran.
  virtual bool async_copies() const { return false; }
  virtual void async_copy(llvm::IRBuilder<>& /*b*/, llvm::Value* /*dst*/, llvm::Value* /*src*/, int64_t /*bytes*/,
                          llvm::Value* /*ok*/) {
    TESSEL_CHECK(false, "async_copy() on a target without asynchronous copies");
  }
  virtual void async_commit(llvm::IRBuilder<>& /*b*/) {
    TESSEL_CHECK(false, "async_commit() on a target without asynchronous copies");
  }
  virtual void async_wait(llvm::IRBuilder<>& /*b*/, int /*pending*/) {
    TESSEL_CHECK(false, "async_wait() on a target without asynchronous copies");
  }
  // Whether tiles a TMA copy leaves in shared memory hold their rows
  // swizzled as the tensor map says (the hardware's TMA), or always plain
  // (the software copy and the host's); codegen reads and writes swizzled
  // tiles through the same pattern (lower_tma.cc).
  virtual bool swizzles_shared_tiles() const { return false; }
  // Whether LLVM lowers fptrunc from f32 to bfloat to one instruction that
  // rounds to nearest even; else bf16 rounding is integer arithmetic.
  virtual bool rounds_to_bf16() const { return false; }

  // TMA. `map_type` is the tensor-map parameter's type (dtype, box, rank);
  // `map` points to the map's 128 bytes.
  // Sets up `count` TMA mbarriers of 8 bytes at `barriers` (shared memory),
  // each completing a phase after `arrivals` arrivals (and the bytes
  // expected of it); the default, whose copies complete before they return,
  // needs none.
  virtual void init_tma_barriers(llvm::IRBuilder<>&, llvm::Value* /*barriers*/, int /*count*/, int /*arrivals*/) {}
  // Copies the box at `coords` (i32, outermost first) of the tensor map into
  // shared memory at `smem` (`bytes` long) and waits for it, on `barrier`
  // with the parity kept in the i32 slot `phase`.
  // The default, for targets without a tensor memory accelerator, is a copy
  // by the program's threads that reads tessel's host form of the map
  // (base/tensor_map_form.h) and means what the runtime's host copy engine
  // does: a dense row-major tile of ceil(box[i] / element_strides[i])
  // elements per dimension, out-of-bounds elements zero (or the dtype's
  // quiet NaN with NaN fill); it needs no mbarrier (lower_tma.cc).
  // With `parts` > 1 (tma_multicast's tile, here loaded whole by this
  // program), the box is copied `parts` times, at coords[0], coords[0] +
  // box[0], ..., one after another along dim 0 of the tile.
  virtual void tma_load(llvm::IRBuilder<>& b, const Type& map_type, llvm::Value* map,
                        const std::vector<llvm::Value*>& coords, llvm::Value* smem, int64_t bytes, llvm::Value* barrier,
                        llvm::Value* phase, int parts);
  // Asynchronous TMA, for software pipelines: copies issued iterations
  // ahead into a ring of stages, each completing on an mbarrier of its own.
  virtual bool tma_async() const { return false; }
  struct TmaCopy {
    const Type* map_type;
    llvm::Value* map;
    std::vector<llvm::Value*> coords;
    llvm::Value* smem;
    // A tile of `parts` boxes along dim 0 (as tma_load's `parts`); with
    // `multicast`, this program copies only the box of its rank in its
    // cluster, into the tile of every program of the cluster, which each
    // expect the whole tile's bytes.
    int parts = 1;
    bool multicast = false;
  };
  // Issues `copies` (one thread does), which complete on `barrier` with
  // `bytes` in all.
  virtual void tma_issue(llvm::IRBuilder<>& /*b*/, llvm::Value* /*barrier*/, int64_t /*bytes*/,
                         const std::vector<TmaCopy>& /*copies*/) {
    TESSEL_CHECK(false, "tma_issue() on a target without asynchronous TMA");
  }
  // Waits for the completion of `barrier`'s phase of parity `parity` (i32).
  virtual void tma_wait(llvm::IRBuilder<>& /*b*/, llvm::Value* /*barrier*/, llvm::Value* /*parity*/) {
    TESSEL_CHECK(false, "tma_wait() on a target without asynchronous TMA");
  }
  // Writes the tile at `smem` to the box at `coords`, once every thread of
  // the program has written its part of it; the default drops
  // out-of-bounds elements, like the host copy engine. With `add`
  // (tma_reduce), adds each element into the box's atomically instead.
  virtual void tma_store(llvm::IRBuilder<>& b, const Type& map_type, llvm::Value* map,
                         const std::vector<llvm::Value*>& coords, llvm::Value* smem, bool add);
  // The same, left running: the tile at `smem` is read until the next
  // tma_store_wait, and the kernel's epilogue waits for the writes. Targets
  // without asynchronous stores copy at once.
  virtual void tma_store_async(llvm::IRBuilder<>& b, const Type& map_type, llvm::Value* map,
                               const std::vector<llvm::Value*>& coords, llvm::Value* smem, bool add) {
    tma_store(b, map_type, map, coords, smem, add);
  }
  // Arrives on mbarrier `barrier` (each thread that runs it counts once).
  virtual void barrier_arrive(llvm::IRBuilder<>& /*b*/, llvm::Value* /*barrier*/) {
    TESSEL_CHECK(false, "barrier_arrive() on a target without asynchronous TMA");
  }
  // Clusters (KernelBuilder::cluster), on targets with asynchronous TMA:
  // arrives on the mbarrier at `barrier`'s place in the shared memory of
  // every program of the cluster, this program's included.
  virtual void cluster_arrive(llvm::IRBuilder<>& /*b*/, llvm::Value* /*barrier*/) {
    TESSEL_CHECK(false, "cluster_arrive() on a target without asynchronous TMA");
  }
  // Runs `body` in one thread of each warp, once the warp's threads are all
  // there; the default, in one thread of the program.
  virtual void per_warp(llvm::IRBuilder<>& b, const std::function<void()>& body) { single_thread(b, body); }
  // A barrier of every thread of every program of the cluster, which also
  // orders their shared-memory accesses (mbarrier setups included) across
  // the cluster; without clusters, the program's barrier.
  virtual void cluster_barrier(llvm::IRBuilder<>& b) { program_barrier(b); }
  // Waits until the tiles of every tma_store_async but the `pending` last
  // issued may be written again.
  virtual void tma_store_wait(llvm::IRBuilder<>& /*b*/, int /*pending*/) {}
  // In the thread that single_thread runs: waits until the writes of every
  // tma_store it issued are done and visible to it (before a release that
  // must carry them).
  virtual void tma_store_flush(llvm::IRBuilder<>& /*b*/) {}

  // The scope of the DSL's atomics ("at device scope"): where the target
  // names one, the device's; the default is the whole system.
  virtual llvm::SyncScope::ID device_scope(llvm::LLVMContext&) const { return llvm::SyncScope::System; }
  // A fence at device scope in the thread that runs it, around the DSL's
  // atomics (relaxed themselves): with `release`, the memory accesses
  // before it, and those of other threads it has met at a barrier, happen
  // before the atomics after it; otherwise (acquire) the accesses after it,
  // TMA loads included, happen after the atomics before it.
  virtual void device_fence(llvm::IRBuilder<>& b, bool release) = 0;

  // Memory ordering for triggered views: a barrier of the whole program
  // after its stores, an acq_rel fetch-add and exchange at device scope
  // (every program that counts on a gate runs on the gate's device) with a
  // relaxed load beside them, a release store and an acquire load of 64-bit
  // words at system scope.
  virtual void program_barrier(llvm::IRBuilder<>& b) = 0;
  virtual llvm::Value* atomic_add_acq_rel_gpu(llvm::IRBuilder<>& b, llvm::Value* ptr, llvm::Value* v) = 0;
  virtual llvm::Value* atomic_exch_acq_rel_gpu(llvm::IRBuilder<>& b, llvm::Value* ptr, llvm::Value* v) = 0;
  virtual llvm::Value* load_relaxed_gpu(llvm::IRBuilder<>& b, llvm::Value* ptr) = 0;
  virtual void store_release_sys(llvm::IRBuilder<>& b, llvm::Value* ptr, llvm::Value* v) = 0;
  virtual llvm::Value* load_acquire_sys(llvm::IRBuilder<>& b, llvm::Value* ptr) = 0;
  // Runs `body` in one thread of the program (the host has only one).
  virtual void single_thread(llvm::IRBuilder<>& b, const std::function<void()>& body) = 0;

  // Warp specialization (LoopOptions::warp_specialize): the program's
  // threads split into `consumers` groups that each run a loop's body as a
  // program of their own, and a producer group after them that issues the
  // loads of its pipeline. A consumer is `units` (1 or 2) of the target's
  // unit of matrix instructions (a warpgroup on NVIDIA). Returns each
  // consumer's thread count, which register tiles are spread over from
  // then on, or 0 where the target cannot split a program of its size (the
  // default: it never can).
  virtual int split_program(int /*consumers*/, int /*units*/) { return 0; }
  // From here until leave_group, this thread's code is group `group`'s (i64:
  // a consumer's index, or `consumers` for the producer): thread_index,
  // tile loops, barriers and single_thread are the group's, and the group
  // takes its share of registers.
  virtual void enter_group(llvm::IRBuilder<>& /*b*/, llvm::Value* /*group*/, bool /*producer*/) {}
  virtual void leave_group() {}
  // The group of this thread (i64) when the program is split into groups
  // of `threads`: the same in a whole warp, and visibly so to the target's
  // assembler (on NVIDIA, a branch on it is not divergent for ptxas, which
  // would otherwise serialize the matrix instructions under it).
  virtual llvm::Value* group_of_thread(llvm::IRBuilder<>& b, llvm::Value* thread, int threads) {
    return b.CreateUDiv(thread, b.getInt64(threads));
  }

  // Emitted before the kernel returns (asynchronous copies still in flight).
  virtual void epilogue(llvm::IRBuilder<>& b) = 0;
};

// Calls `copy` with the coordinates and place of each of the `parts` boxes
// of a dense row-major tile of `bytes` at `smem` (TargetInfo::tma_load's
// `parts`, as software copies lay them out).
void for_each_part(llvm::IRBuilder<>& b, const Type& map_type, const std::vector<llvm::Value*>& coords,
                   llvm::Value* smem, int64_t bytes, int parts,
                   const std::function<void(const std::vector<llvm::Value*>&, llvm::Value*)>& copy);

}  // namespace tessel::codegen
