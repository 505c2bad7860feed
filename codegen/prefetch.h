// Loads issued an iteration ahead: software pipelining of pointer loads
// through registers (the stream pipelining of Triton's AMD backend).
//
// In a for loop, a load whose addresses (and mask and other) are computed
// from the induction variable, loop-carried values whose next values are
// plain arithmetic, and values from outside the loop is rewritten so that
// iteration i loads what iteration i + 1 reads, at the top of its body, and
// carries it to the next iteration; the first iteration's load goes before
// the loop. Both are masked by whether that iteration runs, so nothing past
// the loop's end is read. The load's latency then hides under a whole
// iteration's work instead of stalling its first use.
//
// A loop is left alone where moving its loads could change what they read
// or cost more than it gains:
// - it stores through a pointer of the load's parameter, or of a parameter
//   it cannot tell (two parameters are taken not to overlap, as
//   codegen/hazards.h does), or takes an atomic or a triggered view (which
//   order memory across programs);
// - it loads TMA boxes (its own pipeline issues those ahead), runs loops of
//   its own (only innermost loops move loads: an outer loop's body loads
//   before an inner loop that holds the registers, which hides the latency
//   already), is turned off (LoopOptions::stages = 1), or is, or runs
//   within, a warp-specialized loop;
// - a load's addresses depend on another load in the loop, or on control
//   flow, or do not change from one iteration to the next;
// - the loads it would carry hold more than kMaxPrefetchSlots elements a
//   thread, or, with the tiles the loop carries already (an accumulator),
//   more than kMaxLiveSlots: all of them are live across the whole body,
//   in registers. (A GEMM through pointers on 128 x 128 tiles and 4 warps
//   carries 128 accumulators a thread; its operands loaded ahead pushed it
//   to 255 registers and spills, 15 % slower on one H100.)
#pragma once

#include <cstdint>
#include <vector>

#include "codegen/api.h"
#include "dsl/ir.h"

namespace tessel::codegen {

inline constexpr int64_t kMaxPrefetchSlots = 64, kMaxLiveSlots = 128;

// A load that a target with asynchronous copies brings into a ring of
// shared-memory stages instead, iterations ahead (Lowering's copy rings,
// codegen/lower_copies.cc): in a loop whose loads could move as above, a
// load of a 2-D tile that only dots of the same iteration read (as their a
// or b, or through a transpose), with no mask or zeros where it is off (a
// masked-off copy fills zeros), and whose addresses and mask are computed
// from the induction variable and values from outside the loop alone, and
// from loads of memory the loop does not write (a gathered row's index:
// the pages of a paged KV cache through its block table), which the ring
// reads again for the iteration whose copies it issues, and which are not
// moved as above.
struct RingLoad {
  int load = -1;           // index into ir.ops
  int loop = -1;           // the for op around it
  // The body's ops its operands are computed by, in program order: those
  // that read the induction variable (or ops that do) and broadcasts, and
  // the others, which are the same in every iteration (a gathered row's
  // pointers, before they are broadcast along K).
  std::vector<int> slice, invariant;
};
TESSEL_CODEGEN_API std::vector<RingLoad> ring_loads(const KernelIR& ir);

// Rewrites `ir`'s loops as above for programs of `threads` threads, each
// tile spread over all of them, except loads of `rings` (which stay as they
// are); returns how many loads it moved.
TESSEL_CODEGEN_API int prefetch_loads(KernelIR& ir, int threads, const std::vector<RingLoad>& rings = {});

}  // namespace tessel::codegen
