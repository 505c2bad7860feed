// Every HIP runtime call of a scenario made to fail in turn
// (runtime/faults.h), against the fake libamdhip64 and libhsakmt: a HIP
// device loads and launches a kernel on a tensor map, captures and replays
// a graph, finds and reads a printing kernel's debug buffer, and a group of
// both fake GPUs runs a triggered plan, armed on SDMA queues and on streams. With the n-th call failing, the scenario
// returns a Status naming that call, and the next scenario runs cleanly.
#include <cstdio>
#include <string>
#include <vector>

#include "base/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/plans/plan.h"
#include "samples/kernels.h"
#include "tessel/tessel.h"
#include "tests/fault_test_util.h"
#include "tests/hip/fake_hip_env.h"

namespace tessel {
namespace {

const auto* const kFake = ::testing::AddGlobalTestEnvironment(new fake_hip::Environment);

absl::Status scenario() {
  TESSEL_ASSIGN_OR_RETURN(auto device, Device::open("hip:0"));
  TESSEL_ASSIGN_OR_RETURN(auto kernel, samples::tile_copy_kernel());
  CompileOptions options;
  options.num_warps = 4;
  TESSEL_ASSIGN_OR_RETURN(auto copy, device.compile(kernel, options));
  constexpr int m = 64, n = 128;
  TESSEL_ASSIGN_OR_RETURN(auto src, device.allocate(m * n * 2));
  TESSEL_ASSIGN_OR_RETURN(auto dst, device.allocate(m * n * 2));
  std::vector<uint16_t> bits(m * n, 7);
  TESSEL_RETURN_IF_ERROR(device.copy_to_device(src, bits.data(), bits.size() * 2));
  TESSEL_ASSIGN_OR_RETURN(auto src_map, device.tensor_map(bf16, src, {m, n}, {samples::kCopyBM, samples::kCopyBN}));
  TESSEL_ASSIGN_OR_RETURN(auto dst_map, device.tensor_map(bf16, dst, {m, n}, {samples::kCopyBM, samples::kCopyBN}));
  TESSEL_RETURN_IF_ERROR(copy.launch({.grid = 1, .num_warps = 4}, src_map, dst_map, m, n));
  TESSEL_ASSIGN_OR_RETURN(auto stream, device.create_stream());
  TESSEL_RETURN_IF_ERROR(stream.begin_capture());
  const absl::Status captured = copy.launch({.grid = 1, .num_warps = 4, .stream = &stream}, src_map, dst_map, m, n);
  TESSEL_ASSIGN_OR_RETURN(auto graph, stream.end_capture());
  TESSEL_RETURN_IF_ERROR(captured);
  TESSEL_RETURN_IF_ERROR(graph.launch(&stream));
  TESSEL_RETURN_IF_ERROR(stream.synchronize());
  TESSEL_RETURN_IF_ERROR(device.synchronize());
  // A kernel that prints: its debug buffer is found, then read at synchronize.
  KernelBuilder k("prints");
  device_print("program", {k.program_id()});
  TESSEL_ASSIGN_OR_RETURN(auto prints, device.compile(*k.build(), options));
  TESSEL_RETURN_IF_ERROR(prints.launch({.grid = 1, .num_warps = 4}));
  TESSEL_RETURN_IF_ERROR(device.synchronize());
  for (const char* engines : {"sdma", "streams"}) {
    setenv("TESSEL_HIP_PLANS", engines, 1);
    TESSEL_ASSIGN_OR_RETURN(auto other, Device::open("hip:1"));
    absl::StatusOr<Group> group = Group::create({device, other}, {.reserve_bytes = 1 << 24, .chunk_bytes = 1 << 20});
    unsetenv("TESSEL_HIP_PLANS");
    if (!group.ok()) return group.status();
    TESSEL_ASSIGN_OR_RETURN(auto schedule, chunks(ScheduleView::linear(1 << 12), 2, 2));
    TESSEL_ASSIGN_OR_RETURN(auto buffer, group->allocate(schedule.bytes()));
    TESSEL_ASSIGN_OR_RETURN(auto plan, TriggeredPlan::create(*group, buffer, std::vector<Schedule>(2, schedule),
                                                             {.timeout = absl::Seconds(5)}));
    TESSEL_RETURN_IF_ERROR(plan.run());
    TESSEL_RETURN_IF_ERROR(plan.next_epoch());
    TESSEL_RETURN_IF_ERROR(plan.run());
    TESSEL_RETURN_IF_ERROR(plan.next_epoch());
    TESSEL_RETURN_IF_ERROR(plan.abort());
  }
  return absl::OkStatus();
}

TEST(HipFaults, EveryFailingRuntimeCallIsNamedAndTheRuntimeRecovers) {
  const int64_t calls = fault_test::expect_every_failure_named(scenario, "hipErrorOutOfMemory");
  EXPECT_GT(calls, 40);
  std::printf("%lld runtime calls per scenario, each made to fail in turn\n", static_cast<long long>(calls));
}

}  // namespace
}  // namespace tessel
