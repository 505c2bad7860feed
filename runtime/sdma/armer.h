// Internal: triggered plans' batches as SDMA packet chains on user-mode
// queues, one per (owner, peer), and one per owner for its completions.
// Host groups run them on software engines (engine.h), HIP groups on KFD
// queues; both arm through this.
//
// A delivery is a chain on the (owner, peer) queue: poll the owner's ready
// word, copy, add to the peer's arrival word. The owner's completion opens
// by a chain on its own queue that polls every peer's arrival word and then
// adds to the completion word. Arrival and completion words change only by
// these adds (and by zero-filling the memory they lie in), so the armer
// knows what each will hold once its chains have run, and adds the
// difference to the epoch.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/plans/plan_backend.h"
#include "runtime/sdma/engine.h"

namespace tessel::sdma {

class Armer {
 public:
  // Makes the queue from `rank` to `peer` (peer == rank: the owner's own).
  using MakeQueue = std::function<absl::StatusOr<std::unique_ptr<Queue>>(int rank, int peer)>;
  // `what` prefixes errors ("host group"); queues are made at first use.
  Armer(std::string what, MakeQueue make_queue) : what_(std::move(what)), make_queue_(std::move(make_queue)) {}

  // Arms every batch's chains, or none where one does not fit its queue.
  // `release` lets them finish without the kernels (opens the ready words).
  absl::StatusOr<std::unique_ptr<ArmedEpoch>> arm(std::vector<ArmedBatch> batches,
                                                  std::function<absl::Status()> release);
  // A plain copy through the (rank, peer) queue, waited for (DeadlineExceeded
  // where the engine does not finish within `limit`).
  absl::Status copy(int rank, int peer, void* dst, const void* src, size_t bytes, absl::Duration limit);
  // [p, p + bytes) was zero-filled: the words in it hold 0.
  void zeroed(const void* p, size_t bytes);
  // Destroys the queues (a software engine stops).
  void close();

 private:
  absl::StatusOr<Queue*> queue_locked(std::pair<int, int> key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string what_;
  const MakeQueue make_queue_;
  absl::Mutex mu_;
  std::map<std::pair<int, int>, std::unique_ptr<Queue>> queues_ ABSL_GUARDED_BY(mu_);
  // What each arrival and completion word holds once the chains armed on it have run.
  std::map<const uint64_t*, uint64_t> words_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessel::sdma
