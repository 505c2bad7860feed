// Runs a test body in N forked processes, one rank each, joined by a
// Bootstrap over shared memory (the test's stand-in for MPI). The parent
// creates no threads and no tessel objects, so forking is safe; each child
// reports an error message through the shared block and exits.
#pragma once

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <functional>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/plans/bootstrap.h"

namespace tessel::multiprocess {

inline constexpr int kMaxRanks = 8;
inline constexpr size_t kSlotBytes = 4096;
inline constexpr size_t kMessageBytes = 2048;

// Lives in memory every process maps (MAP_SHARED before the fork).
struct SharedBlock {
  std::atomic<uint64_t> arrived{0};
  std::atomic<uint64_t> generation{0};
  char slots[kMaxRanks][kSlotBytes];
  char messages[kMaxRanks][kMessageBytes];
};

class SharedBootstrap final : public Bootstrap {
 public:
  SharedBootstrap(SharedBlock* block, int rank, int size) : block_(block), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  absl::Status barrier() override {
    // Sense by generation: the last to arrive resets the count and moves on.
    const uint64_t generation = block_->generation.load(std::memory_order_acquire);
    if (block_->arrived.fetch_add(1, std::memory_order_acq_rel) + 1 == static_cast<uint64_t>(size_)) {
      block_->arrived.store(0, std::memory_order_relaxed);
      block_->generation.fetch_add(1, std::memory_order_release);
      return absl::OkStatus();
    }
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (block_->generation.load(std::memory_order_acquire) == generation) {
      if (std::chrono::steady_clock::now() > limit) {
        return absl::DeadlineExceededError(absl::StrCat("test bootstrap: rank ", rank_, " waited 20 s at a barrier"));
      }
      std::this_thread::yield();
    }
    return absl::OkStatus();
  }

  absl::Status all_gather(const void* in, void* out, size_t bytes) override {
    if (bytes > kSlotBytes) return absl::InvalidArgumentError("test bootstrap: all_gather of more than a slot");
    // The first barrier keeps a slot from being overwritten while a slow
    // process still reads the last gather's.
    if (absl::Status s = barrier(); !s.ok()) return s;
    std::memcpy(block_->slots[rank_], in, bytes);
    if (absl::Status s = barrier(); !s.ok()) return s;
    for (int r = 0; r < size_; ++r) std::memcpy(static_cast<char*>(out) + r * bytes, block_->slots[r], bytes);
    return absl::OkStatus();
  }

 private:
  SharedBlock* block_;
  int rank_, size_;
};

// What a body returns to skip the test (no GPU): Unavailable with this prefix.
inline constexpr char kSkip[] = "skip: ";
inline constexpr int kSkipExit = 77;

// Forks `size` processes; each runs body(bootstrap) with its own rank and
// exits 0 if it returned OK. Returns one message per failed rank ("" when
// every rank passed), after at most `limit`; where every rank skipped, the
// first rank's message, which begins with kSkip.
inline std::string run_ranks(int size, const std::function<absl::Status(std::shared_ptr<Bootstrap>)>& body,
                             std::chrono::seconds limit = std::chrono::seconds(120)) {
  void* memory = mmap(nullptr, sizeof(SharedBlock), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return "mmap of the shared block failed";
  auto* block = new (memory) SharedBlock();
  std::vector<pid_t> children;
  for (int r = 0; r < size; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      absl::Status s = body(std::make_shared<SharedBootstrap>(block, r, size));
      const bool skip = absl::IsUnavailable(s) && absl::StartsWith(s.message(), kSkip);
      std::string text = skip ? std::string(s.message()) : s.ToString();
      std::strncpy(block->messages[r], text.c_str(), kMessageBytes - 1);
      std::fflush(nullptr);
      _exit(s.ok() ? 0 : skip ? kSkipExit : 1);
    }
    children.push_back(pid);
  }
  std::string failures;
  int skipped = 0;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (int r = 0; r < size; ++r) {
    int status = 0;
    while (waitpid(children[r], &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(children[r], SIGKILL);
        waitpid(children[r], &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == kSkipExit) {
      ++skipped;
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      absl::StrAppend(&failures, "rank ", r, ": ",
                      WIFEXITED(status) ? block->messages[r] : "killed (signal or time limit)", "\n");
    }
  }
  if (skipped == size) failures = block->messages[0];
  munmap(memory, sizeof(SharedBlock));
  return failures;
}

}  // namespace tessel::multiprocess
