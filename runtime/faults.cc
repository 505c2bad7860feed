#include "runtime/faults.h"

#include <cerrno>

#include "absl/synchronization/mutex.h"

namespace tessel::faults {
namespace {

absl::Mutex mu;
int64_t fail_at ABSL_GUARDED_BY(mu) = 0;
int64_t counted ABSL_GUARDED_BY(mu) = 0;
std::string failed ABSL_GUARDED_BY(mu);
std::vector<const char*> passed ABSL_GUARDED_BY(mu);

}  // namespace

void arm(int64_t n) {
  absl::MutexLock lock(&mu);
  fail_at = n;
  counted = 0;
  failed.clear();
  passed.clear();
  internal::armed.store(n > 0, std::memory_order_relaxed);
}

int64_t calls() {
  absl::MutexLock lock(&mu);
  return counted;
}

std::string failed_site() {
  absl::MutexLock lock(&mu);
  return failed;
}

std::vector<std::string> sites() {
  absl::MutexLock lock(&mu);
  return std::vector<std::string>(passed.begin(), passed.end());
}

bool fail_now(const char* site) {
  absl::MutexLock lock(&mu);
  passed.push_back(site);
  if (++counted != fail_at) return false;
  failed = site;
  return true;
}

bool fail_allocation(const char* site) {
  if (!injecting() || !fail_now(site)) return false;
  errno = ENOMEM;
  return true;
}

}  // namespace tessel::faults
