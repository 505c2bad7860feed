// Internal: a group's ranks, its symmetric space (one free list for every
// rank, since offsets are shared) and the plans with chains in its queues.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "runtime/plans/group.h"
#include "runtime/plans/plan_backend.h"

namespace tessel {

class PlanImpl;

// One allocation; returns its range to the group when the last handle goes.
struct SymmetricBlock {
  std::shared_ptr<GroupImpl> group;
  int64_t offset = 0;
  int64_t bytes = 0;
  ~SymmetricBlock();
};

class GroupImpl : public std::enable_shared_from_this<GroupImpl> {
 public:
  // Allocations start at this alignment (gate rows need 64 bytes, TMA 128).
  static constexpr int64_t kAlignment = 256;

  static absl::StatusOr<std::shared_ptr<GroupImpl>> create(std::vector<Device> devices, const GroupOptions& options);
  static absl::StatusOr<std::shared_ptr<GroupImpl>> join(Device device, std::shared_ptr<Bootstrap> bootstrap,
                                                         const GroupOptions& options);
  ~GroupImpl();

  int size() const { return static_cast<int>(devices_.size()); }
  bool is_local(int rank) const { return devices_[rank].has_value(); }
  // This process's rank in a joined group, else -1.
  int rank() const { return bootstrap_ != nullptr ? bootstrap_->rank() : -1; }
  // The processes of a joined group; null where every rank is here.
  Bootstrap* bootstrap() const { return bootstrap_.get(); }
  const Device& device(int rank) const;
  DeviceKind kind() const { return kind_; }
  GroupBackend& backend() const { return *backend_; }

  absl::StatusOr<SymmetricBuffer> allocate(int64_t bytes);
  void free(int64_t offset, int64_t bytes);
  int64_t mapped_bytes() const;
  uintptr_t base(int rank) const { return bases_[rank]; }
  // Whether [p, p + bytes) on `rank` lies inside the mapped symmetric space.
  bool contains(int rank, uintptr_t p, int64_t bytes) const;

  absl::Status copy_to_peer(int rank, int peer, void* dst, const void* src, size_t bytes);

  // Plans with chains in the queues (armed, active or failed), in arming
  // order. Plans take the lock to change their state and the list.
  absl::Mutex& plans_mu() ABSL_LOCK_RETURNED(plans_mu_) { return plans_mu_; }
  std::list<PlanImpl*>& queued_plans() ABSL_EXCLUSIVE_LOCKS_REQUIRED(plans_mu_) { return queued_plans_; }

 private:
  // Where an allocation goes: `offset`, once the mapped space is `mapped` bytes.
  struct Placement {
    int64_t offset = 0;
    int64_t mapped = 0;
  };

  GroupImpl(std::vector<std::optional<Device>> devices, DeviceKind kind, GroupOptions options,
            std::unique_ptr<GroupBackend> backend, std::shared_ptr<Bootstrap> bootstrap)
      : devices_(std::move(devices)),
        kind_(kind),
        options_(options),
        backend_(std::move(backend)),
        bootstrap_(std::move(bootstrap)) {}
  // Reserves the address space, once the backend is made.
  absl::Status reserve();
  Placement place(int64_t rounded) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // In a joined group, fails on every process unless all ask for the same.
  absl::Status agree(int64_t bytes, const Placement& p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Maps up to p.mapped and takes `rounded` bytes at p.offset from the free list.
  absl::Status take(int64_t rounded, const Placement& p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // One per rank: the device where it is in this process.
  const std::vector<std::optional<Device>> devices_;
  const DeviceKind kind_;
  const GroupOptions options_;
  const std::unique_ptr<GroupBackend> backend_;
  const std::shared_ptr<Bootstrap> bootstrap_;
  std::vector<uintptr_t> bases_;
  int64_t chunk_ = 0;

  mutable absl::Mutex mu_;
  int64_t mapped_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int64_t, int64_t> free_ ABSL_GUARDED_BY(mu_);  // offset -> bytes

  absl::Mutex plans_mu_;
  std::list<PlanImpl*> queued_plans_ ABSL_GUARDED_BY(plans_mu_);
};

// Defined by plan.cc, for the group's checks.
bool plan_uses_queue(const PlanImpl& plan, int rank, int peer);
const std::string& plan_name(const PlanImpl& plan);

}  // namespace tessel
