// Launch arguments: C++ values turned into typed slots that are checked
// against a kernel's signature and passed like cuLaunchKernel's params.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <type_traits>

#include "absl/types/span.h"
#include "base/view_abi.h"
#include "dsl/types.h"

namespace tessel {

class Buffer;
class TensorMap;

template <class T>
constexpr std::optional<DType> dtype_of() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same_v<U, bool>) return i1;
  else if constexpr (std::is_same_v<U, int8_t>) return i8;
  else if constexpr (std::is_same_v<U, int16_t>) return i16;
  else if constexpr (std::is_same_v<U, int32_t>) return i32;
  else if constexpr (std::is_same_v<U, int64_t>) return i64;
  else if constexpr (std::is_same_v<U, uint8_t>) return u8;
  else if constexpr (std::is_same_v<U, uint16_t>) return u16;
  else if constexpr (std::is_same_v<U, uint32_t>) return u32;
  else if constexpr (std::is_same_v<U, uint64_t>) return u64;
  else if constexpr (std::is_same_v<U, float>) return f32;
  else if constexpr (std::is_same_v<U, double>) return f64;
  else return std::nullopt;
}

// A 16-bit float passed by its bits: `Half{bits}` for f16, `BFloat16{bits}` for bf16.
struct Half { uint16_t bits; };
struct BFloat16 { uint16_t bits; };

class KernelArg {
 public:
  enum class Kind : uint8_t { kScalar, kPointer, kTensorMap, kView };

  template <class T>
    requires(dtype_of<T>().has_value())
  KernelArg(T v) : kind_(Kind::kScalar), dtype_(*dtype_of<T>()) {  // NOLINT: implicit by design
    static_assert(sizeof(T) <= sizeof(storage_));
    std::memcpy(storage_, &v, sizeof(T));
  }
  KernelArg(Half h) : kind_(Kind::kScalar), dtype_(f16) { std::memcpy(storage_, &h.bits, 2); }       // NOLINT
  KernelArg(BFloat16 h) : kind_(Kind::kScalar), dtype_(bf16) { std::memcpy(storage_, &h.bits, 2); }  // NOLINT
  // A typed pointer checks its pointee; void* and Buffers fit any pointer.
  template <class T>
  KernelArg(T* p) : kind_(Kind::kPointer) {  // NOLINT
    set_pointer(p);
    if constexpr (std::is_same_v<std::remove_cv_t<T>, ViewHeader>) {
      kind_ = Kind::kView;  // a triggered view's header in device-readable memory
    } else if constexpr (dtype_of<T>().has_value()) {
      dtype_ = *dtype_of<T>();
      typed_ = true;
    }
  }
  // A span: a typed pointer whose extent the host's checked mode checks
  // accesses against (so does a Buffer's).
  template <class T>
  KernelArg(absl::Span<T> s) : KernelArg(s.data()) {  // NOLINT
    extent_ = static_cast<int64_t>(s.size() * sizeof(T));
  }
  template <class T, size_t N>
  KernelArg(std::span<T, N> s) : KernelArg(s.data()) {  // NOLINT
    extent_ = static_cast<int64_t>(s.size() * sizeof(T));
  }
  KernelArg(const Buffer& b);     // NOLINT
  KernelArg(const TensorMap& m);  // NOLINT

  Kind kind() const { return kind_; }
  DType dtype() const { return dtype_; }
  bool typed() const { return typed_; }
  const TensorMap* tensor_map() const { return map_; }
  // Pointers: the address, and the bytes behind it where known (Buffers and
  // spans), else -1.
  const void* pointer() const {
    const void* p;
    std::memcpy(&p, storage_, sizeof(p));
    return p;
  }
  int64_t extent() const { return extent_; }
  // For pointers and integers: whether the address is 16-byte aligned or
  // the value divisible by 16 (the low bits of either, little-endian).
  bool multiple_of_16() const { return (std::to_integer<unsigned>(storage_[0]) & 15) == 0; }
  // What cuLaunchKernel-style params point to for this argument.
  void* slot() const;
  std::string describe() const;

 private:
  void set_pointer(const void* p) { std::memcpy(storage_, &p, sizeof(p)); }
  Kind kind_;
  DType dtype_{};
  bool typed_ = false;
  const TensorMap* map_ = nullptr;
  int64_t extent_ = -1;
  alignas(8) mutable std::byte storage_[8] = {};
};

}  // namespace tessel
