// The GEMM on Hopper's tensor cores (dot on swizzled TMA tiles lowers to
// wgmma), checked against a double-precision reference on shapes that are
// not multiples of the tiles, for bf16 and f16 with A and B K- or MN-major,
// fp8 (scaled), tf32 and i8 (exact into i32, or scaled); and against the
// host target, which runs the same kernel through its loop.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "dsl/ops.h"
#include "gpu_test_util.h"
#include "samples/kernels.h"
#include "tests/matmul_cases.h"

namespace tessel::gpu_test {
namespace {

using matmul_cases::Operand;
using matmul_cases::random_operand;

struct Problem {
  int64_t m, n, k;
  DType in = bf16;
  bool b_nk = true;  // B stored N x K (else K x N)
  bool a_mk = true;  // A stored M x K (else K x M)
  int64_t bm = 128, bn = 128, bk = 64;
  int warps = 8;
  int stages = 0;  // the K loop's pipeline: 0 for the default
  std::optional<DType> in_b = std::nullopt;  // with fp8, B's may be the other kind
  bool tf32 = false;  // f32 operands multiplied as tf32
  bool fast_accum = false;  // fp8: the tensor cores' sums over all of K
  bool ws = false;    // warp-specialized (12 warps: a producer and two consumers of 128 x bn tiles)
  bool coop = false;  // with ws: one consumer of two warpgroups taking every bm x bn tile
  int split_k = 1;    // K cut into parts whose programs add into C
  DType out = f32;    // C's dtype: f32 or bf16
  bool stream_k = false;  // the last tiles' K steps shared by every program
  int programs = 0;       // the grid where not the default
  int cluster_m = 1, cluster_n = 1;  // 2-program clusters sharing B's tile (2 x 1) or A's (1 x 2)
};

std::string name(const Problem& p) {
  return absl::StrCat(
      p.in.name(), p.in_b ? absl::StrCat(" x ", p.in_b->name()) : "", p.tf32 ? " as tf32" : "",
      p.fast_accum ? " fast accumulation" : "", " ", p.m, "x", p.n, "x", p.k, p.a_mk ? " A as MxK" : " A as KxM",
      p.b_nk ? " B as NxK" : " B as KxN", ", tile ", p.bm, "x", p.bn, "x", p.bk, ", ", p.warps, " warps, ", p.stages,
      " stages", p.ws ? ", warp-specialized" : "", p.coop ? ", cooperative" : "",
      p.split_k > 1 ? absl::StrCat(", split-K ", p.split_k) : "", p.stream_k ? ", stream-K" : "",
      p.programs > 0 ? absl::StrCat(" on ", p.programs, " programs") : "",
      p.cluster_m * p.cluster_n > 1 ? absl::StrCat(", clusters of ", p.cluster_m, "x", p.cluster_n) : "", ", C in ",
      p.out.name());
}

// fp8 operands, and i8 ones for a C other than their exact i32 sum, take per-tensor scales.
bool scaled(const Problem& p) { return p.in.is_float8() || (p.in == i8 && p.out != i32); }

samples::GemmConfig config(const Problem& p) {
  return {.bm = p.bm,
          .bn = p.bn,
          .bk = p.bk,
          .in = p.in,
          .in_b = p.in_b,
          .out = p.out,
          .b_nk = p.b_nk,
          .a_mk = p.a_mk,
          .stages = p.stages,
          .scaled = scaled(p),
          .tf32 = p.tf32,
          .fast_accum = p.fast_accum,
          .warp_specialize = p.ws,
          .cooperative = p.coop,
          .split_k = p.split_k,
          .stream_k = p.stream_k,
          .cluster_m = p.cluster_m,
          .cluster_n = p.cluster_n};
}

struct Inputs {
  Operand a, b;
};

// Operands in [-1, 1]; f32 ones exact in tf32, so that a tf32 product is an f32 one.
Inputs random_inputs(const Problem& p, Rng& rng) {
  return {random_operand(p.in, p.m * p.k, rng.gen(), true), random_operand(p.in_b.value_or(p.in), p.k * p.n, rng.gen(), true)};
}

// Scaled problems scale C by 1/2 and 1/4 (per-tensor scales of A and B).
constexpr std::pair<float, float> kFp8Scales = {0.5f, 0.25f};

absl::StatusOr<std::vector<float>> run_gemm(const Device& device, const Problem& p, const Inputs& in) {
  return matmul_cases::run_gemm(device, config(p), p.warps, p.m, p.n, p.k, in.a, in.b,
                                scaled(p) ? kFp8Scales : std::pair{1.0f, 1.0f}, nullptr, p.programs);
}

// Every element when there are few, else a sample (and every corner), against
// a double-precision sum; the bound scales with the sum of |a| |b|: f32
// accumulation's, or with fp8 operands samples::gemm_sum_tolerance's share
// of it: the tensor cores' fp8 instructions accumulate with fewer bits than
// f32, within a K step and, fast, over all of K (the worst ratio seen is
// recorded as a test property).
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
  const double scale = scaled(p) ? kFp8Scales.first * kFp8Scales.second : 1.0;
  const double tol = samples::gemm_sum_tolerance(p.in, p.fast_accum);
  int64_t bad = 0;
  double worst = 0;
  ::testing::Message first;
  for (int64_t e : picks) {
    const int64_t i = e / p.n, j = e % p.n;
    const matmul_cases::Dot d = matmul_cases::dot_at(in.a.values, in.b.values, p.m, p.n, p.k, p.a_mk, p.b_nk, i, j);
    const double err = std::abs(c[e] - scale * d.sum);
    worst = std::max(worst, err / (scale * d.size + 1e-30));
    // A bf16 C also rounds the sum: half a unit in its last place, at most 2^-8 of it.
    const double rounding = p.out == bf16 ? std::ldexp(std::abs(scale * d.sum), -8) : 0.0;
    if (err <= scale * (tol * d.size + 1e-6) + rounding) continue;
    if (bad++ < 5) first << " C[" << i << ", " << j << "] = " << c[e] << " vs " << scale * d.sum << ";";
  }
  ::testing::Test::RecordProperty(absl::StrCat("worst error / size, ", name(p)), absl::StrCat(worst));
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << picks.size() << " checked elements differ (worst "
                                       << worst << " of the size):" << first;
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
      // fp8 (K-major only; rows of K bytes padded to 16) and tf32.
      {.m = 1000, .n = 712, .k = 608, .in = f8e4m3, .bk = 128},
      {.m = 1000, .n = 712, .k = 608, .in = f8e4m3, .bn = 256, .bk = 128, .in_b = f8e5m2, .fast_accum = true},
      {.m = 4095, .n = 4104, .k = 1040, .in = f8e4m3, .bn = 256, .bk = 128, .stages = 3, .fast_accum = true},
      {.m = 4095, .n = 4104, .k = 1040, .in = f8e5m2, .bk = 128},
      // i8 into i32, exact (K-major only), as it is or scaled to bf16.
      {.m = 1000, .n = 712, .k = 608, .in = i8, .bk = 128, .out = i32},
      {.m = 4095, .n = 4104, .k = 1040, .in = i8, .bn = 256, .bk = 128, .stages = 3, .out = i32},
      {.m = 1000, .n = 712, .k = 608, .in = i8, .bk = 128, .out = bf16},
      {.m = 1000,
       .n = 712,
       .k = 608,
       .in = i8,
       .bk = 128,
       .warps = 12,
       .stages = 4,
       .ws = true,
       .coop = true,
       .out = i32},
      {.m = 1000, .n = 712, .k = 600, .in = f32, .bk = 32, .tf32 = true},
      {.m = 4095, .n = 4104, .k = 1032, .in = f32, .bk = 32, .tf32 = true},
      // Warp-specialized: one tile (the second consumer idle), runs shorter
      // than the ring, and many tiles per program for both consumers (C in
      // f32: two 64 KiB staging tiles leave room for 3 stages).
      {.m = 1, .n = 8, .k = 8, .warps = 12, .stages = 3, .ws = true},
      {.m = 1000, .n = 712, .k = 600, .warps = 12, .stages = 3, .ws = true},
      {.m = 2560, .n = 2048, .k = 64, .warps = 12, .stages = 3, .ws = true},
      {.m = 4095, .n = 4104, .k = 1032, .warps = 12, .stages = 3, .ws = true},
      {.m = 4095, .n = 4104, .k = 1032, .in = f16, .b_nk = false, .warps = 12, .stages = 3, .ws = true},
      {.m = 4095,
       .n = 4104,
       .k = 1040,
       .in = f8e4m3,
       .bk = 128,
       .warps = 12,
       .stages = 3,
       .fast_accum = true,
       .ws = true},
      {.m = 8192, .n = 8192, .k = 8192, .warps = 12, .stages = 3, .ws = true},
      // Cooperative: both consumer warpgroups on every tile.
      {.m = 1, .n = 8, .k = 8, .bn = 256, .warps = 12, .stages = 3, .ws = true, .coop = true},
      {.m = 1000, .n = 712, .k = 600, .bn = 256, .warps = 12, .stages = 3, .ws = true, .coop = true},
      {.m = 4095, .n = 4104, .k = 1032, .bn = 256, .warps = 12, .stages = 3, .ws = true, .coop = true},
      {.m = 4095, .n = 4104, .k = 1032, .in = f16, .b_nk = false, .warps = 12, .stages = 4, .ws = true, .coop = true},
      // fp8 whose K steps' sums are added in f32 (two accumulators a thread).
      {.m = 4095,
       .n = 4104,
       .k = 1040,
       .in = f8e4m3,
       .bn = 192,
       .bk = 128,
       .warps = 12,
       .stages = 4,
       .ws = true,
       .coop = true},
      // Split-K: parts of 4, 3 and 2 BK blocks (the last part shorter), few
      // tiles and a long K, small M, warp-specialized, fp8 with its scales.
      {.m = 1000, .n = 712, .k = 600, .split_k = 3},
      {.m = 1024, .n = 1024, .k = 16384, .stages = 4, .split_k = 4},
      {.m = 32, .n = 4096, .k = 8192, .bm = 64, .warps = 4, .split_k = 4},
      {.m = 1000, .n = 712, .k = 600, .warps = 12, .stages = 3, .ws = true, .split_k = 2},
      {.m = 1000, .n = 712, .k = 1040, .in = f8e4m3, .bk = 128, .split_k = 3},
      // Staging tiles staged a panel at a time (too large to hold whole beside
      // the stages): an f32 C 256 wide, its odd-even buffer turns over many
      // tiles a program, split-K, and a bf16 C through stmatrix; the
      // warp-specialized kernel's two f32 staging tiles beside 4 stages.
      {.m = 4095, .n = 4104, .k = 1032, .bn = 256, .stages = 3},
      {.m = 1024, .n = 1024, .k = 16384, .bn = 256, .stages = 3, .split_k = 4},
      {.m = 4095, .n = 4104, .k = 1032, .bn = 256, .stages = 4, .out = bf16},
      {.m = 1000, .n = 712, .k = 600, .bn = 256, .stages = 4, .out = bf16},
      {.m = 4095, .n = 4104, .k = 1032, .warps = 12, .stages = 4, .ws = true},
      {.m = 8192, .n = 8192, .k = 8192, .bn = 256, .out = bf16},
      // One warpgroup's 64 x 128 tiles in 8 stages, the deepest ring (small M, long K).
      {.m = 128, .n = 8192, .k = 8192, .bm = 64, .warps = 4, .stages = 8, .out = bf16},
      {.m = 1000, .n = 712, .k = 600, .bm = 64, .warps = 4, .stages = 8},
      // Tiles whose sides are not powers of two: 192 columns (wgmma's n192)
      // on two warpgroups, 192 rows on three (or on two, each taking half the
      // columns), both (one wave of 130 tiles at 896 x 4864), K- and
      // MN-major, f16, fp8, cooperative.
      {.m = 1000, .n = 712, .k = 600, .bn = 192},
      {.m = 1000, .n = 712, .k = 600, .bm = 192, .warps = 12},
      {.m = 1000, .n = 712, .k = 600, .bm = 192},
      {.m = 1000, .n = 712, .k = 600, .b_nk = false, .bn = 192},
      {.m = 1000, .n = 712, .k = 600, .a_mk = false, .bm = 192, .warps = 12},
      {.m = 1000, .n = 712, .k = 600, .in = f16, .bm = 192, .bn = 192, .warps = 12, .stages = 3},
      {.m = 1000, .n = 712, .k = 608, .in = f8e4m3, .bn = 192, .bk = 128, .stages = 3},
      {.m = 3000, .n = 5000, .k = 712, .bn = 192, .stages = 4, .out = bf16},
      {.m = 896, .n = 4864, .k = 8192, .bm = 192, .bn = 192, .warps = 12, .stages = 3, .out = bf16},
      {.m = 4095, .n = 4104, .k = 1032, .bm = 192, .bn = 256, .warps = 12, .stages = 3, .out = bf16},
      {.m = 4095, .n = 4104, .k = 1032, .bn = 192, .warps = 12, .stages = 4, .ws = true, .coop = true},
      // Widths fitted to a shape (samples::fitted_widths), whose C rows are
      // no whole number of 128-byte panels: C's box unswizzled (152 or 232
      // bf16 columns) or in 32-byte panels (232 f32).
      {.m = 3000, .n = 5000, .k = 712, .bn = 152, .stages = 4, .out = bf16},
      {.m = 1000, .n = 712, .k = 600, .bn = 232, .stages = 3},
      {.m = 3000, .n = 5000, .k = 712, .bn = 232, .stages = 4, .out = bf16},
      {.m = 4095, .n = 4104, .k = 1032, .bn = 152, .warps = 12, .stages = 4, .ws = true, .coop = true, .out = bf16},
      {.m = 1000, .n = 712, .k = 600, .bm = 192, .bn = 152, .warps = 12, .stages = 3, .out = bf16},
      {.m = 1000, .n = 712, .k = 600, .bn = 152, .stages = 3, .stream_k = true, .programs = 37},
      // Clusters of two programs, their tiles sharing B's (2 x 1) or A's (1 x 2)
      // through TMA multicast: a lone tile (its pair past C's edge), odd tile
      // counts, operands K- and MN-major (halves along K), many tiles a
      // program, ping-pong and cooperative, and 256 x 152 tiles fitted to
      // 3000 x 5000 sharing A's 256 rows.
      {.m = 1, .n = 8, .k = 8, .cluster_m = 2},
      {.m = 1000, .n = 712, .k = 600, .bn = 256, .stages = 4, .out = bf16, .cluster_m = 2},
      {.m = 1000, .n = 712, .k = 600, .bm = 256, .stages = 3, .cluster_n = 2},
      {.m = 1000, .n = 712, .k = 600, .b_nk = false, .a_mk = false, .stages = 3, .cluster_m = 2},
      {.m = 1000, .n = 712, .k = 600, .b_nk = false, .a_mk = false, .stages = 3, .cluster_n = 2},
      {.m = 4095, .n = 4104, .k = 1032, .bn = 256, .stages = 4, .out = bf16, .cluster_m = 2},
      {.m = 4095, .n = 4104, .k = 1032, .in = f16, .warps = 12, .stages = 4, .ws = true, .cluster_m = 2},
      {.m = 4095,
       .n = 4104,
       .k = 1032,
       .bn = 256,
       .warps = 12,
       .stages = 4,
       .ws = true,
       .coop = true,
       .out = bf16,
       .cluster_m = 2},
      {.m = 3000, .n = 5000, .k = 712, .bm = 256, .bn = 152, .stages = 4, .out = bf16, .cluster_n = 2},
      // 256 rows on two warpgroups, 152 or 160 accumulators a thread.
      {.m = 3000, .n = 5000, .k = 712, .bm = 256, .bn = 152, .stages = 4, .out = bf16},
      {.m = 1000, .n = 712, .k = 600, .bm = 256, .bn = 160, .stages = 3},
      {.m = 1000,
       .n = 712,
       .k = 600,
       .bm = 256,
       .bn = 160,
       .warps = 12,
       .stages = 3,
       .ws = true,
       .coop = true,
       .out = bf16},
      // Stream-K: fewer tiles than SMs (each split among programs), a last
      // partial wave (one whole wave and the rest shared), tiles a multiple
      // of the programs (none shared), an odd program count, 128 x 256
      // tiles with a bf16 C, fp8 with its scales, K shorter than a step a
      // program; each run twice on one workspace.
      {.m = 1024, .n = 1024, .k = 16384, .stages = 4, .stream_k = true},
      {.m = 3000, .n = 5000, .k = 712, .bn = 256, .stages = 4, .out = bf16, .stream_k = true},
      {.m = 1000, .n = 712, .k = 600, .stream_k = true, .programs = 48},
      {.m = 1000, .n = 712, .k = 600, .stream_k = true, .programs = 37},
      {.m = 4095, .n = 4104, .k = 1032, .bn = 256, .stages = 3, .out = bf16, .stream_k = true},
      {.m = 1000, .n = 712, .k = 1040, .in = f8e4m3, .bk = 128, .stream_k = true},
      {.m = 640, .n = 512, .k = 64, .bm = 64, .warps = 4, .stream_k = true},
  };
  std::vector<unsigned> seeds(problems.size());
  for (unsigned& seed : seeds) seed = rng.next_seed();
  for_each_case(problems.size(), [&](size_t i) {
    const Problem& p = problems[i];
    Rng own(seeds[i]);
    SCOPED_TRACE(absl::StrCat(name(p), ", random seed ", own.seed()));
    Inputs in = random_inputs(p, own);
    absl::StatusOr<std::vector<float>> c = run_gemm(device, p, in);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_TRUE(matches_reference(p, in, *c, own));
  });
}

// A grouped GEMM (an MoE layer's experts over rows in expert order): each
// block of rows by its group's B from a 3-D map, a scale per group and per
// row, the blocks past those in use zero; plain and warp-specialized, bf16
// and fp8 (each K step's sum in f32, and fast accumulation), and fp8 with
// block scales (each group's B its own).
TEST(Gemm, GroupedGemmMatchesADoubleReference) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  struct Form {
    samples::GemmConfig g;
    int warps;
  };
  samples::GemmConfig fp8 = {.bm = 128, .bn = 192, .bk = 128, .in = f8e4m3, .out = bf16, .stages = 4, .scaled = true};
  fp8.warp_specialize = fp8.cooperative = fp8.grouped = fp8.row_scales = true;
  samples::GemmConfig fast = fp8;
  fast.bn = 256;
  fast.fast_accum = true;
  samples::GemmConfig blocks = fp8;
  blocks.bn = 128;
  blocks.scaled = blocks.row_scales = false;
  blocks.block_scales = true;
  for (const Form& f : {Form{{.bm = 128, .bn = 256, .out = bf16, .stages = 3, .grouped = true}, 8}, Form{fp8, 12},
                        Form{fast, 12}, Form{blocks, 12}}) {
    SCOPED_TRACE(::testing::Message() << f.g.in.name() << ", " << f.g.bm << "x" << f.g.bn << ", " << f.warps << " warps"
                                      << (f.g.fast_accum ? ", fast accumulation" : "")
                                      << (f.g.block_scales ? ", block scales" : ""));
    const matmul_cases::GroupedGemmInputs in = matmul_cases::random_grouped_gemm(f.g, 24, 19, 8, 520, 528, rng.gen());
    absl::StatusOr<std::vector<float>> c = matmul_cases::run_grouped_gemm(device, f.g, f.warps, in);
    ASSERT_TRUE(c.ok()) << c.status();
    const double tol = samples::gemm_sum_tolerance(f.g.in, f.g.fast_accum);
    EXPECT_EQ(matmul_cases::grouped_gemm_mismatch(f.g, in, *c, tol), "");
  }
}

TEST(Gemm, TensorCoreGemmAgreesWithTheHost) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  absl::StatusOr<Device> host = Device::open("host");
  ASSERT_TRUE(host.ok()) << host.status();
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  for (const Problem& p :
       {Problem{.m = 200, .n = 136, .k = 200}, Problem{.m = 200, .n = 136, .k = 256, .in = f8e4m3, .bk = 128},
        Problem{.m = 200, .n = 136, .k = 256, .in = i8, .bk = 128, .out = i32},
        Problem{.m = 200, .n = 136, .k = 200, .in = f32, .bk = 32, .tf32 = true},
        Problem{.m = 1000, .n = 712, .k = 200, .warps = 12, .stages = 3, .ws = true},
        Problem{.m = 200, .n = 136, .k = 520, .split_k = 3},
        Problem{.m = 1000, .n = 712, .k = 200, .stream_k = true, .programs = 37}}) {
    SCOPED_TRACE(name(p));
    Inputs in = random_inputs(p, rng);
    absl::StatusOr<std::vector<float>> gpu = run_gemm(device, p, in);
    absl::StatusOr<std::vector<float>> cpu = run_gemm(*host, p, in);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    // fp8: the tensor cores' sums keep about 12 bits of Σ|a b| (here up to 8 after the scales).
    EXPECT_TRUE(all_close(*gpu, *cpu, p.in.is_float8() ? 4e-3 : 1e-5));
  }
}

// C of gemm_kernel(g) on the GPU and on the host from the same operands
// and scales: bit for bit where the sums are exact (i8 operands) and the
// epilogue's f32 arithmetic the same, else within 2e-2 (fp8: the tensor
// cores' sums, then bf16).
void expect_agrees_with_host(const Device& gpu, const samples::GemmConfig& g, int warps, int64_t m, int64_t n,
                             int64_t k, std::mt19937& gen, const std::vector<float>& rows = {},
                             const std::vector<float>& cols = {}, const matmul_cases::BlockScales* blocks = nullptr) {
  absl::StatusOr<Device> host = Device::open("host");
  ASSERT_TRUE(host.ok()) << host.status();
  const Operand a = random_operand(g.in, m * k, gen), b = random_operand(g.in, n * k, gen);
  absl::StatusOr<std::vector<float>> on_gpu =
      matmul_cases::run_gemm(gpu, g, warps, m, n, k, a, b, {1, 1}, nullptr, 0, rows, cols, blocks);
  absl::StatusOr<std::vector<float>> on_host =
      matmul_cases::run_gemm(*host, g, warps, m, n, k, a, b, {1, 1}, nullptr, 0, rows, cols, blocks);
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.status();
  ASSERT_TRUE(on_host.ok()) << on_host.status();
  if (g.in == i8 && !g.stream_k) {
    EXPECT_EQ(*on_gpu, *on_host);
  } else {
    EXPECT_TRUE(all_close(*on_gpu, *on_host, 2e-2));
  }
}

// Rowwise scaling (row_scales [M] and col_scales [N]: per-token and
// per-channel scales) of i8 and fp8 GEMMs, C in bf16, on the tensor cores
// against the host, which the host suite checks against a double reference.
TEST(Gemm, RowAndColumnScaledGemmsAgreeWithTheHost) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  const int64_t m = 1000, n = 712, k = 608;
  const std::vector<float> rows = matmul_cases::random_scales(m, 64, rng.gen()),
                           cols = matmul_cases::random_scales(n, 4096, rng.gen());
  for (DType in : {i8, f8e4m3}) {
    SCOPED_TRACE(in.name());
    const samples::GemmConfig g = {.bm = 128,
                                   .bn = 256,
                                   .bk = 128,
                                   .in = in,
                                   .out = bf16,
                                   .stages = 3,
                                   .fast_accum = true,
                                   .row_scales = true,
                                   .col_scales = true};
    expect_agrees_with_host(device, g, 8, m, n, k, rng.gen(), rows, cols);
  }
}

// Block scales (GemmConfig::block_scales: A's per row and 128 of K, B's per
// 128 x 128 block) of fp8 and i8 GEMMs on the tensor cores against the
// host, which the host suite checks against a double reference: 128 x 128
// tiles on two warpgroups and cooperative, a 192-wide tile whose columns
// take two of B's blocks, and stream-K, whose parts start inside K.
TEST(Gemm, BlockScaledGemmsAgreeWithTheHost) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  const int64_t m = 1000, n = 712, k = 608;
  const samples::GemmConfig plain = {
      .bm = 128, .bn = 128, .bk = 128, .in = f8e4m3, .out = bf16, .stages = 4, .block_scales = true};
  samples::GemmConfig coop = plain, wide = plain, int8 = plain, stream = plain;
  coop.warp_specialize = coop.cooperative = true;
  wide.warp_specialize = wide.cooperative = true;
  wide.bn = 192;
  int8.in = i8;
  stream.out = f32;
  stream.stream_k = true;
  for (auto [g, warps] : {std::pair{plain, 8}, {coop, 12}, {wide, 12}, {int8, 8}, {stream, 8}}) {
    SCOPED_TRACE(
        absl::StrCat(g.in.name(), " ", g.bm, " x ", g.bn, " on ", warps, " warps", g.stream_k ? ", stream-K" : ""));
    const matmul_cases::BlockScales scales = matmul_cases::random_block_scales(m, n, k, rng.gen());
    expect_agrees_with_host(device, g, warps, m, n, k, rng.gen(), {}, {}, &scales);
  }
}

// The GEMM in the form of Triton's matmul tutorial (operands through
// pointers, loads issued an iteration ahead; samples::pointer_gemm_kernel)
// against the double reference, with loads in their own iteration too
// (stages = 1), and the small shapes against the host; each with addresses
// from the induction variable and with pointers stepped.
TEST(Gemm, PointerGemmMatchesADoubleReferenceAndTheHost) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  absl::StatusOr<Device> host = Device::open("host");
  ASSERT_TRUE(host.ok()) << host.status();
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  for (const Problem& p :
       {Problem{.m = 1, .n = 8, .k = 8, .out = bf16}, Problem{.m = 257, .n = 129, .k = 100, .out = bf16},
        Problem{.m = 257, .n = 129, .k = 100, .stages = 1, .out = bf16},
        Problem{.m = 200, .n = 136, .k = 200, .in = f16, .bn = 256, .out = f32},
        Problem{.m = 1000, .n = 712, .k = 600, .bm = 64, .warps = 4, .out = bf16},
        Problem{.m = 4095, .n = 4104, .k = 1032, .out = bf16},
        // K a multiple of 16: both operands are copied into rings (of 3
        // stages by default), also where the loop is shorter than the ring,
        // and where K ends within a tile.
        Problem{.m = 257, .n = 129, .k = 112, .out = bf16},
        Problem{.m = 130, .n = 264, .k = 48, .stages = 4, .out = bf16},
        Problem{.m = 257, .n = 129, .k = 320, .stages = 2, .out = bf16},
        Problem{.m = 200, .n = 136, .k = 208, .in = f16, .bn = 256, .out = f32},
        Problem{.m = 1000, .n = 712, .k = 608, .bm = 64, .warps = 4, .out = bf16},
        Problem{.m = 4095, .n = 4104, .k = 1040, .out = bf16}}) {
    Inputs in = random_inputs(p, rng);
    // Also with the tutorial's loop literally: pointers stepped by BK.
    for (bool stepped : {false, true}) {
      SCOPED_TRACE(absl::StrCat(name(p), stepped ? ", pointers stepped" : ""));
      const samples::PointerGemmConfig g = {
          .bm = p.bm, .bn = p.bn, .bk = p.bk, .in = p.in, .out = p.out, .stages = p.stages, .stepped = stepped};
      absl::StatusOr<std::vector<float>> gpu =
          matmul_cases::run_pointer_gemm(device, g, p.warps, p.m, p.n, p.k, in.a, in.b);
      ASSERT_TRUE(gpu.ok()) << gpu.status();
      EXPECT_TRUE(matches_reference(p, in, *gpu, rng));
      if (p.m * p.n * p.k > (int64_t{1} << 26)) continue;
      absl::StatusOr<std::vector<float>> cpu =
          matmul_cases::run_pointer_gemm(*host, g, p.warps, p.m, p.n, p.k, in.a, in.b);
      ASSERT_TRUE(cpu.ok()) << cpu.status();
      EXPECT_TRUE(all_close(*gpu, *cpu, p.out == bf16 ? 1e-2 : 1e-5));
    }
  }
}

}  // namespace
}  // namespace tessel::gpu_test
