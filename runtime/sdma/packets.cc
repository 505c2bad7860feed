#include "runtime/sdma/packets.h"

#include <algorithm>

namespace tessel::sdma {
namespace {

uint32_t lo(uint64_t v) { return static_cast<uint32_t>(v); }
uint32_t hi(uint64_t v) { return static_cast<uint32_t>(v >> 32); }
uint64_t bits(const void* p) { return reinterpret_cast<uintptr_t>(p); }

}  // namespace

void nop(Dwords& out, int dwords) {
  out.push_back(kOpNop | static_cast<uint32_t>(dwords - 1) << 16);
  out.insert(out.end(), dwords - 1, 0);
}

void copy_linear(Dwords& out, uint64_t src, uint64_t dst, uint64_t bytes, uint64_t max_chunk) {
  for (uint64_t done = 0; done < bytes;) {
    const uint64_t n = std::min(bytes - done, max_chunk);
    // count is bytes - 1; parameter (DW2) holds the endian swaps, none.
    out.insert(out.end(), {kOpCopy | kSubCopyLinear << 8, static_cast<uint32_t>(n - 1), 0, lo(src + done),
                           hi(src + done), lo(dst + done), hi(dst + done)});
    done += n;
  }
}

void copy_sub_window(Dwords& out, const ChainCopy& c) {
  // Positions (x in bytes, y, z) are 0: the bases point at the window.
  // Pitches and the rectangle are stored minus one, slice pitches whole
  // (48 bits), depth 1 as rect_z 0.
  const uint64_t src_slice = static_cast<uint64_t>(c.src_pitch) * c.height;
  const uint64_t dst_slice = static_cast<uint64_t>(c.dst_pitch) * c.height;
  out.insert(out.end(), {kOpCopy | kSubCopyLinearLargeSubWindow << 8,
                         lo(c.src),
                         hi(c.src),
                         0,
                         0,
                         0,
                         static_cast<uint32_t>(c.src_pitch - 1),
                         lo(src_slice),
                         hi(src_slice) & 0xFFFF,
                         lo(c.dst),
                         hi(c.dst),
                         0,
                         0,
                         0,
                         static_cast<uint32_t>(c.dst_pitch - 1),
                         lo(dst_slice),
                         hi(dst_slice) & 0xFFFF,
                         static_cast<uint32_t>(c.width - 1),
                         static_cast<uint32_t>(c.height - 1),
                         0});
}

void poll_greater_equal(Dwords& out, uint64_t addr, uint32_t reference, uint32_t mask, uint32_t interval,
                        uint32_t retries) {
  // mem_poll (bit 31): memory, not a register; hdp_flush (bit 26) off.
  out.insert(out.end(), {kOpPollRegmem | kPollGreaterEqual << 28 | 1u << 31, lo(addr), hi(addr), reference, mask,
                         (interval & 0xFFFF) | (retries & 0xFFF) << 16});
}

void atomic_add64(Dwords& out, uint64_t addr, uint64_t value) {
  // loop (bit 16) off; compare data and loop interval unused.
  out.insert(out.end(), {kOpAtomic | kAtomicAddReturn64 << 25, lo(addr), hi(addr), lo(value), hi(value), 0, 0, 0});
}

void fence(Dwords& out, uint64_t addr, uint32_t value) { out.insert(out.end(), {kOpFence, lo(addr), hi(addr), value}); }

Dwords delivery_chain(const uint64_t* ready, uint32_t epoch, const std::vector<ChainCopy>& copies, uint64_t* arrival,
                      uint64_t arrival_add, uint64_t max_linear) {
  Dwords out;
  poll_greater_equal(out, bits(ready), epoch);
  for (const ChainCopy& c : copies) {
    const bool linear = c.height == 1 || (c.src_pitch == c.width && c.dst_pitch == c.width);
    if (linear) {
      copy_linear(out, c.src, c.dst, static_cast<uint64_t>(c.width) * c.height, max_linear);
    } else {
      copy_sub_window(out, c);
    }
  }
  if (arrival != nullptr) atomic_add64(out, bits(arrival), arrival_add);
  return out;
}

}  // namespace tessel::sdma
