// Every CUDA driver call of a scenario made to fail in turn
// (runtime/faults.h), against the fake libcuda, in CI: a device compiles,
// links and launches kernels, encodes tensor maps, captures and replays a
// graph, finds and reads a printing kernel's debug buffer, and a group of
// both fake GPUs runs a triggered plan (create, epochs, abort); then
// everything is destroyed. With the n-th call failing, the scenario returns
// a Status naming that call, or, where the call was in a destructor, still
// succeeds; the next scenario runs cleanly, and the fake's memory is back.
// tests/gpu/fault_injection_test.cc runs a scenario like it on a GPU.
#include <cstdio>
#include <string>
#include <vector>

#include "base/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/plans/plan.h"
#include "samples/kernels.h"
#include "tessel/tessel.h"
#include "tests/cuda/fake_cuda_env.h"
#include "tests/fault_test_util.h"

namespace tessel {
namespace {

const auto* const kFake = ::testing::AddGlobalTestEnvironment(new fake_cuda::Environment);

absl::Status scenario() {
  TESSEL_ASSIGN_OR_RETURN(auto device, Device::open("cuda:0"));
  TESSEL_ASSIGN_OR_RETURN(auto add_kernel, samples::vector_add_kernel("faulted_add"));
  TESSEL_ASSIGN_OR_RETURN(auto add, device.compile(add_kernel));
  constexpr int n = 4096;
  std::vector<float> x(n, 1.5f);
  TESSEL_ASSIGN_OR_RETURN(auto bx, device.allocate(n * sizeof(float)));
  TESSEL_ASSIGN_OR_RETURN(auto bz, device.allocate(n * sizeof(float)));
  TESSEL_RETURN_IF_ERROR(device.copy_to_device(bx, x.data(), n * sizeof(float)));
  TESSEL_RETURN_IF_ERROR(add.launch({.grid = n / samples::kAddBlock}, bx, bx, bz, n));
  TESSEL_RETURN_IF_ERROR(device.synchronize());
  TESSEL_RETURN_IF_ERROR(device.copy_to_host(x.data(), bz, n * sizeof(float)));
  TESSEL_ASSIGN_OR_RETURN(auto copy_kernel, samples::tile_copy_kernel());
  TESSEL_ASSIGN_OR_RETURN(auto copy, device.compile(copy_kernel));
  constexpr int m = 128, cols = 256;
  TESSEL_ASSIGN_OR_RETURN(auto src, device.allocate(m * cols * 2));
  TESSEL_ASSIGN_OR_RETURN(auto dst, device.allocate(m * cols * 2));
  TESSEL_ASSIGN_OR_RETURN(auto src_map, device.tensor_map(bf16, src, {m, cols}, {samples::kCopyBM, samples::kCopyBN}));
  TESSEL_ASSIGN_OR_RETURN(auto dst_map, device.tensor_map(bf16, dst, {m, cols}, {samples::kCopyBM, samples::kCopyBN}));
  TESSEL_ASSIGN_OR_RETURN(auto stream, device.create_stream());
  TESSEL_RETURN_IF_ERROR(stream.begin_capture());
  const absl::Status captured = copy.launch({.grid = 4, .stream = &stream}, src_map, dst_map, m, cols);
  TESSEL_ASSIGN_OR_RETURN(auto graph, stream.end_capture());
  TESSEL_RETURN_IF_ERROR(captured);
  TESSEL_RETURN_IF_ERROR(graph.launch(&stream));
  TESSEL_RETURN_IF_ERROR(stream.synchronize());
  // A kernel that prints: its debug buffer is found, then read at synchronize.
  KernelBuilder k("prints");
  device_print("program", {k.program_id()});
  TESSEL_ASSIGN_OR_RETURN(auto prints, device.compile(*k.build()));
  TESSEL_RETURN_IF_ERROR(prints.launch({.grid = 1}));
  TESSEL_RETURN_IF_ERROR(device.synchronize());
  // A triggered plan across both GPUs: arming, two epochs, abort.
  TESSEL_ASSIGN_OR_RETURN(auto other, Device::open("cuda:1"));
  TESSEL_ASSIGN_OR_RETURN(
      auto group, Group::create({device, other}, {.reserve_bytes = int64_t{1} << 26, .chunk_bytes = int64_t{2} << 20}));
  TESSEL_ASSIGN_OR_RETURN(auto schedule, chunks(ScheduleView::linear(1 << 14), 2, 2));
  TESSEL_ASSIGN_OR_RETURN(auto buffer, group.allocate(schedule.bytes()));
  TESSEL_ASSIGN_OR_RETURN(auto plan, TriggeredPlan::create(group, buffer, std::vector<Schedule>(2, schedule),
                                                           {.timeout = absl::Seconds(5)}));
  TESSEL_RETURN_IF_ERROR(plan.run());
  TESSEL_RETURN_IF_ERROR(plan.next_epoch());
  TESSEL_RETURN_IF_ERROR(plan.run());
  TESSEL_RETURN_IF_ERROR(plan.next_epoch());
  fault_test::TeardownMark teardown;  // the destructors' calls follow it
  return plan.abort();
}

TEST(FakeCudaFaults, EveryFailingDriverCallIsNamedAndTheDeviceRecovers) {
  ASSERT_TRUE(scenario().ok()) << scenario();
  // The fake counts its allocations' and mapped chunks' bytes.
  const size_t free_before = fault_test::free_cuda_memory();
  const int64_t calls = fault_test::expect_every_failure_named(scenario, "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_GT(calls, 60);
  EXPECT_EQ(fault_test::free_cuda_memory(), free_before) << "the failed scenarios leaked device memory";
  std::printf("%lld driver calls per scenario, each made to fail in turn\n", static_cast<long long>(calls));
}

}  // namespace
}  // namespace tessel
