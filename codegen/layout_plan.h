// Which blocked layout (codegen/layout.h) each register tile takes: how many
// consecutive elements a thread holds per step. A load or store whose
// pointers are contiguous and aligned over runs of R elements
// (AffineAnalysis::access_run) wants R per thread, so that each run is one
// vector access. Tiles that an op pairs slot by slot (elementwise operands
// and result; a load's pointers, mask, other and result; a store's operands;
// a view and its operand; a scan's or a sort's operand and result) share a
// layout, so they form a group, and each group takes the longest run any of
// its accesses wants (a sort along the last dimension wants whole rows, so
// that most of its compare-exchanges stay within a thread); accesses that
// cannot use all of it split their runs or go scalar. A run is capped so
// that every thread has a whole one (at most numel / threads elements).
//
// A group whose tiles are reduced, scanned or sorted along their last
// dimension (the rows of a softmax or a norm) spreads each row over as few
// threads as keep every thread busy, at most a warp where there are rows
// enough: the reduction, scan or sort then works within warps, with
// shuffles, and a reduction's broadcast back reads the thread's own
// registers. Other groups spread the whole tile over all threads, which
// coalesces best.
#pragma once

#include <vector>

#include "codegen/affine.h"
#include "codegen/api.h"
#include "codegen/blocking.h"
#include "dsl/ir.h"

namespace tessel::codegen {

// The values that are one tile at different points of a for, while or if
// op, per tile result: the result, each block's argument (loops) and what
// it yields (not a while's test, which yields its condition), then where a
// loop starts it.
TESSEL_CODEGEN_API std::vector<std::vector<int>> carried_tiles(const KernelIR& ir, const Op& o);

// The blocking of every value's layout (one element per thread and step
// for values that are not tiles), for programs of `threads` threads. The
// loads `copied` (op indices) are copied into shared memory element by
// element where their pointers are not aligned: they want the runs their
// pointers are contiguous over (16 bytes at most) even so, which share an
// address and leave in one store.
TESSEL_CODEGEN_API std::vector<Blocking> plan_blocking(const KernelIR& ir, const AffineAnalysis& analysis, int threads,
                                                       int warp_size, const std::vector<int>& copied = {});

}  // namespace tessel::codegen
