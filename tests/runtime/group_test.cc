// Groups of host ranks: symmetric allocation (same offset everywhere,
// zero-filled, growth that never moves what is mapped, reuse of freed
// ranges), host<->rank copies, copies between ranks, and bad input.
#include "runtime/plans/group.h"

#include <cstring>
#include <numeric>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kChunk = 64 * 1024;

Group small_group(int ranks) { return *Group::host(ranks, 1, {.reserve_bytes = 64 << 20, .chunk_bytes = kChunk}); }

TEST(Group, BuffersSitAtOneOffsetOnEveryRankAndStartZeroed) {
  Group g = small_group(3);
  ASSERT_EQ(g.size(), 3);
  SymmetricBuffer a = *g.allocate(1000), b = *g.allocate(5000);
  EXPECT_NE(a.offset(), b.offset());
  EXPECT_EQ(b.offset() % 256, 0);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(static_cast<char*>(b.data(r)) - static_cast<char*>(a.data(r)), b.offset() - a.offset());
    std::vector<char> bytes(5000, 1);
    ASSERT_TRUE(b.read(r, bytes.data(), bytes.size()).ok());
    EXPECT_EQ(std::count(bytes.begin(), bytes.end(), 0), 5000);
  }
  EXPECT_NE(a.data(0), a.data(1));
  EXPECT_EQ(a.data(3), nullptr);
}

TEST(Group, GrowthKeepsEarlierAddressesAndContents) {
  Group g = small_group(2);
  SymmetricBuffer first = *g.allocate(1024);
  std::vector<int> v(256);
  std::iota(v.begin(), v.end(), 7);
  ASSERT_TRUE(first.write(1, v.data(), 1024).ok());
  void* where = first.data(1);
  int64_t mapped = g.mapped_bytes();
  std::vector<SymmetricBuffer> more;
  for (int i = 0; i < 5; ++i) more.push_back(*g.allocate(3 * kChunk / 2));
  EXPECT_GT(g.mapped_bytes(), mapped);
  EXPECT_EQ(g.mapped_bytes() % kChunk, 0);
  EXPECT_EQ(first.data(1), where);
  std::vector<int> back(256);
  ASSERT_TRUE(first.read(1, back.data(), 1024).ok());
  EXPECT_EQ(back, v);
  // The new memory is writable end to end on every rank.
  for (const SymmetricBuffer& b : more) std::memset(b.data(0), 0xAB, b.bytes());
}

TEST(Group, FreedRangesAreReusedAndZeroedAgain) {
  Group g = small_group(2);
  int64_t offset = 0;
  {
    SymmetricBuffer a = *g.allocate(4096);
    offset = a.offset();
    std::memset(a.data(0), 0xFF, 4096);
  }
  SymmetricBuffer b = *g.allocate(4096);
  EXPECT_EQ(b.offset(), offset);
  EXPECT_EQ(static_cast<unsigned char*>(b.data(0))[100], 0);
}

TEST(Group, CopyToPeerMovesBytesBetweenRanks) {
  Group g = small_group(2);
  SymmetricBuffer b = *g.allocate(10000);
  std::memset(b.data(0), 0x5A, 10000);
  ASSERT_TRUE(g.copy_to_peer(0, 1, b.data(1), b.data(0), 10000).ok());
  EXPECT_EQ(static_cast<unsigned char*>(b.data(1))[9999], 0x5A);
}

TEST(GroupErrors, NoDevices) {
  absl::StatusOr<Group> g = Group::create({});
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("no devices"));
}

TEST(GroupErrors, SameDeviceTwice) {
  Device d = *Device::open("host:1");
  absl::StatusOr<Group> g = Group::create({d, d});
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("ranks 0 and 1 are the same device"));
}

TEST(GroupErrors, BadRankCount) {
  EXPECT_THAT(Group::host(0).status().message(), HasSubstr("0 ranks"));
}

TEST(GroupErrors, BadOptions) {
  absl::StatusOr<Group> g = Group::host(2, 1, {.reserve_bytes = 0});
  EXPECT_THAT(g.status().message(), HasSubstr("reserve_bytes (0)"));
}

TEST(GroupErrors, AllocationPastTheReservation) {
  Group g = *Group::host(2, 1, {.reserve_bytes = 1 << 20, .chunk_bytes = kChunk});
  absl::StatusOr<SymmetricBuffer> b = g.allocate(2 << 20);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(b.status().message(), HasSubstr("reserve_bytes"));
  EXPECT_THAT(g.allocate(0).status().message(), HasSubstr("0 bytes"));
}

TEST(GroupErrors, BufferAccessOutOfRange) {
  Group g = small_group(2);
  SymmetricBuffer b = *g.allocate(100);
  char bytes[200];
  EXPECT_EQ(b.read(0, bytes, 101).code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(b.write(0, bytes, 10, 95).message(), HasSubstr("10 bytes at offset 95"));
  EXPECT_THAT(b.read(2, bytes, 1).message(), HasSubstr("rank 2"));
  EXPECT_THAT(SymmetricBuffer().read(0, bytes, 1).message(), HasSubstr("empty buffer"));
}

TEST(GroupErrors, CopyToPeerOutsideTheSymmetricSpaceOrToItself) {
  Group g = small_group(2);
  SymmetricBuffer b = *g.allocate(100);
  std::vector<char> outside(100);
  EXPECT_THAT(g.copy_to_peer(0, 1, b.data(1), outside.data(), 100).message(), HasSubstr("symmetric allocation"));
  EXPECT_THAT(g.copy_to_peer(0, 0, b.data(0), b.data(0), 100).message(), HasSubstr("ranks must differ"));
  EXPECT_THAT(g.copy_to_peer(0, 2, b.data(1), b.data(0), 100).message(), HasSubstr("ranks must differ"));
}

}  // namespace
}  // namespace tessel
