// The arguments of cuTensorMapEncodeTiled for a tensor map spec, as data:
// the driver numbers dimensions innermost first where tessel writes them
// outermost first, gives the driver one panel of a box wider than its
// swizzle, and has no signed 8- and 16-bit or 8-bit float types. Tested
// without a GPU; the CUDA device and the driver differential test
// (tests/gpu/tma_driver_test.cc) encode through it.
#pragma once

#include <array>

#include "absl/status/status.h"
#include "runtime/cuda/driver.h"
#include "runtime/tensor_map.h"

namespace tessel::cuda {

// Room for ranks past the driver's 5, so that a test can ask it about them.
inline constexpr int kTiledEncodingMaxRank = 8;

struct TiledEncoding {
  CUtensorMapDataType dtype = CU_TENSOR_MAP_DATA_TYPE_UINT8;
  cuuint32_t rank = 0;
  void* address = nullptr;
  std::array<cuuint64_t, kTiledEncodingMaxRank> dims{};
  std::array<cuuint64_t, kTiledEncodingMaxRank - 1> strides{};
  std::array<cuuint32_t, kTiledEncodingMaxRank> box{};
  std::array<cuuint32_t, kTiledEncodingMaxRank> element_strides{};
  CUtensorMapInterleave interleave = CU_TENSOR_MAP_INTERLEAVE_NONE;
  CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
  CUtensorMapL2promotion l2_promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
  CUtensorMapFloatOOBfill oob_fill = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;
};

// `spec` (its strides and element strides explicit, as normalize() leaves
// them; rank at most kTiledEncodingMaxRank; dtype not i1) in the driver's terms.
TiledEncoding tiled_encoding(const TensorMapSpec& spec);

// cuTensorMapEncodeTiled on `e`.
absl::Status encode_tiled(const Driver& driver, const TiledEncoding& e, CUtensorMap* map);

}  // namespace tessel::cuda
