// device_print, device_assert and the error word on a CUDA device, against
// the fake libcuda: the runtime finds the module's debug buffer and error
// word by name, and a synchronize prints what the launches since the last
// one recorded and reports what failed. The fake runs no kernels, so the
// records and codes are written here as the kernel would write them.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/match.h"
#include "base/debug_abi.h"
#include "codegen/compiler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tessel/tessel.h"
#include "tests/cuda/fake_cuda_env.h"
#include "tests/debug_cases.h"

namespace tessel {
namespace {

using debug_cases::kPrinted;
using debug_cases::synchronize;
using debug_cases::Synchronized;
using debug_cases::write_records;
using ::testing::HasSubstr;

const auto* const kFake = ::testing::AddGlobalTestEnvironment(new fake_cuda::Environment);

constexpr const char* kErrorWord = "tessel_error";

CompileOptions debug_on() {
  CompileOptions options;
  options.debug = true;
  return options;
}

struct Debugged {
  Device device;
  Function fn;
  Buffer x;
};
Debugged debugged(const std::string& name) {
  absl::StatusOr<Device> d = Device::open("cuda:0");
  EXPECT_TRUE(d.ok()) << d.status();
  absl::StatusOr<Function> fn = d->compile(debug_cases::printing_and_asserting(name), debug_on());
  EXPECT_TRUE(fn.ok()) << fn.status();
  absl::StatusOr<Buffer> x = d->allocate(256 * 4);
  EXPECT_TRUE(x.ok()) << x.status();
  return {*d, *fn, *x};
}

TEST(FakeCudaDebug, SynchronizePrintsTheRecordsAndReportsTheFailedAssert) {
  Debugged k = debugged("debugged");
  fake_cuda::Record record;
  ASSERT_TRUE(k.fn.launch({.grid = 2, .num_warps = 4}, k.x).ok());
  void* debug = record.global(kDebugSymbol);  // the kernel specialized to x's
  ASSERT_NE(debug, nullptr);
  write_records(debug, false);
  Synchronized s = synchronize([&] { return k.device.synchronize(); });
  EXPECT_TRUE(s.status.ok()) << s.status;
  EXPECT_EQ(s.out, kPrinted);
  for (int w = 0; w < kDebugHeaderBytes / 8; ++w) EXPECT_EQ(static_cast<uint64_t*>(debug)[w], 0u) << "word " << w;

  // Read once per launch: records left without a launch wait for the next.
  write_records(debug, true);
  s = synchronize([&] { return k.device.synchronize(); });
  EXPECT_EQ(s.out, "");
  ASSERT_TRUE(k.fn.launch({.grid = 2, .num_warps = 4}, k.x).ok());
  s = synchronize([&] { return k.device.synchronize(); });
  EXPECT_EQ(s.out, kPrinted);
  EXPECT_EQ(s.status.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(absl::StartsWith(s.status.message(), "cuda:0: kernel 'debugged': device_assert failed at ")) << s.status;
  EXPECT_THAT(s.status.message(), HasSubstr("in program (1, 0, 0), element (3): v is not negative"));
  ASSERT_TRUE(k.fn.launch({.grid = 2, .num_warps = 4}, k.x).ok());
  EXPECT_TRUE(k.device.synchronize().ok());  // the failure was cleared
}

// A stream's synchronize reads a module's buffer only where no other stream
// has a launch of it pending, whose kernel could still be writing there:
// that stream's synchronize, or the device's, reads it.
TEST(FakeCudaDebug, AStreamReadsTheBufferOnlyWhenNoOtherStreamHasALaunchPending) {
  Debugged k = debugged("debugged_on_two_streams");
  fake_cuda::Record record;
  absl::StatusOr<Stream> s = k.device.create_stream(), t = k.device.create_stream();
  ASSERT_TRUE(s.ok() && t.ok());

  ASSERT_TRUE(k.fn.launch({.grid = 2, .num_warps = 4, .stream = &*s}, k.x).ok());
  ASSERT_TRUE(k.fn.launch({.grid = 2, .num_warps = 4, .stream = &*t}, k.x).ok());
  void* debug = record.global(kDebugSymbol);  // the kernel specialized to x's
  write_records(debug, false);
  EXPECT_EQ(synchronize([&] { return s->synchronize(); }).out, "");  // t's launch may still write
  EXPECT_EQ(synchronize([&] { return t->synchronize(); }).out, kPrinted);

  ASSERT_TRUE(k.fn.launch({.grid = 2, .num_warps = 4, .stream = &*s}, k.x).ok());
  write_records(debug, false);
  EXPECT_EQ(synchronize([&] { return t->synchronize(); }).out, "");
  EXPECT_EQ(synchronize([&] { return s->synchronize(); }).out, kPrinted);

  ASSERT_TRUE(k.fn.launch({.grid = 2, .num_warps = 4, .stream = &*s}, k.x).ok());
  ASSERT_TRUE(k.fn.launch({.grid = 2, .num_warps = 4}, k.x).ok());
  write_records(debug, false);
  EXPECT_EQ(synchronize([&] { return s->synchronize(); }).out, "");
  EXPECT_EQ(synchronize([&] { return k.device.synchronize(); }).out, kPrinted);
}

// The error word: a bounded wait that gave up, or another code a kernel
// recorded, reported once by the next synchronize.
TEST(FakeCudaDebug, TheErrorWordIsReportedOnceAndCleared) {
  Debugged k = debugged("worded");
  fake_cuda::Record record;
  ASSERT_TRUE(k.fn.launch({.grid = 2, .num_warps = 4}, k.x).ok());
  auto* word = static_cast<uint32_t*>(record.global(kErrorWord));  // the kernel specialized to x's
  ASSERT_NE(word, nullptr);
  *word = kDeviceTimeout;
  absl::Status s = k.device.synchronize();
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr("cuda:0: kernel 'worded' timed out in a bounded wait"));
  EXPECT_EQ(*word, 0u);

  ASSERT_TRUE(k.fn.launch({.grid = 2, .num_warps = 4}, k.x).ok());
  *word = 7;
  s = k.device.synchronize();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("cuda:0: kernel 'worded' reported device error code 7"));
  ASSERT_TRUE(k.fn.launch({.grid = 2, .num_warps = 4}, k.x).ok());
  EXPECT_TRUE(k.device.synchronize().ok());
}

TEST(FakeCudaDebug, ABufferOrWordTheRuntimeCannotFindOrOfAnotherSizeIsAnError) {
  absl::StatusOr<Device> d = Device::open("cuda:0");
  ASSERT_TRUE(d.ok()) << d.status();
  setenv("FAKE_CUDA_FAIL", "cuModuleGetGlobal tessel_debug", 1);
  absl::StatusOr<Function> fn = d->compile(debug_cases::printing_and_asserting("debugged_unfound"), debug_on());
  unsetenv("FAKE_CUDA_FAIL");
  EXPECT_EQ(fn.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(fn.status().message(),
              HasSubstr("compile 'debugged_unfound' for sm_90a: the debug buffer: cuModuleGetGlobal: "
                        "CUDA_ERROR_NOT_FOUND"));

  setenv("FAKE_CUDA_GLOBAL_BYTES", "4", 1);
  fn = d->compile(debug_cases::printing_and_asserting("debugged_small"), debug_on());
  unsetenv("FAKE_CUDA_GLOBAL_BYTES");
  EXPECT_EQ(fn.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(fn.status().message(),
              HasSubstr("compile 'debugged_small' for sm_90a: the debug buffer has 4 bytes; expected 1048576"));

  setenv("FAKE_CUDA_GLOBAL_BYTES", "8", 1);
  fn = d->compile(debug_cases::printing_and_asserting("worded_wide"));
  unsetenv("FAKE_CUDA_GLOBAL_BYTES");
  EXPECT_EQ(fn.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(fn.status().message(),
              HasSubstr("compile 'worded_wide' for sm_90a: the error word 'tessel_error' has 8 bytes; expected 4"));
}

}  // namespace
}  // namespace tessel
