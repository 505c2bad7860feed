// Layouts written out as tables of integers, without LLVM types in the
// interface: what tests compare with a brute-force enumeration of which
// thread holds which element.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "codegen/api.h"
#include "codegen/blocking.h"
#include "codegen/nvptx/mma_sync_fragment.h"

namespace tessel::codegen {

struct LayoutTable {
  int threads = 0;
  int64_t slots = 0;
  // Per thread * slots + slot: the element held, or -1 for none. `emitted`
  // comes from the IR that element() and valid() emit, folded for constant
  // threads; `at` from element_at().
  std::vector<int64_t> emitted, at;
  std::vector<int64_t> slot_of;    // slices: the slot each parent slot feeds; parts: the parent slot each reads
  bool own_kind = false;           // parts: the parent's own narrowed() layout (Layout::narrowed)
  std::optional<int> butterfly;    // butterfly_lanes(layout, warp_size)
  std::optional<int> holders;      // holder_bits(layout)
};

TESSEL_CODEGEN_API LayoutTable tabulate_blocked(int64_t numel, int threads, Blocking blocking, int warp_size);
// The slice along `axis` of a tile of `shape` in blocked_layout(numel(shape), threads, blocking).
TESSEL_CODEGEN_API LayoutTable tabulate_slice(const std::vector<int64_t>& shape, int axis, int threads,
                                              Blocking blocking, int warp_size);

// narrow_layout (the part narrow(tile, axis, start, size)) of a tile of
// `shape` in blocked_layout(numel(shape), threads, blocking).
TESSEL_CODEGEN_API LayoutTable tabulate_narrow(const std::vector<int64_t>& shape, int axis, int64_t start, int64_t size,
                                               int threads, Blocking blocking, int warp_size);
// The same of an m x n wgmma accumulator on `warpgroups` warpgroups in
// `col_groups` groups of columns (codegen/nvptx/wgmma.h).
TESSEL_CODEGEN_API LayoutTable tabulate_narrow_accumulator(int64_t m, int64_t n, int warpgroups, int col_groups,
                                                           int axis, int64_t start, int64_t size);

// The accumulator of an m x n product of mma.sync on `warps`
// (codegen/nvptx/mma_sync.h).
TESSEL_CODEGEN_API LayoutTable tabulate_mma_sync(int64_t m, int64_t n, nvptx::MmaWarps warps);
// The byte offset the IR of nvptx::ldmatrix_lane_offset computes for
// constant arguments, folded (-2 where it does not fold).
TESSEL_CODEGEN_API int64_t emitted_ldmatrix_lane_offset(const nvptx::StoredOperand& op, nvptx::LdmatrixLanes lanes,
                                                        int64_t mn, int64_t k, int64_t origin, int64_t lane);

// ConcatLayout of concat(a, b, axis) for a of `a_shape` and b of `b_size`
// along `axis`, each in blocked_layout(numel, threads, its blocking).
TESSEL_CODEGEN_API LayoutTable tabulate_concat(const std::vector<int64_t>& a_shape, int64_t b_size, int axis,
                                               int threads, Blocking a_blocking, Blocking b_blocking, int warp_size);

// register_moves from one layout to another, with both written out.
struct MovesTable {
  LayoutTable from, to;
  // Per slot of `to`, its sources: the slot of `from` each reads and the
  // lanes it reads it from.
  std::optional<std::vector<std::vector<std::pair<int64_t, int>>>> moves;
};
// From blocked_layout(numel, threads, from) to the same with `to`.
TESSEL_CODEGEN_API MovesTable moves_between_blocked(int64_t numel, int threads, Blocking from, Blocking to,
                                                    int warp_size);
// From the layout of concat(second half, first half, axis) of a tile of
// `shape` in blocked_layout(numel(shape), threads, blocking) (rotary
// embeddings' rotate_half, less its negation) to that blocked layout.
TESSEL_CODEGEN_API MovesTable moves_from_swapped_halves(const std::vector<int64_t>& shape, int axis, int threads,
                                                        Blocking blocking, int warp_size);

// scan_plan of blocked_layout(numel(shape), threads, blocking) along `axis`.
TESSEL_CODEGEN_API std::optional<ScanPlan> scan_plan_of_blocked(const std::vector<int64_t>& shape, int axis,
                                                                int threads, Blocking blocking);
// sort_plan of the same.
TESSEL_CODEGEN_API std::optional<SortPlan> sort_plan_of_blocked(const std::vector<int64_t>& shape, int axis,
                                                                int threads, Blocking blocking);

}  // namespace tessel::codegen
