// Tensor maps: the 128-byte descriptors TMA copies read, validated on the host
// against every rule cuTensorMapEncodeTiled enforces (the driver only answers
// CUDA_ERROR_INVALID_VALUE, and a bad box has hung kernels instead of failing),
// and a cache for the launch path. The rules themselves live in
// base/tma_rules.h, which the builder asks too.
//
// Dimensions are written OUTERMOST FIRST, like a row-major shape ({rows, cols});
// the CUDA encoder reverses them into the driver's innermost-first order.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "base/tensor_map_form.h"
#include "base/tma_rules.h"
#include "dsl/types.h"

namespace tessel {

// TensorMapInterleave and TensorMapOobFill come with the rules, in
// base/tma_rules.h.

// Which form the 128 bytes of a TensorMap hold: tessel's host form (below), read
// by the host copy engine, or the CUDA driver's opaque CUtensorMap.
enum class TensorMapEncoding : uint8_t { kHost, kCuda };

struct TensorMapSpec {
  DType dtype;
  const void* address = nullptr;
  // Elements per dimension, outermost first.
  Shape dims;
  // Byte strides of every dimension but the innermost (whose stride is the
  // element size), outermost first: size rank-1. Empty means dense row-major.
  std::vector<int64_t> strides;
  // Elements the box spans per dimension, outermost first.
  Shape box;
  // Traversal step per dimension, outermost first; the tile holds
  // ceil(box[i] / element_strides[i]) elements along i. Empty means all 1.
  std::vector<int64_t> element_strides;
  Swizzle swizzle = Swizzle::kNone;
  TensorMapInterleave interleave = TensorMapInterleave::kNone;
  TensorMapOobFill oob_fill = TensorMapOobFill::kZero;
};

// Checks every rule of cuTensorMapEncodeTiled (docs/tma.md), as the table
// in base/tma_rules.h states them, and that the spec's arrays fit its rank;
// returns kInvalidArgument with a message that names the rule, the dimension in
// the outermost-first numbering above ("box[1]") and the offending value.
// `compute_capability` is e.g. 90; 0 means host emulation and skips the device
// check. Where the table is stricter than the driver it says so; e.g. it
// rejects an innermost element stride other than 1 without interleave: the
// hardware silently ignores it there, so the host emulation and the device
// would disagree.
absl::Status validate(const TensorMapSpec& spec, int compute_capability);

// The spec of a dense row-major tensor at `address` (strides and element
// strides left to their defaults).
TensorMapSpec dense_spec(DType dtype, const void* address, Shape dims, Shape box, Swizzle swizzle = Swizzle::kNone);

// Fills empty strides (dense row-major) and element strides (all 1).
// Precondition: validate(spec, ...) is OK.
TensorMapSpec normalize(const TensorMapSpec& spec);

// The host form of the 128 bytes is described in base/tensor_map_form.h.

// A validated tensor map: its normalised spec and its 128 encoded bytes. The
// bytes are what a kernel receives by value, so they sit at offset 0, aligned
// to 64 as cuTensorMapEncodeTiled requires of its output.
class alignas(64) TensorMap {
 public:
  using Bytes = std::array<std::byte, kTensorMapBytes>;

  // Validates `spec` for host emulation and encodes the host form.
  static absl::StatusOr<TensorMap> encode_host(const TensorMapSpec& spec);
  // Decodes a host form; fails on a bad magic, version or any invalid field.
  static absl::StatusOr<TensorMap> from_bytes(std::span<const std::byte, kTensorMapBytes> bytes);
  // A dense row-major tensor with unit element strides (host form).
  static absl::StatusOr<TensorMap> tiled(DType dtype, const void* base, Shape dims, Shape box,
                                         Swizzle swizzle = Swizzle::kNone);
  // For encoders of other forms (the CUDA driver's): wraps the bytes they made
  // from `spec`, which must already be validated for their device.
  static TensorMap from_encoded(const TensorMapSpec& spec, TensorMapEncoding encoding,
                                std::span<const std::byte, kTensorMapBytes> bytes);

  const Bytes& bytes() const { return bytes_; }
  const void* data() const { return bytes_.data(); }
  TensorMapEncoding encoding() const { return encoding_; }
  // Normalised: strides and element strides are always filled in.
  const TensorMapSpec& spec() const { return spec_; }
  int rank() const { return static_cast<int>(spec_.dims.size()); }
  // The tile a copy moves to or from shared memory: ceil(box / element stride).
  Shape tile_shape() const;
  int64_t tile_bytes() const;

 private:
  TensorMap(const TensorMapSpec& spec, TensorMapEncoding encoding)
      : spec_(spec), encoding_(encoding) {}

  alignas(64) Bytes bytes_{};
  TensorMapSpec spec_;
  TensorMapEncoding encoding_ = TensorMapEncoding::kHost;
};

// Encoded host-form maps keyed by everything that goes into them, for the launch
// path. Thread-safe. Returned pointers stay valid for the cache's lifetime; a hit
// neither re-validates nor allocates.
class TensorMapCache {
 public:
  using Encoder = std::function<absl::StatusOr<TensorMap>(const TensorMapSpec&)>;
  // `encoder` makes the maps (the host form by default; a device's own encoding).
  explicit TensorMapCache(Encoder encoder = &TensorMap::encode_host) : encoder_(std::move(encoder)) {}

  absl::StatusOr<const TensorMap*> get_or_encode(const TensorMapSpec& spec);
  size_t size() const;

 private:
  // Fixed-size so a lookup builds no vectors. Strides are keyed as given: a spec
  // with empty strides and one with explicit dense strides get separate (equal)
  // entries.
  struct Key {
    uintptr_t address = 0;
    ScalarKind dtype = ScalarKind::kI32;
    uint8_t rank = 0;
    uint8_t num_strides = 0;
    uint8_t num_element_strides = 0;
    Swizzle swizzle = Swizzle::kNone;
    TensorMapInterleave interleave = TensorMapInterleave::kNone;
    TensorMapOobFill oob_fill = TensorMapOobFill::kZero;
    std::array<int64_t, kTensorMapMaxRank> dims{};
    std::array<int64_t, kTensorMapMaxRank - 1> strides{};
    std::array<int64_t, kTensorMapMaxRank> box{};
    std::array<int64_t, kTensorMapMaxRank> element_strides{};

    bool operator==(const Key&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.address, k.dtype, k.rank, k.num_strides,
                        k.num_element_strides, k.swizzle, k.interleave, k.oob_fill, k.dims,
                        k.strides, k.box, k.element_strides);
    }
  };

  Encoder encoder_;
  mutable absl::Mutex mu_;
  // unique_ptr keeps each map at a fixed address while the table rehashes.
  absl::flat_hash_map<Key, std::unique_ptr<TensorMap>> maps_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessel
