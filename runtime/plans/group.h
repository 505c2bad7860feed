// Groups of devices and their symmetric memory: the ranks a triggered plan
// copies between, all in one process or one per process of a job.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/device.h"
#include "runtime/plans/bootstrap.h"

namespace tessel {

class GroupImpl;
struct SymmetricBlock;

struct GroupOptions {
  // Address space reserved on every rank for symmetric allocations, which
  // grow inside it: what is mapped never moves, so copy chains armed with
  // peer addresses stay valid while the group allocates more.
  int64_t reserve_bytes = int64_t{64} << 30;
  // Memory is mapped in chunks of this size, rounded up to the device's
  // mapping granularity (2 MiB on NVIDIA GPUs, a page on the host).
  int64_t chunk_bytes = int64_t{64} << 20;
};

// Memory at the same offset on every rank of a group, so that rank r's copy
// of a byte has a known address on every peer. Freed when the last handle
// goes; the group outlives it.
class SymmetricBuffer {
 public:
  SymmetricBuffer() = default;
  // The offset in the group's symmetric space, the same on every rank.
  int64_t offset() const;
  size_t bytes() const;
  // Rank `rank`'s copy, for kernels on that rank (and peers' copy engines).
  // In a group joined across processes, a rank in another process has its
  // copy mapped here too, at an address of this process's own.
  void* data(int rank) const;
  template <class T>
  T* as(int rank) const {
    return static_cast<T*>(data(rank));
  }
  // Host <-> rank copies of `bytes` bytes at `offset` into the buffer, for a
  // rank whose device is in this process.
  absl::Status write(int rank, const void* src, size_t bytes, size_t offset = 0) const;
  absl::Status read(int rank, void* dst, size_t bytes, size_t offset = 0) const;

  bool empty() const { return block_ == nullptr; }
  const GroupImpl* group() const;

 private:
  friend class GroupImpl;
  explicit SymmetricBuffer(std::shared_ptr<SymmetricBlock> block) : block_(std::move(block)) {}
  std::shared_ptr<SymmetricBlock> block_;
};

// Devices acting as ranks 0..size()-1: all of one process, or one per
// process of a job (join). A cheap, copyable handle.
class Group {
 public:
  // Ranks are `devices`, in order: all host devices (simulated ranks in one
  // process, each with its own worker threads) or all CUDA GPUs, each able to
  // access every other's memory (peer access) and to run 64-bit stream memory
  // operations. A device may appear once.
  static absl::StatusOr<Group> create(std::vector<Device> devices, const GroupOptions& options = {});
  // `ranks` host devices of `threads` worker threads each.
  static absl::StatusOr<Group> host(int ranks, int threads = 1, const GroupOptions& options = {});
  // Collective over the processes `bootstrap` connects (one rank each, on
  // one machine): this process's `device` becomes rank bootstrap->rank().
  // Every process passes a device of the same backend (host or CUDA) and
  // the same options. Allocations become collective too (see allocate), as
  // do plans (TriggeredPlan::create).
  static absl::StatusOr<Group> join(Device device, std::shared_ptr<Bootstrap> bootstrap,
                                    const GroupOptions& options = {});

  int size() const;
  // Whether rank's device is in this process: every rank of a group made by
  // create() or host(), only rank() in one made by join().
  bool is_local(int rank) const;
  // This process's rank in a group made by join(); -1 where every rank is here.
  int rank() const;
  // The device of a rank in this process. A precondition, as for an index:
  // a rank without one here (see is_local) ends the process with a message.
  const Device& device(int rank) const;

  // Zero-filled memory at one offset on every rank; grows the mapped space
  // (without moving it) when needed. In a joined group every process
  // allocates, and frees, the same sizes in the same order: each allocation
  // compares what every process asks for and where it would go, and fails
  // on all of them where they differ.
  absl::StatusOr<SymmetricBuffer> allocate(size_t bytes) const;
  // Bytes mapped on each rank so far (chunks).
  int64_t mapped_bytes() const;

  // Copies `bytes` from rank's memory to peer's through their copy queue;
  // rank's device is in this process.
  // Fails while a triggered plan has chains armed on that queue: they would
  // run first, and the copy would wait on gates no kernel may open.
  absl::Status copy_to_peer(int rank, int peer, void* dst, const void* src, size_t bytes) const;

  GroupImpl& impl() const { return *impl_; }
  const std::shared_ptr<GroupImpl>& shared_impl() const { return impl_; }

 private:
  explicit Group(std::shared_ptr<GroupImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<GroupImpl> impl_;
};

}  // namespace tessel
