// Host groups: ranks are host devices of one process. Symmetric memory is an
// address range reserved per rank (PROT_NONE) and opened chunk by chunk, so
// it never moves; each (rank, peer) queue is a thread playing the copy
// engine, running its chains in arming order against host memory.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/status.h"
#include "base/view_abi.h"
#include "runtime/plans/plan_backend.h"

namespace tessel {
namespace {

uint64_t load_acquire(const uint64_t* word) {
  return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(word)).load(std::memory_order_acquire);
}
void store_release(uint64_t* word, uint64_t value) {
  std::atomic_ref<uint64_t>(*word).store(value, std::memory_order_release);
}
void run_copy(const ChainCopy& c) {
  for (int64_t row = 0; row < c.height; ++row) {
    std::memcpy(reinterpret_cast<void*>(c.dst + row * c.dst_pitch),
                reinterpret_cast<const void*>(c.src + row * c.src_pitch), c.width);
  }
}

// What one plan's epoch tracks across queues.
struct EpochState {
  std::atomic<bool> released{false};
  std::atomic<int64_t> outstanding{0};
};

// The peers still to receive one batch; the last delivery opens completion.
struct BatchState {
  std::atomic<int> remaining{0};
  uint64_t* completion = nullptr;
  uint64_t epoch = 0;
};

struct Chain {
  const uint64_t* ready = nullptr;  // null: a plain copy, run at once
  uint64_t epoch = 0;
  std::vector<ChainCopy> copies;
  uint64_t* arrival = nullptr;
  std::shared_ptr<BatchState> batch;
  std::shared_ptr<EpochState> state;
};

class Queue {
 public:
  Queue() : thread_([this] { loop(); }) {}
  ~Queue() {
    {
      absl::MutexLock lock(&mu_);  // the loop's Await sees the flag on unlock
      stopping_.store(true, std::memory_order_release);
    }
    thread_.join();
  }

  void push(Chain chain) {
    absl::MutexLock lock(&mu_);
    chains_.push_back(std::move(chain));
  }

 private:
  bool wait_open(const Chain& c) {
    for (int polls = 0;; ++polls) {
      if (gate_open(load_acquire(c.ready), c.epoch)) return true;
      if (c.state->released.load(std::memory_order_acquire) || stopping_.load(std::memory_order_acquire)) {
        return false;
      }
      if (polls < 64) continue;
      if (polls < 1024) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  void execute(const Chain& c) {
    bool open = c.ready == nullptr || wait_open(c);
    if (open) {
      for (const ChainCopy& copy : c.copies) run_copy(copy);
      if (c.arrival != nullptr) store_release(c.arrival, c.epoch);
    }
    if (c.batch && c.batch->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1 && open) {
      store_release(c.batch->completion, c.batch->epoch);
    }
    c.state->outstanding.fetch_sub(1, std::memory_order_acq_rel);
  }

  void loop() {
    for (;;) {
      Chain c;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(
            +[](Queue* q) ABSL_EXCLUSIVE_LOCKS_REQUIRED(q->mu_) { return q->stopping_ || !q->chains_.empty(); },
            this));
        if (chains_.empty()) return;
        c = std::move(chains_.front());
        chains_.pop_front();
      }
      execute(c);
    }
  }

  absl::Mutex mu_;
  std::deque<Chain> chains_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> stopping_{false};  // set under mu_; polls read it without the lock
  std::thread thread_;  // last: starts after the members it reads
};

class HostArmedEpoch final : public ArmedEpoch {
 public:
  explicit HostArmedEpoch(std::shared_ptr<EpochState> state) : state_(std::move(state)) {}
  absl::StatusOr<bool> done() override { return state_->outstanding.load(std::memory_order_acquire) == 0; }
  absl::Status release() override {
    state_->released.store(true, std::memory_order_release);
    return absl::OkStatus();
  }

 private:
  std::shared_ptr<EpochState> state_;
};

class HostGroupBackend final : public GroupBackend {
 public:
  explicit HostGroupBackend(int ranks) : ranks_(ranks) {}
  ~HostGroupBackend() override {
    queues_.clear();  // joins the threads before the memory goes
    for (uintptr_t base : bases_) munmap(reinterpret_cast<void*>(base), reserved_);
  }

  int64_t granularity() const override { return sysconf(_SC_PAGESIZE); }

  absl::StatusOr<std::vector<uintptr_t>> reserve(int64_t bytes) override {
    for (int r = 0; r < ranks_; ++r) {
      void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) {
        return absl::ResourceExhaustedError(
            absl::StrCat("host group: reserving ", bytes, " bytes of address space for rank ", r, " failed: ",
                         std::strerror(errno)));
      }
      bases_.push_back(reinterpret_cast<uintptr_t>(p));
    }
    reserved_ = bytes;
    return bases_;
  }

  absl::Status map(int64_t offset, int64_t bytes) override {
    for (int r = 0; r < ranks_; ++r) {
      if (mprotect(reinterpret_cast<void*>(bases_[r] + offset), bytes, PROT_READ | PROT_WRITE) != 0) {
        return absl::ResourceExhaustedError(absl::StrCat("host group: mapping ", bytes, " bytes for rank ", r,
                                                         " failed: ", std::strerror(errno)));
      }
    }
    return absl::OkStatus();
  }

  absl::Status zero(int, void* p, size_t bytes) override {
    std::memset(p, 0, bytes);
    return absl::OkStatus();
  }

  absl::StatusOr<uint64_t*> host_words(int count) override {
    absl::MutexLock lock(&mu_);
    return words_.emplace_back(std::make_unique<uint64_t[]>(count)).get();
  }

  absl::StatusOr<std::unique_ptr<ArmedEpoch>> arm(std::vector<ArmedBatch> batches) override {
    auto state = std::make_shared<EpochState>();
    for (ArmedBatch& b : batches) {
      auto batch = std::make_shared<BatchState>();
      batch->completion = b.completion;
      batch->epoch = b.epoch;
      if (b.deliveries.empty()) {
        // No peers: a chain on the owner's own queue opens completion.
        batch->remaining = 1;
        state->outstanding.fetch_add(1);
        queue(b.owner, b.owner).push({b.ready, b.epoch, {}, nullptr, batch, state});
        continue;
      }
      batch->remaining = static_cast<int>(b.deliveries.size());
      for (ArmedBatch::Delivery& d : b.deliveries) {
        state->outstanding.fetch_add(1);
        queue(b.owner, d.peer).push({b.ready, b.epoch, std::move(d.copies), d.arrival, batch, state});
      }
    }
    return std::unique_ptr<ArmedEpoch>(new HostArmedEpoch(std::move(state)));
  }

  absl::Status open_gates(int, absl::Span<uint64_t* const> readies, uint64_t epoch) override {
    for (uint64_t* ready : readies) store_release(ready, epoch);
    return absl::OkStatus();
  }

  absl::Status copy(int rank, int peer, void* dst, const void* src, size_t bytes) override {
    auto state = std::make_shared<EpochState>();
    state->outstanding = 1;
    ChainCopy c{reinterpret_cast<uintptr_t>(src), reinterpret_cast<uintptr_t>(dst), static_cast<int64_t>(bytes), 1,
                0, 0};
    queue(rank, peer).push({nullptr, 0, {c}, nullptr, nullptr, state});
    while (state->outstanding.load(std::memory_order_acquire) != 0) std::this_thread::yield();
    return absl::OkStatus();
  }

 private:
  Queue& queue(int rank, int peer) {
    absl::MutexLock lock(&mu_);
    std::unique_ptr<Queue>& q = queues_[{rank, peer}];
    if (!q) q = std::make_unique<Queue>();
    return *q;
  }

  const int ranks_;
  std::vector<uintptr_t> bases_;
  int64_t reserved_ = 0;
  absl::Mutex mu_;
  std::map<std::pair<int, int>, std::unique_ptr<Queue>> queues_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<uint64_t[]>> words_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<GroupBackend>> make_host_group_backend(const std::vector<Device>& devices) {
  return std::unique_ptr<GroupBackend>(new HostGroupBackend(static_cast<int>(devices.size())));
}

}  // namespace tessel
