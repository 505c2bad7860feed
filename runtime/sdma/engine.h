// Internal: a user-mode SDMA queue as AMD's hardware sees it, with a
// software engine that executes its ring the way an SDMA engine does.
//
// The ring is 2^n bytes; positions are monotonic 64-bit byte offsets (the
// slot is position & (size - 1)). A submission is one chain written as one
// region: where it would cross the ring's end, a NOP pads to the end first.
// Then the write position is stored and the doorbell rung with it. The
// engine consumes packets from its read position up to the doorbell:
// POLL_REGMEM waits (retrying forever, or trapping after its retry count),
// COPY_LINEAR and LINEAR_LARGE_SUB_WINDOW copy, ATOMIC adds, FENCE stores.
// A packet it cannot decode traps: the engine stops there and the queue
// reports the packet, its ring offset and what was wrong.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "runtime/sdma/packets.h"

namespace tessel::sdma {

class Queue {
 public:
  // A ring of `ring_bytes` (a power of two, at least 256) and its engine;
  // `name` prefixes its errors ("host rank 0 -> 1").
  static absl::StatusOr<std::unique_ptr<Queue>> create(int64_t ring_bytes, std::string name);
  ~Queue();  // stops the engine, also inside a poll
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  // Writes `chain` into the ring and rings the doorbell. ResourceExhausted
  // (nothing written) where it would leave more than half the ring armed:
  // a chain never waits for ring space behind a gate that may not open.
  absl::Status submit(const Dwords& chain);
  // Waits until the engine has consumed everything submitted; its trap, if any.
  absl::Status drain();
  // OK, or the trap that stopped the engine.
  absl::Status status() const;
  // Bytes submitted that the engine has not consumed.
  int64_t armed() const {
    absl::MutexLock lock(&mu_);
    return static_cast<int64_t>(write_ - read_.load(std::memory_order_acquire));
  }
  uint64_t write_position() const {
    absl::MutexLock lock(&mu_);
    return write_;
  }
  uint64_t read_position() const { return read_.load(std::memory_order_acquire); }
  int64_t ring_bytes() const { return static_cast<int64_t>(ring_.size() * 4); }

 private:
  Queue(int64_t ring_bytes, std::string name);
  void run();
  // Executes the packet at read position `at`, below `end`; its size in bytes, or 0 after a trap.
  uint64_t execute(uint64_t at, uint64_t end);
  uint32_t dword(uint64_t at) const { return ring_[(at / 4) & (ring_.size() - 1)]; }
  void trap(uint64_t at, const std::string& what);
  bool stopping() const { return stop_.load(std::memory_order_acquire); }

  const std::string name_;
  std::vector<uint32_t> ring_;
  uint64_t write_ ABSL_GUARDED_BY(mu_) = 0;  // the host's
  std::atomic<uint64_t> read_{0};  // the engine's, written back after each packet
  std::atomic<bool> stop_{false};
  mutable absl::Mutex mu_;
  uint64_t doorbell_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status trap_ ABSL_GUARDED_BY(mu_);
  std::thread engine_;  // last: starts after the members it reads
};

}  // namespace tessel::sdma
