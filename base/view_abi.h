// The memory layout of a triggered view, shared by codegen (kernels read
// it) and the runtime (plans write it). A view lives in memory the kernel
// can read; the kernel parameter is a pointer to its header.
#pragma once

#include <cstdint>

namespace tessel {

inline constexpr uint32_t kViewVersion = 3;

// One 64-byte gate row per batch. Gates are never reset: epoch e is open
// once the low 32 bits of a word reach e.
struct GateRow {
  uint64_t ready;       // written by the owner's last contributor: epoch
  uint64_t arrival;     // written by the copy engine on the receiving rank: epoch
  uint64_t completion;  // written on the owner once every peer has the batch: epoch
  uint64_t error;       // nonzero after a failure (kGateTimeout, ...)
  uint64_t counter;     // contributor counter, used modulo contributors
  uint64_t reserved[3];
};
static_assert(sizeof(GateRow) == 64);

// Whether a gate word (ready or arrival) has reached `epoch`: the low 32 bits
// compare, as kernels compare them.
inline constexpr bool gate_open(uint64_t word, uint64_t epoch) {
  return static_cast<uint32_t>(word) >= static_cast<uint32_t>(epoch);
}

inline constexpr uint64_t kGateTimeout = 1;  // a bounded wait in a kernel gave up
inline constexpr uint64_t kViewBadBatch = 2;  // a kernel named a batch the view does not have

struct ViewBatch {
  uint32_t owner;         // rank that produces the batch
  uint32_t contributors;  // publishes that open it per epoch
};

struct ViewHeader {
  uint32_t version;      // kViewVersion
  uint32_t num_batches;
  uint32_t rank;         // the rank this view belongs to
  uint32_t world_size;
  uint64_t epoch;        // the epoch kernels publish and wait for
  uint64_t spin_limit;   // polls before a wait records kGateTimeout
  GateRow* gates;        // this rank's gate rows, one per batch
  ViewBatch* batches;    // num_batches entries
  uint64_t status;       // nonzero (kViewBadBatch) after a kernel misused the view
  // Host memory the device can write (pinned and mapped on CUDA): set to the
  // error code whenever a kernel records one in this view (status or a gate's
  // error word), so the host learns that an epoch went wrong without copying
  // anything back from the device.
  uint64_t* alarm;
  // A batch whose last contributor deferred its release (publish with
  // defer), for a later publish on this rank to carry: carry_tag(epoch,
  // batch), or 0. Only kernels write it.
  uint64_t carry;
};

// The carry word's value for `batch` deferred in `epoch` (kernels compute
// the same in codegen/views.cc).
inline constexpr uint64_t carry_tag(uint64_t epoch, uint64_t batch) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(epoch)) << 32) | (batch + 1);
}

}  // namespace tessel
