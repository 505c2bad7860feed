// Which integer and pointer tiles are affine in their indices:
//   value[i0, ..., ir] = base + sum_d i_d * strides[d]
// where base is a scalar: a sum of IR scalars times constants plus a
// constant, or (for pointer tiles) a scalar pointer plus such an offset in
// elements. Loads and stores through an affine pointer tile compute each
// address from the base instead of reading a tile of pointers, so that
// contiguous accesses (stride 1 along the last axis) become vector accesses.
// Offsets are taken as exact integers: like Triton, tessel assumes the
// index arithmetic of an address does not overflow.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "dsl/ir.h"

namespace tessel::codegen {

struct Affine {
  int pointer = -1;               // the scalar pointer value, or -1 for an integer tile
  std::map<int, int64_t> terms;   // scalar value id -> coefficient
  int64_t constant = 0;
  std::vector<int64_t> strides;   // per dimension of the tile

  bool contiguous() const { return !strides.empty() && strides.back() == 1; }
};

// The affine form of every tile value that has one, indexed by value id.
std::vector<std::optional<Affine>> analyze_affine(const KernelIR& ir);

}  // namespace tessel::codegen
