// Code compiled for sm_80 (Ampere) run on the GPU under test, which runs
// code for older chips: TMA boxes copied by the program's threads from maps
// in tessel's host form, and dots on mma.sync over them (over copy rings,
// swizzled, in the pointer GEMM; P from registers in attention), against
// the host on the same operands; and mma.sync where Hopper code takes it.
// Skips without a GPU.
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "base/status.h"
#include "dsl/ops.h"
#include "gtest/gtest.h"
#include "runtime/device.h"
#include "samples/attention.h"
#include "samples/gemm.h"
#include "samples/row_kernels.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/matmul_cases.h"

namespace tessel::gpu_test {
namespace {

// `kernel` on `device` (compiled for sm_80 where it is a GPU) over A
// [m, k] and B [n, k] in bf16, into C [m, n] f32, through host-form maps.
absl::StatusOr<std::vector<float>> run(const Device& device, const Kernel& kernel, const std::vector<uint16_t>& a,
                                       const std::vector<uint16_t>& b, int m, int n, int k, int grid) {
  CompileOptions options;
  if (device.kind() == DeviceKind::kCuda) options.arch = "sm_80";
  TESSEL_ASSIGN_OR_RETURN(Function fn, device.compile(kernel, options));
  TESSEL_ASSIGN_OR_RETURN(Buffer ab, device.allocate(a.size() * 2));
  TESSEL_ASSIGN_OR_RETURN(Buffer bb, device.allocate(b.size() * 2));
  TESSEL_ASSIGN_OR_RETURN(Buffer cb, device.allocate(size_t(m) * n * 4));
  TESSEL_RETURN_IF_ERROR(device.copy_to_device(ab, a.data(), a.size() * 2));
  TESSEL_RETURN_IF_ERROR(device.copy_to_device(bb, b.data(), b.size() * 2));
  std::vector<float> c(size_t(m) * n, -1.0f);
  TESSEL_RETURN_IF_ERROR(device.copy_to_device(cb, c.data(), c.size() * 4));
  TESSEL_ASSIGN_OR_RETURN(TensorMap am, TensorMap::tiled(bf16, ab.data(), {m, k}, {64, 32}));
  TESSEL_ASSIGN_OR_RETURN(TensorMap bm, TensorMap::tiled(bf16, bb.data(), {n, k}, {64, 32}));
  TESSEL_RETURN_IF_ERROR(fn.launch({.grid = grid}, am, bm, cb, m, n, k));
  TESSEL_RETURN_IF_ERROR(device.synchronize());
  TESSEL_RETURN_IF_ERROR(device.copy_to_host(c.data(), cb, c.size() * 4));
  return c;
}

// C = A B^T, one 64 x 64 tile a program, K in steps of 32 loaded by TMA.
Kernel tiled_dot() {
  KernelBuilder k("ampere_dot");
  Value a = k.tensor_map(bf16, {64, 32}, "a"), b = k.tensor_map(bf16, {64, 32}, "b");
  Value c = k.arg(ptr(f32), "c");
  Value m = k.arg(i32, "m"), n = k.arg(i32, "n"), kk = k.arg(i32, "k");
  Value tiles_n = cdiv(n, 64);
  Value row = k.program_id() / tiles_n * 64, col = k.program_id() % tiles_n * 64;
  Var acc = k.var(k.zeros({64, 64}, f32));
  k.for_range(0, kk, 32, [&](Value s) { acc = dot(tma_load(a, {row, s}), trans(tma_load(b, {col, s})), acc); });
  Value rows = row + k.arange(0, 64), cols = col + k.arange(0, 64);
  Value at = expand_dims(rows, 1) * n + expand_dims(cols, 0);
  store(c + at, Value(acc), (expand_dims(rows, 1) < m) & (expand_dims(cols, 0) < n));
  return *k.build();
}

TEST(AmpereCode, TmaBoxesAndDotsAgreeWithTheHost) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  absl::StatusOr<Device> host = Device::open("host");
  ASSERT_TRUE(host.ok()) << host.status();
  const int m = 200, n = 136, k = 104;  // edges past the tiles, zero filled
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<uint16_t> a(size_t(m) * k), b(size_t(n) * k);
  for (uint16_t& v : a) v = float_to_bf16(dist(gen));
  for (uint16_t& v : b) v = float_to_bf16(dist(gen));
  const int grid = (m + 63) / 64 * ((n + 63) / 64);
  absl::StatusOr<std::vector<float>> on_gpu = run(device, tiled_dot(), a, b, m, n, k, grid);
  absl::StatusOr<std::vector<float>> on_host = run(*host, tiled_dot(), a, b, m, n, k, grid);
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.status();
  ASSERT_TRUE(on_host.ok()) << on_host.status();
  for (size_t i = 0; i < on_gpu->size(); ++i) {
    ASSERT_NEAR((*on_gpu)[i], (*on_host)[i], 1e-3f * (1.0f + std::abs((*on_host)[i]))) << "element " << i;
  }
}

TEST(AmpereCode, TileCopiesMoveEveryByte) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  const int m = 100, n = 296;
  std::vector<uint16_t> in(size_t(m) * n), out(in.size(), 0);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint16_t>(i * 2654435761u >> 7);
  CompileOptions sm80;
  sm80.arch = "sm_80";
  absl::StatusOr<Function> copy = device.compile(*samples::tile_copy_kernel(), sm80);
  ASSERT_TRUE(copy.ok()) << copy.status();
  absl::StatusOr<Buffer> src = device.allocate(in.size() * 2), dst = device.allocate(in.size() * 2);
  ASSERT_TRUE(src.ok() && dst.ok());
  ASSERT_TRUE(device.copy_to_device(*src, in.data(), in.size() * 2).ok());
  ASSERT_TRUE(device.copy_to_device(*dst, out.data(), out.size() * 2).ok());
  absl::StatusOr<TensorMap> from = TensorMap::tiled(bf16, src->data(), {m, n}, {samples::kCopyBM, samples::kCopyBN});
  absl::StatusOr<TensorMap> to = TensorMap::tiled(bf16, dst->data(), {m, n}, {samples::kCopyBM, samples::kCopyBN});
  ASSERT_TRUE(from.ok() && to.ok());
  ASSERT_TRUE(copy->launch({.grid = 8}, *from, *to, m, n).ok());
  ASSERT_TRUE(device.synchronize().ok());
  ASSERT_TRUE(device.copy_to_host(out.data(), *dst, out.size() * 2).ok());
  EXPECT_EQ(out, in);
}

CompileOptions sm80(const Device& device, int warps) {
  CompileOptions options;
  options.num_warps = warps;
  if (device.kind() == DeviceKind::kCuda) options.arch = "sm_80";
  return options;
}

// C of samples::gemm_kernel(g) from the same operands: compiled with
// `options` on the GPU, and on the host.
struct Both {
  std::vector<float> gpu, host;
};
absl::StatusOr<Both> gemm_on_both(const Device& device, const Device& host, const samples::GemmConfig& g,
                                  const CompileOptions& options, int64_t m, int64_t n, int64_t k,
                                  const matmul_cases::Operand& a, const matmul_cases::Operand& b,
                                  std::pair<float, float> scales = {1, 1}) {
  TESSEL_ASSIGN_OR_RETURN(std::vector<float> gpu, matmul_cases::run_gemm(device, g, options, m, n, k, a, b, scales));
  TESSEL_ASSIGN_OR_RETURN(std::vector<float> cpu,
                          matmul_cases::run_gemm(host, g, options.num_warps, m, n, k, a, b, scales));
  return Both{std::move(gpu), std::move(cpu)};
}

// The sample's GEMM on mma.sync, operands either way round and of every
// type it takes: bit for bit on i8's exact sums, else within f32's
// rounding of sums in another order (and a bf16 C's last bit, which that
// rounding may flip).
TEST(AmpereCode, TensorCoreGemmsAgreeWithTheHost) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  absl::StatusOr<Device> host = Device::open("host");
  ASSERT_TRUE(host.ok()) << host.status();
  std::mt19937 gen(11);
  struct Case {
    samples::GemmConfig g;
    int warps;
  };
  for (const Case& c : {Case{samples::kMatmulAmd, samples::kMatmulAmdWarps},
                        Case{{.bm = 64, .bn = 64, .bk = 64, .b_nk = false, .a_mk = false, .stages = 1}, 4},
                        Case{{.bm = 64, .bn = 64, .bk = 64, .in = f16, .b_nk = false, .stages = 1}, 4},
                        Case{{.bm = 64, .bn = 64, .bk = 32, .in = f32, .stages = 1, .tf32 = true}, 4},
                        Case{{.bm = 64, .bn = 64, .bk = 128, .in = i8, .out = i32, .stages = 1}, 4},
                        Case{{.bm = 64,
                              .bn = 64,
                              .bk = 32,
                              .in = f32,
                              .b_nk = false,
                              .a_mk = false,
                              .stages = 1,
                              .tf32 = true},
                             4},
                        Case{{.bm = 64, .bn = 64, .bk = 128, .in = i8, .out = i32, .b_nk = false, .stages = 1}, 4},
                        Case{samples::kMatmul, samples::kMatmulWarps}}) {
    SCOPED_TRACE(::testing::Message() << c.g.in.name() << " " << c.g.bm << "x" << c.g.bn << "x" << c.g.bk
                                      << (c.g.a_mk ? " A as MxK" : " A as KxM")
                                      << (c.g.b_nk ? " B as NxK" : " B as KxN"));
    // B as K x N of i8 needs N a multiple of 16 for its rows' 16-byte rule.
    const int64_t m = 200, n = c.g.in == i8 ? 144 : 136, k = c.g.in == i8 ? 256 : 200;
    const matmul_cases::Operand a = matmul_cases::random_operand(c.g.in, m * k, gen, true);
    const matmul_cases::Operand b = matmul_cases::random_operand(c.g.in, n * k, gen, true);
    absl::StatusOr<Both> c_of = gemm_on_both(device, *host, c.g, sm80(device, c.warps), m, n, k, a, b);
    ASSERT_TRUE(c_of.ok()) << c_of.status();
    if (c.g.in == i8) {
      EXPECT_EQ(c_of->gpu, c_of->host);
    } else {
      EXPECT_TRUE(all_close(c_of->gpu, c_of->host, c.g.out == bf16 ? 0x1p-7 : 1e-5));
    }
  }
}

// On a Hopper GPU, tiles of fewer than 64 rows a warpgroup take mma.sync
// in code for the chip itself (sm_90a), beside its TMA pipelines.
TEST(AmpereCode, SmallTilesTakeMmaSyncOnTheDevicesOwnChip) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  absl::StatusOr<Device> host = Device::open("host");
  ASSERT_TRUE(host.ok()) << host.status();
  std::mt19937 gen(15);
  for (const samples::GemmConfig& g : {samples::GemmConfig{.bm = 32, .bn = 64, .bk = 64, .stages = 3},
                                       samples::GemmConfig{.bm = 16, .bn = 128, .bk = 64, .in = f16, .b_nk = false}}) {
    SCOPED_TRACE(::testing::Message() << g.in.name() << " " << g.bm << "x" << g.bn << "x" << g.bk);
    const int64_t m = 200, n = 136, k = 200;
    const matmul_cases::Operand a = matmul_cases::random_operand(g.in, m * k, gen, true);
    const matmul_cases::Operand b = matmul_cases::random_operand(g.in, n * k, gen, true);
    CompileOptions options;
    options.num_warps = 4;
    absl::StatusOr<Both> c_of = gemm_on_both(device, *host, g, options, m, n, k, a, b);
    ASSERT_TRUE(c_of.ok()) << c_of.status();
    EXPECT_TRUE(all_close(c_of->gpu, c_of->host, 1e-5));
  }
}

// Ada's (sm_89) fp8 mma.sync, e4m3 and e5m2, C in bf16: the tensor cores'
// fp8 sums and then bf16's rounding against the host's f32 sums.
TEST(AmpereCode, AdaFp8GemmsAgreeWithTheHost) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  absl::StatusOr<Device> host = Device::open("host");
  ASSERT_TRUE(host.ok()) << host.status();
  std::mt19937 gen(14);
  for (const auto& [in_a, in_b] : {std::pair{f8e4m3, f8e4m3}, {f8e5m2, f8e4m3}}) {
    const samples::GemmConfig g = {
        .bm = 64, .bn = 64, .bk = 128, .in = in_a, .in_b = in_b, .out = bf16, .stages = 1, .scaled = true};
    SCOPED_TRACE(::testing::Message() << in_a.name() << " x " << in_b.name());
    const int64_t m = 200, n = 136, k = 256;
    const matmul_cases::Operand a = matmul_cases::random_operand(in_a, m * k, gen);
    const matmul_cases::Operand b = matmul_cases::random_operand(in_b, n * k, gen);
    CompileOptions ada = sm80(device, 4);
    ada.arch = "sm_89";
    absl::StatusOr<Both> c_of = gemm_on_both(device, *host, g, ada, m, n, k, a, b, {0.5f, 0.25f});
    ASSERT_TRUE(c_of.ok()) << c_of.status();
    EXPECT_TRUE(all_close(c_of->gpu, c_of->host, 2e-2));
  }
}

// The pointer GEMM's operands go through rings of asynchronous copies,
// swizzled, which ldmatrix reads through the same pattern.
TEST(AmpereCode, PointerGemmsOverCopyRingsAgreeWithTheHost) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  absl::StatusOr<Device> host = Device::open("host");
  ASSERT_TRUE(host.ok()) << host.status();
  std::mt19937 gen(12);
  for (const auto& [g, warps] : matmul_cases::kAmperePointerGemms) {
    SCOPED_TRACE(::testing::Message() << g.in.name() << " " << g.bm << "x" << g.bn << "x" << g.bk << ", " << g.stages
                                      << " stages");
    const int64_t m = 257, n = 264, k = 112;
    const matmul_cases::Operand a = matmul_cases::random_operand(g.in, m * k, gen, true);
    const matmul_cases::Operand b = matmul_cases::random_operand(g.in, n * k, gen, true);
    absl::StatusOr<std::vector<float>> on_gpu =
        matmul_cases::run_pointer_gemm(device, g, sm80(device, warps), m, n, k, a, b);
    absl::StatusOr<std::vector<float>> on_host = matmul_cases::run_pointer_gemm(*host, g, warps, m, n, k, a, b);
    ASSERT_TRUE(on_gpu.ok()) << on_gpu.status();
    ASSERT_TRUE(on_host.ok()) << on_host.status();
    EXPECT_TRUE(all_close(*on_gpu, *on_host, g.out == bf16 ? 1e-2 : 1e-5));
  }
}

// Attention with P @ V on P in registers, against doubles and the host.
TEST(AmpereCode, AttentionAgreesWithTheHost) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  absl::StatusOr<Device> host = Device::open("host");
  ASSERT_TRUE(host.ok()) << host.status();
  std::mt19937 gen(13);
  for (bool causal : {false, true}) {
    const samples::AttnConfig c = {.d = 64, .bm = 64, .bn = 64, .causal = causal, .stages = 1, .warps = 4};
    SCOPED_TRACE(causal ? "causal" : "full");
    const int64_t heads = 2, len = 200, n = heads * len * c.d;
    const float scale = 0.125f;
    const matmul_cases::Operand q = matmul_cases::random_operand(c.in, n, gen);
    const matmul_cases::Operand k = matmul_cases::random_operand(c.in, n, gen);
    const matmul_cases::Operand v = matmul_cases::random_operand(c.in, n, gen);
    absl::StatusOr<std::vector<float>> on_gpu =
        matmul_cases::run_attention(device, c, heads, len, scale, q, k, v, "sm_80");
    absl::StatusOr<std::vector<float>> on_host = matmul_cases::run_attention(*host, c, heads, len, scale, q, k, v);
    ASSERT_TRUE(on_gpu.ok()) << on_gpu.status();
    ASSERT_TRUE(on_host.ok()) << on_host.status();
    EXPECT_TRUE(all_close(*on_gpu, *on_host, 8e-3));
    EXPECT_TRUE(all_close(*on_gpu,
                          matmul_cases::attention(q.values, k.values, v.values, heads, len, c.d, scale, causal), 8e-3));
  }
}

}  // namespace
}  // namespace tessel::gpu_test
