// The host's checked mode ("host:checked"): every load, store and atomic is
// checked against the extent of the argument its pointer came from; the
// first access outside is skipped and reported with the op's line, the
// program and the element.
#include <span>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "dsl/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/device.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;

constexpr int kBlock = 64;

// y[i] = x[i] * 2 over a whole block per program, masked by `n` or not.
struct Doubler {
  Kernel kernel;
  int load_line = 0;
  int store_line = 0;
};
Doubler doubler(bool masked) {
  KernelBuilder k(masked ? "masked_double" : "unmasked_double");
  Value x = k.arg(ptr(f32), "x"), y = k.arg(ptr(f32), "y"), n = k.arg(i32, "n");
  Value offs = k.program_id() * kBlock + k.arange(0, kBlock);
  Doubler d;
  d.load_line = __LINE__ + 1;
  Value v = masked ? load(x + offs, offs < n, 0.0f) : load(x + offs);
  d.store_line = __LINE__ + 1;
  masked ? store(y + offs, v * 2.0f, offs < n) : store(y + offs, v * 2.0f);
  d.kernel = *k.build();
  return d;
}

Function compile_on(const char* device, const Kernel& kernel) {
  absl::StatusOr<Device> d = Device::open(device);
  EXPECT_TRUE(d.ok()) << d.status();
  absl::StatusOr<Function> fn = d->compile(kernel);
  EXPECT_TRUE(fn.ok()) << fn.status();
  return *fn;
}

TEST(CheckedHost, AnUnmaskedLoadPastTheEndIsCaughtAtItsLine) {
  Doubler d = doubler(false);
  Function fn = compile_on("host:2:checked", d.kernel);
  std::vector<float> x(100, 1.5f), y(128, -1.0f);
  absl::Status s = fn.launch({.grid = 2}, absl::MakeConstSpan(x), absl::MakeSpan(y), 100);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(s.message(), HasSubstr("checked_host_test.cc:" + std::to_string(d.load_line) +
                                     ": kernel 'unmasked_double' on host:2:checked: load out of bounds: program (1, "
                                     "0, 0) reads element 100 of argument 'x' (100 elements of f32), past its end"));
  // The accesses inside ran; the ones outside read zeros.
  EXPECT_EQ(y[99], 3.0f);
  EXPECT_EQ(y[100], 0.0f);
}

TEST(CheckedHost, MaskedAccessesPassAndComputeWhatTheHostDoes) {
  Doubler d = doubler(true);
  std::vector<float> x(100), checked(100, -1.0f), plain(100, -1.0f);
  for (int i = 0; i < 100; ++i) x[i] = static_cast<float>(i) * 0.25f;
  Function on_checked = compile_on("host:checked", d.kernel);
  Function on_plain = compile_on("host:2", d.kernel);
  absl::Status s = on_checked.launch({.grid = 2}, absl::MakeConstSpan(x), std::span<float>(checked), 100);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(on_plain.launch({.grid = 2}, x.data(), plain.data(), 100).ok());
  EXPECT_EQ(checked, plain);
}

TEST(CheckedHost, AStorePastTheEndTouchesNothing) {
  Doubler d = doubler(true);
  Function fn = compile_on("host:1:checked", d.kernel);
  std::vector<float> x(128, 1.0f), y(128, -1.0f);
  // The mask says 128, the output span holds 96: elements 96.. are refused.
  absl::Status s = fn.launch({.grid = 2}, absl::MakeConstSpan(x), absl::MakeSpan(y.data(), 96), 128);
  EXPECT_THAT(s.message(), HasSubstr("checked_host_test.cc:" + std::to_string(d.store_line) +
                                     ": kernel 'masked_double' on host:1:checked: store out of bounds: program (1, 0, "
                                     "0) writes element 96 of argument 'y' (96 elements of f32), past its end"));
  EXPECT_EQ(y[95], 2.0f);
  for (int i = 96; i < 128; ++i) ASSERT_EQ(y[i], -1.0f) << i;
}

TEST(CheckedHost, AtomicsBeforeTheStartAreCaught) {
  KernelBuilder k("histogram");
  Value bins = k.arg(ptr(i32), "bins"), keys = k.arg(ptr(i32), "keys");
  Value offs = k.arange(0, 16);
  const int line = __LINE__ + 1;
  atomic_add(bins + load(keys + offs), 1);
  Function fn = compile_on("host:1:checked", *k.build());
  std::vector<int32_t> counts(8, 0), keys_in = {0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, -1, 5, 6, 7};
  absl::Status s = fn.launch({.grid = 1}, absl::MakeSpan(counts), absl::MakeConstSpan(keys_in));
  EXPECT_THAT(s.message(), HasSubstr("checked_host_test.cc:" + std::to_string(line) +
                                     ": kernel 'histogram' on host:1:checked: atomic out of bounds: program (0, 0, 0) "
                                     "updates element -1 of argument 'bins' (8 elements of i32), before its start"));
  EXPECT_EQ(counts, (std::vector<int32_t>{2, 2, 2, 2, 1, 2, 2, 2}));
}

// A pointer chosen between two arguments is checked against all of them,
// and a compare-and-swap outside is skipped like any access.
TEST(CheckedHost, PointersOfSeveralArgumentsAndCompareAndSwap) {
  KernelBuilder k("two_sources");
  Value x = k.arg(ptr(f32), "x"), y = k.arg(ptr(f32), "y"), out = k.arg(ptr(f32), "out");
  Value offs = k.arange(0, 64);
  const int line = __LINE__ + 1;
  store(out + offs, load(where(offs < 32, x + offs, y + offs)));
  Function fn = compile_on("host:1:checked", *k.build());
  std::vector<float> xs(64, 1.0f), ys(40, 2.0f), o(64, -1.0f);
  absl::Status s = fn.launch({.grid = 1}, absl::MakeConstSpan(xs), absl::MakeConstSpan(ys), absl::MakeSpan(o));
  EXPECT_THAT(s.message(), HasSubstr("checked_host_test.cc:" + std::to_string(line) +
                                     ": kernel 'two_sources' on host:1:checked: load out of bounds: program (0, 0, "
                                     "0) reads address 0x"));
  EXPECT_THAT(s.message(), HasSubstr(", outside every argument"));
  EXPECT_EQ(o[39], 2.0f);
  EXPECT_EQ(o[40], 0.0f);

  KernelBuilder c("claim");
  Value flags = c.arg(ptr(i32), "flags"), slot = c.arg(i32, "slot");
  Value old = atomic_cas(flags + slot, 0, 1);
  store(flags, old + 10);
  Function claim = compile_on("host:1:checked", *c.build());
  std::vector<int32_t> f(4, 0);
  EXPECT_TRUE(claim.launch({.grid = 1}, absl::MakeSpan(f), 2).ok());
  EXPECT_EQ(f, (std::vector<int32_t>{10, 0, 1, 0}));
  EXPECT_THAT(claim.launch({.grid = 1}, absl::MakeSpan(f), 4).message(),
              HasSubstr("atomic_cas out of bounds: program (0, 0, 0) updates element 4 of argument 'flags' (4 "
                        "elements of i32), past its end"));
  EXPECT_EQ(f, (std::vector<int32_t>{10, 0, 1, 0}));  // the store of old (0) + 10 is in bounds
}

TEST(CheckedHost, BuffersAreCheckedAndRawPointersRefused) {
  Doubler d = doubler(false);
  Device device = *Device::open("host:2:checked");
  EXPECT_EQ(device.name(), "host:2:checked");
  Function fn = *device.compile(d.kernel);
  absl::StatusOr<Buffer> x = device.allocate(64 * sizeof(float));
  absl::StatusOr<Buffer> y = device.allocate(64 * sizeof(float));
  ASSERT_TRUE(x.ok() && y.ok());
  EXPECT_TRUE(fn.launch({.grid = 1}, *x, *y, 64).ok());
  EXPECT_THAT(fn.launch({.grid = 2}, *x, *y, 64).message(), HasSubstr("reads element 64 of argument 'x'"));
  std::vector<float> raw(64);
  absl::Status s = fn.launch({.grid = 1}, raw.data(), *y, 64);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("launch 'unmasked_double' on a checked host: argument 0 'x' is a pointer of "
                                     "unknown extent; pass a Buffer or a span"));
  EXPECT_THAT(Device::open("host:checked:2").status().message(), HasSubstr("the host thread count must be 1 to 1024"));
}

}  // namespace
}  // namespace tessel
