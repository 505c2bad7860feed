// Internal: AMD SDMA packets (gfx9, SDMA 4.4 as on MI300X) as pure data:
// the dwords a triggered plan's chain puts on a copy engine's ring, and the
// decoding a software engine (engine.h) uses to execute the same bytes.
// Layouts: ../shared/reference/amd.md section 1.
//
// A chain: POLL_REGMEM until the low 32 bits of the owner's ready word are
// >= the epoch, COPY_LINEAR per linear segment (split at the engine's
// largest count) or LINEAR_LARGE_SUB_WINDOW per 2-D segment, then ATOMIC
// ADD_RTN_64 on the peer's arrival word.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/plans/plan_backend.h"

namespace tessel::sdma {

using Dwords = std::vector<uint32_t>;

// Opcodes (DW0 bits 7:0) and sub-opcodes (bits 15:8).
inline constexpr uint32_t kOpNop = 0, kOpCopy = 1, kOpFence = 5, kOpPollRegmem = 8, kOpAtomic = 10;
inline constexpr uint32_t kSubCopyLinear = 0, kSubCopyLinearLargeSubWindow = 36;
// POLL_REGMEM compare functions (DW0 bits 30:28): (mem & mask) <op> reference.
inline constexpr uint32_t kPollEqual = 3, kPollGreaterEqual = 5;
// POLL_REGMEM retry count (DW5 bits 27:16) meaning "forever".
inline constexpr uint32_t kRetryForever = 0xFFF;
// ATOMIC operations (DW0 bits 31:25): TC_OP codes, ADD_RTN_64 as iris arms it.
inline constexpr uint32_t kAtomicAddReturn64 = 47;
// COPY_LINEAR's count field has 30 bits on gfx942 (1 GiB); 4 MiB (22 bits)
// is what every SDMA 4 engine takes.
inline constexpr uint64_t kMaxLinearCopy = uint64_t{1} << 30;
inline constexpr uint64_t kMaxLinearCopyAnySdma4 = uint64_t{1} << 22;

// Packet sizes in dwords.
inline constexpr int kCopyLinearDwords = 7, kSubWindowDwords = 20, kPollDwords = 6, kAtomicDwords = 8, kFenceDwords = 4;

// NOP filling `dwords` (>= 1): a header counting the zero dwords after it.
void nop(Dwords& out, int dwords);
// COPY_LINEAR packets moving `bytes` (> 0) from src to dst, each at most `max_chunk` bytes.
void copy_linear(Dwords& out, uint64_t src, uint64_t dst, uint64_t bytes, uint64_t max_chunk = kMaxLinearCopy);
// One LINEAR_LARGE_SUB_WINDOW packet: `height` rows of `width` bytes (both > 0).
void copy_sub_window(Dwords& out, const ChainCopy& copy);
// POLL_REGMEM on 32 bits of memory at `addr`: until (mem & mask) >= reference.
void poll_greater_equal(Dwords& out, uint64_t addr, uint32_t reference, uint32_t mask = 0xFFFFFFFF,
                        uint32_t interval = 10, uint32_t retries = kRetryForever);
// ATOMIC ADD_RTN_64 of `value` to the 64-bit word at `addr`.
void atomic_add64(Dwords& out, uint64_t addr, uint64_t value);
// FENCE: stores the 32-bit `value` at `addr` once earlier packets are done.
void fence(Dwords& out, uint64_t addr, uint32_t value);

// The chain of one delivery: poll on ready (its low 32 bits >= epoch),
// the copies (a segment of one row linear, chunked at max_linear; others
// sub-windows), then `arrival_add` added to the peer's arrival word.
Dwords delivery_chain(const uint64_t* ready, uint32_t epoch, const std::vector<ChainCopy>& copies, uint64_t* arrival,
                      uint64_t arrival_add, uint64_t max_linear = kMaxLinearCopy);

// Fields of DW0.
constexpr uint32_t op_of(uint32_t header) { return header & 0xFF; }
constexpr uint32_t sub_op_of(uint32_t header) { return header >> 8 & 0xFF; }
constexpr uint64_t address(uint32_t lo, uint32_t hi) { return uint64_t{hi} << 32 | lo; }

}  // namespace tessel::sdma
