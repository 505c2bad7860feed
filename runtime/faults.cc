#include "runtime/faults.h"

#include <cerrno>

#include "absl/synchronization/mutex.h"

namespace tessel::faults {
namespace {

absl::Mutex mu;
int64_t fail_at ABSL_GUARDED_BY(mu) = 0;
std::vector<const char*> passed ABSL_GUARDED_BY(mu);  // the sites since arm(), in order

}  // namespace

void arm(int64_t n) {
  absl::MutexLock lock(&mu);
  fail_at = n;
  passed.clear();
  internal::armed.store(n > 0, std::memory_order_relaxed);
}

int64_t calls() {
  absl::MutexLock lock(&mu);
  return static_cast<int64_t>(passed.size());
}

std::string failed_site() {
  absl::MutexLock lock(&mu);
  return fail_at > 0 && static_cast<int64_t>(passed.size()) >= fail_at ? passed[fail_at - 1] : "";
}

std::vector<std::string> sites() {
  absl::MutexLock lock(&mu);
  return std::vector<std::string>(passed.begin(), passed.end());
}

bool fail_now(const char* site) {
  absl::MutexLock lock(&mu);
  passed.push_back(site);
  return static_cast<int64_t>(passed.size()) == fail_at;
}

bool fail_allocation(const char* site) {
  if (!injecting() || !fail_now(site)) return false;
  errno = ENOMEM;
  return true;
}

}  // namespace tessel::faults
