// The MoE token permutation (samples/moe.h) on the host target against its
// host reference: random choices, skewed ones, every choice on one expert,
// choices outside the experts (dropped), and fewer choices than a chunk.
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "samples/moe.h"
#include "tessel/tessel.h"

namespace tessel {
namespace {

struct Got {
  std::vector<int32_t> sorted, block_experts, offsets;
};

Got align_on(const Device& dev, const Function& fn, const std::vector<int32_t>& ids, int experts, int block) {
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t capacity = samples::moe_align_capacity(n, experts, block);
  Got got;
  auto bids = dev.allocate(std::max<int64_t>(n, 1) * 4), bsorted = dev.allocate(capacity * 4),
       bblocks = dev.allocate(std::max<int64_t>(capacity / block, 1) * 4), boffsets = dev.allocate((experts + 1) * 4);
  EXPECT_TRUE(bids.ok() && bsorted.ok() && bblocks.ok() && boffsets.ok());
  if (n > 0) EXPECT_TRUE(dev.copy_to_device(*bids, ids.data(), n * 4).ok());
  absl::Status s = fn.launch({.grid = 1}, *bids, static_cast<int32_t>(n), *bsorted, *bblocks, *boffsets);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(dev.synchronize().ok());
  got.offsets.resize(experts + 1);
  EXPECT_TRUE(dev.copy_to_host(got.offsets.data(), *boffsets, (experts + 1) * 4).ok());
  const int32_t total = got.offsets.back();
  EXPECT_GE(total, 0);
  EXPECT_LE(total, capacity);
  got.sorted.resize(std::clamp<int64_t>(total, 0, capacity));
  got.block_experts.resize(got.sorted.size() / block);
  if (!got.sorted.empty()) {
    EXPECT_TRUE(dev.copy_to_host(got.sorted.data(), *bsorted, got.sorted.size() * 4).ok());
    EXPECT_TRUE(dev.copy_to_host(got.block_experts.data(), *bblocks, got.block_experts.size() * 4).ok());
  }
  return got;
}

TEST(MoeAlign, MatchesTheHostReference) {
  std::mt19937 gen(std::random_device{}());
  const unsigned seed = gen();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  gen.seed(seed);
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
    absl::StatusOr<Kernel> kernel = samples::moe_align_kernel(c.experts, c.block, c.chunk);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    absl::StatusOr<Function> fn = dev->compile(*kernel);
    ASSERT_TRUE(fn.ok()) << fn.status();
    const Got got = align_on(*dev, *fn, ids, c.experts, c.block);
    const samples::MoeAlignment want = samples::moe_align_reference(ids, c.experts, c.block);
    EXPECT_EQ(got.offsets, want.offsets);
    EXPECT_EQ(got.sorted, want.sorted);
    EXPECT_EQ(got.block_experts, want.block_experts);
  }
}

}  // namespace
}  // namespace tessel
