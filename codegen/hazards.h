// Where a program's threads must meet so that its accesses through
// pointers happen in program order, as they do on the host (one thread a
// program). A tile's elements are spread over threads, so a load of what
// the program stored, or a store over what it loaded or stored, may touch
// elements another thread accessed: those threads must meet in between.
// Accesses are told apart by the kernel parameter their pointers derive
// from (pointer arithmetic, broadcasts, reshapes, selects between pointers
// of one parameter, loop-carried pointers that stay within one); two
// parameters are taken not to overlap. A pointer that may be one of
// several parameters' (a select between them) may be any parameter's.
// A loop's iterations are taken to touch different elements (a persistent
// loop's tiles), or the same ones from the same threads: accesses are
// ordered within an iteration, with what came before the loop, and with
// what comes after it, not with the iterations before. (Iterations that
// read what other threads wrote in an earlier one need an acq_rel atomic,
// or a kernel of their own, between them.)
//
// TMA loads and stores are outside this: the copy engine's accesses are
// ordered by publish, acq_rel atomics and the kernel's end (docs/tma.md).
#pragma once

#include <set>
#include <vector>

#include "codegen/api.h"
#include "dsl/ir.h"

namespace tessel::codegen {

// Per value of `ir`: the parameter (its value id) a pointer derives from,
// or kAnyParameter where it may be several parameters' (and for values that
// are not pointers).
inline constexpr int kAnyParameter = -1;
TESSEL_CODEGEN_API std::vector<int> pointer_parameters(const KernelIR& ir);

// The ops (indices into ir.ops) that need a barrier of the whole program
// before them, given pointer_parameters(ir). Scalar atomics meet the
// program's threads themselves.
TESSEL_CODEGEN_API std::set<int> hazard_barriers(const KernelIR& ir, const std::vector<int>& params);

}  // namespace tessel::codegen
