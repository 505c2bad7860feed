// Internal: the one seam between triggered plans and the backends that arm
// them. Plans (plan.cc) decide what to copy where and when; a GroupBackend
// maps symmetric memory and turns armed batches into copy-engine chains
// (SDMA packet chains run by a software engine on the host, CUDA stream
// memory operations).
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/device.h"
#include "runtime/plans/bootstrap.h"

namespace tessel {

// `height` rows of `width` bytes; row i at src + i * src_pitch, dst + i * dst_pitch.
struct ChainCopy {
  uintptr_t src = 0;
  uintptr_t dst = 0;
  int64_t width = 0;
  int64_t height = 1;
  int64_t src_pitch = 0;
  int64_t dst_pitch = 0;
};

// One batch of one epoch. Once the owner's `ready` word reaches `epoch`,
// each delivery's copies run on the (owner, peer) queue and the peer's
// `arrival` word gets the epoch; once every peer has the batch the owner's
// `completion` word does (with no peers, right after ready opens).
struct ArmedBatch {
  struct Delivery {
    int peer = 0;
    std::vector<ChainCopy> copies;
    uint64_t* arrival = nullptr;
  };
  int owner = 0;
  uint64_t epoch = 0;
  uint64_t* ready = nullptr;
  uint64_t* completion = nullptr;
  std::vector<Delivery> deliveries;
};

// The chains one plan armed for one epoch.
class ArmedEpoch {
 public:
  virtual ~ArmedEpoch() = default;
  // Whether every chain has finished (delivered or released).
  virtual absl::StatusOr<bool> done() = 0;
  // Lets every chain finish without its gate: the ready words open, so
  // chains copy whatever the buffer holds (host and CUDA alike).
  virtual absl::Status release() = 0;
};

class GroupBackend {
 public:
  virtual ~GroupBackend() = default;
  // Mapping granularity: chunks are multiples of it.
  virtual int64_t granularity() const = 0;
  // Reserves `bytes` of address space on every rank; returns each rank's
  // base (in a joined group, where this process sees it; collective).
  virtual absl::StatusOr<std::vector<uintptr_t>> reserve(int64_t bytes) = 0;
  // Backs [offset, offset + bytes) of every rank's reservation with memory
  // that every rank can read and write. Never moves what is mapped. In a
  // joined group, collective (every process grows its space alike).
  virtual absl::Status map(int64_t offset, int64_t bytes) = 0;
  // The longest linear copy one chain step may make (schedules split longer
  // segments with split_linear); abutting segments are joined up to it.
  virtual int64_t max_linear_copy() const { return std::numeric_limits<int64_t>::max(); }
  // Zero-fills `bytes` at `p` in rank's memory. Called for every rank of an
  // allocation: in a joined group a rank in another process zeroes its own
  // copy, and this process only forgets what its chains left in the words there.
  virtual absl::Status zero(int rank, void* p, size_t bytes) = 0;
  // `count` zeroed 64-bit words in host memory that kernels on every rank
  // can store to at the same address (pinned and mapped on CUDA), for views'
  // alarms (and on CUDA, chains' done words). They live as long as the backend.
  virtual absl::StatusOr<uint64_t*> host_words(int count) = 0;
  // Appends one chain per (batch, peer) to the (owner, peer) queues, in order.
  virtual absl::StatusOr<std::unique_ptr<ArmedEpoch>> arm(std::vector<ArmedBatch> batches) = 0;
  // Stores `epoch` to each of an owner's ready words from the host, in
  // order (release order).
  virtual absl::Status open_gates(int owner, absl::Span<uint64_t* const> readies, uint64_t epoch) = 0;
  // A plain copy from `rank` to `peer` through their queue; the caller has
  // checked that no chain is armed on it.
  virtual absl::Status copy(int rank, int peer, void* dst, const void* src, size_t bytes) = 0;
};

// Opens the gates of `batches` from the host for `epoch`: one open_gates
// call per owner with its ready words in batch order (on CUDA a call per
// gate, a few microseconds each, would bound epochs of many small batches).
absl::Status open_gates_by_owner(GroupBackend& backend, absl::Span<const ArmedBatch> batches, uint64_t epoch);

absl::StatusOr<std::unique_ptr<GroupBackend>> make_host_group_backend(const std::vector<Device>& devices);
absl::StatusOr<std::unique_ptr<GroupBackend>> make_cuda_group_backend(const std::vector<Device>& devices);
// This process's rank of a group joined across processes. Host: every
// rank's symmetric memory is a memfd that each process maps. CUDA: chunks
// exported as file descriptors, which each process imports and maps.
absl::StatusOr<std::unique_ptr<GroupBackend>> make_host_joined_group_backend(const Device& device,
                                                                             std::shared_ptr<Bootstrap> bootstrap);
absl::StatusOr<std::unique_ptr<GroupBackend>> make_cuda_joined_group_backend(const Device& device,
                                                                             std::shared_ptr<Bootstrap> bootstrap);

}  // namespace tessel
