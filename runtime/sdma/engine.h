// Internal: user-mode SDMA queues as AMD's hardware sees them, and a
// software engine that executes a ring the way an SDMA engine does.
//
// A queue is a ring of 2^n bytes and three 64-bit byte positions (Ring).
// The host writes a chain at its write position, stores the new position
// to `write` and rings `doorbell` with it; the engine consumes packets from
// `read` up to the doorbell and writes `read` back after each. Positions
// are monotonic (the slot is position & (size - 1)). A chain is written as
// one region: where it would cross the ring's end, a NOP pads to the end
// first.
//
// Queue is the host's side over any such memory: a KFD queue's (the thunk
// returns where the positions live and a mapped doorbell) or one this
// process made for a software Engine. The engine executes what the ring
// holds: POLL_REGMEM waits (retrying forever, or trapping after its retry
// count), COPY_LINEAR and LINEAR_LARGE_SUB_WINDOW copy, ATOMIC adds, FENCE
// stores. A packet it cannot decode traps: the engine stops there and
// reports the packet, its ring offset and what was wrong.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "runtime/sdma/packets.h"

namespace tessel::sdma {

// The memory a queue's host side and its engine share.
struct Ring {
  uint32_t* base = nullptr;
  int64_t bytes = 0;             // a power of two
  uint64_t* read = nullptr;      // the engine's position, written back after each packet
  uint64_t* write = nullptr;     // the host's
  uint64_t* doorbell = nullptr;  // rung with the write position
};

// OK where `bytes` is a power of two of at least 256; else an error naming the queue.
absl::Status check_ring_bytes(int64_t bytes, const std::string& name);

class Queue {
 public:
  // The host's side of `ring`, from the positions its words hold; `name`
  // prefixes its errors ("host rank 0 -> 1").
  Queue(Ring ring, std::string name);
  virtual ~Queue() = default;
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  // Writes `chain` into the ring and rings the doorbell. ResourceExhausted
  // (nothing written) where it would leave more than half the ring armed:
  // a chain never waits for ring space behind a gate that may not open.
  absl::Status submit(const Dwords& chain);
  // Waits until the engine has consumed everything submitted; its trap, if
  // any, or DeadlineExceeded after `limit`.
  absl::Status drain(absl::Duration limit = absl::InfiniteDuration());
  // OK, or what stopped the engine (a software engine's trap).
  virtual absl::Status status() const { return absl::OkStatus(); }
  // Bytes submitted that the engine has not consumed.
  int64_t armed() const;
  uint64_t write_position() const;
  uint64_t read_position() const;
  int64_t ring_bytes() const { return ring_.bytes; }
  const std::string& name() const { return name_; }

 protected:
  // After each doorbell: a software engine in this process wakes.
  virtual void rang() {}

 private:
  const Ring ring_;
  const std::string name_;
  mutable absl::Mutex mu_;  // one submission at a time
  uint64_t write_ ABSL_GUARDED_BY(mu_);
};

// Executes a ring's packets on a thread of its own, from the read position
// its words hold.
class Engine {
 public:
  // Where nothing calls wake() (the host side is another library's), the
  // engine looks at the doorbell every `poll`.
  Engine(Ring ring, std::string name, absl::Duration poll = absl::InfiniteDuration());
  ~Engine();  // stops the engine, also inside a poll
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // The doorbell rang: look now.
  void wake();
  // OK, or the trap that stopped the engine.
  absl::Status status() const;

 private:
  void run();
  // Executes the packet at read position `at`, below `end`; its size in bytes, or 0 after a trap.
  uint64_t execute(uint64_t at, uint64_t end);
  uint32_t dword(uint64_t at) const { return ring_.base[(at / 4) & (ring_.bytes / 4 - 1)]; }
  void trap(uint64_t at, const std::string& what);
  bool stopping() const { return stop_.load(std::memory_order_acquire); }
  // Whether the doorbell moved past `seen_`, or the engine is stopping.
  bool rang() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Ring ring_;
  const std::string name_;
  const absl::Duration poll_;
  std::atomic<bool> stop_{false};
  mutable absl::Mutex mu_;
  uint64_t seen_ ABSL_GUARDED_BY(mu_) = 0;  // the doorbell as the engine last read it
  absl::Status trap_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: starts after the members it reads
};

// A queue whose ring this process owns and a software engine runs: the
// copy engine of host plans.
absl::StatusOr<std::unique_ptr<Queue>> software_queue(int64_t ring_bytes, std::string name);

}  // namespace tessel::sdma
