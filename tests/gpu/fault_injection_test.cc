// Every CUDA driver call of a scenario made to fail in turn
// (runtime/faults.h): the device opens, compiles and loads a
// kernel, encodes a tensor map, launches, captures and replays a graph, and
// runs a triggered plan on a one-GPU group (create, arm, epochs, abort),
// then everything is destroyed. With the n-th call failing, the scenario
// returns a Status naming that call (it never crashes or hangs), and
// afterwards the device runs the scenario cleanly and has its memory back.
// With TESSEL_FAULT_TRACE set, the test names each call before making it
// fail and prints each outcome, so that a crash's last lines say where.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cuda/driver.h"
#include "runtime/faults.h"
#include "runtime/plans/plan.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/sample_kernels.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;

#define RETURN_IF_ERROR(expr) \
  do {                        \
    absl::Status s_ = (expr); \
    if (!s_.ok()) return s_;  \
  } while (0)
#define ASSIGN_OR_RETURN(lhs, expr)             \
  auto lhs##_or = (expr);                       \
  if (!lhs##_or.ok()) return lhs##_or.status(); \
  auto& lhs = *lhs##_or

// The scenario, on a device it opens; OK when every step did what it should.
absl::Status scenario() {
  ASSIGN_OR_RETURN(device, Device::open("cuda:0"));
  // A kernel compiled and loaded, run on uploaded data.
  ASSIGN_OR_RETURN(kernel, samples::vector_add_kernel("faulted_add"));
  ASSIGN_OR_RETURN(add, device.compile(kernel));
  constexpr int n = 4096;
  std::vector<float> x(n, 1.5f), z(n);
  ASSIGN_OR_RETURN(bx, device.allocate(n * sizeof(float)));
  ASSIGN_OR_RETURN(bz, device.allocate(n * sizeof(float)));
  RETURN_IF_ERROR(device.copy_to_device(bx, x.data(), n * sizeof(float)));
  RETURN_IF_ERROR(add.launch({.grid = n / samples::kAddBlock}, bx, bx, bz, n));
  RETURN_IF_ERROR(device.synchronize());
  RETURN_IF_ERROR(device.copy_to_host(z.data(), bz, n * sizeof(float)));
  if (z[n - 1] != 3.0f) return absl::InternalError("vector_add computed the wrong sum");
  // A tensor map for a TMA kernel, captured with its launch in a graph.
  ASSIGN_OR_RETURN(copy_kernel, samples::tile_copy_kernel());
  ASSIGN_OR_RETURN(copy, device.compile(copy_kernel));
  constexpr int m = 128, cols = 256;
  ASSIGN_OR_RETURN(src, device.allocate(m * cols * 2));
  ASSIGN_OR_RETURN(dst, device.allocate(m * cols * 2));
  ASSIGN_OR_RETURN(src_map, device.tensor_map(bf16, src, {m, cols}, {samples::kCopyBM, samples::kCopyBN}));
  ASSIGN_OR_RETURN(dst_map, device.tensor_map(bf16, dst, {m, cols}, {samples::kCopyBM, samples::kCopyBN}));
  ASSIGN_OR_RETURN(stream, device.create_stream());
  RETURN_IF_ERROR(stream.begin_capture());
  absl::Status captured = copy.launch({.grid = 4, .stream = &stream}, src_map, dst_map, m, cols);
  ASSIGN_OR_RETURN(graph, stream.end_capture());
  RETURN_IF_ERROR(captured);
  RETURN_IF_ERROR(graph.launch(&stream));
  RETURN_IF_ERROR(stream.synchronize());
  // A triggered plan on a group of this one GPU: arming, two epochs, abort.
  ASSIGN_OR_RETURN(group, Group::create({device}, {.reserve_bytes = int64_t{1} << 30, .chunk_bytes = 2 << 20}));
  ASSIGN_OR_RETURN(schedule, chunks(ScheduleView::linear(1 << 16), 1, 2));
  ASSIGN_OR_RETURN(buffer, group.allocate(schedule.bytes()));
  ASSIGN_OR_RETURN(plan, TriggeredPlan::create(group, buffer, {schedule}, {.timeout = absl::Seconds(5)}));
  RETURN_IF_ERROR(plan.run());
  RETURN_IF_ERROR(plan.next_epoch());
  RETURN_IF_ERROR(plan.run());
  RETURN_IF_ERROR(plan.next_epoch());
  return plan.abort();
}

size_t free_device_memory() {
  size_t free = 0, total = 0;
  const cuda::Driver* driver = *cuda::Driver::get();
  if (driver->mem_get_info.raw(&free, &total) != cuda::CUDA_SUCCESS) return 0;
  return free;
}

TEST(CudaFaults, EveryFailingDriverCallIsNamedAndTheDeviceRecovers) {
  TESSEL_OPEN_CUDA_OR_SKIP(probe);
  ASSERT_TRUE(scenario().ok()) << scenario();  // warms the kernel caches and the primary context
  faults::arm(INT64_MAX);
  absl::Status clean = scenario();
  const int64_t calls = faults::calls();
  const std::vector<std::string> sites = faults::sites();
  faults::arm(0);
  // With TESSEL_FAULT_TRACE set, each call is named before it fails: a
  // crash's last line says which.
  const bool trace = std::getenv("TESSEL_FAULT_TRACE") != nullptr;
  ASSERT_TRUE(clean.ok()) << clean;
  ASSERT_GT(calls, 20);
  const size_t free_before = free_device_memory();
  int failures = 0;
  for (int64_t n = 1; n <= calls; ++n) {
    if (trace) std::fprintf(stderr, "failing call %lld: %s\n", static_cast<long long>(n), sites[n - 1].c_str());
    faults::arm(n);
    const absl::Status s = scenario();
    const std::string call = faults::failed_site();
    faults::arm(0);
    if (call.empty()) continue;  // the scenario took another path and made fewer calls
    ++failures;
    EXPECT_FALSE(s.ok()) << "call " << n << " (" << call << ") failed, yet the scenario succeeded";
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat(call, ": CUDA_ERROR_OUT_OF_MEMORY"))) << "call " << n;
    if (trace) std::fprintf(stderr, "  -> %s\n  then a clean run\n", s.ToString().c_str());
    const absl::Status after = scenario();
    ASSERT_TRUE(after.ok()) << "after call " << n << " (" << call << ") failed: " << after;
  }
  EXPECT_GT(failures, calls / 2);
  // Everything the failed scenarios allocated went back (within the
  // driver's own bookkeeping).
  EXPECT_NEAR(static_cast<double>(free_device_memory()), static_cast<double>(free_before), 64.0 * (1 << 20));
  std::printf("%lld driver calls per scenario, each made to fail in turn\n", static_cast<long long>(calls));
}

}  // namespace
}  // namespace tessel
