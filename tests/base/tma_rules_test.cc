// The TMA rule table: each rule accepts its limit and refuses one past it with
// a message naming the rule, the dimension and the value; and the builder and
// the runtime's validator, which both ask the table, agree on every box.
#include "base/tma_rules.h"

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "dsl/builder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/tensor_map.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;

::testing::AssertionResult IsOk(const absl::Status& s) {
  if (s.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << s;
}
#define EXPECT_OK(status_expr) EXPECT_TRUE(IsOk(status_expr))

// The code and the whole rule text: the table's messages carry no prefix.
#define EXPECT_RULE(status_expr, text)                                \
  do {                                                                \
    const absl::Status st_ = (status_expr);                           \
    EXPECT_EQ(st_.code(), absl::StatusCode::kInvalidArgument) << st_; \
    EXPECT_EQ(std::string(st_.message()), text);                      \
  } while (0)

constexpr TensorMapInterleave kNo = TensorMapInterleave::kNone;
constexpr TensorMapInterleave k16 = TensorMapInterleave::k16B;
constexpr TensorMapInterleave k32 = TensorMapInterleave::k32B;

const void* address(uintptr_t a) { return reinterpret_cast<const void*>(a); }

TEST(TmaRules, Rank) {
  EXPECT_OK(tma::check_rank(tma::kMinRank));
  EXPECT_OK(tma::check_rank(tma::kMaxRank));
  EXPECT_RULE(tma::check_rank(0), "rank 0 is outside [1, 5]");
  EXPECT_RULE(tma::check_rank(6), "rank 6 is outside [1, 5]");
}

TEST(TmaRules, Dtype) {
  for (DType d : {i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64}) {
    EXPECT_OK(tma::check_dtype(d)) << std::string(d.name());
  }
  EXPECT_RULE(tma::check_dtype(i1), "dtype i1 is not a TMA data type");
  const int past = static_cast<int>(ScalarKind::kF8E5M2) + 1;
  EXPECT_RULE(tma::check_dtype(DType{static_cast<ScalarKind>(past)}), absl::StrCat("dtype ", past, " is unknown"));
}

TEST(TmaRules, SwizzleModes) {
  EXPECT_OK(tma::check_swizzle(Swizzle::k128B));
  EXPECT_RULE(tma::check_swizzle(static_cast<Swizzle>(4)), "swizzle 4 is unknown");
}

TEST(TmaRules, Interleave) {
  EXPECT_OK(tma::check_interleave(kNo, 1));
  EXPECT_OK(tma::check_interleave(k16, tma::kMinInterleavedRank));
  EXPECT_OK(tma::check_interleave(k32, tma::kMinInterleavedRank));
  EXPECT_RULE(tma::check_interleave(k16, 2), "rank 2 is below 3, the minimum with 16B interleave");
  EXPECT_RULE(tma::check_interleave(k32, 2), "rank 2 is below 3, the minimum with 32B interleave");
  EXPECT_RULE(tma::check_interleave(static_cast<TensorMapInterleave>(3), 3), "interleave 3 is unknown");
}

TEST(TmaRules, OutOfBoundsFill) {
  EXPECT_OK(tma::check_oob_fill(TensorMapOobFill::kZero, i32));
  for (DType d : {f16, bf16, f32, f64}) EXPECT_OK(tma::check_oob_fill(TensorMapOobFill::kNan, d));
  EXPECT_RULE(tma::check_oob_fill(TensorMapOobFill::kNan, u8),
              "NaN out-of-bounds fill needs a floating-point dtype, got u8");
  EXPECT_OK(tma::check_oob_fill(TensorMapOobFill::kZero, f8e4m3));
  EXPECT_RULE(tma::check_oob_fill(TensorMapOobFill::kNan, f8e5m2),
              "NaN out-of-bounds fill is not available for f8e5m2 (the TMA moves 8-bit floats as bytes)");
  EXPECT_RULE(tma::check_oob_fill(static_cast<TensorMapOobFill>(2), f32), "out-of-bounds fill 2 is unknown");
}

TEST(TmaRules, AddressAlignment) {
  EXPECT_OK(tma::check_address(address(0x10010), kNo));
  EXPECT_RULE(tma::check_address(address(0x10008), kNo), "address 0x10008 is not 16-byte aligned");
  EXPECT_OK(tma::check_address(address(0x10010), k16));
  EXPECT_OK(tma::check_address(address(0x10020), k32));
  EXPECT_RULE(tma::check_address(address(0x10010), k32),
              "address 0x10010 is not 32-byte aligned (required with 32B interleave)");
  EXPECT_RULE(tma::check_address(nullptr, kNo), "address is null");
}

TEST(TmaRules, GlobalDims) {
  EXPECT_OK(tma::check_dims(std::vector<int64_t>{1, tma::kMaxGlobalDim}));
  EXPECT_RULE(tma::check_dims(std::vector<int64_t>{5, tma::kMaxGlobalDim + 1}),
              "dims[1] = 4294967297 is outside [1, 2^32]");
  EXPECT_RULE(tma::check_dims(std::vector<int64_t>{0, 5}), "dims[0] = 0 is outside [1, 2^32]");
}

TEST(TmaRules, BoxRank) {
  EXPECT_OK(tma::check_box(f32, Shape{1, 1, 1, 1, 4}, Swizzle::kNone, kNo));
  EXPECT_RULE(tma::check_box(f32, Shape{}, Swizzle::kNone, kNo), "box rank 0 is outside [1, 5]");
  EXPECT_RULE(tma::check_box(f32, Shape{1, 1, 1, 1, 1, 4}, Swizzle::kNone, kNo), "box rank 6 is outside [1, 5]");
}

TEST(TmaRules, BoxDims) {
  EXPECT_OK(tma::check_box(f32, Shape{tma::kMaxBoxDim, 4}, Swizzle::kNone, kNo));
  EXPECT_OK(tma::check_box(u8, Shape{1, tma::kMaxBoxDim}, Swizzle::kNone, kNo));
  EXPECT_RULE(tma::check_box(f32, Shape{257, 4}, Swizzle::kNone, kNo), "box[0] = 257 is outside [1, 256]");
  EXPECT_RULE(tma::check_box(u8, Shape{4, 272}, Swizzle::kNone, kNo), "box[1] = 272 is outside [1, 256]");
  EXPECT_RULE(tma::check_box(f32, Shape{0, 4}, Swizzle::kNone, kNo), "box[0] = 0 is outside [1, 256]");
}

TEST(TmaRules, InnerBoxBytesMultipleOf16) {
  EXPECT_OK(tma::check_box(f32, Shape{8, 4}, Swizzle::kNone, kNo));
  EXPECT_RULE(tma::check_box(f32, Shape{8, 2}, Swizzle::kNone, kNo),
              "box[1] * 4 bytes = 8 bytes is not a multiple of 16");
  EXPECT_RULE(tma::check_box(bf16, Shape{8, 12}, Swizzle::kNone, kNo),
              "box[1] * 2 bytes = 24 bytes is not a multiple of 16");
  // With interleave too, as the driver has it.
  EXPECT_RULE(tma::check_box(f32, Shape{2, 4, 2}, Swizzle::kNone, k16),
              "box[2] * 4 bytes = 8 bytes is not a multiple of 16");
  EXPECT_OK(tma::check_box(f32, Shape{2, 4, 4}, Swizzle::kNone, k16));
}

TEST(TmaRules, BoxBytes) {
  // 228 KiB as the driver counts them: box / element stride, rounded down.
  EXPECT_OK(tma::check_box_bytes(u8, Shape{228, 4, 256}, {}, Swizzle::kNone, kNo));
  EXPECT_RULE(tma::check_box_bytes(u8, Shape{229, 4, 256}, {}, Swizzle::kNone, kNo),
              "the box holds 229 * 4 * 256 * 1 bytes = 234496 bytes (box / element stride per dimension, rounded down, "
              "one panel's width innermost), more than the 233472 bytes (228 KiB) a tensor map's box may hold");
  EXPECT_OK(tma::check_box_bytes(u8, Shape{229, 4, 256}, std::vector<int64_t>{1, 3, 1}, Swizzle::kNone, kNo));
  // A box narrower than its element stride counts 0: the driver takes it.
  EXPECT_OK(tma::check_box_bytes(f64, Shape{1, 256, 256}, std::vector<int64_t>{2, 1, 1}, Swizzle::kNone, k16));
  // Under a swizzle, one panel: 256 x 128 bytes.
  EXPECT_OK(tma::check_box_bytes(u8, Shape{4, 256, 256}, {}, Swizzle::k128B, kNo));
  EXPECT_RULE(tma::check_box_bytes(u8, Shape{8, 256, 256}, {}, Swizzle::k128B, kNo),
              "the box holds 8 * 256 * 128 * 1 bytes = 262144 bytes (box / element stride per dimension, rounded down, "
              "one panel's width innermost), more than the 233472 bytes (228 KiB) a tensor map's box may hold");
}

TEST(TmaRules, WideSwizzledBoxesSpanWholePanels) {
  for (Swizzle s : {Swizzle::k32B, Swizzle::k64B, Swizzle::k128B}) {
    const int64_t span = swizzle_bytes(s);
    SCOPED_TRACE(std::string(swizzle_name(s)));
    EXPECT_OK(tma::check_box(u8, Shape{8, span}, s, kNo));
    EXPECT_OK(tma::check_box(u8, Shape{8, 2 * span}, s, kNo));
    EXPECT_RULE(tma::check_box(u8, Shape{8, span + 16}, s, kNo),
                absl::StrCat(std::string(swizzle_name(s)), " swizzle copies an inner box wider than ", span,
                             " bytes as panels of ", span, " bytes, but box[1] * 1 bytes = ", span + 16,
                             " bytes is not a whole number of them"));
  }
  // Interleaved boxes get no panels.
  EXPECT_RULE(tma::check_box(u8, Shape{2, 4, 64}, Swizzle::k32B, k32),
              "32B swizzle with 32B interleave allows an inner box of at most 32 bytes (tessel copies wider boxes as "
              "panels, which interleaved layouts do not have), but box[2] * 1 bytes = 64 bytes");
  // Without swizzle only the box dims bound the inner box.
  EXPECT_OK(tma::check_box(f64, Shape{8, 256}, Swizzle::kNone, kNo));
}

TEST(TmaRules, PanelsLieSideBySide) {
  // A 4 x 128 bf16 box under 128B swizzle: two panels of 4 rows of 64.
  EXPECT_EQ(tma::panel_elems(128, 2, Swizzle::k128B), 64);
  EXPECT_EQ(tma::panel_elems(64, 2, Swizzle::k128B), 64);
  EXPECT_EQ(tma::panel_elems(256, 2, Swizzle::kNone), 256);
  EXPECT_EQ(tma::box_tile_offset(0, 512, 128, 2, Swizzle::k128B), 0);
  // Panel 1's row 0 is the tile's 4th 128-byte row: its chunk 0 moves to 0 ^ 4.
  EXPECT_EQ(tma::box_tile_offset(64, 512, 128, 2, Swizzle::k128B), 4 * 128 + (0 ^ 4) * 16);
  EXPECT_EQ(tma::box_tile_offset(128 + 8, 512, 128, 2, Swizzle::k128B), 128 + (1 ^ 1) * 16);  // row 1, chunk 1
  // Row 3, column 70: panel 1's row 3, the 7th 128-byte row of the tile, so
  // chunk 0 moves to 0 ^ 7 (the pattern follows the address).
  EXPECT_EQ(tma::box_tile_offset(3 * 128 + 70, 512, 128, 2, Swizzle::k128B), 7 * 128 + (0 ^ 7) * 16 + 12);
  // Without panels the offset is the swizzled row-major one.
  EXPECT_EQ(tma::box_tile_offset(130, 512, 64, 2, Swizzle::k128B), tma::swizzled_offset(260, Swizzle::k128B));
}

TEST(TmaRules, Interleave32BTakesAnySwizzle) {
  for (Swizzle sw : {Swizzle::kNone, Swizzle::k32B, Swizzle::k64B, Swizzle::k128B}) {
    EXPECT_OK(tma::check_box(f16, Shape{2, 4, 16}, sw, k32));
  }
}

TEST(TmaRules, BoxChecksItsInputsFirst) {
  EXPECT_RULE(tma::check_box(i1, Shape{16, 16}, Swizzle::kNone, kNo), "dtype i1 is not a TMA data type");
  EXPECT_RULE(tma::check_box(f32, Shape{16, 16}, static_cast<Swizzle>(7), kNo), "swizzle 7 is unknown");
  EXPECT_RULE(tma::check_box(f32, Shape{16, 16}, Swizzle::kNone, static_cast<TensorMapInterleave>(9)),
              "interleave 9 is unknown");
}

TEST(TmaRules, ElementStrides) {
  EXPECT_OK(tma::check_element_strides({}, kNo));
  EXPECT_OK(tma::check_element_strides(std::vector<int64_t>{tma::kMaxElementStride, tma::kMinElementStride}, kNo));
  EXPECT_RULE(tma::check_element_strides(std::vector<int64_t>{9, 1}, kNo), "element_strides[0] = 9 is outside [1, 8]");
  EXPECT_RULE(tma::check_element_strides(std::vector<int64_t>{1, 0}, kNo), "element_strides[1] = 0 is outside [1, 8]");
  EXPECT_RULE(tma::check_element_strides(std::vector<int64_t>{1, 2}, kNo),
              "element_strides[1] = 2 must be 1 without interleave: TMA ignores the innermost element stride");
  EXPECT_OK(tma::check_element_strides(std::vector<int64_t>{1, 1, 8}, k16));
}

TEST(TmaRules, Strides) {
  const int64_t top = tma::kStrideLimit - tma::kStrideMultiple;
  EXPECT_OK(tma::check_strides(std::vector<int64_t>{top, 16}, kNo));
  EXPECT_RULE(tma::check_strides(std::vector<int64_t>{tma::kStrideLimit, 16}, kNo),
              "strides[0] = 1099511627776 bytes is not below 2^40");
  EXPECT_RULE(tma::check_strides(std::vector<int64_t>{64, 24}, kNo), "strides[1] = 24 bytes is not a multiple of 16");
  EXPECT_RULE(tma::check_strides(std::vector<int64_t>{-32}, kNo), "strides[0] = -32 bytes is negative");
  EXPECT_OK(tma::check_strides(std::vector<int64_t>{0}, kNo));  // a repeated row
  EXPECT_OK(tma::check_strides(std::vector<int64_t>{64, 32}, k32));
  EXPECT_RULE(tma::check_strides(std::vector<int64_t>{64, 48}, k32),
              "strides[1] = 48 bytes is not a multiple of 32 (required with 32B interleave)");
  EXPECT_OK(tma::check_strides(std::vector<int64_t>{64, 48}, k16));
  EXPECT_RULE(tma::check_strides(std::vector<int64_t>{8}, kNo, " (dense row-major)"),
              "strides[0] = 8 bytes (dense row-major) is not a multiple of 16");
}

TEST(TmaRules, ComputeCapability) {
  EXPECT_OK(tma::check_compute_capability(tma::kMinComputeCapability));
  EXPECT_RULE(tma::check_compute_capability(89), "compute capability 89 is below 90: tensor maps need sm_90 or newer");
}

// ---------------------------------------------------------------------------
// The builder and validate() give one verdict on one box.

struct BoxCase {
  DType dtype;
  Shape box;
  Swizzle swizzle;
  bool ok;
};

std::ostream& operator<<(std::ostream& os, const BoxCase& c) {
  return os << c.dtype.name() << shape_str(c.box) << " swizzle " << swizzle_name(c.swizzle);
}

// The rule text after `prefix`, or the whole message when it lacks one.
std::string rule_after(absl::string_view message, absl::string_view prefix) {
  const size_t at = message.find(prefix);
  return std::string(at == absl::string_view::npos ? message : message.substr(at + prefix.size()));
}

class BuilderAndValidatorAgree : public ::testing::TestWithParam<BoxCase> {};

TEST_P(BuilderAndValidatorAgree, OnTheBox) {
  const BoxCase& c = GetParam();
  KernelBuilder k("k");
  k.tensor_map(c.dtype, c.box, "a", c.swizzle);
  absl::StatusOr<Kernel> kernel = k.build();

  // A tensor whose dims and dense strides pass every rule, so only the box can fail.
  TensorMapSpec spec;
  spec.dtype = c.dtype;
  spec.address = address(0x10000);
  spec.dims.assign(c.box.size(), 16);
  if (!spec.dims.empty()) spec.dims.back() = 1024;
  spec.box = c.box;
  spec.swizzle = c.swizzle;
  const absl::Status validated = validate(spec, 90);

  EXPECT_EQ(kernel.ok(), c.ok) << kernel.status();
  EXPECT_EQ(validated.ok(), c.ok) << validated;
  if (!kernel.ok() && !validated.ok()) {
    EXPECT_EQ(rule_after(kernel.status().message(), "tensor_map 'a': "),
              rule_after(validated.message(), "tensor map: "));
    EXPECT_THAT(std::string(kernel.status().message()), HasSubstr("tma_rules_test.cc:"));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Boxes, BuilderAndValidatorAgree,
    ::testing::Values(BoxCase{bf16, {64, 128}, Swizzle::kNone, true}, BoxCase{bf16, {64, 64}, Swizzle::k128B, true},
                      BoxCase{f32, {8, 8}, Swizzle::k32B, true}, BoxCase{u8, {2, 2, 2, 2, 256}, Swizzle::kNone, true},
                      BoxCase{f32, {257, 64}, Swizzle::kNone, false}, BoxCase{f32, {64, 257}, Swizzle::kNone, false},
                      BoxCase{f32, {0, 64}, Swizzle::kNone, false},
                      BoxCase{bf16, {8, 12}, Swizzle::kNone, false},    // inner span of 24 bytes
                      BoxCase{bf16, {64, 128}, Swizzle::k128B, true},   // two 128-byte panels
                      BoxCase{bf16, {64, 96}, Swizzle::k128B, false},   // 192-byte row under 128B swizzle
                      BoxCase{f32, {64, 20}, Swizzle::k64B, false},     // 80 bytes under 64B swizzle
                      BoxCase{i1, {16, 16}, Swizzle::kNone, false}));

}  // namespace
}  // namespace tessel
