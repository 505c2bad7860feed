#include "runtime/host/host_tma.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "base/status.h"
#include "base/tensor_map_form.h"
#include "base/tma_rules.h"
#include "dsl/types.h"

namespace tessel {

namespace {

// memcpy: the map is raw bytes, which a typed pointer may not alias.
template <typename T>
T get(const std::byte* p, size_t offset) {
  T value;
  std::memcpy(&value, p + offset, sizeof(T));
  return value;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

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

CopyPlan make_plan(const void* map_bytes, const int32_t* coords) {
  const auto* p = static_cast<const std::byte*>(map_bytes);
  TESSEL_CHECK(get<uint32_t>(p, host_form::kMagic) == kTensorMapHostMagic &&
                   get<uint16_t>(p, host_form::kVersion) == kTensorMapHostVersion,
               "host TMA copy given a tensor map that is not in tessel's host form");
  const int rank = get<uint8_t>(p, host_form::kRank);
  TESSEL_CHECK(rank >= 1 && rank <= kTensorMapMaxRank, "host-form tensor map with a bad rank");
  CopyPlan plan;
  plan.base = reinterpret_cast<const std::byte*>(static_cast<uintptr_t>(get<uint64_t>(p, host_form::kAddress)));
  plan.elem = get<uint8_t>(p, host_form::kElemSize);
  plan.nan_fill = static_cast<TensorMapOobFill>(get<uint8_t>(p, host_form::kFill)) == TensorMapOobFill::kNan;
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
