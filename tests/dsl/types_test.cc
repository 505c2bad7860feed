// DType properties and names, and the printed form and equality of Types.
#include "dsl/types.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;

struct DTypeCase {
  DType dtype;
  const char* name;
  int bits;
  int bytes;
  bool is_float;
  bool is_signed;
};

std::vector<DTypeCase> AllDTypes() {
  return {
      {i1, "i1", 1, 1, false, false},    {i8, "i8", 8, 1, false, true},     {i16, "i16", 16, 2, false, true},
      {i32, "i32", 32, 4, false, true},  {i64, "i64", 64, 8, false, true},  {u8, "u8", 8, 1, false, false},
      {u16, "u16", 16, 2, false, false}, {u32, "u32", 32, 4, false, false}, {u64, "u64", 64, 8, false, false},
      {f16, "f16", 16, 2, true, true},   {bf16, "bf16", 16, 2, true, true}, {f32, "f32", 32, 4, true, true},
      {f64, "f64", 64, 8, true, true},
  };
}

TEST(DType, SizesNamesAndKinds) {
  for (const DTypeCase& c : AllDTypes()) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(c.dtype.name(), c.name);
    EXPECT_EQ(c.dtype.bits(), c.bits);
    EXPECT_EQ(c.dtype.bytes(), c.bytes);
    EXPECT_EQ(c.dtype.is_float(), c.is_float);
    EXPECT_EQ(c.dtype.is_int(), !c.is_float);
    EXPECT_EQ(c.dtype.is_signed(), c.is_signed);
    EXPECT_EQ(c.dtype.is_bool(), c.dtype == i1);
  }
}

TEST(DType, ParsesEveryName) {
  for (const DTypeCase& c : AllDTypes()) {
    absl::StatusOr<DType> parsed = parse_dtype(c.name);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, c.dtype) << c.name;
  }
}

TEST(DType, ParseRejectsUnknownNames) {
  for (const char* name : {"f8", "float", "I32", "", "bf16 "}) {
    absl::StatusOr<DType> parsed = parse_dtype(name);
    ASSERT_FALSE(parsed.ok()) << name;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), HasSubstr(std::string("unknown dtype '") + name + "'"));
  }
}

TEST(Swizzle, NamesAndBytes) {
  EXPECT_EQ(swizzle_name(Swizzle::kNone), "none");
  EXPECT_EQ(swizzle_name(Swizzle::k32B), "32B");
  EXPECT_EQ(swizzle_name(Swizzle::k64B), "64B");
  EXPECT_EQ(swizzle_name(Swizzle::k128B), "128B");
  EXPECT_EQ(swizzle_bytes(Swizzle::kNone), 0);
  EXPECT_EQ(swizzle_bytes(Swizzle::k32B), 32);
  EXPECT_EQ(swizzle_bytes(Swizzle::k64B), 64);
  EXPECT_EQ(swizzle_bytes(Swizzle::k128B), 128);
}

TEST(Shape, StrAndNumel) {
  EXPECT_EQ(shape_str({}), "[]");
  EXPECT_EQ(shape_str({64}), "[64]");
  EXPECT_EQ(shape_str({2, 64, 128}), "[2,64,128]");
  EXPECT_EQ(numel({}), 1);
  EXPECT_EQ(numel({2, 64, 128}), 16384);
}

TEST(Type, StrOfEveryKind) {
  EXPECT_EQ(Type().str(), "void");
  EXPECT_EQ(Type(bf16).str(), "bf16");
  EXPECT_EQ(ptr(f32).str(), "ptr<f32>");
  EXPECT_EQ(ptr(f16, AddressSpace::kShared).str(), "ptr<f16,shared>");
  EXPECT_EQ(Type::tile(i1, {64}).str(), "tile<i1>[64]");
  EXPECT_EQ(Type::tile(f32, {64, 128}).str(), "tile<f32>[64,128]");
  EXPECT_EQ(Type::tile(ptr(u8), {16, 16}).str(), "tile<ptr<u8>>[16,16]");
  EXPECT_EQ(Type::tile(ptr(i32, AddressSpace::kShared), {8}).str(), "tile<ptr<i32,shared>>[8]");
  EXPECT_EQ(Type::tensor_map(bf16, {64, 128}, Swizzle::kNone).str(), "tensor_map<bf16>[64,128]");
  EXPECT_EQ(Type::tensor_map(f16, {64, 64}, Swizzle::k128B).str(), "tensor_map<f16>[64,64] swizzle=128B");
  EXPECT_EQ(Type::triggered_view().str(), "triggered_view");
}

TEST(Type, KindPredicates) {
  EXPECT_TRUE(Type().is_void());
  EXPECT_TRUE(Type(i32).is_scalar());
  EXPECT_TRUE(ptr(f32).is_pointer());
  EXPECT_TRUE(Type::tile(f32, {4}).is_tile());
  EXPECT_TRUE(Type::tensor_map(f32, {4}, Swizzle::kNone).is_tensor_map());
  EXPECT_TRUE(Type::triggered_view().is_triggered_view());
  EXPECT_EQ(Type::tile(f32, {4}).kind(), TypeKind::kTile);

  EXPECT_TRUE(Type::tile(f32, {4}).is_float());
  EXPECT_TRUE(Type::tile(i1, {4}).is_bool());
  EXPECT_TRUE(Type::tile(i1, {4}).is_int());
  EXPECT_TRUE(Type(u16).is_int());
  // Pointers and tiles of pointers are neither numbers nor booleans.
  for (const Type& t : {ptr(f32), Type::tile(ptr(f32), {4}), Type::tile(ptr(i1), {4})}) {
    EXPECT_FALSE(t.is_float()) << t.str();
    EXPECT_FALSE(t.is_int()) << t.str();
    EXPECT_FALSE(t.is_bool()) << t.str();
  }
  EXPECT_FALSE(Type::tensor_map(f32, {4}, Swizzle::kNone).is_float());
}

TEST(Type, TileParts) {
  Type t = Type::tile(ptr(bf16, AddressSpace::kShared), {32, 64});
  EXPECT_TRUE(t.elements_are_pointers());
  EXPECT_EQ(t.dtype(), bf16);
  EXPECT_EQ(t.space(), AddressSpace::kShared);
  EXPECT_EQ(t.element(), ptr(bf16, AddressSpace::kShared));
  EXPECT_EQ(t.shape(), (Shape{32, 64}));
  EXPECT_EQ(t.rank(), 2);
  EXPECT_EQ(t.numel(), 2048);
  EXPECT_EQ(t.with_element(i1), Type::tile(i1, {32, 64}));

  EXPECT_EQ(Type(f32).element(), Type(f32));
  EXPECT_EQ(Type(f32).with_element(i1), Type(i1));
  EXPECT_EQ(Type(f32).rank(), 0);
  Type map = Type::tensor_map(f16, {16, 8, 64}, Swizzle::k128B);
  EXPECT_EQ(map.shape(), (Shape{16, 8, 64}));
  EXPECT_EQ(map.swizzle(), Swizzle::k128B);
  EXPECT_EQ(map.dtype(), f16);
}

TEST(Type, Equality) {
  EXPECT_EQ(Type(f32), Type(f32));
  EXPECT_EQ(Type(f32), f32);  // a DType is a scalar Type
  EXPECT_NE(Type(f32), Type(f16));
  EXPECT_NE(Type(f32), Type::tile(f32, {1}));
  EXPECT_NE(Type(f32), ptr(f32));
  EXPECT_EQ(ptr(f32), ptr(f32, AddressSpace::kGlobal));
  EXPECT_NE(ptr(f32), ptr(f32, AddressSpace::kShared));
  EXPECT_NE(ptr(f32), ptr(i32));
  EXPECT_EQ(Type::tile(f32, {64, 32}), Type::tile(f32, {64, 32}));
  EXPECT_NE(Type::tile(f32, {64, 32}), Type::tile(f32, {32, 64}));
  EXPECT_NE(Type::tile(f32, {64}), Type::tile(f32, {64, 1}));
  EXPECT_NE(Type::tile(f32, {64}), Type::tile(i32, {64}));
  EXPECT_NE(Type::tile(f32, {64}), Type::tile(ptr(f32), {64}));
  EXPECT_EQ(Type::tensor_map(bf16, {64, 64}, Swizzle::k128B), Type::tensor_map(bf16, {64, 64}, Swizzle::k128B));
  EXPECT_NE(Type::tensor_map(bf16, {64, 64}, Swizzle::k128B), Type::tensor_map(bf16, {64, 64}, Swizzle::k64B));
  EXPECT_NE(Type::tensor_map(bf16, {64, 64}, Swizzle::kNone), Type::tensor_map(f16, {64, 64}, Swizzle::kNone));
  EXPECT_NE(Type::tensor_map(bf16, {64, 64}, Swizzle::kNone), Type::tile(bf16, {64, 64}));
  EXPECT_EQ(Type::triggered_view(), Type::triggered_view());
  EXPECT_NE(Type::triggered_view(), Type());
}

}  // namespace
}  // namespace tessel
