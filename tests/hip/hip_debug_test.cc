// device_print and device_assert on a HIP device, against the fake
// libamdhip64: the code object exports its debug buffer, the runtime finds
// it by name, and each synchronize prints what the launches since the last
// one recorded there and reports a failed assert. The fake runs no kernels,
// so the records are written here as the kernel's programs would write them
// (base/debug_abi.h).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/match.h"
#include "base/debug_abi.h"
#include "dsl/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tessel/tessel.h"
#include "tests/debug_cases.h"
#include "tests/hip/fake_hip_env.h"

namespace tessel {
namespace {

using debug_cases::kPrinted;
using debug_cases::synchronize;
using debug_cases::Synchronized;
using debug_cases::write_records;
using ::testing::HasSubstr;
using ::testing::Not;

const auto* const kFake = ::testing::AddGlobalTestEnvironment(new fake_hip::Environment);

Kernel debugged(const std::string& name) { return debug_cases::printing_and_asserting(name); }

CompileOptions debug_on() {
  CompileOptions options;
  options.debug = true;
  return options;
}

TEST(HipDebug, SynchronizePrintsTheRecordsAndReportsTheFailedAssert) {
  absl::StatusOr<Device> d = Device::open("hip:0");
  ASSERT_TRUE(d.ok()) << d.status();
  fake_hip::Record record;
  record.reset();
  absl::StatusOr<Function> fn = d->compile(debugged("debugged"), debug_on());
  ASSERT_TRUE(fn.ok()) << fn.status();
  EXPECT_THAT(record.log(), HasSubstr(std::string("hipModuleGetGlobal ") + kDebugSymbol));
  absl::StatusOr<Buffer> x = d->allocate(256 * 4);
  ASSERT_TRUE(x.ok()) << x.status();

  // The launch loads the kernel specialized to its arguments, which has a
  // buffer of its own.
  ASSERT_TRUE(fn->launch({.grid = 2, .num_warps = 4}, *x).ok());
  void* debug = record.last_global();
  ASSERT_NE(debug, nullptr);
  write_records(debug, false);
  Synchronized s = synchronize([&] { return d->synchronize(); });
  EXPECT_TRUE(s.status.ok()) << s.status;
  EXPECT_EQ(s.out, kPrinted);
  for (int w = 0; w < kDebugHeaderBytes / 8; ++w) EXPECT_EQ(static_cast<uint64_t*>(debug)[w], 0u) << "word " << w;

  // Read once per launch: records left without a launch wait for the next.
  write_records(debug, true);
  s = synchronize([&] { return d->synchronize(); });
  EXPECT_TRUE(s.status.ok()) << s.status;
  EXPECT_EQ(s.out, "");
  ASSERT_TRUE(fn->launch({.grid = 2, .num_warps = 4}, *x).ok());
  s = synchronize([&] { return d->synchronize(); });
  EXPECT_EQ(s.out, kPrinted);
  EXPECT_EQ(s.status.code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(absl::StartsWith(s.status.message(), "hip:0: kernel 'debugged': device_assert failed at ")) << s.status;
  EXPECT_THAT(s.status.message(), HasSubstr("in program (1, 0, 0), element (3): v is not negative"));
  ASSERT_TRUE(fn->launch({.grid = 2, .num_warps = 4}, *x).ok());
  EXPECT_TRUE(d->synchronize().ok());  // the failure was cleared
}

TEST(HipDebug, StreamsAndGraphsReadTheBufferToo) {
  absl::StatusOr<Device> d = Device::open("hip:0");
  ASSERT_TRUE(d.ok()) << d.status();
  fake_hip::Record record;
  absl::StatusOr<Function> fn = d->compile(debugged("debugged_on_streams"), debug_on());
  ASSERT_TRUE(fn.ok()) << fn.status();
  absl::StatusOr<Buffer> x = d->allocate(256 * 4);
  absl::StatusOr<Stream> stream = d->create_stream();
  ASSERT_TRUE(x.ok() && stream.ok());

  ASSERT_TRUE(fn->launch({.grid = 2, .num_warps = 4, .stream = &*stream}, *x).ok());
  void* debug = record.last_global();  // the specialized kernel's
  write_records(debug, true);
  Synchronized s = synchronize([&] { return stream->synchronize(); });
  EXPECT_EQ(s.out, kPrinted);
  EXPECT_THAT(s.status.message(), HasSubstr("v is not negative"));

  ASSERT_TRUE(stream->begin_capture().ok());
  ASSERT_TRUE(fn->launch({.grid = 2, .num_warps = 4, .stream = &*stream}, *x).ok());
  absl::StatusOr<Graph> graph = stream->end_capture();
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_TRUE(stream->synchronize().ok());  // a captured launch does not run
  ASSERT_TRUE(graph->launch(&*stream).ok());
  write_records(debug, false);
  s = synchronize([&] { return stream->synchronize(); });
  EXPECT_TRUE(s.status.ok()) << s.status;
  EXPECT_EQ(s.out, kPrinted);
}

// A stream's synchronize reads a module's buffer only where no other stream
// has a launch of it pending, whose kernel could still be writing there:
// that stream's synchronize, or the device's, reads it.
TEST(HipDebug, AStreamReadsTheBufferOnlyWhenNoOtherStreamHasALaunchPending) {
  absl::StatusOr<Device> d = Device::open("hip:0");
  ASSERT_TRUE(d.ok()) << d.status();
  fake_hip::Record record;
  absl::StatusOr<Function> fn = d->compile(debugged("debugged_on_two_streams"), debug_on());
  ASSERT_TRUE(fn.ok()) << fn.status();
  absl::StatusOr<Buffer> x = d->allocate(256 * 4);
  absl::StatusOr<Stream> s = d->create_stream(), t = d->create_stream();
  ASSERT_TRUE(x.ok() && s.ok() && t.ok());

  ASSERT_TRUE(fn->launch({.grid = 2, .num_warps = 4, .stream = &*s}, *x).ok());
  ASSERT_TRUE(fn->launch({.grid = 2, .num_warps = 4, .stream = &*t}, *x).ok());
  void* debug = record.last_global();
  write_records(debug, false);
  EXPECT_EQ(synchronize([&] { return s->synchronize(); }).out, "");  // t's launch may still write
  EXPECT_EQ(synchronize([&] { return t->synchronize(); }).out, kPrinted);

  // Launched on s alone: t's synchronize leaves it to s's.
  ASSERT_TRUE(fn->launch({.grid = 2, .num_warps = 4, .stream = &*s}, *x).ok());
  write_records(debug, false);
  EXPECT_EQ(synchronize([&] { return t->synchronize(); }).out, "");
  EXPECT_EQ(synchronize([&] { return s->synchronize(); }).out, kPrinted);

  // The device's synchronize reads it whatever the streams.
  ASSERT_TRUE(fn->launch({.grid = 2, .num_warps = 4, .stream = &*s}, *x).ok());
  ASSERT_TRUE(fn->launch({.grid = 2, .num_warps = 4}, *x).ok());
  write_records(debug, false);
  EXPECT_EQ(synchronize([&] { return s->synchronize(); }).out, "");
  EXPECT_EQ(synchronize([&] { return d->synchronize(); }).out, kPrinted);
}

TEST(HipDebug, KernelsWithoutDebugOpsHaveNoBufferToFind) {
  absl::StatusOr<Device> d = Device::open("hip:0");
  ASSERT_TRUE(d.ok()) << d.status();
  fake_hip::Record record;
  KernelBuilder k("asserts_only");
  Value x = k.arg(ptr(f32), "x");
  Value offs = k.arange(0, 128);
  device_assert(load(x + offs) >= 0.0f, "never checked");
  store(x + offs, 1.0f);
  record.reset();
  ASSERT_TRUE(d->compile(*k.build(), {}).ok());
  EXPECT_THAT(record.log(), Not(HasSubstr("hipModuleGetGlobal")));
}

TEST(HipDebug, ABufferTheRuntimeCannotFindOrOfAnotherSizeIsAnError) {
  absl::StatusOr<Device> d = Device::open("hip:0");
  ASSERT_TRUE(d.ok()) << d.status();
  setenv("FAKE_HIP_FAIL", "hipModuleGetGlobal tessel_debug", 1);
  absl::StatusOr<Function> fn = d->compile(debugged("debugged_unfound"), debug_on());
  unsetenv("FAKE_HIP_FAIL");
  EXPECT_EQ(fn.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(
      fn.status().message(),
      HasSubstr("compile 'debugged_unfound' for gfx942: the debug buffer: hipModuleGetGlobal: hipErrorNotFound"));

  setenv("FAKE_HIP_GLOBAL_BYTES", "4096", 1);
  fn = d->compile(debugged("debugged_small"), debug_on());
  unsetenv("FAKE_HIP_GLOBAL_BYTES");
  EXPECT_EQ(fn.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(fn.status().message(),
              HasSubstr("compile 'debugged_small' for gfx942: the debug buffer has 4096 bytes; expected 1048576"));
}

}  // namespace
}  // namespace tessel
