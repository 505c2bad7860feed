// device_print and device_assert on the host: the lines a launch prints,
// the error a failed assert gives (with CompileOptions::debug), and the
// report read from a debug buffer's bytes (base/debug_abi.h), which every
// backend shares.
#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/types/span.h"
#include "base/debug_abi.h"
#include "dsl/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/debug_output.h"
#include "runtime/device.h"
#include "runtime/env.h"

namespace tessel {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The lines `launch` printed, sorted (programs run in no set order).
std::vector<std::string> printed(const std::function<absl::Status()>& launch) {
  ::testing::internal::CaptureStdout();
  absl::Status s = launch();
  std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_TRUE(s.ok()) << s;
  std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  std::sort(lines.begin(), lines.end());
  return lines;
}

Function compile_on(const Kernel& kernel, CompileOptions options = {}) {
  absl::StatusOr<Device> d = Device::open("host:2");
  EXPECT_TRUE(d.ok()) << d.status();
  absl::StatusOr<Function> fn = d->compile(kernel, options);
  EXPECT_TRUE(fn.ok()) << fn.status();
  return *fn;
}

CompileOptions debug_on() {
  CompileOptions options;
  options.debug = true;
  return options;
}

TEST(DevicePrint, EachElementOfATileWithItsProgramAndIndex) {
  KernelBuilder k("print_tile");
  Value x = k.arg(ptr(f32), "x");
  Value offs = k.program_id() * 2 + k.arange(0, 2);
  device_print("x =", {load(x + offs)});
  Function fn = compile_on(*k.build());
  std::vector<float> xs = {1.5f, -2.0f, 0.1f, 1e20f};
  EXPECT_THAT(printed([&] { return fn.launch({.grid = 2}, absl::MakeConstSpan(xs)); }),
              ElementsAre("pid (0, 0, 0) idx (0) x = 1.5", "pid (0, 0, 0) idx (1) x = -2",
                          "pid (1, 0, 0) idx (0) x = 0.100000001", "pid (1, 0, 0) idx (1) x = 1.00000002e+20"));
}

TEST(DevicePrint, SeveralValuesBroadcastToOneShapeInEveryDtype) {
  KernelBuilder k("print_values");
  Value i = k.arg(i32, "i");
  Value r = expand_dims(k.arange(0, 2), 1), c = expand_dims(k.arange(0, 2), 0);
  device_print("v", {r * 2 + c, cast(c, bf16), c == 1, cast(r, u8) - 1, i, cast(r, f64) / 3});
  Function fn = compile_on(*k.build());
  EXPECT_THAT(
      printed([&] { return fn.launch({.grid = 1}, int32_t{-7}); }),
      ElementsAre("pid (0, 0, 0) idx (0, 0) v 0, 0, 0, 255, -7, 0", "pid (0, 0, 0) idx (0, 1) v 1, 1, 1, 255, -7, 0",
                  "pid (0, 0, 0) idx (1, 0) v 2, 0, 0, 0, -7, 0.33333333333333331",
                  "pid (0, 0, 0) idx (1, 1) v 3, 1, 1, 0, -7, 0.33333333333333331"));
}

TEST(DevicePrint, ScalarsOncePerProgramAndATextAlone) {
  KernelBuilder k("print_scalars");
  device_print("program", {k.program_id(0), k.program_id(1)});
  device_print("here");
  Function fn = compile_on(*k.build());
  EXPECT_THAT(printed([&] {
                return fn.launch({.grid = {2, 1}});
              }),
              ElementsAre("pid (0, 0, 0) here", "pid (0, 0, 0) program 0, 0", "pid (1, 0, 0) here",
                          "pid (1, 0, 0) program 1, 0"));
}

TEST(DevicePrint, EachLaunchPrintsOnlyItsOwnLines) {
  KernelBuilder k("print_arg");
  device_print("n", {k.arg(i32, "n")});
  Function fn = compile_on(*k.build());
  EXPECT_THAT(printed([&] { return fn.launch({.grid = 1}, 1); }), ElementsAre("pid (0, 0, 0) n 1"));
  EXPECT_THAT(printed([&] { return fn.launch({.grid = 1}, 2); }), ElementsAre("pid (0, 0, 0) n 2"));
}

TEST(DevicePrint, LinesPastTheBufferAreCountedAsDropped) {
  constexpr int64_t kElements = 32768;
  KernelBuilder k("print_many");
  device_print("", {k.arange(0, kElements)});
  Function fn = compile_on(*k.build());
  std::vector<std::string> lines = printed([&] { return fn.launch({.grid = 1}); });
  const int64_t fit = (kDebugBytes - kDebugHeaderBytes) / debug_record_bytes(1);
  ASSERT_EQ(static_cast<int64_t>(lines.size()), fit + 1);
  EXPECT_THAT(lines,
              ::testing::Contains(absl::StrCat("tessel: kernel 'print_many' printed ", kElements - fit,
                                               " more lines than its buffer of 1 MiB holds; they were dropped")));
}

// y[i] = x[i] after asserting that x[i] > 0, over blocks of 4.
struct Checked {
  Kernel kernel;
  int line = 0;
};
Checked asserting_copy() {
  KernelBuilder k("asserting_copy");
  Value x = k.arg(ptr(f32), "x"), y = k.arg(ptr(f32), "y");
  Value offs = k.program_id() * 4 + k.arange(0, 4);
  Value v = load(x + offs);
  Checked c;
  c.line = __LINE__ + 1;
  device_assert(v > 0.0f, "x must be positive");
  store(y + offs, v);
  c.kernel = *k.build();
  return c;
}

TEST(DeviceAssert, IsCompiledAwayWithoutDebug) {
  Checked c = asserting_copy();
  Function fn = compile_on(c.kernel);
  std::vector<float> x = {1, 2, 3, 4, 5, -6, 7, 8}, y(8, 0.0f);
  EXPECT_TRUE(fn.launch({.grid = 2}, absl::MakeConstSpan(x), absl::MakeSpan(y)).ok());
  EXPECT_EQ(y, x);
}

TEST(DeviceAssert, WithDebugTheFirstFailureIsAnErrorAndItsProgramStops) {
  Checked c = asserting_copy();
  Function fn = compile_on(c.kernel, debug_on());
  std::vector<float> x = {1, 2, 3, 4, 5, -6, 7, 8}, y(8, 0.0f);
  absl::Status s = fn.launch({.grid = 2}, absl::MakeConstSpan(x), absl::MakeSpan(y));
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(),
              HasSubstr(absl::StrCat("host:2: kernel 'asserting_copy': device_assert failed at ", __FILE__, ":", c.line,
                                     " in program (1, 0, 0), element (1): x must be positive")));
  // Program 0 ran on; program 1 stopped before its store.
  EXPECT_EQ(std::vector<float>(y.begin(), y.begin() + 4), std::vector<float>(x.begin(), x.begin() + 4));
  EXPECT_EQ(std::vector<float>(y.begin() + 4, y.end()), std::vector<float>(4, 0.0f));
  // The failure is reported once: a launch that holds is OK.
  std::vector<float> good(8, 1.0f);
  EXPECT_TRUE(fn.launch({.grid = 2}, absl::MakeConstSpan(good), absl::MakeSpan(y)).ok());
  EXPECT_EQ(y, good);
}

TEST(DeviceAssert, AScalarConditionNamesNoElement) {
  KernelBuilder k("scalar_assert");
  Value n = k.arg(i32, "n");
  device_assert(n < 10, "n is small");
  Function fn = compile_on(*k.build(), debug_on());
  EXPECT_TRUE(fn.launch({.grid = 1}, 3).ok());
  absl::Status s = fn.launch({.grid = 1}, 12);
  EXPECT_THAT(s.message(), HasSubstr("in program (0, 0, 0): n is small"));
}

TEST(DeviceAssert, TesselDebugTurnsItOn) {
  setenv("TESSEL_DEBUG", "1", 1);
  const bool on = options_from_env({}).debug;
  setenv("TESSEL_DEBUG", "0", 1);
  const bool off = options_from_env({}).debug;
  unsetenv("TESSEL_DEBUG");
  EXPECT_TRUE(on);
  EXPECT_FALSE(off);
}

// The report of hand-made buffers of a kernel with one print and one assert.
TEST(DebugReport, ReadsRecordsAndNamesWhatItCannot) {
  KernelBuilder k("report");
  Value t = k.arange(0, 4);
  device_print("t", {t});
  device_assert(t < 3, "small");
  Kernel kernel = *k.build();
  std::vector<uint64_t> header(kDebugHeaderBytes / 8, 0);
  const std::vector<uint64_t> records = {0, 2, 1, 0, 3, 9};  // text 0, program (2, 1, 0), element 3, value 9
  header[kDebugCursor] = records.size() * 8;
  DebugReport r = read_debug(kernel, "dev", header, records);
  EXPECT_EQ(r.lines, "pid (2, 1, 0) idx (3) t 9\n");
  EXPECT_TRUE(r.assertion.ok());

  header[kDebugAssert] = 2;  // text 1: the assert
  header[kDebugProgram] = 5;
  header[kDebugElement] = 3;
  r = read_debug(kernel, "", header, {});
  EXPECT_TRUE(absl::StartsWith(r.assertion.message(), "kernel 'report': device_assert failed at "));
  EXPECT_THAT(r.assertion.message(), HasSubstr("in program (5, 0, 0), element (3): small"));

  header[kDebugAssert] = 1;  // text 0 is a print
  EXPECT_THAT(read_debug(kernel, "dev", header, {}).assertion.message(),
              HasSubstr("dev: kernel 'report' recorded a failed assert that it does not hold"));
  const std::vector<uint64_t> cut = {1, 0, 0};  // a record of the assert's text, cut short
  const std::vector<uint64_t> empty(kDebugHeaderBytes / 8, 0);
  EXPECT_EQ(read_debug(kernel, "dev", empty, cut).lines, "tessel: kernel 'report' left a malformed print record\n");
}

TEST(DebugReport, RecordBytesStopAtTheBuffersRoom) {
  std::vector<uint64_t> header(kDebugHeaderBytes / 8, 0);
  header[kDebugCursor] = 80;
  EXPECT_EQ(debug_records_written(header), 80);
  header[kDebugCursor] = 5 * kDebugBytes;
  EXPECT_EQ(debug_records_written(header), kDebugBytes - kDebugHeaderBytes);
}

}  // namespace
}  // namespace tessel
