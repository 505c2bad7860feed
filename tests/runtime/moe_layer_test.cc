// A whole MoE layer (samples/moe.h MoeLayer) on the host target, stage by
// stage against its double reference (and that those checks fail where a
// stage is off), at a few shapes (tokens not a multiple of the
// blocks, one expert chosen of one, top 3 of 6, no tokens), bf16 and fp8
// (e4m3 weights and activations, static scales); its combine
// step alone with dropped choices; and the errors bad configurations, a
// short workspace and short buffers get.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/float16.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "samples/moe.h"
#include "tessel/tessel.h"
#include "tests/matmul_cases.h"
#include "tests/seeded.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;

// A grouped layer of 4 experts (top 2, H 64, I 96) on `tile` and `warps`.
samples::MoeLayerConfig small_layer(const samples::MoeGemmConfig& tile, int warps, bool fused_swiglu) {
  return {.experts = 4,
          .top_k = 2,
          .hidden = 64,
          .intermediate = 96,
          .up = tile,
          .down = tile,
          .gemm_warps = warps,
          .fused_swiglu = fused_swiglu};
}

// The gathering form on blocks of 16; the grouped form on 8 warps
// (persistent, blocks of 64) and 12 (warp-specialized, blocks of 128),
// with SwiGLU in its own kernel and fused into the up projection.
TEST(MoeLayer, MatchesADoubleReference) {
  TESSEL_SEEDED_GEN(gen);
  absl::StatusOr<Device> dev = Device::open("host:2");
  ASSERT_TRUE(dev.ok()) << dev.status();
  for (const auto& [tokens, experts, top_k, hidden, inter, in, warps, fused] :
       std::vector<std::tuple<int64_t, int, int, int64_t, int64_t, DType, int, bool>>{
           {37, 4, 2, 64, 96, bf16, 0, false},
           {20, 1, 1, 40, 24, bf16, 0, false},
           {50, 6, 3, 72, 48, bf16, 0, false},
           {0, 4, 2, 64, 96, bf16, 0, false},
           {37, 4, 2, 64, 96, f8e4m3, 0, false},
           {0, 4, 2, 64, 96, f8e4m3, 0, false},
           {37, 4, 2, 64, 96, bf16, 8, false},
           {50, 6, 3, 72, 48, bf16, 12, false},
           {1, 1, 1, 40, 24, bf16, 8, false},
           {0, 4, 2, 64, 96, bf16, 8, false},
           {37, 4, 2, 64, 96, f8e4m3, 8, false},
           {29, 3, 2, 64, 96, f8e4m3, 12, false},
           {37, 4, 2, 64, 96, bf16, 8, true},
           {50, 6, 3, 72, 48, bf16, 12, true},
           {1, 1, 1, 40, 24, bf16, 8, true},
           {0, 4, 2, 64, 96, bf16, 8, true},
           {37, 4, 2, 64, 96, f8e4m3, 8, true},
           {29, 3, 2, 64, 96, f8e4m3, 12, true}}) {
    const bool grouped = warps > 0;
    SCOPED_TRACE(::testing::Message() << tokens << " tokens x top " << top_k << " of " << experts << " experts, H "
                                      << hidden << ", I " << inter << ", " << in.name()
                                      << (grouped ? ", grouped on " : ", gathering") << (grouped ? warps : 0)
                                      << (fused ? ", SwiGLU fused" : ""));
    const samples::MoeGemmConfig tile = {.bm = !grouped      ? 16
                                               : warps == 12 ? 128
                                                             : 64,
                                         .bn = 64,
                                         .bk = grouped ? 64 / in.bytes() : 32,
                                         .in = in};
    const samples::MoeLayerConfig c = {.experts = experts,
                                       .top_k = top_k,
                                       .hidden = hidden,
                                       .intermediate = inter,
                                       .up = tile,
                                       .down = tile,
                                       .gemm_warps = grouped ? warps : 8,
                                       .grouped = grouped,
                                       .fused_swiglu = fused};
    absl::StatusOr<matmul_cases::MoeLayerRun> run = matmul_cases::run_moe_layer(*dev, c, tokens, gen);
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_EQ(matmul_cases::moe_layer_mismatch(c, tokens, *run), "");
  }
}

// The stage checks fail where a stage is off by more than its bound and
// name it: h, a and y of a token's first choice, and its output, each
// moved by a few steps of its format from what the host left, past its
// bound, in a bf16 and an fp8 layer.
TEST(MoeLayer, StageChecksNameTheStageThatIsOff) {
  TESSEL_SEEDED_GEN(gen);
  absl::StatusOr<Device> dev = Device::open("host:2");
  ASSERT_TRUE(dev.ok()) << dev.status();
  for (DType in : {bf16, f8e4m3}) {
    const samples::MoeGemmConfig tile = {.bm = 16, .bn = 64, .bk = 32, .in = in};
    const samples::MoeLayerConfig c = small_layer(tile, 12, false);  // (h is one of the stages)
    absl::StatusOr<matmul_cases::MoeLayerRun> run = matmul_cases::run_moe_layer(*dev, c, 9, gen);
    ASSERT_TRUE(run.ok()) << run.status();
    ASSERT_EQ(matmul_cases::moe_layer_mismatch(c, 9, *run), "");
    const int64_t t = 5, i = t * c.top_k;  // token 5's first choice
    for (auto [stage, values, at] : {std::tuple{"h", &samples::MoeLayerOutputs::h, i * 2 * c.intermediate + 7},
                                     {"a", &samples::MoeLayerOutputs::a, i * c.intermediate + 3},
                                     {"y", &samples::MoeLayerOutputs::y, i * c.hidden + 11},
                                     {"out", &samples::MoeLayerOutputs::out, t * c.hidden + 2}}) {
      SCOPED_TRACE(::testing::Message() << in.name() << ", " << stage);
      matmul_cases::MoeLayerRun off = *run;
      float& v = (off.outputs.*values)[at];
      // Two steps of e4m3 for an fp8 a; for the GEMMs' sums of an fp8 layer,
      // whose bound (2^-11 of their terms' magnitudes) may pass four steps
      // of bf16, sixteen; else four.
      const bool e4m3 = in == f8e4m3 && std::string(stage) == "a";
      const bool sum = in == f8e4m3 && (std::string(stage) == "h" || std::string(stage) == "y");
      v += std::max(std::abs(v), 0.25f) * (e4m3 ? 0.25f : sum ? 1.0f / 16 : 1.0f / 64);
      EXPECT_THAT(matmul_cases::moe_layer_mismatch(c, 9, off),
                  HasSubstr(absl::StrCat("token 5 ", stage == std::string("out") ? "" : "choice 0 ", stage, "[")));
    }
  }
}

// Where SwiGLU is fused there is no h: a is checked from x's sums, and an
// a a few steps off is named.
TEST(MoeLayer, FusedStageChecksNameA) {
  TESSEL_SEEDED_GEN(gen);
  absl::StatusOr<Device> dev = Device::open("host:2");
  ASSERT_TRUE(dev.ok()) << dev.status();
  for (DType in : {bf16, f8e4m3}) {
    SCOPED_TRACE(in.name());
    const samples::MoeGemmConfig tile = {.bm = 64, .bn = 64, .bk = 64 / in.bytes(), .in = in};
    const samples::MoeLayerConfig c = small_layer(tile, 8, true);
    absl::StatusOr<matmul_cases::MoeLayerRun> run = matmul_cases::run_moe_layer(*dev, c, 9, gen);
    ASSERT_TRUE(run.ok()) << run.status();
    ASSERT_EQ(matmul_cases::moe_layer_mismatch(c, 9, *run), "");
    EXPECT_TRUE(run->outputs.h.empty());
    matmul_cases::MoeLayerRun off = *run;
    float& v = off.outputs.a[5 * c.top_k * c.intermediate + 3];  // token 5's first choice
    v += std::max(std::abs(v), 0.25f) * (in == f8e4m3 ? 0.25f : 1.0f / 64);
    EXPECT_THAT(matmul_cases::moe_layer_mismatch(c, 9, off), HasSubstr("token 5 choice 0 a[3]"));
  }
}

// Choices outside [0, experts) are another rank's: their rows of y were
// never written, and the sum leaves them out. Read by choice (rows in the
// choices' order, dropped by their ids) and by position (rows where
// `positions` says, -1 dropped).
TEST(MoeLayer, CombineLeavesOutDroppedChoices) {
  absl::StatusOr<Device> dev = Device::open("host:1");
  ASSERT_TRUE(dev.ok()) << dev.status();
  const int32_t tokens = 19, top_k = 3, experts = 4, hidden = 136, n = tokens * top_k;
  std::vector<int32_t> ids(n), positions(n);
  for (int32_t i = 0; i < n; ++i) {
    ids[i] = i % 5 == 0 ? -1 : (i % 7 == 0 ? experts : i % experts);
    positions[i] = ids[i] == i % experts ? i * 7 % n : -1;  // 7 is prime to 57
  }
  for (bool by_position : {false, true}) {
    SCOPED_TRACE(by_position ? "by position" : "by choice");
    absl::StatusOr<Kernel> kernel = samples::moe_combine_kernel(bf16, by_position);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    absl::StatusOr<Function> fn = dev->compile(*kernel);
    ASSERT_TRUE(fn.ok()) << fn.status();
    std::vector<uint16_t> y(n * hidden, 0x7FC0);  // NaN where no kept choice's row is
    for (int32_t i = 0; i < n; ++i) {
      if (ids[i] != i % experts) continue;
      const int32_t row = by_position ? positions[i] : i;
      for (int32_t c = 0; c < hidden; ++c) y[row * hidden + c] = float_to_bf16(static_cast<float>(i % 9 + c % 4));
    }
    const std::vector<int32_t>& rows = by_position ? positions : ids;
    Buffer dy = *dev->allocate(y.size() * 2), drows = *dev->allocate(n * 4), dout = *dev->allocate(tokens * hidden * 2);
    ASSERT_TRUE(dev->copy_to_device(dy, y.data(), y.size() * 2).ok());
    ASSERT_TRUE(dev->copy_to_device(drows, rows.data(), n * 4).ok());
    const LaunchConfig lc = {.grid = static_cast<int>(samples::moe_combine_grid(tokens, hidden))};
    ASSERT_TRUE(fn->launch(lc, dy, drows, dout, tokens, top_k, experts, hidden).ok());
    absl::StatusOr<std::vector<float>> out = matmul_cases::download_f32(*dev, dout, bf16, tokens * hidden);
    ASSERT_TRUE(out.ok()) << out.status();
    for (int32_t t = 0; t < tokens; ++t) {
      for (int32_t c = 0; c < hidden; ++c) {
        float want = 0;
        for (int32_t j = 0; j < top_k; ++j) {
          const int32_t i = t * top_k + j;
          if (ids[i] >= 0 && ids[i] < experts) want += static_cast<float>(i % 9 + c % 4);
        }
        ASSERT_EQ((*out)[t * hidden + c], want) << "token " << t << ", column " << c;
      }
    }
  }
}

// A layer's GEMMs left at bn 0 take their operands' default tiles: 128 x
// 256 for bf16, 128 x 192 for fp8 (whose f32 sums spill at 256); a bn
// given stays.
TEST(MoeLayer, DefaultTilesFollowTheOperands) {
  samples::MoeLayerConfig c = {.experts = 4, .top_k = 2, .hidden = 64, .intermediate = 96};
  EXPECT_EQ(samples::with_default_tiles(c).up.bn, 256);
  EXPECT_EQ(samples::with_default_tiles(c).down.bn, 256);
  absl::StatusOr<Device> dev = Device::open("host:1");
  ASSERT_TRUE(dev.ok()) << dev.status();
  absl::StatusOr<samples::MoeLayer> layer = samples::MoeLayer::compile(*dev, c);
  ASSERT_TRUE(layer.ok()) << layer.status();
  EXPECT_EQ(layer->config().up.bn, 256);
  c.up.in = c.down.in = f8e4m3;
  EXPECT_EQ(samples::with_default_tiles(c).up.bn, 192);
  EXPECT_EQ(samples::with_default_tiles(c).down.bn, 192);
  c.up.bn = 128;
  EXPECT_EQ(samples::with_default_tiles(c).up.bn, 128);
  EXPECT_EQ(samples::with_default_tiles(c).down.bn, 192);
}

TEST(MoeLayer, BadConfigurationsAndBuffersAreErrors) {
  const samples::MoeLayerConfig good = {.experts = 4, .top_k = 2, .hidden = 64, .intermediate = 96};
  auto with = [&](auto change) {
    samples::MoeLayerConfig c = good;
    change(c);
    return samples::moe_layer_kernels(c).status();
  };
  for (const auto& [status, what] : std::vector<std::pair<absl::Status, std::string>>{
           {with([](auto& c) { c.top_k = 5; }), "top_k must be in [1, experts]; got top_k 5 of 4 experts"},
           {with([](auto& c) { c.top_k = 0; }), "got top_k 0 of 4 experts"},
           {with([](auto& c) { c.experts = 0; }), "got top_k 2 of 0 experts"},
           {with([](auto& c) { c.hidden = 0; }), "sizes must be positive"},
           {with([](auto& c) {
              c.intermediate = int64_t{1} << 20;
              c.hidden = 1 << 11;
            }),
            "2I x H weights below 2^31 elements; got H 2048, I 1048576"},
           {with([](auto& c) { c.down.bm = 64; }), "their bm must match; got 128 and 64"},
           {with([](auto& c) { c.up.out = f32; }),
            "both bf16 or both f8e4m3, their results bf16; got bf16 x bf16 in, f32"},
           {with([](auto& c) { c.up.in = f8e4m3; }), "got f8e4m3 x bf16 in"},
           {with([](auto& c) { c.up.in = c.down.in = f8e5m2; }), "got f8e5m2 x f8e5m2 in"},
           {with([](auto& c) {
              c.grouped = true;
              c.gemm_warps = 4;
            }),
            "a grouped layer's GEMMs run on 8 warps (persistent) or 12 (warp-specialized); got 4"}}) {
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(what));
  }

  absl::StatusOr<Device> dev = Device::open("host:1");
  ASSERT_TRUE(dev.ok()) << dev.status();
  absl::StatusOr<samples::MoeLayer> layer = samples::MoeLayer::compile(*dev, good);
  ASSERT_TRUE(layer.ok()) << layer.status();
  for (const auto& [tokens, what] : std::vector<std::pair<int64_t, std::string>>{
           {-1, "got -1 tokens"},
           {int64_t{1} << 30, "tokens x top_k x 192 (and the alignment's padding) below 2^31 elements"}}) {
    absl::StatusOr<samples::MoeLayer::Workspace> ws = layer->workspace(tokens);
    EXPECT_TRUE(absl::IsInvalidArgument(ws.status())) << ws.status();
    EXPECT_THAT(std::string(ws.status().message()), HasSubstr(what));
  }
  absl::StatusOr<samples::MoeLayer::Workspace> ws = layer->workspace(10);
  ASSERT_TRUE(ws.ok()) << ws.status();
  auto buffer = [&](int64_t bytes) { return *dev->allocate(bytes); };
  // 10 tokens: x and out 10 x 64 bf16, gate 4 x 64, w1 4 x 192 x 64, w2 4 x 64 x 96.
  const Buffer x = buffer(1280), gate = buffer(512), w1 = buffer(98304), w2 = buffer(49152), out = buffer(1280);
  for (const auto& [status, what] : std::vector<std::pair<absl::Status, std::string>>{
           {layer->launch(x, 11, gate, w1, w2, out, *ws), "tokens must be in [0, 10] (the workspace's); got 11"},
           {layer->launch(x, -1, gate, w1, w2, out, *ws), "got -1"},
           {layer->launch(buffer(1278), 10, gate, w1, w2, out, *ws), "x holds 1278 bytes; 10 tokens need 1280"},
           {layer->launch(x, 10, buffer(510), w1, w2, out, *ws), "gate holds 510 bytes; 10 tokens need 512"},
           {layer->launch(x, 10, gate, buffer(98302), w2, out, *ws), "w1 holds 98302 bytes; 10 tokens need 98304"},
           {layer->launch(x, 10, gate, w1, buffer(49150), out, *ws), "w2 holds 49150 bytes; 10 tokens need 49152"},
           {layer->launch(x, 10, gate, w1, w2, buffer(1278), *ws), "out holds 1278 bytes; 10 tokens need 1280"},
           {layer->launch(x, 10, gate, w1, w2, {x, x, x, x}, out, *ws), "a bf16 layer takes no Fp8Scales"}}) {
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(what));
  }

  // An fp8 layer: e4m3 weights (w1 4 x 192 x 64 bytes, w2 4 x 64 x 96), and its scales.
  samples::MoeLayerConfig fp8 = good;
  fp8.up.in = fp8.down.in = f8e4m3;
  absl::StatusOr<samples::MoeLayer> layer8 = samples::MoeLayer::compile(*dev, fp8);
  ASSERT_TRUE(layer8.ok()) << layer8.status();
  absl::StatusOr<samples::MoeLayer::Workspace> ws8 = layer8->workspace(10);
  ASSERT_TRUE(ws8.ok()) << ws8.status();
  const Buffer w18 = buffer(49152), w28 = buffer(24576), one = buffer(4), each = buffer(16);
  for (const auto& [status, what] : std::vector<std::pair<absl::Status, std::string>>{
           {layer8->launch(x, 10, gate, w18, w28, out, *ws8), "an fp8 layer's launch takes its Fp8Scales"},
           {layer8->launch(x, 10, gate, buffer(49151), w28, {one, each, one, each}, out, *ws8),
            "w1 holds 49151 bytes; 10 tokens need 49152"},
           {layer8->launch(x, 10, gate, w18, w28, {buffer(2), each, one, each}, out, *ws8),
            "x's scale holds 2 bytes; 10 tokens need 4"},
           {layer8->launch(x, 10, gate, w18, w28, {one, one, one, each}, out, *ws8),
            "w1's scales holds 4 bytes; 10 tokens need 16"},
           {layer8->launch(x, 10, gate, w18, w28, {one, each, buffer(3), each}, out, *ws8),
            "a's scale holds 3 bytes; 10 tokens need 4"},
           {layer8->launch(x, 10, gate, w18, w28, {one, each, one, buffer(12)}, out, *ws8),
            "w2's scales holds 12 bytes; 10 tokens need 16"}}) {
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(what));
  }
  EXPECT_TRUE(layer8->launch(x, 10, gate, w18, w28, {one, each, one, each}, out, *ws8).ok());
}

}  // namespace
}  // namespace tessel
