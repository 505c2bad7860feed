// dot on the tensor cores of chips without wgmma (sm_80 to sm_89, plain
// sm_90): mma.sync with operands loaded by ldmatrix. The fragments are
// checked against the PTX ISA's tables by emulating the loads byte for byte
// on tiles as TMA (or a copy ring) leaves them, plain and swizzled; the
// accumulator layout against the instruction's, and its IR against its
// arithmetic. PTX: which dots take mma.sync, and ptxas takes it for sm_80.
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/tma_rules.h"
#include "codegen/layout_table.h"
#include "codegen/nvptx/mma_sync_fragment.h"
#include "dsl/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "samples/attention.h"
#include "samples/gemm.h"
#include "tests/codegen/ptx_test_util.h"
#include "tests/matmul_cases.h"

namespace tessel {
namespace {

using codegen::nvptx::LdmatrixLanes;
using codegen::nvptx::MmaWarps;
using codegen::nvptx::StoredOperand;
using ::testing::HasSubstr;

// The PTX ISA's m16n8 accumulator: value i of a lane at row lane / 4 + 8 *
// (i / 2), column 2 * (lane % 4) + i % 2 of the 16 x 8 block.
std::pair<int64_t, int64_t> c_fragment(int64_t lane, int64_t i) {
  return {lane / 4 + 8 * (i / 2), 2 * (lane % 4) + i % 2};
}

TEST(MmaSync, AccumulatorIsTheInstructionsFragmentPerWarpBlock) {
  for (auto [m, n, rows, cols] :
       {std::tuple{16, 8, 1, 1}, {64, 64, 2, 2}, {128, 64, 4, 1}, {128, 256, 2, 4}, {64, 24, 4, 1}, {32, 48, 1, 2}}) {
    SCOPED_TRACE(absl::StrCat(m, "x", n, " on ", rows, "x", cols, " warps"));
    const codegen::LayoutTable t = codegen::tabulate_mma_sync(m, n, MmaWarps{rows, cols});
    ASSERT_EQ(t.emitted, t.at);
    const int64_t warp_m = m / rows, warp_n = n / cols, blocks_n = warp_n / 8;
    std::set<int64_t> seen;
    for (int64_t th = 0; th < t.threads; ++th) {
      const int64_t warp = th / 32, lane = th % 32;
      for (int64_t s = 0; s < t.slots; ++s) {
        const int64_t block = s / 4;
        const auto [r, c] = c_fragment(lane, s % 4);
        const int64_t row = warp / cols * warp_m + block / blocks_n * 16 + r;
        const int64_t col = warp % cols * warp_n + block % blocks_n * 8 + c;
        EXPECT_EQ(t.at[th * t.slots + s], row * n + col) << "thread " << th << " slot " << s;
        seen.insert(t.at[th * t.slots + s]);
      }
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), m * n);
  }
}

TEST(MmaSync, WarpsSplitTheAccumulatorToLoadTheFewestRows) {
  using codegen::nvptx::mma_sync_warps;
  auto grid = [](int64_t m, int64_t n, int threads, bool rows_only = false) {
    const MmaWarps w = mma_sync_warps(m, n, threads, rows_only);
    return std::pair{w.rows, w.cols};
  };
  EXPECT_EQ(grid(128, 256, 256), std::pair(2, 4));  // 64 x 64 a warp: 128 rows; whole rows would load 272
  EXPECT_EQ(grid(128, 128, 256), std::pair(4, 2));  // 96 rows against 144
  EXPECT_EQ(grid(64, 64, 128), std::pair(4, 1));    // whole rows: 80 against 64
  EXPECT_EQ(grid(128, 64, 128), std::pair(4, 1));
  EXPECT_EQ(grid(128, 128, 256, true), std::pair(8, 1));
  EXPECT_EQ(grid(16, 8, 128), std::pair(0, 0));     // fewer blocks than warps
  EXPECT_EQ(grid(256, 256, 128), std::pair(0, 0));  // 512 accumulators a thread
  EXPECT_EQ(grid(64, 64, 100), std::pair(0, 0));
}

// Operands as ldmatrix would see them: every byte of a stored tile tagged
// with the element it belongs to and its place in it.
struct TaggedByte {
  int64_t mn = -1, k = -1, byte = -1;
  bool operator==(const TaggedByte&) const = default;
};

struct Case {
  int64_t bytes;  // per element: 2 (bf16, f16), 4 (tf32), 1 (i8)
  bool k_major;
  Swizzle swizzle;
  int64_t mn, k;  // the operand's extent along m or n, and along k
};

std::string name(const Case& c) {
  return absl::StrCat(c.bytes, "-byte elements ", c.k_major ? "K-major" : "MN-major", ", ", swizzle_name(c.swizzle),
                      " swizzle, ", c.mn, " x ", c.k);
}

StoredOperand stored(const Case& c) {
  return {.rows = c.k_major ? c.mn : c.k,
          .cols = c.k_major ? c.k : c.mn,
          .bytes = c.bytes,
          .k_major = c.k_major,
          .swizzle = c.swizzle};
}

std::vector<TaggedByte> tagged_tile(const Case& c) {
  const StoredOperand op = stored(c);
  std::vector<TaggedByte> memory(op.rows * op.cols * op.bytes);
  for (int64_t row = 0; row < op.rows; ++row) {
    for (int64_t col = 0; col < op.cols; ++col) {
      const int64_t at = tma::box_tile_offset(row * op.cols + col, op.rows * op.cols, op.cols, op.bytes, op.swizzle);
      for (int64_t b = 0; b < op.bytes; ++b) {
        memory[at + b] = c.k_major ? TaggedByte{row, col, b} : TaggedByte{col, row, b};
      }
    }
  }
  return memory;
}

// ldmatrix .x4 (`count` matrices) as the PTX ISA defines it: lane 8q + r
// gives the address of row r of matrix q, 16 bytes; lane l receives in
// register q the 4 bytes at 4 (l % 4) of row l / 4, or with .trans (16-bit
// elements) elements (2 (l % 4), l / 4) and (2 (l % 4) + 1, l / 4) of the
// matrix: registers[lane][q][byte].
using Registers = std::vector<std::vector<std::vector<TaggedByte>>>;
Registers ldmatrix(const std::vector<TaggedByte>& memory, const std::vector<int64_t>& row_addresses, int count,
                   bool trans) {
  Registers regs(32, std::vector<std::vector<TaggedByte>>(count));
  for (int64_t lane = 0; lane < 32; ++lane) {
    for (int q = 0; q < count; ++q) {
      for (int64_t byte = 0; byte < 4; ++byte) {
        int64_t row = lane / 4, at = 4 * (lane % 4) + byte;
        if (trans) row = 2 * (lane % 4) + byte / 2, at = 2 * (lane / 4) + byte % 2;
        EXPECT_EQ(row_addresses[8 * q + row] % 16, 0) << "ldmatrix rows are 16-byte aligned";
        regs[lane][q].push_back(memory[row_addresses[8 * q + row] + at]);
      }
    }
  }
  return regs;
}

// The PTX ISA's operand fragments of m16n8k16 (16-bit), m16n8k8 (tf32) and
// m16n8k32 (i8), alike in bytes: register j of a lane of A holds the 4
// bytes at byte 4 (lane % 4) + 16 (j / 2) of k of row lane / 4 + 8 (j % 2);
// of B, those at 4 (lane % 4) + 16 j of column lane / 4. Byte b of them is
// byte b % bytes of element b / bytes.
TaggedByte a_fragment_byte(const Case& c, int64_t lane, int64_t j, int64_t b) {
  const int64_t byte_k = 4 * (lane % 4) + 16 * (j / 2) + b;
  return {lane / 4 + 8 * (j % 2), byte_k / c.bytes, byte_k % c.bytes};
}
TaggedByte b_fragment_byte(const Case& c, int64_t lane, int64_t j, int64_t b) {
  const int64_t byte_k = 4 * (lane % 4) + 16 * j + b;
  return {lane / 4, byte_k / c.bytes, byte_k % c.bytes};
}

// Every ldmatrix of the operand, for every warp origin along mn and every
// 32 bytes of k, hands each lane the fragment bytes of its block: A's four
// registers, or B's two of each 8-column block.
void expect_fragments(const Case& c, LdmatrixLanes lanes, int64_t warp_mn) {
  SCOPED_TRACE(name(c));
  const StoredOperand op = stored(c);
  const std::vector<TaggedByte> memory = tagged_tile(c);
  const int64_t step = 32 / c.bytes, block = lanes == LdmatrixLanes::kA ? 16 : lanes == LdmatrixLanes::kB ? 16 : 8;
  for (int64_t origin = 0; origin < c.mn; origin += warp_mn) {
    for (int64_t mn = 0; mn + block <= warp_mn; mn += block) {
      for (int64_t k = 0; k < c.k; k += step) {
        std::vector<int64_t> rows;
        for (int64_t lane = 0; lane < 32; ++lane) {
          const int64_t at = codegen::nvptx::ldmatrix_lane_offset(op, lanes, mn, k, origin, lane);
          ASSERT_EQ(codegen::emitted_ldmatrix_lane_offset(op, lanes, mn, k, origin, lane), at) << "lane " << lane;
          rows.push_back(at);
        }
        const int count = lanes == LdmatrixLanes::kLastB ? 2 : 4;
        const Registers regs = ldmatrix(memory, rows, count, !c.k_major);
        for (int64_t lane = 0; lane < 32; ++lane) {
          for (int q = 0; q < count; ++q) {
            for (int64_t b = 0; b < 4; ++b) {
              // a: registers a0..a3; b: b0, b1 of the first block, then of the second.
              TaggedByte want =
                  lanes == LdmatrixLanes::kA ? a_fragment_byte(c, lane, q, b) : b_fragment_byte(c, lane, q % 2, b);
              want.mn += origin + mn + (lanes == LdmatrixLanes::kB ? 8 * (q / 2) : 0);
              want.k += k;
              ASSERT_EQ(regs[lane][q][b], want) << "origin " << origin << " block " << mn << " k " << k << " lane "
                                                << lane << " register " << q << " byte " << b;
            }
          }
        }
      }
    }
  }
}

TEST(MmaSync, LdmatrixHandsEveryLaneItsFragments) {
  const std::vector<Case> cases = {
      {2, true, Swizzle::kNone, 64, 32},   {2, true, Swizzle::k128B, 64, 64},  {2, true, Swizzle::k64B, 32, 32},
      {2, true, Swizzle::k32B, 32, 16},    {2, true, Swizzle::k128B, 64, 128}, {2, false, Swizzle::kNone, 64, 32},
      {2, false, Swizzle::k128B, 128, 32}, {2, false, Swizzle::k64B, 32, 32},  {2, false, Swizzle::k32B, 32, 16},
      {4, true, Swizzle::kNone, 32, 16},   {4, true, Swizzle::k128B, 32, 64},  {1, true, Swizzle::kNone, 32, 64},
      {1, true, Swizzle::k128B, 64, 256},  {1, true, Swizzle::k64B, 32, 64}};
  for (const Case& c : cases) {
    for (int64_t warp_mn : {16, 32}) {
      expect_fragments(c, LdmatrixLanes::kA, warp_mn);
      expect_fragments(c, LdmatrixLanes::kB, warp_mn);
    }
    expect_fragments(c, LdmatrixLanes::kLastB, 8);
  }
}

// a in registers: a [m, k] in the accumulator layout of m x k holds, in
// 16 x 8 blocks 2kk and 2kk + 1 of each warp's rows, the A fragment of k
// step kk: values 0, 1 of block 2kk pack into a0, values 2, 3 into a1, and
// block 2kk + 1's into a2 and a3.
TEST(MmaSync, AccumulatorBlocksPairUpIntoRegisterAFragments) {
  const Case c = {2, true, Swizzle::kNone, 64, 32};
  for (auto [m, k, rows] : {std::tuple{64, 32, 4}, {128, 64, 4}, {64, 16, 2}}) {
    const codegen::LayoutTable t = codegen::tabulate_mma_sync(m, k, MmaWarps{rows, 1});
    const int64_t blocks_k = k / 8;
    for (int64_t th = 0; th < t.threads; ++th) {
      const int64_t lane = th % 32, warp_row = th / 32 * (m / rows);
      for (int64_t i = 0; i < m / rows / 16; ++i) {
        for (int64_t kk = 0; kk < k / 16; ++kk) {
          for (int64_t j = 0; j < 4; ++j) {
            for (int64_t half = 0; half < 2; ++half) {
              const int64_t slot = (i * blocks_k + 2 * kk + j / 2) * 4 + 2 * (j % 2) + half;
              const TaggedByte want = a_fragment_byte(c, lane, j, 2 * half);
              EXPECT_EQ(t.at[th * t.slots + slot], (warp_row + 16 * i + want.mn) * k + 16 * kk + want.k)
                  << m << "x" << k << " thread " << th << " block " << i << " step " << kk << " register " << j;
            }
          }
        }
      }
    }
  }
}

CompileOptions sm80(int warps) {
  CompileOptions o;
  o.arch = "sm_80";
  o.num_warps = warps;
  return o;
}

// The GEMM's main loop on sm_80: ldmatrix and mma.sync over the tiles, no
// spills, which ptxas takes for the chip.
TEST(MmaSync, GemmsRunOnTensorCores) {
  struct Want {
    samples::GemmConfig g;
    int warps;
    std::string mma;
  };
  for (const Want& w :
       {Want{samples::kMatmulAmd, samples::kMatmulAmdWarps, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"},
        Want{samples::kMatmul, samples::kMatmulWarps, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"},
        Want{{.bm = 64, .bn = 64, .bk = 64, .in = f16, .stages = 1}, 4, "m16n8k16.row.col.f32.f16.f16.f32"},
        Want{{.bm = 64, .bn = 64, .bk = 32, .in = f32, .stages = 1, .tf32 = true},
             4,
             "m16n8k8.row.col.f32.tf32.tf32.f32"},
        Want{{.bm = 64, .bn = 64, .bk = 128, .in = i8, .out = i32, .stages = 1}, 4, "m16n8k32.row.col.s32.s8.s8.s32"},
        Want{{.bm = 64, .bn = 64, .bk = 64, .b_nk = false, .a_mk = false, .stages = 1}, 4, "m16n8k16"}}) {
    SCOPED_TRACE(w.mma);
    absl::StatusOr<Kernel> kernel = samples::gemm_kernel(w.g);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    absl::StatusOr<DeviceCode> code = compile_ptx(*kernel, sm80(w.warps));
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_THAT(code->binary, HasSubstr(w.mma));
    EXPECT_THAT(code->binary, HasSubstr("ldmatrix.sync.aligned.m8n8.x4"));
    if (!w.g.a_mk) {
      EXPECT_THAT(code->binary, HasSubstr(".trans"));
    }
    expect_ptxas_clean(code->binary, "sm_80");
  }
}

// The pointer GEMM's operands go through swizzled rings of cp.async
// copies, which ldmatrix reads through the same swizzle.
TEST(MmaSync, PointerGemmsReadSwizzledCopyRings) {
  for (const auto& [g, warps] : matmul_cases::kAmperePointerGemms) {
    SCOPED_TRACE(absl::StrCat(g.bm, "x", g.bn, "x", g.bk, " ", g.in.name(), ", ", g.stages, " stages"));
    CompileOptions o = sm80(warps);
    o.specialization.multiple_of_16 = 0x3f;  // every pointer aligned, m, n and k multiples of 16
    absl::StatusOr<DeviceCode> code = compile_ptx(*samples::pointer_gemm_kernel(g), o);
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_THAT(code->binary, HasSubstr("cp.async.cg.shared.global"));
    EXPECT_THAT(code->binary, HasSubstr("mma.sync.aligned.m16n8k16"));
    expect_ptxas_clean(code->binary, "sm_80");
  }
}

// tf32 and i8 operands stored along M or N, which ldmatrix cannot
// transpose (and wgmma refuses), load element by element.
TEST(MmaSync, Tf32AndI8OperandsStoredAlongMOrNLoadByElement) {
  for (const samples::GemmConfig& g :
       {samples::GemmConfig{.bm = 64, .bn = 64, .bk = 32, .in = f32, .b_nk = false, .a_mk = false, .stages = 1,
                            .tf32 = true},
        samples::GemmConfig{.bm = 64, .bn = 64, .bk = 128, .in = i8, .out = i32, .b_nk = false, .stages = 1}}) {
    SCOPED_TRACE(g.in.name());
    absl::StatusOr<DeviceCode> code = compile_ptx(*samples::gemm_kernel(g), sm80(4));
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_THAT(code->binary, HasSubstr(g.in == i8 ? "m16n8k32.row.col.s32.s8.s8.s32" : "m16n8k8.row.col.f32.tf32"));
    // A K-major i8 a still takes ldmatrix (a warp's 16 rows, four steps of
    // 32 bytes); the rest is loaded element by element.
    EXPECT_EQ(count(code->binary, "ldmatrix"), g.a_mk ? 4 : 0);
    expect_ptxas_clean(code->binary, "sm_80");
  }
}

// sm_89 multiplies fp8 on mma.sync (PTX 8.4), e4m3 and e5m2 in any
// pairing; sm_80 has no such instruction, and its fp8 dots stay loops.
TEST(MmaSync, AdaMultipliesFp8) {
  for (const auto& [a, b] : {std::pair{f8e4m3, f8e4m3}, {f8e4m3, f8e5m2}, {f8e5m2, f8e4m3}}) {
    const samples::GemmConfig g = {
        .bm = 64, .bn = 64, .bk = 128, .in = a, .in_b = b, .out = bf16, .stages = 1, .scaled = true};
    SCOPED_TRACE(absl::StrCat(a.name(), " x ", b.name()));
    CompileOptions ada = sm80(4);
    ada.arch = "sm_89";
    absl::StatusOr<DeviceCode> code = compile_ptx(*samples::gemm_kernel(g), ada);
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_THAT(code->binary, HasSubstr(".version 8.4"));
    EXPECT_THAT(code->binary,
                HasSubstr(absl::StrCat("mma.sync.aligned.m16n8k32.row.col.f32.", a == f8e4m3 ? "e4m3" : "e5m2", ".",
                                       b == f8e4m3 ? "e4m3" : "e5m2", ".f32")));
    expect_ptxas_clean(code->binary, "sm_89");
    absl::StatusOr<DeviceCode> ampere = compile_ptx(*samples::gemm_kernel(g), sm80(4));
    ASSERT_TRUE(ampere.ok()) << ampere.status();
    EXPECT_THAT(ampere->binary, HasSubstr(".version 8.3"));
    EXPECT_EQ(count(ampere->binary, "mma.sync"), 0);
  }
}

// Plain sm_90 has no wgmma: its dots take mma.sync too.
TEST(MmaSync, PlainSm90TakesMmaSync) {
  absl::StatusOr<DeviceCode> code = compile_ptx(*samples::gemm_kernel(samples::kMatmulAmd), [] {
    CompileOptions o = sm80(4);
    o.arch = "sm_90";
    return o;
  }());
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_THAT(code->binary, HasSubstr("mma.sync.aligned.m16n8k16"));
  EXPECT_EQ(code->binary.find("wgmma"), std::string::npos);
}

// On sm_90a, products wgmma cannot take (fewer than 64 rows a warpgroup)
// take mma.sync rather than a loop, beside wgmma in the same kernel.
TEST(MmaSync, HopperTakesMmaSyncWhereWgmmaCannot) {
  CompileOptions o = sm80(4);
  o.arch = "sm_90a";
  absl::StatusOr<DeviceCode> code;
  for (const samples::GemmConfig& g : {samples::GemmConfig{.bm = 32, .bn = 64, .bk = 64, .stages = 3},
                                       samples::GemmConfig{.bm = 16, .bn = 128, .bk = 64, .in = f16, .b_nk = false}}) {
    SCOPED_TRACE(absl::StrCat(g.bm, "x", g.bn, "x", g.bk, " ", g.in.name()));
    code = compile_ptx(*samples::gemm_kernel(g), o);
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_THAT(code->binary, HasSubstr(absl::StrCat("mma.sync.aligned.m16n8k16.row.col.f32.", g.in.name(), ".",
                                                     g.in.name(), ".f32")));
    EXPECT_EQ(code->binary.find("wgmma"), std::string::npos);
    expect_ptxas_clean(code->binary, "sm_90a");
  }

  // 64 query rows take wgmma for QK^T; P @ V with 16 of them a warp
  // (one warp per 16 rows) takes mma.sync.
  KernelBuilder k("mixed");
  Value a = k.tensor_map(bf16, {64, 64}, "a", Swizzle::k128B);
  Value b = k.tensor_map(bf16, {64, 64}, "b", Swizzle::k128B);
  Value out = k.arg(ptr(f32), "out");
  Value s = dot(tma_load(a, {0, 0}), trans(tma_load(b, {0, 0})), k.zeros({64, 64}, f32));
  Value top = narrow(tma_load(a, {64, 0}), 0, 0, 16);
  Value r = dot(top, trans(tma_load(b, {64, 0})), k.zeros({16, 64}, f32));
  Value rows = expand_dims(k.arange(0, 16), 1), cols = expand_dims(k.arange(0, 64), 0);
  store(out + rows * 64 + cols, r + narrow(s, 0, 0, 16));
  absl::StatusOr<Kernel> kernel = k.build();
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  code = compile_ptx(*kernel, o);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_THAT(code->binary, HasSubstr("wgmma.mma_async"));
  EXPECT_THAT(code->binary, HasSubstr("mma.sync.aligned.m16n8k16"));
  expect_ptxas_clean(code->binary, "sm_90a");
}

// A product's operand computed before a loop (a decode step's queries) is
// written to shared memory once, before the loop; one computed in the loop
// is written in it, every iteration. The keys come through a copy ring.
TEST(MmaSync, OperandsTheLoopDoesNotChangeAreStagedBeforeIt) {
  for (bool in_loop : {false, true}) {
    SCOPED_TRACE(in_loop ? "computed in the loop" : "computed before it");
    KernelBuilder k("staged_once");
    Value a = k.arg(ptr(f32), "a"), b = k.arg(ptr(bf16), "b"), out = k.arg(ptr(f32), "out");
    Value n = k.arg(i32, "n");
    Value rows = expand_dims(k.arange(0, 16), 1), keys = expand_dims(k.arange(0, 64), 1);
    Value cols = expand_dims(k.arange(0, 64), 0);
    auto queries = [&] { return cast(load(a + rows * 64 + cols), bf16); };  // [16, 64]
    Value before = queries();
    Var acc = k.var(k.zeros({16, 64}, f32));
    k.for_range(k.constant(0, i32), n, 64, [&](Value j) {
      Value kt = load(b + (j + keys) * 64 + cols);  // [64, 64]
      acc = dot(in_loop ? queries() : before, trans(kt), acc);
    });
    store(out + rows * 64 + cols, acc);
    absl::StatusOr<Kernel> kernel = k.build();
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    CompileOptions o = sm80(4);
    o.specialization.multiple_of_16 = ~uint64_t{0};
    absl::StatusOr<DeviceCode> code = compile_ptx(*kernel, o);
    ASSERT_TRUE(code.ok()) << code.status();
    std::string body;
    for (const std::string& loop : loop_bodies(code->binary)) {
      if (loop.find("mma.sync") != std::string::npos) body = loop;
    }
    ASSERT_FALSE(body.empty()) << code->binary;
    EXPECT_THAT(body, HasSubstr("cp.async.cg.shared.global"));
    EXPECT_EQ(count(body, "st.shared") > 0, in_loop);
    EXPECT_GT(count(code->binary, "st.shared"), 0);
    expect_ptxas_clean(code->binary, "sm_80");
  }
}

// Attention's P @ V takes P from registers: the fragments of QK^T's
// accumulator are A's, and no P tile goes through shared memory.
TEST(MmaSync, AttentionTakesPFromRegisters) {
  const samples::AttnConfig c = {.d = 64, .bm = 64, .bn = 64, .stages = 1, .warps = 4};
  absl::StatusOr<Kernel> kernel = samples::attention_kernel(c);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  absl::StatusOr<DeviceCode> code = compile_ptx(*kernel, sm80(samples::attention_warps(c)));
  ASSERT_TRUE(code.ok()) << code.status();
  const std::string& ptx = code->binary;
  // Each key block's body: 32 mma.sync of QK^T and 32 of P @ V (a warp's
  // 16 rows, 64 columns, k 64), ldmatrix for Q (4) and K (16), and for V
  // (16, .trans); P would add 4 more.
  const int bodies = count(ptx, "mma.sync.aligned.m16n8k16") / 64;
  ASSERT_GT(bodies, 0);
  EXPECT_EQ(count(ptx, "mma.sync.aligned.m16n8k16"), 64 * bodies);
  EXPECT_EQ(count(ptx, "ldmatrix.sync.aligned.m8n8.x4.shared"), 20 * bodies);
  EXPECT_EQ(count(ptx, "ldmatrix.sync.aligned.m8n8.x4.trans.shared"), 16 * bodies);
  expect_ptxas_clean(ptx, "sm_80");
}

}  // namespace
}  // namespace tessel
