// Host groups: ranks are host devices of one process, or one per process of
// a joined group. Symmetric memory is an address range reserved per rank
// (PROT_NONE) and opened chunk by chunk, so it never moves; in a joined
// group each rank's memory is a memfd that grows with the chunks and that
// every process maps into its range for that rank. Each (rank, peer) queue
// is a user-mode SDMA queue whose software engine (runtime/sdma/engine.h)
// executes the packet chains the armer (runtime/sdma/armer.h) writes, as an
// AMD copy engine would, in arming order, against host memory.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/status.h"
#include "base/view_abi.h"
#include "runtime/faults.h"
#include "runtime/plans/exchange.h"
#include "runtime/plans/plan_backend.h"
#include "runtime/sdma/armer.h"

namespace tessel {
namespace {

// Each (rank, peer) queue's ring: half of it may be armed at once.
constexpr int64_t kRingBytes = int64_t{1} << 20;

class HostGroupBackend final : public GroupBackend {
 public:
  // `ranks` ranks, all in this process; or with a bootstrap, a joined group
  // whose rank bootstrap->rank() is this process's.
  explicit HostGroupBackend(int ranks, std::shared_ptr<Bootstrap> bootstrap = nullptr)
      : ranks_(ranks), bootstrap_(std::move(bootstrap)), armer_("host group", [](int rank, int peer) {
          return sdma::software_queue(kRingBytes, absl::StrCat("host rank ", rank, " -> ", peer));
        }) {}
  ~HostGroupBackend() override {
    armer_.close();  // stops the engines before the memory goes
    for (uintptr_t base : bases_) munmap(reinterpret_cast<void*>(base), reserved_);
    for (int fd : fds_) close(fd);
  }

  int64_t granularity() const override { return sysconf(_SC_PAGESIZE); }

  absl::StatusOr<std::vector<uintptr_t>> reserve(int64_t bytes) override {
    absl::Status reserved = reserve_ranges(bytes);
    if (bootstrap_ == nullptr) {
      TESSEL_RETURN_IF_ERROR(reserved);
      return bases_;
    }
    int fd = -1;
    if (reserved.ok()) {
      fd = faults::fail_allocation("host group: memfd") ? -1 : memfd_create("tessel symmetric", MFD_CLOEXEC);
      if (fd < 0) {
        reserved = absl::ResourceExhaustedError(
            absl::StrCat("host group: memfd_create for rank ", bootstrap_->rank(), " failed: ", std::strerror(errno)));
      }
    }
    absl::StatusOr<std::vector<int>> fds = exchange_fds(*bootstrap_, fd, "host group: sharing symmetric memory");
    if (!fds.ok()) {
      if (fd >= 0) close(fd);
      return reserved.ok() ? fds.status() : reserved;
    }
    fds_ = *std::move(fds);
    return bases_;
  }

  absl::Status reserve_ranges(int64_t bytes) {
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
    return absl::OkStatus();
  }

  absl::Status map(int64_t offset, int64_t bytes) override {
    if (bootstrap_ != nullptr) return map_shared(offset, bytes);
    for (int r = 0; r < ranks_; ++r) {
      if (faults::fail_allocation("host group: mapping memory") ||
          mprotect(reinterpret_cast<void*>(bases_[r] + offset), bytes, PROT_READ | PROT_WRITE) != 0) {
        return absl::ResourceExhaustedError(absl::StrCat("host group: mapping ", bytes, " bytes for rank ", r,
                                                         " failed: ", std::strerror(errno)));
      }
    }
    return absl::OkStatus();
  }

  // Each rank's memfd grows; once all have, every process maps every rank's.
  absl::Status map_shared(int64_t offset, int64_t bytes) {
    const int self = bootstrap_->rank();
    absl::Status grown = absl::OkStatus();
    if (faults::fail_allocation("host group: mapping memory") || ftruncate(fds_[self], offset + bytes) != 0) {
      grown = absl::ResourceExhaustedError(absl::StrCat("host group: growing rank ", self, "'s memory to ",
                                                        offset + bytes, " bytes failed: ", std::strerror(errno)));
    }
    TESSEL_RETURN_IF_ERROR(agree_ok(*bootstrap_, grown, "host group: mapping memory"));
    for (int r = 0; r < ranks_; ++r) {
      void* at = reinterpret_cast<void*>(bases_[r] + offset);
      if (mmap(at, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fds_[r], offset) == MAP_FAILED) {
        return absl::ResourceExhaustedError(absl::StrCat("host group: mapping ", bytes, " bytes of rank ", r,
                                                         "'s memory failed: ", std::strerror(errno)));
      }
    }
    return absl::OkStatus();
  }

  absl::Status zero(int rank, void* p, size_t bytes) override {
    if (bootstrap_ == nullptr || rank == bootstrap_->rank()) std::memset(p, 0, bytes);
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
  const std::shared_ptr<Bootstrap> bootstrap_;
  std::vector<int> fds_;  // a joined group's memfds, one per rank
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

absl::StatusOr<std::unique_ptr<GroupBackend>> make_host_joined_group_backend(const Device&,
                                                                             std::shared_ptr<Bootstrap> bootstrap) {
  int ranks = bootstrap->size();
  return std::unique_ptr<GroupBackend>(new HostGroupBackend(ranks, std::move(bootstrap)));
}

}  // namespace tessel
