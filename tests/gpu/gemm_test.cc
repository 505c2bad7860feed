// The GEMM on Hopper's tensor cores (dot on swizzled TMA tiles lowers to
// wgmma), checked against a double-precision reference on shapes that are
// not multiples of the tiles, for bf16 and f16, with B given as N x K (the
// tensor-core path) and as K x N; and against the host target, which runs
// the same kernel through its loop.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "dsl/ops.h"
#include "gpu_test_util.h"
#include "samples/kernels.h"

namespace tessel::gpu_test {
namespace {

struct Problem {
  int64_t m, n, k;
  DType in = bf16;
  bool b_nk = true;  // B stored N x K (else K x N)
  bool a_mk = true;  // A stored M x K (else K x M)
  int64_t bm = 128, bn = 128, bk = 64;
  int warps = 8;
  int stages = 0;  // the K loop's pipeline: 0 for the default
};

std::string name(const Problem& p) {
  return absl::StrCat(p.in.name(), " ", p.m, "x", p.n, "x", p.k, p.a_mk ? " A as MxK" : " A as KxM",
                      p.b_nk ? " B as NxK" : " B as KxN", ", tile ", p.bm,
                      "x", p.bn, "x", p.bk, ", ", p.warps, " warps, ", p.stages, " stages");
}

uint16_t to_half(float f) {
  // Round to nearest even through the f16 conversion of the host compiler.
  _Float16 h = static_cast<_Float16>(f);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}
float from_half(uint16_t bits) {
  _Float16 h;
  std::memcpy(&h, &bits, 2);
  return static_cast<float>(h);
}

struct Inputs {
  std::vector<uint16_t> a, b;  // bits
  std::vector<float> af, bf;   // their values
};

Inputs random_inputs(const Problem& p, Rng& rng) {
  Inputs in;
  auto fill = [&](int64_t count, std::vector<uint16_t>& bits, std::vector<float>& values) {
    bits.resize(count);
    values.resize(count);
    for (int64_t i = 0; i < count; ++i) {
      float x = rng.uniform(-1.0f, 1.0f);
      bits[i] = p.in == bf16 ? to_bf16(x) : to_half(x);
      values[i] = p.in == bf16 ? from_bf16(bits[i]) : from_half(bits[i]);
    }
  };
  fill(p.m * p.k, in.a, in.af);
  fill(p.k * p.n, in.b, in.bf);
  return in;
}

absl::StatusOr<std::vector<float>> run_gemm(const Device& device, const Problem& p, const Inputs& in) {
  CompileOptions options;
  options.num_warps = p.warps;
  const samples::GemmConfig g = {
      .bm = p.bm, .bn = p.bn, .bk = p.bk, .in = p.in, .b_nk = p.b_nk, .a_mk = p.a_mk, .stages = p.stages};
  TESSEL_ASSIGN_OR_RETURN(Kernel kernel, samples::gemm_kernel(g));
  TESSEL_ASSIGN_OR_RETURN(Function fn, device.compile(kernel, options));
  TESSEL_ASSIGN_OR_RETURN(Buffer a, upload(device, in.a));
  TESSEL_ASSIGN_OR_RETURN(Buffer b, upload(device, in.b));
  TESSEL_ASSIGN_OR_RETURN(Buffer c, device.allocate(p.m * p.n * 4));
  TESSEL_RETURN_IF_ERROR(poison(device, c, p.m * p.n, std::nanf("")));
  TESSEL_ASSIGN_OR_RETURN(samples::GemmMaps maps, samples::gemm_maps(device, g, a, b, c, p.m, p.n, p.k));
  const int64_t tiles = (p.m + p.bm - 1) / p.bm * ((p.n + p.bn - 1) / p.bn);
  const int grid = static_cast<int>(std::min<int64_t>(tiles, device.num_compute_units()));
  TESSEL_RETURN_IF_ERROR(fn.launch({.grid = grid, .num_warps = p.warps}, maps.a, maps.b, maps.c, static_cast<int32_t>(p.m),
                                   static_cast<int32_t>(p.n), static_cast<int32_t>(p.k)));
  TESSEL_RETURN_IF_ERROR(device.synchronize());
  return download<float>(device, c, p.m * p.n);
}

// Every element when there are few, else a sample (and every corner), against
// a double-precision sum; the bound scales with the sum of |a| |b|.
::testing::AssertionResult matches_reference(const Problem& p, const Inputs& in, const std::vector<float>& c,
                                             Rng& rng) {
  std::vector<int64_t> picks;
  if (p.m * p.n <= (int64_t{1} << 20)) {
    for (int64_t i = 0; i < p.m * p.n; ++i) picks.push_back(i);
  } else {
    for (int i = 0; i < 20000; ++i) picks.push_back(std::uniform_int_distribution<int64_t>(0, p.m * p.n - 1)(rng.gen()));
    for (int64_t r : {int64_t{0}, p.m - 1}) {
      for (int64_t col : {int64_t{0}, p.n - 1}) picks.push_back(r * p.n + col);
    }
  }
  int64_t bad = 0;
  ::testing::Message first;
  for (int64_t e : picks) {
    const int64_t i = e / p.n, j = e % p.n;
    double sum = 0, size = 0;
    for (int64_t kk = 0; kk < p.k; ++kk) {
      const double x = p.a_mk ? in.af[i * p.k + kk] : in.af[kk * p.m + i];
      const double y = p.b_nk ? in.bf[j * p.k + kk] : in.bf[kk * p.n + j];
      sum += x * y;
      size += std::abs(x * y);
    }
    if (std::abs(c[e] - sum) <= 1e-5 * size + 1e-6) continue;
    if (bad++ < 5) first << " C[" << i << ", " << j << "] = " << c[e] << " vs " << sum << ";";
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << picks.size() << " checked elements differ:" << first;
}

TEST(Gemm, TensorCoreGemmMatchesADoubleReference) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  std::vector<Problem> problems = {
      {.m = 1, .n = 8, .k = 8},
      {.m = 1000, .n = 712, .k = 600},
      {.m = 1000, .n = 712, .k = 600, .in = f16},
      {.m = 1000, .n = 712, .k = 600, .warps = 4},
      {.m = 1000, .n = 712, .k = 600, .bn = 256},
      {.m = 1000, .n = 712, .k = 600, .stages = 1},
      {.m = 1000, .n = 712, .k = 600, .stages = 2},
      {.m = 1000, .n = 712, .k = 600, .stages = 4},
      {.m = 640, .n = 256, .k = 64, .stages = 4},
      {.m = 300, .n = 200, .k = 264, .b_nk = false, .bm = 64, .bn = 64, .warps = 4},
      {.m = 1000, .n = 712, .k = 600, .b_nk = false},
      {.m = 1000, .n = 712, .k = 600, .in = f16, .b_nk = false, .bn = 256},
      {.m = 1000, .n = 712, .k = 600, .a_mk = false},
      {.m = 1000, .n = 712, .k = 600, .b_nk = false, .a_mk = false, .warps = 4},
      {.m = 4095, .n = 4104, .k = 1032},
      {.m = 4095, .n = 4104, .k = 1032, .in = f16},
      {.m = 4095, .n = 4104, .k = 1032, .b_nk = false, .bn = 256},
      {.m = 8192, .n = 8192, .k = 8192},
  };
  for (const Problem& p : problems) {
    SCOPED_TRACE(name(p));
    Inputs in = random_inputs(p, rng);
    absl::StatusOr<std::vector<float>> c = run_gemm(device, p, in);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_TRUE(matches_reference(p, in, *c, rng));
  }
}

TEST(Gemm, TensorCoreGemmAgreesWithTheHost) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  absl::StatusOr<Device> host = Device::open("host");
  ASSERT_TRUE(host.ok()) << host.status();
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  const Problem p = {.m = 200, .n = 136, .k = 200};
  Inputs in = random_inputs(p, rng);
  absl::StatusOr<std::vector<float>> gpu = run_gemm(device, p, in);
  absl::StatusOr<std::vector<float>> cpu = run_gemm(*host, p, in);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_TRUE(all_close(*gpu, *cpu, 1e-5));
}

}  // namespace
}  // namespace tessel::gpu_test
