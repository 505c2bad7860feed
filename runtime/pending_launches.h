// The streams on which a module's kernels were launched since its buffers
// in device memory (the error word, the debug buffer) were last read. A
// read clears what it read, so it must wait for every one of those launches:
// a device's synchronize may read the module at once, a stream's only where
// the module has no launch pending on another stream, whose kernel may still
// be writing; that stream's synchronize, or the device's, reads it later.
#pragma once

#include <algorithm>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/container/inlined_vector.h"
#include "absl/synchronization/mutex.h"

namespace tessel {

class PendingLaunches {
 public:
  // Every launch of one of the module's kernels, on `stream` (null: the
  // default stream), whether direct or in a graph.
  void add(const void* stream) {
    absl::MutexLock lock(&mu_);
    if (std::find(streams_.begin(), streams_.end(), stream) == streams_.end()) streams_.push_back(stream);
  }
  // Whether the module's buffers may be read now, which leaves no launch
  // pending. After the device synchronized (no `done`): where any launch
  // was pending. After stream `done` synchronized, its launches done: where
  // the module had launches there and has none pending elsewhere.
  bool take(std::optional<const void*> done = std::nullopt) {
    absl::MutexLock lock(&mu_);
    if (!done) {
      const bool any = !streams_.empty();
      streams_.clear();
      return any;
    }
    const auto it = std::find(streams_.begin(), streams_.end(), *done);
    if (it == streams_.end()) return false;
    streams_.erase(it);
    return streams_.empty();
  }

 private:
  absl::Mutex mu_;
  absl::InlinedVector<const void*, 2> streams_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessel
