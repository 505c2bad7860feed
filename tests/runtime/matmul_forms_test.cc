// The GEMM with fp8 operands (and per-tensor scales), with i8 operands
// (exact into i32) and with tf32 products, and the attention kernel, on the host target against double
// references: what the tensor-core forms must match on GPUs.
#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/matmul_cases.h"

namespace tessel {
namespace {

using matmul_cases::Operand;
using matmul_cases::random_operand;
using samples::GemmConfig;
using ::testing::HasSubstr;

Device host() { return *Device::open("host:2"); }

// A GEMM configuration and the warps it runs on.
struct Form {
  GemmConfig g;
  int warps;
};

// Every element of C within `tol` * sum |a b| (+ a little) of the double sum.
void expect_gemm_matches(const GemmConfig& g, int64_t m, int64_t n, int64_t k, const Operand& a, const Operand& b,
                         const std::vector<float>& c, double scale, double tol) {
  int64_t bad = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const matmul_cases::Dot d = matmul_cases::dot_at(a.values, b.values, m, n, k, g.a_mk, g.b_nk, i, j);
      const double got = c[i * n + j];
      if (!(std::abs(got - scale * d.sum) <= scale * (tol * d.size + 1e-6)) && bad++ < 5) {
        ADD_FAILURE() << "C[" << i << ", " << j << "] = " << got << ", want " << scale * d.sum;
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

// A grouped GEMM (an MoE layer's experts over rows in expert order): each
// block of rows by its group's B, with a scale per group and per row, the
// blocks past those in use left zero; bf16 and fp8, C in f32 and bf16; and
// with block scales, each group's B its own (fp8 with a tile in one of B's
// blocks, i8 with tiles across two).
TEST(MatmulForms, GroupedGemmMatchesADoubleReference) {
  std::mt19937 gen(7);
  const GemmConfig fp8 = {
      .bm = 64, .bn = 128, .bk = 128, .in = f8e4m3, .out = bf16, .scaled = true, .grouped = true, .row_scales = true};
  const GemmConfig fp8_blocks = {
      .bm = 64, .bn = 64, .bk = 128, .in = f8e4m3, .out = bf16, .grouped = true, .block_scales = true};
  GemmConfig i8_blocks = fp8_blocks;
  i8_blocks.in = i8;
  i8_blocks.bn = 96;
  i8_blocks.bk = 64;
  for (const Form& f : {Form{{.bm = 64, .bn = 64, .bk = 32, .stages = 2, .grouped = true}, 4}, Form{fp8, 4},
                        Form{fp8_blocks, 4}, Form{i8_blocks, 4}}) {
    SCOPED_TRACE(absl::StrCat(f.g.in.name(), f.g.block_scales ? " block scales" : ""));
    const matmul_cases::GroupedGemmInputs in = matmul_cases::random_grouped_gemm(f.g, 7, 5, 3, 136, 256, gen);
    absl::StatusOr<std::vector<float>> c = matmul_cases::run_grouped_gemm(host(), f.g, f.warps, in);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(matmul_cases::grouped_gemm_mismatch(f.g, in, *c, 1e-5), "");
  }
}

TEST(MatmulForms, GroupedGemmTakesNoTransposeSplitOrCluster) {
  for (GemmConfig g : {GemmConfig{.b_nk = false}, GemmConfig{.a_mk = false}, GemmConfig{.out = f32, .split_k = 2},
                       GemmConfig{.stream_k = true}, GemmConfig{.cluster_m = 2}}) {
    g.grouped = true;
    absl::Status s = samples::gemm_kernel(g).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("a grouped GEMM takes A as M x K and B as N x K per group"));
  }
}

// The SwiGLU epilogue (an MoE layer's up projection with its activation):
// C = silu(A G^T) * (A U^T) of B = [G; U], grouped (a 4-D box of each
// group's G and U rows) with C in bf16, and in fp8 quantized by C's scale
// after the row scales; and a plain GEMM's (a 3-D box), on a C whose width
// is not a multiple of the tiles' half.
TEST(MatmulForms, SwigluEpilogueMatchesADoubleReference) {
  std::mt19937 gen(11);
  GemmConfig fp8 = {.bm = 64, .bn = 128, .bk = 128, .in = f8e4m3, .out = f8e4m3, .stages = 2, .scaled = true};
  fp8.grouped = fp8.row_scales = fp8.swiglu = true;
  for (const Form& f :
       {Form{{.bm = 64, .bn = 64, .bk = 32, .out = bf16, .stages = 2, .grouped = true, .swiglu = true}, 4},
        Form{fp8, 4}}) {
    SCOPED_TRACE(f.g.in.name());
    const matmul_cases::GroupedGemmInputs in = matmul_cases::random_grouped_gemm(f.g, 7, 5, 3, 144, 256, gen);
    absl::StatusOr<std::vector<float>> c = matmul_cases::run_grouped_gemm(host(), f.g, f.warps, in);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(matmul_cases::grouped_gemm_mismatch(f.g, in, *c, 1e-5), "");
  }
  const GemmConfig g = {.bm = 64, .bn = 64, .out = bf16, .stages = 2, .swiglu = true};
  const int64_t m = 150, n = 136, k = 200;
  Operand a = random_operand(bf16, m * k, gen), b = random_operand(bf16, 2 * n * k, gen);
  absl::StatusOr<std::vector<float>> c = matmul_cases::run_gemm(host(), g, 4, m, n, k, a, b);
  ASSERT_TRUE(c.ok()) << c.status();
  int64_t bad = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const matmul_cases::Dot gate = matmul_cases::dot_at(a.values, b.values, m, 2 * n, k, true, true, i, j);
      const matmul_cases::Dot up = matmul_cases::dot_at(a.values, b.values, m, 2 * n, k, true, true, i, n + j);
      const samples::Bounded want = samples::swiglu_reference(gate.sum, up.sum, 1e-5 * gate.size, 1e-5 * up.size);
      const double got = (*c)[i * n + j];
      if (!(std::abs(got - want.value) <= want.bound + samples::half_step(bf16, want.value) * 1.01 + 1e-6) &&
          bad++ < 5) {
        ADD_FAILURE() << "C[" << i << ", " << j << "] = " << got << ", want " << want.value;
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(MatmulForms, SwigluEpilogueTakesNoTransposeSplitClusterOrGelu) {
  for (GemmConfig g : {GemmConfig{.b_nk = false}, GemmConfig{.a_mk = false}, GemmConfig{.out = f32, .split_k = 2},
                       GemmConfig{.bias_gelu = true}, GemmConfig{.stream_k = true}, GemmConfig{.cluster_m = 2},
                       GemmConfig{.bn = 200}}) {
    g.swiglu = true;
    absl::Status s = samples::gemm_kernel(g).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("a SwiGLU epilogue takes A as M x K and B as N x K, tiles a multiple of 16"));
  }
}

TEST(MatmulForms, Fp8GemmWithScalesMatchesADoubleReference) {
  std::mt19937 gen(7);
  for (auto [da, db] : {std::pair{f8e4m3, f8e4m3}, {f8e4m3, f8e5m2}, {f8e5m2, f8e5m2}}) {
    SCOPED_TRACE(absl::StrCat(da.name(), " x ", db.name()));
    // fp8 rows must span multiples of 16 bytes (TMA): K = 272. M and N are not tile multiples.
    const int64_t m = 150, n = 136, k = 272;
    const GemmConfig g = {.bm = 64, .bn = 64, .bk = 128, .in = da, .in_b = db, .stages = 2, .scaled = true};
    Operand a = random_operand(da, m * k, gen), b = random_operand(db, n * k, gen);
    absl::StatusOr<std::vector<float>> c = matmul_cases::run_gemm(host(), g, 4, m, n, k, a, b, {0.5f, 0.25f});
    ASSERT_TRUE(c.ok()) << c.status();
    // fp8 products are exact in f32: the error is the f32 sum's.
    expect_gemm_matches(g, m, n, k, a, b, *c, 0.125, 1e-6);
  }
}

// i8 operands (every value of i8) sum exactly into i32: C as that sum, or
// scaled to bf16, and warp-specialized.
TEST(MatmulForms, I8GemmIsExact) {
  std::mt19937 gen(11);
  const int64_t m = 150, n = 136, k = 272;
  Operand a = random_operand(i8, m * k, gen), b = random_operand(i8, n * k, gen);
  const GemmConfig plain = {.bm = 64, .bn = 64, .bk = 128, .in = i8, .out = i32, .stages = 2};
  GemmConfig cooperative = plain;
  cooperative.bm = 128;
  cooperative.stages = 3;
  cooperative.warp_specialize = cooperative.cooperative = true;
  for (const Form& f : {Form{plain, 4}, Form{cooperative, 12}}) {
    absl::StatusOr<std::vector<float>> c = matmul_cases::run_gemm(host(), f.g, f.warps, m, n, k, a, b);
    ASSERT_TRUE(c.ok()) << c.status();
    expect_gemm_matches(f.g, m, n, k, a, b, *c, 1.0, 0.0);
  }
  const GemmConfig bf = {.bm = 64, .bn = 64, .bk = 128, .in = i8, .out = f32, .stages = 2, .scaled = true};
  absl::StatusOr<std::vector<float>> c = matmul_cases::run_gemm(host(), bf, 4, m, n, k, a, b, {0.5f, 0.25f});
  ASSERT_TRUE(c.ok()) << c.status();
  expect_gemm_matches(bf, m, n, k, a, b, *c, 0.125, 0.0);
}

// Rowwise scaling: C [i, j] = row_scales[i] col_scales[j] (A @ B)[i, j]
// (per-token activation and per-channel weight scales), for i8 and fp8
// operands, C in bf16; with bias + GELU after the column scales.
TEST(MatmulForms, RowAndColumnScalesMatchADoubleReference) {
  std::mt19937 gen(13);
  const int64_t m = 150, n = 136, k = 272;
  const std::vector<float> rows = matmul_cases::random_scales(m, 64, gen),
                           cols = matmul_cases::random_scales(n, 256, gen);
  for (DType in : {i8, f8e4m3}) {
    for (bool gelu : {false, true}) {
      SCOPED_TRACE(absl::StrCat(in.name(), gelu ? " bias + GELU" : ""));
      const GemmConfig g = {.bm = 64,
                            .bn = 64,
                            .bk = 128,
                            .in = in,
                            .out = bf16,
                            .stages = 2,
                            .bias_gelu = gelu,
                            .row_scales = !gelu,
                            .col_scales = true};
      Operand a = random_operand(in, m * k, gen), b = random_operand(in, n * k, gen);
      Operand bias = random_operand(in == i8 ? bf16 : in, n, gen);
      absl::StatusOr<std::vector<float>> c = matmul_cases::run_gemm(
          host(), g, 4, m, n, k, a, b, {1, 1}, gelu ? &bias : nullptr, 0, gelu ? std::vector<float>{} : rows, cols);
      ASSERT_TRUE(c.ok()) << c.status();
      int64_t bad = 0;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          const matmul_cases::Dot d = matmul_cases::dot_at(a.values, b.values, m, n, k, true, true, i, j);
          double want = d.sum * cols[j];
          if (gelu) want = samples::gelu_reference(want + bias.values[j]);
          if (!gelu) want *= rows[i];
          // bf16 rounding, and f32's (and the fast tanh's) in the epilogue.
          const double tol = std::ldexp(std::abs(want), -8) + 1e-5 * d.size * cols[j] + (gelu ? 1e-4 : 0.0);
          if (!(std::abs((*c)[i * n + j] - want) <= tol) && bad++ < 5) {
            ADD_FAILURE() << "C[" << i << ", " << j << "] = " << (*c)[i * n + j] << ", want " << want;
          }
        }
      }
      EXPECT_EQ(bad, 0);
    }
  }
  EXPECT_THAT(samples::gemm_kernel({.col_scales = true, .swiglu = true}).status().message(),
              HasSubstr("column scales are one per column of C, so neither grouped"));
  EXPECT_THAT(samples::gemm_kernel({.in = i8, .out = i32, .col_scales = true}).status().message(),
              HasSubstr("column scales"));
}

// Block scales (DeepSeek-V3's: A's per row and 128 of K, B's per 128 x
// 128 block): each K step's product times its blocks' scales, for fp8 and
// i8 operands, with a tile inside one of B's blocks and one across two (96
// wide, K steps of 64: two a block), K (304) and N (200) not multiples of 128, and
// split-K and stream-K, whose parts start and end inside K.
TEST(MatmulForms, BlockScalesMatchADoubleReference) {
  std::mt19937 gen(17);
  const int64_t m = 150, n = 200, k = 304;
  const GemmConfig narrow = {
      .bm = 64, .bn = 64, .bk = 128, .in = f8e4m3, .out = bf16, .stages = 2, .block_scales = true};
  GemmConfig wide = narrow, int8 = narrow, split = narrow, stream = narrow;
  wide.bn = 96;
  wide.bk = 64;
  int8.in = i8;
  split.out = f32;
  split.split_k = 2;
  stream.stream_k = true;
  for (const GemmConfig& g : {narrow, wide, int8, split, stream}) {
    SCOPED_TRACE(absl::StrCat(g.in.name(), " ", g.bn, " x ", g.bk, " split_k ", g.split_k, " stream_k ", g.stream_k));
    const Operand a = random_operand(g.in, m * k, gen), b = random_operand(g.in, n * k, gen);
    const matmul_cases::BlockScales scales = matmul_cases::random_block_scales(m, n, k, gen);
    absl::StatusOr<std::vector<float>> c =
        matmul_cases::run_gemm(host(), g, 4, m, n, k, a, b, {1, 1}, nullptr, g.stream_k ? 3 : 0, {}, {}, &scales);
    ASSERT_TRUE(c.ok()) << c.status();
    int64_t bad = 0;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        const matmul_cases::Dot d = matmul_cases::block_scaled_dot_at(a.values, b.values, scales, m, k, i, j);
        // f32 sums, then C's rounding to bf16.
        const double tol = 1e-5 * d.size + (g.out == bf16 ? std::ldexp(std::abs(d.sum), -8) : 0.0) + 1e-7;
        if (!(std::abs((*c)[i * n + j] - d.sum) <= tol) && bad++ < 5) {
          ADD_FAILURE() << "C[" << i << ", " << j << "] = " << (*c)[i * n + j] << ", want " << d.sum;
        }
      }
    }
    EXPECT_EQ(bad, 0);
  }
  EXPECT_THAT(matmul_cases::run_gemm(host(), narrow, 4, m, n, k, random_operand(f8e4m3, m * k, gen),
                                     random_operand(f8e4m3, n * k, gen))
                  .status()
                  .message(),
              HasSubstr("block_scales needs blocks"));
  auto refused = [&](const std::function<void(GemmConfig&)>& change) {
    GemmConfig g = narrow;
    change(g);
    return std::string(samples::gemm_kernel(g).status().message());
  };
  const std::string rule = "block scales take fp8 or i8 operands, A as M x K and B as N x K, K steps that divide 128";
  EXPECT_THAT(refused([](GemmConfig& g) { g.in = bf16, g.bk = 64; }), HasSubstr(rule + ", and neither fast_accum nor "
                                                                                       "swiglu; got bf16"));
  EXPECT_THAT(refused([](GemmConfig& g) { g.bk = 256; }), HasSubstr("bk 256"));
  EXPECT_THAT(refused([](GemmConfig& g) { g.fast_accum = true; }), HasSubstr("fast_accum 1"));
  EXPECT_THAT(refused([](GemmConfig& g) { g.swiglu = true; }), HasSubstr("swiglu 1"));
  EXPECT_THAT(refused([](GemmConfig& g) { g.b_nk = false; }), HasSubstr("B K x N"));
  EXPECT_THAT(refused([](GemmConfig& g) { g.in = i8, g.out = i32; }), HasSubstr("an i32 C is the exact sum"));
}

TEST(MatmulForms, Fp8GemmWithScalesAndBiasGeluMatchesADoubleReference) {
  // C = gelu(scale_a scale_b (A @ B^T) + bias): the scales and the bias meet
  // in one fused multiply-add (samples::gemm_kernel).
  std::mt19937 gen(11);
  const int64_t m = 150, n = 136, k = 272;
  GemmConfig g = {.bm = 64, .bn = 64, .bk = 128, .in = f8e4m3, .stages = 2, .scaled = true};
  g.bias_gelu = true;
  Operand a = random_operand(f8e4m3, m * k, gen), b = random_operand(f8e4m3, n * k, gen);
  Operand bias = random_operand(f8e4m3, n, gen);
  absl::StatusOr<std::vector<float>> c =
      matmul_cases::run_gemm(host(), g, 4, m, n, k, a, b, {0.5f, 0.25f}, &bias);
  ASSERT_TRUE(c.ok()) << c.status();
  int64_t bad = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const matmul_cases::Dot d = matmul_cases::dot_at(a.values, b.values, m, n, k, g.a_mk, g.b_nk, i, j);
      const double want = samples::gelu_reference(0.125 * d.sum + bias.values[j]);
      const double got = (*c)[i * n + j];
      if (!(std::abs(got - want) <= 1e-5 * (0.125 * d.size + std::abs(bias.values[j]) + 1)) && bad++ < 5) {
        ADD_FAILURE() << "C[" << i << ", " << j << "] = " << got << ", want " << want;
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(MatmulForms, UnpaddedFp8RowsGiveTheStrideError) {
  std::mt19937 gen(1);
  const GemmConfig g = {.bm = 64, .bn = 64, .bk = 128, .in = f8e4m3, .scaled = true};
  const int64_t m = 64, n = 64, k = 100;  // a row of 100 bytes
  Operand a = random_operand(f8e4m3, m * k, gen), b = random_operand(f8e4m3, n * k, gen);
  absl::Status s = matmul_cases::run_gemm(host(), g, 4, m, n, k, a, b).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("strides[0] = 100 bytes (dense row-major) is not a multiple of 16"));
}

TEST(MatmulForms, Tf32GemmRoundsItsOperands) {
  std::mt19937 gen(3);
  const int64_t m = 100, n = 72, k = 96;
  const GemmConfig g = {.bm = 64, .bn = 64, .bk = 32, .in = f32, .stages = 2, .tf32 = true};
  // Operands exact in tf32: the products are f32 ones.
  Operand a = random_operand(f32, m * k, gen, /*tf32_exact=*/true), b = random_operand(f32, n * k, gen, true);
  absl::StatusOr<std::vector<float>> c = matmul_cases::run_gemm(host(), g, 4, m, n, k, a, b);
  ASSERT_TRUE(c.ok()) << c.status();
  expect_gemm_matches(g, m, n, k, a, b, *c, 1.0, 1e-6);
  // Operands with all 23 mantissa bits: each is rounded to tf32 (nearest
  // even) before it is multiplied, as the reference rounds them.
  Operand fa = random_operand(f32, m * k, gen), fb = random_operand(f32, n * k, gen);
  Operand ra = fa, rb = fb;
  for (Operand* r : {&ra, &rb}) {
    for (double& v : r->values) v = matmul_cases::round_to_tf32(static_cast<float>(v));
  }
  absl::StatusOr<std::vector<float>> rounded = matmul_cases::run_gemm(host(), g, 4, m, n, k, fa, fb);
  ASSERT_TRUE(rounded.ok()) << rounded.status();
  expect_gemm_matches(g, m, n, k, ra, rb, *rounded, 1.0, 1e-6);
  // 1 + 2^-12 is not a tf32 value: it rounds to 1, where the exact product keeps it.
  auto filled = [](float v, int64_t count) {
    Operand op;
    op.bytes.resize(count * 4);
    for (int64_t i = 0; i < count; ++i) std::memcpy(op.bytes.data() + 4 * i, &v, 4);
    op.values.assign(count, v);
    return op;
  };
  const float x = 1.0f + std::ldexp(1.0f, -12);
  const Operand one = filled(x, m * k), ones = filled(1.0f, n * k);
  absl::StatusOr<std::vector<float>> tf = matmul_cases::run_gemm(host(), g, 4, m, n, k, one, ones);
  GemmConfig ieee = g;
  ieee.tf32 = false;
  absl::StatusOr<std::vector<float>> exact = matmul_cases::run_gemm(host(), ieee, 4, m, n, k, one, ones);
  ASSERT_TRUE(tf.ok()) << tf.status();
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_EQ((*tf)[0], static_cast<float>(k));
  EXPECT_EQ((*exact)[0], static_cast<float>(k * static_cast<double>(x)));
}

// The configuration the GEMM sample compiles for AMD GPUs (MFMA there): the
// host runs the same kernel for the numbers.
TEST(MatmulForms, TheAmdGemmConfigurationMatchesOnTheHost) {
  std::mt19937 gen(5);
  const int64_t m = 150, n = 136;
  for (DType in : {bf16, f16, i8}) {
    SCOPED_TRACE(in.name());
    const int64_t k = in == i8 ? 208 : 200;  // rows of 16-byte multiples
    GemmConfig g = samples::kMatmulAmd;
    g.in = in;
    g.out = in == i8 ? i32 : f32;
    Operand a = random_operand(in, m * k, gen), b = random_operand(in, n * k, gen);
    absl::StatusOr<std::vector<float>> c = matmul_cases::run_gemm(host(), g, samples::kMatmulAmdWarps, m, n, k, a, b);
    ASSERT_TRUE(c.ok()) << c.status();
    expect_gemm_matches(g, m, n, k, a, b, *c, 1.0, in == i8 ? 0.0 : 1e-6);
  }
}

// A warp-specialized loop runs on the host as written (the producer and
// the consumers are NVIDIA's): the same numbers, ping-pong or cooperative.
TEST(MatmulForms, TheWarpSpecializedGemmMatchesOnTheHost) {
  std::mt19937 gen(9);
  const int64_t m = 300, n = 264, k = 200;
  for (const GemmConfig& g : {GemmConfig{.bm = 128, .bn = 128, .stages = 3, .warp_specialize = true},
                              GemmConfig{.bm = 128, .bn = 256, .stages = 3, .warp_specialize = true,
                                         .cooperative = true}}) {
    SCOPED_TRACE(g.cooperative ? "cooperative" : "ping-pong");
    Operand a = random_operand(bf16, m * k, gen), b = random_operand(bf16, n * k, gen);
    absl::StatusOr<std::vector<float>> c = matmul_cases::run_gemm(host(), g, 12, m, n, k, a, b);
    ASSERT_TRUE(c.ok()) << c.status();
    expect_gemm_matches(g, m, n, k, a, b, *c, 1.0, 1e-6);
  }
}

// Each form's GEMM of one 400 x 520 x 200 problem (bf16 operands drawn
// from `seed`) on the host, against the double sum.
void expect_forms_match_on_the_host(unsigned seed, const std::vector<Form>& forms) {
  std::mt19937 gen(seed);
  const int64_t m = 400, n = 520, k = 200;
  for (const Form& f : forms) {
    SCOPED_TRACE(absl::StrCat(f.g.bm, "x", f.g.bn, f.g.a_mk ? "" : ", A as KxM", f.g.b_nk ? "" : ", B as KxN", ", ",
                              f.warps, " warps"));
    Operand a = random_operand(bf16, m * k, gen), b = random_operand(bf16, n * k, gen);
    absl::StatusOr<std::vector<float>> c = matmul_cases::run_gemm(host(), f.g, f.warps, m, n, k, a, b);
    ASSERT_TRUE(c.ok()) << c.status();
    expect_gemm_matches(f.g, m, n, k, a, b, *c, 1.0, f.g.out == bf16 ? 1.0 / 128 : 1e-6);
  }
}

// Tiles whose sides are not powers of two: 192 columns (wgmma's n192) on
// two warpgroups, 192 rows on three, both, and 192 columns cooperative.
TEST(MatmulForms, GemmTilesOf192MatchOnTheHost) {
  expect_forms_match_on_the_host(
      12, {Form{{.bm = 128, .bn = 192, .stages = 3}, 8}, Form{{.bm = 192, .bn = 128, .stages = 3}, 12},
           Form{{.bm = 192, .bn = 192, .out = bf16, .stages = 2}, 12},
           Form{{.bm = 128, .bn = 192, .b_nk = false, .stages = 3}, 8},
           Form{{.bm = 192, .bn = 128, .a_mk = false, .stages = 3}, 12},
           Form{{.bm = 128, .bn = 192, .stages = 3, .warp_specialize = true, .cooperative = true}, 12}});
}

// Widths fitted to a shape: C's box in the widest swizzle whose panels its
// rows fill (none for 152 bf16 columns, 32 bytes for 232 f32), 256 rows on
// two warpgroups, and 152 columns cooperative.
TEST(MatmulForms, GemmTilesFittedToAShapeMatchOnTheHost) {
  expect_forms_match_on_the_host(
      14, {Form{{.bm = 128, .bn = 152, .out = bf16, .stages = 3}, 8}, Form{{.bm = 128, .bn = 232, .stages = 3}, 8},
           Form{{.bm = 256, .bn = 152, .out = bf16, .stages = 4}, 8},
           Form{{.bm = 192, .bn = 152, .a_mk = false, .stages = 3}, 12},
           Form{{.bm = 128, .bn = 152, .stages = 3, .warp_specialize = true, .cooperative = true}, 12}});
}

// Clusters of two programs whose tiles share B's (2 x 1) or A's (1 x 2),
// which the host loads whole in each program: K- and MN-major operands,
// ping-pong and cooperative. 520 columns make 3 tiles of 256 (a pair past
// the edge), 400 rows 4 of 128.
TEST(MatmulForms, GemmClustersMatchOnTheHost) {
  expect_forms_match_on_the_host(
      16,
      {Form{{.bm = 128, .bn = 256, .out = bf16, .stages = 4, .cluster_m = 2}, 8},
       Form{{.bm = 256, .bn = 128, .stages = 3, .cluster_n = 2}, 8},
       Form{{.bm = 128, .bn = 256, .b_nk = false, .a_mk = false, .stages = 3, .cluster_n = 2}, 8},
       Form{{.bm = 128, .bn = 128, .b_nk = false, .stages = 3, .warp_specialize = true, .cluster_m = 2}, 12},
       Form{{.bm = 128, .bn = 256, .stages = 3, .warp_specialize = true, .cooperative = true, .cluster_m = 2}, 12}});
}

TEST(MatmulForms, GemmClustersAreChecked) {
  EXPECT_THAT(samples::gemm_kernel({.cluster_m = 2, .cluster_n = 2}).status().message(),
              HasSubstr("clusters of 1 or 2 tiles are supported, got 2 x 2"));
  EXPECT_THAT(samples::gemm_kernel({.split_k = 2, .cluster_m = 2}).status().message(),
              HasSubstr("a cluster of 2 takes neither split_k (got 2)"));
  // B's halves of 76 rows would not start on a 1 KiB boundary of the swizzled tile.
  EXPECT_THAT(samples::gemm_kernel({.bm = 128, .bn = 152, .cluster_m = 2}).status().message(),
              HasSubstr("not a multiple of 1024"));
  // A grid of whole clusters, at least one, no more than have work.
  EXPECT_EQ(samples::gemm_grid({.bn = 256, .cluster_m = 2}, 400, 520, 132), 12);  // 2 x 3 pairs of 4 x 3 tiles
  EXPECT_EQ(samples::gemm_grid({.cluster_n = 2}, 4096, 4096, 131), 130);
  EXPECT_EQ(samples::gemm_grid({.cluster_n = 2}, 4096, 4096, 1), 2);
}

TEST(MatmulForms, CsBoxTakesTheWidestSwizzleItsRowsFill) {
  EXPECT_EQ((GemmConfig{.bn = 256}.out_swizzle(bf16)), Swizzle::k128B);
  EXPECT_EQ((GemmConfig{.bn = 32}.out_swizzle(bf16)), Swizzle::k64B);  // 64 bytes: one panel of 64
  EXPECT_EQ((GemmConfig{.bn = 8}.out_swizzle(bf16)), Swizzle::kNone);  // 16 bytes, narrower than any panel
  EXPECT_EQ((GemmConfig{.bn = 192, .in = f8e4m3, .swiglu = true}.out_swizzle(f8e4m3)), Swizzle::k32B);  // 96 bytes
  EXPECT_EQ((GemmConfig{.bn = 152}.out_swizzle(bf16)), Swizzle::kNone);  // 304 bytes
  EXPECT_EQ((GemmConfig{.bn = 232}.out_swizzle(f32)), Swizzle::k32B);    // 928 bytes
  EXPECT_EQ((GemmConfig{.bn = 160}.out_swizzle(bf16)), Swizzle::k64B);   // 320 bytes
  EXPECT_EQ((GemmConfig{.bn = 160, .swizzle = Swizzle::k32B}.out_swizzle(bf16)), Swizzle::k32B);
}

// 3000 x 5000 on 132 programs: 152 columns make six whole waves of 128-row
// tiles, 232 four, where 256 leaves the fourth of four two thirds full;
// 256-row tiles stop at 160 columns.
TEST(MatmulForms, FittedWidthsFillTheWaves) {
  EXPECT_EQ(samples::fitted_widths(3000, 5000, 128, 132, 2), (std::vector<int64_t>{152, 232}));
  EXPECT_EQ(samples::fitted_widths(3000, 5000, 256, 132, 2, 160), (std::vector<int64_t>{152, 160}));
  // One tile row: every width makes one tile, and the narrowest costs least.
  EXPECT_EQ(samples::fitted_widths(64, 100, 128, 132, 1), (std::vector<int64_t>{128}));
  // Where the widest fills the waves, it is first (8192 x 8192: 64 x 32 tiles, 2048 of them).
  EXPECT_EQ(samples::fitted_widths(8192, 8192, 128, 128, 1), (std::vector<int64_t>{256}));
  EXPECT_TRUE(samples::fitted_widths(3000, 5000, 128, 0, 2).empty());
  EXPECT_TRUE(samples::fitted_widths(0, 5000, 128, 132, 2).empty());
  EXPECT_TRUE(samples::fitted_widths(3000, 5000, 0, 132, 2).empty());
}

// Split-K: the programs of a tile's K parts add into C (K = 200 is four
// BK blocks: in three parts of two, the last part is empty), also
// warp-specialized and with fp8 scales, which apply to each part.
TEST(MatmulForms, SplitKGemmMatchesADoubleReference) {
  std::mt19937 gen(13);
  const int64_t m = 300, n = 264, k = 200;
  for (const Form& c : {Form{{.bm = 128, .bn = 128, .stages = 3, .split_k = 2}, 4},
                        Form{{.bm = 64, .bn = 64, .stages = 2, .split_k = 3}, 4},
                        Form{{.bm = 128, .bn = 128, .stages = 3, .warp_specialize = true, .split_k = 2}, 12}}) {
    SCOPED_TRACE(absl::StrCat("split_k ", c.g.split_k, c.g.warp_specialize ? ", warp-specialized" : ""));
    Operand a = random_operand(bf16, m * k, gen), b = random_operand(bf16, n * k, gen);
    absl::StatusOr<std::vector<float>> got = matmul_cases::run_gemm(host(), c.g, c.warps, m, n, k, a, b);
    ASSERT_TRUE(got.ok()) << got.status();
    expect_gemm_matches(c.g, m, n, k, a, b, *got, 1.0, 1e-6);
  }
  const GemmConfig fp8 = {.bm = 64, .bn = 64, .bk = 128, .in = f8e4m3, .scaled = true, .split_k = 2};
  const int64_t k8 = 512;
  Operand a = random_operand(f8e4m3, m * k8, gen), b = random_operand(f8e4m3, n * k8, gen);
  absl::StatusOr<std::vector<float>> got = matmul_cases::run_gemm(host(), fp8, 4, m, n, k8, a, b, {0.5f, 0.25f});
  ASSERT_TRUE(got.ok()) << got.status();
  expect_gemm_matches(fp8, m, n, k8, a, b, *got, 0.125, 1e-6);
}

TEST(MatmulForms, SplitKNeedsAnF32CAndALinearEpilogue) {
  absl::StatusOr<Kernel> zero = samples::gemm_kernel({.split_k = 0});
  EXPECT_THAT(zero.status().message(), HasSubstr("gemm_kernel: split_k must be >= 1, got 0"));
  absl::StatusOr<Kernel> narrow = samples::gemm_kernel({.out = bf16, .split_k = 2});
  EXPECT_THAT(narrow.status().message(),
              HasSubstr("split_k = 2 adds partial tiles into C, which must then be f32, got bf16"));
  absl::StatusOr<Kernel> gelu = samples::gemm_kernel({.bias_gelu = true, .split_k = 4});
  EXPECT_THAT(gelu.status().message(),
              HasSubstr("split_k = 4 sums partial tiles, so the epilogue must be linear; bias + GELU is not"));
}

// Stream-K on programs that split the tiles every way: fewer tiles than
// programs, a last partial wave, a multiple of the programs (nothing
// shared), one program; steps a program shorter than a tile and longer;
// bias + GELU and fp8 scales applied once a shared tile is whole. run_gemm
// launches twice on one workspace: the second C is checked, so a slot or
// counter left dirty shows.
TEST(MatmulForms, StreamKGemmMatchesADoubleReference) {
  std::mt19937 gen(17);
  struct Case {
    int64_t m, n, k;
    int programs;
  };
  const GemmConfig g = {.bm = 64, .bn = 64, .stages = 2, .stream_k = true};
  for (const Case& c : {Case{150, 136, 520, 5}, Case{300, 200, 72, 3}, Case{64, 64, 1000, 7}, Case{256, 256, 192, 4},
                        Case{1, 8, 8, 3}, Case{200, 136, 520, 1}, Case{330, 264, 200, 13}}) {
    SCOPED_TRACE(absl::StrCat(c.m, "x", c.n, "x", c.k, " on ", c.programs, " programs, ",
                              samples::gemm_stream_k_slots(g, c.m, c.n, c.programs), " shared tiles"));
    Operand a = random_operand(bf16, c.m * c.k, gen), b = random_operand(bf16, c.n * c.k, gen);
    absl::StatusOr<std::vector<float>> got =
        matmul_cases::run_gemm(host(), g, 4, c.m, c.n, c.k, a, b, {1, 1}, nullptr, c.programs);
    ASSERT_TRUE(got.ok()) << got.status();
    expect_gemm_matches(g, c.m, c.n, c.k, a, b, *got, 1.0, 1e-6);
  }
  const int64_t m = 150, n = 136, k = 272;
  GemmConfig fused = {.bm = 64, .bn = 64, .bk = 128, .in = f8e4m3, .stages = 2, .scaled = true, .stream_k = true};
  fused.bias_gelu = true;
  Operand a = random_operand(f8e4m3, m * k, gen), b = random_operand(f8e4m3, n * k, gen);
  Operand bias = random_operand(f8e4m3, n, gen);
  absl::StatusOr<std::vector<float>> c = matmul_cases::run_gemm(host(), fused, 4, m, n, k, a, b, {0.5f, 0.25f}, &bias, 4);
  ASSERT_TRUE(c.ok()) << c.status();
  int64_t bad = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const matmul_cases::Dot d = matmul_cases::dot_at(a.values, b.values, m, n, k, true, true, i, j);
      const double want = samples::gelu_reference(0.125 * d.sum + bias.values[j]);
      if (!(std::abs((*c)[i * n + j] - want) <= 1e-5 * (0.125 * d.size + std::abs(bias.values[j]) + 1)) &&
          bad++ < 5) {
        ADD_FAILURE() << "C[" << i << ", " << j << "] = " << (*c)[i * n + j] << ", want " << want;
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(MatmulForms, StreamKTakesNeitherSplitKNorWarpSpecialization) {
  absl::StatusOr<Kernel> split = samples::gemm_kernel({.split_k = 2, .stream_k = true});
  EXPECT_THAT(split.status().message(),
              HasSubstr("gemm_kernel: stream_k takes neither split_k (got 2) nor warp_specialize (got 0)"));
  absl::StatusOr<Kernel> ws = samples::gemm_kernel({.warp_specialize = true, .stream_k = true});
  EXPECT_THAT(ws.status().message(), HasSubstr("nor warp_specialize (got 1)"));
}

TEST(MatmulForms, StreamKWorkspaceNeedsAGrid) {
  absl::StatusOr<samples::GemmWorkspace> ws = samples::gemm_workspace(host(), {.stream_k = true}, 100, 100, 0);
  EXPECT_THAT(ws.status().message(), HasSubstr("gemm_workspace: programs must be >= 1, got 0"));
}

TEST(MatmulForms, StreamKSharesTheLastWaveOrItAndAWholeOne) {
  const GemmConfig g = {.bm = 128, .bn = 256, .stream_k = true};
  EXPECT_EQ(samples::gemm_stream_k_slots(g, 1024, 1024, 132), 32);  // 32 tiles: all
  EXPECT_EQ(samples::gemm_stream_k_slots(g, 3000, 5000, 132), 84);  // 480 = 3 * 132 + 84
  EXPECT_EQ(samples::gemm_stream_k_slots(g, 4096, 4096, 132), 116);  // 512 = 3 * 132 + 116
  EXPECT_EQ(samples::gemm_stream_k_slots(g, 1536, 4096, 132), 192);  // 192 = 132 + 60: 60 and a wave
  EXPECT_EQ(samples::gemm_stream_k_slots(g, 4224, 8192, 132), 0);   // 33 * 32 = 8 * 132
}

// The finish rounds C to bf16 and leaves the workspace zero.
TEST(MatmulForms, SplitKFinishRoundsAndClearsTheWorkspace) {
  const Device dev = host();
  const int count = 2 * samples::kFinishBlock + 37;
  std::vector<float> acc(count);
  for (int i = 0; i < count; ++i) acc[i] = 1.0f + static_cast<float>(i) / 3.0f;
  absl::StatusOr<Kernel> kernel = samples::splitk_finish_kernel(bf16);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  absl::StatusOr<Function> fn = dev.compile(*kernel);
  ASSERT_TRUE(fn.ok()) << fn.status();
  absl::StatusOr<Buffer> accb = matmul_cases::put(dev, acc.data(), count * 4);
  ASSERT_TRUE(accb.ok()) << accb.status();
  std::vector<uint16_t> out(count + 8, 0xFFFF);
  absl::StatusOr<Buffer> outb = matmul_cases::put(dev, out.data(), out.size() * 2);
  ASSERT_TRUE(outb.ok()) << outb.status();
  ASSERT_TRUE(fn->launch({.grid = 2}, *accb, *outb, count).ok());
  ASSERT_TRUE(dev.synchronize().ok());
  std::vector<float> cleared(count, 1.0f);
  ASSERT_TRUE(dev.copy_to_host(cleared.data(), *accb, count * 4).ok());
  ASSERT_TRUE(dev.copy_to_host(out.data(), *outb, out.size() * 2).ok());
  for (int i = 0; i < count; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &acc[i], 4);
    const auto want = static_cast<uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);  // to nearest even
    ASSERT_EQ(out[i], want) << "element " << i;
    ASSERT_EQ(cleared[i], 0.0f) << "element " << i;
  }
  for (int i = count; i < count + 8; ++i) ASSERT_EQ(out[i], 0xFFFF) << "written past the end at " << i;
}

// Block sizes, head dimensions, dtypes, the warp-specialized forms and
// query heads sharing KV heads, causal or not, over heads whose lengths
// leave ragged last blocks (200, 130) or none (256).
TEST(MatmulForms, AttentionMatchesADoubleReference) {
  std::mt19937 gen(11);
  const samples::AttnConfig configs[] = {
      {},
      {.bn = 64},
      {.d = 128, .bm = 64, .bn = 64, .in = f16, .out = f32},
      {.bm = 192, .bn = 64},
      {.bm = 64, .warp_specialize = true},
      {.bn = 64, .warp_specialize = true, .cooperative = true},
      {.group = 3},
      {.d = 128, .group = 2, .bn = 64, .warp_specialize = true, .cooperative = true},
  };
  for (samples::AttnConfig c : configs) {
    for (bool causal : {false, true}) {
      for (int64_t len : {200, 256, 130}) {
        c.causal = causal;
        SCOPED_TRACE(testing::Message() << "d " << c.d << ", " << c.bm << "x" << c.bn << ", causal " << causal
                                        << ", ws " << c.warp_specialize << ", cooperative " << c.cooperative << ", len "
                                        << len);
        const int64_t heads = 2 * c.group, n = heads * len * c.d;
        const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
        Operand q = random_operand(c.in, n, gen), k = random_operand(c.in, n / c.group, gen),
                v = random_operand(c.in, n / c.group, gen);
        absl::StatusOr<std::vector<float>> o = matmul_cases::run_attention(host(), c, heads, len, scale, q, k, v);
        ASSERT_TRUE(o.ok()) << o.status();
        const std::vector<double> want =
            matmul_cases::attention(q.values, k.values, v.values, heads, len, c.d, scale, causal, c.group);
        // P is rounded to bf16 (f16) before P V: 2^-8 relative on weights
        // that sum to 1, |v| <= 1; a bf16 O rounds once more.
        double worst = 0;
        for (int64_t i = 0; i < n; ++i) {
          const double e = std::abs((*o)[i] - want[i]);
          worst = std::isnan(e) ? INFINITY : std::max(worst, e);
        }
        EXPECT_LE(worst, c.out == bf16 ? 8e-3 : 4e-3);
      }
    }
  }
}

TEST(MatmulForms, AttentionRefusesQueryHeadsThatDoNotGroup) {
  absl::StatusOr<Buffer> b = host().allocate(64 * 64 * 2);
  ASSERT_TRUE(b.ok()) << b.status();
  absl::StatusOr<samples::AttnMaps> maps = samples::attention_maps(host(), {.group = 2}, *b, *b, *b, *b, 5, 64);
  EXPECT_THAT(maps.status().message(), HasSubstr("5 query heads do not share KV heads in groups of 2"));
}

// The backward pass (forward with its log2-sum-exp, D, then dQ, dK, dV)
// against double gradients: block sizes, head dimensions, dtypes, causal
// or not, lengths with ragged last blocks (130, 200) and without (128);
// grouped heads (a KV head's dK and dV summed over its group) too.
TEST(MatmulForms, AttentionBackwardMatchesADoubleReference) {
  std::mt19937 gen(12);
  samples::AttnBwdConfig deep_grouped = samples::attention_bwd_config(128, false, 16384);
  deep_grouped.group = 4;
  const samples::AttnBwdConfig configs[] = {
      {},
      {.d = 128, .in = f16, .out = f32},
      {.block = 128, .out = f32, .stages = 3},
      samples::attention_bwd_config(64),
      samples::attention_bwd_config(128),
      samples::attention_bwd_config(128, false, 16384),
      {.d = 128, .programs = 2},
      {.block = 128, .step = 64, .in = f16, .out = f32, .stages = 3},
      {.d = 128, .block = 128, .out = f32},
      {.split = true},
      {.block = 128, .in = f16, .out = f32, .stages = 3, .split = true},
      {.d = 128, .block = 128, .split = true},
      {.d = 128, .block = 128, .step = 64, .in = f16, .out = f32, .stages = 3, .split = true},
      {.group = 2},
      {.group = 3, .block = 128, .in = f16, .out = f32, .stages = 3, .split = true},
      {.d = 128, .group = 2, .block = 128, .step = 64, .stages = 3},
      deep_grouped,
  };
  for (samples::AttnBwdConfig c : configs) {
    for (bool causal : {false, true}) {
      for (int64_t len : {130, 128, 200}) {
        c.causal = causal;
        SCOPED_TRACE(testing::Message() << "d " << c.d << ", group " << c.group << ", block " << c.block << " step "
                                        << c.step << ", split " << c.split << ", causal " << causal << ", len " << len);
        const int64_t heads = 2 * c.group, n = heads * len * c.d;
        const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
        Operand q = random_operand(c.in, n, gen), k = random_operand(c.in, n / c.group, gen),
                v = random_operand(c.in, n / c.group, gen), dout = random_operand(c.in, n, gen);
        absl::StatusOr<matmul_cases::AttnGradsF> got =
            matmul_cases::run_attention_bwd(host(), c, heads, len, scale, q, k, v, dout);
        ASSERT_TRUE(got.ok()) << got.status();
        const matmul_cases::AttnGrads want = matmul_cases::attention_grads(q.values, k.values, v.values, dout.values,
                                                                           heads, len, c.d, scale, causal, c.group);
        EXPECT_LE(matmul_cases::gradient_error(got->dq, got->dk, got->dv, want),
                  matmul_cases::gradient_tolerance(c.in));
        EXPECT_LE(matmul_cases::relative_error(got->lse2, want.lse2), 1e-6);
      }
    }
  }
}

TEST(MatmulForms, GroupedAttentionBackwardNamesHeadsThatDoNotGroup) {
  absl::StatusOr<Buffer> b = host().allocate(6 * 64 * 64 * 4);
  ASSERT_TRUE(b.ok()) << b.status();
  std::vector<const Buffer*> nine(9, &*b);
  absl::StatusOr<samples::AttnBwdMaps> maps = samples::attention_bwd_maps(host(), {.group = 4}, nine, 6, 64);
  EXPECT_EQ(maps.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(maps.status().message(), HasSubstr("6 query heads do not share KV heads in groups of 4"));
  absl::StatusOr<Kernel> kernel = samples::attention_bwd_kernel({.group = 0});
  EXPECT_EQ(kernel.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(kernel.status().message(), HasSubstr("group (query heads per KV head) must be positive, got 0"));
}

// Products of a computed operand (X = A B^T rounded to bf16; X^T C, E X,
// E X^T), blocks of 64 and 128 rows, against doubles (the rounding of each
// element of X taken from the reference's own sum).
TEST(MatmulForms, ComputedOperandsMatchADoubleReference) {
  std::mt19937 gen(13);
  const int64_t rows = 200;
  for (const matmul_cases::StagedProduct& p : matmul_cases::staged_products()) {
    SCOPED_TRACE(p.name());
    const matmul_cases::StagedOperands in = matmul_cases::staged_operands(p, rows, gen);
    absl::StatusOr<std::vector<float>> got = matmul_cases::run_staged_product(host(), p, rows, in);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_LE(matmul_cases::relative_error(*got, matmul_cases::staged_product_reference(p, rows, in)), 1e-3);
  }
}

TEST(MatmulForms, AttentionBackwardStepsDivideTheBlock) {
  for (int64_t step : {48, 40}) {
    absl::StatusOr<Kernel> kernel = samples::attention_bwd_kernel({.block = 128, .step = step});
    EXPECT_EQ(kernel.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(kernel.status().message(),
                HasSubstr(absl::StrCat("step (", step, ") must be a multiple of 16 dividing the block (128)")));
  }
}

TEST(MatmulForms, AttentionBackwardMapsNeedNineBuffers) {
  absl::StatusOr<Buffer> b = host().allocate(64 * 64 * 2);
  ASSERT_TRUE(b.ok()) << b.status();
  absl::StatusOr<samples::AttnBwdMaps> maps = samples::attention_bwd_maps(host(), {}, {&*b, &*b}, 1, 64);
  EXPECT_EQ(maps.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(maps.status().message(),
              HasSubstr("needs Q, K, V, dO, dQ (or its accumulator), dK, dV, the log2-sum-exp and D"));
}

TEST(MatmulForms, AttentionBackwardSplitNeedsStepsOf64OrTheBlock) {
  absl::StatusOr<Kernel> kernel = samples::attention_bwd_kernel({.block = 128, .step = 32, .split = true});
  EXPECT_EQ(kernel.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(kernel.status().message(), HasSubstr("split needs the step (32) to be 64 or the block (128)"));
}

TEST(MatmulForms, AttentionBackwardPlanNeedsEveryBufferAndAShape) {
  absl::StatusOr<samples::AttnBwdKernels> kernels = samples::compile_attention_bwd(host(), {.split = true});
  ASSERT_TRUE(kernels.ok()) << kernels.status();
  absl::StatusOr<Buffer> b = host().allocate(64 * 64 * 2);
  ASSERT_TRUE(b.ok()) << b.status();
  samples::AttnBwdBuffers io{&*b, &*b, &*b, &*b, &*b, &*b, &*b, &*b, &*b};
  samples::AttnBwdBuffers missing = io;
  missing.dk = nullptr;
  absl::StatusOr<samples::AttnBwdPlan> plan = samples::plan_attention_bwd(host(), *kernels, missing, 1, 64, 1.0f);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(), HasSubstr("needs every buffer: q, k, v, o, lse, dout, dq, dk and dv"));
  plan = samples::plan_attention_bwd(host(), *kernels, io, 1, 0, 1.0f);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(), HasSubstr("1 heads of 0 rows: both must be positive"));
}

}  // namespace
}  // namespace tessel
