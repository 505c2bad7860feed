// The samples' kernels on cuda:0 and on host:2 with the same random inputs:
// the two agree with each other and with a C++ reference, element by element
// (bit-exact for copies and adds, within tolerances for softmax and matmul).
// Outputs are poisoned before every launch and sit in front of a poisoned
// guard region that must survive: masks and TMA clipping write nothing past
// the tensor.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "gtest/gtest.h"
#include "runtime/device.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/sample_kernels.h"

namespace tessel::gpu_test {
namespace {

constexpr size_t kGuard = 4096;  // poisoned elements after every output

// An output of `count` elements plus the guard, all poisoned.
template <class T>
absl::StatusOr<Buffer> poisoned_output(const Device& device, size_t count, T value) {
  TESSEL_ASSIGN_OR_RETURN(Buffer b, device.allocate((count + kGuard) * sizeof(T)));
  TESSEL_RETURN_IF_ERROR(poison(device, b, count + kGuard, value));
  return b;
}

// The first `count` elements of an output after checking its guard.
template <class T>
absl::StatusOr<std::vector<T>> result(const Device& device, const Buffer& b, size_t count, T value) {
  TESSEL_RETURN_IF_ERROR(device.synchronize());
  TESSEL_ASSIGN_OR_RETURN(std::vector<T> all, download<T>(device, b, count + kGuard));
  for (size_t i = count; i < all.size(); ++i) {
    if (std::memcmp(&all[i], &value, sizeof(T)) != 0) {
      return absl::InternalError(
          absl::StrCat(device.name(), ": the kernel wrote past its output, at element ", i, " of a tensor of ", count));
    }
  }
  all.resize(count);
  return all;
}

class CudaSamples : public ::testing::Test {
 protected:
  // The two devices every test runs on; `skip_` when there is no GPU.
  void SetUp() override {
    absl::StatusOr<Device> gpu = Device::open("cuda:0");
    if (!gpu.ok() &&
        (gpu.status().code() == absl::StatusCode::kUnavailable || gpu.status().code() == absl::StatusCode::kNotFound)) {
      GTEST_SKIP() << "needs an NVIDIA GPU: " << gpu.status().message();
    }
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    absl::StatusOr<Device> host = Device::open("host:2");
    ASSERT_TRUE(host.ok()) << host.status();
    devices_ = {*gpu, *host};
  }

  std::vector<Device> devices_;
  Rng rng_;
};

TEST_F(CudaSamples, VectorAddAgreesBitForBit) {
  TESSEL_TRACE_SEED(rng_);
  absl::StatusOr<Kernel> kernel = vector_add_kernel();
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  for (int n : {1, kAddBlock - 1, kAddBlock, kAddBlock + 1, rng_.uniform_int(1, 2'000'000)}) {
    SCOPED_TRACE(n);
    std::vector<float> x(n), y(n), want(n);
    for (int i = 0; i < n; ++i) x[i] = rng_.uniform(-1, 1), y[i] = rng_.uniform(-1, 1), want[i] = x[i] + y[i];
    auto run = [&](const Device& d) -> absl::StatusOr<std::vector<float>> {
      TESSEL_ASSIGN_OR_RETURN(Function fn, d.compile(*kernel));
      TESSEL_ASSIGN_OR_RETURN(Buffer bx, upload(d, x));
      TESSEL_ASSIGN_OR_RETURN(Buffer by, upload(d, y));
      TESSEL_ASSIGN_OR_RETURN(Buffer bz, poisoned_output(d, n, NAN));
      TESSEL_RETURN_IF_ERROR(fn.launch({.grid = (n + kAddBlock - 1) / kAddBlock}, bx, by, bz, n));
      return result(d, bz, n, NAN);
    };
    for (const Device& d : devices_) {
      SCOPED_TRACE(d.name());
      absl::StatusOr<std::vector<float>> got = run(d);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_TRUE(bit_equal(*got, want));
    }
  }
}

TEST_F(CudaSamples, SoftmaxAgreesWithinTolerance) {
  TESSEL_TRACE_SEED(rng_);
  absl::StatusOr<Kernel> kernel = softmax_kernel();
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const int rows = rng_.uniform_int(1, 2000), cols = rng_.uniform_int(1, kSoftmaxBlock);
  SCOPED_TRACE(::testing::Message() << rows << "x" << cols);
  std::vector<float> x(size_t{1} * rows * cols);
  std::normal_distribution<float> normal(0, 3);
  for (float& v : x) v = normal(rng_.gen());
  std::vector<double> want(x.size());
  for (int r = 0; r < rows; ++r) {
    const float* row = &x[size_t{1} * r * cols];
    double m = -INFINITY, s = 0;
    for (int j = 0; j < cols; ++j) m = std::max(m, double{row[j]});
    for (int j = 0; j < cols; ++j) s += std::exp(row[j] - m);
    for (int j = 0; j < cols; ++j) want[size_t{1} * r * cols + j] = std::exp(row[j] - m) / s;
  }
  std::vector<std::vector<float>> outs;
  for (const Device& d : devices_) {
    SCOPED_TRACE(d.name());
    auto run = [&]() -> absl::StatusOr<std::vector<float>> {
      TESSEL_ASSIGN_OR_RETURN(Function fn, d.compile(*kernel));
      TESSEL_ASSIGN_OR_RETURN(Buffer bx, upload(d, x));
      TESSEL_ASSIGN_OR_RETURN(Buffer by, poisoned_output(d, x.size(), NAN));
      TESSEL_RETURN_IF_ERROR(fn.launch({.grid = d.num_compute_units()}, bx, by, rows, cols));
      return result(d, by, x.size(), NAN);
    };
    absl::StatusOr<std::vector<float>> got = run();
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(all_close(*got, want, 1e-5));
    outs.push_back(*std::move(got));
  }
  EXPECT_TRUE(all_close(outs[0], outs[1], 1e-5)) << "cuda:0 against host:2";
}

// m, n multiples of 8 (16-byte rows of bf16 in both orientations, as TMA
// needs) and at least one not a multiple of its box.
std::pair<int, int> copy_shape(Rng& rng) {
  int m = 8 * rng.uniform_int(1, 125), n = 8 * rng.uniform_int(1, 190);
  if (m % kCopyBM == 0 && n % kCopyBN == 0) m += 8;
  return {m, n};
}

TEST_F(CudaSamples, TileCopyAndTransposeAgreeBitForBit) {
  TESSEL_TRACE_SEED(rng_);
  absl::StatusOr<Kernel> copy = tile_copy_kernel();
  absl::StatusOr<Kernel> transpose = tile_transpose_kernel();
  ASSERT_TRUE(copy.ok()) << copy.status();
  ASSERT_TRUE(transpose.ok()) << transpose.status();
  for (int round = 0; round < 3; ++round) {
    auto [m, n] = copy_shape(rng_);
    SCOPED_TRACE(::testing::Message() << m << "x" << n);
    const size_t count = size_t{1} * m * n;
    std::vector<uint16_t> src(count), want_t(count);
    for (uint16_t& v : src) v = float_to_bf16(rng_.uniform(-4, 4));
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) want_t[size_t{1} * j * m + i] = src[size_t{1} * i * n + j];
    }
    constexpr uint16_t kPoison = 0xFFFF;  // a NaN no input has
    for (const Device& d : devices_) {
      SCOPED_TRACE(d.name());
      auto run = [&](const Kernel& k, Shape dst_dims, Shape dst_box) -> absl::StatusOr<std::vector<uint16_t>> {
        TESSEL_ASSIGN_OR_RETURN(Function fn, d.compile(k));
        TESSEL_ASSIGN_OR_RETURN(Buffer bs, upload(d, src));
        TESSEL_ASSIGN_OR_RETURN(Buffer bd, poisoned_output(d, count, kPoison));
        TESSEL_ASSIGN_OR_RETURN(TensorMap ms, d.tensor_map(bf16, bs, {m, n}, {kCopyBM, kCopyBN}));
        TESSEL_ASSIGN_OR_RETURN(TensorMap md, d.tensor_map(bf16, bd, dst_dims, dst_box));
        TESSEL_RETURN_IF_ERROR(fn.launch({.grid = d.num_compute_units()}, ms, md, m, n));
        return result(d, bd, count, kPoison);
      };
      absl::StatusOr<std::vector<uint16_t>> got = run(*copy, {m, n}, {kCopyBM, kCopyBN});
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_TRUE(bit_equal(*got, src)) << "tile_copy";
      got = run(*transpose, {n, m}, {kCopyBN, kCopyBM});
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_TRUE(bit_equal(*got, want_t)) << "tile_transpose";
    }
  }
}

// The main sample's GEMM (tensor cores on the GPU, loops on the host): C in
// bf16 against a double reference, and the devices against each other.
TEST_F(CudaSamples, MatmulAgreesWithinTolerance) {
  TESSEL_TRACE_SEED(rng_);
  absl::StatusOr<Kernel> kernel = matmul_kernel();
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  // Rows of A and B (k bf16) and C (n bf16) 16-byte aligned; m free.
  const int m = rng_.uniform_int(1, 400), n = 8 * rng_.uniform_int(1, 60), k = 8 * rng_.uniform_int(1, 80);
  SCOPED_TRACE(::testing::Message() << m << "x" << n << "x" << k);
  std::vector<uint16_t> a(size_t{1} * m * k), b(size_t{1} * n * k);
  for (uint16_t& v : a) v = float_to_bf16(rng_.uniform(-1, 1));
  for (uint16_t& v : b) v = float_to_bf16(rng_.uniform(-1, 1));
  std::vector<double> want(size_t{1} * m * n, 0.0);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      for (int p = 0; p < k; ++p) {
        want[size_t{1} * i * n + j] += double{bf16_to_float(a[size_t{1} * i * k + p])} * bf16_to_float(b[size_t{1} * j * k + p]);
      }
    }
  }
  std::vector<std::vector<float>> outs;
  for (const Device& d : devices_) {
    SCOPED_TRACE(d.name());
    auto run = [&]() -> absl::StatusOr<std::vector<float>> {
      CompileOptions options;
      options.num_warps = kMatmulWarps;
      TESSEL_ASSIGN_OR_RETURN(Function fn, d.compile(*kernel, options));
      TESSEL_ASSIGN_OR_RETURN(Buffer da, upload(d, a));
      TESSEL_ASSIGN_OR_RETURN(Buffer db, upload(d, b));
      TESSEL_ASSIGN_OR_RETURN(Buffer dc, upload(d, std::vector<uint16_t>(want.size(), 0x7FC0)));  // NaN
      TESSEL_ASSIGN_OR_RETURN(samples::GemmMaps maps, samples::gemm_maps(d, kMatmul, da, db, dc, m, n, k));
      TESSEL_RETURN_IF_ERROR(
          fn.launch({.grid = d.num_compute_units(), .num_warps = kMatmulWarps}, maps.a, maps.b, maps.c, m, n, k));
      TESSEL_RETURN_IF_ERROR(d.synchronize());
      TESSEL_ASSIGN_OR_RETURN(std::vector<uint16_t> c, download<uint16_t>(d, dc, want.size()));
      std::vector<float> out(c.size());
      for (size_t i = 0; i < c.size(); ++i) out[i] = bf16_to_float(c[i]);
      return out;
    };
    absl::StatusOr<std::vector<float>> got = run();
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(all_close(*got, want, 8e-3));  // C rounded once to bf16: up to 2^-8

    outs.push_back(*std::move(got));
  }
  EXPECT_TRUE(all_close(outs[0], outs[1], 1.6e-2)) << "cuda:0 against host:2";
}

}  // namespace
}  // namespace tessel::gpu_test
