#include "runtime/plans/schedule.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status.h"

namespace tessel {
namespace {

// Far below INT64_MAX, so that offsets plus a shard or two never overflow
// while a builder or the runtime adds them up.
constexpr int64_t kMaxBytes = int64_t{1} << 62;
constexpr int64_t kMaxBatches = (int64_t{1} << 32) - 1;

template <typename... Parts>
absl::Status invalid(const Parts&... parts) {
  return absl::InvalidArgumentError(absl::StrCat(parts...));
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Rounds toward negative infinity (C++ division truncates toward zero), for
// row arithmetic on differences that may be negative.
int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

std::string describe(const Segment& s) {
  return absl::StrCat("{offset ", s.offset, ", width ", s.width, ", height ", s.height, ", pitch ", s.pitch, "}");
}

std::string where(int rank, size_t batch, size_t segment) {
  return absl::StrCat("rank ", rank, ", batch ", batch, ", segment ", segment);
}

absl::Status check_common(const ScheduleView& view, int world, int contributors, const char* builder) {
  absl::Status s = check_view(view);
  if (!s.ok()) return invalid(builder, ": ", s.message());
  if (world < 1) return invalid(builder, ": world ", world, " must be >= 1");
  if (contributors < 1) return invalid(builder, ": contributors ", contributors, " must be >= 1");
  if (view.shard_bytes() > kMaxBytes / world) {
    return invalid(builder, ": ", world, " shards of ", view.shard_bytes(), " bytes exceed 2^62 bytes");
  }
  return absl::OkStatus();
}

// The window of rows [r0, r0 + nrows) and columns [c0, c0 + ncols) of a
// shard. Contiguous rows collapse to one linear run.
Segment window(const ScheduleView& view, int64_t r0, int64_t nrows, int64_t c0, int64_t ncols) {
  const int64_t offset = r0 * view.row_pitch() + c0 * view.elem_bytes;
  const int64_t width = ncols * view.elem_bytes;
  if (nrows == 1 || width == view.row_pitch()) return Segment{offset, width * nrows};
  return Segment{offset, width, nrows, view.row_pitch()};
}

Schedule replicate(const ScheduleView& view, int world, const std::vector<Batch>& batches) {
  return Schedule(view.shard_bytes(), std::vector<std::vector<Batch>>(world, batches));
}

// Whether some row of `b` shares a byte with [lo, hi). b's rows are
// increasing and disjoint (pitch >= width), so only the first row ending
// past lo can reach below hi.
bool row_hits(const Segment& b, int64_t lo, int64_t hi) {
  if (b.height == 1) return b.offset < hi && lo < b.offset + b.width;
  const int64_t j = std::max<int64_t>(0, floor_div(lo - b.width - b.offset, b.pitch) + 1);
  return j < b.height && b.offset + j * b.pitch < hi;
}

// Whether two in-bounds segments share a byte (their hulls already meet).
bool overlaps(const Segment& a, const Segment& b) {
  if (a.height > 1 && b.height > 1 && a.pitch == b.pitch) {
    // Row k of a meets row j of b iff -b.width < d + (j - k) * p < a.width;
    // that window is at most 2p long, so solve for m = j - k directly.
    const int64_t p = a.pitch, d = b.offset - a.offset;
    const int64_t lo = std::max(-(a.height - 1), -floor_div(b.width - 1 + d, p));
    const int64_t hi = std::min(b.height - 1, floor_div(a.width - 1 - d, p));
    return lo <= hi;
  }
  // Different pitches (or one row): walk the rows of the shorter segment
  // that fall inside the other's hull, each checked in O(1).
  const Segment& x = a.height <= b.height ? a : b;
  const Segment& y = a.height <= b.height ? b : a;
  if (x.height == 1) return row_hits(y, x.offset, x.offset + x.width);
  const int64_t k_lo = std::max<int64_t>(0, floor_div(y.offset - x.width - x.offset, x.pitch) + 1);
  const int64_t k_hi = std::min(x.height - 1, floor_div(y.end() - 1 - x.offset, x.pitch));
  for (int64_t k = k_lo; k <= k_hi; ++k) {
    const int64_t lo = x.offset + k * x.pitch;
    if (row_hits(y, lo, lo + x.width)) return true;
  }
  return false;
}

absl::Status check_segment(const Segment& s, int64_t shard_bytes, int rank, size_t b, size_t i) {
  auto bad = [&](const auto&... why) {
    return invalid("schedule: ", where(rank, b, i), " ", describe(s), ": ", why...);
  };
  if (s.offset < 0) return bad("offset must be >= 0");
  if (s.width < 1) return bad("width must be >= 1");
  if (s.height < 1) return bad("height must be >= 1");
  if (s.pitch < 0) return bad("pitch must be >= 0");
  if (s.height > 1 && s.pitch < s.width) return bad("a segment of several rows needs pitch >= width");
  // Compared piece by piece so that a huge height or pitch cannot overflow.
  const bool inside = s.offset <= shard_bytes && s.width <= shard_bytes - s.offset &&
                      (s.height == 1 || s.height - 1 <= (shard_bytes - s.offset - s.width) / s.pitch);
  if (!inside) return bad("reaches past the shard's ", shard_bytes, " bytes");
  return absl::OkStatus();
}

absl::Status check_disjoint(const std::vector<Batch>& batches, int rank) {
  struct Ref {
    const Segment* s;
    size_t batch, index;
  };
  std::vector<Ref> refs;
  for (size_t b = 0; b < batches.size(); ++b) {
    for (size_t i = 0; i < batches[b].segments.size(); ++i) refs.push_back({&batches[b].segments[i], b, i});
  }
  std::sort(refs.begin(), refs.end(), [](const Ref& x, const Ref& y) { return x.s->offset < y.s->offset; });
  // Sorted by start, so only the segments that start inside one's hull can
  // meet it; tiles of one band of rows are the common case of hulls that
  // meet without overlapping.
  for (size_t i = 0; i < refs.size(); ++i) {
    const int64_t end = refs[i].s->end();
    for (size_t j = i + 1; j < refs.size() && refs[j].s->offset < end; ++j) {
      if (!overlaps(*refs[i].s, *refs[j].s)) continue;
      // Named in schedule order, whichever starts first in memory.
      Ref x = refs[i], y = refs[j];
      if (std::pair(y.batch, y.index) < std::pair(x.batch, x.index)) std::swap(x, y);
      return invalid("schedule: rank ", rank, ": batch ", x.batch, ", segment ", x.index, " ", describe(*x.s),
                     " and batch ", y.batch, ", segment ", y.index, " ", describe(*y.s), " overlap");
    }
  }
  return absl::OkStatus();
}

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

// Where b first departs from a, for check_same's message.
std::string first_difference(const Schedule& a, const Schedule& b) {
  if (a.shard_bytes() != b.shard_bytes()) {
    return absl::StrCat("shard bytes ", b.shard_bytes(), " vs ", a.shard_bytes());
  }
  if (a.world_size() != b.world_size()) return absl::StrCat(b.world_size(), " ranks vs ", a.world_size());
  for (int r = 0; r < a.world_size(); ++r) {
    const auto &x = a.batches(r), &y = b.batches(r);
    if (x.size() != y.size()) return absl::StrCat("rank ", r, " has ", y.size(), " batches vs ", x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      if (x[i].contributors != y[i].contributors) {
        return absl::StrCat("rank ", r, ", batch ", i, ": contributors ", y[i].contributors, " vs ", x[i].contributors);
      }
      if (x[i].segments.size() != y[i].segments.size()) {
        return absl::StrCat("rank ", r, ", batch ", i, ": ", y[i].segments.size(), " segments vs ",
                            x[i].segments.size());
      }
      for (size_t k = 0; k < x[i].segments.size(); ++k) {
        if (x[i].segments[k] != y[i].segments[k]) {
          return absl::StrCat(where(r, i, k), ": ", describe(y[i].segments[k]), " vs ", describe(x[i].segments[k]));
        }
      }
    }
  }
  return "one-row pitches only";
}

}  // namespace

absl::Status check_view(const ScheduleView& view) {
  if (view.rows < 1) return invalid("view: rows ", view.rows, " must be >= 1");
  if (view.cols < 1) return invalid("view: cols ", view.cols, " must be >= 1");
  if (view.elem_bytes < 1) return invalid("view: elem_bytes ", view.elem_bytes, " must be >= 1");
  if (view.cols > kMaxBytes / view.elem_bytes) {
    return invalid("view: a row of ", view.cols, " elements exceeds 2^62 bytes");
  }
  if (view.pitch < 0 || (view.pitch != 0 && view.pitch < view.row_bytes())) {
    return invalid("view: pitch ", view.pitch, " is less than a row's ", view.row_bytes(), " bytes (0 means dense)");
  }
  if (view.rows > kMaxBytes / view.row_pitch()) return invalid("view: ", view.rows, " rows exceed 2^62 bytes");
  return absl::OkStatus();
}

int64_t Schedule::num_batches() const {
  int64_t n = 0;
  for (const auto& batches : per_rank_) n += static_cast<int64_t>(batches.size());
  return n;
}

absl::StatusOr<Schedule> whole(const ScheduleView& view, int world, int contributors) {
  TESSEL_RETURN_IF_ERROR(check_common(view, world, contributors, "whole"));
  return replicate(view, world, {Batch{{window(view, 0, view.rows, 0, view.cols)}, contributors}});
}

absl::StatusOr<Schedule> chunks(const ScheduleView& view, int world, int64_t n, int contributors) {
  TESSEL_RETURN_IF_ERROR(check_common(view, world, contributors, "chunks"));
  if (n < 1 || n > view.rows) return invalid("chunks: n ", n, " must be in [1, rows ", view.rows, "]");
  std::vector<Batch> batches;
  batches.reserve(n);
  const int64_t base = view.rows / n, extra = view.rows % n;
  for (int64_t i = 0, row = 0; i < n; ++i) {
    const int64_t nrows = base + (i < extra ? 1 : 0);
    batches.push_back({{window(view, row, nrows, 0, view.cols)}, contributors});
    row += nrows;
  }
  return replicate(view, world, batches);
}

absl::StatusOr<Schedule> waves(const ScheduleView& view, int world, TileShape tile, int num_programs, TileOrder order,
                               int waves_per_batch) {
  TESSEL_RETURN_IF_ERROR(check_common(view, world, 1, "waves"));
  if (tile.bm < 1 || tile.bn < 1) return invalid("waves: tile ", tile.bm, "x", tile.bn, " must be at least 1x1");
  if (num_programs < 1) return invalid("waves: num_programs ", num_programs, " must be >= 1");
  if (waves_per_batch < 1) return invalid("waves: waves_per_batch ", waves_per_batch, " must be >= 1");
  const int64_t tiles_m = ceil_div(view.rows, tile.bm), tiles_n = ceil_div(view.cols, tile.bn);
  const int64_t num_tiles = tiles_m * tiles_n, per_batch = int64_t{num_programs} * waves_per_batch;
  std::vector<Batch> batches;
  batches.reserve(ceil_div(num_tiles, per_batch));
  for (int64_t first = 0; first < num_tiles; first += per_batch) {
    const int64_t last = std::min(num_tiles, first + per_batch);
    Batch batch{{}, static_cast<int>(std::min<int64_t>(num_programs, last - first))};
    batch.segments.reserve(last - first);
    for (int64_t t = first; t < last; ++t) {
      const int64_t tm = order == TileOrder::kRowMajor ? t / tiles_n : t % tiles_m;
      const int64_t tn = order == TileOrder::kRowMajor ? t % tiles_n : t / tiles_m;
      const int64_t r0 = tm * tile.bm, c0 = tn * tile.bn;
      batch.segments.push_back(
          window(view, r0, std::min(tile.bm, view.rows - r0), c0, std::min(tile.bn, view.cols - c0)));
    }
    batches.push_back(std::move(batch));
  }
  return replicate(view, world, batches);
}

absl::StatusOr<Schedule> split_linear(const Schedule& schedule, int64_t max_bytes) {
  if (max_bytes < 1) return invalid("split_linear: max_bytes ", max_bytes, " must be >= 1");
  Schedule out = schedule;
  for (auto& batches : out.mutable_per_rank()) {
    for (Batch& batch : batches) {
      std::vector<Segment> split;
      split.reserve(batch.segments.size());
      for (const Segment& s : batch.segments) {
        if (!s.is_linear() || s.width <= max_bytes) {
          split.push_back(s);
          continue;
        }
        for (int64_t at = 0; at < s.width; at += max_bytes) {
          split.push_back(Segment{s.offset + at, std::min(max_bytes, s.width - at)});
        }
      }
      batch.segments = std::move(split);
    }
  }
  return out;
}

uint64_t digest(const Schedule& schedule) {
  // Encoding version 1; bump it if the encoding changes so that old and new
  // digests never agree by accident.
  std::string bytes;
  put_u64(bytes, 1);
  put_u64(bytes, schedule.shard_bytes());
  put_u64(bytes, schedule.world_size());
  for (const auto& batches : schedule.per_rank()) {
    put_u64(bytes, batches.size());
    for (const Batch& batch : batches) {
      put_u64(bytes, static_cast<uint64_t>(static_cast<int64_t>(batch.contributors)));
      put_u64(bytes, batch.segments.size());
      for (const Segment& s : batch.segments) {
        put_u64(bytes, s.offset);
        put_u64(bytes, s.width);
        put_u64(bytes, s.height);
        put_u64(bytes, s.height == 1 ? 0 : s.pitch);
      }
    }
  }
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

absl::Status check_same(const std::vector<Schedule>& per_rank) {
  if (per_rank.empty()) return invalid("check_same: no schedules to compare");
  const uint64_t want = digest(per_rank[0]);
  for (size_t r = 1; r < per_rank.size(); ++r) {
    const uint64_t got = digest(per_rank[r]);
    if (got == want) continue;
    return invalid(absl::StrFormat("schedules differ: rank %d's digest %#018x is not rank 0's %#018x (%s)", r, got,
                                   want, first_difference(per_rank[0], per_rank[r])));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> batch_id(const Schedule& schedule, int rank, int i) {
  if (rank < 0 || rank >= schedule.world_size()) {
    return absl::OutOfRangeError(absl::StrCat("batch_id: rank ", rank, " is not in [0, ", schedule.world_size(), ")"));
  }
  const auto& batches = schedule.batches(rank);
  if (i < 0 || static_cast<size_t>(i) >= batches.size()) {
    return absl::OutOfRangeError(
        absl::StrCat("batch_id: batch ", i, " is not in [0, ", batches.size(), ") of rank ", rank));
  }
  int64_t id = i;
  for (int r = 0; r < rank; ++r) id += static_cast<int64_t>(schedule.batches(r).size());
  return id;
}

absl::Status validate(const Schedule& schedule, int64_t shard_bytes) {
  if (shard_bytes < 1) return invalid("schedule: shard_bytes ", shard_bytes, " must be >= 1");
  if (schedule.world_size() < 1) return invalid("schedule: no ranks");
  if (schedule.num_batches() > kMaxBatches) {
    return invalid("schedule: ", schedule.num_batches(), " batches; a view holds at most 2^32 - 1");
  }
  for (int r = 0; r < schedule.world_size(); ++r) {
    const auto& batches = schedule.batches(r);
    for (size_t b = 0; b < batches.size(); ++b) {
      if (batches[b].segments.empty()) return invalid("schedule: rank ", r, ", batch ", b, " has no segments");
      if (batches[b].contributors < 1) {
        return invalid("schedule: rank ", r, ", batch ", b, ": contributors ", batches[b].contributors,
                       " must be >= 1");
      }
      for (size_t i = 0; i < batches[b].segments.size(); ++i) {
        TESSEL_RETURN_IF_ERROR(check_segment(batches[b].segments[i], shard_bytes, r, b, i));
      }
    }
    TESSEL_RETURN_IF_ERROR(check_disjoint(batches, r));
  }
  return absl::OkStatus();
}

}  // namespace tessel
