// The types of tessel values: scalars, pointers, tiles, tensor maps and
// triggered views. A Type is a small value; compare it with ==.
#pragma once

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"

namespace tessel {

enum class ScalarKind : uint8_t {
  kI1, kI8, kI16, kI32, kI64, kU8, kU16, kU32, kU64, kF16, kBF16, kF32, kF64, kF8E4M3, kF8E5M2,
};

// A scalar element type. The constants below (tessel::f32, ...) are the
// spelling users write.
struct DType {
  ScalarKind kind = ScalarKind::kI32;

  constexpr bool operator==(const DType&) const = default;
  int bits() const;
  // Bytes one element occupies in memory (i1 occupies one byte).
  int bytes() const;
  bool is_float() const;
  bool is_int() const { return !is_float(); }
  bool is_signed() const;  // floats count as signed
  bool is_bool() const { return kind == ScalarKind::kI1; }
  bool is_float8() const { return kind == ScalarKind::kF8E4M3 || kind == ScalarKind::kF8E5M2; }
  absl::string_view name() const;
};

inline constexpr DType i1{ScalarKind::kI1};
inline constexpr DType i8{ScalarKind::kI8};
inline constexpr DType i16{ScalarKind::kI16};
inline constexpr DType i32{ScalarKind::kI32};
inline constexpr DType i64{ScalarKind::kI64};
inline constexpr DType u8{ScalarKind::kU8};
inline constexpr DType u16{ScalarKind::kU16};
inline constexpr DType u32{ScalarKind::kU32};
inline constexpr DType u64{ScalarKind::kU64};
inline constexpr DType f16{ScalarKind::kF16};
inline constexpr DType bf16{ScalarKind::kBF16};
inline constexpr DType f32{ScalarKind::kF32};
inline constexpr DType f64{ScalarKind::kF64};
// 8-bit floats (base/float8.h): casts to them round to nearest even and
// saturate at the largest finite value.
inline constexpr DType f8e4m3{ScalarKind::kF8E4M3};
inline constexpr DType f8e5m2{ScalarKind::kF8E5M2};

// Parses a dtype name such as "bf16".
absl::StatusOr<DType> parse_dtype(absl::string_view name);

enum class AddressSpace : uint8_t { kGlobal, kShared };

// TMA shared-memory swizzle of a tensor map's box.
enum class Swizzle : uint8_t { kNone, k32B, k64B, k128B };
absl::string_view swizzle_name(Swizzle s);
int swizzle_bytes(Swizzle s);  // 0 for kNone

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& shape);
int64_t numel(const Shape& shape);

enum class TypeKind : uint8_t { kVoid, kScalar, kPointer, kTile, kTensorMap, kTriggeredView };

class Type {
 public:
  Type() = default;  // void
  Type(DType d) : kind_(TypeKind::kScalar), dtype_(d) {}  // NOLINT: implicit by design

  static Type pointer(DType pointee, AddressSpace space = AddressSpace::kGlobal);
  // A tile of scalars or of pointers; `element` must be a scalar or a pointer.
  static Type tile(const Type& element, Shape shape);
  static Type tensor_map(DType dtype, Shape box, Swizzle swizzle);
  static Type triggered_view();

  TypeKind kind() const { return kind_; }
  bool is_void() const { return kind_ == TypeKind::kVoid; }
  bool is_scalar() const { return kind_ == TypeKind::kScalar; }
  bool is_pointer() const { return kind_ == TypeKind::kPointer; }
  bool is_tile() const { return kind_ == TypeKind::kTile; }
  bool is_tensor_map() const { return kind_ == TypeKind::kTensorMap; }
  bool is_triggered_view() const { return kind_ == TypeKind::kTriggeredView; }

  // Scalar type, pointee, tensor-map element type, or a tile's element dtype.
  DType dtype() const { return dtype_; }
  AddressSpace space() const { return space_; }
  // For tiles: whether the elements are pointers.
  bool elements_are_pointers() const { return elem_ptr_; }
  // The element of a tile (scalar or pointer); the type itself otherwise.
  Type element() const;
  // A tile's shape, or a tensor map's box; empty otherwise.
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return tessel::numel(shape_); }
  Swizzle swizzle() const { return swizzle_; }
  // Whether this type is a scalar or tile of floats (ints, bools, pointers).
  bool is_float() const { return (is_scalar() || (is_tile() && !elem_ptr_)) && dtype_.is_float(); }
  bool is_int() const { return (is_scalar() || (is_tile() && !elem_ptr_)) && dtype_.is_int(); }
  bool is_bool() const { return (is_scalar() || (is_tile() && !elem_ptr_)) && dtype_.is_bool(); }
  // The same shape (or scalar-ness) with another element.
  Type with_element(const Type& element) const;

  bool operator==(const Type&) const = default;
  std::string str() const;

 private:
  TypeKind kind_ = TypeKind::kVoid;
  DType dtype_{};
  AddressSpace space_ = AddressSpace::kGlobal;
  bool elem_ptr_ = false;
  Swizzle swizzle_ = Swizzle::kNone;
  Shape shape_;
};

inline Type ptr(DType pointee, AddressSpace space = AddressSpace::kGlobal) {
  return Type::pointer(pointee, space);
}

}  // namespace tessel
