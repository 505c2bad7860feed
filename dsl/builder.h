// KernelBuilder: the C++ front end. Builder calls append ops to a kernel;
// mistakes never abort, `build()` returns the first one with the file and
// line of the user's call.
#pragma once

#include <functional>
#include <memory>
#include <source_location>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "dsl/ir.h"
#include "dsl/value.h"

namespace tessel {

// A built, verified kernel: immutable and cheap to copy.
class Kernel {
 public:
  const KernelIR& ir() const { return *ir_; }
  const std::string& name() const { return ir_->name; }
  const std::vector<Param>& params() const { return ir_->params; }
  // The stable printed form (the JIT cache key and golden tests use it).
  const std::string& str() const { return text_; }
  // A stable 64-bit hash of str().
  uint64_t hash() const { return hash_; }

 private:
  friend class KernelBuilder;
  std::shared_ptr<const KernelIR> ir_;
  std::string text_;
  uint64_t hash_ = 0;
};

// The device-side handle of a triggered copy plan (see TriggeredPlan).
class TriggeredView {
 public:
  // Opens `batch` once every contributor published it. Whole program, non-divergent.
  void publish(const Operand& batch, std::source_location loc = std::source_location::current()) const;
  // The same, but where `defer` (an i1 scalar) holds, the batch's last
  // contributor leaves the system-scope fence that opens it to a later
  // publish (or wait) on this rank, which opens it with its own. A persistent
  // producer defers all but each program's last publish: its fences then fall
  // on programs running ahead instead of the one running latest, batch after
  // batch. A program that defers must publish again; a batch whose release
  // nothing carries never opens, and end_device_epoch says so. (wait
  // carries deferred releases too; arrived and reusable do not.)
  void publish(const Operand& batch, const Operand& defer,
               std::source_location loc = std::source_location::current()) const;
  // Whether `batch` of this epoch has arrived here (i1).
  Value arrived(const Operand& batch, std::source_location loc = std::source_location::current()) const;
  // Waits (bounded) until `batch` has arrived.
  void wait(const Operand& batch, std::source_location loc = std::source_location::current()) const;
  // Whether the buffer of `batch` may be written again (its copies are done).
  Value reusable(const Operand& batch, std::source_location loc = std::source_location::current()) const;
  const Value& value() const { return v_; }

 private:
  friend class KernelBuilder;
  explicit TriggeredView(Value v) : v_(v) {}
  Value v_;
};

// How a for_range loop is run.
struct LoopOptions {
  // Software pipelining of a loop whose body loads TMA boxes at coordinates
  // made from the induction variable (and values from outside the loop), and
  // no atomic or gate: its loads run `stages - 1` iterations ahead through a
  // ring of `stages` shared-memory buffers, on targets with asynchronous TMA
  // (NVIDIA), and its tensor-core dots overlap the next iteration's wait.
  // 0 picks the default: 3 (as Triton's num_stages), or 2, or none, the
  // most that fits in shared memory; 1 turns it off; at most 8. A count
  // given here that does not fit is an error naming the bytes.
  // An innermost loop without TMA loads, on GPUs, unless stages is 1:
  // pointer loads that only tensor-core dots read are copied into a ring of
  // `stages` shared-memory tiles, stages - 1 iterations ahead (NVIDIA's
  // cp.async; codegen/lower_copies.cc), and its other pointer loads are
  // issued an iteration ahead in registers (codegen/prefetch.h).
  int stages = 0;
  // Warp specialization of a persistent loop (for_each_tile's) whose body
  // runs a pipelined loop of tma_loads, on NVIDIA with num_warps = 12: one
  // warpgroup (the producer, with few registers) issues every load of that
  // pipeline, for every iteration, and two consumer warpgroups (with the
  // registers the producer gave up) take the loop's iterations in turn, each
  // running the body on its own as a program of 4 warps. While one consumer
  // runs its epilogue the other keeps the tensor cores busy (CUTLASS's
  // ping-pong GEMM). The iterations must be independent: the loop carries
  // nothing, sits in the kernel's top block, and only scalar arithmetic
  // comes before it there. Other targets run the loop as without it.
  bool warp_specialize = false;
  // With warp_specialize: one consumer of two warpgroups (8 warps) takes
  // every iteration instead, its tiles spread over both as in a program of
  // 8 warps, each ring stage loaded once for both (CUTLASS's cooperative
  // kernel; num_warps = 12 as well). Without a barrier per iteration the
  // two warpgroups run apart as far as the ring lets them.
  bool cooperative = false;
};
inline constexpr int kMaxLoopStages = 8;
// The most programs a cluster may take (NVIDIA's portable cluster size).
inline constexpr int kMaxCluster = 8;

class KernelBuilder {
 public:
  explicit KernelBuilder(std::string name);
  ~KernelBuilder();
  KernelBuilder(const KernelBuilder&) = delete;
  KernelBuilder& operator=(const KernelBuilder&) = delete;

  // A scalar or pointer argument.
  Value arg(const Type& type, std::string name, std::source_location loc = std::source_location::current());
  // A TMA descriptor passed by value (a __grid_constant__ parameter on NVIDIA).
  Value tensor_map(DType dtype, Shape box, std::string name, Swizzle swizzle = Swizzle::kNone,
                   std::source_location loc = std::source_location::current());
  TriggeredView triggered_view(std::string name, std::source_location loc = std::source_location::current());

  Value program_id(int axis = 0, std::source_location loc = std::source_location::current());
  Value num_programs(int axis = 0, std::source_location loc = std::source_location::current());

  // Groups the programs into clusters of `programs` (2 to 8, before any op
  // is built): programs c * programs ... c * programs + programs - 1 along
  // axis 0 form cluster c, which a GPU with clusters (NVIDIA's thread-block
  // clusters) runs at once on neighbouring SMs, so that tma_multicast can
  // load a box once for all of them. A launch's grid along axis 0 must be a
  // multiple of it. for_each_tile hands each tile to a whole cluster.
  void cluster(int programs, std::source_location loc = std::source_location::current());
  // This program's place in its cluster: program_id(0) % programs.
  Value cluster_rank(std::source_location loc = std::source_location::current());

  // Tiles made from nothing: [lo, hi) as i32, and constant tiles.
  Value arange(int64_t lo, int64_t hi, std::source_location loc = std::source_location::current());
  Value full(const Shape& shape, const Operand& value, DType dtype,
             std::source_location loc = std::source_location::current());
  Value zeros(const Shape& shape, DType dtype, std::source_location loc = std::source_location::current());
  // A scalar constant of a given dtype.
  Value constant(const Operand& value, DType dtype, std::source_location loc = std::source_location::current());

  // A mutable variable; see Var.
  Var var(const Operand& init, std::source_location loc = std::source_location::current());

  // for (i = lo; i < hi; i += step) body(i). Vars assigned in the body are
  // carried from one iteration to the next.
  void for_range(const Operand& lo, const Operand& hi, const Operand& step, const std::function<void(Value)>& body,
                 const LoopOptions& options = {}, std::source_location loc = std::source_location::current());
  // The same with explicit loop-carried values: body(i, carried) returns the
  // next values; the call returns the final ones.
  std::vector<Value> for_range(const Operand& lo, const Operand& hi, const Operand& step,
                               const std::vector<Value>& inits,
                               const std::function<std::vector<Value>(Value, std::span<const Value>)>& body,
                               const LoopOptions& options = {},
                               std::source_location loc = std::source_location::current());
  // The persistent loop: for (t = program_id(0); t < num_tiles; t += num_programs(0)).
  // In a kernel of clusters, every program of a cluster runs the same
  // tiles: t goes from program_id(0) / cluster by num_programs(0) / cluster
  // (cluster_rank() tells the programs apart).
  void for_each_tile(const Operand& num_tiles, const std::function<void(Value)>& body,
                     const LoopOptions& options = {}, std::source_location loc = std::source_location::current());
  void if_(const Operand& cond, const std::function<void()>& then_body, const std::function<void()>& else_body = {},
           std::source_location loc = std::source_location::current());
  // while (cond()) body(): cond() returns a scalar i1 from the Vars as they
  // stand before each iteration (it may compute, but not assign a Var), and
  // Vars assigned in the body are carried to the next test. Scalars are the
  // program's, so every thread runs as many iterations. A loop that waits
  // on memory another program writes must read it atomically (an
  // atomic_rmw that adds 0, say): a plain load may be read once.
  void while_(const std::function<Value()>& cond, const std::function<void()>& body,
              std::source_location loc = std::source_location::current());

  // Verifies the kernel and returns it, or the first error.
  absl::StatusOr<Kernel> build();

  detail::BuilderState* state() const { return state_.get(); }

 private:
  std::unique_ptr<detail::BuilderState> state_;
};

}  // namespace tessel
