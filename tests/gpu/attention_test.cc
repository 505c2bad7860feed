// wgmma with A in registers: the attention kernel (P @ V with P in S's
// registers) against a double reference and the host, and a GEMM whose A
// passes through registers against the same GEMM reading A from shared
// memory, bit for bit.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "dsl/ops.h"
#include "gpu_test_util.h"
#include "samples/kernels.h"
#include "tests/matmul_cases.h"

namespace tessel::gpu_test {
namespace {

using matmul_cases::Operand;
using matmul_cases::random_operand;

// One case of a configuration: causal or not, a length, its inputs' seed.
template <class Config>
struct Case {
  Config config;
  int64_t len;
  unsigned seed;
};

// Every configuration, causal and not, at every length, each with a seed
// drawn from `rng`.
template <class Config, size_t N>
std::vector<Case<Config>> every_case(const Config (&configs)[N], std::initializer_list<int64_t> lens, Rng& rng) {
  std::vector<Case<Config>> cases;
  for (Config c : configs) {
    for (bool causal : {false, true}) {
      c.causal = causal;
      for (int64_t len : lens) cases.push_back({c, len, rng.next_seed()});
    }
  }
  return cases;
}

// Each kind of configuration the benchmark tries (block sizes, stages, one
// or two warpgroups a block, head dimensions, dtypes, warp-specialized),
// causal or not, several heads, lengths with and without a ragged last
// block: against a double reference, and against the host where the host
// is quick enough.
TEST(Attention, MatchesADoubleReferenceAndTheHost) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  absl::StatusOr<Device> host = Device::open("host");
  ASSERT_TRUE(host.ok()) << host.status();
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  const samples::AttnConfig configs[] = {
      {},
      {.bn = 64},
      {.bn = 64, .stages = 4},
      {.stages = 3},
      {.stages = 3, .warps = 4},
      {.d = 128, .bn = 64, .stages = 4},
      {.d = 128},
      {.d = 128, .stages = 3},
      {.d = 128, .bn = 64, .in = f16, .out = f32},
      {.bm = 192, .bn = 64, .stages = 4},  // three warpgroups, 64 rows each
      {.d = 128, .bm = 192, .bn = 64, .stages = 3},
      {.bm = 64, .warp_specialize = true},
      {.d = 128, .bm = 64, .bn = 64, .warp_specialize = true},
      {.stages = 3, .warp_specialize = true, .cooperative = true},
      {.d = 128, .warp_specialize = true, .cooperative = true},
      {.d = 128, .bn = 64, .in = f16, .out = f32, .stages = 3, .warp_specialize = true, .cooperative = true},
      {.group = 3, .bn = 64},  // three query heads on one KV head
      {.d = 128, .group = 3, .warp_specialize = true, .cooperative = true},
  };
  const std::vector<Case<samples::AttnConfig>> cases = every_case(configs, {64, 200, 1000, 1024}, rng);
  for_each_case(cases.size(), [&](size_t i) {
    const auto& [c, len, seed] = cases[i];
    Rng own(seed);
    SCOPED_TRACE(testing::Message() << "d " << c.d << ", " << c.bm << "x" << c.bn << " s" << c.stages << ", causal "
                                    << c.causal << ", ws " << c.warp_specialize << ", len " << len << ", random seed "
                                    << seed);
    const int64_t heads = 3, n = heads * len * c.d;
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
    Operand q = random_operand(c.in, n, own.gen()), k = random_operand(c.in, n / c.group, own.gen()),
            v = random_operand(c.in, n / c.group, own.gen());
    absl::StatusOr<std::vector<float>> gpu = matmul_cases::run_attention(device, c, heads, len, scale, q, k, v);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    const std::vector<double> want =
        matmul_cases::attention(q.values, k.values, v.values, heads, len, c.d, scale, c.causal, c.group);
    // P is rounded to bf16 (f16) before P V (2^-8 relative on weights
    // summing to 1, |v| <= 1); a bf16 O rounds once more.
    EXPECT_TRUE(all_close(*gpu, want, c.out == bf16 ? 8e-3 : 4e-3));
    if (len > 200) return;
    absl::StatusOr<std::vector<float>> cpu = matmul_cases::run_attention(*host, c, heads, len, scale, q, k, v);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    // exp2's hardware approximation against the host's expansion: where it
    // moves a weight across a rounding boundary of P's type, P V moves by
    // that unit (2^-11 of a weight below 1 in f16, |v| <= 1, l >= 1).
    EXPECT_TRUE(all_close(*gpu, *cpu, c.out == bf16 ? 8e-3 : 1e-3));
  });
}

// The backward pass (the forward with its log2-sum-exp, D, then dQ, dK and
// dV) against double gradients and against the host.
TEST(Attention, BackwardMatchesADoubleReferenceAndTheHost) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  absl::StatusOr<Device> host = Device::open("host");
  ASSERT_TRUE(host.ok()) << host.status();
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  const samples::AttnBwdConfig configs[] = {
      {},
      {.stages = 3},
      {.d = 128, .in = f16, .out = f32},
      {.block = 128, .out = f32},
      samples::attention_bwd_config(64),
      samples::attention_bwd_config(128),
      samples::attention_bwd_config(128, false, 16384),
      {.d = 128, .programs = 2},
      {.d = 128, .block = 128, .out = f32},
      {.split = true},
      {.block = 128, .in = f16, .out = f32, .stages = 3, .split = true},
      {.d = 128, .split = true},
      {.d = 128, .block = 128, .step = 64, .stages = 3, .split = true},
      {.d = 128, .block = 128, .step = 64, .in = f16, .out = f32, .split = true},
      {.group = 3},
      {.d = 128, .group = 2, .block = 128, .step = 64, .stages = 3},
      {.d = 128, .group = 4, .block = 128, .step = 64, .stages = 3, .split = true}};
  const std::vector<Case<samples::AttnBwdConfig>> cases = every_case(configs, {64, 200, 1000}, rng);
  for_each_case(cases.size(), [&](size_t i) {
    const auto& [c, len, seed] = cases[i];
    Rng own(seed);
    SCOPED_TRACE(testing::Message() << "d " << c.d << ", group " << c.group << ", block " << c.block << " step "
                                    << c.step << " s" << c.stages << (c.split ? " split" : "") << ", causal "
                                    << c.causal << ", len " << len << ", random seed " << seed);
    const int64_t heads = 3 * c.group, n = heads * len * c.d;
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
    Operand q = random_operand(c.in, n, own.gen()), k = random_operand(c.in, n / c.group, own.gen()),
            v = random_operand(c.in, n / c.group, own.gen()), dout = random_operand(c.in, n, own.gen());
    absl::StatusOr<matmul_cases::AttnGradsF> gpu =
        matmul_cases::run_attention_bwd(device, c, heads, len, scale, q, k, v, dout);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    const matmul_cases::AttnGrads want = matmul_cases::attention_grads(q.values, k.values, v.values, dout.values, heads,
                                                                       len, c.d, scale, c.causal, c.group);
    const double tolerance = matmul_cases::gradient_tolerance(c.in);
    EXPECT_LE(matmul_cases::gradient_error(gpu->dq, gpu->dk, gpu->dv, want), tolerance);
    EXPECT_LE(matmul_cases::relative_error(gpu->lse2, want.lse2), 1e-6);
    if (len > 200) return;
    absl::StatusOr<matmul_cases::AttnGradsF> cpu =
        matmul_cases::run_attention_bwd(*host, c, heads, len, scale, q, k, v, dout);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    // exp2's hardware approximation against the host's expansion, P and
    // dS each rounded to c.in before the products that read them.
    EXPECT_TRUE(all_close(gpu->dq, cpu->dq, tolerance));
    EXPECT_TRUE(all_close(gpu->dk, cpu->dk, tolerance));
    EXPECT_TRUE(all_close(gpu->dv, cpu->dv, tolerance));
  });
}

// Warp-specialized, each consumer computes its Q blocks exactly as a
// program of its own would (its own Q load and barrier): the same bits, on
// more blocks than SMs so that both consumers take some.
TEST(Attention, WarpSpecializedAgreesBitForBit) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  for (int64_t len : {200, 9000}) {
    SCOPED_TRACE(len);
    const int64_t d = 64;
    Operand q = random_operand(bf16, len * d, rng.gen()), k = random_operand(bf16, len * d, rng.gen()),
            v = random_operand(bf16, len * d, rng.gen());
    const samples::AttnConfig plain = {.bm = 64, .out = f32}, ws = {.bm = 64, .out = f32, .warp_specialize = true};
    const samples::AttnConfig plain128 = {.out = f32},
                              cooperative = {.out = f32, .warp_specialize = true, .cooperative = true};
    // The warp-specialized kernels' one loop masks where the plain
    // kernels' second loop does, and computes the same as their first.
    for (auto [p, s] : {std::pair{plain, ws}, std::pair{plain128, cooperative}}) {
      SCOPED_TRACE(s.cooperative ? "cooperative" : "ping-pong");
      absl::StatusOr<std::vector<float>> a = matmul_cases::run_attention(device, p, 1, len, 0.125f, q, k, v);
      absl::StatusOr<std::vector<float>> b = matmul_cases::run_attention(device, s, 1, len, 0.125f, q, k, v);
      ASSERT_TRUE(a.ok()) << a.status();
      ASSERT_TRUE(b.ok()) << b.status();
      EXPECT_TRUE(all_close(*b, *a, 0));
    }
  }
}

// C [m, n] = A @ B^T, 64 x 64 tiles over K in steps of 64, one warpgroup;
// with `through_registers` A is widened to f32 and rounded back (the same
// values) first, which leaves it in registers: wgmma's register-A form.
absl::StatusOr<Kernel> gemm_a_kernel(bool through_registers) {
  KernelBuilder k(through_registers ? "gemm_register_a" : "gemm_shared_a");
  Value a = k.tensor_map(bf16, {64, 64}, "a", Swizzle::k128B);
  Value b = k.tensor_map(bf16, {64, 64}, "b", Swizzle::k128B);
  Value c = k.tensor_map(f32, {64, 64}, "c");
  Value m = k.arg(i32, "m"), n = k.arg(i32, "n"), kdim = k.arg(i32, "k");
  Value tiles_n = cdiv(n, 64);
  k.for_each_tile(cdiv(m, 64) * tiles_n, [&](Value t) {
    Value row = t / tiles_n * 64, col = t % tiles_n * 64;
    Var acc = k.var(k.zeros({64, 64}, f32));
    k.for_range(0, kdim, 64, [&](Value kk) {
      Value at = tma_load(a, {row, kk});
      if (through_registers) at = cast(cast(at, f32), bf16);
      acc = dot(at, trans(tma_load(b, {col, kk})), acc);
    });
    tma_store(c, {row, col}, acc);
  });
  return k.build();
}

TEST(Attention, RegisterAAgreesWithSharedA) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  const int64_t m = 300, n = 200, k = 320;
  Operand a = random_operand(bf16, m * k, rng.gen()), b = random_operand(bf16, n * k, rng.gen());
  absl::StatusOr<Buffer> ab = upload(device, a.bytes), bb = upload(device, b.bytes);
  ASSERT_TRUE(ab.ok() && bb.ok());
  std::vector<std::vector<float>> results;
  for (bool regs : {false, true}) {
    SCOPED_TRACE(regs);
    absl::StatusOr<Kernel> kernel = gemm_a_kernel(regs);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    absl::StatusOr<Function> fn = device.compile(*kernel, {});
    ASSERT_TRUE(fn.ok()) << fn.status();
    absl::StatusOr<Buffer> cb = device.allocate(m * n * 4);
    ASSERT_TRUE(cb.ok());
    ASSERT_TRUE(poison(device, *cb, m * n, std::nanf("")).ok());
    absl::StatusOr<TensorMap> am = device.tensor_map(bf16, *ab, {m, k}, {64, 64}, Swizzle::k128B);
    absl::StatusOr<TensorMap> bm = device.tensor_map(bf16, *bb, {n, k}, {64, 64}, Swizzle::k128B);
    absl::StatusOr<TensorMap> cm = device.tensor_map(f32, *cb, {m, n}, {64, 64});
    ASSERT_TRUE(am.ok() && bm.ok() && cm.ok());
    ASSERT_TRUE(fn->launch({.grid = device.num_compute_units(), .num_warps = 4}, *am, *bm, *cm, static_cast<int32_t>(m),
                           static_cast<int32_t>(n), static_cast<int32_t>(k))
                    .ok());
    ASSERT_TRUE(device.synchronize().ok());
    absl::StatusOr<std::vector<float>> c = download<float>(device, *cb, m * n);
    ASSERT_TRUE(c.ok()) << c.status();
    results.push_back(*c);
  }
  EXPECT_TRUE(all_close(results[1], results[0], 0));
  std::vector<double> want(m * n);
  for (int64_t i = 0; i < m * n; ++i) {
    want[i] = matmul_cases::dot_at(a.values, b.values, m, n, k, true, true, i / n, i % n).sum;
  }
  EXPECT_TRUE(all_close(results[0], want, 1e-5));
}

// Products of an operand the program computed (X^T C, E X, E X^T with X =
// A B^T rounded to bf16), staged through shared memory for wgmma, on one
// warpgroup and on two: against doubles and the host. X's sums' order
// differs, which may move a rounding by one bf16 step: at most 2^-5 where
// |X| < 8 (64 products of values in (-1, 1)), times a factor in (-1, 1).
TEST(Attention, ComputedOperandsAgreeWithTheHost) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  absl::StatusOr<Device> host = Device::open("host");
  ASSERT_TRUE(host.ok()) << host.status();
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  const int64_t rows = 200;
  for (const matmul_cases::StagedProduct& p : matmul_cases::staged_products()) {
    SCOPED_TRACE(p.name());
    const matmul_cases::StagedOperands in = matmul_cases::staged_operands(p, rows, rng.gen());
    absl::StatusOr<std::vector<float>> gpu = matmul_cases::run_staged_product(device, p, rows, in);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    absl::StatusOr<std::vector<float>> cpu = matmul_cases::run_staged_product(*host, p, rows, in);
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    EXPECT_LE(matmul_cases::relative_error(*gpu, matmul_cases::staged_product_reference(p, rows, in)), 1e-2);
    EXPECT_TRUE(all_close(*gpu, *cpu, 0.04));
  }
}

}  // namespace
}  // namespace tessel::gpu_test
