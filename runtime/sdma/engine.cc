#include "runtime/sdma/engine.h"

#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tessel::sdma {
namespace {

uint32_t load32(uint64_t addr) {
  return std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(addr)).load(std::memory_order_acquire);
}

// Backs off between polls as a copy engine's poll interval does: spin,
// then yield, then sleep.
void back_off(int polls) {
  if (polls < 64) return;
  if (polls < 1024) {
    std::this_thread::yield();
  } else {
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Queue>> Queue::create(int64_t ring_bytes, std::string name) {
  if (ring_bytes < 256 || (ring_bytes & (ring_bytes - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("SDMA queue ", name, ": the ring must be a power of two of at least 256 bytes, got ", ring_bytes));
  }
  return std::unique_ptr<Queue>(new Queue(ring_bytes, std::move(name)));
}

Queue::Queue(int64_t ring_bytes, std::string name)
    : name_(std::move(name)), ring_(ring_bytes / 4, 0), engine_([this] { run(); }) {}

Queue::~Queue() {
  {
    absl::MutexLock lock(&mu_);  // the engine's Await sees the flag on unlock
    stop_.store(true, std::memory_order_release);
  }
  engine_.join();
}

absl::Status Queue::submit(const Dwords& chain) {
  absl::MutexLock lock(&mu_);
  if (!trap_.ok()) return trap_;
  const uint64_t bytes = chain.size() * 4, size = ring_.size() * 4;
  const uint64_t slot = write_ & (size - 1);
  const uint64_t pad = slot + bytes > size ? size - slot : 0;  // a chain never crosses the ring's end
  const uint64_t armed = write_ - read_.load(std::memory_order_acquire);
  if (armed + pad + bytes > size / 2) {
    return absl::ResourceExhaustedError(
        absl::StrCat("SDMA queue ", name_, ": a chain of ", bytes, " bytes does not fit: ", armed,
                     " bytes are armed of the ", size / 2, " a queue may hold (half its ring)",
                     pad > 0 ? absl::StrCat(", and ", pad, " pad to the ring's end") : ""));
  }
  auto put = [&](uint32_t v) {
    ring_[(write_ / 4) & (ring_.size() - 1)] = v;
    write_ += 4;
  };
  if (pad > 0) {
    Dwords fill;
    nop(fill, static_cast<int>(pad / 4));
    for (uint32_t v : fill) put(v);
  }
  for (uint32_t v : chain) put(v);
  doorbell_ = write_;
  return absl::OkStatus();
}

absl::Status Queue::drain() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](Queue* q) ABSL_EXCLUSIVE_LOCKS_REQUIRED(q->mu_) {
        return !q->trap_.ok() || q->read_.load(std::memory_order_acquire) == q->doorbell_;
      },
      this));
  return trap_;
}

absl::Status Queue::status() const {
  absl::MutexLock lock(&mu_);
  return trap_;
}

void Queue::trap(uint64_t at, const std::string& what) {
  absl::MutexLock lock(&mu_);
  trap_ = absl::InternalError(absl::StrCat("SDMA engine ", name_, ": trap at ring byte ", at & (ring_.size() * 4 - 1),
                                           " (position ", at, "): ", what));
}

void Queue::run() {
  for (;;) {
    uint64_t end = 0;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](Queue* q) ABSL_EXCLUSIVE_LOCKS_REQUIRED(q->mu_) {
            return q->stopping() || q->doorbell_ != q->read_.load(std::memory_order_relaxed);
          },
          this));
      if (stopping()) return;
      end = doorbell_;
    }
    for (uint64_t at = read_.load(std::memory_order_relaxed); at < end;) {
      const uint64_t size = execute(at, end);
      if (size == 0) return;  // trapped, or stopping inside a poll
      at += size;
      absl::MutexLock lock(&mu_);  // drain() waits on it
      read_.store(at, std::memory_order_release);
    }
  }
}

uint64_t Queue::execute(uint64_t at, uint64_t end) {
  const uint32_t header = dword(at), op = op_of(header), sub = sub_op_of(header);
  auto fits = [&](int dwords) {
    if (at + 4 * static_cast<uint64_t>(dwords) <= end) return true;
    trap(at,
         absl::StrCat("a packet of op ", op, " needs ", dwords, " dwords; the submission ends after ", (end - at) / 4));
    return false;
  };
  auto addr = [&](int dw) { return address(dword(at + 4 * dw), dword(at + 4 * dw + 4)); };
  switch (op) {
    case kOpNop: {
      const int dwords = 1 + static_cast<int>(header >> 16 & 0x3FFF);
      return fits(dwords) ? 4 * dwords : 0;
    }
    case kOpCopy:
      if (sub == kSubCopyLinear) {
        if (!fits(kCopyLinearDwords)) return 0;
        const uint64_t bytes = uint64_t{dword(at + 4) & 0x3FFFFFFF} + 1;
        std::memcpy(reinterpret_cast<void*>(addr(5)), reinterpret_cast<const void*>(addr(3)), bytes);
        return 4 * kCopyLinearDwords;
      }
      if (sub == kSubCopyLinearLargeSubWindow) {
        if (!fits(kSubWindowDwords)) return 0;
        auto field = [&](int dw) { return uint64_t{dword(at + 4 * dw)}; };
        if (field(5) != 0 || field(13) != 0 || field(19) != 0) {
          trap(at, "LINEAR_LARGE_SUB_WINDOW with a depth other than 1 or a z offset");
          return 0;
        }
        const uint64_t src = addr(1) + field(3) + field(4) * (field(6) + 1);
        const uint64_t dst = addr(9) + field(11) + field(12) * (field(14) + 1);
        const uint64_t width = field(17) + 1, rows = field(18) + 1;
        for (uint64_t r = 0; r < rows; ++r) {
          std::memcpy(reinterpret_cast<void*>(dst + r * (field(14) + 1)),
                      reinterpret_cast<const void*>(src + r * (field(6) + 1)), width);
        }
        return 4 * kSubWindowDwords;
      }
      trap(at,
           absl::StrCat("COPY with sub-op ", sub, " (this engine executes LINEAR 0 and LINEAR_LARGE_SUB_WINDOW 36)"));
      return 0;
    case kOpPollRegmem: {
      if (!fits(kPollDwords)) return 0;
      const uint32_t func = header >> 28 & 7, reference = dword(at + 12), mask = dword(at + 16);
      const uint32_t retries = dword(at + 20) >> 16 & 0xFFF;
      if ((header >> 31) == 0 || (func != kPollGreaterEqual && func != kPollEqual)) {
        trap(at, absl::StrCat("POLL_REGMEM on a register or with compare function ", func,
                              " (this engine polls memory with >= 5 or == 3)"));
        return 0;
      }
      for (uint64_t polls = 0;; ++polls) {
        const uint32_t v = load32(addr(1)) & mask;
        if (func == kPollGreaterEqual ? v >= reference : v == reference) break;
        if (stopping()) return 0;
        if (retries != kRetryForever && polls >= retries) {
          trap(at, absl::StrCat("POLL_REGMEM gave up after ", retries, " retries"));
          return 0;
        }
        back_off(static_cast<int>(std::min<uint64_t>(polls, 1 << 20)));
      }
      return 4 * kPollDwords;
    }
    case kOpAtomic: {
      if (!fits(kAtomicDwords)) return 0;
      const uint32_t operation = header >> 25;
      if (operation != kAtomicAddReturn64) {
        trap(at, absl::StrCat("ATOMIC operation ", operation, " (this engine executes ADD_RTN_64, 47)"));
        return 0;
      }
      std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(addr(1)))
          .fetch_add(address(dword(at + 12), dword(at + 16)), std::memory_order_acq_rel);
      return 4 * kAtomicDwords;
    }
    case kOpFence:
      if (!fits(kFenceDwords)) return 0;
      std::atomic_ref<uint32_t>(*reinterpret_cast<uint32_t*>(addr(1))).store(dword(at + 12), std::memory_order_release);
      return 4 * kFenceDwords;
    default:
      trap(at, absl::StrCat("op ", op, " is not an SDMA packet this engine executes"));
      return 0;
  }
}

}  // namespace tessel::sdma
