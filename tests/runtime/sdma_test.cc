// SDMA packets pinned field by field to the gfx9 layouts
// (../shared/reference/amd.md), and the software engine executing chains of
// them from a user-mode ring: polls that hold until a gate opens, linear and
// 2-D copies, the arrival add, ring wrap-around, the half-ring limit,
// arming order, and traps on malformed packets.
#include <atomic>
#include <chrono>
#include <numeric>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/sdma/engine.h"
#include "runtime/sdma/packets.h"

namespace tessel::sdma {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint64_t kSrc = 0x0000'1234'5678'9ABCull, kDst = 0x0000'7FFF'0000'1000ull;

TEST(SdmaPackets, NopCountsTheDwordsAfterItsHeader) {
  Dwords d;
  nop(d, 1);
  nop(d, 4);
  EXPECT_THAT(d, ElementsAre(0u, 3u << 16, 0u, 0u, 0u));
}

TEST(SdmaPackets, CopyLinearIsSevenDwordsWithAOneBasedCount) {
  Dwords d;
  copy_linear(d, kSrc, kDst, 100);
  EXPECT_THAT(d, ElementsAre(0x1u, 99u, 0u, 0x56789ABCu, 0x1234u, 0x1000u, 0x7FFFu));
}

TEST(SdmaPackets, CopyLinearSplitsAtTheLargestCount) {
  Dwords d;
  const uint64_t mib = 1 << 20;
  copy_linear(d, kSrc, kDst, 10 * mib, kMaxLinearCopyAnySdma4);
  ASSERT_EQ(d.size(), 3u * kCopyLinearDwords);
  EXPECT_EQ(d[1], 4 * mib - 1);
  EXPECT_EQ(d[7 + 1], 4 * mib - 1);
  EXPECT_EQ(d[14 + 1], 2 * mib - 1);
  EXPECT_EQ(address(d[14 + 3], d[14 + 4]), kSrc + 8 * mib);
  EXPECT_EQ(address(d[14 + 5], d[14 + 6]), kDst + 8 * mib);
  // gfx942's 30-bit count: one packet up to 1 GiB.
  Dwords big;
  copy_linear(big, kSrc, kDst, kMaxLinearCopy);
  EXPECT_EQ(big.size(), static_cast<size_t>(kCopyLinearDwords));
  EXPECT_EQ(big[1], (1u << 30) - 1);
}

TEST(SdmaPackets, SubWindowHoldsPitchesAndRectangleMinusOne) {
  // A 16 x 16 fp32 tile out of rows of 1024 bytes into rows of 256.
  Dwords d;
  copy_sub_window(d, {.src = kSrc, .dst = kDst, .width = 64, .height = 16, .src_pitch = 1024, .dst_pitch = 256});
  ASSERT_EQ(d.size(), static_cast<size_t>(kSubWindowDwords));
  EXPECT_EQ(d[0], 0x2401u);  // op 1, sub 36
  EXPECT_EQ(address(d[1], d[2]), kSrc);
  EXPECT_EQ(d[6], 1023u);
  EXPECT_EQ(d[7], 1024u * 16);
  EXPECT_EQ(address(d[9], d[10]), kDst);
  EXPECT_EQ(d[14], 255u);
  EXPECT_EQ(d[17], 16u * 4 - 1);
  EXPECT_EQ(d[18], 15u);
  EXPECT_EQ(d[19], 0u);
}

TEST(SdmaPackets, PollAtomicAndFenceHeaders) {
  Dwords poll, atomic, f;
  poll_greater_equal(poll, kSrc, 7);
  EXPECT_THAT(poll, ElementsAre(0xD0000008u, 0x56789ABCu, 0x1234u, 7u, 0xFFFFFFFFu, 10u | 0xFFFu << 16));
  atomic_add64(atomic, kDst, 0x1'0000'0002ull);
  EXPECT_THAT(atomic, ElementsAre(0x5E00000Au, 0x1000u, 0x7FFFu, 2u, 1u, 0u, 0u, 0u));  // (47 << 25) | 10
  fence(f, kDst, 9);
  EXPECT_THAT(f, ElementsAre(5u, 0x1000u, 0x7FFFu, 9u));
}

TEST(SdmaPackets, DeliveryChainPollsCopiesThenAdds) {
  uint64_t ready = 0, arrival = 0;
  std::vector<ChainCopy> copies = {
      {.src = kSrc, .dst = kDst, .width = 256, .height = 1},
      {.src = kSrc, .dst = kDst, .width = 64, .height = 4, .src_pitch = 128, .dst_pitch = 64},  // a window
      {.src = kSrc, .dst = kDst, .width = 64, .height = 4, .src_pitch = 64, .dst_pitch = 64}};  // dense: linear
  Dwords d = delivery_chain(&ready, 3, copies, &arrival, 1);
  ASSERT_EQ(d.size(), static_cast<size_t>(kPollDwords + kCopyLinearDwords + kSubWindowDwords + kCopyLinearDwords +
                                          kAtomicDwords));
  EXPECT_EQ(op_of(d[0]), kOpPollRegmem);
  EXPECT_EQ(d[3], 3u);
  EXPECT_EQ(sub_op_of(d[kPollDwords + kCopyLinearDwords]), kSubCopyLinearLargeSubWindow);
  EXPECT_EQ(d[kPollDwords + kCopyLinearDwords + kSubWindowDwords + 1], 255u);
  EXPECT_EQ(op_of(d[d.size() - kAtomicDwords]), kOpAtomic);
}

absl::StatusOr<std::unique_ptr<Queue>> queue(int64_t bytes = 4096) { return software_queue(bytes, "test"); }

TEST(SdmaEngine, ChainWaitsForItsGateThenCopiesAndAdds) {
  std::unique_ptr<Queue> q = *queue();
  std::vector<uint8_t> src(1000), dst(1000, 0);
  std::iota(src.begin(), src.end(), 0);
  uint64_t ready = 0, arrival = 5;
  ChainCopy c{
      .src = reinterpret_cast<uintptr_t>(src.data()), .dst = reinterpret_cast<uintptr_t>(dst.data()), .width = 1000};
  ASSERT_TRUE(q->submit(delivery_chain(&ready, 1, {c}, &arrival, 1)).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(dst[999], 0);  // the gate is closed
  EXPECT_EQ(std::atomic_ref<uint64_t>(arrival).load(), 5u);
  std::atomic_ref<uint64_t>(ready).store(1, std::memory_order_release);
  ASSERT_TRUE(q->drain().ok());
  EXPECT_EQ(dst, src);
  EXPECT_EQ(arrival, 6u);
  EXPECT_EQ(q->read_position(), q->write_position());
}

TEST(SdmaEngine, SubWindowCopiesRowsBetweenPitches) {
  std::unique_ptr<Queue> q = *queue();
  std::vector<uint8_t> src(8 * 32), dst(8 * 16, 0xEE);
  std::iota(src.begin(), src.end(), 0);
  Dwords d;
  copy_sub_window(d, {.src = reinterpret_cast<uintptr_t>(src.data() + 4),
                      .dst = reinterpret_cast<uintptr_t>(dst.data()),
                      .width = 16,
                      .height = 8,
                      .src_pitch = 32,
                      .dst_pitch = 16});
  ASSERT_TRUE(q->submit(d).ok());
  ASSERT_TRUE(q->drain().ok());
  for (int r = 0; r < 8; ++r) {
    for (int x = 0; x < 16; ++x) ASSERT_EQ(dst[r * 16 + x], src[r * 32 + 4 + x]) << r << "," << x;
  }
}

TEST(SdmaEngine, ChainsNeverCrossTheRingsEnd) {
  std::unique_ptr<Queue> q = *queue(256);
  uint64_t word = 0;
  Dwords add;
  atomic_add64(add, reinterpret_cast<uintptr_t>(&word), 1);  // 32 bytes
  Dwords poll;
  poll_greater_equal(poll, reinterpret_cast<uintptr_t>(&word), 0);  // 24 bytes, always true
  // 24 + 32 + 32 + ... : the ninth chain would cross byte 256 and is placed after a NOP.
  int submitted = 0;
  for (int i = 0; i < 40; ++i) {
    Dwords chain = poll;
    chain.insert(chain.end(), add.begin(), add.end());
    ASSERT_TRUE(q->submit(chain).ok()) << i;
    ASSERT_TRUE(q->drain().ok()) << i;
    ++submitted;
  }
  EXPECT_EQ(word, static_cast<uint64_t>(submitted));
  EXPECT_GT(q->write_position(), 40u * 56);  // NOPs padded the wraps
  EXPECT_EQ(q->write_position() % 4, 0u);
}

TEST(SdmaEngine, AtMostHalfTheRingIsArmed) {
  std::unique_ptr<Queue> q = *queue(256);
  uint64_t ready = 0;
  Dwords chain;
  poll_greater_equal(chain, reinterpret_cast<uintptr_t>(&ready), 1);    // 24 bytes, held at the gate
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(q->submit(chain).ok()) << i;  // 120 of 128 bytes
  absl::Status full = q->submit(chain);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.message(), HasSubstr("SDMA queue test: a chain of 24 bytes does not fit: 120 bytes are armed of the "
                                        "128 a queue may hold (half its ring)"));
  std::atomic_ref<uint64_t>(ready).store(1, std::memory_order_release);
  ASSERT_TRUE(q->drain().ok());
  EXPECT_TRUE(q->submit(chain).ok());
}

TEST(SdmaEngine, ChainsRunInArmingOrder) {
  std::unique_ptr<Queue> q = *queue();
  uint64_t first_gate = 0, second_gate = 1, first = 0, second = 0;
  ASSERT_TRUE(q->submit(delivery_chain(&first_gate, 1, {}, &first, 1)).ok());
  ASSERT_TRUE(q->submit(delivery_chain(&second_gate, 1, {}, &second, 1)).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // The second gate is open, but its chain is behind the first's.
  EXPECT_EQ(std::atomic_ref<uint64_t>(second).load(), 0u);
  std::atomic_ref<uint64_t>(first_gate).store(1, std::memory_order_release);
  ASSERT_TRUE(q->drain().ok());
  EXPECT_EQ(first, 1u);
  EXPECT_EQ(second, 1u);
}

TEST(SdmaEngine, MalformedPacketsTrapWithWhatWasWrong) {
  {
    std::unique_ptr<Queue> q = *queue();
    ASSERT_TRUE(q->submit({99, 0, 0}).ok());
    absl::Status s = q->drain();
    EXPECT_THAT(s.message(),
                HasSubstr("SDMA engine test: trap at ring byte 0 (position 0): op 99 is not an SDMA packet"));
    // A trapped queue takes no more chains.
    EXPECT_EQ(q->submit({0}).code(), s.code());
  }
  {
    std::unique_ptr<Queue> q = *queue();
    Dwords d;
    copy_linear(d, kSrc, kDst, 8);
    d.resize(4);  // cut short
    ASSERT_TRUE(q->submit(d).ok());
    EXPECT_THAT(q->drain().message(), HasSubstr("a packet of op 1 needs 7 dwords; the submission ends after 4"));
  }
  {
    std::unique_ptr<Queue> q = *queue();
    uint64_t word = 0;
    Dwords d;
    atomic_add64(d, reinterpret_cast<uintptr_t>(&word), 1);
    d[0] = kOpAtomic | 8u << 25;  // CMPSWAP
    ASSERT_TRUE(q->submit(d).ok());
    EXPECT_THAT(q->drain().message(), HasSubstr("ATOMIC operation 8 (this engine executes ADD_RTN_64, 47)"));
  }
  {
    std::unique_ptr<Queue> q = *queue();
    uint32_t word = 0;
    Dwords d;
    poll_greater_equal(d, reinterpret_cast<uintptr_t>(&word), 1, 0xFFFFFFFF, 10, 3);
    ASSERT_TRUE(q->submit(d).ok());
    EXPECT_THAT(q->drain().message(), HasSubstr("POLL_REGMEM gave up after 3 retries"));
  }
  // Packets the engine does not execute: each trap names what it met.
  uint32_t word = 0;
  Dwords register_poll, window, tiled;
  poll_greater_equal(register_poll, reinterpret_cast<uintptr_t>(&word), 0);
  register_poll[0] &= ~(1u << 31);  // a register, not memory
  copy_sub_window(window, {.src = kSrc, .dst = kDst, .width = 16, .height = 2, .src_pitch = 32, .dst_pitch = 32});
  window[19] = 1;  // depth 2
  copy_linear(tiled, kSrc, kDst, 16);
  tiled[0] = kOpCopy | 1u << 8;  // COPY_TILED
  for (auto [packet, what] :
       {std::pair{register_poll, "POLL_REGMEM on a register or with compare function 5"},
        std::pair{window, "LINEAR_LARGE_SUB_WINDOW with a depth other than 1 or a z offset"},
        std::pair{tiled, "COPY with sub-op 1 (this engine executes LINEAR 0 and LINEAR_LARGE_SUB_WINDOW 36)"}}) {
    std::unique_ptr<Queue> q = *queue();
    ASSERT_TRUE(q->submit(packet).ok());
    EXPECT_THAT(q->drain().message(), HasSubstr(what));
  }
  EXPECT_THAT(software_queue(300, "odd").status().message(),
              HasSubstr("SDMA queue odd: the ring must be a power of two of at least 256 bytes, got 300"));
}

// A ring in memory another library hands out (as the KFD thunk does): the
// host side rings the doorbell word only, and the engine finds it by polling.
struct Words {
  std::vector<uint32_t> ring = std::vector<uint32_t>(1024);
  uint64_t read = 0, write = 0, doorbell = 0;
  Ring at() { return {ring.data(), 4096, &read, &write, &doorbell}; }
};

TEST(SdmaEngine, FindsDoorbellsNobodyWakesItFor) {
  Words w;
  Engine engine(w.at(), "polled", absl::Microseconds(50));
  Queue q(w.at(), "polled");
  uint64_t ready = 1, arrival = 0;
  std::vector<uint8_t> src(64, 7), dst(64, 0);
  ChainCopy c{.src = reinterpret_cast<uintptr_t>(src.data()), .dst = reinterpret_cast<uintptr_t>(dst.data()), .width = 64};
  ASSERT_TRUE(q.submit(delivery_chain(&ready, 1, {c}, &arrival, 3)).ok());
  EXPECT_EQ(w.write, w.doorbell);
  ASSERT_TRUE(q.drain().ok());
  EXPECT_EQ(dst, src);
  EXPECT_EQ(arrival, 3u);
  EXPECT_EQ(w.read, w.write);
}

TEST(SdmaEngine, DrainGivesUpOnAnEngineThatNeverRuns) {
  Words w;
  Queue q(w.at(), "idle");  // no engine behind it
  Dwords d;
  nop(d, 4);
  ASSERT_TRUE(q.submit(d).ok());
  absl::Status s = q.drain(absl::Milliseconds(20));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr("SDMA queue idle: the engine left 16 bytes unconsumed for 20ms"));
}

TEST(SdmaEngine, StopsInsideAPollThatNeverOpens) {
  uint64_t never = 0;
  std::unique_ptr<Queue> q = *queue();
  ASSERT_TRUE(q->submit(delivery_chain(&never, 1, {}, nullptr, 0)).ok());
  q.reset();  // returns: the engine leaves the poll
  SUCCEED();
}

}  // namespace
}  // namespace tessel::sdma
