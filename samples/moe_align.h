// A mixture-of-experts layer's token permutation (vLLM's
// moe_align_block_size): the router's choices grouped by expert, each
// expert's group padded to whole blocks, so that a grouped GEMM reads one
// expert's weights per block of rows. Built from histogram, cumsum, argsort,
// gather and cummax over many programs; deterministic, so every target
// gives the same bits.
#pragma once

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "dsl/builder.h"
#include "dsl/ops.h"
#include "tessel/tessel.h"

namespace samples {

using namespace tessel;  // NOLINT: kernels read like the DSL's documentation

// The most positions the padded order of n choices over `experts` takes:
// each expert's group is padded by less than a block.
inline int64_t moe_align_capacity(int64_t n, int experts, int block) { return n + int64_t{experts} * (block - 1); }

// The permutation runs over many programs, each taking `chunk` choices (a
// power of two, for the sort in registers), in three kernels:
//  - count: each program's choices per expert, into the workspace;
//  - place (one program): each expert's total, padded and summed into the
//    groups' starts (offsets); each program's counts become how many of the
//    expert's choices come before its own; and where each group's padding
//    starts;
//  - scatter: each program sorts its chunk by expert (stable) and writes
//    each choice at its group's start, plus its program's place within the
//    group, plus its place in its run; and writes a share of the blocks'
//    experts and padding.
// Args: ids [n] i32 (token t's j-th choice at t * k + j); sorted
// [moe_align_capacity] i32: the choices' indices, expert by expert and in
// order within each, each group padded with n to a multiple of `block`;
// block_experts [capacity / block] i32: each block's expert; offsets
// [experts + 1] i32: where each group starts, and the padded total last;
// positions [n] i32: where each choice sits in sorted (sorted's inverse).
// Choices outside [0, experts) are dropped (an expert another rank holds;
// position -1).
struct MoeAlignKernels {
  Kernel count, place, scatter;
};

// How many programs count and scatter n choices: one per chunk, one at least.
inline int64_t moe_align_programs(int64_t n, int chunk) { return std::max<int64_t>(1, (n + chunk - 1) / chunk); }

// The workspace the three share, in bytes: where each group's padding
// starts ([experts] i32), then each program's counts ([programs, experts]
// i32).
inline int64_t moe_align_workspace_bytes(int64_t n, int experts, int chunk) {
  return 4 * (1 + moe_align_programs(n, chunk)) * experts;
}

inline absl::StatusOr<MoeAlignKernels> moe_align_kernels(int experts, int block, int chunk = 1024) {
  if (experts < 1) {
    return absl::InvalidArgumentError(absl::StrCat("moe_align: experts must be positive, got ", experts));
  }
  if (block < 1) return absl::InvalidArgumentError(absl::StrCat("moe_align: block must be positive, got ", block));
  if (chunk < 1 || (chunk & (chunk - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("moe_align: chunk must be a power of two, got ", chunk));
  }
  MoeAlignKernels out;
  {
    KernelBuilder k("moe_align_count");
    Value ids = k.arg(ptr(i32), "ids"), n = k.arg(i32, "n"), work = k.arg(ptr(i32), "work");
    Value p = k.program_id();
    Value at = p * chunk + k.arange(0, chunk);  // [C] i32
    store(work + (p + 1) * experts + k.arange(0, experts), histogram(load(ids + at, at < n, 0), experts, at < n));
    TESSEL_ASSIGN_OR_RETURN(out.count, k.build());
  }
  {
    KernelBuilder k("moe_align_place");
    Value work = k.arg(ptr(i32), "work"), n = k.arg(i32, "n"), offsets = k.arg(ptr(i32), "offsets");
    Value programs = cdiv(n, chunk);  // none for no choices: every count is 0
    Value e = k.arange(0, experts);   // [E] i32
    // Tiles of [rows, experts] programs' counts: at most 4096 elements.
    const int rows = std::clamp(4096 / experts, 1, 128);
    Var counts = k.var(k.zeros({experts}, i32));  // [E] i32: the programs' so far
    k.for_range(0, programs, rows, [&](Value p0) {
      Value p = expand_dims(p0 + k.arange(0, rows), 1);  // [R, 1] i32
      Value in = broadcast_to(p < programs, {rows, experts});
      Value at = work + (p + 1) * experts + expand_dims(e, 0);  // [R, E]
      Value c = load(at, in, 0);                                // [R, E] i32
      store(at, cumsum(c, 0) - c + expand_dims(Value(counts), 0), in);
      counts = Value(counts) + sum(c, 0);
    });
    Value padded = (Value(counts) + (block - 1)) / block * block;  // [E] i32
    Value starts = cumsum(padded, 0) - padded;                     // [E] i32
    store(offsets + e, starts);
    store(offsets + experts, sum(padded, 0));
    store(work + e, starts + Value(counts));
    TESSEL_ASSIGN_OR_RETURN(out.place, k.build());
  }
  {
    KernelBuilder k("moe_align_scatter");
    Value ids = k.arg(ptr(i32), "ids"), n = k.arg(i32, "n"), work = k.arg(ptr(i32), "work");
    Value offsets = k.arg(ptr(i32), "offsets"), sorted = k.arg(ptr(i32), "sorted");
    Value block_experts = k.arg(ptr(i32), "block_experts"), positions = k.arg(ptr(i32), "positions");
    Value p = k.program_id(), e = k.arange(0, experts), lane = k.arange(0, chunk);
    // The chunk's choices in expert order, each at its group's start plus
    // the earlier programs' choices of its expert plus its place in its run.
    Value i = p * chunk, at = i + lane;    // [C] i32
    Value v = load(ids + at, at < n, -1);  // [C] i32: past n, dropped
    Value order = argsort(v, 0);           // [C] i32
    Value s = gather(v, order, 0);         // [C] i32: v in order
    Value first = (lane == 0) | (s != gather(s, lane - 1, 0));
    Value place = lane - cummax(select(first, lane, 0), 0);               // [C] i32: within its run
    Value base = load(offsets + e) + load(work + (p + 1) * experts + e);  // [E] i32
    Value kept = (s >= 0) & (s < experts), at_sorted = gather(base, s, 0) + place;
    store(sorted + at_sorted, i + order, kept);
    store(positions + i + order, select(kept, at_sorted, -1), i + order < n);

    // A share of the blocks: each block's expert (how many groups end at
    // or before its start) and n at its positions past the expert's choices.
    Value ends = load(offsets + 1 + e), pad_from = load(work + e);  // [E] i32
    Value blocks = load(offsets + experts) / block;
    Value share = cdiv(blocks, k.num_programs());
    Value lo = p * share, hi = minimum(lo + share, blocks);
    // Tiles of [rows, experts] and [rows, block]: at most 4096 elements each.
    const int rows = std::clamp(4096 / std::max(experts, block), 1, 128);
    k.for_range(lo, hi, rows, [&](Value b0) {
      Value b = b0 + k.arange(0, rows);                                                    // [R] i32
      Value owner = sum(cast(expand_dims(b * block, 1) >= expand_dims(ends, 0), i32), 1);  // [R] i32
      store(block_experts + b, owner, b < hi);
      Value q = expand_dims(b * block, 1) + expand_dims(k.arange(0, block), 0);  // [R, B] i32
      store(sorted + q, n, expand_dims(b < hi, 1) & (q >= expand_dims(gather(pad_from, owner, 0), 1)));
    });
    TESSEL_ASSIGN_OR_RETURN(out.scatter, k.build());
  }
  return out;
}

// Where MoeAlign leaves the grouping of up to some number of choices
// (MoeAlign::buffers), as moe_align_kernels describes each.
struct MoeAlignBuffers {
  Buffer sorted, block_experts, offsets, positions;
  Buffer workspace;  // moe_align_workspace_bytes
};

// The three kernels compiled for one device, and their launches in order.
class MoeAlign {
 public:
  static absl::StatusOr<MoeAlign> compile(const Device& dev, int experts, int block, int chunk = 1024, int warps = 8) {
    TESSEL_ASSIGN_OR_RETURN(MoeAlignKernels kernels, moe_align_kernels(experts, block, chunk));
    CompileOptions options;
    options.num_warps = warps;
    TESSEL_ASSIGN_OR_RETURN(Function count, dev.compile(kernels.count, options));
    TESSEL_ASSIGN_OR_RETURN(Function place, dev.compile(kernels.place, options));
    TESSEL_ASSIGN_OR_RETURN(Function scatter, dev.compile(kernels.scatter, options));
    return MoeAlign(experts, block, chunk, warps, std::move(count), std::move(place), std::move(scatter));
  }

  // Buffers for up to n choices on `dev` (one element at least each).
  absl::StatusOr<MoeAlignBuffers> buffers(const Device& dev, int64_t n) const {
    if (n < 0) return absl::InvalidArgumentError(absl::StrCat("moe_align: n must not be negative, got ", n));
    const int64_t capacity = moe_align_capacity(n, experts_, block_);
    MoeAlignBuffers out;
    for (const auto& [buf, bytes] :
         std::vector<std::pair<Buffer*, int64_t>>{{&out.sorted, 4 * capacity},
                                                  {&out.block_experts, 4 * (capacity / block_)},
                                                  {&out.offsets, 4 * (int64_t{experts_} + 1)},
                                                  {&out.positions, 4 * n},
                                                  {&out.workspace, moe_align_workspace_bytes(n, experts_, chunk_)}}) {
      TESSEL_ASSIGN_OR_RETURN(*buf, dev.allocate(static_cast<size_t>(std::max<int64_t>(bytes, 4))));
    }
    return out;
  }

  // Groups the n choices of `ids` into `out` (sized for n at least),
  // queued on `stream` (the device's default stream where null).
  absl::Status launch(const Buffer& ids, int32_t n, const MoeAlignBuffers& out, const Stream* stream = nullptr) const {
    if (n < 0) return absl::InvalidArgumentError(absl::StrCat("moe_align: n must not be negative, got ", n));
    const int64_t capacity = moe_align_capacity(n, experts_, block_);
    for (const auto& [buf, bytes, name] :
         {std::tuple<const Buffer&, int64_t, const char*>{ids, 4 * int64_t{n}, "ids"},
          {out.sorted, 4 * capacity, "sorted"},
          {out.block_experts, 4 * (capacity / block_), "block_experts"},
          {out.offsets, 4 * (int64_t{experts_} + 1), "offsets"},
          {out.positions, 4 * int64_t{n}, "positions"},
          {out.workspace, moe_align_workspace_bytes(n, experts_, chunk_), "workspace"}}) {
      if (static_cast<int64_t>(buf.bytes()) < bytes) {
        return absl::InvalidArgumentError(
            absl::StrCat("moe_align: ", name, " holds ", buf.bytes(), " bytes; ", n, " choices need ", bytes));
      }
    }
    const int programs = static_cast<int>(moe_align_programs(n, chunk_));
    const LaunchConfig all = {.grid = Grid(programs), .num_warps = warps_, .stream = stream};
    const LaunchConfig one = {.grid = Grid(1), .num_warps = warps_, .stream = stream};
    TESSEL_RETURN_IF_ERROR(count_.launch(all, ids, n, out.workspace));
    TESSEL_RETURN_IF_ERROR(place_.launch(one, out.workspace, n, out.offsets));
    return scatter_.launch(all, ids, n, out.workspace, out.offsets, out.sorted, out.block_experts, out.positions);
  }

 private:
  MoeAlign(int experts, int block, int chunk, int warps, Function count, Function place, Function scatter)
      : experts_(experts),
        block_(block),
        chunk_(chunk),
        warps_(warps),
        count_(std::move(count)),
        place_(std::move(place)),
        scatter_(std::move(scatter)) {}
  int experts_, block_, chunk_, warps_;
  Function count_, place_, scatter_;
};

// The same grouping, on the host.
struct MoeAlignment {
  std::vector<int32_t> sorted;         // the padded total
  std::vector<int32_t> block_experts;  // total / block
  std::vector<int32_t> offsets;        // experts + 1
  std::vector<int32_t> positions;      // n
};
inline MoeAlignment moe_align_reference(const std::vector<int32_t>& ids, int experts, int block) {
  std::vector<std::vector<int32_t>> groups(experts);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= 0 && ids[i] < experts) groups[ids[i]].push_back(static_cast<int32_t>(i));
  }
  MoeAlignment out;
  for (int e = 0; e < experts; ++e) {
    out.offsets.push_back(static_cast<int32_t>(out.sorted.size()));
    std::vector<int32_t>& g = groups[e];
    out.sorted.insert(out.sorted.end(), g.begin(), g.end());
    while (out.sorted.size() % block != 0) out.sorted.push_back(static_cast<int32_t>(ids.size()));
    out.block_experts.resize(out.sorted.size() / block, e);
  }
  out.offsets.push_back(static_cast<int32_t>(out.sorted.size()));
  out.positions.assign(ids.size(), -1);
  for (size_t p = 0; p < out.sorted.size(); ++p) {
    if (out.sorted[p] < static_cast<int32_t>(ids.size())) out.positions[out.sorted[p]] = static_cast<int32_t>(p);
  }
  return out;
}

}  // namespace samples
