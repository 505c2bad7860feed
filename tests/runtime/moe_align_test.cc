// The MoE token permutation (samples/moe.h) on the host target against its
// host reference: random choices, skewed ones, every choice on one expert,
// choices outside the experts (dropped), fewer choices than a chunk, and
// none; and the errors bad shapes and short buffers get.
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "samples/moe.h"
#include "tessel/tessel.h"
#include "tests/seeded.h"

namespace tessel {
namespace {

struct Got {
  std::vector<int32_t> sorted, block_experts, offsets, positions;
};

Got align_on(const Device& dev, const samples::MoeAlign& align, const std::vector<int32_t>& ids, int experts,
             int block) {
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t capacity = samples::moe_align_capacity(n, experts, block);
  Got got;
  absl::StatusOr<Buffer> bids = dev.allocate(std::max<int64_t>(n, 1) * 4);
  absl::StatusOr<samples::MoeAlignBuffers> out = align.buffers(dev, n);
  EXPECT_TRUE(bids.ok() && out.ok());
  if (n > 0) {
    EXPECT_TRUE(dev.copy_to_device(*bids, ids.data(), n * 4).ok());
  }
  absl::Status s = align.launch(*bids, static_cast<int32_t>(n), *out);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(dev.synchronize().ok());
  got.offsets.resize(experts + 1);
  EXPECT_TRUE(dev.copy_to_host(got.offsets.data(), out->offsets, (experts + 1) * 4).ok());
  got.positions.resize(n);
  EXPECT_TRUE(dev.copy_to_host(got.positions.data(), out->positions, n * 4).ok());
  const int32_t total = got.offsets.back();
  EXPECT_GE(total, 0);
  EXPECT_LE(total, capacity);
  got.sorted.resize(std::clamp<int64_t>(total, 0, capacity));
  got.block_experts.resize(got.sorted.size() / block);
  if (!got.sorted.empty()) {
    EXPECT_TRUE(dev.copy_to_host(got.sorted.data(), out->sorted, got.sorted.size() * 4).ok());
    EXPECT_TRUE(dev.copy_to_host(got.block_experts.data(), out->block_experts, got.block_experts.size() * 4).ok());
  }
  return got;
}

TEST(MoeAlign, MatchesTheHostReference) {
  TESSEL_SEEDED_GEN(gen);
  absl::StatusOr<Device> dev = Device::open("host:2");
  ASSERT_TRUE(dev.ok()) << dev.status();
  struct Case {
    int experts, block, chunk;
    int64_t n;
    const char* what;
  };
  for (const Case& c : std::vector<Case>{{8, 16, 64, 1000, "random"},
                                         {64, 64, 256, 4096, "skewed"},
                                         {60, 32, 128, 777, "one expert"},
                                         {16, 16, 64, 500, "some outside"},
                                         {256, 128, 1024, 100, "fewer than a chunk"},
                                         {4, 8, 64, 0, "none"}}) {
    SCOPED_TRACE(::testing::Message() << c.what << ": " << c.n << " choices, " << c.experts << " experts, blocks of "
                                      << c.block << ", chunks of " << c.chunk);
    const std::string what = c.what;
    std::vector<int32_t> ids(c.n);
    for (int32_t& v : ids) {
      v = std::uniform_int_distribution<int32_t>(0, c.experts - 1)(gen);
      if (what == "skewed" && gen() % 4 != 0) v = static_cast<int32_t>(gen() % 3);
      if (what == "one expert") v = 7;
      if (what == "some outside" && gen() % 5 == 0)
        v = gen() % 2 == 0 ? -1 : c.experts + static_cast<int32_t>(gen() % 3);
    }
    absl::StatusOr<samples::MoeAlign> align = samples::MoeAlign::compile(*dev, c.experts, c.block, c.chunk);
    ASSERT_TRUE(align.ok()) << align.status();
    const Got got = align_on(*dev, *align, ids, c.experts, c.block);
    const samples::MoeAlignment want = samples::moe_align_reference(ids, c.experts, c.block);
    EXPECT_EQ(got.offsets, want.offsets);
    EXPECT_EQ(got.sorted, want.sorted);
    EXPECT_EQ(got.block_experts, want.block_experts);
    EXPECT_EQ(got.positions, want.positions);
  }
}

TEST(MoeAlign, BadShapesAndBuffersAreErrors) {
  for (const auto& [experts, block, chunk, what] :
       std::vector<std::tuple<int, int, int, std::string>>{{0, 16, 64, "experts must be positive, got 0"},
                                                           {8, 0, 64, "block must be positive, got 0"},
                                                           {8, 16, 96, "chunk must be a power of two, got 96"},
                                                           {8, 16, 0, "chunk must be a power of two, got 0"}}) {
    absl::StatusOr<samples::MoeAlignKernels> kernels = samples::moe_align_kernels(experts, block, chunk);
    EXPECT_TRUE(absl::IsInvalidArgument(kernels.status())) << kernels.status();
    EXPECT_THAT(std::string(kernels.status().message()), ::testing::HasSubstr(what));
  }
  absl::StatusOr<Device> dev = Device::open("host:1");
  ASSERT_TRUE(dev.ok()) << dev.status();
  absl::StatusOr<samples::MoeAlign> align = samples::MoeAlign::compile(*dev, 8, 16, 64);
  ASSERT_TRUE(align.ok()) << align.status();
  // 100 choices: a capacity of 100 + 8 * 15 = 220 positions, 13 blocks, two
  // programs' counts and the padding starts in the workspace.
  auto buffer = [&](int64_t bytes) { return *dev->allocate(bytes); };
  const Buffer ids = buffer(400);
  absl::StatusOr<samples::MoeAlignBuffers> out = align->buffers(*dev, 100);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->sorted.bytes(), 880u);
  EXPECT_EQ(out->workspace.bytes(), 4u * 3 * 8);
  // `out` with one of its buffers `bytes` long.
  auto with = [&](Buffer samples::MoeAlignBuffers::*field, int64_t bytes) {
    samples::MoeAlignBuffers o = *out;
    o.*field = buffer(bytes);
    return o;
  };
  using B = samples::MoeAlignBuffers;
  for (const auto& [status, what] : std::vector<std::pair<absl::Status, std::string>>{
           {align->launch(ids, -1, *out), "n must not be negative, got -1"},
           {align->buffers(*dev, -1).status(), "n must not be negative, got -1"},
           {align->launch(buffer(396), 100, *out), "ids holds 396 bytes; 100 choices need 400"},
           {align->launch(ids, 100, with(&B::sorted, 876)), "sorted holds 876 bytes; 100 choices need 880"},
           {align->launch(ids, 100, with(&B::block_experts, 48)), "block_experts holds 48 bytes; 100 choices need 52"},
           {align->launch(ids, 100, with(&B::offsets, 32)), "offsets holds 32 bytes; 100 choices need 36"},
           {align->launch(ids, 100, with(&B::positions, 396)), "positions holds 396 bytes; 100 choices need 400"},
           {align->launch(ids, 100, with(&B::workspace, 64)), "workspace holds 64 bytes; 100 choices need 96"}}) {
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_THAT(std::string(status.message()), ::testing::HasSubstr(what));
  }
}

}  // namespace
}  // namespace tessel
