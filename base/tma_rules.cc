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
  if (inner_bytes % kInnerBoxBytesMultiple != 0) {
    return invalid("box[", inner, "] * ", elem, " bytes = ", inner_bytes, " bytes is not a multiple of ",
                   kInnerBoxBytesMultiple);
  }
  const int64_t span = swizzle_bytes(swizzle);
  if (span == 0 || inner_bytes <= span) return absl::OkStatus();
  // Wider than the swizzle: tessel's panels (panel_elems), which the driver
  // never sees. Kernels copy such a box panel by panel, so it must be whole
  // panels, and interleaved layouts have none (the driver itself accepts an
  // interleaved box of any width under a swizzle; docs/tma.md).
  if (interleave != TensorMapInterleave::kNone) {
    return invalid(std::string(swizzle_name(swizzle)), " swizzle with ", interleave_name(interleave),
                   " interleave allows an inner box of at most ", span, " bytes (tessel copies wider boxes as panels, "
                   "which interleaved layouts do not have), but box[", inner, "] * ", elem, " bytes = ", inner_bytes,
                   " bytes");
  }
  if (inner_bytes % span != 0) {
    return invalid(std::string(swizzle_name(swizzle)), " swizzle copies an inner box wider than ", span,
                   " bytes as panels of ", span, " bytes, but box[", inner, "] * ", elem, " bytes = ", inner_bytes,
                   " bytes is not a whole number of them");
  }
  return absl::OkStatus();
}

absl::Status check_box_bytes(DType dtype, absl::Span<const int64_t> box, absl::Span<const int64_t> element_strides,
                             Swizzle swizzle, TensorMapInterleave interleave) {
  const size_t rank = box.size();
  int64_t bytes = dtype.bytes();
  std::string terms;
  for (size_t i = 0; i < rank; ++i) {
    int64_t b = box[i];
    // The driver sees one panel of a box wider than its swizzle.
    if (i + 1 == rank && interleave == TensorMapInterleave::kNone) b = panel_elems(b, dtype.bytes(), swizzle);
    const int64_t e = element_strides.empty() ? 1 : element_strides[i];
    bytes *= b / e;
    absl::StrAppend(&terms, b / e, " * ");
  }
  if (bytes <= kMaxBoxBytes) return absl::OkStatus();
  return invalid("the box holds ", terms, dtype.bytes(), " bytes = ", bytes,
                 " bytes (box / element stride per dimension, rounded down, one panel's width innermost), more than "
                 "the ",
                 kMaxBoxBytes, " bytes (228 KiB) a tensor map's box may hold");
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
    if (s < 0) return invalid("strides[", j, "] = ", s, " bytes", origin, " is negative");
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

absl::Status check_compute_capability(int compute_capability) {
  if (compute_capability < kMinComputeCapability) {
    return invalid("compute capability ", compute_capability, " is below ", kMinComputeCapability,
                   ": tensor maps need sm_90 or newer");
  }
  return absl::OkStatus();
}

}  // namespace tessel::tma
