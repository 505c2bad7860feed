// Host groups: ranks are host devices of one process. Symmetric memory is an
// address range reserved per rank (PROT_NONE) and opened chunk by chunk, so
// it never moves; each (rank, peer) queue is a user-mode SDMA queue whose
// software engine (runtime/sdma/engine.h) executes the packet chains the
// armer (runtime/sdma/armer.h) writes, as an AMD copy engine would, in
// arming order, against host memory.
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/status.h"
#include "base/view_abi.h"
#include "runtime/faults.h"
#include "runtime/plans/plan_backend.h"
#include "runtime/sdma/armer.h"

namespace tessel {
namespace {

// Each (rank, peer) queue's ring: half of it may be armed at once.
constexpr int64_t kRingBytes = int64_t{1} << 20;

class HostGroupBackend final : public GroupBackend {
 public:
  explicit HostGroupBackend(int ranks)
      : ranks_(ranks), armer_("host group", [](int rank, int peer) {
          return sdma::software_queue(kRingBytes, absl::StrCat("host rank ", rank, " -> ", peer));
        }) {}
  ~HostGroupBackend() override {
    armer_.close();  // stops the engines before the memory goes
    for (uintptr_t base : bases_) munmap(reinterpret_cast<void*>(base), reserved_);
  }

  int64_t granularity() const override { return sysconf(_SC_PAGESIZE); }

  absl::StatusOr<std::vector<uintptr_t>> reserve(int64_t bytes) override {
    for (int r = 0; r < ranks_; ++r) {
      void* p = faults::fail_allocation("host group: reserving address space")
                    ? MAP_FAILED
                    : mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
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
      if (faults::fail_allocation("host group: mapping memory") ||
          mprotect(reinterpret_cast<void*>(bases_[r] + offset), bytes, PROT_READ | PROT_WRITE) != 0) {
        return absl::ResourceExhaustedError(absl::StrCat("host group: mapping ", bytes, " bytes for rank ", r,
                                                         " failed: ", std::strerror(errno)));
      }
    }
    return absl::OkStatus();
  }

  absl::Status zero(int, void* p, size_t bytes) override {
    std::memset(p, 0, bytes);
    armer_.zeroed(p, bytes);
    return absl::OkStatus();
  }

  absl::StatusOr<uint64_t*> host_words(int count) override {
    if (faults::fail_allocation("host group: words")) {
      return absl::ResourceExhaustedError(absl::StrCat("host group: allocating ", count, " words failed"));
    }
    absl::MutexLock lock(&mu_);
    return words_.emplace_back(std::make_unique<uint64_t[]>(count)).get();
  }

  int64_t max_linear_copy() const override { return static_cast<int64_t>(sdma::kMaxLinearCopy); }

  absl::StatusOr<std::unique_ptr<ArmedEpoch>> arm(std::vector<ArmedBatch> batches) override {
    std::vector<std::pair<uint64_t*, uint64_t>> readies;
    for (const ArmedBatch& b : batches) readies.push_back({b.ready, b.epoch});
    // As a copy engine would: the gates open, and the chains copy whatever
    // the buffers hold.
    auto release = [readies = std::move(readies)] {
      for (auto [ready, epoch] : readies) {
        std::atomic_ref<uint64_t> word(*ready);
        if (!gate_open(word.load(std::memory_order_acquire), epoch)) word.store(epoch, std::memory_order_release);
      }
      return absl::OkStatus();
    };
    return armer_.arm(std::move(batches), std::move(release));
  }

  absl::Status open_gates(int, absl::Span<uint64_t* const> readies, uint64_t epoch) override {
    for (uint64_t* ready : readies) std::atomic_ref<uint64_t>(*ready).store(epoch, std::memory_order_release);
    return absl::OkStatus();
  }

  absl::Status copy(int rank, int peer, void* dst, const void* src, size_t bytes) override {
    return armer_.copy(rank, peer, dst, src, bytes, absl::InfiniteDuration());
  }

 private:
  const int ranks_;
  std::vector<uintptr_t> bases_;
  int64_t reserved_ = 0;
  sdma::Armer armer_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<uint64_t[]>> words_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<GroupBackend>> make_host_group_backend(const std::vector<Device>& devices) {
  return std::unique_ptr<GroupBackend>(new HostGroupBackend(static_cast<int>(devices.size())));
}

}  // namespace tessel
