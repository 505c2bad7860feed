// Per-token quantization (samples::quantize_rows_kernel) and per-token-group
// quantization (quantize_groups_kernel) on the host against the same
// arithmetic written out here, bit for bit; and two linear layers end to
// end, within the quantization's error of the f32 product: W8A8
// (activations quantized per token by the kernel, weights per output
// channel, the i8 GEMM taking both scales back: row_scales, col_scales)
// and DeepSeek-V3's fp8 (activations per 1 x 128 group, weights per 128 x
// 128 block: block_scales).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/float16.h"
#include "base/float8.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "samples/kernels.h"
#include "tests/matmul_cases.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;

// A [rows, cols] matrix quantized per row to `to`: bytes as stored, and one scale a row.
struct Quantized {
  std::vector<uint8_t> bytes;
  std::vector<float> scales;
};

// The kernel's arithmetic on the host, row by row (samples::quantize_row_reference).
Quantized quantize_reference(const std::vector<float>& x, int64_t rows, int64_t cols, DType to) {
  Quantized out{std::vector<uint8_t>(rows * cols), std::vector<float>(rows)};
  for (int64_t r = 0; r < rows; ++r) {
    out.scales[r] = samples::quantize_row_reference(&x[r * cols], cols, to, &out.bytes[r * cols]);
  }
  return out;
}

// The same per group of 128 of each row, the scales [groups, rows].
Quantized quantize_groups_reference(const std::vector<float>& x, int64_t rows, int64_t cols, DType to) {
  const int64_t groups = (cols + 127) / 128;
  Quantized out{std::vector<uint8_t>(rows * cols), std::vector<float>(groups * rows)};
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t at = r * cols + g * 128;
      out.scales[g * rows + r] =
          samples::quantize_row_reference(&x[at], std::min<int64_t>(128, cols - g * 128), to, &out.bytes[at]);
    }
  }
  return out;
}

// The quantize_rows_kernel's output on the host for x (as f32 values,
// stored as `from`), or with `groups` quantize_groups_kernel's for groups of 128.
absl::StatusOr<Quantized> quantize_on_host(const std::vector<float>& x, int64_t rows, int64_t cols, DType from,
                                           DType to, bool groups = false) {
  TESSEL_ASSIGN_OR_RETURN(Device host, Device::open("host:2"));
  const samples::RowBlock block =
      groups ? samples::RowBlock{.rows = 16, .cols = 128, .warps = 2} : samples::row_block(static_cast<int>(cols));
  TESSEL_ASSIGN_OR_RETURN(Kernel kernel, groups ? samples::quantize_groups_kernel(block, from, to)
                                                : samples::quantize_rows_kernel(block, from, to));
  CompileOptions options;
  options.num_warps = block.warps;
  TESSEL_ASSIGN_OR_RETURN(Function fn, host.compile(kernel, options));
  std::vector<uint16_t> halves;
  for (float v : x) halves.push_back(float_to_bf16(v));
  TESSEL_ASSIGN_OR_RETURN(Buffer bx, from == f32 ? matmul_cases::put(host, x.data(), x.size() * 4)
                                                 : matmul_cases::put(host, halves.data(), halves.size() * 2));
  TESSEL_ASSIGN_OR_RETURN(Buffer bq, host.allocate(x.size()));
  const int64_t scales = groups ? (cols + 127) / 128 * rows : rows;
  TESSEL_ASSIGN_OR_RETURN(Buffer bs, host.allocate(scales * 4));
  TESSEL_RETURN_IF_ERROR(
      fn.launch({.grid = static_cast<int>((scales + block.rows - 1) / block.rows), .num_warps = block.warps}, bx, bq,
                bs, static_cast<int32_t>(rows), static_cast<int32_t>(cols)));
  Quantized out{std::vector<uint8_t>(x.size()), std::vector<float>(scales)};
  TESSEL_RETURN_IF_ERROR(host.copy_to_host(out.bytes.data(), bq, out.bytes.size()));
  TESSEL_RETURN_IF_ERROR(host.copy_to_host(out.scales.data(), bs, scales * 4));
  return out;
}

// Rows of different magnitudes, one of zeros.
std::vector<float> activations(int64_t rows, int64_t cols, std::mt19937& gen) {
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> x(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) x[r * cols + c] = r == 3 ? 0.0f : dist(gen) * static_cast<float>(1 + r % 7);
  }
  return x;
}

// Y [m, n] against X [m, k] W [n, k]^T in double: each element within the
// sum over p of term_bound(i, j, p) (the operands' quantization errors'
// share of it), plus Y's rounding to bf16.
void expect_within_quantization_error(const std::vector<float>& y, const std::vector<float>& x,
                                      const std::vector<float>& w, int64_t m, int64_t n, int64_t k,
                                      const std::function<double(int64_t i, int64_t j, int64_t p)>& term_bound) {
  int64_t bad = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double exact = 0, bound = 0;
      for (int64_t p = 0; p < k; ++p) {
        exact += double{x[i * k + p]} * w[j * k + p];
        bound += term_bound(i, j, p);
      }
      bound += std::ldexp(std::abs(exact) + bound, -8);
      if (!(std::abs(y[i * n + j] - exact) <= bound + 1e-6) && bad++ < 5) {
        ADD_FAILURE() << "Y[" << i << ", " << j << "] = " << y[i * n + j] << ", want " << exact << " within " << bound;
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(Quantize, RowsMatchTheReferenceBitForBit) {
  std::mt19937 gen(3);
  for (auto [from, to, cols] : {std::tuple{f32, i8, 272}, {bf16, i8, 1000}, {f32, f8e4m3, 272}, {bf16, f8e4m3, 96}}) {
    SCOPED_TRACE(absl::StrCat(from.name(), " to ", to.name(), ", rows of ", cols));
    const int64_t rows = 37;
    std::vector<float> x = activations(rows, cols, gen);
    if (from == bf16) {
      for (float& v : x) v = bf16_to_float(float_to_bf16(v));
    }
    absl::StatusOr<Quantized> got = quantize_on_host(x, rows, cols, from, to);
    ASSERT_TRUE(got.ok()) << got.status();
    const Quantized want = quantize_reference(x, rows, cols, to);
    EXPECT_EQ(got->scales, want.scales);
    EXPECT_EQ(got->bytes, want.bytes);
    EXPECT_EQ(got->scales[3], 1.0f);  // the row of zeros
  }
  EXPECT_THAT(samples::quantize_rows_kernel({}, f32, bf16).status().message(),
              HasSubstr("quantizes f32 or bf16 rows to i8 or f8e4m3, got f32 to bf16"));
}

// Groups of 128, the last of each row 44 wide, and a row of zeros.
TEST(Quantize, GroupsMatchTheReferenceBitForBit) {
  std::mt19937 gen(5);
  for (auto [from, to] : {std::pair{f32, f8e4m3}, {bf16, f8e4m3}, {f32, i8}}) {
    SCOPED_TRACE(absl::StrCat(from.name(), " to ", to.name()));
    const int64_t rows = 37, cols = 300;
    std::vector<float> x = activations(rows, cols, gen);
    if (from == bf16) {
      for (float& v : x) v = bf16_to_float(float_to_bf16(v));
    }
    absl::StatusOr<Quantized> got = quantize_on_host(x, rows, cols, from, to, /*groups=*/true);
    ASSERT_TRUE(got.ok()) << got.status();
    const Quantized want = quantize_groups_reference(x, rows, cols, to);
    EXPECT_EQ(got->scales, want.scales);
    EXPECT_EQ(got->bytes, want.bytes);
  }
  EXPECT_THAT(samples::quantize_groups_kernel({}, bf16, f8e5m2).status().message(),
              HasSubstr("quantize_groups_kernel: quantizes f32 or bf16 rows to i8 or f8e4m3, got bf16 to f8e5m2"));
}

// A W8A8 linear layer: Y [m, n] = X [m, k] W [n, k]^T, X quantized per
// token by the kernel, W per output channel, on the i8 GEMM with both
// scales in its epilogue, Y in bf16.
TEST(Quantize, W8A8LinearLayerIsWithinTheQuantizationError) {
  std::mt19937 gen(4);
  const int64_t m = 150, n = 136, k = 272;
  const std::vector<float> x = activations(m, k, gen), w = activations(n, k, gen);
  absl::StatusOr<Quantized> qx = quantize_on_host(x, m, k, f32, i8);
  ASSERT_TRUE(qx.ok()) << qx.status();
  const Quantized qw = quantize_reference(w, n, k, i8);
  auto operand = [](const Quantized& q) {
    matmul_cases::Operand op{q.bytes, {}};
    for (uint8_t b : q.bytes) op.values.push_back(static_cast<int8_t>(b));
    return op;
  };
  const samples::GemmConfig g = {
      .bm = 64, .bn = 64, .bk = 128, .in = i8, .out = bf16, .stages = 2, .row_scales = true, .col_scales = true};
  absl::StatusOr<Device> host = Device::open("host:2");
  ASSERT_TRUE(host.ok()) << host.status();
  absl::StatusOr<std::vector<float>> y = matmul_cases::run_gemm(*host, g, 4, m, n, k, operand(*qx), operand(qw), {1, 1},
                                                                nullptr, 0, qx->scales, qw.scales);
  ASSERT_TRUE(y.ok()) << y.status();
  // Each operand within half its step: |a - a'| <= sa / 2, |b - b'| <= sb / 2.
  expect_within_quantization_error(*y, x, w, m, n, k, [&](int64_t i, int64_t j, int64_t p) {
    const double sa = qx->scales[i], sb = qw.scales[j];
    return std::abs(x[i * k + p]) * sb / 2 + std::abs(w[j * k + p]) * sa / 2 + sa * sb / 4;
  });
}

// DeepSeek-V3's fp8 linear layer: Y [m, n] = X [m, k] W [n, k]^T, X
// quantized to e4m3 per 1 x 128 group by the kernel, W per 128 x 128
// block, on the GEMM with block scales, Y in bf16.
TEST(Quantize, BlockScaledFp8LinearLayerIsWithinTheQuantizationError) {
  std::mt19937 gen(6);
  const int64_t m = 150, n = 200, k = 304, kb = 3;
  const std::vector<float> x = activations(m, k, gen), w = activations(n, k, gen);
  absl::StatusOr<Quantized> qx = quantize_on_host(x, m, k, f32, f8e4m3, /*groups=*/true);
  ASSERT_TRUE(qx.ok()) << qx.status();
  // W's blocks, as a checkpoint ships them.
  Quantized qw{std::vector<uint8_t>(n * k), {}};
  qw.scales = samples::quantize_blocks_reference(w.data(), n, k, f8e4m3, qw.bytes.data());
  ASSERT_EQ(qw.scales.size(), 2u * kb);
  auto operand = [](const Quantized& q) {
    matmul_cases::Operand op{q.bytes, {}};
    for (uint8_t b : q.bytes) op.values.push_back(float8_to_float(b, Float8::kE4M3));
    return op;
  };
  const samples::GemmConfig g = {
      .bm = 64, .bn = 64, .bk = 128, .in = f8e4m3, .out = bf16, .stages = 2, .block_scales = true};
  const matmul_cases::BlockScales scales = {qx->scales, qw.scales};
  absl::StatusOr<Device> host = Device::open("host:2");
  ASSERT_TRUE(host.ok()) << host.status();
  absl::StatusOr<std::vector<float>> y =
      matmul_cases::run_gemm(*host, g, 4, m, n, k, operand(*qx), operand(qw), {1, 1}, nullptr, 0, {}, {}, &scales);
  ASSERT_TRUE(y.ok()) << y.status();
  // Each operand within half a step of e4m3 at its scaled value.
  expect_within_quantization_error(*y, x, w, m, n, k, [&](int64_t i, int64_t j, int64_t p) {
    const double a = x[i * k + p], b = w[j * k + p];
    const double sa = qx->scales[p / 128 * m + i], sb = qw.scales[j / 128 * kb + p / 128];
    const double ea = sa * samples::half_step(f8e4m3, a / sa), eb = sb * samples::half_step(f8e4m3, b / sb);
    return std::abs(a) * eb + std::abs(b) * ea + ea * eb;
  });
}

}  // namespace
}  // namespace tessel
