// Vectorized loads and stores on cuda:0 against host:2, on random shapes:
// pointers 16-byte aligned or off by one to three elements, sizes multiples
// of 16 or not, so that launches take the vector variants (ld.global.v4,
// v8 of 16-bit types, v2 of f64) and the scalar ones. Elementwise results
// agree bit for bit, guards around the output survive; sums of vector runs
// (per-thread runs, then shuffles) agree within a tolerance.
#include <cstdint>
#include <cstring>
#include <vector>

#include "dsl/ops.h"
#include "gtest/gtest.h"
#include "runtime/device.h"
#include "samples/kernels.h"
#include "tests/gpu/gpu_test_util.h"

namespace tessel::gpu_test {
namespace {

constexpr int kBlock = 1024;
constexpr int kGuard = 64;  // elements around each array

// z = x + y over n elements of `d`, masked by offs < n.
Kernel add_kernel(DType d) {
  KernelBuilder k("vector_add_" + std::string(d.name()));
  Value x = k.arg(ptr(d), "x"), y = k.arg(ptr(d), "y"), z = k.arg(ptr(d), "z"), n = k.arg(i32, "n");
  Value offs = k.program_id() * kBlock + k.arange(0, kBlock);  // [kBlock] i32
  Value mask = offs < n;                                        // [kBlock] i1
  store(z + offs, load(x + offs, mask, 0) + load(y + offs, mask, 0), mask);
  return *k.build();
}

// out[program] = the sum of its block of x (f32), masked by offs < n.
Kernel block_sums_kernel() {
  KernelBuilder k("block_sums");
  Value x = k.arg(ptr(f32), "x"), out = k.arg(ptr(f32), "out"), n = k.arg(i32, "n");
  Value offs = k.program_id() * kBlock + k.arange(0, kBlock);  // [kBlock] i32
  store(out + k.program_id(), sum(load(x + offs, offs < n, 0), 0));
  return *k.build();
}

// Finite values of `d` (random bits, exponents kept moderate), as raw bytes.
std::vector<uint8_t> random_values(DType d, int64_t count, Rng& rng) {
  std::vector<uint8_t> bytes(count * d.bytes());
  for (int64_t i = 0; i < count; ++i) {
    float f = rng.uniform(-100, 100);
    if (d == f32) {
      std::memcpy(&bytes[i * 4], &f, 4);
    } else if (d == f64) {
      double v = static_cast<double>(f) * (1 + rng.uniform(0, 1) * 1e-9);
      std::memcpy(&bytes[i * 8], &v, 8);
    } else if (d == bf16) {
      uint16_t b = float_to_bf16(f);
      std::memcpy(&bytes[i * 2], &b, 2);
    } else {  // f16: sign, exponent 10..20, random fraction
      uint16_t h = static_cast<uint16_t>((rng.uniform_int(0, 1) << 15) | (rng.uniform_int(10, 20) << 10) |
                                         rng.uniform_int(0, 1023));
      std::memcpy(&bytes[i * 2], &h, 2);
    }
  }
  return bytes;
}

void* at(const Buffer& b, int64_t byte_offset) { return static_cast<uint8_t*>(b.data()) + byte_offset; }

// z's bytes (with its guards) after add_kernel(d) on `device` at the given
// element offsets from 16-byte-aligned starts.
std::vector<uint8_t> run_add(const Device& device, const Function& fn, DType d, const std::vector<uint8_t>& x,
                             const std::vector<uint8_t>& y, int n, const int offsets[3]) {
  const int64_t e = d.bytes(), total = static_cast<int64_t>(x.size());
  absl::StatusOr<Buffer> bx = upload(device, x), by = upload(device, y), bz = device.allocate(total);
  EXPECT_TRUE(bx.ok() && by.ok() && bz.ok());
  if (!bx.ok() || !by.ok() || !bz.ok()) return {};
  EXPECT_TRUE(poison<uint8_t>(device, *bz, total, 0xA5).ok());
  absl::Status s = fn.launch({.grid = (n + kBlock - 1) / kBlock}, at(*bx, (kGuard + offsets[0]) * e),
                             at(*by, (kGuard + offsets[1]) * e), at(*bz, (kGuard + offsets[2]) * e), n);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(device.synchronize().ok());
  absl::StatusOr<std::vector<uint8_t>> got = download<uint8_t>(device, *bz, total);
  EXPECT_TRUE(got.ok());
  return got.ok() ? *got : std::vector<uint8_t>();
}

class VectorAccess : public ::testing::TestWithParam<ScalarKind> {};

TEST_P(VectorAccess, AddAgreesBitForBitAtEveryAlignment) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  Device host = *Device::open("host:2");
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  DType d{GetParam()};
  Kernel kernel = add_kernel(d);
  absl::StatusOr<Function> on_gpu = device.compile(kernel), on_host = host.compile(kernel);
  ASSERT_TRUE(on_gpu.ok() && on_host.ok()) << on_gpu.status() << on_host.status();
  for (int trial = 0; trial < 24; ++trial) {
    // Half the sizes are multiples of 16 (vector variants), half any size.
    int n = trial % 2 == 0 ? 16 * rng.uniform_int(1, 20000) : rng.uniform_int(1, 300000);
    int offsets[3] = {0, 0, 0};
    if (trial % 4 >= 2) {
      for (int& o : offsets) o = rng.uniform_int(0, 3);
    }
    SCOPED_TRACE(::testing::Message() << d.name() << " n " << n << " offsets " << offsets[0] << "," << offsets[1]
                                      << "," << offsets[2]);
    const int64_t count = n + 2 * kGuard;
    std::vector<uint8_t> x = random_values(d, count, rng), y = random_values(d, count, rng);
    std::vector<uint8_t> want = run_add(host, *on_host, d, x, y, n, offsets);
    std::vector<uint8_t> got = run_add(device, *on_gpu, d, x, y, n, offsets);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_TRUE(bit_equal(got, want));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, VectorAccess,
                         ::testing::Values(ScalarKind::kF32, ScalarKind::kF16, ScalarKind::kBF16, ScalarKind::kF64),
                         [](const auto& info) { return std::string(DType{info.param}.name()); });

TEST(VectorAccessReduce, BlockSumsOfVectorRunsAgreeWithinTolerance) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  Device host = *Device::open("host:2");
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  Kernel kernel = block_sums_kernel();
  absl::StatusOr<Function> on_gpu = device.compile(kernel), on_host = host.compile(kernel);
  ASSERT_TRUE(on_gpu.ok() && on_host.ok()) << on_gpu.status() << on_host.status();
  for (int n : {16 * rng.uniform_int(1, 10000), rng.uniform_int(1, 160000)}) {
    SCOPED_TRACE(::testing::Message() << "n " << n);
    const int blocks = (n + kBlock - 1) / kBlock;
    std::vector<float> x(n);
    for (float& v : x) v = rng.uniform(-1, 1);
    std::vector<std::vector<float>> outs;
    for (const auto& [dev, fn] : {std::pair{&device, &*on_gpu}, std::pair{&host, &*on_host}}) {
      absl::StatusOr<Buffer> bx = upload(*dev, x), bout = dev->allocate(blocks * sizeof(float));
      ASSERT_TRUE(bx.ok() && bout.ok());
      ASSERT_TRUE(poison<float>(*dev, *bout, blocks, NAN).ok());
      ASSERT_TRUE(fn->launch({.grid = blocks}, *bx, *bout, n).ok());
      ASSERT_TRUE(dev->synchronize().ok());
      absl::StatusOr<std::vector<float>> got = download<float>(*dev, *bout, blocks);
      ASSERT_TRUE(got.ok());
      outs.push_back(*std::move(got));
    }
    std::vector<double> want(blocks, 0.0);
    for (int i = 0; i < n; ++i) want[i / kBlock] += x[i];
    // 1024 f32 terms below 1 in magnitude, summed in different orders: their
    // rounding errors reach a few 1e-5 (one H200 run failed at 1e-5).
    EXPECT_TRUE(all_close(outs[0], want, 1e-4)) << "cuda:0 against a double-precision sum";
    EXPECT_TRUE(all_close(outs[0], outs[1], 1e-4)) << "cuda:0 against host:2";
  }
}

TEST(VectorAccessReduce, SoftmaxRowsAtDivisibleWidthsAgreeWithinTolerance) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  Device host = *Device::open("host:2");
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  absl::StatusOr<Kernel> kernel = samples::softmax_kernel();
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  absl::StatusOr<Function> on_gpu = device.compile(*kernel), on_host = host.compile(*kernel);
  ASSERT_TRUE(on_gpu.ok() && on_host.ok());
  for (int cols : {16 * rng.uniform_int(1, samples::kSoftmaxBlock / 16), rng.uniform_int(1, samples::kSoftmaxBlock)}) {
    const int rows = rng.uniform_int(1, 1000);
    SCOPED_TRACE(::testing::Message() << rows << "x" << cols);
    std::vector<float> x(size_t{1} * rows * cols);
    for (float& v : x) v = rng.uniform(-5, 5);
    std::vector<std::vector<float>> outs;
    for (const auto& [dev, fn] : {std::pair{&device, &*on_gpu}, std::pair{&host, &*on_host}}) {
      absl::StatusOr<Buffer> bx = upload(*dev, x), by = dev->allocate(x.size() * sizeof(float));
      ASSERT_TRUE(bx.ok() && by.ok());
      ASSERT_TRUE(poison<float>(*dev, *by, x.size(), NAN).ok());
      ASSERT_TRUE(fn->launch({.grid = dev->num_compute_units()}, *bx, *by, rows, cols).ok());
      ASSERT_TRUE(dev->synchronize().ok());
      absl::StatusOr<std::vector<float>> got = download<float>(*dev, *by, x.size());
      ASSERT_TRUE(got.ok());
      outs.push_back(*std::move(got));
    }
    EXPECT_TRUE(all_close(outs[0], outs[1], 1e-5)) << "cuda:0 against host:2";
  }
}

}  // namespace
}  // namespace tessel::gpu_test
