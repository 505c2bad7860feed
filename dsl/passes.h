// Small passes over built kernel IR.
#pragma once

#include "dsl/ir.h"

namespace tessel {

// Drops the values for and while loops carry and if_ results that the body
// leaves unchanged (the builder carries every live Var; most are never
// assigned).
void drop_unchanged_carried(KernelIR& ir);

// Rewrites the values a for loop of constant step carries that step by the
// same amount every iteration (a pointer tile offset by BK each time, as
// in Triton's `a_ptrs += BLOCK_K * stride_ak`, or an integer counter) into
// what they are in each iteration: start + i * amount, for the iteration's
// index i = (iv - lo) / step, pointer offsets widened to i64 as ptr_add
// widens them. Where nothing but the step then reads such a value, the
// loop stops carrying it. Loads through such pointers have addresses
// computed from the induction variable alone, which copy rings and loads
// issued ahead need (codegen/prefetch.h), and affine ones
// (codegen/affine.h), which vector accesses need.
void close_stepped_carried(KernelIR& ir);

}  // namespace tessel
