// The samples' GEMMs: the tensor-core GEMM on TMA (samples::gemm_kernel and
// its forms: persistent, warp-specialized, split-K, stream-K, clusters,
// grouped, fp8 and tf32, fused epilogues), the GEMM through pointers, and
// the helpers that make their maps, grids and arguments.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "dsl/builder.h"
#include "dsl/ops.h"
#include "samples/maps.h"
#include "samples/row_kernels.h"
#include "tessel/tessel.h"

namespace samples {

using namespace tessel;  // NOLINT: kernels read like the DSL's documentation

// One K step of a GEMM: acc + a @ b. With `promote`, the step's product is
// summed from zero and then added to acc in f32, instead of being summed
// into acc on the tensor cores: Hopper's fp8 products sum there with fewer
// bits than f32 as the sum grows (about 2^-12 of sum |a b| at K = 1000), so
// a sum over all of K loses bits that one step's does not.
inline Value gemm_step(const Value& a, const Value& b, const Value& acc, bool promote,
                       Precision precision = Precision::kIeee) {
  if (!promote) return dot(a, b, acc, precision);
  return acc + dot(a, b, splat(0.0f, acc.type().shape()), precision);
}

// How far a GEMM's f32 sum of `in` operands may be from the exact one, as a
// share of the sum of its terms' magnitudes: none for i8, f32 accumulation's; for fp8
// the tensor cores'. Each fp8 wgmma adds its 32 products to the running sum
// keeping about 14 bits (an error up to 2^-13 of the larger magnitude), so
// a K step of 128 summed from zero (gemm_step's promotion) is within 4 x
// 2^-13 = 2^-11 of its terms' magnitudes, and so is their f32 sum; one H100
// showed up to 2^-12.6. Over all of K (fast accumulation) the adds' errors
// add up with K, which no fixed share bounds in the worst case; 2^-10 is
// twice the worst seen there (2^-11.8 at K = 4096).
inline double gemm_sum_tolerance(DType in, bool fast_accum) {
  if (in == i8) return 0;  // summed exactly in i32
  if (!in.is_float8()) return 1e-5;
  return std::ldexp(1.0, fast_accum ? -10 : -11);
}

// Half a step of `d` at |v|, the most rounding to it moves v: bf16 keeps 8
// significant bits, e4m3 4 (steps of 2^-9 below 2^-6); 0 for f32.
inline double half_step(DType d, double v) {
  if (d == bf16) return std::ldexp(std::abs(v), -8);
  if (d == f8e4m3) return std::ldexp(1.0, std::max(std::ilogb(std::max(std::abs(v), 1e-30)), -6) - 4);
  return 0;
}

// A double reference's value and how far a device's may lie from it.
struct Bounded {
  double value, bound;
};

// --- The tensor-core GEMM: C [M, N] (f32, or bf16 rounded once) = A [M, K]
// @ B, with A and B bf16, f16, fp8 (e4m3 or e5m2, per-tensor scales applied
// to the f32 sum), f32 (multiplied as tf32) or i8 (summed exactly in i32: C
// i32 as it is, or scaled in f32) in swizzled TMA boxes of rows
// spanning 128 bytes (BK = 128 / element size) or whole panels of them, B
// given as N x K (K-major, read through trans) or as K x N (MN-major:
// wgmma's transpose bit, 16-bit types only), A as M x K or K x M the same
// way, persistent over output tiles taken in groups of `group_m` tile rows
// (consecutive programs share B's tiles and then A's in L2). On sm_90a the
// dot runs on wgmma with the accumulator in registers, and the K loop is
// software-pipelined.
struct GemmConfig {
  int64_t bm = 128, bn = 128, bk = 64;
  DType in = bf16;
  std::optional<DType> in_b = std::nullopt;  // B's dtype where it is not `in`: with fp8, the other fp8 kind
  // C's dtype. An fp8 C is quantized by a static scale: C = the result
  // times 1 / scale_c[0] (f32, taken after the scales), saturated. An i32
  // C (i8 operands only) is the exact sum, with no epilogue.
  DType out = f32;
  bool b_nk = true;  // B stored N x K (else K x N)
  bool a_mk = true;  // A stored M x K (else K x M)
  int stages = 0;    // of the K loop's pipeline (LoopOptions::stages)
  Swizzle swizzle = Swizzle::k128B;  // of A's and B's boxes, and C's where a row of C's box suits it (out_swizzle)
  int group_m = 8;                   // tile rows per group of the tile order
  // The epilogue: C = gelu(A @ B + bias) with bias [N] of dtype bias_type(),
  // taken by the kernel after the sizes; else C = A @ B.
  bool bias_gelu = false;
  // C = scale_a * scale_b * (A @ B), the scales f32 scalars in device memory
  // (per-tensor scales of fp8 operands), taken by the kernel after `bias`.
  bool scaled = false;
  bool tf32 = false;  // f32 operands multiplied as tf32 (Precision::kTf32)
  // fp8 only: the tensor cores' own running sum over all of K, which keeps
  // fewer bits than f32 as it grows (cuBLAS's fast accumulation). Without
  // it each K step's product is added to an f32 accumulator (gemm_step).
  bool fast_accum = false;
  // The persistent loop warp-specialized (LoopOptions::warp_specialize):
  // each of two consumer warpgroups computes whole bm x bn tiles, and a
  // producer warpgroup loads for both; the program takes 12 warps.
  bool warp_specialize = false;
  // With warp_specialize: both consumer warpgroups take every tile, bm / 2
  // rows each, each stage loaded once for both (LoopOptions::cooperative).
  bool cooperative = false;
  // Split-K: each output tile's K range is cut into `split_k` parts, each a
  // program's own work (split_k times the tiles to spread over the SMs),
  // and the programs add their partial tiles into C with tma_reduce: C
  // must be f32 and zero before the launch (splitk_finish_kernel rounds it
  // to `out` and zeroes it again), and the epilogue must be linear (scales,
  // not bias + GELU). For shapes with fewer tiles than SMs and a long K.
  int split_k = 1;
  // Stream-K: the programs share the K steps of the last tiles evenly
  // instead of taking them a whole tile at a time, so no SM idles through a
  // last, partial wave. Of T tiles over P programs, the first T - S are
  // whole tiles as usual, where S = T when T <= P, else the last wave's
  // T % P where that is at least half a wave, else it and a whole wave
  // before it (so that no program's share is a sliver; 0 when P divides
  // T); program v's share of the S tiles' steps is [v I / P,
  // (v + 1) I / P) of their I = S * ceil(K / BK) steps, at most a segment
  // a tile it touches. A segment short of a whole tile adds its partial
  // tile into a workspace slot with tma_reduce (f32) and counts its steps
  // into the slot's counter (acq_rel); the segment that completes the
  // count reads the sum, runs the epilogue and stores C, and leaves slot
  // and counter zero for the next launch. The kernel takes the slots as a
  // map and a pointer and the counters after the other arguments
  // (gemm_workspace makes them, zero, for a shape and a grid: launch on
  // GemmWorkspace::programs programs). Not with split_k or warp_specialize.
  bool stream_k = false;
  // 2-program clusters (KernelBuilder::cluster): the two programs of a
  // cluster take two tiles that share an operand's tile and load it once
  // for both, half each (tma_multicast). With cluster_m = 2, two tiles one
  // above the other share B's (B's map box is then half as tall along N,
  // or along K where B is K x N); with cluster_n = 2, two tiles side by
  // side share A's (A's box halved along M, or K where A is K x M). The
  // tile order walks pairs of tiles; a pair past C's edge computes zeros
  // that its store drops. At most one of them is 2; not with split_k or
  // stream_k.
  int cluster_m = 1, cluster_n = 1;
  // Grouped (an MoE layer's experts over its choices' rows in expert order,
  // as MoeAlign groups them in blocks of bm): B is [groups, N, K], N x K per
  // group (a 3-D map), and A's block of rows i is multiplied by group
  // groups[i]'s B. The kernel takes, after the scales (scale_b then one
  // per group), groups [M / bm] and total [1] (i32: the rows in use, a
  // multiple of bm; tiles past it run no K step and store zeros), M being
  // the rows A and C hold. B as N x K and A as M x K only; not with
  // split_k, stream_k or clusters.
  bool grouped = false;
  // C's rows multiplied last by row_scales [M] (f32, taken after the
  // grouping's arguments): an MoE layer's router weights, or an activation
  // quantized per row (per token) where no activation follows.
  bool row_scales = false;
  // The product's columns multiplied by col_scales [N] (f32, taken after
  // the row scales) with the per-tensor scales, before bias + GELU: a
  // weight quantized per output channel. With row_scales, fp8's and i8's
  // rowwise scaling (torch._scaled_mm's scale_a [M, 1], scale_b [1, N]).
  // Not with grouped or swiglu.
  bool col_scales = false;
  // Block scales, DeepSeek-V3's fine-grained scaling (torch._scaled_mm's
  // BlockWise1x128 for A, BlockWise128x128 for B): A's element [i, p] is
  // worth a_blocks[p / 128, i] times its value and B's [j, p] b_blocks[j /
  // 128, p / 128] times its own, with a_blocks [ceil(K / 128), M] (a scale
  // per row and 128-wide block of K, stored block by block: torch's scale_a
  // [M, K / 128] with strides (1, M)) and b_blocks [ceil(N / 128), ceil(K /
  // 128)] (a scale per 128 x 128 block of B as N x K, row-major), both f32,
  // taken after the column scales. Each K step's product is summed from
  // zero and added to the f32 accumulator times its rows' and columns'
  // scales, so a step lies in one block: bk divides 128. Grouped, each
  // group's B has its own: b_blocks [groups, ceil(N / 128), ceil(K / 128)].
  // fp8 or i8 operands, A as M x K and B as N x K; not with fast_accum (the
  // steps are summed in f32 already) or swiglu.
  bool block_scales = false;
  // The epilogue SwiGLU (an MoE layer's up projection, its activation
  // fused): C [M, N] = silu(A @ G^T) * (A @ U^T), where B is G [N, K] then
  // U [N, K], the two halves of [2N, K] ([groups, 2N, K] where grouped),
  // N being C's width. A tile takes bn / 2 columns of C: its B box holds
  // the matching bn / 2 rows of G and of U (a 3-D box, 4-D where grouped),
  // so its accumulator's left half is the gate's and its right half the
  // up projection's, which split() takes apart in registers. Scales apply
  // before the activation, row scales after. A as M x K and B as N x K;
  // not with bias_gelu, split_k, stream_k or clusters.
  bool swiglu = false;

  DType b_type() const { return in_b.value_or(in); }
  // The accumulator's dtype: i32 for i8 operands summed exactly, else f32.
  DType acc_type() const { return in == i8 && !block_scales ? i32 : f32; }
  // The bias's dtype: the operands', but bf16 for i8 operands.
  DType bias_type() const { return in == i8 ? bf16 : in; }
  // The columns of C a tile takes.
  int64_t c_cols() const { return swiglu ? bn / 2 : bn; }
  int cluster() const { return cluster_m * cluster_n; }
  // The boxes of A's and B's maps, outermost first, as stored.
  Shape a_box() const {
    const int64_t parts = cluster_n;
    return a_mk ? Shape{bm / parts, bk} : Shape{bk / parts, bm};
  }
  Shape b_box() const {
    const int64_t parts = cluster_m;
    if (swiglu) return grouped ? Shape{1, 2, bn / 2, bk} : Shape{2, bn / 2, bk};
    if (grouped) return {1, bn, bk};
    return b_nk ? Shape{bn / parts, bk} : Shape{bk / parts, bn};
  }
  // The swizzle of a bm x c_cols() box of `t` (C's, or stream-K's f32
  // slots): the widest, up to `swizzle`, whose panels a row of it fills
  // (NVIDIA's swizzled boxes are at least a panel wide); none where no
  // swizzle suits it (152 bf16 columns: 304 bytes).
  Swizzle out_swizzle(DType t) const {
    for (Swizzle s = swizzle; s != Swizzle::kNone; s = static_cast<Swizzle>(static_cast<int>(s) - 1)) {
      const int64_t row = c_cols() * t.bytes(), width = swizzle_bytes(s);
      if (row % width == 0) return s;
    }
    return Swizzle::kNone;
  }
};

// The width of the blocks of K (and of N, for B) that GemmConfig::block_scales scale.
inline constexpr int64_t kScaleBlock = 128;

// GELU in its tanh form, x/2 (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715
// x^3), taken from h = x/2 (which the GEMM's epilogue gets from the
// accumulator in one fused multiply-add, with the bias row halved before
// the K loop): h + h tanh(u), u = h (2c + 8c 0.044715 h^2) with c =
// sqrt(2/pi); five multiplies and fused multiply-adds an element, and tanh
// in its fast form: one tanh.approx on NVIDIA (absolute error 2^-16.9 on an
// H200), the accurate tanh on the host. (Written as x sigmoid(2u) = x / (1 +
// exp(-2u)) it took an exponential, a division and a clamp of u, whose exp
// overflowed into the division's slow path.)
inline Value gelu_of_half(const Value& h) {
  constexpr double kC = 0.7978845608028654;  // sqrt(2/pi)
  Value u = h * fma(h * h, 8 * 0.044715 * kC, 2 * kC);
  return fma(h, tanh(u, MathForm::kFast), h);
}
// The same in double, for references.
inline double gelu_reference(double x) { return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }

// silu(g) u in double, where g and u are within dg and du of the device's
// (|silu'| < 1.1).
inline Bounded swiglu_reference(double g, double u, double dg, double du) {
  const double s = g / (1 + std::exp(-g));
  return {s * u, 1.1 * (std::abs(u) + du) * dg + std::abs(s) * du};
}

// silu(x) = x sigmoid(x) = x / (1 + exp(-x)), with the fast exponential
// and division (ex2.approx and div.approx on NVIDIA): a large negative x
// gives x / inf = -0, a large positive x / 1.
inline Value silu(const Value& x) { return div(x, 1.0f + exp(-x, MathForm::kFast), MathForm::kFast); }

inline absl::StatusOr<Kernel> gemm_kernel(const GemmConfig& g, std::string name = "gemm") {
  if (g.split_k < 1) {
    return absl::InvalidArgumentError(absl::StrCat("gemm_kernel: split_k must be >= 1, got ", g.split_k));
  }
  if (g.split_k > 1 && g.out != f32) {
    return absl::InvalidArgumentError(absl::StrCat("gemm_kernel: split_k = ", g.split_k,
                                                   " adds partial tiles into C, which must then be f32, got ",
                                                   g.out.name()));
  }
  if (g.stream_k && (g.split_k > 1 || g.warp_specialize)) {
    return absl::InvalidArgumentError(absl::StrCat("gemm_kernel: stream_k takes neither split_k (got ", g.split_k,
                                                   ") nor warp_specialize (got ", g.warp_specialize, ")"));
  }
  if (g.cluster_m < 1 || g.cluster_n < 1 || g.cluster() > 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("gemm_kernel: clusters of 1 or 2 tiles are supported, got ", g.cluster_m, " x ", g.cluster_n));
  }
  if (g.cluster() > 1 && (g.split_k > 1 || g.stream_k)) {
    return absl::InvalidArgumentError(absl::StrCat("gemm_kernel: a cluster of ", g.cluster(),
                                                   " takes neither split_k (got ", g.split_k, ") nor stream_k (got ",
                                                   g.stream_k, ")"));
  }
  if (g.grouped && (!g.a_mk || !g.b_nk || g.split_k > 1 || g.stream_k || g.cluster() > 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gemm_kernel: a grouped GEMM takes A as M x K and B as N x K per group, without split_k, stream_k or "
        "clusters; got A ",
        g.a_mk ? "M x K" : "K x M", ", B ", g.b_nk ? "N x K" : "K x N", ", split_k ", g.split_k, ", stream_k ",
        g.stream_k, ", clusters of ", g.cluster()));
  }
  if (g.swiglu &&
      (!g.a_mk || !g.b_nk || g.bias_gelu || g.split_k > 1 || g.stream_k || g.cluster() > 1 || g.bn % 16 != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gemm_kernel: a SwiGLU epilogue takes A as M x K and B as N x K, tiles a multiple of 16 wide, and neither "
        "bias_gelu, split_k, stream_k nor clusters; got A ",
        g.a_mk ? "M x K" : "K x M", ", B ", g.b_nk ? "N x K" : "K x N", ", bn ", g.bn, ", bias_gelu ", g.bias_gelu,
        ", split_k ", g.split_k, ", stream_k ", g.stream_k, ", clusters of ", g.cluster()));
  }
  if (g.in == i8 && (g.split_k > 1 || g.stream_k || g.b_type() != i8)) {
    return absl::InvalidArgumentError(
        absl::StrCat("gemm_kernel: i8 operands (both A and B) sum into i32 and take "
                     "neither split_k nor stream_k; got B ",
                     g.b_type().name(), ", split_k ", g.split_k, ", stream_k ", g.stream_k));
  }
  if (g.col_scales && (g.grouped || g.swiglu)) {
    return absl::InvalidArgumentError(
        absl::StrCat("gemm_kernel: column scales are one per column of C, so neither grouped (got ", g.grouped,
                     ") nor swiglu (got ", g.swiglu, ")"));
  }
  if (g.out == i32 &&
      (g.in != i8 || g.scaled || g.bias_gelu || g.swiglu || g.row_scales || g.col_scales || g.block_scales)) {
    return absl::InvalidArgumentError(
        absl::StrCat("gemm_kernel: an i32 C is the exact sum of i8 operands' products, without scales or another "
                     "epilogue; got ",
                     g.in.name(), " operands", g.scaled ? ", scales" : "", g.bias_gelu ? ", bias + GELU" : "",
                     g.swiglu ? ", SwiGLU" : "", g.row_scales ? ", row scales" : "",
                     g.col_scales ? ", column scales" : "", g.block_scales ? ", block scales" : ""));
  }
  if (g.block_scales && (!(g.in.is_float8() || g.in == i8) || !g.a_mk || !g.b_nk || g.bk > kScaleBlock ||
                         kScaleBlock % g.bk != 0 || g.fast_accum || g.swiglu)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gemm_kernel: block scales take fp8 or i8 operands, A as M x K and B as N x K, K steps that divide ",
        kScaleBlock, ", and neither fast_accum nor swiglu; got ", g.in.name(), " operands, A ",
        g.a_mk ? "M x K" : "K x M", ", B ", g.b_nk ? "N x K" : "K x N", ", bk ", g.bk, ", fast_accum ", g.fast_accum,
        ", swiglu ", g.swiglu));
  }
  if (g.split_k > 1 && g.bias_gelu) {
    return absl::InvalidArgumentError(absl::StrCat("gemm_kernel: split_k = ", g.split_k,
                                                   " sums partial tiles, so the epilogue must be linear; bias + GELU "
                                                   "is not"));
  }
  KernelBuilder k(std::move(name));
  if (g.cluster() > 1) k.cluster(g.cluster());
  Value a = k.tensor_map(g.in, g.a_box(), "a", g.swizzle);                    // A [M, K] (or [K, M])
  Value b = k.tensor_map(g.b_type(), g.b_box(), "b", g.swizzle);              // B [N, K] (or [K, N])
  Value c = k.tensor_map(g.out, {g.bm, g.c_cols()}, "c", g.out_swizzle(g.out));  // C [M, N]
  Value m = k.arg(i32, "m"), n = k.arg(i32, "n"), kdim = k.arg(i32, "k");
  Value bias = g.bias_gelu ? k.arg(ptr(g.bias_type()), "bias") : Value();
  Value scale_a = g.scaled ? k.arg(ptr(f32), "scale_a") : Value();
  Value scale_b = g.scaled ? k.arg(ptr(f32), "scale_b") : Value();
  Value scale_c = g.out.is_float8() ? k.arg(ptr(f32), "scale_c") : Value();
  Value groups = g.grouped ? k.arg(ptr(i32), "groups") : Value();             // [M / BM] i32
  Value used = g.grouped ? load(k.arg(ptr(i32), "total")) : Value();          // the rows in use
  Value row_scales = g.row_scales ? k.arg(ptr(f32), "row_scales") : Value();  // [M] f32
  Value col_scales = g.col_scales ? k.arg(ptr(f32), "col_scales") : Value();  // [N] f32
  Value a_blocks = g.block_scales ? k.arg(ptr(f32), "a_blocks") : Value();    // [ceil(K / 128), M] f32
  Value b_blocks = g.block_scales ? k.arg(ptr(f32), "b_blocks") : Value();    // [ceil(N / 128), ceil(K / 128)] f32
  Value blocks_k = g.block_scales ? cdiv(kdim, kScaleBlock) : Value();
  Value group_blocks = g.block_scales && g.grouped ? cdiv(n, kScaleBlock) * blocks_k : Value();  // a group's
  Value slots =
      g.stream_k ? k.tensor_map(f32, {g.bm, g.bn}, "slots", g.out_swizzle(f32)) : Value();  // [S * BM, BN] f32
  Value slot_ptr = g.stream_k ? k.arg(ptr(f32), "slot_ptr") : Value();                     // the same memory
  Value counts = g.stream_k ? k.arg(ptr(i32), "counts") : Value();                          // [S] i32
  // The tile order walks units of cluster_m x cluster_n tiles.
  Value tiles_m = cdiv(cdiv(m, g.bm), g.cluster_m), tiles_n = cdiv(cdiv(n, g.c_cols()), g.cluster_n);
  Value per_group = tiles_n * g.group_m;
  Value tiles = tiles_m * tiles_n;
  Value work = g.split_k > 1 ? tiles * g.split_k : tiles;
  // Stream-K: `whole` tiles, then `shared` ones, whose steps [lo, hi) are
  // this program's, from the shared tile first_slot on.
  Value steps_per_tile, programs, whole, lo, hi, first_slot;
  if (g.stream_k) {
    steps_per_tile = cdiv(kdim, g.bk);
    programs = k.num_programs();
    Value rest = tiles % programs;
    Value shared = select(tiles <= programs, tiles,
                          select(rest * 2 >= programs, rest, select(rest == 0, 0, rest + programs)));
    whole = tiles - shared;  // a multiple of P: work w >= whole is this program's share
    Value steps = cast(shared * steps_per_tile, i64), p = cast(programs, i64), v = cast(k.program_id(), i64);
    // (In i64: v * steps may pass 2^31 where K is long.)
    lo = cast(v * steps / p, i32);
    hi = cast((v + 1) * steps / p, i32);
    first_slot = lo / steps_per_tile;
    Value segments = cdiv(cdiv(cast(steps, i32), programs), steps_per_tile) + 1;
    work = whole + select(shared > 0, segments * programs, 0);
  }
  // With split_k, program work w is part w / tiles of tile w % tiles: the
  // programs running at once share their K range (and A's and B's tiles in L2).
  // With stream_k, work w >= whole is segment (w - whole) / P of this
  // program's share; its bounds come from outside the loop, so that
  // computing the next tile's ahead costs no more than the plain GEMM's.
  k.for_each_tile(work, [&](Value w) {
    Value t = g.split_k > 1 ? w % tiles : w;
    Value k_lo = k.constant(0, i32), k_hi = kdim;
    if (g.split_k > 1) {
      Value span = cdiv(cdiv(kdim, g.bk), g.split_k) * g.bk;  // whole BK blocks
      k_lo = w / tiles * span;
      k_hi = minimum(k_lo + span, kdim);
    }
    Value slot, first, last, is_whole;  // stream-K: the segment's tile among the shared, its steps [first, last)
    if (g.stream_k) {
      slot = first_slot + maximum(w - whole, 0) / programs;
      Value base = slot * steps_per_tile;
      first = maximum(lo, base);
      last = minimum(hi, base + steps_per_tile);
      Value whole_tile = w < whole;
      t = select(whole_tile, w, whole + slot);
      k_lo = select(whole_tile, 0, (first - base) * g.bk);
      k_hi = select(whole_tile, kdim, select(first < last, minimum((last - base) * g.bk, kdim), k_lo));
      is_whole = whole_tile | ((first == base) & (last == base + steps_per_tile));
    }
    Value first_m = t / per_group * g.group_m;
    Value group_rows = minimum(tiles_m - first_m, g.group_m);
    Value unit_row = first_m + t % per_group % group_rows, unit_col = t % per_group / group_rows;
    // A cluster's programs take the unit's tiles by rank.
    Value row = (g.cluster_m > 1 ? unit_row * g.cluster_m + k.cluster_rank() : unit_row) * g.bm;
    Value col = (g.cluster_n > 1 ? unit_col * g.cluster_n + k.cluster_rank() : unit_col) * g.c_cols();
    // A grouped tile's group; one past the rows in use runs no K step.
    Value group;
    if (g.grouped) {
      Value live = row < used;
      group = load(groups + row / g.bm, live, 0);
      k_hi = select(live, k_hi, k_lo);
    }
    // The epilogue's operands are read before the K loop, which hides their latency.
    Value scale = g.scaled ? load(scale_a) * load(g.grouped ? scale_b + group : scale_b) : Value();  // f32
    Value rows = g.row_scales || g.block_scales ? row + k.arange(0, g.bm) : Value();                 // [BM] i32
    Value row_scale = g.row_scales ? load(row_scales + rows, rows < m, 0.0f) : Value();              // [BM] f32
    // A tile whose columns lie in one block of B's scales takes one a step.
    const bool one_b_block = kScaleBlock % g.c_cols() == 0;
    Value cols = g.col_scales || g.bias_gelu || (g.block_scales && !one_b_block) ? col + k.arange(0, g.bn)
                                                                                 : Value();  // [BN] i32
    Value col_scale = g.col_scales ? load(col_scales + cols, cols < n, 0.0f) : Value();  // [BN] f32
    Value half_bias;                                                                     // [BN] f32, bias / 2
    if (g.bias_gelu) half_bias = cast(load(bias + cols, cols < n, 0.0), f32) * 0.5;
    // Where the K loop reads the block scales, at its first block: A's of the
    // tile's rows, and B's of its columns (their group's where grouped).
    Value a_scales = g.block_scales ? a_blocks + rows : Value();  // [BM]
    Value b_scales;                                               // one, or [BN]
    if (g.block_scales) {
      Value base = g.grouped ? b_blocks + group * group_blocks : b_blocks;
      b_scales = base + (one_b_block ? col : cols) / kScaleBlock * blocks_k;
    }
    // [BM, BN] f32 (i32 for i8 operands: exact), registers
    Var acc = k.var(k.zeros({g.bm, g.bn}, g.acc_type()));
    // The step at kk's product times A's rows' and B's columns' block scales.
    auto block_scaled = [&](Value kk, const Value& at, const Value& bt) {
      Value kb = kk / kScaleBlock;
      Value part = dot(at, bt, k.zeros({g.bm, g.bn}, g.in == i8 ? i32 : f32));
      if (g.in == i8) part = cast(part, f32);
      Value sa = expand_dims(load(a_scales + kb * m, rows < m, 0.0f), 1);  // [BM, 1]
      Value sb = one_b_block ? load(b_scales + kb, col < n, 0.0f)
                             : expand_dims(load(b_scales + kb, cols < n, 0.0f), 0);  // [1, BN]
      return fma(part, sa * sb, acc);
    };
    k.for_range(k_lo, k_hi, g.bk,
                [&](Value kk) {
                  // An operand the cluster's two tiles share comes once for both.
                  auto load_a = [&](const std::vector<Operand>& at) {
                    return g.cluster_n > 1 ? tma_multicast(a, at) : tma_load(a, at);
                  };
                  auto load_b = [&](const std::vector<Operand>& at) {
                    return g.cluster_m > 1 ? tma_multicast(b, at) : tma_load(b, at);
                  };
                  Value at = g.a_mk ? load_a({row, kk}) : trans(load_a({kk, row}));  // [BM, BK], smem
                  // (SwiGLU: G's rows [col, col + BN / 2), then U's.)
                  Value bt =
                      g.swiglu
                          ? trans(reshape(g.grouped ? load_b({group, 0, col, kk}) : load_b({0, col, kk}), {g.bn, g.bk}))
                      : g.grouped ? trans(reshape(load_b({group, col, kk}), {g.bn, g.bk}))
                      : g.b_nk    ? trans(load_b({col, kk}))
                                  : load_b({kk, col});  // [BK, BN], smem
                  acc = g.block_scales ? block_scaled(kk, at, bt)
                                       : gemm_step(at, bt, acc, g.in.is_float8() && !g.fast_accum,
                                                   g.tf32 ? Precision::kTf32 : Precision::kIeee);
                },
                {.stages = g.stages});
    auto epilogue = [&](Value out) {  // [BM, BN] f32 (or i32), registers
      if (out.type().dtype() == i32 && g.out != i32) out = cast(out, f32);
      if (g.col_scales) out = out * expand_dims(col_scale, 0);
      if (g.bias_gelu) {
        // h = (out + bias) / 2 in one fused multiply-add; see gelu_of_half.
        Value hb = expand_dims(half_bias, 0);  // [1, BN]
        out = gelu_of_half(g.scaled ? fma(out, scale * 0.5, hb) : fma(out, 0.5, hb));
      } else if (g.scaled) {
        out = out * scale;
      }
      if (g.swiglu) {
        auto [gate, up] = split(out, 1);  // [BM, BN / 2] each, in the accumulator's registers
        out = silu(gate) * up;
      }
      if (g.row_scales) out = out * expand_dims(row_scale, 1);
      if (g.out.is_float8()) out = out * (1.0f / load(scale_c));
      if (g.split_k > 1) {
        tma_reduce(AtomicOp::kAdd, c, {row, col}, out);
      } else {
        tma_store(c, {row, col}, g.out == out.type().dtype() ? out : cast(out, g.out));
      }
    };
    if (!g.stream_k) {
      epilogue(acc);
      return;
    }
    // A part of a shared tile: add it to the tile's slot; the part that
    // completes the tile's count finishes it.
    Var sum = k.var(acc), done = k.var(is_whole);
    k.if_((!is_whole) & (first < last), [&] {
      tma_reduce(AtomicOp::kAdd, slots, {slot * g.bm, 0}, acc);
      Value taken = last - first;
      k.if_(atomic_add(counts + slot, taken) + taken == steps_per_tile, [&] {
        Value at = slot_ptr + (slot * g.bm + expand_dims(k.arange(0, g.bm), 1)) * g.bn +
                   expand_dims(k.arange(0, g.bn), 0);  // [BM, BN]
        sum = load(at);
        store(at, k.zeros({g.bm, g.bn}, f32));
        store(counts + slot, k.constant(0, i32));
        done = true;
      });
    });
    k.if_(done, [&] { epilogue(sum); });
  }, {.warp_specialize = g.warp_specialize, .cooperative = g.cooperative});
  return k.build();
}

// A GEMM in the form of Triton's matmul tutorial: every operand through
// pointers, no tensor maps, so any row stride serves. One program per C
// tile in the grouped order, A's and B's tiles loaded in a K loop with
// masks at the matrices' edges; the loop issues each step's loads an
// iteration ahead (codegen/prefetch.h). A is [M, K] and B [N, K], both
// row-major, C [M, N] of `out`; args a, b, c, m, n, k; launch on
// pointer_gemm_grid programs.
struct PointerGemmConfig {
  int64_t bm = 128, bn = 128, bk = 64;
  DType in = bf16, out = bf16;
  int group_m = 8;
  int stages = 0;  // the K loop's LoopOptions::stages: 1 loads each step in its own iteration
  // The tutorial's loop literally: pointer tiles stepped by BK each
  // iteration (a_ptrs += BLOCK_K) and masks against what K has left, where
  // the default computes them from the induction variable. tessel turns
  // the steps into the same addresses (close_stepped_carried, dsl/passes.h).
  bool stepped = false;
};
inline absl::StatusOr<Kernel> pointer_gemm_kernel(const PointerGemmConfig& g, std::string name = "pointer_gemm") {
  KernelBuilder k(std::move(name));
  Value a = k.arg(ptr(g.in), "a"), b = k.arg(ptr(g.in), "b"), c = k.arg(ptr(g.out), "c");
  Value m = k.arg(i32, "m"), n = k.arg(i32, "n"), kdim = k.arg(i32, "k");
  Value tiles_m = cdiv(m, g.bm), tiles_n = cdiv(n, g.bn);
  Value t = k.program_id(), per_group = tiles_n * g.group_m;
  Value first_m = t / per_group * g.group_m, group_rows = minimum(tiles_m - first_m, g.group_m);
  Value rows = (first_m + t % per_group % group_rows) * g.bm + k.arange(0, g.bm);  // [BM] i32
  Value cols = t % per_group / group_rows * g.bn + k.arange(0, g.bn);              // [BN] i32
  Value a_rows = expand_dims(rows * kdim, 1), b_rows = expand_dims(cols * kdim, 1);
  Value a_in = expand_dims(rows < m, 1), b_in = expand_dims(cols < n, 1);
  Var acc = k.var(k.zeros({g.bm, g.bn}, f32));  // [BM, BN] f32
  if (g.stepped) {
    Value ks = expand_dims(k.arange(0, g.bk), 0);  // [1, BK] i32
    Var pa = k.var(a + a_rows + ks), pb = k.var(b + b_rows + ks);
    k.for_range(0, cdiv(kdim, g.bk), 1,
                [&](Value kk) {
                  Value left = kdim - kk * g.bk;
                  Value at = load(pa, a_in & (ks < left), 0.0);  // [BM, BK]
                  Value bt = load(pb, b_in & (ks < left), 0.0);  // [BN, BK]
                  acc = dot(at, trans(bt), acc);
                  pa = pa + g.bk;
                  pb = pb + g.bk;
                },
                {.stages = g.stages});
  } else {
    k.for_range(0, kdim, g.bk,
                [&](Value kk) {
                  Value ks = expand_dims(kk + k.arange(0, g.bk), 0);          // [1, BK] i32
                  Value at = load(a + a_rows + ks, a_in & (ks < kdim), 0.0);  // [BM, BK]
                  Value bt = load(b + b_rows + ks, b_in & (ks < kdim), 0.0);  // [BN, BK]
                  acc = dot(at, trans(bt), acc);
                },
                {.stages = g.stages});
  }
  store(c + expand_dims(rows * n, 1) + expand_dims(cols, 0), cast(acc, g.out),
        expand_dims(rows < m, 1) & expand_dims(cols < n, 0));
  return k.build();
}
inline int64_t pointer_gemm_grid(const PointerGemmConfig& g, int64_t m, int64_t n) {
  return ((m + g.bm - 1) / g.bm) * ((n + g.bn - 1) / g.bn);
}

// The three maps gemm_kernel(g) takes, on `device`: over A [m, k] (or [k, m]
// without g.a_mk), B [n, k] (or [k, n] without g.b_nk; [groups, n, k] where
// g.grouped) and C [m, n].
struct GemmMaps {
  TensorMap a, b, c;
};
// (`encode` makes them: samples/maps.h.)
inline absl::StatusOr<GemmMaps> gemm_maps(const MapEncoder& encode, const GemmConfig& g, const Buffer& a,
                                          const Buffer& b, const Buffer& c, int64_t m, int64_t n, int64_t k,
                                          int64_t groups = 1) {
  absl::StatusOr<TensorMap> am = encode(g.in, a, g.a_mk ? Shape{m, k} : Shape{k, m}, g.a_box(), g.swizzle);
  if (!am.ok()) return am.status();
  const Shape b_shape = g.swiglu    ? (g.grouped ? Shape{groups, 2, n, k} : Shape{2, n, k})
                        : g.grouped ? Shape{groups, n, k}
                        : g.b_nk    ? Shape{n, k}
                                    : Shape{k, n};
  absl::StatusOr<TensorMap> bm = encode(g.b_type(), b, b_shape, g.b_box(), g.swizzle);
  if (!bm.ok()) return bm.status();
  absl::StatusOr<TensorMap> cm = encode(g.out, c, {m, n}, {g.bm, g.c_cols()}, g.out_swizzle(g.out));
  if (!cm.ok()) return cm.status();
  return GemmMaps{*am, *bm, *cm};
}
inline absl::StatusOr<GemmMaps> gemm_maps(const Device& device, const GemmConfig& g, const Buffer& a, const Buffer& b,
                                          const Buffer& c, int64_t m, int64_t n, int64_t k, int64_t groups = 1) {
  return gemm_maps(device_maps(device), g, a, b, c, m, n, k, groups);
}

// The bm x c_cols() tiles of an m x n C.
inline int64_t gemm_tiles(const GemmConfig& g, int64_t m, int64_t n) {
  return (m + g.bm - 1) / g.bm * ((n + g.c_cols() - 1) / g.c_cols());
}

// The units of work gemm_kernel(g) spreads over its programs for an m x n
// C: its tiles, each split_k times; with clusters, a program's share of a
// cluster's unit of tiles (so the programs that have work).
inline int64_t gemm_work(const GemmConfig& g, int64_t m, int64_t n) {
  if (g.cluster() > 1) {
    const int64_t rows = ((m + g.bm - 1) / g.bm + g.cluster_m - 1) / g.cluster_m;
    const int64_t cols = ((n + g.bn - 1) / g.bn + g.cluster_n - 1) / g.cluster_n;
    return rows * cols * g.cluster();
  }
  return gemm_tiles(g, m, n) * g.split_k;
}

// The grid for gemm_kernel(g) at m x n on `programs` programs at most (a
// device's compute units): no more programs than have work, in whole
// clusters.
inline int gemm_grid(const GemmConfig& g, int64_t m, int64_t n, int programs) {
  const int c = g.cluster();
  return static_cast<int>(std::max<int64_t>(std::min<int64_t>(gemm_work(g, m, n), programs) / c * c, c));
}

// Tile widths fitted to an m x n C on `programs` programs, for tiles of bm
// rows: the `count` multiples of 8 from 128 to `widest` whose tiles take each
// program the least time, counted as the rounds of tiles it runs times the
// width (a round's time grows with it), the wider first where equal. At
// 3000 x 5000 on 132 programs, 128-row tiles 152 wide make 792 tiles, six
// whole waves (6 x 152 against 4 x 256 for 480 tiles of 256: the fourth
// round of those is two thirds full), and 232 wide 528, four. (Two
// warpgroups keep at most 160 columns of 256 rows in registers.) None
// where a size or `programs` is not positive.
inline std::vector<int64_t> fitted_widths(int64_t m, int64_t n, int64_t bm, int64_t programs, size_t count,
                                          int64_t widest = 256) {
  if (m <= 0 || n <= 0 || bm <= 0 || programs <= 0) return {};  // no tiles to fit
  std::vector<std::pair<int64_t, int64_t>> by_cost;             // (rounds * width, -width)
  const int64_t rows = (m + bm - 1) / bm;
  for (int64_t bn = 128; bn <= widest; bn += 8) {
    const int64_t tiles = rows * ((n + bn - 1) / bn);
    by_cost.emplace_back((tiles + programs - 1) / programs * bn, -bn);
  }
  std::sort(by_cost.begin(), by_cost.end());
  std::vector<int64_t> widths;
  for (size_t i = 0; i < by_cost.size() && i < count; ++i) widths.push_back(-by_cost[i].second);
  return widths;
}

// The shared tiles (and so the workspace slots) of a stream-K GEMM
// (GemmConfig::stream_k) of an m x n C on `programs` programs.
inline int64_t gemm_stream_k_slots(const GemmConfig& g, int64_t m, int64_t n, int64_t programs) {
  const int64_t tiles = gemm_tiles(g, m, n);
  if (tiles <= programs) return tiles;
  const int64_t rest = tiles % programs;
  return rest == 0 || rest * 2 >= programs ? rest : rest + programs;
}

// A stream-K GEMM's workspace for an m x n C on `programs` programs: an f32
// bm x bn slot and an i32 counter per shared tile, all zero before the first
// launch (the kernel leaves them zero), the map over the slots that the
// kernel takes, and the grid to launch on (the shares depend on it).
struct GemmWorkspace {
  Buffer tiles, counts;
  TensorMap map;
  int programs = 0;
};
inline absl::StatusOr<GemmWorkspace> gemm_workspace(const Device& device, const GemmConfig& g, int64_t m, int64_t n,
                                                    int programs) {
  if (programs < 1) {
    return absl::InvalidArgumentError(absl::StrCat("gemm_workspace: programs must be >= 1, got ", programs));
  }
  const int64_t slots = std::max<int64_t>(gemm_stream_k_slots(g, m, n, programs), 1);
  const std::vector<float> zeros(slots * g.bm * g.bn, 0.0f);
  absl::StatusOr<Buffer> tiles = device.allocate(zeros.size() * 4);
  if (!tiles.ok()) return tiles.status();
  absl::StatusOr<Buffer> counts = device.allocate(slots * 4);
  if (!counts.ok()) return counts.status();
  if (absl::Status s = device.copy_to_device(*tiles, zeros.data(), zeros.size() * 4); !s.ok()) return s;
  if (absl::Status s = device.copy_to_device(*counts, zeros.data(), slots * 4); !s.ok()) return s;
  absl::StatusOr<TensorMap> map =
      device.tensor_map(f32, *tiles, {slots * g.bm, g.bn}, {g.bm, g.bn}, g.out_swizzle(f32));
  if (!map.ok()) return map.status();
  return GemmWorkspace{*std::move(tiles), *std::move(counts), *map, programs};
}

// A grouped GEMM's rows (GemmConfig::grouped): each block's group and the
// rows in use; and C's row scales where GemmConfig::row_scales.
struct GemmRows {
  Buffer groups, total, scales;
};

// A's and B's block scales (GemmConfig::block_scales).
struct GemmBlockScales {
  Buffer a, b;  // [ceil(K / 128), M] and [ceil(N / 128), ceil(K / 128)] f32
};

// gemm_kernel(g)'s arguments: the maps and the problem's sizes, then `bias`
// where g.bias_gelu, the scales where g.scaled, `scale_c` where C is fp8,
// `rows`' buffers where g.grouped or g.row_scales, `col_scales` where
// g.col_scales, `blocks` where g.block_scales, and the workspace where
// g.stream_k. They point into `maps` and `ws`, which must outlive them.
inline std::vector<KernelArg> gemm_args(const GemmConfig& g, const GemmMaps& maps, int64_t m, int64_t n, int64_t k,
                                        const Buffer& bias, const Buffer& scale_a, const Buffer& scale_b,
                                        const GemmWorkspace* ws = nullptr, const GemmRows* rows = nullptr,
                                        const Buffer* scale_c = nullptr, const Buffer* col_scales = nullptr,
                                        const GemmBlockScales* blocks = nullptr) {
  std::vector<KernelArg> args = {maps.a, maps.b, maps.c, static_cast<int32_t>(m), static_cast<int32_t>(n),
                                 static_cast<int32_t>(k)};
  if (g.bias_gelu) args.push_back(bias);
  if (g.scaled) args.insert(args.end(), {scale_a, scale_b});
  if (g.out.is_float8() && scale_c != nullptr) args.push_back(*scale_c);
  if (g.grouped && rows != nullptr) args.insert(args.end(), {rows->groups, rows->total});
  if (g.row_scales && rows != nullptr) args.push_back(rows->scales);
  if (g.col_scales && col_scales != nullptr) args.push_back(*col_scales);
  if (g.block_scales && blocks != nullptr) args.insert(args.end(), {blocks->a, blocks->b});
  if (g.stream_k && ws != nullptr) args.insert(args.end(), {ws->map, ws->tiles, ws->counts});
  return args;
}

// After a split-K GEMM (GemmConfig::split_k): dst [count] = acc [count] (C,
// f32) rounded to `out`, and acc zeroed for the next split-K GEMM, so that a
// workspace zeroed once stays ready.
inline constexpr int kFinishBlock = 2048;
inline absl::StatusOr<Kernel> splitk_finish_kernel(DType out) {
  KernelBuilder k("splitk_finish");
  Value acc = k.arg(ptr(f32), "acc"), dst = k.arg(ptr(out), "dst");
  Value count = k.arg(i32, "count");
  k.for_each_tile(cdiv(count, kFinishBlock), [&](Value t) {
    Value offs = t * kFinishBlock + k.arange(0, kFinishBlock);  // [B] i32
    Value mask = offs < count;
    store(dst + offs, cast(load(acc + offs, mask, 0.0f), out), mask);
    store(acc + offs, k.zeros({kFinishBlock}, f32), mask);
  });
  return k.build();
}

// The main sample's GEMM (samples/matmul.cc), which the GPU benchmarks time
// too: 128 x 256 x 64 tiles, 3 stages, C in bf16, on two warpgroups.
inline constexpr GemmConfig kMatmul = {.bm = 128, .bn = 256, .bk = 64, .out = bf16, .stages = 3};
inline constexpr int kMatmulWarps = 8;
// The other configuration the sample lets the autotuner consider: 128 x 128
// tiles, 4 stages (faster where 128 x 256 tiles leave SMs idle).
inline constexpr GemmConfig kMatmulNarrow = {.bm = 128, .bn = 128, .bk = 64, .out = bf16, .stages = 4};
// And warp-specialized (ping-pong): two consumer warpgroups on 128 x 128
// tiles of their own, one's epilogue under the other's products, and a
// producer warpgroup: 12 warps.
inline constexpr GemmConfig kMatmulPingPong = {
    .bm = 128, .bn = 128, .bk = 64, .out = bf16, .stages = 4, .warp_specialize = true};
inline constexpr int kMatmulPingPongWarps = 12;
inline absl::StatusOr<Kernel> matmul_kernel(std::string name = "matmul") { return gemm_kernel(kMatmul, std::move(name)); }
// The sample's GEMM on AMD GPUs (gfx942): tiles that fit in 64 KiB of LDS,
// on four wavefronts; no pipeline (AMD has no asynchronous TMA).
inline constexpr GemmConfig kMatmulAmd = {.bm = 64, .bn = 64, .bk = 64, .out = bf16, .stages = 1};
inline constexpr int kMatmulAmdWarps = 4;

}  // namespace samples
