// Fuzz target: tensor maps from untrusted bytes. The first byte picks what
// the rest is: a host form for TensorMap::from_bytes (the host-form
// decoder), or a spec spelled field by field for validate(). Every outcome
// must be a Status, and what is accepted must hold together: a decoded map
// re-encodes to the same bytes, a valid spec encodes to a host form that
// decodes to its normalised spec, and the cache hands back that map.
#include <array>
#include <cstdlib>
#include <span>

#include "fuzz/reader.h"
#include "runtime/tensor_map.h"

namespace tessel::fuzz {
namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

bool same_spec(const TensorMapSpec& a, const TensorMapSpec& b) {
  return a.dtype == b.dtype && a.address == b.address && a.dims == b.dims && a.strides == b.strides && a.box == b.box &&
         a.element_strides == b.element_strides && a.swizzle == b.swizzle && a.interleave == b.interleave &&
         a.oob_fill == b.oob_fill;
}

void decode(Reader& r) {
  alignas(64) std::array<std::byte, kTensorMapBytes> bytes{};
  size_t n = 0;
  const uint8_t* rest = r.rest(&n);
  if (n > 0) std::memcpy(bytes.data(), rest, n < bytes.size() ? n : bytes.size());
  absl::StatusOr<TensorMap> map = TensorMap::from_bytes(bytes);
  if (!map.ok()) return;
  require(std::equal(bytes.begin(), bytes.end(), map->bytes().begin()));
  require(validate(map->spec(), 0).ok());
}

std::vector<int64_t> numbers(Reader& r, size_t count) {
  std::vector<int64_t> v(count);
  for (int64_t& x : v) x = r.number();
  return v;
}

void check_spec(Reader& r) {
  TensorMapSpec spec;
  spec.dtype = DType{static_cast<ScalarKind>(r.below(17))};
  const size_t rank = r.below(8);
  // Mostly arrays that fit the rank; sometimes not, or left to defaults.
  auto size = [&](size_t fits) { return r.below(8) == 0 ? r.below(8) : fits; };
  spec.dims = numbers(r, size(rank));
  spec.box = numbers(r, size(rank));
  if (r.flip()) spec.strides = numbers(r, size(rank > 0 ? rank - 1 : 0));
  if (r.flip()) spec.element_strides = numbers(r, size(rank));
  spec.swizzle = static_cast<Swizzle>(r.below(6));
  spec.interleave = static_cast<TensorMapInterleave>(r.below(5));
  spec.oob_fill = static_cast<TensorMapOobFill>(r.below(4));
  spec.address = r.flip() ? nullptr : reinterpret_cast<const void*>(static_cast<uintptr_t>(r.number()));
  const int cc = r.flip() ? 0 : static_cast<int>(r.below(120));
  const absl::Status status = validate(spec, cc);
  if (!status.ok()) {
    require(status.code() == absl::StatusCode::kInvalidArgument && !status.message().empty());
    return;
  }
  if (cc != 0) return;
  absl::StatusOr<TensorMap> map = TensorMap::encode_host(spec);
  require(map.ok());
  require(same_spec(map->spec(), normalize(spec)));
  require(map->tile_bytes() > 0);
  absl::StatusOr<TensorMap> back = TensorMap::from_bytes(map->bytes());
  require(back.ok() && back->bytes() == map->bytes());
  TensorMapCache cache;
  absl::StatusOr<const TensorMap*> cached = cache.get_or_encode(spec);
  require(cached.ok() && (*cached)->bytes() == map->bytes());
}

}  // namespace
}  // namespace tessel::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tessel::fuzz::Reader r(data, size);
  if (r.flip()) {
    tessel::fuzz::decode(r);
  } else {
    tessel::fuzz::check_spec(r);
  }
  return 0;
}
