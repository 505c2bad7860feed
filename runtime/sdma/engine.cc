#include "runtime/sdma/engine.h"

#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "runtime/faults.h"

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

uint64_t load(const uint64_t* word) {
  return std::atomic_ref<uint64_t>(*const_cast<uint64_t*>(word)).load(std::memory_order_acquire);
}

void store(uint64_t* word, uint64_t value) { std::atomic_ref<uint64_t>(*word).store(value, std::memory_order_release); }

// A ring and its positions in this process's memory, for a software engine.
struct OwnedRing {
  explicit OwnedRing(int64_t bytes) : dwords(std::make_unique<uint32_t[]>(bytes / 4)), bytes(bytes) {}
  Ring ring() { return {dwords.get(), bytes, &read, &write, &doorbell}; }
  std::unique_ptr<uint32_t[]> dwords;
  int64_t bytes;
  alignas(64) uint64_t read = 0;  // the engine's line
  alignas(64) uint64_t write = 0;
  uint64_t doorbell = 0;
};

class SoftwareQueue final : public Queue {
 public:
  SoftwareQueue(std::unique_ptr<OwnedRing> memory, std::string name)
      : Queue(memory->ring(), name), memory_(std::move(memory)), engine_(memory_->ring(), std::move(name)) {}
  absl::Status status() const override { return engine_.status(); }

 private:
  void rang() override { engine_.wake(); }

  std::unique_ptr<OwnedRing> memory_;
  Engine engine_;  // last: stops before the memory goes
};

}  // namespace

absl::Status check_ring_bytes(int64_t bytes, const std::string& name) {
  if (bytes >= 256 && (bytes & (bytes - 1)) == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("SDMA queue ", name, ": the ring must be a power of two of at least 256 bytes, got ", bytes));
}

absl::StatusOr<std::unique_ptr<Queue>> software_queue(int64_t ring_bytes, std::string name) {
  TESSEL_RETURN_IF_ERROR(check_ring_bytes(ring_bytes, name));
  if (faults::fail_allocation("SDMA queue ring")) {
    return absl::ResourceExhaustedError(absl::StrCat("SDMA queue ", name, ": allocating its ring failed"));
  }
  return std::unique_ptr<Queue>(new SoftwareQueue(std::make_unique<OwnedRing>(ring_bytes), std::move(name)));
}

Queue::Queue(Ring ring, std::string name) : ring_(ring), name_(std::move(name)), write_(load(ring.write)) {}

int64_t Queue::armed() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(write_ - load(ring_.read));
}

uint64_t Queue::write_position() const {
  absl::MutexLock lock(&mu_);
  return write_;
}

uint64_t Queue::read_position() const { return load(ring_.read); }

absl::Status Queue::submit(const Dwords& chain) {
  TESSEL_RETURN_IF_ERROR(status());
  absl::MutexLock lock(&mu_);
  const uint64_t bytes = chain.size() * 4, size = ring_.bytes;
  const uint64_t slot = write_ & (size - 1);
  const uint64_t pad = slot + bytes > size ? size - slot : 0;  // a chain never crosses the ring's end
  const uint64_t armed = write_ - load(ring_.read);
  if (armed + pad + bytes > size / 2) {
    return absl::ResourceExhaustedError(
        absl::StrCat("SDMA queue ", name_, ": a chain of ", bytes, " bytes does not fit: ", armed,
                     " bytes are armed of the ", size / 2, " a queue may hold (half its ring)",
                     pad > 0 ? absl::StrCat(", and ", pad, " pad to the ring's end") : ""));
  }
  auto put = [&](uint32_t v) {
    ring_.base[(write_ / 4) & (size / 4 - 1)] = v;
    write_ += 4;
  };
  if (pad > 0) {
    Dwords fill;
    nop(fill, static_cast<int>(pad / 4));
    for (uint32_t v : fill) put(v);
  }
  for (uint32_t v : chain) put(v);
  // The packets before the position, the position before the doorbell.
  store(ring_.write, write_);
  store(ring_.doorbell, write_);
  rang();
  return absl::OkStatus();
}

absl::Status Queue::drain(absl::Duration limit) {
  const uint64_t end = write_position();
  const absl::Time deadline = absl::Now() + limit;
  for (int polls = 0; read_position() < end; ++polls) {
    TESSEL_RETURN_IF_ERROR(status());
    if (polls % 1024 == 1023 && absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat("SDMA queue ", name_, ": the engine left ",
                                                      end - read_position(), " bytes unconsumed for ",
                                                      absl::FormatDuration(limit)));
    }
    back_off(std::min(polls, 1 << 20));
  }
  return status();
}

Engine::Engine(Ring ring, std::string name, absl::Duration poll)
    : ring_(ring), name_(std::move(name)), poll_(poll), seen_(load(ring.read)), thread_([this] { run(); }) {}

Engine::~Engine() {
  {
    absl::MutexLock lock(&mu_);  // the engine's wait sees the flag on unlock
    stop_.store(true, std::memory_order_release);
  }
  thread_.join();
}

void Engine::wake() {
  // Unlocking makes the engine's wait look at the doorbell again.
  absl::MutexLock lock(&mu_);
}

bool Engine::rang() const { return stopping() || load(ring_.doorbell) != seen_; }

absl::Status Engine::status() const {
  absl::MutexLock lock(&mu_);
  return trap_;
}

void Engine::trap(uint64_t at, const std::string& what) {
  absl::MutexLock lock(&mu_);
  trap_ = absl::InternalError(absl::StrCat("SDMA engine ", name_, ": trap at ring byte ", at & (ring_.bytes - 1),
                                           " (position ", at, "): ", what));
}

void Engine::run() {
  for (;;) {
    uint64_t end = 0;
    {
      absl::MutexLock lock(&mu_);
      const absl::Condition bell(this, &Engine::rang);
      if (poll_ == absl::InfiniteDuration()) {
        mu_.Await(bell);
      } else {
        mu_.AwaitWithTimeout(bell, poll_);
      }
      if (stopping()) return;
      seen_ = end = load(ring_.doorbell);
    }
    for (uint64_t at = load(ring_.read); at < end;) {
      const uint64_t size = execute(at, end);
      if (size == 0) return;  // trapped, or stopping inside a poll
      at += size;
      store(ring_.read, at);
    }
  }
}

uint64_t Engine::execute(uint64_t at, uint64_t end) {
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
