// wgmma beyond bf16 and f16 from shared memory: fp8 (e4m3, e5m2, mixed)
// and i8 (into i32) with k32 steps, tf32 with k8 steps (only where the dot
// asks for it), and the register-A form that P @ V of an attention kernel
// takes.
#include <regex>

#include "absl/strings/str_cat.h"
#include "dsl/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ptx_test_util.h"
#include "samples/kernels.h"
#include "tests/matmul_cases.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using samples::GemmConfig;

CompileOptions warps(int n) {
  CompileOptions o;
  o.num_warps = n;
  return o;
}

absl::StatusOr<DeviceCode> gemm_ptx(const GemmConfig& g, int nw = 8) {
  absl::StatusOr<Kernel> kernel = samples::gemm_kernel(g);
  if (!kernel.ok()) return kernel.status();
  return compile_ptx(*kernel, warps(nw));
}

constexpr GemmConfig kFp8 = {
    .bm = 128, .bn = 256, .bk = 128, .in = f8e4m3, .out = bf16, .stages = 3, .scaled = true, .fast_accum = true};

TEST(WgmmaForms, Fp8GemmStepsK32WithoutTransposeBits) {
  for (auto [a, b, types] : {std::tuple{f8e4m3, f8e4m3, "e4m3.e4m3"},
                             {f8e4m3, f8e5m2, "e4m3.e5m2"},
                             {f8e5m2, f8e4m3, "e5m2.e4m3"},
                             {f8e5m2, f8e5m2, "e5m2.e5m2"}}) {
    SCOPED_TRACE(types);
    GemmConfig g = kFp8;
    g.in = a;
    g.in_b = b;
    absl::StatusOr<DeviceCode> code = gemm_ptx(g);
    ASSERT_TRUE(code.ok()) << code.status();
    const std::string& ptx = code->binary;
    EXPECT_THAT(ptx, HasSubstr(absl::StrCat("wgmma.mma_async.sync.aligned.m64n256k32.f32.", types)));
    // Four k32 steps of 32 bytes each per 128-byte row, no transpose immediates.
    EXPECT_TRUE(
        std::regex_search(ptx, std::regex(R"(k32\.f32\.e[45]m[23]\.e[45]m[23] \{[^}]*\}, %rd\d+, %rd\d+, p, 1, 1;)")))
        << ptx.substr(ptx.find("wgmma.mma_async"), 300);
    EXPECT_THAT(ptx, Not(HasSubstr("k16.f32")));
    if (a == f8e4m3 && b == f8e4m3) expect_ptxas_clean(ptx);
  }
}

// Without fast accumulation each K step's products start from zero in a
// second accumulator, which one f32 add an element moves into the first:
// both stay in wgmma's registers (128 x 128 over 256 threads, 64 adds a
// thread each step), however wide the tile. Carried by the loop as an add's
// result, the 128 x 256 accumulator once went to shared memory (673 KB).
TEST(WgmmaForms, Fp8StepsAddedInF32KeepBothAccumulatorsInRegisters) {
  GemmConfig g = kFp8;
  g.bn = 128;
  g.stages = 4;
  g.fast_accum = false;
  absl::StatusOr<DeviceCode> code = gemm_ptx(g);
  ASSERT_TRUE(code.ok()) << code.status();
  const std::string& ptx = code->binary;
  EXPECT_EQ(count(ptx, "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"), 4);
  EXPECT_EQ(count(ptx, "add.rn.f32"), 64);
  EXPECT_THAT(ptx, Not(HasSubstr("st.shared.f32")));
  expect_ptxas_clean(ptx);
  g.bn = 256;
  g.stages = 3;
  absl::StatusOr<DeviceCode> wide = gemm_ptx(g);
  ASSERT_TRUE(wide.ok()) << wide.status();
  EXPECT_EQ(count(wide->binary, "add.rn.f32"), 128);
  EXPECT_THAT(wide->binary, Not(HasSubstr("st.shared.f32")));
}

// Block scales: each K step's product, from zero in a second accumulator,
// goes into the first by one fused multiply-add an element with its row's
// and column's scales; both accumulators stay in registers (64 x 128 a
// warpgroup: 64 registers a thread each), and the tile takes one of B's
// scales a step; on two warpgroups, and warp-specialized with both
// consumers on every tile (which load their scales themselves), and
// grouped (B's scales at the tile's group). (Wider
// tiles spill: two 64 x 192 accumulators and a scale a column are more
// than a consumer's 240 registers.)
TEST(WgmmaForms, BlockScaledStepsTakeOneFmaAnElement) {
  const GemmConfig plain = {
      .bm = 128, .bn = 128, .bk = 128, .in = f8e4m3, .out = bf16, .stages = 4, .block_scales = true};
  GemmConfig coop = plain;
  coop.warp_specialize = coop.cooperative = true;
  GemmConfig grouped = coop;
  grouped.grouped = true;
  for (auto [g, nw] : {std::pair{plain, 8}, {coop, 12}, {grouped, 12}}) {
    SCOPED_TRACE(nw);
    absl::StatusOr<DeviceCode> code = gemm_ptx(g, nw);
    ASSERT_TRUE(code.ok()) << code.status();
    const std::string& ptx = code->binary;
    EXPECT_EQ(count(ptx, "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3"), 4);
    EXPECT_EQ(count(ptx, "fma.rn.f32"), 64);
    EXPECT_THAT(ptx, Not(HasSubstr("st.shared.f32")));
    expect_ptxas_clean(ptx);
  }
}

// A grouped GEMM reads B's boxes from a 3-D map at its tile's group, which
// it loads from memory, so its ring runs on into the next tile, and a
// warp-specialized producer loads the next tile's group itself. Neither
// form spills.
TEST(WgmmaForms, GroupedGemmReadsEachGroupsBoxesOfA3DMap) {
  const GemmConfig plain = {.bm = 128, .bn = 256, .out = bf16, .stages = 3, .grouped = true, .row_scales = true};
  GemmConfig ws = {.bm = 128, .bn = 192, .bk = 128, .in = f8e4m3, .out = bf16, .stages = 4, .scaled = true};
  ws.warp_specialize = ws.cooperative = ws.grouped = true;
  for (auto [g, nw] : {std::pair{plain, 8}, std::pair{ws, 12}}) {
    SCOPED_TRACE(nw);
    absl::StatusOr<DeviceCode> code = gemm_ptx(g, nw);
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_GE(count(code->binary, "cp.async.bulk.tensor.3d.shared::cluster"), 1);
    EXPECT_GE(count(code->binary, "cp.async.bulk.tensor.2d.shared::cluster"), 1);
    expect_ptxas_clean(code->binary);
  }
}

// The SwiGLU epilogue: B's gate and up rows come in one 4-D box a stage,
// and the epilogue splits the accumulator in its registers (each half a
// fragment of its own, which stmatrix stores): it takes no more shared
// memory than the plain grouped GEMM's, whose C tile is twice as wide, and
// nothing spills; bf16 operands and C, and fp8 ones (C quantized by its
// scale).
TEST(WgmmaForms, SwigluEpilogueSplitsTheAccumulatorInItsRegisters) {
  GemmConfig bf = {.bm = 128, .bn = 192, .out = bf16, .stages = 4};
  bf.warp_specialize = bf.cooperative = bf.grouped = true;
  GemmConfig fp8 = bf;
  fp8.bk = 128;
  fp8.in = fp8.out = f8e4m3;
  fp8.scaled = true;
  for (const GemmConfig& g : {bf, fp8}) {
    SCOPED_TRACE(g.in.name());
    GemmConfig fused = g;
    fused.swiglu = true;
    absl::StatusOr<DeviceCode> plain = gemm_ptx(g, 12), code = gemm_ptx(fused, 12);
    ASSERT_TRUE(plain.ok()) << plain.status();
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_GE(count(code->binary, "cp.async.bulk.tensor.4d.shared::cluster"), 1);
    EXPECT_LE(code->shared_bytes, plain->shared_bytes);
    EXPECT_THAT(code->binary, HasSubstr("ex2.approx"));
    if (g.out == bf16) {
      EXPECT_THAT(code->binary, HasSubstr("stmatrix.sync.aligned.m8n8.x4.shared.b16"));
    }
    expect_ptxas_clean(code->binary);
  }
}

// i8 operands sum exactly into i32 accumulators on wgmma's integer form
// (k32 steps, no negating or transposing immediates), kept in registers as
// f32 ones are: C as the exact i32 sum, or scaled in f32 to bf16.
TEST(WgmmaForms, I8GemmSumsIntoI32OnTheTensorCores) {
  GemmConfig g = {.bm = 128, .bn = 256, .bk = 128, .in = i8, .out = i32, .stages = 3};
  absl::StatusOr<DeviceCode> code = gemm_ptx(g);
  ASSERT_TRUE(code.ok()) << code.status();
  const std::string& ptx = code->binary;
  EXPECT_EQ(count(ptx, "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8"), 4);
  EXPECT_TRUE(std::regex_search(ptx, std::regex(R"(k32\.s32\.s8\.s8 \{[^}]*\}, %rd\d+, %rd\d+, p;)")))
      << ptx.substr(ptx.find("wgmma.mma_async"), 300);
  EXPECT_THAT(ptx, Not(HasSubstr("st.shared.u32")));
  expect_ptxas_clean(ptx);
  g.out = bf16;
  g.scaled = true;
  g.bn = 128;
  g.stages = 4;
  absl::StatusOr<DeviceCode> scaled = gemm_ptx(g);
  ASSERT_TRUE(scaled.ok()) << scaled.status();
  EXPECT_EQ(count(scaled->binary, "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8"), 4);
  EXPECT_THAT(scaled->binary, HasSubstr("cvt.rn.f32.s32"));
  expect_ptxas_clean(scaled->binary);
}

// Integer wgmma has no m64n40 form (past 24 columns, multiples of 16 only):
// such a tile's product is the loop over shared memory, not a bad instruction.
TEST(WgmmaForms, I8WidthsAreTheIntegerForms) {
  for (auto [bn, tensor_cores] : {std::pair{48, true}, {40, false}, {24, true}}) {
    SCOPED_TRACE(bn);
    GemmConfig g = {.bm = 64, .bn = bn, .bk = 128, .in = i8, .out = i32, .stages = 2};
    absl::StatusOr<DeviceCode> code = gemm_ptx(g, 4);
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(code->binary.find(absl::StrCat("m64n", bn, "k32.s32.s8.s8")) != std::string::npos, tensor_cores);
    EXPECT_TRUE(ptxas_accepts_if_present(code->binary));
  }
}

TEST(WgmmaForms, I8GemmsAreRefusedWhatTheyCannotDo) {
  absl::StatusOr<DeviceCode> mn = gemm_ptx({.bk = 128, .in = i8, .out = i32, .b_nk = false});
  EXPECT_EQ(mn.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(mn.status().message(), HasSubstr("multiplies i8 by i8 on the tensor cores only with K-major operands"));
  absl::StatusOr<Kernel> split = samples::gemm_kernel({.in = i8, .out = f32, .split_k = 2});
  EXPECT_THAT(split.status().message(), HasSubstr("i8 operands (both A and B) sum into i32 and take neither split_k"));
  absl::StatusOr<Kernel> scaled = samples::gemm_kernel({.in = i8, .out = i32, .scaled = true});
  EXPECT_THAT(scaled.status().message(), HasSubstr("an i32 C is the exact sum of i8 operands' products"));
  absl::StatusOr<Kernel> i32_of_bf16 = samples::gemm_kernel({.in = bf16, .out = i32});
  EXPECT_THAT(i32_of_bf16.status().message(), HasSubstr("got bf16 operands"));
}

TEST(WgmmaForms, Fp8BoxesTakeAStageOfTheSameBytesAsBf16) {
  absl::StatusOr<DeviceCode> fp8 = gemm_ptx(kFp8);
  absl::StatusOr<DeviceCode> bf = gemm_ptx({.bm = 128, .bn = 256, .bk = 64, .out = bf16, .stages = 3});
  ASSERT_TRUE(fp8.ok()) << fp8.status();
  ASSERT_TRUE(bf.ok()) << bf.status();
  EXPECT_EQ(fp8->shared_bytes, bf->shared_bytes);
}

TEST(WgmmaForms, Fp8MnMajorOperandIsAClearError) {
  GemmConfig g = kFp8;
  g.b_nk = false;
  absl::Status s = gemm_ptx(g).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("multiplies f8e4m3 by f8e4m3 on the tensor cores only with K-major operands"));
  EXPECT_THAT(s.message(), HasSubstr("gemm.h:"));  // the dot's line
  // The host runs it (its loop reads any layout).
  absl::StatusOr<Kernel> kernel = samples::gemm_kernel(g);
  ASSERT_TRUE(kernel.ok());
  CompileOptions host;
  host.arch = "host";
  EXPECT_TRUE(compile(*kernel, host).ok());
}

TEST(WgmmaForms, Tf32OnlyWhereTheDotAsksForIt) {
  absl::StatusOr<DeviceCode> tf32 = gemm_ptx({.bm = 128, .bn = 128, .bk = 32, .in = f32, .stages = 3, .tf32 = true});
  ASSERT_TRUE(tf32.ok()) << tf32.status();
  EXPECT_THAT(tf32->binary, HasSubstr("wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32"));
  expect_ptxas_clean(tf32->binary);
  // f32 without the precision: exact products, not on the tensor cores.
  absl::StatusOr<DeviceCode> exact = gemm_ptx({.bm = 64, .bn = 64, .bk = 32, .in = f32, .stages = 1}, 4);
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_THAT(exact->binary, Not(HasSubstr("wgmma.mma_async")));
}

TEST(WgmmaForms, Tf32PrecisionIsForF32Operands) {
  KernelBuilder k("tf32_bf16");
  Value a = k.zeros({64, 16}, bf16), b = k.zeros({16, 64}, bf16);
  dot(a, b, k.zeros({64, 64}, f32), Precision::kTf32);
  EXPECT_THAT(k.build().status().message(),
              HasSubstr("dot: tf32 precision multiplies f32 operands, got bf16 (other dtypes take Precision::kIeee)"));
}

TEST(WgmmaForms, MixedDtypesOtherThanFp8AreRefused) {
  KernelBuilder k("mixed");
  dot(k.zeros({16, 16}, bf16), k.zeros({16, 16}, f8e4m3), k.zeros({16, 16}, f32));
  EXPECT_THAT(k.build().status().message(),
              HasSubstr("dot: a and b must have one dtype (or be two fp8 kinds), got bf16 and f8e4m3"));
}

TEST(WgmmaForms, AttentionTakesPFromRegisters) {
  absl::StatusOr<Kernel> kernel = samples::attention_kernel({});
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  absl::StatusOr<DeviceCode> code = compile_ptx(*kernel, warps(8));
  ASSERT_TRUE(code.ok()) << code.status();
  const std::string& ptx = code->binary;
  // S = Q K^T: both operands descriptors, K read K-major; each warpgroup
  // computes 64 of the 128 rows.
  EXPECT_TRUE(
      std::regex_search(ptx, std::regex(R"(m64n128k16\.f32\.bf16\.bf16 \{[^}]*\}, %rd\d+, %rd\d+, p, 1, 1, 0, 0;)")));
  // P V: A as four b32 registers, V ([k, n] as stored) through the transpose bit.
  EXPECT_TRUE(std::regex_search(
      ptx, std::regex(R"(m64n64k16\.f32\.bf16\.bf16 \{[^}]*\}, \{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+, p, 1, 1, 1;)")));
  expect_ptxas_clean(ptx);
}

// The backward pass's seven products per pair of blocks: S^T, dP^T, S and
// dP from two descriptors; dV, dK and dQ with P^T, dS^T and dS from
// registers (64 x 64 blocks: four k16 steps each). Nothing else touches
// shared memory but the rows' statistics, and at d = 64 ptxas needs no spill.
TEST(WgmmaForms, AttentionBackwardTakesProbabilitiesFromRegisters) {
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal);
    absl::StatusOr<Kernel> kernel = samples::attention_bwd_kernel({.causal = causal});
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    absl::StatusOr<DeviceCode> code = compile_ptx(*kernel, warps(4));
    ASSERT_TRUE(code.ok()) << code.status();
    const std::string& ptx = code->binary;
    auto count = [&](const std::string& pattern) { return count_matches(ptx, pattern); };
    EXPECT_EQ(count(R"(m64n64k16\.f32\.bf16\.bf16 \{[^}]*\}, \{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+)"), 3 * 4);
    EXPECT_EQ(count(R"(m64n64k16\.f32\.bf16\.bf16 \{[^}]*\}, %rd\d+, %rd\d+)"), 4 * 4);
    // The rows' log2-sum-exp and D come with Q and dO through the pipeline
    // and each slot reads its column's from the copy engine's buffer: 16
    // values of each a thread in the first loop, 2 in the second. No copy
    // of a broadcast tile, no load from global memory.
    EXPECT_EQ(count(R"(ld\.shared\.f32)"), 2 * 16 + 2 * 2);
    EXPECT_EQ(count(R"(ld\.shared)"), 2 * 16 + 2 * 2);
    EXPECT_EQ(ptx.find("st.shared"), std::string::npos);
    EXPECT_EQ(ptx.find("ld.global"), std::string::npos);
    expect_ptxas_clean(ptx);
  }
}

// With the split, five products per pair of blocks: S^T, dP^T and dS K
// from descriptors (dS staged from dS^T's registers by stmatrix, read with
// both transpose bits), dV and dK from registers. dS K is added into dQ's
// accumulator by the copy engine each step (two 128-byte panels of f32),
// from a staging tile held across steps: the program waits for the last
// step's copy to have read it before writing it, not after each copy.
TEST(WgmmaForms, AttentionBackwardSplitStagesDsAndAddsDqByTheCopyEngine) {
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal);
    absl::StatusOr<Kernel> kernel = samples::attention_bwd_kernel({.causal = causal, .split = true});
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    absl::StatusOr<DeviceCode> code = compile_ptx(*kernel, warps(4));
    ASSERT_TRUE(code.ok()) << code.status();
    const std::string& ptx = code->binary;
    auto count = [&](const std::string& pattern) { return count_matches(ptx, pattern); };
    EXPECT_EQ(count(R"(m64n64k16\.f32\.bf16\.bf16 \{[^}]*\}, \{%r\d+, %r\d+, %r\d+, %r\d+\}, %rd\d+)"), 2 * 4);
    EXPECT_EQ(count(R"(m64n64k16\.f32\.bf16\.bf16 \{[^}]*\}, %rd\d+, %rd\d+, p, 1, 1, 0, 0;)"), 2 * 4);
    EXPECT_EQ(count(R"(m64n64k16\.f32\.bf16\.bf16 \{[^}]*\}, %rd\d+, %rd\d+, p, 1, 1, 1, 1;)"), 4);
    EXPECT_EQ(count("stmatrix"), 4 + 2 * 4);  // dS^T, then dK's and dV's tiles
    EXPECT_EQ(count(R"(cp\.reduce\.async\.bulk\.tensor\.3d\.global\.shared::cta\.add)"), 2);
    EXPECT_LT(ptx.find("cp.async.bulk.wait_group.read"), ptx.find("cp.reduce"));
    expect_ptxas_clean(ptx);
  }
}

// Grouped heads keep one pipelined loop over the group's query steps (and
// in the seven-product form one dQ loop, in a pass of its own): as many
// products as without groups, none serialized, and no more spilled than
// without groups (these 128-row blocks hold 255 registers either way).
TEST(WgmmaForms, GroupedAttentionBackwardKeepsOneLoopForTheGroup) {
  if (!have_ptxas()) GTEST_SKIP() << "ptxas not found";
  auto spilled = [](const std::string& log) {
    std::smatch m;
    EXPECT_TRUE(std::regex_search(log, m, std::regex(R"((\d+) bytes spill stores)"))) << log;
    return m.empty() ? -1 : std::stoi(m[1]);
  };
  for (samples::AttnBwdConfig c : {samples::attention_bwd_config(64), samples::attention_bwd_config(128),
                                   samples::attention_bwd_config(128, true, 16384)}) {
    SCOPED_TRACE(testing::Message() << "d " << c.d << ", split " << c.split);
    std::vector<std::string> ptx, log;
    for (int64_t group : {1, 4}) {
      c.group = group;
      absl::StatusOr<Kernel> kernel = samples::attention_bwd_kernel(c);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      absl::StatusOr<DeviceCode> code = compile_ptx(*kernel, warps(samples::attention_bwd_warps(c)));
      ASSERT_TRUE(code.ok()) << code.status();
      ptx.push_back(code->binary);
      auto [rc, text] = ptxas_verbose(code->binary);
      EXPECT_EQ(rc, 0) << text;
      for (const char* bad : {"C7515", "C7517", "C7519", "C7508"}) EXPECT_EQ(text.find(bad), std::string::npos) << text;
      log.push_back(text);
    }
    EXPECT_GT(count_matches(ptx[0], "wgmma.mma_async"), 0);
    EXPECT_EQ(count_matches(ptx[1], "wgmma.mma_async"), count_matches(ptx[0], "wgmma.mma_async"));
    EXPECT_LE(spilled(log[1]), spilled(log[0]) + 16);
  }
}

// Where holding every store's tile does not fit (the split at d = 64 with
// 128-row blocks and three stages: 234 480 bytes), the streamed store's is
// still held (dQ's adds, every step), and dK's and dV's, once a block, wait
// for their copies.
TEST(WgmmaForms, StreamedStoreKeepsItsTileWhereNotAllFit) {
  const samples::AttnBwdConfig c = samples::attention_bwd_config(64);
  ASSERT_TRUE(c.split);
  absl::StatusOr<Kernel> kernel = samples::attention_bwd_kernel(c);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  absl::StatusOr<DeviceCode> code = compile_ptx(*kernel, warps(samples::attention_bwd_warps(c)));
  ASSERT_TRUE(code.ok()) << code.status();
  const std::string& ptx = code->binary;
  const size_t reduce = ptx.find("cp.reduce"),
               store = ptx.find("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group");
  ASSERT_NE(reduce, std::string::npos);
  ASSERT_NE(store, std::string::npos);
  EXPECT_LT(ptx.find("cp.async.bulk.wait_group.read"), reduce);
  EXPECT_NE(ptx.find("cp.async.bulk.wait_group.read 0", store), std::string::npos);
  EXPECT_TRUE(ptxas_accepts_if_present(ptx));
}

// An operand the program computed (the transpose of a product's result,
// or the result itself as b) is staged for the next product: written to a
// swizzled tile by stmatrix, then a proxy fence and a barrier, then wgmma
// reads it through a descriptor with the transpose bits its orientation
// needs. Nothing reads shared memory but the tensor cores, and no 16-bit
// store conflicts on the banks.
TEST(WgmmaForms, ComputedOperandsAreStagedForTheTensorCores) {
  struct Want {
    matmul_cases::Computed form;
    const char* bits;  // the second product's transpose bits (a's, b's)
    int others;        // other products with those bits (the first's)
  };
  for (const Want& w :
       {Want{matmul_cases::Computed::kTransposedA, "1, 1", 0}, Want{matmul_cases::Computed::kB, "0, 1", 0},
        Want{matmul_cases::Computed::kTransposedB, "0, 0", 4}}) {
    for (int64_t r : {64, 128}) {
      SCOPED_TRACE(testing::Message() << "form " << static_cast<int>(w.form) << " r " << r);
      const matmul_cases::StagedProduct p{w.form, r};
      absl::StatusOr<Kernel> kernel = matmul_cases::staged_product_kernel(p);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      absl::StatusOr<DeviceCode> code = compile_ptx(*kernel, warps(p.warps()));
      ASSERT_TRUE(code.ok()) << code.status();
      const std::string& ptx = code->binary;
      auto count = [&](const std::string& pattern) { return count_matches(ptx, pattern); };
      // X's r / 2 slots a thread, 8 an instruction; then the staged product's r / 16 k steps.
      EXPECT_EQ(count("stmatrix"), r / 16);
      EXPECT_EQ(
          count(R"(stmatrix[^;]*;(\s*//[^\n]*)*\s*fence\.proxy\.async\.shared::cta;(\s*//[^\n]*)*\s*bar\.sync\s+0;)"),
          1);
      EXPECT_EQ(count(absl::StrCat(R"(wgmma\.mma_async[^;]*, p, 1, 1, )", w.bits, ";")), r / 16 + w.others);
      EXPECT_EQ(ptx.find("ld.shared"), std::string::npos);
      EXPECT_EQ(ptx.find("st.shared.b16"), std::string::npos);
      expect_ptxas_clean(ptx);
    }
  }
}

// A staged product's tile is free once every warpgroup's product is done:
// outside a pipelined loop's body (which ends each iteration at a barrier)
// two warpgroups meet at a barrier after their waits, so that a loop
// coming round cannot write the tile under the other's product; one
// warpgroup needs none.
TEST(WgmmaForms, StagedTileIsFreeOnceEveryWarpgroupIsDone) {
  for (int64_t r : {64, 128}) {
    SCOPED_TRACE(r);
    KernelBuilder k("staged_once");
    Value a = k.tensor_map(bf16, {r, 64}, "a", Swizzle::k128B);
    Value c = k.tensor_map(bf16, {r, 64}, "c", Swizzle::k128B);
    Value y = k.tensor_map(f32, {r, 64}, "y");
    Value row = k.program_id() * static_cast<int32_t>(r);
    Value x = cast(dot(tma_load(a, {row, 0}), trans(tma_load(c, {row, 0})), k.zeros({r, r}, f32)), bf16);
    tma_store(y, {row, 0}, dot(trans(x), tma_load(c, {row, 0}), k.zeros({r, 64}, f32)));
    absl::StatusOr<Kernel> kernel = k.build();
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    absl::StatusOr<DeviceCode> code = compile_ptx(*kernel, warps(static_cast<int>(r / 16)));
    ASSERT_TRUE(code.ok()) << code.status();
    const std::string& ptx = code->binary;
    // The staged product's wait (the second product's), then what follows it.
    const size_t staged = ptx.find("wgmma.wait_group.sync.aligned 0;", ptx.find("fence.proxy.async.shared::cta"));
    ASSERT_NE(staged, std::string::npos);
    const std::string next = ptx.substr(staged, ptx.find("st.shared", staged) - staged);
    // (One barrier either way: the store's staging reuses the memory.)
    EXPECT_EQ(count(next, "bar.sync"), r == 128 ? 2 : 1) << next;
    expect_ptxas_clean(ptx);
  }
}

// A 64-row product on two warpgroups splits its columns: each warpgroup
// issues m64n32 over its half of b (here b is K-major for both products,
// the second's staged), and the accumulators cover the tile once.
TEST(WgmmaForms, SixtyFourRowProductOnTwoWarpgroupsSplitsItsColumns) {
  const matmul_cases::StagedProduct p{matmul_cases::Computed::kTransposedB, 64, 256};
  absl::StatusOr<Kernel> kernel = matmul_cases::staged_product_kernel(p);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  absl::StatusOr<DeviceCode> code = compile_ptx(*kernel, warps(p.warps()));
  ASSERT_TRUE(code.ok()) << code.status();
  const std::string& ptx = code->binary;
  EXPECT_EQ(count(ptx, "wgmma.mma_async.sync.aligned.m64n32k16"), 2 * 4);
  EXPECT_EQ(ptx.find("m64n64k16"), std::string::npos);
  expect_ptxas_clean(ptx);
}

// The online softmax keeps S, P, the running maximum and sum and the output
// in the products' registers: no shared memory but the TMA boxes (read by
// wgmma) and the output's staging (written by stmatrix), whatever the head
// dimension, mask and schedule.
TEST(WgmmaForms, AttentionKeepsItsSoftmaxInRegisters) {
  for (samples::AttnConfig c :
       {samples::AttnConfig{}, samples::AttnConfig{.d = 128, .bn = 64, .causal = true},
        samples::AttnConfig{.bm = 64, .warp_specialize = true}, samples::AttnConfig{.stages = 3, .warps = 4},
        samples::attention_config(64), samples::attention_config(128)}) {
    SCOPED_TRACE(testing::Message() << "d " << c.d << " causal " << c.causal << " ws " << c.warp_specialize);
    absl::StatusOr<Kernel> kernel = samples::attention_kernel(c);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    absl::StatusOr<DeviceCode> code = compile_ptx(*kernel, warps(samples::attention_warps(c)));
    ASSERT_TRUE(code.ok()) << code.status();
    const std::string& ptx = code->binary;
    EXPECT_EQ(ptx.find("ld.shared"), std::string::npos);
    EXPECT_EQ(ptx.find("st.shared"), std::string::npos);
    EXPECT_NE(ptx.find("stmatrix"), std::string::npos);
    EXPECT_NE(ptx.find("shfl.sync.bfly"), std::string::npos);  // the rows' maxima and sums
    // P rounded two values at a time, its exponentials without subnormals.
    EXPECT_NE(ptx.find("cvt.rn.bf16x2.f32"), std::string::npos);
    EXPECT_EQ(ptx.find("cvt.rn.bf16.f32"), std::string::npos);
    EXPECT_NE(ptx.find("ex2.approx.ftz.f32"), std::string::npos);
    expect_ptxas_clean(ptx);
  }
}

}  // namespace
}  // namespace tessel
