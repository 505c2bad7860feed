// Every host allocation of a scenario made to fail in turn
// (runtime/faults.h): a host device compiles and runs kernels (buffers,
// shared arenas, tensor maps) and a group of host ranks runs a triggered
// plan (address space, mapped chunks, gate words, copy-engine queues).
// With the n-th allocation failing, the scenario returns ResourceExhausted
// naming what it was allocating, and the next scenario runs cleanly.
#include <cstdio>
#include <vector>

#include "base/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/plans/plan.h"
#include "samples/kernels.h"
#include "tessel/tessel.h"
#include "tests/fault_test_util.h"

namespace tessel {
namespace {

absl::Status scenario() {
  TESSEL_ASSIGN_OR_RETURN(auto device, Device::open("host:2"));
  TESSEL_ASSIGN_OR_RETURN(auto kernel, samples::vector_add_kernel("faulted_add"));
  TESSEL_ASSIGN_OR_RETURN(auto add, device.compile(kernel));
  constexpr int n = 2048;
  std::vector<float> x(n, 1.5f), z(n);
  TESSEL_ASSIGN_OR_RETURN(auto bx, device.allocate(n * sizeof(float)));
  TESSEL_ASSIGN_OR_RETURN(auto bz, device.allocate(n * sizeof(float)));
  TESSEL_RETURN_IF_ERROR(device.copy_to_device(bx, x.data(), n * sizeof(float)));
  TESSEL_RETURN_IF_ERROR(add.launch({.grid = n / samples::kAddBlock}, bx, bx, bz, n));
  TESSEL_RETURN_IF_ERROR(device.copy_to_host(z.data(), bz, n * sizeof(float)));
  if (z[n - 1] != 3.0f) return absl::InternalError("vector_add computed the wrong sum");
  TESSEL_ASSIGN_OR_RETURN(auto copy_kernel, samples::tile_copy_kernel());
  TESSEL_ASSIGN_OR_RETURN(auto copy, device.compile(copy_kernel));
  constexpr int m = 64, cols = 128;
  TESSEL_ASSIGN_OR_RETURN(auto src, device.allocate(m * cols * 2));
  TESSEL_ASSIGN_OR_RETURN(auto dst, device.allocate(m * cols * 2));
  TESSEL_ASSIGN_OR_RETURN(auto src_map, device.tensor_map(bf16, src, {m, cols}, {samples::kCopyBM, samples::kCopyBN}));
  TESSEL_ASSIGN_OR_RETURN(auto dst_map, device.tensor_map(bf16, dst, {m, cols}, {samples::kCopyBM, samples::kCopyBN}));
  TESSEL_RETURN_IF_ERROR(copy.launch({.grid = 1}, src_map, dst_map, m, cols));
  TESSEL_ASSIGN_OR_RETURN(auto group, Group::host(2, 1, {.reserve_bytes = int64_t{1} << 28, .chunk_bytes = 1 << 20}));
  TESSEL_ASSIGN_OR_RETURN(auto schedule, chunks(ScheduleView::linear(1 << 14), 2, 2));
  TESSEL_ASSIGN_OR_RETURN(auto buffer, group.allocate(schedule.bytes()));
  TESSEL_ASSIGN_OR_RETURN(auto plan, TriggeredPlan::create(group, buffer, std::vector<Schedule>(2, schedule)));
  TESSEL_RETURN_IF_ERROR(plan.run());
  TESSEL_RETURN_IF_ERROR(plan.next_epoch());
  TESSEL_RETURN_IF_ERROR(plan.run());
  TESSEL_RETURN_IF_ERROR(plan.next_epoch());
  return plan.abort();
}

TEST(HostFaults, EveryFailingAllocationIsNamedAndTheHostRecovers) {
  const int64_t sites =
      fault_test::fail_every_site(scenario, [](int64_t n, const std::string& site, const absl::Status& s) {
        EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << n << " " << site << ": " << s;
        EXPECT_THAT(std::string(s.message()), ::testing::ContainsRegex("host|SDMA queue")) << site;
      });
  EXPECT_GE(sites, 10);
  std::printf("%lld host allocations per scenario, each made to fail in turn\n", static_cast<long long>(sites));
}

}  // namespace
}  // namespace tessel
