// A mixture-of-experts layer's kernels: the experts' GEMM over the choices
// MoeAlign groups (moe_align.h), SwiGLU, quantization, the permutation into
// expert order and the combine; the whole layer (MoeLayer); and the checks
// of a run against double references, stage by stage.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/float16.h"
#include "base/float8.h"
#include "base/status.h"
#include "dsl/builder.h"
#include "dsl/ops.h"
#include "samples/kernels.h"
#include "samples/moe_align.h"
#include "tessel/tessel.h"

namespace samples {

using namespace tessel;  // NOLINT: kernels read like the DSL's documentation

// The experts' GEMM over the grouped choices (vLLM's fused_moe): row i of C
// (token t's j-th choice, i = t * top_k + j) is token t's row of A times
// the chosen expert's weights, for every choice at once, with no copy of
// A's rows in expert order. A program takes a block of `bm` positions of
// MoeAlign's order (one expert's, as `block_experts` says; bm is the
// alignment's block) by `bn` columns, in grouped order: it gathers the
// block's rows of A by their tokens through pointers, reads its expert's
// N x K weights, and scatters its rows of C to their choices (padding
// rows write nothing). The K loop's loads take copy rings on NVIDIA.
// Args: a [tokens, K] and w [experts, N, K] of `in`; c [n, N] of `out`;
// sorted, block_experts, offsets as MoeAlign leaves them; with
// `routed_weights`, weights [n] f32, each choice's router weight, which
// scales its row of C; with `scaled`, scale_a [1] and scale_w [experts]
// f32, A's scale and each expert's weights' (fp8's per-tensor scales: C =
// scale_a * scale_w[e] * A W_e^T); then n (choices), top_k, experts, N, K
// (i32). Launch on moe_gemm_grid programs. fp8 operands (f8e4m3, f8e5m2)
// take rows of 128 bytes best (bk 128), as the TMA GEMM's do.
struct MoeGemmConfig {
  int64_t bm = 64, bn = 128, bk = 64;
  DType in = bf16, out = bf16;
  int group_m = 8;
  bool routed_weights = false;
  bool scaled = false;
  int stages = 0;  // the K loop's LoopOptions::stages
  // fp8 only: the tensor cores' own running sum over all of K, which keeps
  // fewer bits than f32 as it grows (cuBLAS's fast accumulation). Without
  // it each step's product, bk of K, is summed from zero and added to an
  // f32 accumulator (gemm_step).
  bool fast_accum = false;
};
inline absl::StatusOr<Kernel> moe_gemm_kernel(const MoeGemmConfig& g, std::string name = "moe_gemm") {
  KernelBuilder k(std::move(name));
  Value a = k.arg(ptr(g.in), "a"), w = k.arg(ptr(g.in), "w"), c = k.arg(ptr(g.out), "c");
  Value sorted = k.arg(ptr(i32), "sorted"), block_experts = k.arg(ptr(i32), "block_experts");
  Value offsets = k.arg(ptr(i32), "offsets");
  Value weights = g.routed_weights ? k.arg(ptr(f32), "weights") : Value();
  Value scale_a = g.scaled ? k.arg(ptr(f32), "scale_a") : Value();
  Value scale_w = g.scaled ? k.arg(ptr(f32), "scale_w") : Value();
  Value n = k.arg(i32, "n"), top_k = k.arg(i32, "top_k"), experts = k.arg(i32, "experts");
  Value ncols = k.arg(i32, "N"), kdim = k.arg(i32, "K");
  // Blocks past the padded total (the grid is sized for the most there
  // may be) run no iteration and store nothing.
  Value tiles_m = cdiv(load(offsets + experts), g.bm), tiles_n = cdiv(ncols, g.bn);
  Value t = k.program_id(), per_group = tiles_n * g.group_m, live = t < tiles_m * tiles_n;
  Value first_m = t / per_group * g.group_m, group_rows = maximum(minimum(tiles_m - first_m, g.group_m), 1);
  Value block = first_m + t % per_group % group_rows;
  Value choice = load(sorted + block * g.bm + k.arange(0, g.bm), live, n);  // [BM] i32; n: padding
  Value row_in = expand_dims(choice < n, 1);                                // [BM, 1]
  Value expert = load(block_experts + block, live, 0);
  Value cols = t % per_group / group_rows * g.bn + k.arange(0, g.bn);                            // [BN] i32
  Value a_rows = a + expand_dims(choice / top_k * kdim, 1);                                      // [BM, 1]
  Value w_rows = w + cast(expert, i64) * cast(ncols * kdim, i64) + expand_dims(cols * kdim, 1);  // [BN, 1]
  Value col_in = expand_dims(cols < ncols, 1);
  Var acc = k.var(k.zeros({g.bm, g.bn}, f32));
  k.for_range(0, where(live, kdim, 0), g.bk,
              [&](Value kk) {
                Value ks = expand_dims(kk + k.arange(0, g.bk), 0);        // [1, BK]
                Value at = load(a_rows + ks, row_in & (ks < kdim), 0.0);  // [BM, BK]: the block's tokens
                Value bt = load(w_rows + ks, col_in & (ks < kdim), 0.0);  // [BN, BK]: the expert's
                acc = gemm_step(at, trans(bt), acc, g.in.is_float8() && !g.fast_accum);
              },
              {.stages = g.stages});
  Value out = acc;
  if (g.scaled) out = out * (load(scale_a) * load(scale_w + expert));
  if (g.routed_weights) out = out * expand_dims(load(weights + choice, choice < n, 0.0f), 1);
  store(c + expand_dims(choice * ncols, 1) + expand_dims(cols, 0), cast(out, g.out),
        row_in & expand_dims(cols < ncols, 0));
  return k.build();
}
// Programs for n choices over `experts`: every block there may be, by
// every column tile.
inline int64_t moe_gemm_grid(const MoeGemmConfig& g, int64_t n, int experts, int64_t ncols) {
  return moe_align_capacity(n, experts, static_cast<int>(g.bm)) / g.bm * ((ncols + g.bn - 1) / g.bn);
}

// SwiGLU between an MoE layer's two GEMMs: a [n, I] = silu(g) * u, where
// row i of h [n, 2I] is choice i's gate projection g then its up projection
// u; f32 arithmetic, one rounding to a's dtype `out`. An fp8 `out` is
// quantized by a static scale: a = silu(g) * u * (1 / scale[0]),
// saturated. A program takes a [kSwigluRows, kSwigluCols] tile; args h, a,
// (scale, for fp8), n, I; launch on swiglu_grid.
inline constexpr int kSwigluRows = 16, kSwigluCols = 128;
// The program's [kSwigluRows, kSwigluCols] tile of a matrix `cols` wide,
// tiles in row-major order: its rows [R, 1] and columns [1, C] (i32).
struct GridTile {
  Value r, c;
};
inline GridTile grid_tile(KernelBuilder& k, const Value& cols) {
  Value tiles_c = cdiv(cols, kSwigluCols), p = k.program_id();
  return {expand_dims(p / tiles_c * kSwigluRows + k.arange(0, kSwigluRows), 1),
          expand_dims(p % tiles_c * kSwigluCols + k.arange(0, kSwigluCols), 0)};
}
inline absl::StatusOr<Kernel> swiglu_kernel(DType in = bf16, DType out = bf16) {
  KernelBuilder k("swiglu");
  Value h = k.arg(ptr(in), "h"), a = k.arg(ptr(out), "a");
  Value scale = out.is_float8() ? k.arg(ptr(f32), "scale") : Value();
  Value n = k.arg(i32, "n"), inter = k.arg(i32, "I");
  const auto [r, c] = grid_tile(k, inter);
  Value inside = (r < n) & (c < inter);
  Value row = h + cast(r, i64) * cast(2 * inter, i64) + c;  // [R, C]: g's
  Value g = load_f32(row, inside, 0.0f), u = load_f32(row + inter, inside, 0.0f);
  Value v = g * sigmoid(g) * u;
  if (out.is_float8()) v = v * (1.0f / load(scale));
  store_as(a + cast(r, i64) * cast(inter, i64) + c, v, inside);
  return k.build();
}
inline int64_t swiglu_grid(int64_t n, int64_t inter) {
  return (n + kSwigluRows - 1) / kSwigluRows * ((inter + kSwigluCols - 1) / kSwigluCols);
}

// x quantized to fp8 by a static scale: y [rows, cols] of `out` = x [rows,
// cols] * (1 / scale[0]) in f32, saturated; the fp8 layer's activations
// before its up projection. Tiles and grid as swiglu's; args x, y, scale,
// rows, cols.
inline absl::StatusOr<Kernel> quantize_kernel(DType in = bf16, DType out = f8e4m3) {
  KernelBuilder k("quantize");
  Value x = k.arg(ptr(in), "x"), y = k.arg(ptr(out), "y"), scale = k.arg(ptr(f32), "scale");
  Value rows = k.arg(i32, "rows"), cols = k.arg(i32, "cols");
  const auto [r, c] = grid_tile(k, cols);
  Value inside = (r < rows) & (c < cols), at = cast(r, i64) * cast(cols, i64) + c;
  store_as(y + at, load_f32(x + at, inside, 0.0f) * (1.0f / load(scale)), inside);
  return k.build();
}

// A grouped MoE layer's first step: x's rows in MoeAlign's order, the up
// projection's A. Row p of xs [rows, H] is row sorted[p] / top_k of x
// [tokens, H] (bf16), zero at padding and past the padded total; an fp8
// `out` is quantized by a static scale as quantize_kernel does. And row p
// of weights_sorted [rows] (f32) is the router's weights[sorted[p]], zero
// there too: the down projection's row scales. Tiles and grid as swiglu's,
// over rows x H; args x, xs, (scale, for fp8), weights, weights_sorted,
// sorted, offsets, n, top_k, experts, rows, H.
inline absl::StatusOr<Kernel> moe_permute_kernel(DType out = bf16) {
  KernelBuilder k("moe_permute");
  Value x = k.arg(ptr(bf16), "x"), xs = k.arg(ptr(out), "xs");
  Value scale = out.is_float8() ? k.arg(ptr(f32), "scale") : Value();
  Value weights = k.arg(ptr(f32), "weights"), weights_sorted = k.arg(ptr(f32), "weights_sorted");
  Value sorted = k.arg(ptr(i32), "sorted"), offsets = k.arg(ptr(i32), "offsets");
  Value n = k.arg(i32, "n"), top_k = k.arg(i32, "top_k"), experts = k.arg(i32, "experts");
  Value rows = k.arg(i32, "rows"), hidden = k.arg(i32, "H");
  const auto [r, c] = grid_tile(k, hidden);
  Value choice = load(sorted + r, r < load(offsets + experts), n);  // [R, 1] i32; n: none
  Value live = choice < n;
  Value v = load_f32(x + cast(choice / top_k, i64) * cast(hidden, i64) + c, live & (c < hidden), 0.0f);
  if (out.is_float8()) v = v * (1.0f / load(scale));
  store_as(xs + cast(r, i64) * cast(hidden, i64) + c, v, (r < rows) & (c < hidden));
  Value first_cols = k.program_id() % cdiv(hidden, kSwigluCols) == 0;
  store(weights_sorted + r, load(weights + choice, live, 0.0f), (r < rows) & first_cols);
  return k.build();
}

// An MoE layer's last step: out [tokens, H] is the sum of each token's
// top_k rows of y (each already scaled by its router weight), in f32,
// rounded once. Choice i's row is row i of y [tokens * top_k, H], with
// `rows` ids [tokens * top_k] (choices outside [0, experts) dropped: their
// rows were never written); or with `by_position`, row rows[i] of y where
// rows are MoeAlign's positions (-1: dropped). A program takes a
// [kCombineRows, kCombineCols] tile; args y, rows, out, tokens, top_k,
// experts, H; launch on moe_combine_grid.
inline constexpr int kCombineRows = 16, kCombineCols = 128;
inline absl::StatusOr<Kernel> moe_combine_kernel(DType d = bf16, bool by_position = false) {
  KernelBuilder k("moe_combine");
  Value y = k.arg(ptr(d), "y"), rows = k.arg(ptr(i32), by_position ? "positions" : "ids");
  Value out = k.arg(ptr(d), "out");
  Value tokens = k.arg(i32, "tokens"), top_k = k.arg(i32, "top_k"), experts = k.arg(i32, "experts");
  Value hidden = k.arg(i32, "H");
  Value tiles_c = cdiv(hidden, kCombineCols), p = k.program_id();
  Value t = p / tiles_c * kCombineRows + k.arange(0, kCombineRows);                  // [R] i32
  Value c = expand_dims(p % tiles_c * kCombineCols + k.arange(0, kCombineCols), 0);  // [1, C] i32
  Var acc = k.var(k.zeros({kCombineRows, kCombineCols}, f32));                       // [R, C] f32
  k.for_range(0, top_k, 1, [&](Value j) {
    Value choice = t * top_k + j;                  // [R] i32
    Value e = load(rows + choice, t < tokens, -1);  // [R] i32
    Value row = by_position ? e : choice;
    Value kept = expand_dims(by_position ? e >= 0 : (e >= 0) & (e < experts), 1) & (c < hidden);
    acc = Value(acc) + load_f32(y + expand_dims(cast(row, i64) * cast(hidden, i64), 1) + c, kept, 0.0f);
  });
  store_as(out + expand_dims(cast(t, i64) * cast(hidden, i64), 1) + c, acc, expand_dims(t < tokens, 1) & (c < hidden));
  return k.build();
}
inline int64_t moe_combine_grid(int64_t tokens, int64_t hidden) {
  return (tokens + kCombineRows - 1) / kCombineRows * ((hidden + kCombineCols - 1) / kCombineCols);
}

// A whole mixture-of-experts layer, Mixtral's: the router's logits (x times
// the gate's weights, a pointer GEMM with f32 out), each token's top_k
// experts and their softmax weights (router_top_k_kernel), the choices
// grouped by expert (MoeAlign), the experts' up projection over w1 (each
// expert's gate rows, then its up rows), SwiGLU, the down projection over
// w2 scaled by the router weights, and each token's choices summed
// (moe_combine_kernel). bf16 activations and weights, f32 accumulation.
// `up` and `down` are the two GEMMs' tiles; their bm is the alignment's
// block, so they share it.
//
// The experts' GEMMs take one of two forms:
// - `grouped` (the default): moe_permute_kernel first copies x's rows into
//   MoeAlign's order, and the GEMMs are grouped TMA GEMMs (gemm_kernel with
//   GemmConfig::grouped, as moe_grouped_gemm_config makes them), which read
//   an expert's rows as a dense GEMM reads A; h, a and y keep MoeAlign's
//   order, and the combine reads each choice's row at its position. On 12
//   gemm_warps they are warp-specialized and cooperative (bm 128: 64 rows a
//   consumer warpgroup), on 8 plain persistent;
// - gathering: moe_gemm_kernel reads each block's rows of x by their tokens
//   through pointers, and h, a and y hold the choices' rows in the choices'
//   order. It pads each expert's rows to smaller blocks (64): at Mixtral's
//   size on one H100 it was 1.6x slower at 4096 tokens, but 1.06x faster
//   at 256 (1.15x against the default tiles).
// The default tiles on 12 warps are 128 x 256 for bf16 and 128 x 192 for
// fp8 (with_default_tiles; fp8 with f32 sums spills at 128 x 256; bk 128
// for fp8's rows of 128 bytes).
//
// A grouped layer runs SwiGLU in the up projection's epilogue (by
// default; `fused_swiglu`, GemmConfig::swiglu): each tile's B box holds an
// expert's gate rows and the matching up rows, and the tile writes a's
// columns, so h is never written or read again. At Mixtral's size and
// 4096 tokens on one H200 that made the fp8 layer 1.10x faster, and the
// bf16 layer 1.02x at 128 x 256 (0.99x at 128 x 192).
//
// With both GEMMs' `in` f8e4m3, the experts run in fp8 (w8a8, static
// activation scales, as fp8 checkpoints of Mixtral ship them): w1 and w2
// are e4m3 with a scale per expert, x is quantized by its scale before the
// up projection (quantize_kernel, or moe_permute_kernel as it copies; the
// router reads it in bf16), SwiGLU quantizes a by its own, and each GEMM
// multiplies by its activations' and its expert's scales
// (MoeLayer::Fp8Scales). h, y and out stay bf16.
struct MoeLayerConfig {
  int experts = 8, top_k = 2;
  int64_t hidden = 4096, intermediate = 14336;
  // bn 0: the default for the GEMMs' operands (with_default_tiles).
  MoeGemmConfig up = {.bm = 128, .bn = 0, .stages = 4}, down = {.bm = 128, .bn = 0, .stages = 4};
  int gemm_warps = 12;
  bool grouped = true;
  // A grouped layer's SwiGLU in its up projection's epilogue (a gathering
  // layer runs it in its own kernel).
  bool fused_swiglu = true;

  bool fuses_swiglu() const { return grouped && fused_swiglu; }
};

// `c` with each GEMM's bn of 0 made its operands' default: 256 for bf16,
// its fastest layer at Mixtral's size on one H200 (1.04x 128 x 192's speed
// at 4096 tokens, 1.12x at 256, and 1.02x with 64 small experts), and 192
// for fp8, whose f32 sums spill at 128 x 256.
inline MoeLayerConfig with_default_tiles(MoeLayerConfig c) {
  for (MoeGemmConfig* g : {&c.up, &c.down}) {
    if (g->bn == 0) g->bn = g->in.is_float8() ? 192 : 256;
  }
  return c;
}

// A grouped layer's GEMM (MoeLayerConfig::grouped) of tiles `m` on `warps`
// warps: fp8 operands scaled by their activations' and expert's scales,
// and the down projection's rows (`down`) by the router's weights; with
// `swiglu`, the up projection with SwiGLU in its epilogue, its C a (of the
// GEMMs' `in`: an fp8 a quantized by a's scale).
inline GemmConfig moe_grouped_gemm_config(const MoeGemmConfig& m, int warps, bool down, bool swiglu = false) {
  GemmConfig g;
  g.bm = m.bm;
  g.bn = m.bn;
  g.bk = m.bk;
  g.in = m.in;
  g.out = m.out;
  g.stages = m.stages;
  g.group_m = m.group_m;
  g.scaled = m.in.is_float8();
  g.fast_accum = m.fast_accum;
  g.warp_specialize = g.cooperative = warps == 12;
  g.grouped = true;
  g.row_scales = down;
  g.swiglu = swiglu;
  if (swiglu) g.out = m.in;
  return g;
}

// The rows of h, a and y for `tokens`: the choices, or for a grouped layer
// MoeAlign's positions for them (padding included).
inline int64_t moe_layer_rows(const MoeLayerConfig& c, int64_t tokens) {
  const int64_t n = tokens * c.top_k;
  return c.grouped ? moe_align_capacity(n, c.experts, static_cast<int>(c.up.bm)) : n;
}

// The layer's kernels, in the order they run: the router's logits (a
// pointer GEMM, f32 out), its top_k (router_top_k_kernel), the up
// projection, SwiGLU, the down projection with routed weights, and the
// combine; MoeAlign's come between the second and the third, and the
// quantize or permute kernel before the up projection. Small kernels run
// on kMoeLayerSmallWarps warps, the GEMMs on c.gemm_warps.
struct MoeLayerKernels {
  Kernel logits, pick, up, down, combine;
  std::optional<Kernel> act;       // SwiGLU, unless fused into the up projection
  std::optional<Kernel> quantize;  // x to fp8, for a gathering fp8 layer
  std::optional<Kernel> permute;   // x's rows into MoeAlign's order, for a grouped layer
};
inline constexpr int kMoeLayerSmallWarps = 4, kMoeRouterRows = 16;
inline constexpr PointerGemmConfig kMoeRouterGemm = {.bm = 64, .bn = 64, .bk = 64, .out = f32};
// The kernels compute row offsets (choice x N, token x K) in i32.
inline constexpr int64_t kMoeMaxOffset = (int64_t{1} << 31) - 1;
inline absl::StatusOr<MoeLayerKernels> moe_layer_kernels(const MoeLayerConfig& config) {
  const MoeLayerConfig c = with_default_tiles(config);
  if (c.experts < 1 || c.top_k < 1 || c.top_k > c.experts) {
    return absl::InvalidArgumentError(
        absl::StrCat("moe_layer: top_k must be in [1, experts]; got top_k ", c.top_k, " of ", c.experts, " experts"));
  }
  if (c.hidden < 1 || c.intermediate < 1 || c.hidden > kMoeMaxOffset || c.intermediate > kMoeMaxOffset ||
      2 * c.intermediate * c.hidden > kMoeMaxOffset) {
    return absl::InvalidArgumentError(absl::StrCat("moe_layer: hidden and intermediate sizes must be positive, ",
                                                   "with an expert's 2I x H weights below 2^31 elements; got H ",
                                                   c.hidden, ", I ", c.intermediate));
  }
  if (c.up.bm != c.down.bm) {
    return absl::InvalidArgumentError(absl::StrCat("moe_layer: the up and down GEMMs share the alignment's blocks, ",
                                                   "so their bm must match; got ", c.up.bm, " and ", c.down.bm));
  }
  if (!(c.up.in == bf16 || c.up.in == f8e4m3) || c.down.in != c.up.in || c.up.out != bf16 || c.down.out != bf16) {
    return absl::InvalidArgumentError(absl::StrCat("moe_layer: the GEMMs' operands are both bf16 or both f8e4m3, ",
                                                   "their results bf16; got ", c.up.in.name(), " x ", c.down.in.name(),
                                                   " in, ", c.up.out.name(), " x ", c.down.out.name(), " out"));
  }
  if (c.grouped && c.gemm_warps != 8 && c.gemm_warps != 12) {
    return absl::InvalidArgumentError(absl::StrCat("moe_layer: a grouped layer's GEMMs run on 8 warps (persistent) ",
                                                   "or 12 (warp-specialized); got ", c.gemm_warps));
  }
  MoeLayerKernels k;
  TESSEL_ASSIGN_OR_RETURN(k.logits, pointer_gemm_kernel(kMoeRouterGemm, "moe_router"));
  TESSEL_ASSIGN_OR_RETURN(k.pick, router_top_k_kernel(kMoeRouterRows, c.experts, c.top_k, f32));
  if (c.grouped) {
    TESSEL_ASSIGN_OR_RETURN(k.permute, moe_permute_kernel(c.up.in));
    TESSEL_ASSIGN_OR_RETURN(
        k.up, gemm_kernel(moe_grouped_gemm_config(c.up, c.gemm_warps, false, c.fuses_swiglu()), "moe_up"));
    TESSEL_ASSIGN_OR_RETURN(k.down, gemm_kernel(moe_grouped_gemm_config(c.down, c.gemm_warps, true), "moe_down"));
  } else {
    MoeGemmConfig up = c.up, down = c.down;
    up.routed_weights = false;
    down.routed_weights = true;
    up.scaled = down.scaled = c.up.in == f8e4m3;
    TESSEL_ASSIGN_OR_RETURN(k.up, moe_gemm_kernel(up, "moe_up"));
    TESSEL_ASSIGN_OR_RETURN(k.down, moe_gemm_kernel(down, "moe_down"));
    if (up.scaled) {
      TESSEL_ASSIGN_OR_RETURN(k.quantize, quantize_kernel(bf16, f8e4m3));
    }
  }
  if (!c.fuses_swiglu()) {
    TESSEL_ASSIGN_OR_RETURN(k.act, swiglu_kernel(bf16, c.up.in));
  }
  TESSEL_ASSIGN_OR_RETURN(k.combine, moe_combine_kernel(bf16, c.grouped));
  return k;
}

class MoeLayer {
 public:
  // Buffers for a launch on up to `tokens` tokens; public so that a caller
  // can read the router's choices and the stages' results. Rows of h, a and
  // y: moe_layer_rows.
  struct Workspace {
    int64_t tokens = 0;
    Buffer logits;        // [tokens, experts] f32
    Buffer weights, ids;  // [tokens * top_k] f32, i32
    MoeAlignBuffers align;
    // [rows, 2I] bf16 (none where SwiGLU is fused), [rows, I] of the GEMMs'
    // in, [rows, H] bf16.
    Buffer h, a, y;
    // The up projection's A where it is not x: x quantized to e4m3 for a
    // gathering fp8 layer ([tokens, H]), or x's rows in MoeAlign's order for
    // a grouped layer ([rows, H] of the GEMMs' in); and a grouped layer's
    // router weights in that order ([rows] f32).
    Buffer xs, weights_sorted;
  };
  // An fp8 layer's scales, f32: x's and a's (one each), w1's and w2's (one
  // per expert). Its activations are x / x_scale and a / a_scale in e4m3.
  struct Fp8Scales {
    Buffer x, w1, a, w2;
  };

  // With c's GEMMs' default tiles chosen (config() has them).
  static absl::StatusOr<MoeLayer> compile(const Device& dev, const MoeLayerConfig& config) {
    const MoeLayerConfig c = with_default_tiles(config);
    TESSEL_ASSIGN_OR_RETURN(MoeLayerKernels k, moe_layer_kernels(c));
    TESSEL_ASSIGN_OR_RETURN(MoeAlign align, MoeAlign::compile(dev, c.experts, static_cast<int>(c.up.bm)));
    CompileOptions gemm, small;
    gemm.num_warps = c.gemm_warps;
    small.num_warps = kMoeLayerSmallWarps;
    TESSEL_ASSIGN_OR_RETURN(Function logits, dev.compile(k.logits, small));
    TESSEL_ASSIGN_OR_RETURN(Function pick, dev.compile(k.pick, small));
    TESSEL_ASSIGN_OR_RETURN(Function up, dev.compile(k.up, gemm));
    TESSEL_ASSIGN_OR_RETURN(Function down, dev.compile(k.down, gemm));
    TESSEL_ASSIGN_OR_RETURN(Function combine, dev.compile(k.combine, small));
    Functions f{std::move(logits),  std::move(pick), std::move(up), std::move(down),
                std::move(combine), std::nullopt,    std::nullopt,  std::nullopt};
    if (k.act) {
      TESSEL_ASSIGN_OR_RETURN(f.act, dev.compile(*k.act, small));
    }
    if (k.quantize) {
      TESSEL_ASSIGN_OR_RETURN(f.quantize, dev.compile(*k.quantize, small));
    }
    if (k.permute) {
      TESSEL_ASSIGN_OR_RETURN(f.permute, dev.compile(*k.permute, small));
    }
    return MoeLayer(dev, c, std::move(align), std::move(f));
  }

  absl::StatusOr<Workspace> workspace(int64_t tokens) const {
    const int64_t widest = std::max(2 * c_.intermediate, c_.hidden);
    if (tokens < 0 || tokens > kMoeMaxOffset || moe_layer_rows(c_, tokens) * widest > kMoeMaxOffset) {
      return absl::InvalidArgumentError(absl::StrCat("moe_layer: tokens must be at least 0, with tokens x top_k x ",
                                                     widest, (c_.grouped ? " (and the alignment's padding)" : ""),
                                                     " below 2^31 elements; got ", tokens, " tokens"));
    }
    const int64_t n = tokens * c_.top_k, rows = std::max<int64_t>(moe_layer_rows(c_, tokens), 1);
    const int64_t t = std::max<int64_t>(tokens, 1), wb = c_.up.in.bytes();
    Workspace w;
    w.tokens = tokens;
    TESSEL_ASSIGN_OR_RETURN(w.align, align_.buffers(dev_, n));
    for (auto [buf, bytes] :
         std::vector<std::pair<Buffer*, int64_t>>{{&w.logits, t * c_.experts * 4},
                                                  {&w.weights, std::max<int64_t>(n, 1) * 4},
                                                  {&w.ids, std::max<int64_t>(n, 1) * 4},
                                                  {&w.h, c_.fuses_swiglu() ? 0 : rows * 2 * c_.intermediate * 2},
                                                  {&w.a, rows * c_.intermediate * wb},
                                                  {&w.y, rows * c_.hidden * 2},
                                                  {&w.xs, c_.grouped ? rows * c_.hidden * wb
                                                          : fp8()    ? t * c_.hidden
                                                                     : 0},
                                                  {&w.weights_sorted, c_.grouped ? rows * 4 : 0}}) {
      if (bytes == 0) continue;
      TESSEL_ASSIGN_OR_RETURN(*buf, dev_.allocate(static_cast<size_t>(bytes)));
    }
    return w;
  }

  // out [tokens, H] = the layer on x [tokens, H], with the router's weights
  // gate [experts, H], w1 [experts, 2I, H] and w2 [experts, H, I], row-major
  // (x, gate and out bf16; w1 and w2 of the GEMMs' in); queued on `stream`
  // (the default stream where null). An fp8 layer takes its scales.
  absl::Status launch(const Buffer& x, int32_t tokens, const Buffer& gate, const Buffer& w1, const Buffer& w2,
                      const Buffer& out, const Workspace& ws, const Stream* stream = nullptr) const {
    if (fp8()) return absl::InvalidArgumentError("moe_layer: an fp8 layer's launch takes its Fp8Scales");
    return run(x, tokens, gate, w1, w2, nullptr, out, ws, stream);
  }
  absl::Status launch(const Buffer& x, int32_t tokens, const Buffer& gate, const Buffer& w1, const Buffer& w2,
                      const Fp8Scales& scales, const Buffer& out, const Workspace& ws,
                      const Stream* stream = nullptr) const {
    if (!fp8()) return absl::InvalidArgumentError("moe_layer: a bf16 layer takes no Fp8Scales");
    return run(x, tokens, gate, w1, w2, &scales, out, ws, stream);
  }

  const MoeLayerConfig& config() const { return c_; }

 private:
  struct Functions {
    Function logits, pick, up, down, combine;
    std::optional<Function> act, quantize, permute;
  };
  MoeLayer(Device dev, MoeLayerConfig c, MoeAlign align, Functions fns)
      : dev_(std::move(dev)), c_(c), align_(std::move(align)), fns_(std::move(fns)) {}
  bool fp8() const { return c_.up.in == f8e4m3; }
  LaunchConfig on(int64_t grid, int warps, const Stream* stream) const {
    return LaunchConfig{.grid = Grid(static_cast<int>(grid)), .num_warps = warps, .stream = stream};
  }
  // SwiGLU over the first `rows` rows of h into a (quantized by a's scale
  // in an fp8 layer), between the two projections of either form.
  absl::Status swiglu(const Workspace& ws, const Fp8Scales* scales, int32_t rows, const Stream* stream) const {
    const auto inter = static_cast<int32_t>(c_.intermediate);
    const LaunchConfig lc = on(swiglu_grid(rows, inter), kMoeLayerSmallWarps, stream);
    if (scales == nullptr) return fns_.act->launch(lc, ws.h, ws.a, rows, inter);
    return fns_.act->launch(lc, ws.h, ws.a, scales->a, rows, inter);
  }

  absl::Status run(const Buffer& x, int32_t tokens, const Buffer& gate, const Buffer& w1, const Buffer& w2,
                   const Fp8Scales* scales, const Buffer& out, const Workspace& ws, const Stream* stream) const {
    if (tokens < 0 || tokens > ws.tokens) {
      return absl::InvalidArgumentError(
          absl::StrCat("moe_layer: tokens must be in [0, ", ws.tokens, "] (the workspace's); got ", tokens));
    }
    const int64_t e = c_.experts, hid = c_.hidden, inter = c_.intermediate, wb = c_.up.in.bytes();
    std::vector<std::tuple<const Buffer*, int64_t, const char*>> sizes = {{&x, 2 * tokens * hid, "x"},
                                                                          {&gate, 2 * e * hid, "gate"},
                                                                          {&w1, wb * e * 2 * inter * hid, "w1"},
                                                                          {&w2, wb * e * hid * inter, "w2"},
                                                                          {&out, 2 * tokens * hid, "out"}};
    if (scales != nullptr) {
      sizes.insert(sizes.end(), {{&scales->x, 4, "x's scale"},
                                 {&scales->w1, 4 * e, "w1's scales"},
                                 {&scales->a, 4, "a's scale"},
                                 {&scales->w2, 4 * e, "w2's scales"}});
    }
    for (const auto& [buf, bytes, name] : sizes) {
      if (static_cast<int64_t>(buf->bytes()) < bytes) {
        return absl::InvalidArgumentError(
            absl::StrCat("moe_layer: ", name, " holds ", buf->bytes(), " bytes; ", tokens, " tokens need ", bytes));
      }
    }
    if (tokens == 0) return absl::OkStatus();
    const auto n = static_cast<int32_t>(tokens * c_.top_k), experts = static_cast<int32_t>(e);
    const Functions& f = fns_;
    const int small = kMoeLayerSmallWarps;
    TESSEL_RETURN_IF_ERROR(f.logits.launch(on(pointer_gemm_grid(kMoeRouterGemm, tokens, e), small, stream), x, gate,
                                           ws.logits, tokens, experts, static_cast<int32_t>(hid)));
    TESSEL_RETURN_IF_ERROR(f.pick.launch(on((tokens + kMoeRouterRows - 1) / kMoeRouterRows, small, stream), ws.logits,
                                         ws.weights, ws.ids, tokens));
    TESSEL_RETURN_IF_ERROR(align_.launch(ws.ids, n, ws.align, stream));
    TESSEL_RETURN_IF_ERROR(c_.grouped ? experts_grouped(x, tokens, w1, w2, scales, ws, stream)
                                      : experts_gathering(x, tokens, w1, w2, scales, ws, stream));
    return f.combine.launch(on(moe_combine_grid(tokens, hid), small, stream), ws.y,
                            c_.grouped ? ws.align.positions : ws.ids, out, tokens, int32_t{c_.top_k}, experts,
                            static_cast<int32_t>(hid));
  }

  // From the alignment to y: the gathering form.
  absl::Status experts_gathering(const Buffer& x, int32_t tokens, const Buffer& w1, const Buffer& w2,
                                 const Fp8Scales* scales, const Workspace& ws, const Stream* stream) const {
    const auto n = static_cast<int32_t>(tokens * c_.top_k), experts = static_cast<int32_t>(c_.experts);
    const auto h32 = static_cast<int32_t>(c_.hidden), i32v = static_cast<int32_t>(c_.intermediate);
    const int32_t top_k = c_.top_k;
    const int small = kMoeLayerSmallWarps, wide = c_.gemm_warps;
    const Functions& f = fns_;
    const int64_t up_grid = moe_gemm_grid(c_.up, n, experts, 2 * i32v),
                  down_grid = moe_gemm_grid(c_.down, n, experts, h32);
    const MoeAlignBuffers& al = ws.align;
    // Row i of a is choice i's (top_k 1: the down GEMM reads A's row i / 1).
    if (scales == nullptr) {
      TESSEL_RETURN_IF_ERROR(f.up.launch(on(up_grid, wide, stream), x, w1, ws.h, al.sorted, al.block_experts,
                                         al.offsets, n, top_k, experts, 2 * i32v, h32));
      TESSEL_RETURN_IF_ERROR(swiglu(ws, scales, n, stream));
      return f.down.launch(on(down_grid, wide, stream), ws.a, w2, ws.y, al.sorted, al.block_experts, al.offsets,
                           ws.weights, n, int32_t{1}, experts, h32, i32v);
    }
    TESSEL_RETURN_IF_ERROR(
        f.quantize->launch(on(swiglu_grid(tokens, h32), small, stream), x, ws.xs, scales->x, tokens, h32));
    TESSEL_RETURN_IF_ERROR(f.up.launch(on(up_grid, wide, stream), ws.xs, w1, ws.h, al.sorted, al.block_experts,
                                       al.offsets, scales->x, scales->w1, n, top_k, experts, 2 * i32v, h32));
    TESSEL_RETURN_IF_ERROR(swiglu(ws, scales, n, stream));
    return f.down.launch(on(down_grid, wide, stream), ws.a, w2, ws.y, al.sorted, al.block_experts, al.offsets,
                         ws.weights, scales->a, scales->w2, n, int32_t{1}, experts, h32, i32v);
  }

  // From the alignment to y: the grouped form, over MoeAlign's positions
  // for this launch's choices.
  absl::Status experts_grouped(const Buffer& x, int32_t tokens, const Buffer& w1, const Buffer& w2,
                               const Fp8Scales* scales, const Workspace& ws, const Stream* stream) const {
    const int64_t e = c_.experts, hid = c_.hidden, inter = c_.intermediate, rows = moe_layer_rows(c_, tokens);
    const auto n = static_cast<int32_t>(tokens * c_.top_k), r32 = static_cast<int32_t>(rows);
    const auto h32 = static_cast<int32_t>(hid);
    const int small = kMoeLayerSmallWarps, wide = c_.gemm_warps;
    const Functions& f = fns_;
    const MoeAlignBuffers& al = ws.align;
    std::vector<KernelArg> permute = {x, ws.xs};
    if (scales != nullptr) permute.push_back(scales->x);
    permute.insert(permute.end(), {ws.weights, ws.weights_sorted, al.sorted, al.offsets, n, int32_t{c_.top_k},
                                   static_cast<int32_t>(e), r32, h32});
    TESSEL_RETURN_IF_ERROR(f.permute->launch_packed(on(swiglu_grid(rows, hid), small, stream), permute));
    // The padded total, the last of the offsets: the rows the GEMMs' tiles take.
    TESSEL_ASSIGN_OR_RETURN(Buffer total, al.offsets.slice(4 * e, 4));
    const Buffer none;
    const bool q = scales != nullptr, fused = c_.fuses_swiglu();
    // (A fused up projection's C is a: of its in, quantized by a's scale for fp8.)
    auto gemm = [&](const Function& fn, bool down, const Buffer& a, const Buffer& w, const Buffer& c, int64_t ncols,
                    int64_t kdim, const Buffer* scale_a, const Buffer* scale_w) -> absl::Status {
      const GemmConfig g = moe_grouped_gemm_config(down ? c_.down : c_.up, wide, down, !down && fused);
      TESSEL_ASSIGN_OR_RETURN(GemmMaps maps, gemm_maps(dev_, g, a, w, c, rows, ncols, kdim, e));
      const GemmRows by = {.groups = al.block_experts, .total = total, .scales = down ? ws.weights_sorted : none};
      const LaunchConfig lc = {
          .grid = gemm_grid(g, rows, ncols, dev_.num_compute_units()), .num_warps = wide, .stream = stream};
      return fn.launch_packed(lc,
                              gemm_args(g, maps, rows, ncols, kdim, none, scale_a != nullptr ? *scale_a : none,
                                        scale_w != nullptr ? *scale_w : none, nullptr, &by, q ? &scales->a : nullptr));
    };
    if (fused) {
      TESSEL_RETURN_IF_ERROR(
          gemm(f.up, false, ws.xs, w1, ws.a, inter, hid, q ? &scales->x : nullptr, q ? &scales->w1 : nullptr));
    } else {
      TESSEL_RETURN_IF_ERROR(
          gemm(f.up, false, ws.xs, w1, ws.h, 2 * inter, hid, q ? &scales->x : nullptr, q ? &scales->w1 : nullptr));
      TESSEL_RETURN_IF_ERROR(swiglu(ws, scales, r32, stream));
    }
    return gemm(f.down, true, ws.a, w2, ws.y, hid, inter, q ? &scales->a : nullptr, q ? &scales->w2 : nullptr);
  }

  Device dev_;
  MoeLayerConfig c_;
  MoeAlign align_;
  Functions fns_;
};

// The router's logits [tokens, experts] = x [tokens, H] times gate
// [experts, H] transposed, in double.
inline std::vector<double> moe_logits_reference(const std::vector<float>& x, const std::vector<float>& gate,
                                                int64_t tokens, int64_t experts, int64_t hidden) {
  std::vector<double> out(tokens * experts);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t e = 0; e < experts; ++e) {
      double sum = 0;
      for (int64_t k = 0; k < hidden; ++k) sum += double{x[t * hidden + k]} * gate[e * hidden + k];
      out[t * experts + e] = sum;
    }
  }
  return out;
}

// A weight as moe_check_token reads it: a bf16 or e4m3 value, or its bits
// (uint16_t bf16's, uint8_t e4m3's).
inline double moe_weight(float v) { return v; }
inline double moe_weight(uint16_t bits) { return bf16_to_float(bits); }
inline double moe_weight(uint8_t bits) { return float8_to_float(bits, Float8::kE4M3); }

// An fp8 layer's scales (MoeLayer::Fp8Scales), for its reference.
struct MoeFp8Reference {
  float x = 1, a = 1;
  std::vector<float> w1, w2;  // [experts]
};

// One token's pass through MoeLayer as the device left it: its input row x
// [H], its top_k choices `ids` and router `weights`, and for each choice
// its rows of the workspace's h [2I], a [I] (for fp8, e4m3 values before
// a's scale) and y [H] (top_k rows each), then its output row out [H].
struct MoeTokenRun {
  const float* x;
  const int32_t* ids;
  const float* weights;
  const float *h, *a, *y, *out;  // h null where SwiGLU is fused
};

// The worst error over its bound seen at each of the layer's stages (a
// stage passes at 1 or less), and the first value past its bound, named.
struct MoeStageErrors {
  double h = 0, a = 0, y = 0, out = 0;
  std::string first;
  double worst() const { return std::max({h, a, y, out}); }
};

// Checks one token's stages, each against a double reference computed from
// the stage before it as the device left it, so that a rounding the device
// takes the other way (an fp8 a one step off, after an h one bf16 step off)
// is not mistaken for an error downstream:
// - h, the up projection: sum_k x_k w1[e, r, k] times the scales (x
//   quantized to e4m3 first in an fp8 layer), rounded to bf16; bound: the
//   GEMM's sum tolerance (gemm_sum_tolerance) times sum_k |x_k w_k|, plus
//   the rounding.
// - a = silu(g) u from the device's h, rounded to bf16 or quantized to
//   e4m3 by a's scale (saturated); bound: half a step of the result's
//   format, with 2^-10 of it for the kernel's fast exp. Where SwiGLU is
//   fused (no h: run.h null), from g and u summed from x as h's are, the
//   sums' bound carried through silu(g) u.
// - y, the down projection from the device's a times the router's weight,
//   rounded to bf16; bound as h's.
// - out, the sum of the token's y rows rounded to bf16.
// Choices outside [0, experts) have no rows to check and add nothing.
template <class W>
void moe_check_token(const MoeLayerConfig& c, int64_t token, const MoeTokenRun& run, const std::vector<W>& w1,
                     const std::vector<W>& w2, const MoeFp8Reference* fp8, MoeStageErrors& errors) {
  auto quantize = [](double v, float scale) {
    return double{
        float8_to_float(float_to_float8(static_cast<float>(v) * (1.0f / scale), Float8::kE4M3), Float8::kE4M3)};
  };
  // Records |got - want| / bound at `stage`, and names the first past 1.
  auto check = [&](double& stage, const char* name, int64_t j, int64_t i, double got, double want, double bound) {
    const double ratio = std::abs(got - want) / std::max(bound, 1e-30);
    stage = std::isnan(ratio) ? INFINITY : std::max(stage, ratio);
    if (!(ratio <= 1) && errors.first.empty()) {
      errors.first = absl::StrCat("token ", token, (j >= 0 ? absl::StrCat(" choice ", j, " ") : " "), name, "[", i,
                                  "] = ", got, ", want ", want, " within ", bound);
    }
  };
  const int64_t hid = c.hidden, inter = c.intermediate;
  std::vector<double> xs(run.x, run.x + hid), sum_y(hid, 0.0), size_y(hid, 0.0);
  if (fp8 != nullptr) {
    for (double& v : xs) v = quantize(v, fp8->x);
  }
  for (int j = 0; j < c.top_k; ++j) {
    const int64_t e = run.ids[j];
    if (e < 0 || e >= c.experts) continue;
    const double up_scale = fp8 != nullptr ? double{fp8->x} * fp8->w1[e] : 1;
    const double down_scale = (fp8 != nullptr ? double{fp8->a} * fp8->w2[e] : 1) * run.weights[j];
    const float* h = run.h != nullptr ? run.h + j * 2 * inter : nullptr;
    const float* a = run.a + j * inter;
    const float* y = run.y + j * hid;
    // A GEMM's element from its K values `v` and row of weights `w`, with
    // the bound of its sum.
    auto sum_of = [&](const auto* v, const W* w, int64_t k, double scale, const MoeGemmConfig& g) {
      double sum = 0, size = 0;
      for (int64_t kk = 0; kk < k; ++kk) {
        const double term = v[kk] * moe_weight(w[kk]);
        sum += term;
        size += std::abs(term);
      }
      return Bounded{sum * scale, gemm_sum_tolerance(g.in, g.fast_accum) * size * std::abs(scale)};
    };
    // The same against the device's `got`, at `stage`, rounded to bf16.
    auto check_sum = [&](double& stage, const char* name, int64_t i, float got, const auto* v, const W* w, int64_t k,
                         double scale, const MoeGemmConfig& g) {
      const Bounded want = sum_of(v, w, k, scale, g);
      check(stage, name, j, i, got, want.value, want.bound + half_step(bf16, want.value));
    };
    // a from silu(g) u, rounded to a's dtype.
    auto check_a = [&](int64_t r, const Bounded& v) {
      const double a_scale = fp8 != nullptr ? fp8->a : 1.0;
      const double want = fp8 != nullptr ? std::clamp(v.value / a_scale, -448.0, 448.0) : v.value;
      const double off = (v.bound + std::ldexp(std::abs(v.value), -10)) / a_scale;
      check(errors.a, "a", j, r, a[r], want,
            off + half_step(fp8 != nullptr ? f8e4m3 : bf16, std::abs(want) + off) * (1 + std::ldexp(1.0, -10)));
    };
    const W* gate_up = &w1[e * 2 * inter * hid];
    for (int64_t r = 0; r < inter; ++r) {
      if (h == nullptr) {  // from g's and u's sums
        const Bounded g = sum_of(xs.data(), gate_up + r * hid, hid, up_scale, c.up);
        const Bounded u = sum_of(xs.data(), gate_up + (inter + r) * hid, hid, up_scale, c.up);
        check_a(r, swiglu_reference(g.value, u.value, g.bound, u.bound));
        continue;
      }
      check_sum(errors.h, "h", r, h[r], xs.data(), gate_up + r * hid, hid, up_scale, c.up);
      check_sum(errors.h, "h", inter + r, h[inter + r], xs.data(), gate_up + (inter + r) * hid, hid, up_scale, c.up);
      check_a(r, swiglu_reference(h[r], h[inter + r], 0, 0));
    }
    for (int64_t col = 0; col < hid; ++col) {
      check_sum(errors.y, "y", col, y[col], a, &w2[(e * hid + col) * inter], inter, down_scale, c.down);
      sum_y[col] += y[col];
      size_y[col] += std::abs(y[col]);
    }
  }
  for (int64_t col = 0; col < hid; ++col) {
    check(errors.out, "out", -1, col, run.out[col], sum_y[col], half_step(bf16, sum_y[col]) + 1e-6 * size_y[col]);
  }
}

// The values of `d` in `bytes`: bf16's and e4m3's as floats, others (f32,
// i32) as T of the same bytes.
template <class T>
std::vector<T> moe_values(const std::vector<uint8_t>& bytes, DType d) {
  std::vector<T> out(bytes.size() / d.bytes());
  for (size_t i = 0; i < out.size(); ++i) {
    if (d == bf16) {
      uint16_t bits;
      std::memcpy(&bits, &bytes[i * 2], 2);
      out[i] = bf16_to_float(bits);
    } else if (d == f8e4m3) {
      out[i] = float8_to_float(bytes[i], Float8::kE4M3);
    } else {
      std::memcpy(&out[i], &bytes[i * sizeof(T)], sizeof(T));
    }
  }
  return out;
}

// What a run of MoeLayer over `tokens` left, whole, for moe_check_layer:
// the router's choices and weights, the workspace's h (none where SwiGLU
// is fused), a and y, and the output, as floats (a's e4m3 values before
// its scale).
struct MoeLayerOutputs {
  std::vector<int32_t> ids;
  std::vector<float> weights, h, a, y, out;
};
inline absl::StatusOr<MoeLayerOutputs> moe_layer_outputs(const Device& dev, const MoeLayerConfig& c, int64_t tokens,
                                                         const MoeLayer::Workspace& ws, const Buffer& out) {
  const int64_t n = tokens * c.top_k, rows = moe_layer_rows(c, tokens);
  auto fetch = [&]<class T>(std::vector<T>& to, const Buffer& b, DType d, int64_t count) -> absl::Status {
    std::vector<uint8_t> bytes(count * d.bytes());
    TESSEL_RETURN_IF_ERROR(dev.copy_to_host(bytes.data(), b, bytes.size()));
    to = moe_values<T>(bytes, d);
    return absl::OkStatus();
  };
  MoeLayerOutputs o;
  TESSEL_RETURN_IF_ERROR(fetch(o.ids, ws.ids, i32, n));
  TESSEL_RETURN_IF_ERROR(fetch(o.weights, ws.weights, f32, n));
  // Choice i's row of h, a and y: row i, or in a grouped layer its
  // position in MoeAlign's order (-1, dropped: zeros).
  std::vector<int32_t> at(n);
  std::iota(at.begin(), at.end(), 0);
  if (c.grouped) TESSEL_RETURN_IF_ERROR(fetch(at, ws.align.positions, i32, n));
  auto stage = [&](std::vector<float>& to, const Buffer& b, DType d, int64_t width) -> absl::Status {
    std::vector<float> all;
    TESSEL_RETURN_IF_ERROR(fetch(all, b, d, rows * width));
    to.assign(n * width, 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      if (at[i] >= 0) std::copy_n(&all[at[i] * width], width, &to[i * width]);
    }
    return absl::OkStatus();
  };
  if (!c.fuses_swiglu()) TESSEL_RETURN_IF_ERROR(stage(o.h, ws.h, bf16, 2 * c.intermediate));
  TESSEL_RETURN_IF_ERROR(stage(o.a, ws.a, c.up.in, c.intermediate));
  TESSEL_RETURN_IF_ERROR(stage(o.y, ws.y, bf16, c.hidden));
  TESSEL_RETURN_IF_ERROR(fetch(o.out, out, bf16, tokens * c.hidden));
  return o;
}

// moe_check_token for every token of a run, from its input x [tokens, H].
template <class W>
MoeStageErrors moe_check_layer(const MoeLayerConfig& c, const std::vector<float>& x, const MoeLayerOutputs& o,
                               const std::vector<W>& w1, const std::vector<W>& w2,
                               const MoeFp8Reference* fp8 = nullptr) {
  MoeStageErrors errors;
  const int64_t tokens = static_cast<int64_t>(o.out.size()) / c.hidden, k = c.top_k;
  for (int64_t t = 0; t < tokens; ++t) {
    const MoeTokenRun run = {&x[t * c.hidden],
                             &o.ids[t * k],
                             &o.weights[t * k],
                             o.h.empty() ? nullptr : &o.h[t * k * 2 * c.intermediate],
                             &o.a[t * k * c.intermediate],
                             &o.y[t * k * c.hidden],
                             &o.out[t * c.hidden]};
    moe_check_token(c, t, run, w1, w2, fp8, errors);
  }
  return errors;
}

}  // namespace samples
