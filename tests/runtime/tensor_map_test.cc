#include "runtime/tensor_map.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/host/host_tma.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;

// Validation never dereferences the address, so a fake aligned one will do.
const void* const kFakeAddress = reinterpret_cast<const void*>(uintptr_t{0x10000});

// Both halves of every diagnostic test: the code and the rule named.
#define EXPECT_INVALID(status_expr, text)                             \
  do {                                                                \
    const absl::Status st_ = (status_expr);                           \
    EXPECT_EQ(st_.code(), absl::StatusCode::kInvalidArgument) << st_; \
    EXPECT_THAT(std::string(st_.message()), HasSubstr(text)) << st_;  \
  } while (0)

// A valid 2-D f32 map: 64 x 128 tensor, 32 x 32 box.
TensorMapSpec base_spec() {
  TensorMapSpec s;
  s.dtype = f32;
  s.address = kFakeAddress;
  s.dims = {64, 128};
  s.box = {32, 32};
  return s;
}

// A valid rank-3 map whose inner box is 32 bytes, for the interleave rules.
TensorMapSpec interleaved_spec(TensorMapInterleave interleave) {
  TensorMapSpec s;
  s.dtype = f16;
  s.address = kFakeAddress;
  s.dims = {4, 8, 16};
  s.box = {2, 4, 16};
  s.interleave = interleave;
  if (interleave == TensorMapInterleave::k32B) s.swizzle = Swizzle::k32B;
  return s;
}

// ---------------------------------------------------------------------------
// validate(): one test per rule.

TEST(TensorMapValidate, AcceptsValidSpecs) {
  EXPECT_TRUE(validate(base_spec(), 0).ok());
  EXPECT_TRUE(validate(base_spec(), 90).ok());
  EXPECT_TRUE(validate(base_spec(), 100).ok());
  TensorMapSpec s = base_spec();
  s.strides = {1024};
  s.element_strides = {8, 1};
  s.swizzle = Swizzle::k128B;
  s.oob_fill = TensorMapOobFill::kNan;
  EXPECT_TRUE(validate(s, 90).ok()) << validate(s, 90);
  for (TensorMapInterleave i : {TensorMapInterleave::k16B, TensorMapInterleave::k32B}) {
    EXPECT_TRUE(validate(interleaved_spec(i), 90).ok()) << validate(interleaved_spec(i), 90);
  }
  TensorMapSpec one;
  one.dtype = i8;
  one.address = kFakeAddress;
  one.dims = {1};
  one.box = {16};  // a box may exceed the tensor; the excess is out of bounds
  EXPECT_TRUE(validate(one, 0).ok()) << validate(one, 0);
  TensorMapSpec five = base_spec();
  five.dtype = u64;
  five.dims = {2, 3, 4, 5, 6};
  five.box = {1, 2, 3, 4, 2};
  EXPECT_TRUE(validate(five, 0).ok()) << validate(five, 0);
}

TEST(TensorMapValidate, RankMustBe1To5) {
  TensorMapSpec s = base_spec();
  s.dims = {};
  s.box = {};
  EXPECT_INVALID(validate(s, 0), "rank 0 is outside [1, 5]");
  s.dims = {2, 2, 2, 2, 2, 16};
  s.box = {1, 1, 1, 1, 1, 4};
  EXPECT_INVALID(validate(s, 0), "rank 6 is outside [1, 5]");
}

TEST(TensorMapValidate, InterleaveNeedsRank3) {
  TensorMapSpec s = base_spec();
  s.interleave = TensorMapInterleave::k16B;
  EXPECT_INVALID(validate(s, 0), "rank 2 is below 3, the minimum with 16B interleave");
}

TEST(TensorMapValidate, ArraySizesMustMatchRank) {
  TensorMapSpec s = base_spec();
  s.box = {32};
  EXPECT_INVALID(validate(s, 0), "box has 1 entries but the tensor has rank 2");
  s = base_spec();
  s.strides = {512, 16};
  EXPECT_INVALID(validate(s, 0), "strides has 2 entries; expected 1");
  s = base_spec();
  s.element_strides = {1};
  EXPECT_INVALID(validate(s, 0), "element_strides has 1 entries but the tensor has rank 2");
}

TEST(TensorMapValidate, I1IsNotATmaType) {
  TensorMapSpec s = base_spec();
  s.dtype = i1;
  s.box = {32, 16};
  EXPECT_INVALID(validate(s, 0), "dtype i1 is not a TMA data type");
}

TEST(TensorMapValidate, UnknownEnumValues) {
  TensorMapSpec s = base_spec();
  s.dtype = DType{static_cast<ScalarKind>(40)};
  EXPECT_INVALID(validate(s, 0), "dtype 40 is unknown");
  s = base_spec();
  s.swizzle = static_cast<Swizzle>(9);
  EXPECT_INVALID(validate(s, 0), "swizzle 9 is unknown");
  s = base_spec();
  s.interleave = static_cast<TensorMapInterleave>(5);
  EXPECT_INVALID(validate(s, 0), "interleave 5 is unknown");
  s = base_spec();
  s.oob_fill = static_cast<TensorMapOobFill>(3);
  EXPECT_INVALID(validate(s, 0), "out-of-bounds fill 3 is unknown");
}

TEST(TensorMapValidate, NullAddress) {
  TensorMapSpec s = base_spec();
  s.address = nullptr;
  EXPECT_INVALID(validate(s, 0), "address is null");
}

TEST(TensorMapValidate, AddressMustBe16ByteAligned) {
  TensorMapSpec s = base_spec();
  s.address = reinterpret_cast<const void*>(uintptr_t{0x10008});
  EXPECT_INVALID(validate(s, 0), "address 0x10008 is not 16-byte aligned");
}

TEST(TensorMapValidate, AddressMustBe32ByteAlignedWith32BInterleave) {
  TensorMapSpec s = interleaved_spec(TensorMapInterleave::k32B);
  s.address = reinterpret_cast<const void*>(uintptr_t{0x10010});
  EXPECT_INVALID(validate(s, 0),
                 "address 0x10010 is not 32-byte aligned (required with 32B interleave)");
  s = interleaved_spec(TensorMapInterleave::k16B);
  s.address = reinterpret_cast<const void*>(uintptr_t{0x10010});
  EXPECT_TRUE(validate(s, 0).ok());
}

TEST(TensorMapValidate, DimsMustBeIn1To2Pow32) {
  TensorMapSpec s = base_spec();
  s.dims = {0, 128};
  EXPECT_INVALID(validate(s, 0), "dims[0] = 0 is outside [1, 2^32]");
  s.dims = {(int64_t{1} << 32) + 1, 128};
  EXPECT_INVALID(validate(s, 0), "dims[0] = 4294967297 is outside [1, 2^32]");
  s.dims = {64, -3};
  EXPECT_INVALID(validate(s, 0), "dims[1] = -3 is outside [1, 2^32]");
  s.dims = {int64_t{1} << 32, 128};  // the limit itself is allowed
  EXPECT_TRUE(validate(s, 0).ok()) << validate(s, 0);
}

TEST(TensorMapValidate, StridesMustBeMultiplesOf16) {
  TensorMapSpec s = base_spec();
  s.strides = {520};
  EXPECT_INVALID(validate(s, 0), "strides[0] = 520 bytes is not a multiple of 16");
  // Dense strides come from the dims; the message says so.
  s = base_spec();
  s.dims = {8, 3};
  s.box = {8, 4};
  EXPECT_INVALID(validate(s, 0), "strides[0] = 12 bytes (dense row-major) is not a multiple of 16");
}

TEST(TensorMapValidate, StridesMustBeMultiplesOf32With32BInterleave) {
  TensorMapSpec s = interleaved_spec(TensorMapInterleave::k32B);
  s.strides = {512, 48};
  EXPECT_INVALID(validate(s, 0),
                 "strides[1] = 48 bytes is not a multiple of 32 (required with 32B interleave)");
}

TEST(TensorMapValidate, StridesMustNotBeNegative) {
  TensorMapSpec s = base_spec();
  s.strides = {-16};
  EXPECT_INVALID(validate(s, 0), "strides[0] = -16 bytes is negative");
  // 0 repeats a row: a broadcast along that dimension, which the driver accepts.
  s.strides = {0};
  EXPECT_TRUE(validate(s, 0).ok()) << validate(s, 0);
}

TEST(TensorMapValidate, StridesMustBeBelow2Pow40) {
  TensorMapSpec s = base_spec();
  s.strides = {int64_t{1} << 40};
  EXPECT_INVALID(validate(s, 0), "strides[0] = 1099511627776 bytes is not below 2^40");
  s = base_spec();
  s.dtype = u8;
  s.dims = {4, 1 << 20, 1 << 20};
  s.box = {1, 1, 16};
  EXPECT_INVALID(validate(s, 0),
                 "strides[0] = 1099511627776 bytes (dense row-major) is not below 2^40");
}

// The driver accepts rows that overlap (sliding windows), and so does tessel.
TEST(TensorMapValidate, OverlappingRowsAreAccepted) {
  TensorMapSpec s = base_spec();
  s.strides = {16};  // a window of 128 f32 moving 4 elements per row
  EXPECT_TRUE(validate(s, 0).ok()) << validate(s, 0);
  s.dims = {4, 8, 16};
  s.box = {2, 4, 16};
  s.strides = {64, 64};  // dims 0 and 1 step alike
  EXPECT_TRUE(validate(s, 0).ok()) << validate(s, 0);
}

TEST(TensorMapValidate, BoxDimsMustBeIn1To256) {
  TensorMapSpec s = base_spec();
  s.box = {32, 300};
  EXPECT_INVALID(validate(s, 0), "box[1] = 300 is outside [1, 256]");
  s.box = {0, 32};
  EXPECT_INVALID(validate(s, 0), "box[0] = 0 is outside [1, 256]");
  s.box = {256, 32};
  EXPECT_TRUE(validate(s, 0).ok());
}

TEST(TensorMapValidate, BoxMustHoldAtMost228KiB) {
  TensorMapSpec s = base_spec();
  s.dims = {64, 128, 256};
  s.box = {8, 32, 256};  // 8 * 32 * 256 * 4 bytes = 256 KiB
  EXPECT_INVALID(validate(s, 0),
                 "the box holds 8 * 32 * 256 * 4 bytes = 262144 bytes (box / element stride per dimension, rounded "
                 "down, one panel's width innermost), more than the 233472 bytes (228 KiB) a tensor map's box may hold");
  // The driver counts each dimension as box / element stride, rounded down.
  s.element_strides = {3, 1, 1};
  EXPECT_TRUE(validate(s, 0).ok()) << validate(s, 0);
  s.element_strides = {1, 1, 1};
  s.box = {7, 32, 256};  // 224 KiB
  EXPECT_TRUE(validate(s, 0).ok()) << validate(s, 0);
  // Under a swizzle the driver sees one panel: 2 * 256 rows of 128 bytes.
  s.box = {2, 256, 256};
  s.swizzle = Swizzle::k128B;
  EXPECT_TRUE(validate(s, 0).ok()) << validate(s, 0);
}

TEST(TensorMapValidate, InnerBoxBytesMustBeMultipleOf16) {
  TensorMapSpec s = base_spec();
  s.box = {32, 5};
  EXPECT_INVALID(validate(s, 0), "box[1] * 4 bytes = 20 bytes is not a multiple of 16");
  s = interleaved_spec(TensorMapInterleave::k16B);
  s.box = {2, 4, 3};  // interleaved too
  EXPECT_INVALID(validate(s, 0), "box[2] * 2 bytes = 6 bytes is not a multiple of 16");
}

TEST(TensorMapValidate, ElementStridesMustBeIn1To8) {
  TensorMapSpec s = base_spec();
  s.element_strides = {9, 1};
  EXPECT_INVALID(validate(s, 0), "element_strides[0] = 9 is outside [1, 8]");
  s.element_strides = {0, 1};
  EXPECT_INVALID(validate(s, 0), "element_strides[0] = 0 is outside [1, 8]");
}

TEST(TensorMapValidate, InnermostElementStrideMustBe1WithoutInterleave) {
  TensorMapSpec s = base_spec();
  s.element_strides = {1, 2};
  EXPECT_INVALID(validate(s, 0), "element_strides[1] = 2 must be 1 without interleave");
  s = interleaved_spec(TensorMapInterleave::k16B);
  s.element_strides = {1, 1, 2};
  EXPECT_TRUE(validate(s, 0).ok());
}

TEST(TensorMapValidate, SwizzleCutsTheInnerBoxIntoPanels) {
  struct Case {
    Swizzle swizzle;
    int64_t limit;
  };
  for (const Case& c :
       {Case{Swizzle::k32B, 32}, Case{Swizzle::k64B, 64}, Case{Swizzle::k128B, 128}}) {
    SCOPED_TRACE(std::string(swizzle_name(c.swizzle)));
    TensorMapSpec s = base_spec();
    s.swizzle = c.swizzle;
    s.box = {32, c.limit / 4};
    EXPECT_TRUE(validate(s, 0).ok()) << validate(s, 0);
    s.box = {32, c.limit / 4 + 4};
    EXPECT_INVALID(validate(s, 0),
                   absl::StrCat(std::string(swizzle_name(c.swizzle)), " swizzle copies an inner box wider than ",
                                c.limit, " bytes as panels of ", c.limit, " bytes, but box[1] * 4 bytes = ",
                                c.limit + 16, " bytes is not a whole number of them"));
    s.box = {32, c.limit / 2};  // two panels
    EXPECT_TRUE(validate(s, 0).ok()) << validate(s, 0);
  }
}

TEST(TensorMapValidate, InterleavedBoxesStayWithinTheirSwizzle) {
  // Any swizzle goes with either interleave, as the driver has it.
  for (Swizzle sw : {Swizzle::kNone, Swizzle::k32B, Swizzle::k64B, Swizzle::k128B}) {
    TensorMapSpec s = interleaved_spec(TensorMapInterleave::k32B);
    s.swizzle = sw;
    EXPECT_TRUE(validate(s, 0).ok()) << validate(s, 0);
  }
  // Wider than the swizzle would be panels, which interleaved layouts do not have.
  TensorMapSpec s = interleaved_spec(TensorMapInterleave::k16B);
  s.swizzle = Swizzle::k32B;
  s.box = {2, 4, 32};
  EXPECT_INVALID(validate(s, 0),
                 "32B swizzle with 16B interleave allows an inner box of at most 32 bytes (tessel copies wider boxes "
                 "as panels, which interleaved layouts do not have), but box[2] * 2 bytes = 64 bytes");
}

TEST(TensorMapValidate, NanFillNeedsAFloatDtype) {
  TensorMapSpec s = base_spec();
  s.dtype = i32;
  s.oob_fill = TensorMapOobFill::kNan;
  EXPECT_INVALID(validate(s, 0), "NaN out-of-bounds fill needs a floating-point dtype, got i32");
  for (DType d : {f16, bf16, f32, f64}) {
    s.dtype = d;
    s.box = {32, 16};
    EXPECT_TRUE(validate(s, 0).ok()) << std::string(d.name());
  }
}

TEST(TensorMapValidate, ComputeCapabilityMustBeAtLeast90) {
  EXPECT_INVALID(validate(base_spec(), 80), "compute capability 80 is below 90");
  EXPECT_TRUE(validate(base_spec(), 90).ok());
  EXPECT_TRUE(validate(base_spec(), 0).ok());  // host emulation
}

// ---------------------------------------------------------------------------
// TensorMap encoding.

TEST(TensorMapEncode, HostFormLayout) {
  TensorMapSpec s = base_spec();
  s.swizzle = Swizzle::k64B;
  s.box = {32, 16};
  s.element_strides = {3, 1};
  s.oob_fill = TensorMapOobFill::kNan;
  absl::StatusOr<TensorMap> map = TensorMap::encode_host(s);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->encoding(), TensorMapEncoding::kHost);
  const auto* b = reinterpret_cast<const uint8_t*>(map->data());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(b), 4), "TSTM");
  EXPECT_EQ(b[4] | b[5] << 8, kTensorMapHostVersion);
  EXPECT_EQ(b[6], static_cast<uint8_t>(ScalarKind::kF32));
  EXPECT_EQ(b[7], 2);
  EXPECT_EQ(b[8], static_cast<uint8_t>(Swizzle::k64B));
  EXPECT_EQ(b[9], 0);
  EXPECT_EQ(b[10], static_cast<uint8_t>(TensorMapOobFill::kNan));
  EXPECT_EQ(b[11], 4);
  uint64_t u64;
  std::memcpy(&u64, b + 16, 8);
  EXPECT_EQ(u64, 0x10000u);
  std::memcpy(&u64, b + 24, 8);
  EXPECT_EQ(u64, 64u);
  std::memcpy(&u64, b + 32, 8);
  EXPECT_EQ(u64, 128u);
  std::memcpy(&u64, b + 64, 8);
  EXPECT_EQ(u64, 512u);  // dense stride of dim 0
  EXPECT_EQ(b[96] | b[97] << 8, 32);
  EXPECT_EQ(b[98] | b[99] << 8, 16);
  EXPECT_EQ(b[106], 3);
  EXPECT_EQ(b[107], 1);
  for (int i = 111; i < 128; ++i) EXPECT_EQ(b[i], 0) << i;
}

TEST(TensorMapEncode, ClassIsAlignedAndNormalised) {
  static_assert(alignof(TensorMap) == 64);
  static_assert(sizeof(TensorMap::Bytes) == 128);
  absl::StatusOr<TensorMap> map = TensorMap::encode_host(base_spec());
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(map->data()) % 64, 0u);
  EXPECT_EQ(map->spec().strides, std::vector<int64_t>({512}));
  EXPECT_EQ(map->spec().element_strides, std::vector<int64_t>({1, 1}));
  EXPECT_EQ(map->rank(), 2);
  auto heap = std::make_unique<TensorMap>(*map);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(heap->data()) % 64, 0u);
}

TEST(TensorMapEncode, EncodeErrorsPropagate) {
  TensorMapSpec s = base_spec();
  s.box = {32, 300};
  EXPECT_INVALID(TensorMap::encode_host(s).status(), "box[1] = 300 is outside [1, 256]");
}

TEST(TensorMapEncode, RoundTripThroughBytes) {
  TensorMapSpec s;
  s.dtype = bf16;
  s.address = kFakeAddress;
  s.dims = {3, 5, 7, 9, 24};
  s.strides = {int64_t{1} << 30, 1 << 20, 4096, 64};
  s.box = {1, 2, 3, 4, 16};
  s.element_strides = {8, 2, 1, 3, 1};
  s.swizzle = Swizzle::k32B;
  s.oob_fill = TensorMapOobFill::kNan;
  absl::StatusOr<TensorMap> map = TensorMap::encode_host(s);
  ASSERT_TRUE(map.ok()) << map.status();
  absl::StatusOr<TensorMap> back = TensorMap::from_bytes(map->bytes());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->bytes(), map->bytes());
  EXPECT_EQ(back->spec().dtype, bf16);
  EXPECT_EQ(back->spec().address, kFakeAddress);
  EXPECT_EQ(back->spec().dims, s.dims);
  EXPECT_EQ(back->spec().strides, s.strides);
  EXPECT_EQ(back->spec().box, s.box);
  EXPECT_EQ(back->spec().element_strides, s.element_strides);
  EXPECT_EQ(back->spec().swizzle, s.swizzle);
  EXPECT_EQ(back->spec().interleave, s.interleave);
  EXPECT_EQ(back->spec().oob_fill, s.oob_fill);
  EXPECT_EQ(back->tile_shape(), Shape({1, 1, 3, 2, 16}));
  EXPECT_EQ(back->tile_bytes(), 96 * 2);
}

TEST(TensorMapEncode, FromBytesRejectsForeignOrCorruptBytes) {
  absl::StatusOr<TensorMap> map = TensorMap::encode_host(base_spec());
  ASSERT_TRUE(map.ok());
  TensorMap::Bytes b = map->bytes();
  b[0] = std::byte{'X'};
  EXPECT_INVALID(TensorMap::from_bytes(b).status(), "not a host-form map: magic");
  b = map->bytes();
  b[4] = std::byte{2};
  EXPECT_INVALID(TensorMap::from_bytes(b).status(), "host-form version 2 is not supported");
  b = map->bytes();
  b[7] = std::byte{9};
  EXPECT_INVALID(TensorMap::from_bytes(b).status(), "rank 9 is outside [1, 5]");
  b = map->bytes();
  b[98] = std::byte{0};
  b[99] = std::byte{2};  // box[1] = 512
  EXPECT_INVALID(TensorMap::from_bytes(b).status(), "box[1] = 512 is outside [1, 256]");
  b = map->bytes();
  b[120] = std::byte{1};
  EXPECT_INVALID(TensorMap::from_bytes(b).status(), "not canonical");
  b = map->bytes();
  b[11] = std::byte{2};  // element size disagrees with f32
  EXPECT_INVALID(TensorMap::from_bytes(b).status(), "not canonical");
}

TEST(TensorMapEncode, TiledIsDenseRowMajor) {
  absl::StatusOr<TensorMap> map =
      TensorMap::tiled(bf16, kFakeAddress, {4, 6, 64}, {2, 3, 64}, Swizzle::k128B);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->spec().strides, std::vector<int64_t>({6 * 128, 128}));
  EXPECT_EQ(map->spec().swizzle, Swizzle::k128B);
  EXPECT_INVALID(
      TensorMap::tiled(bf16, kFakeAddress, {4, 6, 64}, {2, 3, 96}, Swizzle::k128B).status(),
      "128B swizzle copies an inner box wider than 128 bytes as panels of 128 bytes");
}

TEST(TensorMapEncode, FromEncodedKeepsTheEncoding) {
  TensorMap::Bytes opaque;
  for (size_t i = 0; i < opaque.size(); ++i) opaque[i] = std::byte(i * 7);
  TensorMap map = TensorMap::from_encoded(base_spec(), TensorMapEncoding::kCuda, opaque);
  EXPECT_EQ(map.encoding(), TensorMapEncoding::kCuda);
  EXPECT_EQ(map.bytes(), opaque);
  EXPECT_EQ(map.spec().strides, std::vector<int64_t>({512}));
  EXPECT_FALSE(TensorMap::from_bytes(opaque).ok());
}

// ---------------------------------------------------------------------------
// TensorMapCache.

TEST(TensorMapCache, HitReturnsTheSamePointer) {
  TensorMapCache cache;
  absl::StatusOr<const TensorMap*> a = cache.get_or_encode(base_spec());
  absl::StatusOr<const TensorMap*> b = cache.get_or_encode(base_spec());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ((*a)->spec().dims, base_spec().dims);

  TensorMapSpec other = base_spec();
  other.box = {16, 32};
  absl::StatusOr<const TensorMap*> c = cache.get_or_encode(other);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(*c, *a);
  EXPECT_EQ((*c)->spec().box, other.box);
  EXPECT_EQ(cache.size(), 2u);
}

TEST(TensorMapCache, EveryKeyFieldDistinguishesEntries) {
  TensorMapCache cache;
  std::vector<TensorMapSpec> specs(9, base_spec());
  specs[1].address = reinterpret_cast<const void*>(uintptr_t{0x20000});
  specs[2].dtype = i32;
  specs[3].dims = {64, 256};
  specs[4].strides = {1024};
  specs[5].element_strides = {2, 1};
  specs[6].swizzle = Swizzle::k128B;
  specs[7].oob_fill = TensorMapOobFill::kNan;
  specs[8].box = {8, 32};
  std::vector<const TensorMap*> seen;
  for (const TensorMapSpec& s : specs) {
    absl::StatusOr<const TensorMap*> m = cache.get_or_encode(s);
    ASSERT_TRUE(m.ok()) << m.status();
    for (const TensorMap* p : seen) EXPECT_NE(p, *m);
    seen.push_back(*m);
  }
  absl::StatusOr<const TensorMap*> m =
      cache.get_or_encode(interleaved_spec(TensorMapInterleave::k16B));
  absl::StatusOr<const TensorMap*> n =
      cache.get_or_encode(interleaved_spec(TensorMapInterleave::kNone));
  ASSERT_TRUE(m.ok() && n.ok());
  EXPECT_NE(*m, *n);
}

TEST(TensorMapCache, ErrorsAreReportedAndNotCached) {
  TensorMapCache cache;
  TensorMapSpec s = base_spec();
  s.box = {32, 300};
  EXPECT_INVALID(cache.get_or_encode(s).status(), "box[1] = 300 is outside [1, 256]");
  s = base_spec();
  s.dims = {1, 1, 1, 1, 1, 1, 4};
  EXPECT_INVALID(cache.get_or_encode(s).status(), "rank 7 is outside [1, 5]");
  EXPECT_EQ(cache.size(), 0u);
}

TEST(TensorMapCache, PointersSurviveGrowthAndThreads) {
  TensorMapCache cache;
  absl::StatusOr<const TensorMap*> first = cache.get_or_encode(base_spec());
  ASSERT_TRUE(first.ok());
  const TensorMap::Bytes first_bytes = (*first)->bytes();
  std::vector<std::thread> threads;
  std::vector<const TensorMap*> results(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&cache, &results, t] {
      for (int i = 1; i <= 256; ++i) {
        TensorMapSpec s = base_spec();
        s.dims = {i, 128};
        absl::StatusOr<const TensorMap*> m = cache.get_or_encode(s);
        if (!m.ok() || (*m)->spec().dims[0] != i) return;
        if (i == 200) results[t] = *m;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < 8; ++t) {
    EXPECT_NE(results[t], nullptr);
    EXPECT_EQ(results[t], results[0]);
  }
  EXPECT_EQ(cache.size(), 256u);  // {64, 128} is among them
  EXPECT_EQ((*first)->bytes(), first_bytes);
  EXPECT_EQ(*cache.get_or_encode(base_spec()), *first);
}

// ---------------------------------------------------------------------------
// Host copy engine, against a plain per-element reference.

struct AlignedFree {
  void operator()(std::byte* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<std::byte[], AlignedFree>;

Buffer aligned_buffer(size_t bytes) {
  return Buffer(static_cast<std::byte*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
}

std::string hex(const std::byte* p, int64_t n) {
  std::string s;
  for (int64_t i = n; i-- > 0;)
    absl::StrAppend(&s, absl::Hex(static_cast<uint8_t>(p[i]), absl::kZeroPad2));
  return s;  // most significant byte first, as the value reads
}

bool is_quiet_nan(DType d, const std::byte* p) {
  uint64_t bits = 0;
  std::memcpy(&bits, p, d.bytes());
  switch (d.kind) {
    case ScalarKind::kF16:
      return (bits & 0x7C00) == 0x7C00 && (bits & 0x200);
    case ScalarKind::kBF16:
      return (bits & 0x7F80) == 0x7F80 && (bits & 0x40);
    case ScalarKind::kF32:
      return (bits & 0x7F800000) == 0x7F800000 && (bits & 0x400000);
    case ScalarKind::kF64:
      return (bits >> 52 & 0x7FF) == 0x7FF && (bits >> 51 & 1);
    default:
      return false;
  }
}

struct CopyCase {
  std::string name;
  DType dtype;
  Shape dims;
  Shape box;
  std::vector<int64_t> element_strides;  // empty: all 1
  int64_t row_padding = 0;               // extra bytes per stride, a multiple of 16
  TensorMapInterleave interleave = TensorMapInterleave::kNone;
  TensorMapOobFill fill = TensorMapOobFill::kZero;
};

void PrintTo(const CopyCase& c, std::ostream* os) { *os << c.name; }

class HostCopyTest : public ::testing::TestWithParam<CopyCase> {
 protected:
  void SetUp() override {
    const CopyCase& c = GetParam();
    seed_ = std::random_device{}();
    rng_.seed(seed_);
    elem_ = c.dtype.bytes();
    const size_t rank = c.dims.size();
    // Padded strides leave gaps a store must not touch.
    strides_.assign(rank, elem_);
    if (rank >= 2) {
      strides_[rank - 2] = (c.dims[rank - 1] * elem_ + 15) / 16 * 16 + c.row_padding;
      for (size_t j = rank - 2; j-- > 0;)
        strides_[j] = strides_[j + 1] * c.dims[j + 1] + c.row_padding;
    }
    global_bytes_ = rank >= 2 ? strides_[0] * c.dims[0] : c.dims[0] * elem_;
    global_ = aligned_buffer(global_bytes_);
    randomize(global_.get(), global_bytes_);

    TensorMapSpec s;
    s.dtype = c.dtype;
    s.address = global_.get();
    s.dims = c.dims;
    s.strides.assign(strides_.begin(), strides_.end() - 1);
    s.box = c.box;
    s.element_strides = c.element_strides;
    s.interleave = c.interleave;
    if (c.interleave == TensorMapInterleave::k32B) s.swizzle = Swizzle::k32B;
    s.oob_fill = c.fill;
    absl::StatusOr<TensorMap> map = TensorMap::encode_host(s);
    ASSERT_TRUE(map.ok()) << map.status();
    map_ = std::make_unique<TensorMap>(*std::move(map));
    tile_ = map_->tile_shape();
    tile_bytes_ = map_->tile_bytes();
  }

  void randomize(std::byte* p, int64_t n) {
    for (int64_t i = 0; i < n; ++i) p[i] = std::byte(rng_() & 0xFF);
  }

  // Byte offset in the tensor of tile element `linear`, or -1 when out of bounds.
  int64_t global_offset(const std::vector<int32_t>& coords, int64_t linear) const {
    const CopyCase& c = GetParam();
    int64_t offset = 0;
    for (size_t i = c.dims.size(); i-- > 0;) {
      const int64_t k = linear % tile_[i];
      linear /= tile_[i];
      const int64_t es = c.element_strides.empty() ? 1 : c.element_strides[i];
      const int64_t g = coords[i] + k * es;
      if (g < 0 || g >= c.dims[i]) return -1;
      offset += g * strides_[i];
    }
    return offset;
  }

  void check_load(const std::vector<int32_t>& coords) {
    SCOPED_TRACE(absl::StrCat("coords ", shape_str(Shape(coords.begin(), coords.end()))));
    constexpr int64_t kGuard = 64;
    Buffer smem = aligned_buffer(tile_bytes_ + kGuard);
    std::memset(smem.get(), 0xA5, tile_bytes_ + kGuard);
    host_tma_load(map_->data(), coords.data(), smem.get());
    const int64_t n = tile_bytes_ / elem_;
    int failures = 0;
    for (int64_t e = 0; e < n && failures < 5; ++e) {
      const std::byte* got = smem.get() + e * elem_;
      const int64_t off = global_offset(coords, e);
      bool ok;
      if (off >= 0) {
        ok = std::memcmp(got, global_.get() + off, elem_) == 0;
      } else if (GetParam().fill == TensorMapOobFill::kNan) {
        ok = is_quiet_nan(GetParam().dtype, got);
      } else {
        ok = std::all_of(got, got + elem_, [](std::byte b) { return b == std::byte{0}; });
      }
      if (!ok) {
        ++failures;
        ADD_FAILURE() << "tile element " << e << (off >= 0 ? " (in bounds)" : " (out of bounds)")
                      << ": got bytes " << hex(got, elem_)
                      << (off >= 0 ? absl::StrCat(", expected ", hex(global_.get() + off, elem_))
                                   : "");
      }
    }
    for (int64_t i = 0; i < kGuard; ++i) {
      ASSERT_EQ(smem[tile_bytes_ + i], std::byte{0xA5}) << "load wrote past the tile, byte " << i;
    }
  }

  void check_store(const std::vector<int32_t>& coords) {
    SCOPED_TRACE(absl::StrCat("coords ", shape_str(Shape(coords.begin(), coords.end()))));
    Buffer tile = aligned_buffer(tile_bytes_);
    randomize(tile.get(), tile_bytes_);
    randomize(global_.get(), global_bytes_);  // fresh contents before each copy
    std::vector<std::byte> expected(global_.get(), global_.get() + global_bytes_);
    for (int64_t e = 0; e < tile_bytes_ / elem_; ++e) {
      const int64_t off = global_offset(coords, e);
      if (off >= 0) std::memcpy(expected.data() + off, tile.get() + e * elem_, elem_);
    }
    host_tma_store(map_->data(), coords.data(), tile.get());
    for (int64_t i = 0; i < global_bytes_; ++i) {
      ASSERT_EQ(global_[i], expected[i]) << "first wrong tensor byte " << i;
    }
  }

  // Coordinates covering, per dimension, every edge: inside, straddling the
  // start (negative), straddling the end, fully before, fully after.
  std::vector<std::vector<int32_t>> coordinate_sets() {
    const CopyCase& c = GetParam();
    const size_t rank = c.dims.size();
    auto inside = [&](size_t i) {
      const int64_t span = std::max<int64_t>(1, c.dims[i] - c.box[i] + 1);
      return static_cast<int32_t>(rng_() % span);
    };
    std::vector<std::vector<int32_t>> sets;
    for (size_t d = 0; d < rank; ++d) {
      const int32_t dim = static_cast<int32_t>(c.dims[d]), box = static_cast<int32_t>(c.box[d]);
      for (int32_t edge : {0, -1, -box / 2, dim - box / 2, dim - 1, -box, -box - 3, dim, dim + 5}) {
        std::vector<int32_t> coords(rank);
        for (size_t i = 0; i < rank; ++i) coords[i] = i == d ? edge : inside(i);
        sets.push_back(coords);
      }
    }
    for (int trial = 0; trial < 40; ++trial) {  // several dimensions off at once
      std::vector<int32_t> coords(rank);
      for (size_t i = 0; i < rank; ++i) {
        const int64_t lo = -c.box[i] - 2, hi = c.dims[i] + 2;
        coords[i] = static_cast<int32_t>(lo + static_cast<int64_t>(rng_() % (hi - lo)));
      }
      sets.push_back(coords);
    }
    return sets;
  }

  uint32_t seed_ = 0;
  std::mt19937_64 rng_;
  int64_t elem_ = 0;
  std::vector<int64_t> strides_;  // bytes, every dim; the innermost is elem_
  int64_t global_bytes_ = 0;
  Buffer global_;
  std::unique_ptr<TensorMap> map_;
  Shape tile_;
  int64_t tile_bytes_ = 0;
};

TEST_P(HostCopyTest, LoadMatchesReference) {
  SCOPED_TRACE(absl::StrCat("seed ", seed_));
  for (const std::vector<int32_t>& coords : coordinate_sets()) {
    check_load(coords);
    if (HasFailure()) return;  // one failing box is enough to read
  }
}

TEST_P(HostCopyTest, StoreMatchesReference) {
  SCOPED_TRACE(absl::StrCat("seed ", seed_));
  for (const std::vector<int32_t>& coords : coordinate_sets()) {
    check_store(coords);
    if (HasFailure()) return;
  }
}

TEST_P(HostCopyTest, StoreThenLoadRoundTrips) {
  SCOPED_TRACE(absl::StrCat("seed ", seed_));
  const std::vector<int32_t> origin(GetParam().dims.size(), 0);
  Buffer tile = aligned_buffer(tile_bytes_);
  Buffer back = aligned_buffer(tile_bytes_);
  randomize(tile.get(), tile_bytes_);
  std::memset(back.get(), 0xA5, tile_bytes_);
  host_tma_store(map_->data(), origin.data(), tile.get());
  host_tma_load(map_->data(), origin.data(), back.get());
  // Whatever of the tile fits in the tensor is read back unchanged.
  for (int64_t e = 0; e < tile_bytes_ / elem_; ++e) {
    if (global_offset(origin, e) < 0) continue;
    ASSERT_EQ(std::memcmp(back.get() + e * elem_, tile.get() + e * elem_, elem_), 0)
        << "element " << e;
  }
}

// Short names keep one case per line.
constexpr TensorMapInterleave kIl0 = TensorMapInterleave::kNone;
constexpr TensorMapInterleave kIl16 = TensorMapInterleave::k16B;
constexpr TensorMapInterleave kIl32 = TensorMapInterleave::k32B;
constexpr TensorMapOobFill kNan = TensorMapOobFill::kNan;

INSTANTIATE_TEST_SUITE_P(
    Shapes, HostCopyTest,
    ::testing::Values(
        CopyCase{"rank1_f32", f32, {100}, {16}, {}, 0},
        CopyCase{"rank2_bf16", bf16, {37, 70}, {8, 16}, {}, 32},
        CopyCase{"rank2_i8", i8, {50, 45}, {5, 32}, {}, 16},
        CopyCase{"rank2_f64", f64, {20, 13}, {7, 4}, {}, 0},
        CopyCase{"rank2_bf16_big_tile", bf16, {300, 500}, {128, 64}, {}, 64},
        CopyCase{"rank3_f32_element_strides", f32, {5, 9, 11}, {3, 7, 8}, {2, 3, 1}, 48},
        CopyCase{"rank5_bf16", bf16, {3, 4, 5, 6, 19}, {2, 3, 2, 4, 8}, {1, 2, 1, 3, 1}, 16},
        CopyCase{"rank5_i8_unit_dims", i8, {1, 2, 1, 3, 40}, {1, 2, 2, 1, 16}, {}, 0},
        CopyCase{"rank3_f32_il16_inner_stride", f32, {4, 6, 12}, {2, 3, 8}, {1, 2, 2}, 0, kIl16},
        CopyCase{"rank3_f16_il32", f16, {3, 5, 16}, {2, 2, 16}, {}, 32, kIl32},
        CopyCase{"nan_f32", f32, {9, 10}, {4, 8}, {2, 1}, 0, kIl0, kNan},
        CopyCase{"nan_bf16", bf16, {9, 10}, {4, 16}, {}, 0, kIl0, kNan},
        CopyCase{"nan_f16", f16, {3, 6, 10}, {2, 3, 8}, {}, 16, kIl0, kNan},
        CopyCase{"nan_f64", f64, {7, 5}, {3, 4}, {3, 1}, 0, kIl0, kNan}),
    [](const ::testing::TestParamInfo<CopyCase>& info) { return info.param.name; });

}  // namespace
}  // namespace tessel
