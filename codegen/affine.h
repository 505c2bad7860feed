// Which integer and pointer tiles are affine in their indices:
//   value[i0, ..., ir] = base + sum_d i_d * strides[d]
// where base is a scalar: a sum of IR scalars times constants plus a
// constant, or (for pointer tiles) a scalar pointer plus such an offset in
// elements. Loads and stores through an affine pointer tile compute each
// address from the base instead of reading a tile of pointers.
//
// Beside contiguity the analysis tracks what powers of two divide things
// (Triton's divisibility and constancy): integer scalars, the alignment of
// scalar pointers (from the launch's Specialization), hence how long a run
// of consecutive elements of a pointer tile is contiguous and starts at an
// address aligned to the run, and over how long a run a mask such as
// `offs < n` is constant. Those runs are what vector loads and stores need.
// Offsets are taken as exact integers: like Triton, tessel assumes the
// index arithmetic of an address does not overflow.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "codegen/api.h"
#include "codegen/compile_options.h"
#include "dsl/ir.h"

namespace tessel::codegen {

struct Affine {
  int pointer = -1;               // the scalar pointer value, or -1 for an integer tile
  std::map<int, int64_t> terms;   // scalar value id -> coefficient
  int64_t constant = 0;
  std::vector<int64_t> strides;   // per dimension of the tile

  bool contiguous() const { return !strides.empty() && strides.back() == 1; }
};

// Divisors and runs are powers of two up to this (0 is divisible by all).
inline constexpr int64_t kMaxDivisor = int64_t{1} << 20;
// The widest vector access: 16 bytes (ld.global.v4.f32, v8 of 16-bit types).
inline constexpr int64_t kVectorBytes = 16;

// What the analysis knows of an integer or pointer tile along its last
// dimension where no affine form (with constant strides) exists, such as
// row offsets times a runtime stride (Triton's AxisInfo, for one axis):
// every `contiguous` consecutive elements starting at a multiple of it rise
// by one element; every `constant` ones starting at a multiple of it are
// equal; and the element at each multiple of `contiguous` is divisible by
// `divisor` (for pointers: aligned to `divisor` bytes). All powers of two.
struct Runs {
  int64_t contiguous = 1;
  int64_t constant = 1;
  int64_t divisor = 1;
  // What divides every element, not just those that begin a run.
  int64_t each_divisor() const { return contiguous == 1 ? divisor : 1; }
};

class TESSEL_CODEGEN_API AffineAnalysis {
 public:
  AffineAnalysis(const KernelIR& ir, Specialization facts);

  // The affine form of a tile value, if it has one.
  const std::optional<Affine>& affine(int v) const { return affine_[v]; }
  // The largest power of two known to divide the integer scalar `v`.
  int64_t divisibility(int v) const;
  // The bytes (a power of two) to which the scalar pointer `v` is known to
  // be aligned: its element's size unless the facts or offsets say more.
  int64_t alignment(int v) const;
  // For a pointer tile: the longest run R (a power of two) such that every R
  // consecutive elements in row-major order starting at a multiple of R are
  // consecutive in memory and start at an address aligned to R elements.
  int64_t aligned_run(int v) const;
  // For a bool tile: the longest run R such that every R consecutive
  // elements starting at a multiple of R are equal.
  int64_t constancy(int v) const;
  // For an integer or pointer tile: its runs along the last dimension.
  const Runs& runs(int v) const { return runs_[v]; }
  // For a load or store through a pointer tile: how many elements one
  // access may move (a power of two, at most kVectorBytes in all): the
  // aligned run of its pointers, over which its mask is constant.
  int64_t access_run(const Op& o) const;

 private:
  void visit(const Op& op);
  void visit_runs(const Op& op);
  std::optional<int64_t> constant(int v) const;
  std::optional<int64_t> splat_constant(int v) const;
  // Adds k * the integer scalar `s` to `a`, split into its terms and
  // constant where `s` is a sum or a multiple by a constant.
  void add_scalar(Affine& a, int s, int64_t k) const;
  int64_t divisibility_of(const Affine& a) const;
  int64_t compare_constancy(const Op& op) const;
  // compare_constancy where a side has no affine form: from the sides' runs.
  int64_t runs_constancy(const Op& op) const;

  const KernelIR& ir_;
  Specialization facts_;
  std::vector<std::optional<Affine>> affine_;
  std::vector<Runs> runs_;
  std::vector<int> owner_;  // per block: the op that owns it, or -1
  mutable std::vector<int64_t> divisibility_, alignment_, constancy_;  // memoized; 0: not yet known
};

// The parameters whose facts change some access_run of the kernel: the ones
// worth a Specialization bit. Launches mask their facts with this, so that a
// kernel does not recompile for facts it cannot use.
TESSEL_CODEGEN_API Specialization specializable(const KernelIR& ir);

}  // namespace tessel::codegen
