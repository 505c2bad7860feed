// Fault injection, for tests: once armed with n, the n-th call at any
// fault site fails as if its resource had run out, without doing its work.
// The sites are every Status-form CUDA driver and HIP runtime call
// (runtime/cuda/driver.h, runtime/hip/hip_runtime.h) and the host
// backend's allocations (its buffers, symmetric memory, gate
// words and copy-engine queues). One process-wide counter: arm it while one
// scenario runs. Disarmed, a site costs one relaxed atomic load.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace tessel::faults {

void arm(int64_t n);  // 0 disarms
// Sites passed since arm() (counted whether or not one failed).
int64_t calls();
// The site that was made to fail, or "" while none has.
std::string failed_site();
// The sites passed since arm(), in order.
std::vector<std::string> sites();

namespace internal {
inline std::atomic<bool> armed{false};
}  // namespace internal
inline bool injecting() { return internal::armed.load(std::memory_order_relaxed); }
// At a site named `site` while injecting: whether it is the one to fail.
bool fail_now(const char* site);
// At a host allocation site: whether it is to fail (then as if out of
// memory, errno ENOMEM).
bool fail_allocation(const char* site);

}  // namespace tessel::faults
