// Every CUDA driver call of a scenario made to fail in turn
// (runtime/faults.h): the device opens, compiles and loads a
// kernel, encodes a tensor map, launches, captures and replays a graph, and
// runs a triggered plan on a one-GPU group (create, arm, epochs, abort),
// then everything is destroyed. With the n-th call failing, the scenario
// returns a Status naming that call (it never crashes or hangs), or, where
// the call was in a destructor, still succeeds; and
// afterwards the device runs the scenario cleanly and has its memory back.
#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/plans/plan.h"
#include "tests/fault_test_util.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/sample_kernels.h"

namespace tessel {
namespace {

// The scenario, on a device it opens; OK when every step did what it should.
absl::Status scenario() {
  TESSEL_ASSIGN_OR_RETURN(auto device, Device::open("cuda:0"));
  // A kernel compiled and loaded, run on uploaded data.
  TESSEL_ASSIGN_OR_RETURN(auto kernel, samples::vector_add_kernel("faulted_add"));
  TESSEL_ASSIGN_OR_RETURN(auto add, device.compile(kernel));
  constexpr int n = 4096;
  std::vector<float> x(n, 1.5f), z(n);
  TESSEL_ASSIGN_OR_RETURN(auto bx, device.allocate(n * sizeof(float)));
  TESSEL_ASSIGN_OR_RETURN(auto bz, device.allocate(n * sizeof(float)));
  TESSEL_RETURN_IF_ERROR(device.copy_to_device(bx, x.data(), n * sizeof(float)));
  TESSEL_RETURN_IF_ERROR(add.launch({.grid = n / samples::kAddBlock}, bx, bx, bz, n));
  TESSEL_RETURN_IF_ERROR(device.synchronize());
  TESSEL_RETURN_IF_ERROR(device.copy_to_host(z.data(), bz, n * sizeof(float)));
  if (z[n - 1] != 3.0f) return absl::InternalError("vector_add computed the wrong sum");
  // A tensor map for a TMA kernel, captured with its launch in a graph.
  TESSEL_ASSIGN_OR_RETURN(auto copy_kernel, samples::tile_copy_kernel());
  TESSEL_ASSIGN_OR_RETURN(auto copy, device.compile(copy_kernel));
  constexpr int m = 128, cols = 256;
  TESSEL_ASSIGN_OR_RETURN(auto src, device.allocate(m * cols * 2));
  TESSEL_ASSIGN_OR_RETURN(auto dst, device.allocate(m * cols * 2));
  TESSEL_ASSIGN_OR_RETURN(auto src_map, device.tensor_map(bf16, src, {m, cols}, {samples::kCopyBM, samples::kCopyBN}));
  TESSEL_ASSIGN_OR_RETURN(auto dst_map, device.tensor_map(bf16, dst, {m, cols}, {samples::kCopyBM, samples::kCopyBN}));
  TESSEL_ASSIGN_OR_RETURN(auto stream, device.create_stream());
  TESSEL_RETURN_IF_ERROR(stream.begin_capture());
  absl::Status captured = copy.launch({.grid = 4, .stream = &stream}, src_map, dst_map, m, cols);
  TESSEL_ASSIGN_OR_RETURN(auto graph, stream.end_capture());
  TESSEL_RETURN_IF_ERROR(captured);
  TESSEL_RETURN_IF_ERROR(graph.launch(&stream));
  TESSEL_RETURN_IF_ERROR(stream.synchronize());
  // A triggered plan on a group of this one GPU: arming, two epochs, abort.
  TESSEL_ASSIGN_OR_RETURN(auto group,
                          Group::create({device}, {.reserve_bytes = int64_t{1} << 30, .chunk_bytes = 2 << 20}));
  TESSEL_ASSIGN_OR_RETURN(auto schedule, chunks(ScheduleView::linear(1 << 16), 1, 2));
  TESSEL_ASSIGN_OR_RETURN(auto buffer, group.allocate(schedule.bytes()));
  TESSEL_ASSIGN_OR_RETURN(auto plan, TriggeredPlan::create(group, buffer, {schedule}, {.timeout = absl::Seconds(5)}));
  TESSEL_RETURN_IF_ERROR(plan.run());
  TESSEL_RETURN_IF_ERROR(plan.next_epoch());
  TESSEL_RETURN_IF_ERROR(plan.run());
  TESSEL_RETURN_IF_ERROR(plan.next_epoch());
  fault_test::TeardownMark teardown;  // the destructors' context scopes follow it
  return plan.abort();
}

TEST(CudaFaults, EveryFailingDriverCallIsNamedAndTheDeviceRecovers) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  EXPECT_EQ(device.kind(), DeviceKind::kCuda);
  ASSERT_TRUE(scenario().ok()) << scenario();  // the primary context stays, so memory is comparable
  const size_t free_before = fault_test::free_cuda_memory();
  const int64_t calls = fault_test::expect_every_failure_named(scenario, "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_GT(calls, 20);
  // Everything the failed scenarios allocated went back (within the
  // driver's own bookkeeping).
  EXPECT_NEAR(static_cast<double>(fault_test::free_cuda_memory()), static_cast<double>(free_before), 64.0 * (1 << 20));
  std::printf("%lld driver calls per scenario, each made to fail in turn\n", static_cast<long long>(calls));
}

}  // namespace
}  // namespace tessel
