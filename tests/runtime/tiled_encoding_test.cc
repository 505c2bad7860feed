// The arguments tessel gives cuTensorMapEncodeTiled, without a GPU: the
// driver's innermost-first order, one panel of a wide swizzled box, and the
// TMA types of tessel's dtypes.
#include "runtime/cuda/tiled_encoding.h"

#include "gtest/gtest.h"

namespace tessel::cuda {
namespace {

TEST(TiledEncoding, ReversesIntoTheDriversOrder) {
  TensorMapSpec spec;
  spec.dtype = f32;
  spec.address = reinterpret_cast<const void*>(uintptr_t{0x10000});
  spec.dims = {3, 100, 200};
  spec.strides = {100 * 1024, 1024};
  spec.box = {1, 16, 32};
  spec.element_strides = {2, 1, 1};
  spec.oob_fill = TensorMapOobFill::kNan;
  const TiledEncoding e = tiled_encoding(spec);
  EXPECT_EQ(e.dtype, CU_TENSOR_MAP_DATA_TYPE_FLOAT32);
  EXPECT_EQ(e.rank, 3u);
  EXPECT_EQ(e.address, spec.address);
  EXPECT_EQ(e.dims[0], 200u);
  EXPECT_EQ(e.dims[2], 3u);
  EXPECT_EQ(e.strides[0], 1024u);
  EXPECT_EQ(e.strides[1], 100u * 1024);
  EXPECT_EQ(e.box[0], 32u);
  EXPECT_EQ(e.box[2], 1u);
  EXPECT_EQ(e.element_strides[2], 2u);
  EXPECT_EQ(e.oob_fill, CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA);
  EXPECT_EQ(e.swizzle, CU_TENSOR_MAP_SWIZZLE_NONE);
}

TEST(TiledEncoding, GivesTheDriverOnePanelAndItsTypes) {
  TensorMapSpec spec;
  spec.dtype = bf16;
  spec.dims = {128, 256};
  spec.strides = {512};
  spec.box = {64, 256};  // four panels of 64 under 128B swizzle
  spec.element_strides = {1, 1};
  spec.swizzle = Swizzle::k128B;
  TiledEncoding e = tiled_encoding(spec);
  EXPECT_EQ(e.box[0], 64u);
  EXPECT_EQ(e.box[1], 64u);
  EXPECT_EQ(e.swizzle, CU_TENSOR_MAP_SWIZZLE_128B);
  for (DType d : {i8, u8, f8e4m3, f8e5m2}) {
    spec.dtype = d;
    EXPECT_EQ(tiled_encoding(spec).dtype, CU_TENSOR_MAP_DATA_TYPE_UINT8) << std::string(d.name());
  }
  spec.dtype = i16;
  EXPECT_EQ(tiled_encoding(spec).dtype, CU_TENSOR_MAP_DATA_TYPE_UINT16);
  // Ranks past the driver's, so that a test can ask it about them.
  spec.dtype = u8;
  spec.dims = {1, 2, 3, 4, 5, 6};
  spec.strides = {16, 16, 16, 16, 16};
  spec.box = {1, 1, 1, 1, 1, 16};
  spec.element_strides = {1, 1, 1, 1, 1, 1};
  spec.swizzle = Swizzle::kNone;
  e = tiled_encoding(spec);
  EXPECT_EQ(e.rank, 6u);
  EXPECT_EQ(e.dims[5], 1u);
}

}  // namespace
}  // namespace tessel::cuda
