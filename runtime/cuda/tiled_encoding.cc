#include "runtime/cuda/tiled_encoding.h"

#include "base/status.h"
#include "base/tma_rules.h"

namespace tessel::cuda {
namespace {

CUtensorMapDataType tma_data_type(ScalarKind kind) {
  switch (kind) {
    // TMA has no signed 8- and 16-bit types; a copy moves bits and fills
    // out-of-bounds elements with zero, so the unsigned ones are exact.
    case ScalarKind::kI8:
    case ScalarKind::kU8:
      return CU_TENSOR_MAP_DATA_TYPE_UINT8;
    case ScalarKind::kI16:
    case ScalarKind::kU16:
      return CU_TENSOR_MAP_DATA_TYPE_UINT16;
    case ScalarKind::kI32:
      return CU_TENSOR_MAP_DATA_TYPE_INT32;
    case ScalarKind::kU32:
      return CU_TENSOR_MAP_DATA_TYPE_UINT32;
    case ScalarKind::kI64:
      return CU_TENSOR_MAP_DATA_TYPE_INT64;
    case ScalarKind::kU64:
      return CU_TENSOR_MAP_DATA_TYPE_UINT64;
    case ScalarKind::kF16:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case ScalarKind::kBF16:
      return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case ScalarKind::kF32:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    case ScalarKind::kF64:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT64;
    case ScalarKind::kF8E4M3:
    case ScalarKind::kF8E5M2:
      return CU_TENSOR_MAP_DATA_TYPE_UINT8;  // the TMA moves bytes; it has no 8-bit float type
    case ScalarKind::kI1:
      break;  // validate() rejects it
  }
  TESSEL_CHECK(false, "tensor map dtype passed validate() but has no TMA type");
  return CU_TENSOR_MAP_DATA_TYPE_UINT8;
}

CUtensorMapSwizzle tma_swizzle(Swizzle s) {
  switch (s) {
    case Swizzle::kNone:
      return CU_TENSOR_MAP_SWIZZLE_NONE;
    case Swizzle::k32B:
      return CU_TENSOR_MAP_SWIZZLE_32B;
    case Swizzle::k64B:
      return CU_TENSOR_MAP_SWIZZLE_64B;
    case Swizzle::k128B:
      return CU_TENSOR_MAP_SWIZZLE_128B;
  }
  return CU_TENSOR_MAP_SWIZZLE_NONE;
}

CUtensorMapInterleave tma_interleave(TensorMapInterleave i) {
  switch (i) {
    case TensorMapInterleave::kNone:
      return CU_TENSOR_MAP_INTERLEAVE_NONE;
    case TensorMapInterleave::k16B:
      return CU_TENSOR_MAP_INTERLEAVE_16B;
    case TensorMapInterleave::k32B:
      return CU_TENSOR_MAP_INTERLEAVE_32B;
  }
  return CU_TENSOR_MAP_INTERLEAVE_NONE;
}

}  // namespace

TiledEncoding tiled_encoding(const TensorMapSpec& s) {
  TiledEncoding e;
  const size_t rank = s.dims.size();
  TESSEL_CHECK(rank <= kTiledEncodingMaxRank && s.box.size() == rank && s.element_strides.size() == rank &&
                   s.strides.size() + 1 == std::max<size_t>(rank, 1),
               "tiled_encoding needs a spec with explicit strides and element strides");
  e.dtype = tma_data_type(s.dtype.kind);
  e.rank = static_cast<cuuint32_t>(rank);
  e.address = const_cast<void*>(s.address);
  for (size_t i = 0; i < rank; ++i) {
    e.dims[i] = static_cast<cuuint64_t>(s.dims[rank - 1 - i]);
    e.box[i] = static_cast<cuuint32_t>(s.box[rank - 1 - i]);
    e.element_strides[i] = static_cast<cuuint32_t>(s.element_strides[rank - 1 - i]);
  }
  // A box wider than its swizzle is copied panel by panel: the driver sees one panel.
  if (rank > 0) e.box[0] = static_cast<cuuint32_t>(tma::panel_elems(s.box.back(), s.dtype.bytes(), s.swizzle));
  // strides[j] (outermost first) is the stride of dim j; the driver's
  // strides[i] is the stride of its dim i + 1, i.e. ours reversed.
  for (size_t i = 0; i + 1 < rank; ++i) e.strides[i] = static_cast<cuuint64_t>(s.strides[rank - 2 - i]);
  e.interleave = tma_interleave(s.interleave);
  e.swizzle = tma_swizzle(s.swizzle);
  if (s.oob_fill == TensorMapOobFill::kNan) e.oob_fill = CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA;
  return e;
}

absl::Status encode_tiled(const Driver& driver, const TiledEncoding& e, CUtensorMap* map) {
  return driver.tensor_map_encode_tiled(map, e.dtype, e.rank, e.address, e.dims.data(), e.strides.data(), e.box.data(),
                                        e.element_strides.data(), e.interleave, e.swizzle, e.l2_promotion, e.oob_fill);
}

}  // namespace tessel::cuda
