// Schedules of triggered copy plans: the builders cover every byte of each
// shard exactly once, waves follow the persistent kernel's tile order,
// split_linear keeps coverage under the engine's limit, digests are stable,
// and every validate() error names what is wrong.
#include "runtime/plans/schedule.h"

#include <algorithm>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessel {

// Readable segments in gtest's failure messages.
void PrintTo(const Segment& s, std::ostream* os) {
  *os << "{" << s.offset << ", " << s.width << ", " << s.height << ", " << s.pitch << "}";
}

namespace {

using ::testing::HasSubstr;

// A fresh seed per run, so that many runs explore many shapes; the trace
// prints it for replaying a failure.
uint32_t fresh_seed() { return std::random_device{}(); }

int64_t pick(std::mt19937& rng, int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }

ScheduleView random_view(std::mt19937& rng) {
  ScheduleView v{pick(rng, 1, 33), pick(rng, 1, 33), int64_t{1} << pick(rng, 0, 3)};
  if (pick(rng, 0, 1)) v.pitch = v.row_bytes() + pick(rng, 0, 24);
  return v;
}

std::string show(const ScheduleView& v) {
  return absl::StrCat("view rows ", v.rows, " cols ", v.cols, " elem ", v.elem_bytes, " pitch ", v.pitch);
}

// Builds each rank's byte-coverage bitmap: every byte of the view's rows must
// be in exactly one segment, and row padding in none. Every rank must also
// hold the same batches (an all-gather), and validate() must accept it.
::testing::AssertionResult covers_once(const Schedule& s, const ScheduleView& v, int world) {
  if (s.world_size() != world) return ::testing::AssertionFailure() << s.world_size() << " ranks, want " << world;
  if (s.shard_bytes() != v.shard_bytes()) return ::testing::AssertionFailure() << "shard bytes " << s.shard_bytes();
  if (absl::Status st = validate(s); !st.ok()) return ::testing::AssertionFailure() << st;
  for (int r = 0; r < world; ++r) {
    if (s.batches(r) != s.batches(0)) return ::testing::AssertionFailure() << "rank " << r << " differs from rank 0";
    std::vector<int> count(s.shard_bytes(), 0);
    for (const Batch& b : s.batches(r)) {
      for (const Segment& seg : b.segments) {
        for (int64_t k = 0; k < seg.height; ++k) {
          for (int64_t x = 0; x < seg.width; ++x) ++count[seg.offset + k * seg.pitch + x];
        }
      }
    }
    for (int64_t i = 0; i < s.shard_bytes(); ++i) {
      const int want = i % v.row_pitch() < v.row_bytes() ? 1 : 0;
      if (count[i] != want) {
        return ::testing::AssertionFailure() << "rank " << r << " byte " << i << " covered " << count[i] << " times";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(ScheduleView, RejectsBadShapesNamingTheField) {
  EXPECT_THAT(check_view({0, 4}).message(), HasSubstr("rows 0 must be >= 1"));
  EXPECT_THAT(check_view({4, 0}).message(), HasSubstr("cols 0 must be >= 1"));
  EXPECT_THAT(check_view({4, 4, 0}).message(), HasSubstr("elem_bytes 0 must be >= 1"));
  EXPECT_THAT(check_view({4, 4, 4, 15}).message(), HasSubstr("pitch 15 is less than a row's 16 bytes"));
  EXPECT_THAT(check_view({int64_t{1} << 40, int64_t{1} << 30}).message(), HasSubstr("rows exceed 2^62 bytes"));
  EXPECT_TRUE(check_view({4, 4, 4, 16}).ok());
  EXPECT_THAT(whole({0, 4}, 2).status().message(), HasSubstr("whole: view: rows 0"));
}

TEST(ScheduleWhole, CoversEachShardOnce) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(absl::StrCat("seed ", seed));
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 200; ++trial) {
    const ScheduleView v = random_view(rng);
    const int world = pick(rng, 1, 4), contributors = pick(rng, 1, 9);
    SCOPED_TRACE(show(v));
    absl::StatusOr<Schedule> s = whole(v, world, contributors);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE(covers_once(*s, v, world));
    ASSERT_EQ(s->batches(0).size(), 1u);
    EXPECT_EQ(s->batches(0)[0].contributors, contributors);
    EXPECT_EQ(s->bytes(), world * v.shard_bytes());
  }
}

TEST(ScheduleWhole, DenseShardIsOneLinearSegmentPaddedIsOneWindow) {
  EXPECT_EQ(whole({3, 4, 2}, 2)->batches(1)[0].segments, (std::vector<Segment>{{0, 24}}));
  EXPECT_EQ(whole({3, 4, 2, 10}, 2)->batches(1)[0].segments, (std::vector<Segment>{{0, 8, 3, 10}}));
  EXPECT_EQ(whole(ScheduleView::linear(100, 4), 1)->batches(0)[0].segments, (std::vector<Segment>{{0, 400}}));
  EXPECT_EQ(whole({3, 4}, 2)->shard_offset(1), 12);
}

TEST(ScheduleWhole, RejectsBadArguments) {
  EXPECT_THAT(whole({4, 4}, 0).status().message(), HasSubstr("whole: world 0 must be >= 1"));
  EXPECT_THAT(whole({4, 4}, 2, 0).status().message(), HasSubstr("whole: contributors 0 must be >= 1"));
}

TEST(ScheduleChunks, CoversEachShardOnceLastChunkSmaller) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(absl::StrCat("seed ", seed));
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 200; ++trial) {
    const ScheduleView v = random_view(rng);
    const int world = pick(rng, 1, 4);
    const int64_t n = pick(rng, 1, v.rows);
    SCOPED_TRACE(absl::StrCat(show(v), " n ", n));
    absl::StatusOr<Schedule> s = chunks(v, world, n);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE(covers_once(*s, v, world));
    ASSERT_EQ(static_cast<int64_t>(s->batches(0).size()), n);
    EXPECT_EQ(s->num_batches(), world * n);
    // Rows per batch, in order: never growing, at most one apart, so the
    // last is smaller exactly when n does not divide rows.
    std::vector<int64_t> rows;
    for (const Batch& b : s->batches(0)) {
      ASSERT_EQ(b.segments.size(), 1u);
      const Segment& seg = b.segments[0];
      rows.push_back(seg.height > 1 ? seg.height : seg.width / v.row_bytes());
      EXPECT_EQ(seg.offset % v.row_pitch(), 0);
    }
    EXPECT_EQ(rows.front() - rows.back(), v.rows % n == 0 ? 0 : 1);
    EXPECT_TRUE(std::is_sorted(rows.rbegin(), rows.rend()));
  }
}

TEST(ScheduleChunks, LinearViewSplitsOnElements) {
  absl::StatusOr<Schedule> s = chunks(ScheduleView::linear(10, 4), 1, 4);
  ASSERT_TRUE(s.ok()) << s.status();
  std::vector<Segment> got;
  for (const Batch& b : s->batches(0)) got.push_back(b.segments[0]);
  EXPECT_EQ(got, (std::vector<Segment>{{0, 12}, {12, 12}, {24, 8}, {32, 8}}));
}

TEST(ScheduleChunks, RejectsBadN) {
  EXPECT_THAT(chunks({5, 4}, 2, 0).status().message(), HasSubstr("chunks: n 0 must be in [1, rows 5]"));
  EXPECT_THAT(chunks({5, 4}, 2, 6).status().message(), HasSubstr("chunks: n 6 must be in [1, rows 5]"));
}

TEST(ScheduleWaves, CoversEachShardOnceInTileOrder) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(absl::StrCat("seed ", seed));
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 300; ++trial) {
    const ScheduleView v = random_view(rng);
    const int world = pick(rng, 1, 4), programs = pick(rng, 1, 12), per = pick(rng, 1, 3);
    const TileShape tile{pick(rng, 1, 12), pick(rng, 1, 12)};
    const TileOrder order = pick(rng, 0, 1) ? TileOrder::kColumnMajor : TileOrder::kRowMajor;
    SCOPED_TRACE(absl::StrCat(show(v), " tile ", tile.bm, "x", tile.bn, " programs ", programs, " column-major ",
                              order == TileOrder::kColumnMajor, " waves per batch ", per));
    absl::StatusOr<Schedule> s = waves(v, world, tile, programs, order, per);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE(covers_once(*s, v, world));
    const int64_t tiles_m = (v.rows + tile.bm - 1) / tile.bm, tiles_n = (v.cols + tile.bn - 1) / tile.bn;
    const int64_t num_tiles = tiles_m * tiles_n, tiles_per_batch = int64_t{programs} * per;
    ASSERT_EQ(static_cast<int64_t>(s->batches(0).size()), (num_tiles + tiles_per_batch - 1) / tiles_per_batch);
    for (size_t w = 0; w < s->batches(0).size(); ++w) {
      const Batch& b = s->batches(0)[w];
      const int64_t want = std::min<int64_t>(tiles_per_batch, num_tiles - static_cast<int64_t>(w) * tiles_per_batch);
      EXPECT_EQ(b.contributors, std::min<int64_t>(programs, want)) << "batch " << w;
      ASSERT_EQ(static_cast<int64_t>(b.segments.size()), want) << "batch " << w;
      for (int64_t k = 0; k < want; ++k) {
        const int64_t t = static_cast<int64_t>(w) * tiles_per_batch + k;
        const int64_t tm = order == TileOrder::kRowMajor ? t / tiles_n : t % tiles_m;
        const int64_t tn = order == TileOrder::kRowMajor ? t % tiles_n : t / tiles_m;
        EXPECT_EQ(b.segments[k].offset, tm * tile.bm * v.row_pitch() + tn * tile.bn * v.elem_bytes) << "tile " << t;
      }
    }
  }
}

TEST(ScheduleWaves, ClipsEdgeTiles) {
  // 10 x 10 f32 (40-byte rows, pitch 48) in 4 x 4 tiles: 3 x 3 tiles, the
  // last row and column of tiles 2 rows / 2 columns wide.
  absl::StatusOr<Schedule> s = waves({10, 10, 4, 48}, 2, {4, 4}, 4);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->batches(0).size(), 3u);
  EXPECT_EQ(s->batches(0)[0].segments,
            (std::vector<Segment>{{0, 16, 4, 48}, {16, 16, 4, 48}, {32, 8, 4, 48}, {192, 16, 4, 48}}));
  EXPECT_EQ(s->batches(0)[2].segments, (std::vector<Segment>{{416, 8, 2, 48}}));
  EXPECT_EQ(s->batches(0)[2].contributors, 1);
  // A tile as wide as a dense row is contiguous: one linear run.
  EXPECT_EQ(waves({5, 3}, 1, {2, 8}, 8)->batches(0)[0].segments, (std::vector<Segment>{{0, 6}, {6, 6}, {12, 3}}));
}

TEST(ScheduleWaves, ColumnMajorWalksDownColumnsOfTiles) {
  absl::StatusOr<Schedule> s = waves({4, 6}, 1, {2, 2}, 4, TileOrder::kColumnMajor);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->batches(0).size(), 2u);
  // Tiles (0,0) (1,0) (0,1) (1,1) then (0,2) (1,2); rows are 6 bytes.
  EXPECT_EQ(s->batches(0)[0].segments,
            (std::vector<Segment>{{0, 2, 2, 6}, {12, 2, 2, 6}, {2, 2, 2, 6}, {14, 2, 2, 6}}));
  EXPECT_EQ(s->batches(0)[1].segments, (std::vector<Segment>{{4, 2, 2, 6}, {16, 2, 2, 6}}));
  EXPECT_EQ(s->batches(0)[1].contributors, 2);
}

TEST(ScheduleWaves, BatchesOfSeveralWavesHaveOneContributorPerProgram) {
  // 3 x 3 tiles of 2 x 2, 2 programs, 2 waves per batch: tiles 0-3, 4-7, 8.
  absl::StatusOr<Schedule> s = waves({6, 6}, 2, {2, 2}, 2, TileOrder::kRowMajor, 2);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->batches(1).size(), 3u);
  EXPECT_EQ(s->batches(1)[0].contributors, 2);
  EXPECT_EQ(s->batches(1)[0].segments,
            (std::vector<Segment>{{0, 2, 2, 6}, {2, 2, 2, 6}, {4, 2, 2, 6}, {12, 2, 2, 6}}));
  EXPECT_EQ(s->batches(1)[1].segments.size(), 4u);
  EXPECT_EQ(s->batches(1)[2].contributors, 1);
  EXPECT_EQ(s->batches(1)[2].segments, (std::vector<Segment>{{28, 2, 2, 6}}));
  // Covered once, like one batch per wave.
  EXPECT_TRUE(covers_once(*s, {6, 6}, 2));
}

TEST(ScheduleWaves, RejectsBadArguments) {
  EXPECT_THAT(waves({4, 4}, 1, {2, 2}, 2, TileOrder::kRowMajor, 0).status().message(),
              HasSubstr("waves: waves_per_batch 0 must be >= 1"));
  EXPECT_THAT(waves({4, 4}, 1, {0, 2}, 4).status().message(), HasSubstr("waves: tile 0x2 must be at least 1x1"));
  EXPECT_THAT(waves({4, 4}, 1, {2, 0}, 4).status().message(), HasSubstr("waves: tile 2x0"));
  EXPECT_THAT(waves({4, 4}, 1, {2, 2}, 0).status().message(), HasSubstr("waves: num_programs 0 must be >= 1"));
  EXPECT_THAT(waves({4, 4}, -1, {2, 2}, 1).status().message(), HasSubstr("waves: world -1 must be >= 1"));
}

TEST(ScheduleSplitLinear, KeepsCoverageUnderTheLimit) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(absl::StrCat("seed ", seed));
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 200; ++trial) {
    const ScheduleView v = random_view(rng);
    const int world = pick(rng, 1, 3);
    const int64_t limit = pick(rng, 1, 64);
    SCOPED_TRACE(absl::StrCat(show(v), " limit ", limit));
    absl::StatusOr<Schedule> built = pick(rng, 0, 1) ? chunks(v, world, pick(rng, 1, v.rows))
                                                     : waves(v, world, {pick(rng, 1, 8), pick(rng, 1, 40)}, 3);
    ASSERT_TRUE(built.ok()) << built.status();
    absl::StatusOr<Schedule> s = split_linear(*built, limit);
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE(covers_once(*s, v, world));
    ASSERT_EQ(s->num_batches(), built->num_batches());
    for (size_t b = 0; b < s->batches(0).size(); ++b) {
      const Batch &before = built->batches(0)[b], &after = s->batches(0)[b];
      EXPECT_EQ(after.contributors, before.contributors);
      // Pieces replace their segment in place, in address order.
      std::vector<Segment> want;
      for (const Segment& seg : before.segments) {
        if (!seg.is_linear()) {
          want.push_back(seg);
          continue;
        }
        for (int64_t at = 0; at < seg.width; at += limit) {
          want.push_back({seg.offset + at, std::min(limit, seg.width - at)});
        }
      }
      EXPECT_EQ(after.segments, want);
      for (const Segment& seg : after.segments) {
        if (seg.is_linear()) {
          EXPECT_LE(seg.width, limit);
        }
      }
    }
  }
}

TEST(ScheduleSplitLinear, LeavesTwoDSegmentsAndRejectsBadLimit) {
  Schedule s(64, {{Batch{{{0, 20}, {20, 4, 3, 10}}}}});
  absl::StatusOr<Schedule> split = split_linear(s, 8);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(split->batches(0)[0].segments, (std::vector<Segment>{{0, 8}, {8, 8}, {16, 4}, {20, 4, 3, 10}}));
  EXPECT_THAT(split_linear(s, 0).status().message(), HasSubstr("split_linear: max_bytes 0 must be >= 1"));
}

TEST(ScheduleDigest, StableAndSensitive) {
  const Schedule a = *waves({37, 29, 2, 64}, 4, {8, 8}, 5), b = *waves({37, 29, 2, 64}, 4, {8, 8}, 5);
  EXPECT_EQ(digest(a), digest(b));
  Schedule c = a;
  c.mutable_per_rank()[3][1].segments[2].offset += 1;
  EXPECT_NE(digest(c), digest(a));
  Schedule d = a;
  d.mutable_per_rank()[0][0].contributors += 1;
  EXPECT_NE(digest(d), digest(a));
  EXPECT_NE(digest(*whole({4, 4}, 2)), digest(*whole({4, 4}, 3)));
  // The same bytes in another rank's batch list are another schedule.
  EXPECT_NE(digest(Schedule(8, {{Batch{{{0, 8}}}}, {}})), digest(Schedule(8, {{}, {Batch{{{0, 8}}}}})));
}

TEST(ScheduleDigest, KnownValueOfATinySchedule) {
  // FNV-1a 64 of the u64 words 1, 8, 2 and twice (1, 1, 1, 0, 8, 1, 0),
  // little-endian; computed independently in Python.
  EXPECT_EQ(digest(*whole({2, 4}, 2)), 0x197a44992564816eull);
  // A one-row segment's pitch means nothing and is not hashed.
  EXPECT_EQ(digest(Schedule(8, {{Batch{{{0, 8, 1, 0}}}}, {Batch{{{0, 8, 1, 32}}}}})), 0x197a44992564816eull);
}

TEST(ScheduleCheckSame, NamesTheFirstRankThatDiffers) {
  const Schedule a = *chunks({16, 8}, 3, 4);
  EXPECT_TRUE(check_same({a, a, a}).ok());
  Schedule bad = a;
  bad.mutable_per_rank()[1][2].segments[0].width -= 1;
  absl::Status s = check_same({a, a, bad, bad});
  EXPECT_THAT(s.message(), HasSubstr("rank 2's digest"));
  EXPECT_THAT(s.message(), HasSubstr("rank 1, batch 2, segment 0: {offset 64, width 31"));
  Schedule fewer = a;
  fewer.mutable_per_rank()[0].pop_back();
  EXPECT_THAT(check_same({a, fewer}).message(), HasSubstr("rank 0 has 3 batches vs 4"));
  EXPECT_THAT(check_same({}).message(), HasSubstr("no schedules"));
}

TEST(ScheduleBatchId, NumbersRankByRank) {
  Batch one{{{0, 4}}};
  Schedule s(16, {{one, one}, {}, {one, one, one}});
  EXPECT_EQ(s.num_batches(), 5);
  EXPECT_EQ(*batch_id(s, 0, 0), 0);
  EXPECT_EQ(*batch_id(s, 0, 1), 1);
  EXPECT_EQ(*batch_id(s, 2, 0), 2);
  EXPECT_EQ(*batch_id(s, 2, 2), 4);
  EXPECT_THAT(batch_id(s, 3, 0).status().message(), HasSubstr("rank 3 is not in [0, 3)"));
  EXPECT_THAT(batch_id(s, -1, 0).status().message(), HasSubstr("rank -1 is not in [0, 3)"));
  EXPECT_THAT(batch_id(s, 0, 2).status().message(), HasSubstr("batch 2 is not in [0, 2) of rank 0"));
  EXPECT_THAT(batch_id(s, 1, 0).status().message(), HasSubstr("batch 0 is not in [0, 0) of rank 1"));
  EXPECT_EQ(batch_id(s, 2, -1).status().code(), absl::StatusCode::kOutOfRange);
}

// One rank's hand-made batches over a 64-byte shard.
absl::Status check(std::vector<Batch> batches, int64_t shard_bytes = 64) {
  return validate(Schedule(shard_bytes, {{Batch{{{60, 4}}}}, std::move(batches)}));
}

TEST(ScheduleValidate, AcceptsDisjointSegments) { EXPECT_TRUE(check({Batch{{{0, 8}, {8, 4, 3, 16}}}}).ok()); }
TEST(ScheduleValidate, NoRanks) { EXPECT_THAT(validate(Schedule(8, {})).message(), HasSubstr("schedule: no ranks")); }
TEST(ScheduleValidate, ShardBytes) {
  EXPECT_THAT(validate(*whole({2, 2}, 1), 0).message(), HasSubstr("shard_bytes 0 must be >= 1"));
}
TEST(ScheduleValidate, EmptyBatch) {
  EXPECT_THAT(check({Batch{{{0, 4}}}, Batch{}}).message(), HasSubstr("rank 1, batch 1 has no segments"));
}
TEST(ScheduleValidate, Contributors) {
  EXPECT_THAT(check({Batch{{{0, 4}}, 0}}).message(), HasSubstr("rank 1, batch 0: contributors 0 must be >= 1"));
}
TEST(ScheduleValidate, Offset) {
  EXPECT_THAT(check({Batch{{{0, 4}, {-4, 4}}}}).message(),
              HasSubstr("rank 1, batch 0, segment 1 {offset -4, width 4, height 1, pitch 0}: offset must be >= 0"));
}
TEST(ScheduleValidate, Width) { EXPECT_THAT(check({Batch{{{0, 0}}}}).message(), HasSubstr("width must be >= 1")); }
TEST(ScheduleValidate, Height) { EXPECT_THAT(check({Batch{{{0, 4, 0}}}}).message(), HasSubstr("height must be >= 1")); }
TEST(ScheduleValidate, Pitch) {
  EXPECT_THAT(check({Batch{{{0, 4, 1, -1}}}}).message(), HasSubstr("pitch must be >= 0"));
  EXPECT_THAT(check({Batch{{{0, 8, 2, 4}}}}).message(), HasSubstr("needs pitch >= width"));
}
TEST(ScheduleValidate, OutsideShard) {
  EXPECT_THAT(check({Batch{{{60, 8}}}}).message(), HasSubstr("{offset 60, width 8, height 1, pitch 0}: reaches past "
                                                             "the shard's 64 bytes"));
  // Its last row ends at 8 + 3 * 16 + 9 = 65.
  EXPECT_THAT(check({Batch{{{8, 9, 4, 16}}}}).message(), HasSubstr("reaches past the shard's 64 bytes"));
  EXPECT_TRUE(check({Batch{{{8, 8, 4, 16}}}}).ok());
  // Sizes that would overflow a naive end() are still just outside.
  EXPECT_THAT(check({Batch{{{0, 1, int64_t{1} << 62, int64_t{1} << 62}}}}).message(), HasSubstr("reaches past"));
}
TEST(ScheduleValidate, OverlapAcrossBatches) {
  EXPECT_THAT(check({Batch{{{0, 8}}}, Batch{{{16, 4}, {7, 2}}}}).message(),
              HasSubstr("rank 1: batch 0, segment 0 {offset 0, width 8, height 1, pitch 0} and batch 1, segment 1 "
                        "{offset 7, width 2, height 1, pitch 0} overlap"));
}
TEST(ScheduleValidate, TwoDWindowsOverlapOnlyWhereTheyShareBytes) {
  // Two tiles side by side: hulls interleave, rows do not.
  EXPECT_TRUE(check({Batch{{{0, 4, 4, 16}, {4, 4, 4, 16}}}}).ok());
  EXPECT_THAT(check({Batch{{{0, 4, 4, 16}, {35, 4, 2, 16}}}}).message(), HasSubstr("overlap"));
  // Different pitches: rows at 0, 8, .. 40 miss rows at 2, 12, 22; a fourth
  // row at 32 meets the fifth of the other.
  EXPECT_TRUE(check({Batch{{{0, 2, 6, 8}}}, Batch{{{2, 2, 3, 10}}}}).ok());
  EXPECT_THAT(check({Batch{{{0, 2, 6, 8}}}, Batch{{{2, 2, 4, 10}}}}).message(), HasSubstr("overlap"));
}

// validate()'s overlap rule against a byte bitmap, on random pairs of
// segments, half of them with one pitch (the closed-form path).
TEST(ScheduleValidate, OverlapMatchesBitmap) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE(absl::StrCat("seed ", seed));
  std::mt19937 rng(seed);
  constexpr int64_t kShard = 96;
  auto random_segment = [&](int64_t pitch) {
    Segment s{0, pick(rng, 1, 8), pick(rng, 1, 5)};
    s.pitch = s.height == 1 ? 0 : std::max(pitch, s.width);
    s.offset = pick(rng, 0, kShard - s.end());
    return s;
  };
  int overlapping = 0;
  for (int trial = 0; trial < 5000; ++trial) {
    const int64_t pitch = pick(rng, 1, 16);
    const Segment a = random_segment(pitch), b = random_segment(pick(rng, 0, 1) ? pitch : pick(rng, 1, 16));
    std::vector<int> count(kShard, 0);
    bool shared = false;
    for (const Segment& s : {a, b}) {
      for (int64_t k = 0; k < s.height; ++k) {
        for (int64_t x = 0; x < s.width; ++x) shared |= ++count[s.offset + k * s.pitch + x] > 1;
      }
    }
    overlapping += shared;
    absl::Status st = validate(Schedule(kShard, {{Batch{{a}}, Batch{{b}}}}));
    ASSERT_EQ(!st.ok(), shared) << ::testing::PrintToString(a) << " " << ::testing::PrintToString(b) << ": " << st;
  }
  EXPECT_GT(overlapping, 100);
}

}  // namespace
}  // namespace tessel
