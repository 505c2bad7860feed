#include "runtime/tensor_map.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace tessel {

// The host form is written with memcpy of native integers; every host tessel
// runs on (x86-64, aarch64) is little-endian, which the layout promises.
static_assert(std::endian::native == std::endian::little);

namespace {

constexpr int64_t kMaxGlobalDim = int64_t{1} << 32;
constexpr int64_t kStrideLimit = int64_t{1} << 40;
constexpr int64_t kMaxBoxDim = 256;
constexpr int64_t kMaxElementStride = 8;
constexpr int kNumScalarKinds = static_cast<int>(ScalarKind::kF64) + 1;


template <typename... Parts>
absl::Status invalid(const Parts&... parts) {
  return absl::InvalidArgumentError(absl::StrCat("tensor map: ", parts...));
}

// Debian's Abseil keeps absl::string_view distinct from std::string_view, so
// names reach StrCat as C strings or std::string, whichever view a name has.
const char* interleave_name(TensorMapInterleave i) {
  switch (i) {
    case TensorMapInterleave::kNone:
      return "no";
    case TensorMapInterleave::k16B:
      return "16B";
    case TensorMapInterleave::k32B:
      return "32B";
  }
  return "?";
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

absl::Status validate_strides(const TensorMapSpec& spec, int64_t elem) {
  const size_t rank = spec.dims.size();
  if (rank < 2) return absl::OkStatus();
  const bool dense = spec.strides.empty();
  const std::vector<int64_t> strides = dense ? dense_strides(spec.dims, elem) : spec.strides;
  // Errors in strides the user never wrote must say where they came from.
  const char* origin = dense ? " (dense row-major)" : "";
  const bool i32b = spec.interleave == TensorMapInterleave::k32B;
  const int64_t multiple = i32b ? 32 : 16;
  for (size_t j = 0; j + 1 < rank; ++j) {
    const int64_t s = strides[j];
    if (s <= 0) return invalid("strides[", j, "] = ", s, " bytes", origin, " is not positive");
    if (s % multiple != 0) {
      return invalid("strides[", j, "] = ", s, " bytes", origin, " is not a multiple of ", multiple,
                     i32b ? " (required with 32B interleave)" : "");
    }
    if (s >= kStrideLimit) {
      return invalid("strides[", j, "] = ", s, " bytes", origin, " is not below 2^40");
    }
  }
  const size_t inner = rank - 1;
  const int64_t row_bytes = spec.dims[inner] * elem;
  if (strides[inner - 1] < row_bytes) {
    return invalid("strides[", inner - 1, "] = ", strides[inner - 1], " bytes", origin,
                   " is less than one row of the innermost dimension: dims[", inner, "] * ", elem,
                   " bytes = ", row_bytes, " bytes");
  }
  for (size_t j = inner - 1; j-- > 0;) {
    int64_t needed;
    if (__builtin_mul_overflow(strides[j + 1], spec.dims[j + 1], &needed) || strides[j] < needed) {
      return invalid("strides[", j, "] = ", strides[j], " bytes", origin, " does not cover dims[",
                     j + 1, "] = ", spec.dims[j + 1], " steps of strides[", j + 1,
                     "] = ", strides[j + 1], " bytes");
    }
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
  const size_t rank = spec.dims.size();
  if (rank < 1 || rank > kTensorMapMaxRank) return invalid("rank ", rank, " is outside [1, 5]");
  if (spec.box.size() != rank) {
    return invalid("box has ", spec.box.size(), " entries but the tensor has rank ", rank);
  }
  if (!spec.strides.empty() && spec.strides.size() != rank - 1) {
    return invalid("strides has ", spec.strides.size(), " entries; expected ", rank - 1,
                   " (every dimension but the innermost) or none for dense row-major");
  }
  if (!spec.element_strides.empty() && spec.element_strides.size() != rank) {
    return invalid("element_strides has ", spec.element_strides.size(),
                   " entries but the tensor has rank ", rank);
  }
  const int kind = static_cast<int>(spec.dtype.kind);
  if (kind < 0 || kind >= kNumScalarKinds) return invalid("dtype ", kind, " is unknown");
  if (spec.dtype.is_bool()) return invalid("dtype i1 is not a TMA data type");
  if (static_cast<int>(spec.swizzle) > static_cast<int>(Swizzle::k128B)) {
    return invalid("swizzle ", static_cast<int>(spec.swizzle), " is unknown");
  }
  if (static_cast<int>(spec.interleave) > static_cast<int>(TensorMapInterleave::k32B)) {
    return invalid("interleave ", static_cast<int>(spec.interleave), " is unknown");
  }
  if (static_cast<int>(spec.oob_fill) > static_cast<int>(TensorMapOobFill::kNan)) {
    return invalid("out-of-bounds fill ", static_cast<int>(spec.oob_fill), " is unknown");
  }
  const bool interleaved = spec.interleave != TensorMapInterleave::kNone;
  if (interleaved && rank < 3) {
    return invalid("rank ", rank, " is below 3, the minimum with ",
                   interleave_name(spec.interleave), " interleave");
  }
  if (spec.address == nullptr) return invalid("address is null");
  const uintptr_t address = reinterpret_cast<uintptr_t>(spec.address);
  const bool i32b = spec.interleave == TensorMapInterleave::k32B;
  const uintptr_t alignment = i32b ? 32 : 16;
  if (address % alignment != 0) {
    return invalid("address 0x", absl::Hex(address), " is not ", alignment, "-byte aligned",
                   i32b ? " (required with 32B interleave)" : "");
  }
  for (size_t i = 0; i < rank; ++i) {
    if (spec.dims[i] < 1 || spec.dims[i] > kMaxGlobalDim) {
      return invalid("dims[", i, "] = ", spec.dims[i], " is outside [1, 2^32]");
    }
  }
  for (size_t i = 0; i < rank; ++i) {
    if (spec.box[i] < 1 || spec.box[i] > kMaxBoxDim) {
      return invalid("box[", i, "] = ", spec.box[i], " is outside [1, 256]");
    }
  }
  for (size_t i = 0; i < spec.element_strides.size(); ++i) {
    const int64_t e = spec.element_strides[i];
    if (e < 1 || e > kMaxElementStride) {
      return invalid("element_strides[", i, "] = ", e, " is outside [1, 8]");
    }
  }
  const size_t inner = rank - 1;
  const int64_t elem = spec.dtype.bytes();
  if (!interleaved && !spec.element_strides.empty() && spec.element_strides[inner] != 1) {
    return invalid("element_strides[", inner, "] = ", spec.element_strides[inner],
                   " must be 1 without interleave: TMA ignores the innermost element stride");
  }
  const int64_t inner_box_bytes = spec.box[inner] * elem;
  if (!interleaved && inner_box_bytes % 16 != 0) {
    return invalid("box[", inner, "] * ", elem, " bytes = ", inner_box_bytes,
                   " bytes is not a multiple of 16 (required without interleave)");
  }
  const int64_t swizzle_span = swizzle_bytes(spec.swizzle);
  if (swizzle_span != 0 && inner_box_bytes > swizzle_span) {
    return invalid(std::string(swizzle_name(spec.swizzle)),
                   " swizzle allows an inner box of at most ", swizzle_span, " bytes, but box[",
                   inner, "] * ", elem, " bytes = ", inner_box_bytes, " bytes");
  }
  if (i32b && spec.swizzle != Swizzle::k32B) {
    return invalid("32B interleave requires 32B swizzle, got swizzle ",
                   std::string(swizzle_name(spec.swizzle)));
  }
  TESSEL_RETURN_IF_ERROR(validate_strides(spec, elem));
  if (spec.oob_fill == TensorMapOobFill::kNan && !spec.dtype.is_float()) {
    return invalid("NaN out-of-bounds fill needs a floating-point dtype, got ",
                   std::string(spec.dtype.name()));
  }
  if (compute_capability != 0 && compute_capability < 90) {
    return invalid("compute capability ", compute_capability,
                   " is below 90: tensor maps need sm_90 or newer");
  }
  return absl::OkStatus();
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
  if (rank < 1 || rank > kTensorMapMaxRank) return invalid("rank ", rank, " is outside [1, 5]");
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

// ---------------------------------------------------------------------------
// Host copy engine

namespace {

// A copy's geometry, padded to rank 5 with leading unit dimensions so one
// recursion handles every rank.
struct CopyPlan {
  const std::byte* base = nullptr;
  int64_t elem = 0;
  bool nan_fill = false;
  uint64_t nan_bits = 0;
  int64_t coord[kTensorMapMaxRank];
  int64_t es[kTensorMapMaxRank];
  int64_t stride[kTensorMapMaxRank];  // bytes; the innermost is the element size
  int64_t tile[kTensorMapMaxRank];
  // Tile indices [lo, hi) of each dimension that land inside the tensor.
  int64_t lo[kTensorMapMaxRank];
  int64_t hi[kTensorMapMaxRank];
  int64_t block[kTensorMapMaxRank];  // tile bytes per index of the dimension
};

uint64_t quiet_nan_bits(ScalarKind kind) {
  switch (kind) {
    case ScalarKind::kF16:
      return 0x7E00;
    case ScalarKind::kBF16:
      return 0x7FC0;
    case ScalarKind::kF32:
      return 0x7FC00000;
    case ScalarKind::kF64:
      return 0x7FF8000000000000;
    default:
      return 0;
  }
}

CopyPlan make_plan(const void* map_bytes, const int32_t* coords) {
  const auto* p = static_cast<const std::byte*>(map_bytes);
  TESSEL_CHECK(get<uint32_t>(p, host_form::kMagic) == kTensorMapHostMagic &&
                   get<uint16_t>(p, host_form::kVersion) == kTensorMapHostVersion,
               "host TMA copy given a tensor map that is not in tessel's host form");
  const int rank = get<uint8_t>(p, host_form::kRank);
  TESSEL_CHECK(rank >= 1 && rank <= kTensorMapMaxRank, "host-form tensor map with a bad rank");
  CopyPlan plan;
  plan.base =
      reinterpret_cast<const std::byte*>(static_cast<uintptr_t>(get<uint64_t>(p, host_form::kAddress)));
  plan.elem = get<uint8_t>(p, host_form::kElemSize);
  plan.nan_fill =
      static_cast<TensorMapOobFill>(get<uint8_t>(p, host_form::kFill)) == TensorMapOobFill::kNan;
  plan.nan_bits = quiet_nan_bits(static_cast<ScalarKind>(get<uint8_t>(p, host_form::kDType)));
  const int pad = kTensorMapMaxRank - rank;
  for (int d = 0; d < kTensorMapMaxRank; ++d) {
    const int i = d - pad;  // the map's dimension, or < 0 for padding
    const int64_t dim = i < 0 ? 1 : static_cast<int64_t>(get<uint64_t>(p, host_form::kDims + 8 * i));
    const int64_t box = i < 0 ? 1 : get<uint16_t>(p, host_form::kBox + 2 * i);
    plan.es[d] = i < 0 ? 1 : get<uint8_t>(p, host_form::kElementStrides + i);
    plan.coord[d] = i < 0 ? 0 : coords[i];
    plan.stride[d] = i < 0           ? 0
                     : i == rank - 1 ? plan.elem
                                     : static_cast<int64_t>(get<uint64_t>(p, host_form::kStrides + 8 * i));
    plan.tile[d] = ceil_div(box, plan.es[d]);
    const int64_t c = plan.coord[d];
    const int64_t lo = c >= 0 ? 0 : ceil_div(-c, plan.es[d]);
    const int64_t hi = dim > c ? ceil_div(dim - c, plan.es[d]) : 0;
    plan.lo[d] = std::min(lo, plan.tile[d]);
    plan.hi[d] = std::clamp(hi, plan.lo[d], plan.tile[d]);
  }
  int64_t block = plan.elem;
  for (int d = kTensorMapMaxRank; d-- > 0;) {
    plan.block[d] = block;
    block *= plan.tile[d];
  }
  return plan;
}

void fill(const CopyPlan& plan, std::byte* dst, int64_t bytes) {
  if (bytes <= 0) return;
  if (!plan.nan_fill) {
    std::memset(dst, 0, bytes);
    return;
  }
  // Write one element, then double the filled prefix: few calls for long runs.
  std::memcpy(dst, &plan.nan_bits, plan.elem);
  int64_t done = plan.elem;
  while (done < bytes) {
    const int64_t n = std::min(done, bytes - done);
    std::memcpy(dst + done, dst, n);
    done += n;
  }
}

void load_level(const CopyPlan& plan, int d, const std::byte* src, std::byte* dst) {
  const int64_t lo = plan.lo[d], hi = plan.hi[d], blk = plan.block[d];
  fill(plan, dst, lo * blk);
  fill(plan, dst + hi * blk, (plan.tile[d] - hi) * blk);
  if (d == kTensorMapMaxRank - 1) {
    // Innermost: one contiguous run, or a gather when the element stride is > 1.
    if (hi == lo) return;  // the run's address may lie outside the tensor
    const int64_t e = plan.elem, es = plan.es[d];
    const std::byte* row = src + (plan.coord[d] + lo * es) * e;
    if (es == 1) {
      std::memcpy(dst + lo * e, row, (hi - lo) * e);
    } else {
      for (int64_t k = lo; k < hi; ++k, row += es * e) std::memcpy(dst + k * e, row, e);
    }
    return;
  }
  for (int64_t k = lo; k < hi; ++k) {
    const int64_t g = plan.coord[d] + k * plan.es[d];
    load_level(plan, d + 1, src + g * plan.stride[d], dst + k * blk);
  }
}

void store_level(const CopyPlan& plan, int d, std::byte* dst, const std::byte* src) {
  const int64_t lo = plan.lo[d], hi = plan.hi[d], blk = plan.block[d];
  if (d == kTensorMapMaxRank - 1) {
    if (hi == lo) return;  // the run's address may lie outside the tensor
    const int64_t e = plan.elem, es = plan.es[d];
    std::byte* row = dst + (plan.coord[d] + lo * es) * e;
    if (es == 1) {
      std::memcpy(row, src + lo * e, (hi - lo) * e);
    } else {
      for (int64_t k = lo; k < hi; ++k, row += es * e) std::memcpy(row, src + k * e, e);
    }
    return;
  }
  for (int64_t k = lo; k < hi; ++k) {
    const int64_t g = plan.coord[d] + k * plan.es[d];
    store_level(plan, d + 1, dst + g * plan.stride[d], src + k * blk);
  }
}

}  // namespace

void host_tma_load(const void* map_bytes, const int32_t* coords, void* smem) {
  const CopyPlan plan = make_plan(map_bytes, coords);
  load_level(plan, 0, plan.base, static_cast<std::byte*>(smem));
}

void host_tma_store(const void* map_bytes, const int32_t* coords, const void* smem) {
  const CopyPlan plan = make_plan(map_bytes, coords);
  // The map holds the tensor's address as const (a load only reads it); a store
  // map describes writable memory by construction.
  store_level(plan, 0, const_cast<std::byte*>(plan.base), static_cast<const std::byte*>(smem));
}

}  // namespace tessel
