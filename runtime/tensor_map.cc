#include "runtime/tensor_map.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace tessel {

// The host form is written with memcpy of native integers; every host tessel
// runs on (x86-64, aarch64) is little-endian, which the layout promises.
static_assert(std::endian::native == std::endian::little);

namespace {

template <typename... Parts>
absl::Status invalid(const Parts&... parts) {
  return absl::InvalidArgumentError(absl::StrCat("tensor map: ", parts...));
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Saturates instead of overflowing: dense strides of a large tensor must come
// out "too large", never wrap around into something that passes.
int64_t saturating_mul(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}

// Byte strides of dims 0..rank-2 (outermost first) of a dense row-major tensor.
std::vector<int64_t> dense_strides(const Shape& dims, int64_t elem_bytes) {
  const size_t rank = dims.size();
  std::vector<int64_t> strides(rank - 1);
  int64_t s = elem_bytes;
  for (size_t j = rank - 1; j-- > 0;) {
    s = saturating_mul(s, dims[j + 1]);
    strides[j] = s;
  }
  return strides;
}

// The table's stride rules, on the strides the map will use: the user's, or
// dense row-major ones derived from the dims.
absl::Status check_spec_strides(const TensorMapSpec& spec, int64_t elem) {
  const size_t rank = spec.dims.size();
  if (rank < 2) return absl::OkStatus();
  const bool dense = spec.strides.empty();
  const std::vector<int64_t> strides = dense ? dense_strides(spec.dims, elem) : spec.strides;
  // Errors in strides the user never wrote must say where they came from.
  const char* origin = dense ? " (dense row-major)" : "";
  return tma::check_strides(strides, spec.interleave, origin);
}

// Every rule, unprefixed: the table's, and the spec's own shape.
absl::Status check_spec(const TensorMapSpec& spec, int compute_capability) {
  const size_t rank = spec.dims.size();
  TESSEL_RETURN_IF_ERROR(tma::check_rank(static_cast<int64_t>(rank)));
  if (spec.box.size() != rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("box has ", spec.box.size(), " entries but the tensor has rank ", rank));
  }
  if (!spec.strides.empty() && spec.strides.size() != rank - 1) {
    return absl::InvalidArgumentError(absl::StrCat("strides has ", spec.strides.size(), " entries; expected ", rank - 1,
                                                   " (every dimension but the innermost) or none for dense row-major"));
  }
  if (!spec.element_strides.empty() && spec.element_strides.size() != rank) {
    return absl::InvalidArgumentError(
        absl::StrCat("element_strides has ", spec.element_strides.size(), " entries but the tensor has rank ", rank));
  }
  TESSEL_RETURN_IF_ERROR(tma::check_dtype(spec.dtype));
  TESSEL_RETURN_IF_ERROR(tma::check_swizzle(spec.swizzle));
  TESSEL_RETURN_IF_ERROR(tma::check_interleave(spec.interleave, static_cast<int64_t>(rank)));
  TESSEL_RETURN_IF_ERROR(tma::check_oob_fill(spec.oob_fill, spec.dtype));
  TESSEL_RETURN_IF_ERROR(tma::check_address(spec.address, spec.interleave));
  TESSEL_RETURN_IF_ERROR(tma::check_dims(spec.dims));
  TESSEL_RETURN_IF_ERROR(tma::check_box(spec.dtype, spec.box, spec.swizzle, spec.interleave));
  TESSEL_RETURN_IF_ERROR(tma::check_element_strides(spec.element_strides, spec.interleave));
  TESSEL_RETURN_IF_ERROR(
      tma::check_box_bytes(spec.dtype, spec.box, spec.element_strides, spec.swizzle, spec.interleave));
  TESSEL_RETURN_IF_ERROR(check_spec_strides(spec, spec.dtype.bytes()));
  // 0 is host emulation, which has no device to ask.
  if (compute_capability != 0) {
    TESSEL_RETURN_IF_ERROR(tma::check_compute_capability(compute_capability));
  }
  return absl::OkStatus();
}

template <typename T>
void put(TensorMap::Bytes& b, size_t offset, T value) {
  std::memcpy(b.data() + offset, &value, sizeof(T));
}

template <typename T>
T get(const std::byte* p, size_t offset) {
  T value;
  std::memcpy(&value, p + offset, sizeof(T));
  return value;
}

void encode_host_form(const TensorMapSpec& s, TensorMap::Bytes& b) {
  b.fill(std::byte{0});
  put<uint32_t>(b, host_form::kMagic, kTensorMapHostMagic);
  put<uint16_t>(b, host_form::kVersion, kTensorMapHostVersion);
  put<uint8_t>(b, host_form::kDType, static_cast<uint8_t>(s.dtype.kind));
  put<uint8_t>(b, host_form::kRank, static_cast<uint8_t>(s.dims.size()));
  put<uint8_t>(b, host_form::kSwizzle, static_cast<uint8_t>(s.swizzle));
  put<uint8_t>(b, host_form::kInterleave, static_cast<uint8_t>(s.interleave));
  put<uint8_t>(b, host_form::kFill, static_cast<uint8_t>(s.oob_fill));
  put<uint8_t>(b, host_form::kElemSize, static_cast<uint8_t>(s.dtype.bytes()));
  put<uint64_t>(b, host_form::kAddress, reinterpret_cast<uintptr_t>(s.address));
  for (size_t i = 0; i < s.dims.size(); ++i) {
    put<uint64_t>(b, host_form::kDims + 8 * i, static_cast<uint64_t>(s.dims[i]));
    put<uint16_t>(b, host_form::kBox + 2 * i, static_cast<uint16_t>(s.box[i]));
    put<uint8_t>(b, host_form::kElementStrides + i, static_cast<uint8_t>(s.element_strides[i]));
  }
  for (size_t j = 0; j < s.strides.size(); ++j) {
    put<uint64_t>(b, host_form::kStrides + 8 * j, static_cast<uint64_t>(s.strides[j]));
  }
}

}  // namespace

absl::Status validate(const TensorMapSpec& spec, int compute_capability) {
  absl::Status status = check_spec(spec, compute_capability);
  if (status.ok()) return status;
  return prefixed("tensor map", status);
}

TensorMapSpec normalize(const TensorMapSpec& spec) {
  TensorMapSpec s = spec;
  if (s.strides.empty()) s.strides = dense_strides(s.dims, s.dtype.bytes());
  if (s.element_strides.empty()) s.element_strides.assign(s.dims.size(), 1);
  return s;
}

absl::StatusOr<TensorMap> TensorMap::encode_host(const TensorMapSpec& spec) {
  TESSEL_RETURN_IF_ERROR(validate(spec, /*compute_capability=*/0));
  TensorMap map(normalize(spec), TensorMapEncoding::kHost);
  encode_host_form(map.spec_, map.bytes_);
  return map;
}

absl::StatusOr<TensorMap> TensorMap::from_bytes(std::span<const std::byte, kTensorMapBytes> bytes) {
  const std::byte* p = bytes.data();
  const uint32_t magic = get<uint32_t>(p, host_form::kMagic);
  if (magic != kTensorMapHostMagic) {
    return invalid("bytes are not a host-form map: magic 0x", absl::Hex(magic), ", expected 0x",
                   absl::Hex(kTensorMapHostMagic));
  }
  const uint16_t version = get<uint16_t>(p, host_form::kVersion);
  if (version != kTensorMapHostVersion) {
    return invalid("host-form version ", version, " is not supported (this build reads ",
                   kTensorMapHostVersion, ")");
  }
  const int rank = get<uint8_t>(p, host_form::kRank);
  // The rank sizes the loop below, so it is checked before the other fields.
  if (absl::Status s = tma::check_rank(rank); !s.ok()) return prefixed("tensor map", s);
  TensorMapSpec spec;
  spec.dtype = DType{static_cast<ScalarKind>(get<uint8_t>(p, host_form::kDType))};
  spec.address =
      reinterpret_cast<const void*>(static_cast<uintptr_t>(get<uint64_t>(p, host_form::kAddress)));
  spec.swizzle = static_cast<Swizzle>(get<uint8_t>(p, host_form::kSwizzle));
  spec.interleave = static_cast<TensorMapInterleave>(get<uint8_t>(p, host_form::kInterleave));
  spec.oob_fill = static_cast<TensorMapOobFill>(get<uint8_t>(p, host_form::kFill));
  for (int i = 0; i < rank; ++i) {
    spec.dims.push_back(static_cast<int64_t>(get<uint64_t>(p, host_form::kDims + 8 * i)));
    spec.box.push_back(get<uint16_t>(p, host_form::kBox + 2 * i));
    spec.element_strides.push_back(get<uint8_t>(p, host_form::kElementStrides + i));
    if (i + 1 < rank)
      spec.strides.push_back(static_cast<int64_t>(get<uint64_t>(p, host_form::kStrides + 8 * i)));
  }
  TESSEL_RETURN_IF_ERROR(validate(spec, /*compute_capability=*/0));
  TensorMap map(spec, TensorMapEncoding::kHost);
  encode_host_form(map.spec_, map.bytes_);
  // Re-encoding catches what the fields above do not read: reserved bytes,
  // slots past the rank and an element size that disagrees with the dtype.
  if (!std::equal(map.bytes_.begin(), map.bytes_.end(), bytes.begin())) {
    return invalid(
        "host-form bytes are not canonical (nonzero reserved bytes or unused slots, "
        "or an element size that disagrees with the dtype)");
  }
  return map;
}

TensorMapSpec dense_spec(DType dtype, const void* address, Shape dims, Shape box, Swizzle swizzle) {
  TensorMapSpec spec;
  spec.dtype = dtype;
  spec.address = address;
  spec.dims = std::move(dims);
  spec.box = std::move(box);
  spec.swizzle = swizzle;
  return spec;
}

absl::StatusOr<TensorMap> TensorMap::tiled(DType dtype, const void* base, Shape dims, Shape box,
                                           Swizzle swizzle) {
  return encode_host(dense_spec(dtype, base, std::move(dims), std::move(box), swizzle));
}

TensorMap TensorMap::from_encoded(const TensorMapSpec& spec, TensorMapEncoding encoding,
                                  std::span<const std::byte, kTensorMapBytes> bytes) {
  TensorMap map(normalize(spec), encoding);
  std::copy(bytes.begin(), bytes.end(), map.bytes_.begin());
  return map;
}

Shape TensorMap::tile_shape() const {
  Shape tile(spec_.box.size());
  for (size_t i = 0; i < tile.size(); ++i)
    tile[i] = ceil_div(spec_.box[i], spec_.element_strides[i]);
  return tile;
}

int64_t TensorMap::tile_bytes() const { return numel(tile_shape()) * spec_.dtype.bytes(); }

// ---------------------------------------------------------------------------
// TensorMapCache

absl::StatusOr<const TensorMap*> TensorMapCache::get_or_encode(const TensorMapSpec& spec) {
  const size_t rank = spec.dims.size();
  if (rank < 1 || rank > kTensorMapMaxRank || spec.box.size() != rank ||
      spec.strides.size() > kTensorMapMaxRank - 1 ||
      spec.element_strides.size() > kTensorMapMaxRank) {
    // Too malformed to key; validation says why.
    absl::Status status = validate(spec, /*compute_capability=*/0);
    TESSEL_CHECK(!status.ok(), "a tensor map spec the cache cannot key passed validation");
    return status;
  }
  Key key;
  key.address = reinterpret_cast<uintptr_t>(spec.address);
  key.dtype = spec.dtype.kind;
  key.rank = static_cast<uint8_t>(rank);
  key.num_strides = static_cast<uint8_t>(spec.strides.size());
  key.num_element_strides = static_cast<uint8_t>(spec.element_strides.size());
  key.swizzle = spec.swizzle;
  key.interleave = spec.interleave;
  key.oob_fill = spec.oob_fill;
  std::copy(spec.dims.begin(), spec.dims.end(), key.dims.begin());
  std::copy(spec.strides.begin(), spec.strides.end(), key.strides.begin());
  std::copy(spec.box.begin(), spec.box.end(), key.box.begin());
  std::copy(spec.element_strides.begin(), spec.element_strides.end(), key.element_strides.begin());
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = maps_.find(key);
    if (it != maps_.end()) return it->second.get();
  }
  // Encode outside the lock; a racing thread's equal entry wins and ours is dropped.
  TESSEL_ASSIGN_OR_RETURN(TensorMap map, encoder_(spec));
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = maps_.try_emplace(key, nullptr);
  if (inserted) it->second = std::make_unique<TensorMap>(std::move(map));
  return it->second.get();
}

size_t TensorMapCache::size() const {
  absl::ReaderMutexLock lock(&mu_);
  return maps_.size();
}

}  // namespace tessel
