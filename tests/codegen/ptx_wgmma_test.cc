// dot on Hopper's tensor cores: which dots take wgmma, the accumulator's
// fragment layout and descriptors, and the PTX of a GEMM main loop, which
// ptxas must take without serializing wgmma or spilling.
#include <algorithm>
#include <set>
#include <string_view>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "base/tma_rules.h"
#include "codegen/nvptx/wgmma_fragment.h"
#include "dsl/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ptx_test_util.h"
#include "samples/kernels.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using samples::GemmConfig;

Kernel gemm(const GemmConfig& g) { return *samples::gemm_kernel(g); }

CompileOptions warps(int n) {
  CompileOptions o;
  o.num_warps = n;
  return o;
}

TEST(Wgmma, AccumulatorLayoutCoversTheTileOnce) {
  using codegen::nvptx::wgmma_accumulator_element;
  for (auto [m, n, groups, cols] : {std::tuple{64, 8, 1, 1},
                                    {128, 128, 2, 1},
                                    {128, 256, 1, 1},
                                    {256, 64, 2, 1},
                                    {64, 128, 2, 2},
                                    {128, 64, 4, 2}}) {
    const int64_t threads = 128 * groups, slots = m / 64 / (groups / cols) * (n / cols / 2);
    std::set<int64_t> seen;
    for (int64_t t = 0; t < threads; ++t) {
      for (int64_t s = 0; s < slots; ++s) seen.insert(wgmma_accumulator_element(n, groups, t, s, cols));
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), m * n) << m << "x" << n << " in " << cols << " column groups";
    EXPECT_EQ(*seen.rbegin(), m * n - 1);
  }
  // The m64nNk16 fragment: lane 5 of warp 1 holds row 16 + 1 (and + 8), columns 2, 3 (and + 8).
  EXPECT_EQ(wgmma_accumulator_element(16, 1, 32 + 5, 0), 17 * 16 + 2);
  EXPECT_EQ(wgmma_accumulator_element(16, 1, 32 + 5, 1), 17 * 16 + 3);
  EXPECT_EQ(wgmma_accumulator_element(16, 1, 32 + 5, 2), 25 * 16 + 2);
  EXPECT_EQ(wgmma_accumulator_element(16, 1, 32 + 5, 4), 17 * 16 + 10);
  // With two warpgroups, the second takes the second 64-row block; in two
  // column groups of a 64-row product, the second half of its columns.
  EXPECT_EQ(wgmma_accumulator_element(8, 2, 128, 0), 64 * 8);
  EXPECT_EQ(wgmma_accumulator_element(128, 2, 128, 0, 2), 64);
}

TEST(Wgmma, DescriptorFields) {
  // 128B swizzle: mode 1 in bits 62-63, 8 rows of 128 bytes (1024 >> 4) in 32-45, LBO 1.
  EXPECT_EQ(codegen::nvptx::wgmma_descriptor(0x400, Swizzle::k128B), 0x4000004000010040ull);
  EXPECT_EQ(codegen::nvptx::wgmma_descriptor(0, Swizzle::k64B) >> 62, 2u);
  EXPECT_EQ(codegen::nvptx::wgmma_descriptor(0, Swizzle::k64B) >> 32 & 0x3FFF, 512u >> 4);
  EXPECT_EQ(codegen::nvptx::wgmma_descriptor(0, Swizzle::k32B) >> 62, 3u);
  // An MN-major operand's panels (64 k rows of 128 bytes) are the leading byte offset apart.
  EXPECT_EQ(codegen::nvptx::wgmma_descriptor(0, Swizzle::k128B, 8192) >> 16 & 0x3FFF, 8192u >> 4);
}

TEST(Wgmma, SwizzledOffsetsPermuteChunksWithinRows) {
  // Row 1 of a 128B-swizzled tile: its chunk 0 sits where chunk 1 would.
  EXPECT_EQ(tma::swizzled_offset(128, Swizzle::k128B), 128 + 16);
  EXPECT_EQ(tma::swizzled_offset(7 * 128 + 3 * 16 + 5, Swizzle::k128B), 7 * 128 + (3 ^ 7) * 16 + 5);
  EXPECT_EQ(tma::swizzled_offset(8 * 128, Swizzle::k128B), 8 * 128);  // the pattern starts over
  EXPECT_EQ(tma::swizzled_offset(3 * 128 + 16, Swizzle::k64B), 3 * 128 + (1 ^ 3) * 16);
  EXPECT_EQ(tma::swizzled_offset(3 * 128 + 16, Swizzle::k32B), 3 * 128 + (1 ^ 1) * 16);
  EXPECT_EQ(tma::swizzled_offset(3 * 128 + 16, Swizzle::kNone), 3 * 128 + 16);
}

TEST(Wgmma, GemmMainLoopRunsOnTensorCores) {
  for (int nw : {4, 8}) {
    SCOPED_TRACE(nw);
    absl::StatusOr<DeviceCode> code = compile_ptx(gemm({}), warps(nw));
    ASSERT_TRUE(code.ok()) << code.status();
    const std::string& ptx = code->binary;
    EXPECT_THAT(ptx, HasSubstr("wgmma.fence.sync.aligned"));
    EXPECT_THAT(ptx, HasSubstr("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"));
    EXPECT_THAT(ptx, HasSubstr("wgmma.commit_group.sync.aligned"));
    // Pipelined (3 stages by default): each K step leaves its product in
    // flight, and the loop's end waits for the last.
    EXPECT_THAT(ptx, HasSubstr("wgmma.wait_group.sync.aligned 1"));
    EXPECT_THAT(ptx, HasSubstr("wgmma.wait_group.sync.aligned 0"));
    EXPECT_THAT(ptx, HasSubstr("mbarrier.try_wait.parity"));
    // The operands are read in place: no plain copy of a swizzled box.
    EXPECT_THAT(ptx, Not(HasSubstr("fma.rn.f32")));
    expect_ptxas_clean(ptx);
  }
}

TEST(Wgmma, F16AndOtherTileShapes) {
  for (auto [g, nw] : {std::pair{GemmConfig{.bm = 64, .bn = 64, .bk = 64, .in = f16}, 4},
                       std::pair{GemmConfig{.bm = 128, .bn = 256}, 8},
                       std::pair{GemmConfig{.bm = 128, .bn = 64, .bk = 32, .swizzle = Swizzle::k64B}, 4}}) {
    SCOPED_TRACE(g.bn);
    absl::StatusOr<DeviceCode> code = compile_ptx(gemm(g), warps(nw));
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_THAT(code->binary, HasSubstr(absl::StrCat("m64n", g.bn, "k16.f32.", g.in == f16 ? "f16.f16" : "bf16.bf16")));
    expect_ptxas_clean(code->binary);
  }
}

// A GEMM configuration, its warps, and the wgmma shape its PTX issues.
struct Form {
  GemmConfig g;
  int warps;
  const char* shape;
};

// Tile sides that are not powers of two: 192 columns take m64n192; 192
// rows take a warpgroup each 64 of them on twelve warps, and on eight each
// warpgroup takes every row and half the columns.
TEST(Wgmma, TilesOf192RowsOrColumns) {
  for (const Form& f :
       {Form{{.bm = 128, .bn = 192}, 8, "m64n192k16"}, Form{{.bm = 64, .bn = 192}, 4, "m64n192k16"},
        Form{{.bm = 128, .bn = 192, .b_nk = false}, 8, "m64n192k16"}, Form{{.bm = 192, .bn = 128}, 12, "m64n128k16"},
        Form{{.bm = 192, .bn = 128}, 8, "m64n64k16"}, Form{{.bm = 192, .bn = 192, .a_mk = false}, 12, "m64n192k16"}}) {
    SCOPED_TRACE(absl::StrCat(f.g.bm, "x", f.g.bn, " on ", f.warps, " warps"));
    absl::StatusOr<DeviceCode> code = compile_ptx(gemm(f.g), warps(f.warps));
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_THAT(code->binary, HasSubstr(absl::StrCat(f.shape, ".f32.bf16.bf16")));
    EXPECT_THAT(code->binary, Not(HasSubstr("fma.rn.f32")));
    expect_ptxas_clean(code->binary);
  }
}

// Widths fitted to a shape (samples::fitted_widths): any multiple of 8 up
// to 256 is wgmma's n, with C's box unswizzled where its rows are no whole
// number of swizzle panels (152 bf16 columns), and 256 rows on two
// warpgroups keep up to 160 columns, two row blocks a warpgroup. An
// unswizzled C is staged like a swizzled one, its last 8 columns of a
// width 8 past a multiple of 16 by stmatrix's x2 form.
TEST(Wgmma, TilesFittedToAShape) {
  for (const Form& f :
       {Form{{.bm = 128, .bn = 152, .out = bf16}, 8, "m64n152k16"}, Form{{.bm = 128, .bn = 232}, 8, "m64n232k16"},
        Form{{.bm = 256, .bn = 152, .out = bf16, .stages = 4}, 8, "m64n152k16"},
        Form{{.bm = 256, .bn = 160, .out = bf16, .warp_specialize = true, .cooperative = true}, 12, "m64n160k16"}}) {
    SCOPED_TRACE(absl::StrCat(f.g.bm, "x", f.g.bn, " on ", f.warps, " warps"));
    absl::StatusOr<DeviceCode> code = compile_ptx(gemm(f.g), warps(f.warps));
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_THAT(code->binary, HasSubstr(absl::StrCat(f.shape, ".f32.bf16.bf16")));
    EXPECT_THAT(code->binary, Not(HasSubstr("fma.rn.f32")));
    if (f.g.out == bf16) {
      EXPECT_THAT(code->binary, HasSubstr("stmatrix.sync.aligned.m8n8.x4"));
      EXPECT_THAT(code->binary, Not(HasSubstr("st.shared.b32")));
    }
    if (f.g.out == bf16 && f.g.bn % 16 == 8) {
      EXPECT_THAT(code->binary, HasSubstr("stmatrix.sync.aligned.m8n8.x2"));
    }
    expect_ptxas_clean(code->binary);
  }
}

// Clusters of two programs sharing B's tile (2 x 1) or A's (1 x 2): the
// entry asks for clusters of two, each program loads its half of the shared
// tile into both (multicast), releases stages into both programs' mbarriers
// and meets the other at the start and the end; plain (the stage loaded
// next is two after the one released), ping-pong and cooperative.
TEST(Wgmma, ClustersMulticastTheSharedOperand) {
  for (const Form& f : {Form{{.bm = 128, .bn = 256, .out = bf16, .stages = 4, .cluster_m = 2}, 8, "m64n256k16"},
                        Form{{.bm = 256, .bn = 152, .out = bf16, .stages = 4, .cluster_n = 2}, 8, "m64n152k16"},
                        Form{{.bm = 128, .bn = 128, .out = bf16, .stages = 4, .warp_specialize = true, .cluster_m = 2},
                             12,
                             "m64n128k16"},
                        Form{{.bm = 128,
                        .bn = 256,
                        .out = bf16,
                        .stages = 4,
                        .warp_specialize = true,
                        .cooperative = true,
                        .cluster_m = 2},
                             12,
                             "m64n256k16"}}) {
    SCOPED_TRACE(absl::StrCat(f.g.bm, "x", f.g.bn, " on ", f.warps, " warps"));
    absl::StatusOr<DeviceCode> code = compile_ptx(gemm(f.g), warps(f.warps));
    ASSERT_TRUE(code.ok()) << code.status();
    const std::string& ptx = code->binary;
    EXPECT_THAT(ptx, HasSubstr(absl::StrCat(f.shape, ".f32.bf16.bf16")));
    EXPECT_THAT(ptx, ::testing::ContainsRegex("\\.maxntid [0-9]+, 1, 1\n\\.reqnctapercluster 2, 1, 1\n"));
    EXPECT_THAT(ptx, HasSubstr("mbarrier::complete_tx::bytes.multicast::cluster"));
    EXPECT_THAT(ptx, HasSubstr("mapa.shared::cluster.u32"));
    EXPECT_THAT(ptx, HasSubstr("barrier.cluster.arrive.release.aligned"));
    expect_ptxas_clean(ptx);
  }
}

TEST(Wgmma, StagesArePerLoop) {
  // One stage: loads wait where they are, and each product before the next.
  absl::StatusOr<DeviceCode> one = compile_ptx(gemm({.stages = 1}), warps(8));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_THAT(one->binary, Not(HasSubstr("wgmma.wait_group.sync.aligned 1")));
  absl::StatusOr<DeviceCode> three = compile_ptx(gemm({}), warps(8));
  absl::StatusOr<DeviceCode> four = compile_ptx(gemm({.stages = 4}), warps(8));
  ASSERT_TRUE(three.ok()) << three.status();
  ASSERT_TRUE(four.ok()) << four.status();
  // Each stage holds one A and one B box: 16 KiB + 16 KiB.
  EXPECT_EQ(four->shared_bytes - three->shared_bytes, 32768);
  // Too many for shared memory: the error names the bytes and the way out.
  absl::Status big = compile_ptx(gemm({.bn = 256, .stages = 5}), warps(8)).status();
  EXPECT_EQ(big.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(big.message(), HasSubstr("bytes of shared memory per program; sm_90a allows 232448 (use smaller tiles, "
                                       "or fewer stages in pipelined loops)"));
}

// min_programs = 2 keeps a program within half an SM's shared memory
// (115 712 bytes once the driver's 1 KiB a program is set aside): the
// attention backward at d = 128 with two stages holds its three 16 KiB
// staging tiles across the kernel (150 KiB) alone, and gives that up, and
// each store's staging once the store has read it, to fit twice. ptxas is
// told, and the JIT cache keys it.
TEST(Wgmma, MinProgramsKeepsSharedMemoryWithinTheSmsShare) {
  const Kernel kernel = *samples::attention_bwd_kernel({.d = 128});
  CompileOptions two = warps(4);
  two.min_programs = 2;
  absl::StatusOr<DeviceCode> alone = compile_ptx(kernel, warps(4));
  absl::StatusOr<DeviceCode> shared = compile_ptx(kernel, two);
  ASSERT_TRUE(alone.ok()) << alone.status();
  ASSERT_TRUE(shared.ok()) << shared.status();
  EXPECT_GT(alone->shared_bytes, 115712);
  EXPECT_LE(shared->shared_bytes, 115712);
  EXPECT_THAT(shared->binary, HasSubstr(".minnctapersm 2"));
  EXPECT_THAT(alone->binary, Not(HasSubstr(".minnctapersm")));
  EXPECT_NE(two.cache_key(), warps(4).cache_key());
  // Three stages do not fit twice: the error names the share.
  absl::Status big = compile_ptx(*samples::attention_bwd_kernel({.d = 128, .stages = 3}), two).status();
  EXPECT_EQ(big.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(big.message(),
              HasSubstr("bytes of shared memory per program; sm_90a allows 115712 with 2 programs on an SM"));
  for (int bad : {0, 33}) {
    two.min_programs = bad;
    absl::Status s = compile_ptx(kernel, two).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("min_programs (programs to run at once on one compute unit) must "
                                                    "be 1 to 32, got ",
                                                    bad)));
  }
}

// A held staging tile of an f32 C 256 wide (128 KiB) does not fit beside
// three stages of 128 x 256 x 64 (144 KiB): it stages its eight 32-column
// panels through two 16 KiB buffers instead, each panel's store issued
// before the next is written, the buffer's last store read first; a bf16 C
// does so with stmatrix where a fourth stage leaves no room for the whole
// tile, and each consumer of the warp-specialized kernel with its own
// f32 tile beside 4 stages of 128 x 128 x 64.
TEST(Wgmma, StagingTilesTooLargeGoAPanelAtATime) {
  auto count = [](const std::string& text, const std::string& what) {
    int64_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  const GemmConfig ws = {.bm = 128, .bn = 128, .stages = 4, .warp_specialize = true};
  for (auto [g, panels, nw] : {std::tuple{GemmConfig{.bm = 128, .bn = 256, .stages = 3}, 8, 8},
                               std::tuple{GemmConfig{.bm = 128, .bn = 256, .out = bf16, .stages = 4}, 4, 8},
                               std::tuple{GemmConfig{.bm = 128, .bn = 256, .stages = 3, .split_k = 2}, 8, 8},
                               std::tuple{ws, 4, 12}}) {
    SCOPED_TRACE(absl::StrCat(g.out.name(), " ", g.stages, " stages, ", nw, " warps"));
    absl::StatusOr<DeviceCode> code = compile_ptx(gemm(g), warps(nw));
    ASSERT_TRUE(code.ok()) << code.status();
    const std::string& ptx = code->binary;
    const int64_t panel_bytes = 128 * 128;  // 128 rows of a 128-byte swizzle
    const int64_t ring = g.stages * (g.bm + g.bn) * g.bk * 2, staging = (nw == 12 ? 2 : 1) * 2 * panel_bytes;
    EXPECT_GE(code->shared_bytes, ring + staging);
    EXPECT_LT(code->shared_bytes, ring + staging + panel_bytes);
    EXPECT_EQ(count(ptx, g.split_k > 1 ? "cp.reduce.async.bulk.tensor.2d" : "cp.async.bulk.tensor.2d.global.shared"),
              panels);
    EXPECT_EQ(count(ptx, "cp.async.bulk.commit_group"), panels);
    EXPECT_GE(count(ptx, "cp.async.bulk.wait_group.read 1"), panels - 1);
    EXPECT_EQ(count(ptx, "stmatrix.sync.aligned.m8n8.x4.shared.b16") > 0, g.out == bf16);
    // Lowered again after the whole tiles did not fit: still every thread.
    EXPECT_THAT(ptx, HasSubstr(absl::StrCat(".maxntid ", 32 * nw, ",")));
    expect_ptxas_clean(ptx);
  }
  // Where the whole tile fits, it is staged whole: one commit for its panels.
  absl::StatusOr<DeviceCode> whole = compile_ptx(gemm({.bm = 128, .bn = 256, .out = bf16, .stages = 3}), warps(8));
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(count(whole->binary, "cp.async.bulk.commit_group"), 1);
  EXPECT_EQ(count(whole->binary, "cp.async.bulk.wait_group.read 1"), 0);
}

TEST(Wgmma, StageCountsOutsideTheRangeAreRefused) {
  KernelBuilder k("stages");
  k.for_range(0, 4, 1, [&](Value) {}, {.stages = 9});
  absl::StatusOr<Kernel> built = k.build();
  EXPECT_THAT(built.status().message(),
              HasSubstr("for_range: stages = 9 is outside [0, 8] (0 picks the default, 1 turns pipelining off)"));
}

// B as K x N and A as K x M are MN-major: the same instructions with the
// transpose bits set, B's rows of 256 bf16 in four 128-byte panels.
TEST(Wgmma, MnMajorOperandsSetTheTransposeBits) {
  for (auto [g, bits] : {std::pair{GemmConfig{.bm = 128, .bn = 256, .b_nk = false}, ", 0, 1;"},
                         std::pair{GemmConfig{.bm = 128, .bn = 128, .in = f16, .b_nk = false}, ", 0, 1;"},
                         std::pair{GemmConfig{.bm = 128, .bn = 128, .a_mk = false}, ", 1, 0;"},
                         std::pair{GemmConfig{.bm = 128, .bn = 64, .bk = 32, .b_nk = false, .a_mk = false,
                                              .swizzle = Swizzle::k64B},
                                   ", 1, 1;"}}) {
    SCOPED_TRACE(absl::StrCat(g.bn, " ", bits));
    absl::StatusOr<DeviceCode> code = compile_ptx(gemm(g), warps(8));
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_THAT(code->binary, HasSubstr(absl::StrCat("m64n", g.bn, "k16.f32")));
    EXPECT_THAT(code->binary, HasSubstr(bits));
    EXPECT_THAT(code->binary, Not(HasSubstr("fma.rn.f32")));
    expect_ptxas_clean(code->binary);
  }
}

// The epilogue writes C's accumulator with stmatrix into a swizzled tile,
// one TMA store per 128-byte panel, left running while the next tile's
// loop starts; a store waits only before its tile is written again. An f32
// C, which stmatrix does not take, is written in pairs.
TEST(Wgmma, EpilogueStoresPanelsAsynchronously) {
  absl::StatusOr<DeviceCode> code = compile_ptx(gemm(samples::kMatmul), warps(8));
  ASSERT_TRUE(code.ok()) << code.status();
  const std::string& ptx = code->binary;
  int stores = 0;
  for (size_t at = 0; (at = ptx.find("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group", at)) != std::string::npos;
       ++at) {
    ++stores;
  }
  EXPECT_EQ(stores, 4);  // 256 bf16 = four panels
  // Rounded by the hardware, 16 x 16 blocks stored at once (the PTX is long: no dump on failure).
  EXPECT_NE(ptx.find("cvt.rn.bf16x2.f32"), std::string::npos);
  EXPECT_NE(ptx.find("stmatrix.sync.aligned.m8n8.x4.shared.b16"), std::string::npos);
  EXPECT_NE(ptx.find("cp.async.bulk.wait_group.read 0"), std::string::npos);
  expect_ptxas_clean(ptx);
  absl::StatusOr<DeviceCode> f32_c = compile_ptx(gemm({.bm = 128, .bn = 128}), warps(8));
  ASSERT_TRUE(f32_c.ok()) << f32_c.status();
  EXPECT_EQ(f32_c->binary.find("stmatrix"), std::string::npos);
  EXPECT_NE(f32_c->binary.find("st.shared.v2.f32"), std::string::npos);
}

// Split-K: each program's K range is its part's (the pipeline starts at
// a run-time k), and its partial tile goes out through the copy engine's
// add, cooperative and warp-specialized alike.
TEST(Wgmma, SplitKPartsAddThroughTheCopyEngine) {
  const GemmConfig split = {.bm = 128, .bn = 128, .stages = 4, .split_k = 4};
  const GemmConfig ws = {.bm = 128, .bn = 128, .stages = 3, .warp_specialize = true, .split_k = 2};
  for (auto [g, nw] : {std::pair{split, 8}, std::pair{ws, 12}}) {
    SCOPED_TRACE(nw);
    absl::StatusOr<DeviceCode> code = compile_ptx(gemm(g), warps(nw));
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_NE(code->binary.find("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group"),
              std::string::npos);
    EXPECT_EQ(code->binary.find("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"), std::string::npos);
    EXPECT_NE(code->binary.find("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16"), std::string::npos);
    expect_ptxas_clean(code->binary);
  }
}

// A fused epilogue (bias + GELU) computes on the accumulator in its
// registers: the bias reaches each slot from a small buffer, no tile of
// the accumulator's size goes through shared memory, and GELU's one special
// function (the fast tanh) leaves registers enough that nothing spills.
TEST(Wgmma, FusedEpilogueStaysInTheAccumulatorsRegisters) {
  GemmConfig fused = samples::kMatmul;
  fused.bias_gelu = true;
  absl::StatusOr<DeviceCode> plain = compile_ptx(gemm(samples::kMatmul), warps(8));
  absl::StatusOr<DeviceCode> code = compile_ptx(gemm(fused), warps(8));
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_LE(code->shared_bytes - plain->shared_bytes, 2048);  // the bias row, 256 f32, aligned
  EXPECT_NE(code->binary.find("stmatrix.sync.aligned.m8n8.x4.shared.b16"), std::string::npos);
  EXPECT_NE(code->binary.find("tanh.approx.f32"), std::string::npos);
  expect_ptxas_clean(code->binary);
}

// A branch that yields either the accumulator or a tile loaded from memory
// merges them in the accumulator's registers: the loaded tile is loaded in
// that layout (one base register, each element an immediate offset from
// it), so no tile goes through shared memory and the epilogue after the
// branch is the plain one.
TEST(Wgmma, ABranchMergesALoadedTileInTheAccumulatorsRegisters) {
  auto kernel = [](bool branch) {
    KernelBuilder k("merge");
    Value a = k.tensor_map(bf16, {128, 64}, "a", Swizzle::k128B), b = k.tensor_map(bf16, {256, 64}, "b", Swizzle::k128B);
    Value c = k.tensor_map(bf16, {128, 256}, "c", Swizzle::k128B);
    Value saved = k.arg(ptr(f32), "saved");
    Value kdim = k.arg(i32, "k"), flag = k.arg(i32, "flag");
    Var acc = k.var(k.zeros({128, 256}, f32));
    k.for_range(0, kdim, 64, [&](Value kk) { acc = dot(tma_load(a, {0, kk}), trans(tma_load(b, {0, kk})), acc); });
    Var out = k.var(acc.get());
    if (branch) {
      k.if_(flag != 0, [&] {
        out = load(saved + expand_dims(k.arange(0, 128), 1) * 256 + expand_dims(k.arange(0, 256), 0));
      });
    }
    tma_store(c, {0, 0}, cast(out.get(), bf16));
    return *k.build();
  };
  absl::StatusOr<DeviceCode> plain = compile_ptx(kernel(false), warps(8));
  absl::StatusOr<DeviceCode> code = compile_ptx(kernel(true), warps(8));
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(code->shared_bytes, plain->shared_bytes);
  std::set<std::string> bases;
  int loads = 0;
  for (size_t at = 0; (at = code->binary.find("ld.global.f32", at)) != std::string::npos; ++at, ++loads) {
    const size_t open = code->binary.find('[', at), end = code->binary.find_first_of("+]", open);
    bases.insert(code->binary.substr(open + 1, end - open - 1));
  }
  EXPECT_EQ(loads, 128 * 256 / 256);
  EXPECT_EQ(bases.size(), 1u);
  expect_ptxas_clean(code->binary);
}

// A pipelined loop inside a persistent loop loads the first stages of the
// next tile while this one finishes: more TMA issue sites (the next run's
// loads in the loop's last iterations, and after a short run) than where a
// store that may reach the loaded memory (through a pointer that may be any
// parameter's) keeps each run's ring to itself. An atomic through another
// parameter's pointer touches other memory and keeps the ring across.
TEST(Wgmma, RingsRunAcrossThePersistentLoop) {
  enum class Write { kNone, kOtherParameter, kAnyParameter };
  auto issues = [](Write write) {
    KernelBuilder k("rings");
    Value a = k.tensor_map(f32, {32, 32}, "a");
    Value c = k.tensor_map(f32, {32, 32}, "c");
    Value count = k.arg(ptr(i32), "count"), other = k.arg(ptr(i32), "other");
    Value tiles = k.arg(i32, "tiles"), kdim = k.arg(i32, "k");
    k.for_each_tile(tiles, [&](Value t) {
      Var acc = k.var(k.zeros({32, 32}, f32));
      k.for_range(0, kdim, 32, [&](Value kk) { acc = acc + tma_load(a, {t * 32, kk}); });
      tma_store(c, {t * 32, 0}, acc);
      if (write == Write::kOtherParameter) atomic_add(count, t);
      if (write == Write::kAnyParameter) store(select(t > 2, count, other), t);
    });
    absl::StatusOr<DeviceCode> code = compile_ptx(*k.build(), warps(4));
    EXPECT_TRUE(code.ok()) << code.status();
    int n = 0;
    for (size_t at = 0; code.ok() && (at = code->binary.find("cp.async.bulk.tensor.2d.shared::cluster", at)) !=
                                         std::string::npos;
         ++at) {
      ++n;
    }
    return n;
  };
  EXPECT_GT(issues(Write::kNone), issues(Write::kAnyParameter));
  EXPECT_EQ(issues(Write::kNone), issues(Write::kOtherParameter));
}

// A tile's load coordinate read from memory (a grouped GEMM's group per
// tile) is read again ahead for the next tile's first stages, where
// nothing in the kernel writes that memory: the ring runs across as with
// computed coordinates. A store through the same parameter keeps each
// run's ring to itself; one through another parameter does not.
TEST(Wgmma, RingsRunAcrossOnCoordinatesReadFromUnwrittenMemory) {
  enum class Write { kNone, kOtherParameter, kSameParameter };
  auto issues = [](Write write) {
    KernelBuilder k("rings");
    Value a = k.tensor_map(f32, {1, 32, 32}, "a");
    Value c = k.tensor_map(f32, {32, 32}, "c");
    Value groups = k.arg(ptr(i32), "groups"), other = k.arg(ptr(i32), "other");
    Value tiles = k.arg(i32, "tiles"), kdim = k.arg(i32, "k");
    k.for_each_tile(tiles, [&](Value t) {
      Value g = load(groups + t);
      Var acc = k.var(k.zeros({32, 32}, f32));
      k.for_range(0, kdim, 32, [&](Value kk) { acc = acc + reshape(tma_load(a, {g, t * 32, kk}), {32, 32}); });
      tma_store(c, {t * 32, 0}, acc);
      if (write == Write::kOtherParameter) store(other + t, g);
      if (write == Write::kSameParameter) store(groups + t, g + 1);
    });
    absl::StatusOr<DeviceCode> code = compile_ptx(*k.build(), warps(4));
    EXPECT_TRUE(code.ok()) << code.status();
    return code.ok() ? count(code->binary, "cp.async.bulk.tensor.3d.shared::cluster") : 0;
  };
  EXPECT_GT(issues(Write::kNone), issues(Write::kSameParameter));
  EXPECT_EQ(issues(Write::kNone), issues(Write::kOtherParameter));
}

// Stream-K's epilogue: a partial tile added into its slot through the copy
// engine, the count (an atomic), and the finished sum loaded back into the
// accumulator's registers (its own layout, so no tile goes through shared
// memory; each element one base and an immediate offset) and merged with
// the accumulator of a whole tile before the one epilogue. The ring still
// runs across the persistent loop, and ptxas takes it without spilling.
TEST(Wgmma, StreamKFinishesSharedTilesInTheAccumulatorsRegisters) {
  for (const GemmConfig& plain : {samples::kMatmul, samples::kMatmulNarrow}) {
    GemmConfig sk = plain;
    sk.stream_k = true;
    SCOPED_TRACE(absl::StrCat(plain.bm, "x", plain.bn));
    absl::StatusOr<DeviceCode> base = compile_ptx(gemm(plain), warps(8));
    absl::StatusOr<DeviceCode> code = compile_ptx(gemm(sk), warps(8));
    ASSERT_TRUE(base.ok()) << base.status();
    ASSERT_TRUE(code.ok()) << code.status();
    const std::string& ptx = code->binary;
    EXPECT_THAT(ptx, HasSubstr("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group"));
    EXPECT_THAT(ptx, HasSubstr("atom.global.add.u32"));
    // The reduce's staging tile goes a panel at a time beside the C store's.
    EXPECT_LE(code->shared_bytes, 227 * 1024);
    // Every workspace load of the finish: a base register and an immediate offset.
    std::set<std::string> bases;
    int loads = 0;
    for (size_t at = 0; (at = ptx.find("ld.global.f32", at)) != std::string::npos; ++at, ++loads) {
      const size_t open = ptx.find('[', at), end = ptx.find_first_of("+]", open);
      bases.insert(ptx.substr(open + 1, end - open - 1));
    }
    EXPECT_EQ(loads, plain.bm * plain.bn / 256);
    EXPECT_LE(bases.size(), 2u);
    // At least the plain kernel's TMA issue sites (whose ring runs across
    // the persistent loop; a ring to each run has fewer): the ring runs across.
    auto count = [](const std::string& text) {
      int n = 0;
      for (size_t at = 0; (at = text.find("cp.async.bulk.tensor.2d.shared::cluster", at)) != std::string::npos; ++at) ++n;
      return n;
    };
    EXPECT_GE(count(ptx), count(base->binary));
    expect_ptxas_clean(ptx);
  }
}

// A warp-specialized program's roles: 384 threads, of which the producer
// warpgroup gives its registers to the consumers (setmaxnreg), whose
// threads release ring stages on the empty barriers.
void expect_roles(const DeviceCode& code) {
  const std::string& ptx = code.binary;
  EXPECT_EQ(code.threads, 384);
  EXPECT_THAT(ptx, HasSubstr(".maxntid 384, 1, 1"));
  EXPECT_THAT(ptx, HasSubstr(".maxnreg 168"));
  EXPECT_THAT(ptx, HasSubstr("setmaxnreg.dec.sync.aligned.u32 40;"));
  EXPECT_THAT(ptx, HasSubstr("setmaxnreg.inc.sync.aligned.u32 232;"));
  EXPECT_THAT(ptx, HasSubstr("mbarrier.arrive.shared::cta.b64"));
  EXPECT_THAT(ptx, HasSubstr("shfl.sync.idx.b32"));  // the role branch is warp-uniform for ptxas
}

// Warp specialization: 384 threads, a producer warpgroup that gives its
// registers to two consumers (setmaxnreg), consumers on named barriers of
// their own that release ring stages on the empty barriers, and a staging
// tile per consumer after the shared ring.
TEST(Wgmma, WarpSpecializedGemmSplitsTheProgramIntoRoles) {
  const GemmConfig plain = {.bm = 128, .bn = 128, .out = bf16, .stages = 4, .warp_specialize = true};
  GemmConfig fused = plain;
  fused.bias_gelu = true;
  for (const GemmConfig& g : {plain, fused}) {
    SCOPED_TRACE(g.bias_gelu ? "bias + gelu" : "plain");
    absl::StatusOr<DeviceCode> code = compile_ptx(gemm(g), warps(12));
    ASSERT_TRUE(code.ok()) << code.status();
    const std::string& ptx = code->binary;
    expect_roles(*code);
    EXPECT_THAT(ptx, ::testing::ContainsRegex("barrier.sync[ \t]+%r[0-9]+, 128;"));
    // Barriers (1 KiB with the ring's alignment), 4 stages of 32 KiB, per
    // consumer a staging tile of 32 KiB, and the alignment slack (dynamic
    // shared memory starts at a multiple of 16). The bias row is loaded into
    // the accumulators' row slices, in registers.
    EXPECT_EQ(code->shared_bytes, 1024 + 4 * 32768 + 2 * 32768 + 1024 - 16);
    expect_ptxas_clean(ptx);
  }
}

// A cooperative consumer: two warpgroups take every iteration as one
// program of 256 threads, on a named barrier of their own, from one ring
// loaded once for both; one consumer region after the ring.
TEST(Wgmma, CooperativeConsumerRunsEveryIterationOnTwoWarpgroups) {
  const samples::AttnConfig c = {.d = 128, .warp_specialize = true, .cooperative = true};
  absl::StatusOr<DeviceCode> code = compile_ptx(*samples::attention_kernel(c), warps(12));
  ASSERT_TRUE(code.ok()) << code.status();
  const std::string& ptx = code->binary;
  expect_roles(*code);
  EXPECT_THAT(ptx, ::testing::ContainsRegex("barrier.sync[ \t]+1, 256;"));
  EXPECT_THAT(ptx, Not(::testing::ContainsRegex("barrier.sync[ \t]+[%a-z0-9]+, 128;")));
  // Barriers (1 KiB), 2 stages of K and V (64 KiB each), then the
  // consumer's region: its own barrier (1 KiB with Q's alignment), Q and
  // O's staging tile (32 KiB each); and the alignment slack.
  EXPECT_EQ(code->shared_bytes, 1024 + 2 * 65536 + 1024 + 2 * 32768 + 1024 - 16);
  expect_ptxas_clean(ptx);
}

// The cooperative GEMM: 128 x 256 tiles on one consumer of two warpgroups
// (64 x 256 accumulators each), on their own 256-thread barrier, without
// spills, in the shared memory a program may have.
TEST(Wgmma, CooperativeGemmTakesEachTileOnTwoWarpgroups) {
  for (int stages : {3, 4}) {
    SCOPED_TRACE(absl::StrCat(stages, " stages"));
    const GemmConfig g = {
        .bm = 128, .bn = 256, .out = bf16, .stages = stages, .warp_specialize = true, .cooperative = true};
    absl::StatusOr<DeviceCode> code = compile_ptx(gemm(g), warps(12));
    ASSERT_TRUE(code.ok()) << code.status();
    expect_roles(*code);
    EXPECT_THAT(code->binary, ::testing::ContainsRegex("barrier.sync[ \t]+1, 256;"));
    EXPECT_LE(code->shared_bytes, 227 * 1024);
    expect_ptxas_clean(code->binary);
  }
}

// A warp-specialized loop whose loads have different readers gives each
// its own barriers: the consumer waits for K's block just before S = Q Kᵀ
// and releases it (with the block of V that the iteration before left its
// product reading) as soon as S is done, and waits for V's block only
// before P V, so the producer loads the next key block during the softmax.
// The producer waits for each group's release and issues it in turn.
// (Events in the PTX's order: W a wait, M products, Z all of them done,
// A a release, X an issue.)
TEST(Wgmma, ConsumerReleasesEachLoadAfterItsLastProduct) {
  for (bool cooperative : {true, false}) {
    SCOPED_TRACE(cooperative ? "cooperative" : "ping-pong");
    const samples::AttnConfig c = {
        .d = 128, .bm = cooperative ? 128 : 64, .warp_specialize = true, .cooperative = cooperative};
    absl::StatusOr<DeviceCode> code = compile_ptx(*samples::attention_kernel(c), warps(12));
    ASSERT_TRUE(code.ok()) << code.status();
    std::string events;
    size_t from = 0;
    for (size_t end; (end = code->binary.find('\n', from)) != std::string::npos; from = end + 1) {
      const std::string_view line(code->binary.data() + from, end - from);
      char e = 0;
      if (line.find("mbarrier.try_wait") != std::string_view::npos) e = 'W';
      if (line.find("wgmma.mma_async") != std::string_view::npos) e = 'M';
      if (line.find("wgmma.wait_group.sync.aligned 0;") != std::string_view::npos) e = 'Z';
      if (line.find("mbarrier.arrive.shared::cta.b64 _") != std::string_view::npos) e = 'A';
      if (line.find("mbarrier.arrive.expect_tx") != std::string_view::npos) e = 'X';
      if (e != 0 && !(e == 'M' && !events.empty() && events.back() == 'M')) events += e;
    }
    EXPECT_THAT(events, HasSubstr("WMZAA"));
    // The producer's two groups and the consumer's block of Q.
    EXPECT_EQ(std::count(events.begin(), events.end(), 'X'), 3) << events;
    expect_ptxas_clean(code->binary);
  }
}

TEST(Wgmma, WarpSpecializationNeedsItsShape) {
  auto refused = [](const Kernel& k, int nw) { return compile_ptx(k, warps(nw)).status(); };
  const GemmConfig g = {.bm = 128, .bn = 128, .out = bf16, .stages = 4, .warp_specialize = true};
  for (int nw : {8, 20}) {
    EXPECT_THAT(refused(gemm(g), nw).message(), HasSubstr("needs a producer warpgroup and two consumer warpgroups"));
  }
  const Kernel cooperative = *samples::attention_kernel({.warp_specialize = true, .cooperative = true});
  for (int nw : {8, 16}) {
    EXPECT_THAT(refused(cooperative, nw).message(),
                HasSubstr("needs a producer warpgroup and a consumer of two warpgroups (num_warps = 12)"));
  }
  {
    KernelBuilder k("cooperative_alone");
    k.for_each_tile(8, [&](Value) {}, {.cooperative = true});
    EXPECT_THAT(k.build().status().message(), HasSubstr("for_range: cooperative consumers need warp_specialize"));
  }
  // A loop without a pipelined loop of tma_loads inside.
  {
    KernelBuilder k("no_pipeline");
    Value p = k.arg(ptr(f32), "p");
    k.for_each_tile(64, [&](Value t) { store(p + t, cast(t, f32)); }, {.warp_specialize = true});
    EXPECT_THAT(refused(*k.build(), 12).message(), HasSubstr("has no pipelined loop whose loads the producer"));
  }
  // Tiles before the loop, and ops after it.
  for (int where : {0, 1}) {
    KernelBuilder k("around");
    Value a = k.tensor_map(bf16, {64, 64}, "a", Swizzle::k128B);
    Value c = k.tensor_map(f32, {64, 64}, "c");
    Value p = k.arg(ptr(f32), "p");
    Value before = where == 0 ? k.arange(0, 64) : Value();
    k.for_each_tile(8, [&](Value t) {
      Var acc = k.var(k.zeros({64, 64}, f32));
      k.for_range(0, 256, 64, [&](Value kk) {
        Value at = tma_load(a, {t * 64, kk});
        acc = dot(at, trans(at), acc);
      });
      tma_store(c, {t * 64, 0}, acc);
    }, {.warp_specialize = true});
    if (where == 0) store(p + before, cast(before, f32));
    if (where == 1) store(p, 1.0f);
    const char* why = where == 0 ? "only scalar arithmetic and loads may come before it" : "nothing may come after it";
    EXPECT_THAT(refused(*k.build(), 12).message(), HasSubstr(why));
  }
  // Values carried from one iteration to the next.
  {
    KernelBuilder k("carries");
    Value p = k.arg(ptr(i32), "p");
    Var count = k.var(k.constant(0, i32));
    k.for_each_tile(8, [&](Value t) { count = count + t; }, {.warp_specialize = true});
    store(p, count);
    EXPECT_THAT(refused(*k.build(), 12).message(), HasSubstr("carries values from one iteration to the next"));
  }
  // Two loops.
  {
    KernelBuilder k("two");
    Value p = k.arg(ptr(f32), "p");
    k.for_each_tile(8, [&](Value t) { store(p + t, 1.0f); }, {.warp_specialize = true});
    k.for_each_tile(8, [&](Value t) { store(p + t, 2.0f); }, {.warp_specialize = true});
    EXPECT_THAT(refused(*k.build(), 12).message(), HasSubstr("are both warp-specialized"));
  }
}

// Shapes and layouts wgmma does not take keep the generic loop, correct
// on every target.
TEST(Wgmma, OtherDotsKeepTheLoop) {
  for (GemmConfig g : {GemmConfig{.bm = 64, .bn = 64, .swizzle = Swizzle::kNone},
                       GemmConfig{.bm = 32, .bn = 32, .bk = 64}}) {
    absl::StatusOr<DeviceCode> code = compile_ptx(gemm(g), warps(4));
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_THAT(code->binary, Not(HasSubstr("wgmma")));
    expect_ptxas_accepts(code->binary);
  }
}

}  // namespace
}  // namespace tessel
