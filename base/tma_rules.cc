#include "base/tma_rules.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace tessel::tma {

namespace {

constexpr int kNumScalarKinds = static_cast<int>(ScalarKind::kF8E5M2) + 1;

template <typename... Parts>
absl::Status invalid(const Parts&... parts) {
  return absl::InvalidArgumentError(absl::StrCat(parts...));
}

// The " (required with 32B interleave)" note of rules that tighten with it.
const char* with_32b_interleave(TensorMapInterleave interleave) {
  return interleave == TensorMapInterleave::k32B ? " (required with 32B interleave)" : "";
}

}  // namespace

const char* interleave_name(TensorMapInterleave interleave) {
  switch (interleave) {
    case TensorMapInterleave::kNone:
      return "no";
    case TensorMapInterleave::k16B:
      return "16B";
    case TensorMapInterleave::k32B:
      return "32B";
  }
  return "?";
}

absl::Status check_rank(int64_t rank) {
  if (rank < kMinRank || rank > kMaxRank) {
    return invalid("rank ", rank, " is outside [", kMinRank, ", ", kMaxRank, "]");
  }
  return absl::OkStatus();
}

absl::Status check_dtype(DType dtype) {
  const int kind = static_cast<int>(dtype.kind);
  if (kind < 0 || kind >= kNumScalarKinds) return invalid("dtype ", kind, " is unknown");
  if (dtype.is_bool()) return invalid("dtype i1 is not a TMA data type");
  return absl::OkStatus();
}

absl::Status check_swizzle(Swizzle swizzle) {
  if (static_cast<int>(swizzle) > static_cast<int>(Swizzle::k128B)) {
    return invalid("swizzle ", static_cast<int>(swizzle), " is unknown");
  }
  return absl::OkStatus();
}

absl::Status check_interleave(TensorMapInterleave interleave, int64_t rank) {
  if (static_cast<int>(interleave) > static_cast<int>(TensorMapInterleave::k32B)) {
    return invalid("interleave ", static_cast<int>(interleave), " is unknown");
  }
  if (interleave != TensorMapInterleave::kNone && rank < kMinInterleavedRank) {
    return invalid("rank ", rank, " is below ", kMinInterleavedRank, ", the minimum with ", interleave_name(interleave),
                   " interleave");
  }
  return absl::OkStatus();
}

absl::Status check_oob_fill(TensorMapOobFill fill, DType dtype) {
  if (static_cast<int>(fill) > static_cast<int>(TensorMapOobFill::kNan)) {
    return invalid("out-of-bounds fill ", static_cast<int>(fill), " is unknown");
  }
  if (fill == TensorMapOobFill::kNan && !dtype.is_float()) {
    return invalid("NaN out-of-bounds fill needs a floating-point dtype, got ", std::string(dtype.name()));
  }
  if (fill == TensorMapOobFill::kNan && dtype.bits() == 8) {
    return invalid("NaN out-of-bounds fill is not available for ", std::string(dtype.name()),
                   " (the TMA moves 8-bit floats as bytes)");
  }
  return absl::OkStatus();
}

absl::Status check_address(const void* address, TensorMapInterleave interleave) {
  if (address == nullptr) return invalid("address is null");
  const uintptr_t a = reinterpret_cast<uintptr_t>(address);
  const int64_t alignment = address_alignment(interleave);
  if (a % static_cast<uintptr_t>(alignment) != 0) {
    return invalid("address 0x", absl::Hex(a), " is not ", alignment, "-byte aligned", with_32b_interleave(interleave));
  }
  return absl::OkStatus();
}

absl::Status check_dims(absl::Span<const int64_t> dims) {
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 1 || dims[i] > kMaxGlobalDim) {
      return invalid("dims[", i, "] = ", dims[i], " is outside [1, 2^32]");
    }
  }
  return absl::OkStatus();
}

absl::Status check_box(DType dtype, absl::Span<const int64_t> box, Swizzle swizzle, TensorMapInterleave interleave) {
  TESSEL_RETURN_IF_ERROR(check_dtype(dtype));
  TESSEL_RETURN_IF_ERROR(check_swizzle(swizzle));
  // Only whether the mode is known: its rank rule is the tensor's, and a
  // kernel parameter declares a box without a tensor.
  if (static_cast<int>(interleave) > static_cast<int>(TensorMapInterleave::k32B)) {
    return invalid("interleave ", static_cast<int>(interleave), " is unknown");
  }
  const int64_t rank = static_cast<int64_t>(box.size());
  if (rank < kMinRank || rank > kMaxRank) {
    return invalid("box rank ", rank, " is outside [", kMinRank, ", ", kMaxRank, "]");
  }
  for (size_t i = 0; i < box.size(); ++i) {
    if (box[i] < 1 || box[i] > kMaxBoxDim) {
      return invalid("box[", i, "] = ", box[i], " is outside [1, ", kMaxBoxDim, "]");
    }
  }
  const size_t inner = box.size() - 1;
  const int64_t elem = dtype.bytes();
  const int64_t inner_bytes = box[inner] * elem;
  const bool interleaved = interleave != TensorMapInterleave::kNone;
  if (!interleaved && inner_bytes % kInnerBoxBytesMultiple != 0) {
    return invalid("box[", inner, "] * ", elem, " bytes = ", inner_bytes, " bytes is not a multiple of ",
                   kInnerBoxBytesMultiple, " (required without interleave)");
  }
  // Applied with interleave too, and 32B interleave held to 32B swizzle: both
  // stricter than the driver, which accepts maps that break them
  // (docs/tma.md).
  const int64_t span = swizzle_bytes(swizzle);
  if (span != 0 && inner_bytes > span && interleaved) {
    return invalid(std::string(swizzle_name(swizzle)), " swizzle with interleave allows an inner box of at most ",
                   span, " bytes, but box[", inner, "] * ", elem, " bytes = ", inner_bytes, " bytes");
  }
  if (span != 0 && inner_bytes > span && inner_bytes % span != 0) {
    return invalid(std::string(swizzle_name(swizzle)), " swizzle copies an inner box wider than ", span,
                   " bytes as panels of ", span, " bytes, but box[", inner, "] * ", elem, " bytes = ", inner_bytes,
                   " bytes is not a whole number of them");
  }
  if (interleave == TensorMapInterleave::k32B && swizzle != Swizzle::k32B) {
    return invalid("32B interleave requires 32B swizzle, got swizzle ", std::string(swizzle_name(swizzle)));
  }
  return absl::OkStatus();
}

absl::Status check_element_strides(absl::Span<const int64_t> element_strides, TensorMapInterleave interleave) {
  for (size_t i = 0; i < element_strides.size(); ++i) {
    const int64_t e = element_strides[i];
    if (e < kMinElementStride || e > kMaxElementStride) {
      return invalid("element_strides[", i, "] = ", e, " is outside [", kMinElementStride, ", ", kMaxElementStride,
                     "]");
    }
  }
  if (element_strides.empty() || interleave != TensorMapInterleave::kNone) return absl::OkStatus();
  const size_t inner = element_strides.size() - 1;
  if (element_strides[inner] != 1) {
    return invalid("element_strides[", inner, "] = ", element_strides[inner],
                   " must be 1 without interleave: TMA ignores the innermost element stride");
  }
  return absl::OkStatus();
}

absl::Status check_strides(absl::Span<const int64_t> strides, TensorMapInterleave interleave,
                           absl::string_view origin) {
  const int64_t multiple = stride_multiple(interleave);
  for (size_t j = 0; j < strides.size(); ++j) {
    const int64_t s = strides[j];
    if (s <= 0) return invalid("strides[", j, "] = ", s, " bytes", origin, " is not positive");
    if (s % multiple != 0) {
      return invalid("strides[", j, "] = ", s, " bytes", origin, " is not a multiple of ", multiple,
                     with_32b_interleave(interleave));
    }
    if (s >= kStrideLimit) {
      return invalid("strides[", j, "] = ", s, " bytes", origin, " is not below 2^40");
    }
  }
  return absl::OkStatus();
}

absl::Status check_stride_coverage(absl::Span<const int64_t> dims, absl::Span<const int64_t> strides,
                                   int64_t elem_bytes, absl::string_view origin) {
  const size_t rank = dims.size();
  if (rank < 2) return absl::OkStatus();
  TESSEL_CHECK(strides.size() == rank - 1, "stride coverage needs one stride per outer dimension");
  const size_t inner = rank - 1;
  int64_t row_bytes;
  if (__builtin_mul_overflow(dims[inner], elem_bytes, &row_bytes)) row_bytes = INT64_MAX;
  if (strides[inner - 1] < row_bytes) {
    return invalid("strides[", inner - 1, "] = ", strides[inner - 1], " bytes", origin,
                   " is less than one row of the innermost dimension: dims[", inner, "] * ", elem_bytes,
                   " bytes = ", row_bytes, " bytes");
  }
  for (size_t j = inner - 1; j-- > 0;) {
    int64_t needed;
    if (__builtin_mul_overflow(strides[j + 1], dims[j + 1], &needed) || strides[j] < needed) {
      return invalid("strides[", j, "] = ", strides[j], " bytes", origin, " does not cover dims[", j + 1,
                     "] = ", dims[j + 1], " steps of strides[", j + 1, "] = ", strides[j + 1], " bytes");
    }
  }
  return absl::OkStatus();
}

absl::Status check_compute_capability(int compute_capability) {
  if (compute_capability < kMinComputeCapability) {
    return invalid("compute capability ", compute_capability, " is below ", kMinComputeCapability,
                   ": tensor maps need sm_90 or newer");
  }
  return absl::OkStatus();
}

}  // namespace tessel::tma
