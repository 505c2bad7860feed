// Host groups: ranks are host devices of one process. Symmetric memory is an
// address range reserved per rank (PROT_NONE) and opened chunk by chunk, so
// it never moves; each (rank, peer) queue is a user-mode SDMA queue whose
// software engine (runtime/sdma/engine.h) executes the same packet chains
// an AMD copy engine would, in arming order, against host memory.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/status.h"
#include "base/view_abi.h"
#include "runtime/plans/plan_backend.h"
#include "runtime/sdma/engine.h"

namespace tessel {
namespace {

// Each (rank, peer) queue's ring: half of it may be armed at once.
constexpr int64_t kRingBytes = int64_t{1} << 20;

uint64_t load_acquire(const uint64_t* word) {
  return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(word)).load(std::memory_order_acquire);
}

// One chain submitted: done once its queue's engine has read past `end`.
struct Submitted {
  sdma::Queue* queue = nullptr;
  uint64_t end = 0;
};

class HostArmedEpoch final : public ArmedEpoch {
 public:
  HostArmedEpoch(std::vector<Submitted> chains, std::vector<uint64_t*> readies, uint64_t epoch)
      : chains_(std::move(chains)), readies_(std::move(readies)), epoch_(epoch) {}
  absl::StatusOr<bool> done() override {
    for (const Submitted& c : chains_) {
      TESSEL_RETURN_IF_ERROR(c.queue->status());
      if (c.queue->read_position() < c.end) return false;
    }
    return true;
  }
  // As a copy engine would: the gates open, and the chains copy whatever
  // the buffers hold.
  absl::Status release() override {
    for (uint64_t* ready : readies_) {
      if (!gate_open(load_acquire(ready), epoch_)) {
        std::atomic_ref<uint64_t>(*ready).store(epoch_, std::memory_order_release);
      }
    }
    return absl::OkStatus();
  }

 private:
  std::vector<Submitted> chains_;
  std::vector<uint64_t*> readies_;
  uint64_t epoch_;
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

  int64_t max_linear_copy() const override { return static_cast<int64_t>(sdma::kMaxLinearCopy); }

  // Each delivery is a chain of SDMA packets on the (owner, peer) queue:
  // poll the owner's ready word, copy, add to the peer's arrival word. The
  // owner's completion opens by a chain on its own queue that polls every
  // peer's arrival word and then adds to it. Words only ever grow by these
  // adds: each add takes a word from the value the chains armed before it
  // leave to the epoch.
  absl::StatusOr<std::unique_ptr<ArmedEpoch>> arm(std::vector<ArmedBatch> batches) override {
    struct Pending {
      std::pair<int, int> queue;
      sdma::Dwords chain;
      uint64_t* adds_to;  // the word its atomic adds to
    };
    std::vector<Pending> pending;
    std::vector<uint64_t*> readies;
    absl::MutexLock lock(&mu_);
    // A word whose chains have all run holds its value (a new plan's gate
    // rows start from zero, wherever an old plan's were); one with chains
    // still armed will hold what the last of them leaves.
    std::map<uint64_t*, uint64_t> words;  // what each will hold after this epoch's chains
    auto add = [&](uint64_t* word, uint64_t epoch) {
      auto [it, fresh] = words.try_emplace(word);
      if (fresh) {
        auto known = words_armed_.find(word);
        const bool armed = known != words_armed_.end() &&
                           known->second.last.queue->read_position() < known->second.last.end;
        it->second = armed ? known->second.value : load_acquire(word);
      }
      const uint64_t by = epoch - it->second;
      it->second = epoch;
      return by;
    };
    uint64_t epoch = 0;
    for (ArmedBatch& b : batches) {
      epoch = b.epoch;
      readies.push_back(b.ready);
      const uint32_t e = static_cast<uint32_t>(b.epoch);
      sdma::Dwords completion;
      if (b.deliveries.empty()) sdma::poll_greater_equal(completion, reinterpret_cast<uintptr_t>(b.ready), e);
      for (ArmedBatch::Delivery& d : b.deliveries) {
        pending.push_back({{b.owner, d.peer},
                           sdma::delivery_chain(b.ready, e, d.copies, d.arrival, add(d.arrival, b.epoch)),
                           d.arrival});
        sdma::poll_greater_equal(completion, reinterpret_cast<uintptr_t>(d.arrival), e);
      }
      sdma::atomic_add64(completion, reinterpret_cast<uintptr_t>(b.completion), add(b.completion, b.epoch));
      pending.push_back({{b.owner, b.owner}, std::move(completion), b.completion});
    }
    // Every chain fits before any is submitted: a chain that does not must
    // not leave the others armed without it.
    std::map<std::pair<int, int>, std::pair<int64_t, int64_t>> bytes;  // total and largest per queue
    for (const Pending& p : pending) {
      auto& [total, largest] = bytes[p.queue];
      const int64_t n = static_cast<int64_t>(p.chain.size() * 4);
      total += n;
      largest = std::max(largest, n);
    }
    for (const auto& [key, use] : bytes) {
      TESSEL_ASSIGN_OR_RETURN(sdma::Queue * q, queue_locked(key));
      // At most one pad to the ring's end, shorter than the largest chain.
      if (q->armed() + use.first + use.second > kRingBytes / 2) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "host group: the chains of this epoch need ", use.first, " bytes on the queue from rank ", key.first,
            " to rank ", key.second, ", which holds ", kRingBytes / 2, " (", q->armed(), " armed already)"));
      }
    }
    std::vector<Submitted> submitted;
    for (const Pending& p : pending) {
      sdma::Queue* q = queues_.at(p.queue).get();
      TESSEL_RETURN_IF_ERROR(q->submit(p.chain));
      submitted.push_back({q, q->write_position()});
      words_armed_[p.adds_to] = {submitted.back(), words.at(p.adds_to)};
    }
    return std::unique_ptr<ArmedEpoch>(new HostArmedEpoch(std::move(submitted), std::move(readies), epoch));
  }

  absl::Status open_gates(int, absl::Span<uint64_t* const> readies, uint64_t epoch) override {
    for (uint64_t* ready : readies) std::atomic_ref<uint64_t>(*ready).store(epoch, std::memory_order_release);
    return absl::OkStatus();
  }

  absl::Status copy(int rank, int peer, void* dst, const void* src, size_t bytes) override {
    sdma::Queue* q = nullptr;
    {
      absl::MutexLock lock(&mu_);
      TESSEL_ASSIGN_OR_RETURN(q, queue_locked({rank, peer}));
    }
    sdma::Dwords chain;
    sdma::copy_linear(chain, reinterpret_cast<uintptr_t>(src), reinterpret_cast<uintptr_t>(dst), bytes);
    if (chain.empty()) return absl::OkStatus();
    TESSEL_RETURN_IF_ERROR(q->submit(chain));
    return q->drain();
  }

 private:
  // The (rank, peer) queue, made at first use.
  absl::StatusOr<sdma::Queue*> queue_locked(std::pair<int, int> key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::unique_ptr<sdma::Queue>& q = queues_[key];
    if (!q) {
      const std::string name = absl::StrCat("host rank ", key.first, " -> ", key.second);
      TESSEL_ASSIGN_OR_RETURN(q, sdma::Queue::create(kRingBytes, name));
    }
    return q.get();
  }

  const int ranks_;
  std::vector<uintptr_t> bases_;
  int64_t reserved_ = 0;
  absl::Mutex mu_;
  std::map<std::pair<int, int>, std::unique_ptr<sdma::Queue>> queues_ ABSL_GUARDED_BY(mu_);
  // Per arrival and completion word: the last chain armed that adds to it,
  // and what the word holds once that chain has run.
  struct ArmedWord {
    Submitted last;
    uint64_t value = 0;
  };
  std::map<uint64_t*, ArmedWord> words_armed_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<uint64_t[]>> words_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<GroupBackend>> make_host_group_backend(const std::vector<Device>& devices) {
  return std::unique_ptr<GroupBackend>(new HostGroupBackend(static_cast<int>(devices.size())));
}

}  // namespace tessel
