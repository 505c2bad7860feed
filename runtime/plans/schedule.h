// Schedules of triggered copy plans: which bytes of each rank's shard sit
// behind which gate, in the order the rank's producer completes them. Pure
// host-side data; a TriggeredPlan arms one copy chain per batch and peer from
// it, and every rank must hold the identical schedule (compare digest()).
//
// Layout. Ranks' shards lie back to back in the plan's buffer: rank r's shard
// starts at r * shard_bytes(). Segment offsets are relative to the start of
// the owning rank's shard, so in an all-gather every rank's list of batches
// is the same and the runtime adds shard_offset(rank) when it arms copies.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tessel {

// A 1-D or 2-D run of bytes: `height` rows of `width` bytes, rows `pitch`
// bytes apart, the first at `offset`. A 1-D segment has height 1 and pitch 0
// (pitch means nothing for one row; digest() treats it as 0). A 2-D segment
// needs pitch >= width, so its rows never overlap one another.
struct Segment {
  int64_t offset = 0;
  int64_t width = 0;
  int64_t height = 1;
  int64_t pitch = 0;

  bool is_linear() const { return height == 1; }
  int64_t bytes() const { return width * height; }
  // One past the last byte the segment touches.
  int64_t end() const { return offset + (height - 1) * pitch + width; }
  bool operator==(const Segment&) const = default;
};

// Segments behind one gate. The gate opens on the `contributors`-th publish
// of an epoch, so a batch written by several programs of a persistent kernel
// is copied once, after the last of them. A view stores contributors as u32;
// `int` keeps every value below 2^32, so validate() only checks >= 1.
struct Batch {
  std::vector<Segment> segments;
  int contributors = 1;
  bool operator==(const Batch&) const = default;
};

// One rank's shard as a row-major 2-D array: `rows` rows of `cols` elements
// of `elem_bytes` each, rows `pitch` bytes apart (0: dense, cols * elem_bytes).
// Builders split it along rows (chunks) or into tiles (waves); a shard with
// padded rows (pitch > row bytes) is described by 2-D segments that skip the
// padding. A flat buffer is linear(count, elem_bytes): count rows of one
// element, so chunks() splits it on element boundaries.
struct ScheduleView {
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t elem_bytes = 1;
  int64_t pitch = 0;

  static ScheduleView linear(int64_t count, int64_t elem_bytes = 1) { return {count, 1, elem_bytes, 0}; }
  int64_t row_bytes() const { return cols * elem_bytes; }
  int64_t row_pitch() const { return pitch == 0 ? row_bytes() : pitch; }
  // The extent of one shard, padding of the last row included: the distance
  // between two ranks' shards in the buffer.
  int64_t shard_bytes() const { return rows * row_pitch(); }
};

// Rejects empty shapes, pitch < row bytes and sizes past 2^62 bytes, naming
// the field.
absl::Status check_view(const ScheduleView& view);

class Schedule {
 public:
  Schedule() = default;
  // per_rank[r]: the batches rank r produces, in completion order (chains on
  // one copy queue run in arming order, so a batch listed before one that
  // completes earlier would hold it back). Not checked here: see validate().
  Schedule(int64_t shard_bytes, std::vector<std::vector<Batch>> per_rank)
      : shard_bytes_(shard_bytes), per_rank_(std::move(per_rank)) {}

  int world_size() const { return static_cast<int>(per_rank_.size()); }
  int64_t shard_bytes() const { return shard_bytes_; }
  // Bytes of the plan's buffer the schedule spans: every rank's shard.
  int64_t bytes() const { return shard_bytes_ * world_size(); }
  int64_t shard_offset(int rank) const { return shard_bytes_ * rank; }
  // Batches of all ranks together: the gate rows a plan allocates.
  int64_t num_batches() const;

  const std::vector<std::vector<Batch>>& per_rank() const { return per_rank_; }
  const std::vector<Batch>& batches(int rank) const { return per_rank_[rank]; }
  // For hand-made schedules; validate() them afterwards.
  std::vector<std::vector<Batch>>& mutable_per_rank() { return per_rank_; }

  bool operator==(const Schedule&) const = default;

 private:
  int64_t shard_bytes_ = 0;
  std::vector<std::vector<Batch>> per_rank_;
};

// --- Builders. Each gives every one of `world` ranks the same batches (an
// all-gather: each rank publishes its own shard). A window whose rows are
// contiguous (one row, or pitch == width) comes out as one 1-D segment, which
// copy engines move faster and split_linear() can split.

// One batch per rank: the whole shard, opened by `contributors` publishes.
absl::StatusOr<Schedule> whole(const ScheduleView& view, int world, int contributors = 1);

// Each shard split by rows into n batches, in row order. Sizes differ by at
// most one row, larger first: the last batch is smaller when rows % n != 0,
// and there are always exactly n non-empty batches (ceil-sized chunks would
// cut 9 rows into 3 chunks, not 4). Needs 1 <= n <= rows.
absl::StatusOr<Schedule> chunks(const ScheduleView& view, int world, int64_t n, int contributors = 1);

struct TileShape {
  int64_t bm;  // rows of a tile
  int64_t bn;  // columns (elements) of a tile
};

// How a persistent kernel numbers its tiles: tile t is at (t / tiles_n,
// t % tiles_n) in row-major order, (t % tiles_m, t / tiles_m) in column-major.
enum class TileOrder { kRowMajor, kColumnMajor };

// One batch per `waves_per_batch` waves of a persistent tiled kernel
// (for_each_tile: program p handles tiles p, p + P, p + 2P, ... with P =
// num_programs). Batch b holds tiles [b * W * P, (b + 1) * W * P) in
// `order` (W = waves_per_batch), one sub-window segment per tile in tile
// order, edge tiles clipped to the shard. Each program publishes a batch
// once, after its last tile in it, so contributors = the programs with a
// tile in the batch (fewer in a short last batch). Fewer, larger batches cost
// fewer publishes and copies; smaller ones start moving data sooner.
absl::StatusOr<Schedule> waves(const ScheduleView& view, int world, TileShape tile, int num_programs,
                               TileOrder order = TileOrder::kRowMajor, int waves_per_batch = 1);

// Splits every 1-D segment longer than max_bytes (a copy engine's limit for
// one linear copy) into consecutive pieces of max_bytes, the last shorter, in
// place of the original. 2-D segments are left whole: an engine moves them
// row by row, and rows are bounded by the shard's pitch.
absl::StatusOr<Schedule> split_linear(const Schedule& schedule, int64_t max_bytes);

// FNV-1a 64 over a canonical little-endian encoding of the schedule (shard
// bytes, ranks, batches, contributors, segments; pitch as 0 for one-row
// segments). Stable across processes and builds, unlike absl::Hash, so ranks
// in different processes can compare it.
uint64_t digest(const Schedule& schedule);

// OK when every schedule has rank 0's digest; otherwise an error naming the
// first rank that differs and where its schedule first departs from rank 0's.
absl::Status check_same(const std::vector<Schedule>& per_rank);

// The global index of rank's i-th batch: batches are numbered rank by rank,
// in each rank's completion order. This is the gate row and the number a
// kernel passes to publish()/wait().
absl::StatusOr<int64_t> batch_id(const Schedule& schedule, int rank, int i);

// Checks a schedule against shards of shard_bytes: at least one rank; fewer
// than 2^32 batches (a view counts them in u32); no empty batch;
// contributors >= 1; offset >= 0, width >= 1, height >= 1 and, for two or
// more rows, pitch >= width; every segment inside its shard (end() <=
// shard_bytes); and no byte of a shard in two segments of its rank.
// Overlap is exact for 2-D segments: sub-windows side by side in one band of
// rows interleave without overlapping and pass; only bytes both touch fail.
absl::Status validate(const Schedule& schedule, int64_t shard_bytes);
inline absl::Status validate(const Schedule& schedule) { return validate(schedule, schedule.shard_bytes()); }

}  // namespace tessel
