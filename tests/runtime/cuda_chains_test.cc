#include "runtime/cuda/chains.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessel::cuda {
namespace {

using Kind = ChainOp::Kind;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Gate words of one batch owned by rank 0; deliveries to ranks 1.. of
// `bytes` each, in `pieces` linear copies.
struct Words {
  uint64_t ready = 0, completion = 0, arrival[8] = {};
};

ArmedBatch batch(Words& w, int peers, int64_t bytes, int pieces = 1) {
  ArmedBatch b;
  b.owner = 0;
  b.epoch = 7;
  b.ready = &w.ready;
  b.completion = &w.completion;
  for (int p = 1; p <= peers; ++p) {
    ArmedBatch::Delivery d;
    d.peer = p;
    d.arrival = &w.arrival[p];
    for (int i = 0; i < pieces; ++i) d.copies.push_back({.src = 0, .dst = 0, .width = bytes / pieces});
    b.deliveries.push_back(d);
  }
  return b;
}

std::vector<Kind> kinds_on(const std::vector<ChainOp>& ops, Lane lane) {
  std::vector<Kind> kinds;
  for (const ChainOp& op : ops) {
    if (op.lane == lane) kinds.push_back(op.kind);
  }
  return kinds;
}

constexpr Lane kGate{0, Lane::kGate}, kArrival{0, Lane::kArrival};

TEST(Chains, SmallDeliveryToOnePeerIsOneDirectChainOnItsCopyStream) {
  Words w;
  std::vector<ChainOp> ops = chain_ops(batch(w, 1, 4096, 2));
  EXPECT_THAT(kinds_on(ops, kGate), ElementsAre());
  EXPECT_THAT(kinds_on(ops, kArrival), ElementsAre());
  EXPECT_THAT(kinds_on(ops, Lane{0, 1}), ElementsAre(Kind::kWait, Kind::kCopy, Kind::kCopy, Kind::kWrite));
  EXPECT_EQ(ops[0].word, &w.ready);
  EXPECT_EQ(ops[0].value, 7u);
  EXPECT_THAT(ops.back().words, ElementsAre(&w.arrival[1], &w.completion));
}

TEST(Chains, SmallDeliveriesToSeveralPeersCompleteOnTheArrivalStream) {
  Words w;
  std::vector<ChainOp> ops = chain_ops(batch(w, 2, 4096));
  EXPECT_THAT(kinds_on(ops, kGate), ElementsAre());
  for (int p = 1; p <= 2; ++p) {
    EXPECT_THAT(kinds_on(ops, Lane{0, p}), ElementsAre(Kind::kWait, Kind::kCopy, Kind::kWrite, Kind::kRecord)) << p;
  }
  EXPECT_THAT(kinds_on(ops, kArrival), ElementsAre(Kind::kWaitEvent, Kind::kWaitEvent, Kind::kWrite));
  EXPECT_THAT(ops.back().words, ElementsAre(&w.completion));
}

TEST(Chains, LargeDeliveriesArePipelinedAndTheirArrivalsWrittenInOneCommand) {
  Words w;
  std::vector<ChainOp> ops = chain_ops(batch(w, 3, kPipelineBytes));
  EXPECT_THAT(kinds_on(ops, kGate), ElementsAre(Kind::kWait, Kind::kRecord));
  for (int p = 1; p <= 3; ++p) {
    EXPECT_THAT(kinds_on(ops, Lane{0, p}), ElementsAre(Kind::kWaitEvent, Kind::kCopy, Kind::kRecord)) << p;
  }
  EXPECT_THAT(kinds_on(ops, kArrival), ElementsAre(Kind::kWaitEvent, Kind::kWaitEvent, Kind::kWaitEvent, Kind::kWrite));
  EXPECT_THAT(ops.back().words, ElementsAre(&w.arrival[1], &w.arrival[2], &w.arrival[3], &w.completion));
}

// Events are re-recorded per batch: every wait must come after the record
// it waits for and before that event's next record.
TEST(Chains, EveryEventWaitFollowsItsRecord) {
  Words w;
  for (int64_t bytes : {int64_t{4096}, kPipelineBytes}) {
    std::vector<ChainOp> ops = chain_ops(batch(w, 3, bytes));
    std::vector<Lane> recorded;
    for (const ChainOp& op : ops) {
      if (op.kind == Kind::kRecord) recorded.push_back(op.event);
      if (op.kind == Kind::kWaitEvent) {
        EXPECT_NE(std::find(recorded.begin(), recorded.end(), op.event), recorded.end()) << bytes;
      }
    }
  }
}

TEST(Chains, BatchWithoutPeersCompletesAfterItsGate) {
  Words w;
  std::vector<ChainOp> ops = chain_ops(batch(w, 0, 0));
  EXPECT_THAT(kinds_on(ops, kGate), ElementsAre(Kind::kWait, Kind::kRecord));
  EXPECT_THAT(kinds_on(ops, kArrival), ElementsAre(Kind::kWaitEvent, Kind::kWrite));
  EXPECT_THAT(ops.back().words, ElementsAre(&w.completion));
}

TEST(Chains, CountsCommandsPerLane) {
  Words w;
  LaneCounts counts;
  for (int i = 0; i < 10; ++i) count_ops(chain_ops(batch(w, 2, kPipelineBytes, 2)), counts);
  EXPECT_EQ(counts[kGate], 20);
  EXPECT_EQ((counts[Lane{0, 1}]), 40);
  EXPECT_EQ((counts[Lane{0, 2}]), 40);
  EXPECT_EQ(counts[kArrival], 30);
}

// The tail joins into each owner's arrival stream the copy streams it has
// not waited for already, then writes the owner's done word.
TEST(Chains, TailJoinsCopyStreamsNotAlreadyJoinedAndWritesDoneWords) {
  Words w;
  uint64_t done0 = 0, done1 = 0;
  ArmedBatch other = batch(w, 1, 4096);
  other.owner = 1;
  other.deliveries[0].peer = 0;
  // Rank 0: a pipelined batch to 1 and 2, then a direct one to 1 alone
  // (its copy stream ends uncovered); rank 1: a direct one to 0.
  std::vector<std::vector<ChainOp>> batches = {chain_ops(batch(w, 2, kPipelineBytes)), chain_ops(batch(w, 1, 4096)),
                                               chain_ops(other)};
  std::vector<ChainOp> ops = tail_ops(batches, {{0, &done0}, {1, &done1}}, 42);
  ASSERT_EQ(ops.size(), 6u);
  EXPECT_EQ(ops[0].kind, Kind::kRecord);
  EXPECT_EQ(ops[0].lane, (Lane{0, 1}));
  EXPECT_EQ(ops[1].kind, Kind::kWaitEvent);
  EXPECT_EQ(ops[1].lane, kArrival);
  EXPECT_EQ(ops[1].event, (Lane{0, 1}));
  EXPECT_EQ(ops[2].lane, (Lane{1, 0}));
  EXPECT_EQ(ops[3].lane, (Lane{1, Lane::kArrival}));
  EXPECT_EQ(ops[4].kind, Kind::kWrite);
  EXPECT_EQ(ops[4].lane, kArrival);
  EXPECT_THAT(ops[4].words, ElementsAre(&done0));
  EXPECT_EQ(ops[4].value, 42u);
  EXPECT_THAT(ops[5].words, ElementsAre(&done1));
  EXPECT_EQ(ops[5].lane, (Lane{1, Lane::kArrival}));
}

std::string name(Lane lane) { return absl::StrCat("lane ", lane.owner, "/", lane.key); }

TEST(Chains, CapacityCountsWhatIsQueuedAlready) {
  LaneCounts queued{{Lane{0, 1}, 601}}, adding{{Lane{0, 1}, 400}, {kGate, 900}};
  EXPECT_TRUE(check_capacity({}, adding, 1000, name).ok());
  absl::Status s = check_capacity(queued, adding, 1000, name);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("queue 400 commands on lane 0/1 (601 more are queued"));
  EXPECT_THAT(s.message(), HasSubstr("at most 1000"));
  EXPECT_TRUE(check_capacity(queued, adding, 1001, name).ok());
}

}  // namespace
}  // namespace tessel::cuda
