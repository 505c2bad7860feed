// The MoE token permutation (samples/moe.h) on the device under test
// (cuda:0, or the device TESSEL_GPU_TEST_DEVICE names, e.g. host:1) against
// host:2 and the host reference: random and skewed choices, some outside
// the experts, at a few expert counts, block sizes and chunks. The
// permutation is deterministic, so the targets agree exactly. And the
// experts' GEMM over it (moe_gemm_kernel) on both, against a double
// reference; and a whole MoE layer built from them.
#include "samples/moe.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/device.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/matmul_cases.h"

namespace tessel::gpu_test {
namespace {

class Moe : public AgreeTest {};

TEST_F(Moe, AlignmentAgreesWithTheHostAndTheReference) {
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  for (const auto& [n, experts, block, chunk, warps] : std::vector<std::tuple<int, int, int, int, int>>{
           {16384 * 8, 64, 64, 1024, 8}, {4096 * 2, 8, 128, 1024, 4}, {3000, 256, 16, 512, 8}, {1, 60, 32, 256, 4}}) {
    SCOPED_TRACE(::testing::Message() << n << " choices, " << experts << " experts, blocks of " << block
                                      << ", chunks of " << chunk << ", " << warps << " warps");
    std::vector<int32_t> ids(n);
    for (int32_t& v : ids) {
      v = rng.uniform_int(0, 3) == 0 ? rng.uniform_int(0, experts - 1) : rng.uniform_int(0, std::min(experts, 5) - 1);
      if (rng.uniform_int(0, 50) == 0) v = rng.uniform_int(0, 1) == 0 ? -1 : experts;
    }
    const int64_t capacity = samples::moe_align_capacity(n, experts, block);
    std::vector<std::vector<int32_t>> sorted, blocks, offsets, positions;
    for (const Device& dev : devices_) {
      absl::StatusOr<samples::MoeAlign> align = samples::MoeAlign::compile(dev, experts, block, chunk, warps);
      ASSERT_TRUE(align.ok()) << align.status();
      absl::StatusOr<Buffer> bids = upload(dev, ids);
      absl::StatusOr<samples::MoeAlignBuffers> out = align->buffers(dev, n);
      ASSERT_TRUE(bids.ok() && out.ok());
      ASSERT_TRUE(poison<int32_t>(dev, out->sorted, capacity, -7).ok());
      ASSERT_TRUE(poison<int32_t>(dev, out->block_experts, capacity / block, -7).ok());
      ASSERT_TRUE(poison<int32_t>(dev, out->positions, n, -7).ok());
      absl::Status s = align->launch(*bids, n, *out);
      ASSERT_TRUE(s.ok()) << s;
      ASSERT_TRUE(dev.synchronize().ok());
      absl::StatusOr<std::vector<int32_t>> o = download<int32_t>(dev, out->offsets, experts + 1);
      ASSERT_TRUE(o.ok());
      const int32_t total = o->back();
      ASSERT_TRUE(total >= 0 && total <= capacity) << total;
      absl::StatusOr<std::vector<int32_t>> so = download<int32_t>(dev, out->sorted, total);
      absl::StatusOr<std::vector<int32_t>> bl = download<int32_t>(dev, out->block_experts, total / block);
      absl::StatusOr<std::vector<int32_t>> po = download<int32_t>(dev, out->positions, n);
      ASSERT_TRUE(so.ok() && bl.ok() && po.ok());
      sorted.push_back(*std::move(so));
      blocks.push_back(*std::move(bl));
      offsets.push_back(*std::move(o));
      positions.push_back(*std::move(po));
    }
    EXPECT_EQ(offsets[0], offsets[1]) << "device under test against host:2";
    EXPECT_EQ(sorted[0], sorted[1]) << "device under test against host:2";
    EXPECT_EQ(blocks[0], blocks[1]) << "device under test against host:2";
    EXPECT_EQ(positions[0], positions[1]) << "device under test against host:2";
    const samples::MoeAlignment want = samples::moe_align_reference(ids, experts, block);
    EXPECT_EQ(offsets[0], want.offsets) << "against the reference";
    EXPECT_EQ(sorted[0], want.sorted) << "against the reference";
    EXPECT_EQ(blocks[0], want.block_experts) << "against the reference";
    EXPECT_EQ(positions[0], want.positions) << "against the reference";
  }
}

// Row i of C is token i / top_k's row of A times its choice's expert's
// weights (times its router weight, and fp8's scales): rows gathered by
// the alignment, dropped choices' rows left alone, K not a multiple of the
// tile, N ragged, blocks of 64 on the tensor cores (with copy rings) and of
// 16 off them, bf16 and fp8 operands (each K step's sum added in f32, and
// fast accumulation).
TEST_F(Moe, GemmOverTheAlignmentMatchesADoubleReference) {
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  std::mt19937 gen(rng.uniform_int(0, 1 << 30));
  struct Case {
    matmul_cases::MoeProblem p;
    samples::MoeGemmConfig g;
    int warps;
  };
  for (const Case& c :
       {Case{{37, 2, 5, 136, 80}, {.bm = 64, .bn = 128}, 4},
        Case{{200, 4, 16, 256, 128}, {.bm = 64, .bn = 128, .routed_weights = true}, 4},
        Case{{120, 8, 64, 256, 256}, {.bm = 64, .bn = 256, .out = f32, .stages = 4}, 8},
        Case{{5, 1, 3, 64, 32}, {.bm = 16, .bn = 64, .bk = 16}, 4},
        Case{{150, 2, 8, 256, 384},
             {.bm = 64, .bn = 256, .bk = 128, .in = f8e4m3, .routed_weights = true, .scaled = true, .stages = 4},
             8},
        Case{{37, 2, 5, 136, 200},
             {.bm = 64, .bn = 128, .bk = 128, .in = f8e5m2, .scaled = true, .fast_accum = true},
             4}}) {
    const matmul_cases::MoeProblem& p = c.p;
    SCOPED_TRACE(::testing::Message() << p.tokens << " tokens x " << p.top_k << " of " << p.experts << " experts, N "
                                      << p.n_cols << ", K " << p.k << ", blocks of " << c.g.bm << " x " << c.g.bn
                                      << ", " << c.g.in.name());
    const int n = p.tokens * p.top_k;
    matmul_cases::MoeGemmInputs in = {.ids = std::vector<int32_t>(n),
                                      .a = matmul_cases::random_operand(c.g.in, p.tokens * p.k, gen),
                                      .w = matmul_cases::random_operand(c.g.in, p.experts * p.n_cols * p.k, gen),
                                      .weights = std::vector<float>(c.g.routed_weights ? n : 0),
                                      .scale_a = static_cast<float>(rng.uniform_int(1, 64)) / 32,
                                      .scale_w = std::vector<float>(c.g.scaled ? p.experts : 0)};
    for (int32_t& v : in.ids) v = rng.uniform_int(0, 40) == 0 ? p.experts : rng.uniform_int(0, p.experts - 1);
    for (float& x : in.weights) x = static_cast<float>(rng.uniform_int(1, 100)) / 64;
    for (float& x : in.scale_w) x = static_cast<float>(rng.uniform_int(1, 64)) / 32;
    for (const Device& dev : devices_) {
      SCOPED_TRACE(dev.name());
      absl::StatusOr<std::vector<float>> got = matmul_cases::run_moe_gemm(dev, c.g, c.warps, p, in);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(matmul_cases::moe_gemm_mismatch(c.g, p, in, *got), "");
    }
  }
}

// A whole MoE layer (samples::MoeLayer, Mixtral's form at a small size)
// on each device against the double reference: its logits, its choices
// from its own logits, and its output; bf16, and fp8 (e4m3 weights and
// activations, rows of 128 bytes); the gathering GEMMs, and grouped ones
// warp-specialized (blocks of 128) and plain persistent (blocks of 64),
// with SwiGLU in its own kernel and in the up projection's epilogue.
// The tensor-core tiles of the benchmark on NVIDIA; the host runs the same
// kernels.
TEST_F(Moe, LayerMatchesADoubleReference) {
  Rng rng;
  TESSEL_TRACE_SEED(rng);
  std::mt19937 gen(rng.uniform_int(0, 1 << 30));
  const samples::MoeLayerConfig grouped = {
      .experts = 8, .top_k = 2, .hidden = 256, .intermediate = 352, .fused_swiglu = false};
  samples::MoeLayerConfig grouped_fp8 = grouped, grouped_plain = grouped, gathering = grouped, gathering_fp8 = grouped;
  grouped_fp8.up.in = grouped_fp8.down.in = f8e4m3;
  grouped_fp8.up.bk = grouped_fp8.down.bk = 128;
  grouped_plain.up = grouped_plain.down = {.bm = 64, .bn = 128, .bk = 64, .stages = 4};
  grouped_plain.gemm_warps = 8;
  gathering.up = gathering.down = {.bm = 64, .bn = 256, .stages = 4};
  gathering_fp8.up = gathering_fp8.down = {.bm = 64, .bn = 256, .bk = 128, .in = f8e4m3, .stages = 4};
  gathering.gemm_warps = gathering_fp8.gemm_warps = 8;
  gathering.grouped = gathering_fp8.grouped = false;
  samples::MoeLayerConfig fused = grouped, fused_fp8 = grouped_fp8, fused_plain = grouped_plain;
  fused.fused_swiglu = fused_fp8.fused_swiglu = fused_plain.fused_swiglu = true;
  const int64_t tokens = 200;
  for (const samples::MoeLayerConfig& c :
       {grouped, grouped_fp8, grouped_plain, gathering, gathering_fp8, fused, fused_fp8, fused_plain}) {
    for (const Device& dev : devices_) {
      SCOPED_TRACE(::testing::Message() << dev.name() << ", " << c.up.in.name()
                                        << (c.grouped ? ", grouped on " : ", gathering on ") << c.gemm_warps
                                        << " warps, blocks of " << c.up.bm << (c.fused_swiglu ? ", SwiGLU fused" : ""));
      absl::StatusOr<matmul_cases::MoeLayerRun> run = matmul_cases::run_moe_layer(dev, c, tokens, gen);
      ASSERT_TRUE(run.ok()) << run.status();
      EXPECT_EQ(matmul_cases::moe_layer_mismatch(c, tokens, *run), "");
    }
  }
}

}  // namespace
}  // namespace tessel::gpu_test
