// The MoE token permutation (samples/moe.h) on the device under test
// (cuda:0, or the device TESSEL_GPU_TEST_DEVICE names, e.g. host:1) against
// host:2 and the host reference: random and skewed choices, some outside
// the experts, at a few expert counts, block sizes and chunks. The
// permutation is deterministic, so the targets agree exactly.
#include "samples/moe.h"

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/device.h"
#include "tests/gpu/gpu_test_util.h"

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
    std::vector<std::vector<int32_t>> sorted, blocks, offsets;
    for (const Device& dev : devices_) {
      absl::StatusOr<samples::MoeAlign> align = samples::MoeAlign::compile(dev, experts, block, chunk, warps);
      ASSERT_TRUE(align.ok()) << align.status();
      absl::StatusOr<Buffer> bids = upload(dev, ids), bsorted = dev.allocate(capacity * 4),
                             bblocks = dev.allocate(capacity / block * 4), boffsets = dev.allocate((experts + 1) * 4),
                             bwork = dev.allocate(samples::moe_align_workspace_bytes(n, experts, chunk));
      ASSERT_TRUE(bids.ok() && bsorted.ok() && bblocks.ok() && boffsets.ok() && bwork.ok());
      ASSERT_TRUE(poison<int32_t>(dev, *bsorted, capacity, -7).ok());
      ASSERT_TRUE(poison<int32_t>(dev, *bblocks, capacity / block, -7).ok());
      absl::Status s = align->launch(*bids, n, *bsorted, *bblocks, *boffsets, *bwork);
      ASSERT_TRUE(s.ok()) << s;
      ASSERT_TRUE(dev.synchronize().ok());
      absl::StatusOr<std::vector<int32_t>> o = download<int32_t>(dev, *boffsets, experts + 1);
      ASSERT_TRUE(o.ok());
      const int32_t total = o->back();
      ASSERT_TRUE(total >= 0 && total <= capacity) << total;
      absl::StatusOr<std::vector<int32_t>> so = download<int32_t>(dev, *bsorted, total);
      absl::StatusOr<std::vector<int32_t>> bl = download<int32_t>(dev, *bblocks, total / block);
      ASSERT_TRUE(so.ok() && bl.ok());
      sorted.push_back(*std::move(so));
      blocks.push_back(*std::move(bl));
      offsets.push_back(*std::move(o));
    }
    EXPECT_EQ(offsets[0], offsets[1]) << "device under test against host:2";
    EXPECT_EQ(sorted[0], sorted[1]) << "device under test against host:2";
    EXPECT_EQ(blocks[0], blocks[1]) << "device under test against host:2";
    const samples::MoeAlignment want = samples::moe_align_reference(ids, experts, block);
    EXPECT_EQ(offsets[0], want.offsets) << "against the reference";
    EXPECT_EQ(sorted[0], want.sorted) << "against the reference";
    EXPECT_EQ(blocks[0], want.block_experts) << "against the reference";
  }
}

}  // namespace
}  // namespace tessel::gpu_test
