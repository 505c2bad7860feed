// Triggered copy plans: a kernel publishes a batch by opening a gate, and
// copy chains armed in advance carry it to every peer without spending
// compute units. See docs/guide.md ("Triggered copy plans") for a walk-through.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "base/view_abi.h"
#include "runtime/plans/group.h"
#include "runtime/plans/schedule.h"

namespace tessel {

class PlanImpl;

// armed: chains wait for this epoch's gates. active: views handed out,
// kernels may publish. complete: every batch reached every peer. failed: an
// epoch timed out or a kernel reported an error. aborted, destroyed: final.
enum class PlanState { kArmed, kActive, kComplete, kFailed, kAborted, kDestroyed };
absl::string_view state_name(PlanState state);

// The last epoch a plan may run: gates compare the low 32 bits.
inline constexpr uint64_t kMaxEpoch = 0xFFFFFFFFu;

struct PlanOptions {
  // Named in every error.
  std::string name = "plan";
  // The first epoch armed (gates start at 0, so any epoch >= 1 works).
  uint64_t first_epoch = 1;
  // Polls of a gate before a kernel's wait gives up and records kGateTimeout;
  // 0: about 10 s on the group's devices.
  uint64_t spin_limit = 0;
  // How long end_device_epoch() and run() wait for delivery.
  absl::Duration timeout = absl::Seconds(10);
  // end_device_epoch() arms the next epoch's chains before it waits for this
  // epoch's, so the host's arming overlaps the transfer and next_epoch() has
  // nothing left to do. Done only while no plan armed later shares the
  // group; plans armed after that cannot begin until this plan's next epoch
  // has begun (their chains queue behind it).
  bool arm_ahead = false;
};

// A cheap, copyable handle; the plan is destroyed with its last handle.
class TriggeredPlan {
 public:
  // Collective over the group: `schedules[r]` is rank r's schedule, all
  // identical (digest compared). The schedule's shards lie back to back in
  // `buffer` (rank r's at r * shard_bytes), which must come from the
  // group's symmetric allocation. Allocates a gate row per batch on every
  // rank and arms the first epoch. In a group joined across processes every
  // process creates the plan, with the same schedules and first epoch
  // (compared), and arms the chains of its own rank's batches.
  static absl::StatusOr<TriggeredPlan> create(const Group& group, const SymmetricBuffer& buffer,
                                              std::vector<Schedule> schedules, PlanOptions options = {});

  PlanState state() const;
  uint64_t epoch() const;
  const Schedule& schedule() const;
  const std::string& name() const;

  // armed -> active. Returns one view per rank, for that rank's kernels
  // (null for a rank in another process). Plans of a group share copy
  // queues, so plans begin in the order they were armed.
  absl::StatusOr<std::vector<ViewHeader*>> begin_device_epoch();
  // active -> complete once every batch has reached every peer, or -> failed
  // after the timeout or when a kernel recorded an error in a gate or view.
  // Across processes each process waits for what it can see: its ranks'
  // batches delivered to every peer, and every peer's batches delivered to
  // its ranks.
  absl::Status end_device_epoch();
  // complete -> armed for the next epoch. Collective in a joined group: it
  // returns once every process has called it (and fails on all where one's
  // plan is not complete), so that no rank publishes into a buffer a peer
  // still reads.
  absl::Status next_epoch();
  // Opens rank's i-th batch from the host, as its last contributor would: for
  // data the host wrote or waited for. The epoch must be active, and rank's
  // device in this process.
  absl::Status publish(int rank, int i);
  // One epoch driven by the host: begin, open every gate, end. For data
  // already in the buffer (written by earlier kernels or copies). No kernel
  // takes part, so the views are left alone, and each rank's gates open in
  // one command.
  absl::Status run();
  // armed, active or failed -> aborted: chains still queued are released
  // (on CUDA they run, copying whatever the buffer holds). In arming order.
  absl::Status abort();
  // Any state -> destroyed: releases what is armed and frees the gates.
  absl::Status destroy();

  // The gate number of rank's i-th batch, for publish()/wait() in kernels.
  absl::StatusOr<int64_t> batch_id(int rank, int i) const;

 private:
  explicit TriggeredPlan(std::shared_ptr<PlanImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<PlanImpl> impl_;
};

}  // namespace tessel
