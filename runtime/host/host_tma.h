// Internal to the host backend: its TMA copy engine, what JIT-compiled host
// kernels call (through the entry points base/host_abi.h names) where a GPU
// would run a cp.async.bulk.tensor copy. It reads tessel's host form of a
// tensor map (base/tensor_map_form.h).
#pragma once

#include <cstdint>

namespace tessel {

// `map_bytes` is a host-form map (abort on anything else: a kernel was handed a
// map no host encoder made). `coords` has one entry per dimension, outermost
// first, and may be negative or past the tensor's end.
//
// Load: copies the box at `coords` into `smem` as a dense row-major tile of
// ceil(box[i] / element_strides[i]) elements per dimension; out-of-bounds
// elements become zero, or with NaN fill the dtype's quiet NaN (0x7E00 f16,
// 0x7FC0 bf16, 0x7FC00000 f32, 0x7FF8000000000000 f64). Swizzle is not applied:
// host shared memory holds the tile unswizzled.
void host_tma_load(const void* map_bytes, const int32_t* coords, void* smem);
// Store: writes the tile in `smem` back at `coords`, dropping out-of-bounds
// elements.
void host_tma_store(const void* map_bytes, const int32_t* coords, const void* smem);

}  // namespace tessel
