// Shared by the fault-injection suites (host, HIP, CUDA): a scenario is
// run once to count its fault sites (runtime/faults.h), then once per site
// with that site failing; each outcome is judged, and a clean scenario must
// follow every faulted one.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "runtime/cuda/driver.h"
#include "runtime/faults.h"

namespace tessel::fault_test {

namespace internal {
inline int64_t work_sites = INT64_MAX;
}  // namespace internal

// Declared as a scenario's last local, it is destroyed first, once the
// scenario's Status is made: the sites after it are teardown (destructors),
// which has no Status to return. A fault there must leave the scenario OK,
// leak nothing and leave the device working.
struct TeardownMark {
  TeardownMark() = default;
  TeardownMark(const TeardownMark&) = delete;
  TeardownMark& operator=(const TeardownMark&) = delete;
  ~TeardownMark() { internal::work_sites = faults::calls(); }
};

// `check(n, site, status)` judges the run whose n-th site failed, where
// that site was in the scenario's work (see TeardownMark). With
// TESSEL_FAULT_TRACE set, each site is named before it fails and each
// outcome printed, so that a crash's last lines say where. Returns the
// number of sites (0 where the clean run failed).
inline int64_t fail_every_site(const std::function<absl::Status()>& scenario,
                               const std::function<void(int64_t, const std::string&, const absl::Status&)>& check) {
  const absl::Status warm = scenario();  // compiles once; the runs below hit the caches
  EXPECT_TRUE(warm.ok()) << warm;
  faults::arm(INT64_MAX);
  const absl::Status clean = scenario();
  const int64_t sites = faults::calls();
  const std::vector<std::string> names = faults::sites();
  faults::arm(0);
  EXPECT_TRUE(clean.ok()) << clean;
  if (!clean.ok()) return 0;
  const bool trace = std::getenv("TESSEL_FAULT_TRACE") != nullptr;
  for (int64_t n = 1; n <= sites; ++n) {
    if (trace) std::fprintf(stderr, "failing site %lld: %s\n", static_cast<long long>(n), names[n - 1].c_str());
    internal::work_sites = INT64_MAX;
    faults::arm(n);
    const absl::Status s = scenario();
    const std::string site = faults::failed_site();
    faults::arm(0);
    if (trace) std::fprintf(stderr, "  -> %s\n  then a clean run\n", s.ToString().c_str());
    if (site.empty()) continue;  // the scenario took a shorter path
    if (n > internal::work_sites) {
      EXPECT_TRUE(s.ok()) << "site " << n << " (" << site << ") failed in teardown, yet the scenario failed: " << s;
    } else {
      check(n, site, s);
    }
    const absl::Status after = scenario();
    EXPECT_TRUE(after.ok()) << "after site " << n << " (" << site << ") failed: " << after;
    if (!after.ok()) break;
  }
  return sites;
}

// What the CUDA driver says is free on the current device (0 where it
// cannot say): a scenario run to its end must leave it where it was.
inline size_t free_cuda_memory() {
  size_t free = 0, total = 0;
  const absl::StatusOr<const cuda::Driver*> driver = cuda::Driver::get();
  if (!driver.ok() || (*driver)->mem_get_info.raw(&free, &total) != cuda::CUDA_SUCCESS) return 0;
  return free;
}

// fail_every_site with the check of the driver suites: the scenario fails
// wherever a call of its work does, naming the call and `error` (the
// driver's name for the injected out-of-memory). Returns the sites.
inline int64_t expect_every_failure_named(const std::function<absl::Status()>& scenario, const std::string& error) {
  return fail_every_site(scenario, [&](int64_t n, const std::string& call, const absl::Status& s) {
    EXPECT_FALSE(s.ok()) << "call " << n << " (" << call << ") failed, yet the scenario succeeded";
    EXPECT_NE(s.message().find(call + ": " + error), std::string::npos) << "call " << n << ": " << s;
  });
}

}  // namespace tessel::fault_test
