#include "runtime/sdma/armer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace tessel::sdma {
namespace {

// One chain submitted: done once its queue's engine has read past `end`.
struct Submitted {
  Queue* queue = nullptr;
  uint64_t end = 0;
};

class SdmaArmedEpoch final : public ArmedEpoch {
 public:
  SdmaArmedEpoch(std::vector<Submitted> chains, std::function<absl::Status()> release)
      : chains_(std::move(chains)), release_(std::move(release)) {}
  absl::StatusOr<bool> done() override {
    for (const Submitted& c : chains_) {
      TESSEL_RETURN_IF_ERROR(c.queue->status());
      if (c.queue->read_position() < c.end) return false;
    }
    return true;
  }
  absl::Status release() override { return release_(); }

 private:
  std::vector<Submitted> chains_;
  std::function<absl::Status()> release_;
};

uintptr_t at(const uint64_t* word) { return reinterpret_cast<uintptr_t>(word); }

}  // namespace

absl::StatusOr<std::unique_ptr<ArmedEpoch>> Armer::arm(std::vector<ArmedBatch> batches,
                                                       std::function<absl::Status()> release) {
  struct Pending {
    std::pair<int, int> queue;
    Dwords chain;
  };
  std::vector<Pending> pending;
  absl::MutexLock lock(&mu_);
  // What each word will hold after this epoch's chains; words_ takes it
  // once every chain is submitted.
  std::map<const uint64_t*, uint64_t> after;
  auto add = [&](const uint64_t* word, uint64_t epoch) {
    auto [it, fresh] = after.try_emplace(word);
    if (fresh) {
      auto known = words_.find(word);
      it->second = known != words_.end() ? known->second : 0;
    }
    const uint64_t by = epoch - it->second;
    it->second = epoch;
    return by;
  };
  for (const ArmedBatch& b : batches) {
    const uint32_t e = static_cast<uint32_t>(b.epoch);
    Dwords completion;
    if (b.deliveries.empty()) poll_greater_equal(completion, at(b.ready), e);
    for (const ArmedBatch::Delivery& d : b.deliveries) {
      pending.push_back({{b.owner, d.peer}, delivery_chain(b.ready, e, d.copies, d.arrival, add(d.arrival, b.epoch))});
      poll_greater_equal(completion, at(d.arrival), e);
    }
    atomic_add64(completion, at(b.completion), add(b.completion, b.epoch));
    pending.push_back({{b.owner, b.owner}, std::move(completion)});
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
    TESSEL_ASSIGN_OR_RETURN(Queue * q, queue_locked(key));
    // At most one pad to the ring's end, shorter than the largest chain.
    const int64_t holds = q->ring_bytes() / 2;
    if (q->armed() + use.first + use.second > holds) {
      return absl::ResourceExhaustedError(absl::StrCat(
          what_, ": the chains of this epoch need ", use.first, " bytes on the queue from rank ", key.first,
          " to rank ", key.second, ", which holds ", holds, " (", q->armed(), " armed already)"));
    }
  }
  std::vector<Submitted> submitted;
  for (const Pending& p : pending) {
    Queue* q = queues_.at(p.queue).get();
    TESSEL_RETURN_IF_ERROR(q->submit(p.chain));
    submitted.push_back({q, q->write_position()});
  }
  for (const auto& [word, value] : after) words_[word] = value;
  return std::unique_ptr<ArmedEpoch>(new SdmaArmedEpoch(std::move(submitted), std::move(release)));
}

absl::Status Armer::copy(int rank, int peer, void* dst, const void* src, size_t bytes, absl::Duration limit) {
  Queue* q = nullptr;
  {
    absl::MutexLock lock(&mu_);
    TESSEL_ASSIGN_OR_RETURN(q, queue_locked({rank, peer}));
  }
  Dwords chain;
  copy_linear(chain, reinterpret_cast<uintptr_t>(src), reinterpret_cast<uintptr_t>(dst), bytes);
  if (chain.empty()) return absl::OkStatus();
  TESSEL_RETURN_IF_ERROR(q->submit(chain));
  return q->drain(limit);
}

void Armer::zeroed(const void* p, size_t bytes) {
  const auto* begin = static_cast<const uint64_t*>(p);
  const auto* end = reinterpret_cast<const uint64_t*>(static_cast<const char*>(p) + bytes);
  absl::MutexLock lock(&mu_);
  words_.erase(words_.lower_bound(begin), words_.lower_bound(end));
}

void Armer::close() {
  absl::MutexLock lock(&mu_);
  queues_.clear();
}

absl::StatusOr<Queue*> Armer::queue_locked(std::pair<int, int> key) {
  std::unique_ptr<Queue>& q = queues_[key];
  if (!q) {
    absl::StatusOr<std::unique_ptr<Queue>> made = make_queue_(key.first, key.second);
    if (!made.ok()) {
      queues_.erase(key);
      return made.status();
    }
    q = std::move(*made);
  }
  return q.get();
}

}  // namespace tessel::sdma
