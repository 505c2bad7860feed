// Which blocked layout (codegen/layout.h) each register tile takes: how many
// consecutive elements a thread holds per step. A load or store whose
// pointers are contiguous and aligned over runs of R elements
// (AffineAnalysis::access_run) wants R per thread, so that each run is one
// vector access. Tiles that an op pairs slot by slot (elementwise operands
// and result; a load's pointers, mask, other and result; a store's operands;
// a view and its operand) share a layout, so they form a group, and each
// group takes the longest run any of its accesses wants; accesses that
// cannot use all of it split their runs or go scalar. A run is capped so
// that every thread has a whole one (at most numel / threads elements).
#pragma once

#include <vector>

#include "codegen/affine.h"
#include "codegen/api.h"
#include "dsl/ir.h"

namespace tessel::codegen {

// Elements per thread and step for every value (1 for values that are not
// tiles), for programs of `threads` threads.
TESSEL_CODEGEN_API std::vector<int> plan_per_thread(const KernelIR& ir, const AffineAnalysis& analysis, int threads);

}  // namespace tessel::codegen
