// Every HIP runtime call of a scenario made to fail in turn
// (runtime/faults.h), against the fake libamdhip64 and libhsakmt: a HIP
// device loads and launches a kernel on a tensor map, captures and replays
// a graph, and a group of both fake GPUs runs a triggered plan, armed on
// SDMA queues and on streams. With the n-th call failing, the scenario
// returns a Status naming that call, and the next scenario runs cleanly.
#include <cstdio>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/faults.h"
#include "runtime/plans/plan.h"
#include "samples/kernels.h"
#include "tessel/tessel.h"
#include "tests/hip/fake_hip_env.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;

const auto* const kFake = ::testing::AddGlobalTestEnvironment(new fake_hip::Environment);

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
  ASSIGN_OR_RETURN(device, Device::open("hip:0"));
  ASSIGN_OR_RETURN(kernel, samples::tile_copy_kernel());
  ASSIGN_OR_RETURN(copy, device.compile(kernel, {.num_warps = 4}));
  constexpr int m = 64, n = 128;
  ASSIGN_OR_RETURN(src, device.allocate(m * n * 2));
  ASSIGN_OR_RETURN(dst, device.allocate(m * n * 2));
  std::vector<uint16_t> bits(m * n, 7);
  RETURN_IF_ERROR(device.copy_to_device(src, bits.data(), bits.size() * 2));
  ASSIGN_OR_RETURN(src_map, device.tensor_map(bf16, src, {m, n}, {samples::kCopyBM, samples::kCopyBN}));
  ASSIGN_OR_RETURN(dst_map, device.tensor_map(bf16, dst, {m, n}, {samples::kCopyBM, samples::kCopyBN}));
  RETURN_IF_ERROR(copy.launch({.grid = 1, .num_warps = 4}, src_map, dst_map, m, n));
  ASSIGN_OR_RETURN(stream, device.create_stream());
  RETURN_IF_ERROR(stream.begin_capture());
  const absl::Status captured = copy.launch({.grid = 1, .num_warps = 4, .stream = &stream}, src_map, dst_map, m, n);
  ASSIGN_OR_RETURN(graph, stream.end_capture());
  RETURN_IF_ERROR(captured);
  RETURN_IF_ERROR(graph.launch(&stream));
  RETURN_IF_ERROR(stream.synchronize());
  RETURN_IF_ERROR(device.synchronize());
  for (const char* engines : {"sdma", "streams"}) {
    setenv("TESSEL_HIP_PLANS", engines, 1);
    ASSIGN_OR_RETURN(other, Device::open("hip:1"));
    absl::StatusOr<Group> group = Group::create({device, other}, {.reserve_bytes = 1 << 24, .chunk_bytes = 1 << 20});
    unsetenv("TESSEL_HIP_PLANS");
    if (!group.ok()) return group.status();
    ASSIGN_OR_RETURN(schedule, chunks(ScheduleView::linear(1 << 12), 2, 2));
    ASSIGN_OR_RETURN(buffer, group->allocate(schedule.bytes()));
    ASSIGN_OR_RETURN(
        plan, TriggeredPlan::create(*group, buffer, std::vector<Schedule>(2, schedule), {.timeout = absl::Seconds(5)}));
    RETURN_IF_ERROR(plan.run());
    RETURN_IF_ERROR(plan.next_epoch());
    RETURN_IF_ERROR(plan.run());
    RETURN_IF_ERROR(plan.next_epoch());
    RETURN_IF_ERROR(plan.abort());
  }
  return absl::OkStatus();
}

TEST(HipFaults, EveryFailingRuntimeCallIsNamedAndTheRuntimeRecovers) {
  ASSERT_TRUE(scenario().ok()) << scenario();  // compiles once; the rest hits the caches
  faults::arm(INT64_MAX);
  const absl::Status clean = scenario();
  const int64_t calls = faults::calls();
  faults::arm(0);
  ASSERT_TRUE(clean.ok()) << clean;
  ASSERT_GT(calls, 40);
  for (int64_t n = 1; n <= calls; ++n) {
    faults::arm(n);
    const absl::Status s = scenario();
    const std::string call = faults::failed_site();
    faults::arm(0);
    if (call.empty()) continue;  // the scenario took a shorter path
    EXPECT_FALSE(s.ok()) << "call " << n << " (" << call << ") failed, yet the scenario succeeded";
    EXPECT_THAT(s.message(), HasSubstr(call + ": hipErrorOutOfMemory")) << "call " << n;
    const absl::Status after = scenario();
    ASSERT_TRUE(after.ok()) << "after call " << n << " (" << call << ") failed: " << after;
  }
  std::printf("%lld runtime calls per scenario, each made to fail in turn\n", static_cast<long long>(calls));
}

}  // namespace
}  // namespace tessel
