// Shared by the GPU suites: opening cuda:0 or skipping, random data and
// poison, element-by-element comparisons, and a test-only window on the
// driver for what tessel's API deliberately does not expose.
#pragma once

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "base/float16.h"
#include "base/parallel.h"
#include "gtest/gtest.h"
#include "runtime/device.h"

namespace tessel::gpu_test {

// Opens cuda:0 into `device` (a tessel::Device), or skips the test when the
// machine has no NVIDIA driver or GPU. Any other failure to open fails it:
// on the GPU machine a broken backend must not read as "skipped".
#define TESSEL_OPEN_CUDA_OR_SKIP(device)                                                     \
  absl::StatusOr<::tessel::Device> device##_or = ::tessel::Device::open("cuda:0");           \
  if (!device##_or.ok() && (device##_or.status().code() == absl::StatusCode::kUnavailable || \
                            device##_or.status().code() == absl::StatusCode::kNotFound)) {   \
    GTEST_SKIP() << "needs an NVIDIA GPU: " << device##_or.status().message();               \
  }                                                                                          \
  ASSERT_TRUE(device##_or.ok()) << device##_or.status();                                     \
  ::tessel::Device& device = *device##_or

// Suites that run each kernel on the device under test and on the host and
// compare: cuda:0, or the device TESSEL_GPU_TEST_DEVICE names (host:1 tries
// them without a GPU), then host:2. Skips without a GPU.
class AgreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* env = std::getenv("TESSEL_GPU_TEST_DEVICE");
    absl::StatusOr<Device> dut = Device::open(env != nullptr && *env != '\0' ? env : "cuda:0");
    if (!dut.ok() &&
        (dut.status().code() == absl::StatusCode::kUnavailable || dut.status().code() == absl::StatusCode::kNotFound)) {
      GTEST_SKIP() << "needs a GPU: " << dut.status().message()
                   << " (TESSEL_GPU_TEST_DEVICE=host:1 runs these on the host)";
    }
    ASSERT_TRUE(dut.ok()) << dut.status();
    absl::StatusOr<Device> host = Device::open("host:2");
    ASSERT_TRUE(host.ok()) << host.status();
    devices_ = {*dut, *host};
  }

  // The device under test, then host:2.
  std::vector<Device> devices_;
};

// A generator seeded afresh for every test; the seed is printed with any
// failure so that it can be replayed.
class Rng {
 public:
  Rng() : Rng(std::random_device{}()) {}
  explicit Rng(unsigned seed) : seed_(seed), gen_(seed) {}
  unsigned seed() const { return seed_; }
  // A seed for another Rng (one a case of a test run in parallel).
  unsigned next_seed() { return static_cast<unsigned>(gen_()); }
  std::mt19937& gen() { return gen_; }
  int uniform_int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(gen_); }
  float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(gen_); }

 private:
  unsigned seed_;
  std::mt19937 gen_;
};
// A tile side drawn near `p`, a power of two: p itself, or as often one
// that is not a power of two (three quarters of p, or p - 1).
inline int tile_side(Rng& rng, int p) {
  switch (p < 4 ? 0 : rng.uniform_int(0, 3)) {
    case 1:
      return p / 4 * 3;
    case 2:
      return p - 1;
    default:
      return p;
  }
}

// A random case of a kernel that works on [br, bc] blocks of a [rows, cols]
// matrix along one axis: blocks of up to 4096 elements, their sides often
// not powers of two; 1, 4, 8 or 12 warps; a matrix of up to three blocks and a
// few elements more each way, so that masks cut blocks.
struct BlockCase {
  int br, bc, axis, num_warps, rows, cols;
};
inline BlockCase random_block_case(Rng& rng) {
  BlockCase c;
  const int log_rows = rng.uniform_int(0, 7);
  c.br = tile_side(rng, 1 << log_rows);
  c.bc = tile_side(rng, 1 << rng.uniform_int(0, 12 - log_rows));
  c.axis = rng.uniform_int(0, 1);
  c.num_warps = std::vector<int>{1, 4, 8, 12}[rng.uniform_int(0, 3)];
  c.rows = rng.uniform_int(1, 3 * c.br + 5);
  c.cols = rng.uniform_int(1, 3 * c.bc + 5);
  return c;
}

#define TESSEL_TRACE_SEED(rng) SCOPED_TRACE(::testing::Message() << "random seed " << (rng).seed())

// Runs body(0), ..., body(n - 1) on up to 8 threads, for a test whose cases
// are independent (their random inputs, compiles and host references then
// overlap). gtest's assertions may fail on any thread; its traces are per
// thread, so `body` traces what names its case.
inline void for_each_case(size_t n, const std::function<void(size_t)>& body) {
  parallel_for(n, std::min<size_t>(8, std::max(1u, std::thread::hardware_concurrency())), body);
}

// A buffer on `device` holding `host`.
template <class T>
absl::StatusOr<Buffer> upload(const Device& device, const std::vector<T>& host) {
  absl::StatusOr<Buffer> b = device.allocate(host.size() * sizeof(T));
  if (!b.ok()) return b;
  absl::Status s = device.copy_to_device(*b, host.data(), host.size() * sizeof(T));
  if (!s.ok()) return s;
  return b;
}

// Overwrites `buffer` with `count` copies of `poison`, so that an element a
// kernel failed to write cannot pass for a result.
template <class T>
absl::Status poison(const Device& device, const Buffer& buffer, size_t count, T poison) {
  std::vector<T> host(count, poison);
  return device.copy_to_device(buffer, host.data(), count * sizeof(T));
}

template <class T>
absl::StatusOr<std::vector<T>> download(const Device& device, const Buffer& buffer, size_t count) {
  std::vector<T> host(count);
  absl::Status s = device.copy_to_host(host.data(), buffer, count * sizeof(T));
  if (!s.ok()) return s;
  return host;
}

// Every element equal, bit for bit; reports the count and the first few.
template <class T>
::testing::AssertionResult bit_equal(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "sizes differ: " << got.size() << " vs " << want.size();
  }
  size_t bad = 0;
  ::testing::Message first;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::memcmp(&got[i], &want[i], sizeof(T)) == 0) continue;
    if (bad++ < 5) first << " [" << i << "] " << +got[i] << " != " << +want[i] << ";";
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " elements differ:" << first;
}

// |got - want| <= tol * max(1, |want|) for every element (NaN fails).
template <class T, class U>
::testing::AssertionResult all_close(const std::vector<T>& got, const std::vector<U>& want, double tol) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "sizes differ: " << got.size() << " vs " << want.size();
  }
  size_t bad = 0;
  double worst = 0;
  ::testing::Message first;
  for (size_t i = 0; i < got.size(); ++i) {
    double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    double err = std::abs(g - w) / std::max(1.0, std::abs(w));
    if (err <= tol) continue;
    worst = std::isnan(err) ? INFINITY : std::max(worst, err);
    if (bad++ < 5) first << " [" << i << "] " << g << " vs " << w << ";";
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << got.size() << " elements off by more than " << tol
                                       << " (worst " << worst << "):" << first;
}

// Test-only access to the driver, for checking what tessel did to a native
// handle. tessel's own loader stays private to the library.
class TestDriver {
 public:
  // CU_STREAM_CAPTURE_STATUS_{NONE, ACTIVE, INVALIDATED}; -1 if the driver
  // cannot be reached or the call failed.
  static int capture_status(void* stream) {
    using IsCapturing = int (*)(void*, int*);
    static const auto fn = reinterpret_cast<IsCapturing>(symbol("cuStreamIsCapturing"));
    int status = -1;
    if (fn == nullptr || fn(stream, &status) != 0) return -1;
    return status;
  }
  static constexpr int kCaptureNone = 0;
  static constexpr int kCaptureActive = 1;

 private:
  static void* symbol(const char* name) {
    static void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    return lib == nullptr ? nullptr : dlsym(lib, name);
  }
};

}  // namespace tessel::gpu_test
