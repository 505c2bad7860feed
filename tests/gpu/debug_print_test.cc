// device_print and device_assert on a GPU: the lines reach stdout at the
// synchronize, the same lines as the host prints; a failed assert is that
// synchronize's error, and the GPU stays usable after it.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "dsl/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/device.h"
#include "tests/gpu/gpu_test_util.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;

Kernel printer() {
  KernelBuilder k("gpu_print");
  Value x = k.arg(ptr(f32), "x");
  Value offs = k.program_id() * 64 + k.arange(0, 64);
  Value v = load(x + offs);
  device_print("v", {v, cast(v, bf16), offs});
  device_print("sum", {sum(offs, 0)});
  device_assert(v < 1000.0f, "v is below 1000");
  store(x + offs, v + 1.0f);
  return *k.build();
}

// The sorted lines of one launch of `printer()` over `xs` on `device`
// (which it updates), and the synchronize's status.
std::vector<std::string> run(Device& device, std::vector<float>& xs, bool debug, absl::Status& synced) {
  CompileOptions options;
  options.debug = debug;
  absl::StatusOr<Function> fn = device.compile(printer(), options);
  EXPECT_TRUE(fn.ok()) << fn.status();
  absl::StatusOr<Buffer> x = device.allocate(xs.size() * sizeof(float));
  EXPECT_TRUE(x.ok()) << x.status();
  EXPECT_TRUE(device.copy_to_device(*x, xs.data(), xs.size() * sizeof(float)).ok());
  ::testing::internal::CaptureStdout();
  absl::Status launched = fn->launch({.grid = static_cast<int>(xs.size() / 64)}, *x);
  synced = device.synchronize();
  std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_TRUE(launched.ok()) << launched;
  EXPECT_TRUE(device.copy_to_host(xs.data(), *x, xs.size() * sizeof(float)).ok());
  std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  std::sort(lines.begin(), lines.end());
  return lines;
}

std::vector<float> inputs(int n) {
  std::vector<float> xs(n);
  for (int i = 0; i < n; ++i) xs[i] = 0.25f * i - 7.0f;
  return xs;
}

TEST(GpuDebug, PrintsTheHostsLinesAtTheSynchronize) {
  TESSEL_OPEN_CUDA_OR_SKIP(gpu);
  Device host = *Device::open("host:2");
  absl::Status gpu_synced, host_synced;
  std::vector<float> gpu_xs = inputs(256), host_xs = inputs(256);
  std::vector<std::string> on_gpu = run(gpu, gpu_xs, false, gpu_synced);
  std::vector<std::string> on_host = run(host, host_xs, false, host_synced);
  EXPECT_TRUE(gpu_synced.ok()) << gpu_synced;
  EXPECT_EQ(on_gpu.size(), 256u + 4u);
  EXPECT_EQ(on_gpu, on_host);
}

TEST(GpuDebug, AFailedAssertIsTheSynchronizesErrorAndTheGpuGoesOn) {
  TESSEL_OPEN_CUDA_OR_SKIP(gpu);
  std::vector<float> xs = inputs(256);
  xs[130] = 5000.0f;
  const std::vector<float> before = xs;
  absl::Status synced;
  run(gpu, xs, true, synced);
  EXPECT_EQ(synced.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(synced.message(), HasSubstr("kernel 'gpu_print': device_assert failed at "));
  EXPECT_THAT(synced.message(), HasSubstr("in program (2, 0, 0), element (2): v is below 1000"));
  // Program 2 stopped before its store; the others stored.
  for (int i = 0; i < 256; ++i) EXPECT_EQ(xs[i], i / 64 == 2 ? before[i] : before[i] + 1.0f) << i;
  // Reported once; a launch that holds is clean, and its stores all land.
  xs = inputs(256);
  std::vector<std::string> lines = run(gpu, xs, true, synced);
  EXPECT_TRUE(synced.ok()) << synced;
  EXPECT_EQ(lines.size(), 256u + 4u);
  EXPECT_EQ(xs[0], inputs(256)[0] + 1.0f);
}

// A stream's synchronize reads a module's lines only where no other stream
// has a launch of it pending, whose kernel could still be printing: that
// stream's synchronize reads them, both launches' at once.
TEST(GpuDebug, AStreamReadsTheLinesOnlyWhenNoOtherStreamHasALaunchPending) {
  TESSEL_OPEN_CUDA_OR_SKIP(gpu);
  absl::StatusOr<Function> fn = gpu.compile(printer());
  ASSERT_TRUE(fn.ok()) << fn.status();
  std::vector<float> xs = inputs(256);
  absl::StatusOr<Buffer> x = gpu.allocate(xs.size() * sizeof(float));
  absl::StatusOr<Stream> s = gpu.create_stream(), t = gpu.create_stream();
  ASSERT_TRUE(x.ok() && s.ok() && t.ok());
  ASSERT_TRUE(gpu.copy_to_device(*x, xs.data(), xs.size() * sizeof(float)).ok());
  auto lines_at = [](Stream& stream) {
    ::testing::internal::CaptureStdout();
    EXPECT_TRUE(stream.synchronize().ok());
    const std::vector<std::string> lines =
        absl::StrSplit(::testing::internal::GetCapturedStdout(), '\n', absl::SkipEmpty());
    return lines.size();
  };
  ASSERT_TRUE(fn->launch({.grid = 4, .stream = &*s}, *x).ok());
  ASSERT_TRUE(fn->launch({.grid = 4, .stream = &*t}, *x).ok());
  EXPECT_EQ(lines_at(*s), 0u);
  EXPECT_EQ(lines_at(*t), 2 * (256u + 4u));
  ASSERT_TRUE(fn->launch({.grid = 4, .stream = &*s}, *x).ok());
  EXPECT_EQ(lines_at(*t), 0u);
  EXPECT_EQ(lines_at(*s), 256u + 4u);
}

}  // namespace
}  // namespace tessel
