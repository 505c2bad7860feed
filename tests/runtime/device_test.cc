#include "runtime/device.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "dsl/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;

TEST(Device, OpensTheHost) {
  absl::StatusOr<Device> d = Device::open("host:2");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->kind(), DeviceKind::kHost);
  EXPECT_EQ(d->num_compute_units(), 2);
  EXPECT_EQ(d->name(), "host:2");
}

TEST(Device, RejectsUnknownNames) {
  absl::StatusOr<Device> d = Device::open("tpu:0");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(d.status().message(), HasSubstr("unknown device"));
  d = Device::open("host:0");
  EXPECT_THAT(d.status().message(), HasSubstr("thread count must be 1 to 1024"));
}

// On the host, Device::time is the clock around the work: it counts what
// the work does, and passes the work's error on.
TEST(Device, TimeCountsTheWorkAndPassesItsErrorOn) {
  absl::StatusOr<Device> d = Device::open("host:2");
  ASSERT_TRUE(d.ok()) << d.status();
  absl::StatusOr<double> slept = d->time([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return absl::OkStatus();
  });
  ASSERT_TRUE(slept.ok()) << slept.status();
  EXPECT_GE(*slept, 0.02);
  EXPECT_LT(*slept, 10.0);
  absl::StatusOr<double> failed = d->time([] { return absl::DataLossError("the work broke"); });
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(failed.status().message(), HasSubstr("the work broke"));
  absl::StatusOr<double> none = d->time(nullptr);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(none.status().message(), HasSubstr("Device::time on host:2: no work to time"));
}

TEST(Device, TheHostRunsOnlyHostCode) {
  Device d = *Device::open("host:1");
  EXPECT_EQ(d.arch(), "host");
  KernelBuilder k("nothing");
  CompileOptions options;
  options.arch = "sm_90a";
  absl::Status s = d.compile(*k.build(), options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(),
              HasSubstr("host:1: compile 'nothing' for sm_90a: the host runs only code compiled for it (arch host)"));
}

TEST(Device, CopyPastTheBufferIsAnError) {
  Device d = *Device::open("host:1");
  Buffer b = *d.allocate(16);
  char src[32] = {};
  EXPECT_THAT(d.copy_to_device(b, src, 32).message(), HasSubstr("32 bytes into a buffer of 16"));
  EXPECT_THAT(d.allocate(0).status().message(), HasSubstr("0 bytes"));
}

TEST(Device, SlicesShareTheirBuffersMemory) {
  Device d = *Device::open("host:1");
  Buffer slice;
  {
    Buffer b = *d.allocate(16);
    const int32_t values[4] = {1, 2, 3, 4};
    ASSERT_TRUE(d.copy_to_device(b, values, 16).ok());
    absl::StatusOr<Buffer> s = b.slice(8, 8);
    ASSERT_TRUE(s.ok()) << s.status();
    slice = *s;
    EXPECT_EQ(slice.data(), b.as<char>() + 8);
    EXPECT_EQ(slice.bytes(), 8u);
  }
  int32_t got[2] = {};  // the slice keeps the memory alive
  ASSERT_TRUE(d.copy_to_host(got, slice, 8).ok());
  EXPECT_EQ(got[0], 3);
  EXPECT_EQ(got[1], 4);
  EXPECT_THAT(slice.slice(4, 8).status().message(), HasSubstr("8 bytes at offset 4 pass the buffer's 8"));
  EXPECT_THAT(slice.slice(9, 0).status().message(), HasSubstr("0 bytes at offset 9 pass the buffer's 8"));
  EXPECT_TRUE(slice.slice(8, 0).ok());
}

TEST(Device, CopiesOfNoBytesTouchNoPointer) {
  Device d = *Device::open("host:1");
  Buffer b = *d.allocate(16);
  std::vector<float> empty;  // its data() is null
  EXPECT_TRUE(d.copy_to_device(b, empty.data(), 0).ok());
  EXPECT_TRUE(d.copy_to_host(empty.data(), b, 0).ok());
}

Kernel axpy() {
  KernelBuilder k("axpy");
  Value x = k.arg(ptr(f32), "x"), y = k.arg(ptr(f32), "y");
  Value a = k.arg(f32, "a"), n = k.arg(i32, "n");
  Value offs = k.program_id() * 256 + k.arange(0, 256);  // [256] i32
  Value mask = offs < n;
  Value xv = load(x + offs, mask, 0.0);
  Value yv = load(y + offs, mask, 0.0);
  store(y + offs, a * xv + yv, mask);
  return *k.build();
}

TEST(Launch, RunsAxpyOnRandomData) {
  std::random_device rd;
  unsigned seed = rd();
  SCOPED_TRACE(seed);
  std::mt19937 gen(seed);
  int n = std::uniform_int_distribution<int>(1, 5000)(gen);
  std::vector<float> x(n), y(n);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int i = 0; i < n; ++i) x[i] = dist(gen), y[i] = dist(gen);
  Device d = *Device::open("host:2");
  absl::StatusOr<Function> fn = d.compile(axpy());
  ASSERT_TRUE(fn.ok()) << fn.status();
  std::vector<float> out = y;
  absl::Status s = fn->launch({.grid = (n + 255) / 256}, x.data(), out.data(), 0.5f, n);
  ASSERT_TRUE(s.ok()) << s;
  for (int i = 0; i < n; ++i) ASSERT_EQ(out[i], 0.5f * x[i] + y[i]) << i;
}

// On the host a worker thread runs one program at a time.
TEST(Launch, PersistentGridOnTheHostIsOneProgramPerWorker) {
  for (const char* name : {"host:1", "host:3"}) {
    Device d = *Device::open(name);
    absl::StatusOr<Function> fn = d.compile(axpy());
    ASSERT_TRUE(fn.ok()) << fn.status();
    absl::StatusOr<int> grid = fn->persistent_grid();
    ASSERT_TRUE(grid.ok()) << grid.status();
    EXPECT_EQ(*grid, d.num_compute_units()) << name;
  }
}

// A kernel of clusters gets whole clusters, at least one; a grid of part of
// a cluster is refused.
TEST(Launch, PersistentGridOfClustersIsWholeClusters) {
  KernelBuilder k("clustered");
  k.cluster(2);
  Value out = k.arg(ptr(i32), "out");
  k.for_each_tile(4, [&](Value t) { store(out + t * 2 + k.cluster_rank(), t); });
  for (const char* name : {"host:1", "host:3", "host:4"}) {
    Device d = *Device::open(name);
    absl::StatusOr<Function> fn = d.compile(*k.build());
    ASSERT_TRUE(fn.ok()) << fn.status();
    absl::StatusOr<int> grid = fn->persistent_grid();
    ASSERT_TRUE(grid.ok()) << grid.status();
    EXPECT_EQ(*grid, std::max(2, d.num_compute_units() / 2 * 2)) << name;
    std::vector<int32_t> got(8, -1);
    absl::Status run = fn->launch({.grid = *grid}, got.data());
    ASSERT_TRUE(run.ok()) << run;
    EXPECT_EQ(got, (std::vector<int32_t>{0, 0, 1, 1, 2, 2, 3, 3})) << name;
    EXPECT_THAT(fn->launch({.grid = 1}, got.data()).message(),
                HasSubstr("launch 'clustered': the kernel runs clusters of 2 programs"));
  }
}

TEST(Launch, ChecksArgumentsAgainstTheSignature) {
  Device d = *Device::open("host:1");
  Function fn = *d.compile(axpy());
  float x = 0;
  double wrong = 0;
  EXPECT_THAT(fn.launch({}, &x, &x, 1.0f).message(), HasSubstr("expected 4 arguments, got 3"));
  EXPECT_THAT(fn.launch({}, &x, &x, 1.0, 1).message(), HasSubstr("argument 2 'a' expects f32, got f64"));
  EXPECT_THAT(fn.launch({}, &wrong, &x, 1.0f, 1).message(),
              HasSubstr("argument 0 'x' expects ptr<f32>, got a pointer to f64"));
  EXPECT_THAT(fn.launch({.grid = 0}, &x, &x, 1.0f, 1).message(), HasSubstr("grid dimension must be >= 1"));
}

TEST(Compile, RepeatsAreCached) {
  Device d = *Device::open("host:1");
  Function a = *d.compile(axpy());
  Function b = *d.compile(axpy());
  EXPECT_EQ(&a.kernel(), &b.kernel());
}

}  // namespace
}  // namespace tessel

namespace tessel {
namespace {

TEST(Device, CachedTensorMapsAreEncodedOnce) {
  Device d = *Device::open("host:1");
  Buffer b = *d.allocate(64 * 64 * 4);
  absl::StatusOr<const TensorMap*> m1 = d.cached_tensor_map(f32, b, {64, 64}, {32, 32});
  absl::StatusOr<const TensorMap*> m2 = d.cached_tensor_map(f32, b, {64, 64}, {32, 32});
  absl::StatusOr<const TensorMap*> m3 = d.cached_tensor_map(f32, b, {64, 64}, {16, 32});
  ASSERT_TRUE(m1.ok() && m2.ok() && m3.ok());
  EXPECT_EQ(*m1, *m2);
  EXPECT_NE(*m1, *m3);
  EXPECT_EQ((*m1)->encoding(), TensorMapEncoding::kHost);
  EXPECT_THAT(d.cached_tensor_map(f32, b, {64, 65}, {32, 32}).status().message(),
              HasSubstr("needs 16640 bytes; the buffer holds 16384"));
  EXPECT_THAT(d.cached_tensor_map(f32, b, {64, 64}, {32, 300}).status().message(), HasSubstr("box[1] = 300"));
}

}  // namespace
}  // namespace tessel
