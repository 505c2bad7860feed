#include "dsl/types.h"

#include <array>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status.h"

namespace tessel {
namespace {

struct DTypeInfo {
  absl::string_view name;
  int bits;
  bool is_float;
  bool is_signed;
};

constexpr std::array<DTypeInfo, 15> kInfo = {{
    {"i1", 1, false, false},    {"i8", 8, false, true},     {"i16", 16, false, true},
    {"i32", 32, false, true},   {"i64", 64, false, true},   {"u8", 8, false, false},
    {"u16", 16, false, false},  {"u32", 32, false, false},  {"u64", 64, false, false},
    {"f16", 16, true, true},    {"bf16", 16, true, true},   {"f32", 32, true, true},
    {"f64", 64, true, true},    {"f8e4m3", 8, true, true},  {"f8e5m2", 8, true, true},
}};

const DTypeInfo& info(DType d) { return kInfo[static_cast<int>(d.kind)]; }

}  // namespace

int DType::bits() const { return info(*this).bits; }
int DType::bytes() const { return kind == ScalarKind::kI1 ? 1 : bits() / 8; }
bool DType::is_float() const { return info(*this).is_float; }
bool DType::is_signed() const { return info(*this).is_signed; }
absl::string_view DType::name() const { return info(*this).name; }

absl::StatusOr<DType> parse_dtype(absl::string_view name) {
  for (size_t i = 0; i < kInfo.size(); ++i) {
    if (kInfo[i].name == name) return DType{static_cast<ScalarKind>(i)};
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown dtype '", name, "'"));
}

absl::string_view swizzle_name(Swizzle s) {
  switch (s) {
    case Swizzle::kNone: return "none";
    case Swizzle::k32B: return "32B";
    case Swizzle::k64B: return "64B";
    case Swizzle::k128B: return "128B";
  }
  return "?";
}

int swizzle_bytes(Swizzle s) {
  switch (s) {
    case Swizzle::kNone: return 0;
    case Swizzle::k32B: return 32;
    case Swizzle::k64B: return 64;
    case Swizzle::k128B: return 128;
  }
  return 0;
}

std::string shape_str(const Shape& shape) { return absl::StrCat("[", absl::StrJoin(shape, ","), "]"); }

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Type Type::pointer(DType pointee, AddressSpace space) {
  Type t;
  t.kind_ = TypeKind::kPointer;
  t.dtype_ = pointee;
  t.space_ = space;
  return t;
}

Type Type::tile(const Type& element, Shape shape) {
  TESSEL_CHECK(element.is_scalar() || element.is_pointer(), "tile element must be a scalar or pointer");
  Type t;
  t.kind_ = TypeKind::kTile;
  t.dtype_ = element.dtype_;
  t.space_ = element.space_;
  t.elem_ptr_ = element.is_pointer();
  t.shape_ = std::move(shape);
  return t;
}

Type Type::tensor_map(DType dtype, Shape box, Swizzle swizzle) {
  Type t;
  t.kind_ = TypeKind::kTensorMap;
  t.dtype_ = dtype;
  t.shape_ = std::move(box);
  t.swizzle_ = swizzle;
  return t;
}

Type Type::triggered_view() {
  Type t;
  t.kind_ = TypeKind::kTriggeredView;
  return t;
}

Type Type::element() const {
  if (!is_tile()) return *this;
  return elem_ptr_ ? Type::pointer(dtype_, space_) : Type(dtype_);
}

Type Type::with_element(const Type& element) const {
  if (!is_tile()) return element;
  return Type::tile(element, shape_);
}

std::string Type::str() const {
  switch (kind_) {
    case TypeKind::kVoid: return "void";
    case TypeKind::kScalar: return std::string(dtype_.name());
    case TypeKind::kPointer:
      return absl::StrCat("ptr<", dtype_.name(), space_ == AddressSpace::kShared ? ",shared" : "", ">");
    case TypeKind::kTile: return absl::StrCat("tile<", element().str(), ">", shape_str(shape_));
    case TypeKind::kTensorMap:
      return absl::StrCat("tensor_map<", dtype_.name(), ">", shape_str(shape_),
                          swizzle_ == Swizzle::kNone ? "" : absl::StrCat(" swizzle=", swizzle_name(swizzle_)));
    case TypeKind::kTriggeredView: return "triggered_view";
  }
  return "?";
}

}  // namespace tessel
