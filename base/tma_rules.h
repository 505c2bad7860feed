// The rules a TMA tensor map must meet, in one table that every part of tessel
// asks: the builder (a tensor-map parameter's dtype, box and swizzle), the
// runtime's validator (every field of a map before any encoder sees it) and
// codegen. cuTensorMapEncodeTiled answers only CUDA_ERROR_INVALID_VALUE, and a
// bad box has hung kernels instead of failing, so each check returns
// kInvalidArgument naming the rule, the dimension and the offending value.
//
// Dimensions are numbered OUTERMOST FIRST, like a row-major shape: in a 2-D
// box {rows, cols}, "box[1]" is the innermost dimension. Messages carry no
// prefix; the caller says where the map came from ("tensor map: ",
// "tensor_map 'a': ").
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/tensor_map_form.h"
#include "dsl/types.h"

namespace tessel {

enum class TensorMapInterleave : uint8_t { kNone, k16B, k32B };
enum class TensorMapOobFill : uint8_t { kZero, kNan };

namespace tma {

// Rank of the tensor and of its box; the host form's arrays are sized by it.
inline constexpr int kMaxRank = kTensorMapMaxRank;
inline constexpr int kMinRank = 1;
// Interleaved layouts need a rank of at least 3.
inline constexpr int kMinInterleavedRank = 3;

// Global dims: elements per dimension, in [1, kMaxGlobalDim].
inline constexpr int64_t kMaxGlobalDim = int64_t{1} << 32;

// Global byte strides (all but the innermost dimension's): a positive multiple
// of kStrideMultiple (kStrideMultiple32BInterleave with 32B interleave),
// strictly below kStrideLimit.
inline constexpr int64_t kStrideMultiple = 16;
inline constexpr int64_t kStrideMultiple32BInterleave = 32;
inline constexpr int64_t kStrideLimit = int64_t{1} << 40;

// Box dims: elements per dimension, in [1, kMaxBoxDim].
inline constexpr int64_t kMaxBoxDim = 256;
// Without interleave, the innermost box dimension spans a multiple of this
// many bytes.
inline constexpr int64_t kInnerBoxBytesMultiple = 16;

// Element strides (traversal steps), in [kMinElementStride, kMaxElementStride].
inline constexpr int64_t kMinElementStride = 1;
inline constexpr int64_t kMaxElementStride = 8;

// Global address alignment in bytes.
inline constexpr int64_t kAddressAlignment = 16;
inline constexpr int64_t kAddressAlignment32BInterleave = 32;

// Where the copy engine reads and writes: the 128-byte map, passed by value,
// sits at a multiple of 64 bytes, and a box's tile in shared memory starts
// at a multiple of 128 bytes.
inline constexpr int64_t kMapAlignment = 64;
inline constexpr int64_t kSharedTileAlignment = 128;
// A swizzled box's tile starts at a multiple of 1024 bytes, where the
// pattern (a function of shared-memory address bits) starts over, so that
// the pattern and the tile begin together (and wgmma descriptors of it need
// no base offset).
inline constexpr int64_t kSwizzledTileAlignment = 1024;

// Where the byte at `offset` of a plain row-major tile sits once the copy
// engine has swizzled it: 16-byte chunks trade places within each 128 bytes
// by the XOR of offset bits 4-6 with bits 7-9 (128B swizzle), 4-5 with 7-8
// (64B) or 4 with 7 (32B).
// The bits of the 128-byte row index that move a chunk: 7, 3, 1 or none.
constexpr int64_t swizzle_row_mask(Swizzle swizzle) {
  return swizzle == Swizzle::k128B ? 7 : swizzle == Swizzle::k64B ? 3 : swizzle == Swizzle::k32B ? 1 : 0;
}
constexpr int64_t swizzled_offset(int64_t offset, Swizzle swizzle) {
  return offset ^ (((offset >> 7) & swizzle_row_mask(swizzle)) << 4);
}

// A swizzled box whose innermost dimension spans more bytes than the
// swizzle's width is copied as panels: boxes one width wide, side by side
// along the innermost dimension, each landing in shared memory after the one
// before it (panel p of a box of R rows of panels at p * R * width bytes), so
// that every row of every panel spans the swizzle's width as the copy engine
// requires. The encoder gives the driver one panel's box; the builder and
// validate() require the innermost dimension to span whole panels.
// Elements per panel row of a box whose innermost dimension has `inner`
// elements of `elem_bytes`: `inner` itself when it needs no panels.
inline int64_t panel_elems(int64_t inner, int64_t elem_bytes, Swizzle swizzle) {
  const int64_t width = swizzle_bytes(swizzle);
  return width == 0 || inner * elem_bytes <= width ? inner : width / elem_bytes;
}
// The byte offset in shared memory of element `i` (row-major) of a box of
// `numel` elements with `inner` along its innermost dimension: its place in
// its panel, then swizzled.
inline int64_t box_tile_offset(int64_t i, int64_t numel, int64_t inner, int64_t elem_bytes, Swizzle swizzle) {
  const int64_t width = panel_elems(inner, elem_bytes, swizzle);
  const int64_t rows = numel / inner, row = i / inner, col = i % inner;
  return swizzled_offset(((col / width * rows + row) * width + col % width) * elem_bytes, swizzle);
}

// Devices before sm_90 have no TMA.
inline constexpr int kMinComputeCapability = 90;

// The most bytes the innermost box dimension may span under a swizzle mode
// is one row of its pattern: swizzle_bytes() (dsl/types.h).

// The byte stride multiple and address alignment `interleave` requires.
constexpr int64_t stride_multiple(TensorMapInterleave interleave) {
  return interleave == TensorMapInterleave::k32B ? kStrideMultiple32BInterleave : kStrideMultiple;
}
constexpr int64_t address_alignment(TensorMapInterleave interleave) {
  return interleave == TensorMapInterleave::k32B ? kAddressAlignment32BInterleave : kAddressAlignment;
}

// "no", "16B" or "32B", as in "32B interleave".
const char* interleave_name(TensorMapInterleave interleave);

// Each check below returns OK or kInvalidArgument with the rule it broke.

// The tensor's rank is in [1, 5].
absl::Status check_rank(int64_t rank);
// `dtype` is a known data type TMA moves (every scalar but i1).
absl::Status check_dtype(DType dtype);
// `swizzle` is a known mode.
absl::Status check_swizzle(Swizzle swizzle);
// `interleave` is a known mode, and a tensor of `rank` may use it.
absl::Status check_interleave(TensorMapInterleave interleave, int64_t rank);
// `fill` is a known mode, and NaN fill has a floating-point `dtype`.
absl::Status check_oob_fill(TensorMapOobFill fill, DType dtype);
// The global address is non-null and aligned for `interleave`.
absl::Status check_address(const void* address, TensorMapInterleave interleave);
// Each global dim is in [1, 2^32].
absl::Status check_dims(absl::Span<const int64_t> dims);

// The box of a map of `dtype` under `swizzle` and `interleave`: rank 1..5,
// each dim in [1, 256], the innermost spanning a multiple of 16 bytes, and
// under a swizzle at most its width, or without interleave whole panels of
// it (panel_elems). Checks `dtype`, `swizzle` and `interleave` first, so it
// answers for any input.
absl::Status check_box(DType dtype, absl::Span<const int64_t> box, Swizzle swizzle, TensorMapInterleave interleave);

// The most bytes a box may hold as the driver counts them: 228 KiB, an
// H100's or H200's shared memory per SM.
inline constexpr int64_t kMaxBoxBytes = 228 * 1024;
// The box (one panel's width innermost) holds at most kMaxBoxBytes, each
// dimension counted as box / element stride rounded down, as the driver
// counts it. `box` and `element_strides` (empty: all 1) passed their checks.
absl::Status check_box_bytes(DType dtype, absl::Span<const int64_t> box, absl::Span<const int64_t> element_strides,
                             Swizzle swizzle, TensorMapInterleave interleave);

// Element strides, one per dimension: each in [1, 8], and without interleave
// the innermost is 1 (the hardware ignores it there, so host emulation and
// device would disagree). Empty means all 1.
absl::Status check_element_strides(absl::Span<const int64_t> element_strides, TensorMapInterleave interleave);

// Global byte strides of every dimension but the innermost: not negative,
// multiples of 16 (32 with 32B interleave), below 2^40. Rows may overlap,
// as sliding windows' do, and a stride of 0 repeats a row (a broadcast).
// `origin` follows each stride's value in a message, e.g. " (dense
// row-major)" for strides the user never wrote.
absl::Status check_strides(absl::Span<const int64_t> strides, TensorMapInterleave interleave,
                           absl::string_view origin = "");

// A device of `compute_capability` (e.g. 90) has TMA.
absl::Status check_compute_capability(int compute_capability);

}  // namespace tma
}  // namespace tessel
