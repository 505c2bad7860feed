// Every host allocation of a scenario made to fail in turn
// (runtime/faults.h): a host device compiles and runs kernels (buffers,
// shared arenas, tensor maps) and a group of host ranks runs a triggered
// plan (address space, mapped chunks, gate words, copy-engine queues).
// With the n-th allocation failing, the scenario returns ResourceExhausted
// naming what it was allocating, and the next scenario runs cleanly.
#include <cstdio>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/faults.h"
#include "runtime/plans/plan.h"
#include "samples/kernels.h"
#include "tessel/tessel.h"

namespace tessel {
namespace {

#define RETURN_IF_ERROR(expr) \
  do {                        \
    absl::Status s_ = (expr); \
    if (!s_.ok()) return s_;  \
  } while (0)
#define ASSIGN_OR_RETURN(lhs, expr)             \
  auto lhs##_or = (expr);                       \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto& lhs = *lhs##_or

absl::Status scenario() {
  ASSIGN_OR_RETURN(device, Device::open("host:2"));
  ASSIGN_OR_RETURN(kernel, samples::vector_add_kernel("faulted_add"));
  ASSIGN_OR_RETURN(add, device.compile(kernel));
  constexpr int n = 2048;
  std::vector<float> x(n, 1.5f), z(n);
  ASSIGN_OR_RETURN(bx, device.allocate(n * sizeof(float)));
  ASSIGN_OR_RETURN(bz, device.allocate(n * sizeof(float)));
  RETURN_IF_ERROR(device.copy_to_device(bx, x.data(), n * sizeof(float)));
  RETURN_IF_ERROR(add.launch({.grid = n / samples::kAddBlock}, bx, bx, bz, n));
  RETURN_IF_ERROR(device.copy_to_host(z.data(), bz, n * sizeof(float)));
  if (z[n - 1] != 3.0f) return absl::InternalError("vector_add computed the wrong sum");
  ASSIGN_OR_RETURN(copy_kernel, samples::tile_copy_kernel());
  ASSIGN_OR_RETURN(copy, device.compile(copy_kernel));
  constexpr int m = 64, cols = 128;
  ASSIGN_OR_RETURN(src, device.allocate(m * cols * 2));
  ASSIGN_OR_RETURN(dst, device.allocate(m * cols * 2));
  ASSIGN_OR_RETURN(src_map, device.tensor_map(bf16, src, {m, cols}, {samples::kCopyBM, samples::kCopyBN}));
  ASSIGN_OR_RETURN(dst_map, device.tensor_map(bf16, dst, {m, cols}, {samples::kCopyBM, samples::kCopyBN}));
  RETURN_IF_ERROR(copy.launch({.grid = 1}, src_map, dst_map, m, cols));
  ASSIGN_OR_RETURN(group, Group::host(2, 1, {.reserve_bytes = int64_t{1} << 28, .chunk_bytes = 1 << 20}));
  ASSIGN_OR_RETURN(schedule, chunks(ScheduleView::linear(1 << 14), 2, 2));
  ASSIGN_OR_RETURN(buffer, group.allocate(schedule.bytes()));
  ASSIGN_OR_RETURN(plan, TriggeredPlan::create(group, buffer, std::vector<Schedule>(2, schedule)));
  RETURN_IF_ERROR(plan.run());
  RETURN_IF_ERROR(plan.next_epoch());
  RETURN_IF_ERROR(plan.run());
  RETURN_IF_ERROR(plan.next_epoch());
  return plan.abort();
}

TEST(HostFaults, EveryFailingAllocationIsNamedAndTheHostRecovers) {
  ASSERT_TRUE(scenario().ok()) << scenario();  // compiles once; the rest hits the caches
  faults::arm(INT64_MAX);
  const absl::Status clean = scenario();
  const int64_t sites = faults::calls();
  faults::arm(0);
  ASSERT_TRUE(clean.ok()) << clean;
  ASSERT_GE(sites, 10);
  for (int64_t n = 1; n <= sites; ++n) {
    faults::arm(n);
    const absl::Status s = scenario();
    const std::string site = faults::failed_site();
    faults::arm(0);
    ASSERT_FALSE(site.empty()) << "allocation " << n << " of " << sites << " was not reached";
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << site << ": " << s;
    EXPECT_THAT(std::string(s.message()), ::testing::ContainsRegex("host|SDMA queue")) << site;
    const absl::Status after = scenario();
    ASSERT_TRUE(after.ok()) << "after " << site << " failed: " << after;
  }
  std::printf("%lld host allocations per scenario, each made to fail in turn\n", static_cast<long long>(sites));
}

}  // namespace
}  // namespace tessel
