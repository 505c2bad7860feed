// The AMDGPU target (gfx942): every sample's kernels become HSA code objects
// linked in process, read back here (ELF header, kernel descriptor,
// metadata); the assembly shows the instructions the design relies on
// (cross-lane permutes, fenced barriers, MI300X's publish ordering).
#include <regex>
#include <set>

#include "absl/strings/str_cat.h"
#include "base/debug_abi.h"
#include "code_object_reader.h"
#include "codegen/amdgpu/mfma_fragment.h"
#include "codegen/compiler.h"
#include "dsl/ops.h"
#include "dsl/random.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "samples/kernels.h"
#include "samples/moe.h"
#include "tests/debug_cases.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct Compiled {
  DeviceCode code;
  CompileArtifacts artifacts;
};

absl::StatusOr<Compiled> compile_gfx942(const Kernel& kernel, int num_warps = 4) {
  CompileOptions options;
  options.arch = "gfx942";
  options.num_warps = num_warps;
  Compiled c;
  absl::StatusOr<DeviceCode> code = compile(kernel, options, &c.artifacts);
  if (!code.ok()) return code.status();
  c.code = *std::move(code);
  return c;
}

std::vector<Kernel> sample_kernels() {
  std::vector<Kernel> kernels = {
      *samples::vector_add_kernel(),     *samples::softmax_kernel(),
      *samples::row_softmax_kernel(),    *samples::tile_copy_kernel(),
      *samples::tile_transpose_kernel(), *samples::gemm_kernel(samples::kMatmulAmd, "matmul")};
  for (bool publishes : {true, false}) kernels.push_back(*samples::allgather_producer_kernel(publishes));
  kernels.push_back(*samples::allgather_check_kernel());
  return kernels;
}

TEST(Amdgpu, EverySampleKernelIsAGfx942CodeObject) {
  for (const Kernel& kernel : sample_kernels()) {
    SCOPED_TRACE(kernel.name());
    absl::StatusOr<Compiled> c = compile_gfx942(kernel);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->code.format, CodeFormat::kHsaco);
    EXPECT_EQ(c->code.threads, 4 * 64);
    const code_object::Header h = code_object::header(c->code.binary);
    EXPECT_EQ(c->code.binary.substr(0, 4),
              "\x7f"
              "ELF");
    EXPECT_EQ(h.type, 3);              // ET_DYN: a shared object the loader maps
    EXPECT_EQ(h.machine, 224);         // EM_AMDGPU
    EXPECT_EQ(h.os_abi, 64);           // ELFOSABI_AMDGPU_HSA
    EXPECT_EQ(h.abi_version, 3);       // code object v5
    EXPECT_EQ(h.flags & 0xFF, 0x4Cu);  // EF_AMDGPU_MACH_AMDGCN_GFX942
    // No calls: exp, log and everything else are inline, no device library.
    EXPECT_THAT(c->artifacts.assembly, Not(HasSubstr("s_swappc")));
  }
}

// device_print and device_assert: the debug buffer is a global the code
// object exports for hipModuleGetGlobal to find, records are reserved with a
// 64-bit atomic add and the failed assert's record claimed by a
// compare-and-swap, at agent scope.
TEST(Amdgpu, TheDebugBufferIsAnExportedGlobal) {
  CompileOptions options;
  options.arch = "gfx942";
  options.num_warps = 4;
  options.debug = true;
  CompileArtifacts artifacts;
  absl::StatusOr<DeviceCode> code = compile(debug_cases::printing_and_asserting("debugged", 256), options, &artifacts);
  ASSERT_TRUE(code.ok()) << code.status();
  std::optional<code_object::Symbol> buffer = code_object::symbol(code->binary, kDebugSymbol, true);
  ASSERT_TRUE(buffer.has_value());
  EXPECT_EQ(buffer->size, static_cast<uint64_t>(kDebugBytes));
  EXPECT_EQ(buffer->type, 1);        // STT_OBJECT
  EXPECT_EQ(buffer->binding, 1);     // STB_GLOBAL
  EXPECT_NE(buffer->visibility, 2);  // not STV_HIDDEN
  EXPECT_THAT(artifacts.assembly, HasSubstr("global_atomic_add_x2"));
  EXPECT_THAT(artifacts.assembly, HasSubstr("global_atomic_cmpswap_x2"));
}

// Philox's 32x32 -> 64-bit products: a v_mul_hi_u32 and a v_mul_lo_u32 each.
TEST(Amdgpu, RandomNumbersMultiplyInHalves) {
  KernelBuilder k("dropout_mask");
  Value seed = k.arg(u64, "seed"), out = k.arg(ptr(f32), "out");
  Value idx = k.program_id() * 256 + k.arange(0, 256);
  store(out + idx, randn(seed, idx));
  absl::StatusOr<Compiled> c = compile_gfx942(*k.build());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->artifacts.assembly, HasSubstr("v_mul_hi_u32"));
  EXPECT_THAT(c->artifacts.assembly, Not(HasSubstr("s_swappc")));
}

TEST(Amdgpu, DescriptorAndMetadataDescribeTheKernarg) {
  absl::StatusOr<Compiled> c = compile_gfx942(*samples::tile_copy_kernel());
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string& elf = c->code.binary;
  std::optional<code_object::KernelDescriptor> kd = code_object::descriptor(elf, "tile_copy");
  ASSERT_TRUE(kd.has_value());
  // Two 128-byte tensor maps by value, then m and n: 264 bytes of explicit
  // arguments, then COV5's hidden ones.
  EXPECT_GT(kd->kernarg_size, 264u);
  EXPECT_EQ(code_object::metadata_uint(elf, ".kernarg_segment_size"), kd->kernarg_size);
  EXPECT_EQ(code_object::metadata_uint(elf, ".kernarg_segment_align"), 64u);  // the maps' alignment
  EXPECT_EQ(code_object::metadata_uint(elf, ".group_segment_fixed_size"), kd->group_segment_fixed_size);
  EXPECT_EQ(code_object::metadata_uint(elf, ".wavefront_size"), 64u);
  EXPECT_EQ(code_object::metadata_uint(elf, ".max_flat_workgroup_size"), 256u);
  EXPECT_EQ(kd->private_segment_fixed_size, 0u);
  EXPECT_THAT(c->artifacts.assembly, HasSubstr(".value_kind:     hidden_block_count_x"));
  // The tiles' LDS is dynamic (the launch's); the code says how much.
  EXPECT_GT(c->code.shared_bytes, 2 * 64 * 128);
  // Box rows go 16 bytes at a time where they are whole and aligned, with
  // global (not flat) instructions on the tensor's side.
  EXPECT_THAT(c->artifacts.assembly, HasSubstr("global_load_dwordx4"));
  EXPECT_THAT(c->artifacts.assembly, HasSubstr("global_store_dwordx4"));
  EXPECT_THAT(c->artifacts.assembly, Not(HasSubstr("flat_load_dwordx4")));
  EXPECT_THAT(c->artifacts.assembly, HasSubstr("ds_write_b128"));
  EXPECT_THAT(c->artifacts.assembly, HasSubstr("ds_read_b128"));
}

TEST(Amdgpu, ReductionsPermuteAcrossLanesAndBarriersWaitForLds) {
  absl::StatusOr<Compiled> c = compile_gfx942(*samples::softmax_kernel());
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string& s = c->artifacts.assembly;
  EXPECT_THAT(s, HasSubstr("ds_bpermute_b32"));
  EXPECT_THAT(s, HasSubstr("v_exp_f32"));
  // s_barrier alone does not order LDS accesses on gfx942.
  EXPECT_TRUE(std::regex_search(s, std::regex(R"(s_waitcnt (vmcnt\(0\) )?lgkmcnt\(0\)\s+s_barrier)")));
}

TEST(Amdgpu, ScansPermuteAcrossLanesAndMeetAcrossWavesInLds) {
  KernelBuilder k("row_scan");
  Value x = k.arg(ptr(f32), "x"), out = k.arg(ptr(f32), "out");
  Value offs = expand_dims(k.arange(0, 4), 1) * 1024 + expand_dims(k.arange(0, 1024), 0);
  store(out + offs, cumsum(load(x + offs), 1));
  absl::StatusOr<Compiled> rows = compile_gfx942(*k.build());
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_THAT(rows->artifacts.assembly, HasSubstr("ds_bpermute_b32"));
  EXPECT_THAT(rows->artifacts.assembly, Not(HasSubstr("s_barrier")));
  // One line of 4096 over the four waves: their totals meet once in LDS.
  KernelBuilder line("line_scan");
  Value y = line.arg(ptr(i32), "y");
  store(y + line.arange(0, 4096), cumsum(load(y + line.arange(0, 4096)), 0, /*reverse=*/true));
  absl::StatusOr<Compiled> waves = compile_gfx942(*line.build());
  ASSERT_TRUE(waves.ok()) << waves.status();
  EXPECT_THAT(waves->artifacts.assembly, HasSubstr("ds_bpermute_b32"));
  EXPECT_THAT(waves->artifacts.assembly, HasSubstr("s_barrier"));
}

TEST(Amdgpu, SortsRunTheirNetworkInLds) {
  KernelBuilder k("row_sort");
  Value x = k.arg(ptr(i32), "x");
  Value offs = expand_dims(k.arange(0, 4), 1) * 100 + expand_dims(k.arange(0, 100), 0);
  store(x + offs, sort(load(x + offs), 1));
  absl::StatusOr<Compiled> rows = compile_gfx942(*k.build());
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_THAT(rows->artifacts.assembly, HasSubstr("ds_write"));
  EXPECT_THAT(rows->artifacts.assembly, HasSubstr("s_barrier"));
}

TEST(Amdgpu, SortsOfPowerOfTwoRowsPermuteAcrossLanes) {
  // [4, 1024] over four waves: a wave a row, in registers, no LDS.
  KernelBuilder k("row_sort");
  Value x = k.arg(ptr(f32), "x"), out = k.arg(ptr(f32), "out");
  Value offs = expand_dims(k.arange(0, 4), 1) * 1024 + expand_dims(k.arange(0, 1024), 0);
  store(out + offs, sort(load(x + offs), 1));
  absl::StatusOr<Compiled> rows = compile_gfx942(*k.build());
  ASSERT_TRUE(rows.ok()) << rows.status();
  const std::string& s = rows->artifacts.assembly;
  EXPECT_NE(s.find("ds_bpermute_b32"), std::string::npos);
  EXPECT_NE(s.find("v_min_u32"), std::string::npos);
  EXPECT_EQ(s.find("s_barrier"), std::string::npos);
  EXPECT_NE(s.find(".amdhsa_group_segment_fixed_size 0\n"), std::string::npos);
}

TEST(Amdgpu, GathersReadTheirSourceFromLds) {
  KernelBuilder k("gather_rows");
  Value x = k.arg(ptr(f32), "x"), idx = k.arg(ptr(i32), "idx"), out = k.arg(ptr(f32), "out");
  Value rows = expand_dims(k.arange(0, 16), 1);
  Value src = load(x + (rows * 256 + expand_dims(k.arange(0, 256), 0)));
  Value offs = rows * 8 + expand_dims(k.arange(0, 8), 0);
  store(out + offs, gather(src, load(idx + offs), 1));
  absl::StatusOr<Compiled> c = compile_gfx942(*k.build());
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string& s = c->artifacts.assembly;
  EXPECT_NE(s.find("ds_write"), std::string::npos);
  EXPECT_NE(s.find("ds_read"), std::string::npos);
  EXPECT_NE(s.find("s_barrier"), std::string::npos);
}

// Each thread adds its elements to their bins in LDS, without a return value.
TEST(Amdgpu, HistogramsCountInLds) {
  KernelBuilder k("histogram");
  Value x = k.arg(ptr(i32), "x"), out = k.arg(ptr(i32), "out");
  store(out + k.arange(0, 64), histogram(load(x + k.arange(0, 1024)), 64));
  absl::StatusOr<Compiled> c = compile_gfx942(*k.build());
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string& s = c->artifacts.assembly;
  EXPECT_NE(s.find("ds_add_u32"), std::string::npos);
  EXPECT_EQ(s.find("global_atomic"), std::string::npos);
  EXPECT_NE(s.find("s_barrier"), std::string::npos);
}

// A while loop whose test reduces the tile it carries across the warps.
TEST(Amdgpu, WhileLoopsCompile) {
  KernelBuilder k("halve");
  Value x = k.arg(ptr(i32), "x");
  Value offs = k.arange(0, 1024);
  Var v = k.var(load(x + offs));
  k.while_([&] { return max(v, 0) > 100; }, [&] { v = v / 2; });
  store(x + offs, v);
  absl::StatusOr<Compiled> c = compile_gfx942(*k.build());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NE(c->artifacts.assembly.find("s_barrier"), std::string::npos);
}

TEST(Amdgpu, TheMoeAlignmentCompiles) {
  absl::StatusOr<samples::MoeAlignKernels> kernels = samples::moe_align_kernels(64, 64, 1024);
  ASSERT_TRUE(kernels.ok()) << kernels.status();
  for (const Kernel& kernel : {kernels->count, kernels->place, kernels->scatter}) {
    absl::StatusOr<Compiled> c = compile_gfx942(kernel);
    ASSERT_TRUE(c.ok()) << kernel.name() << ": " << c.status();
  }
  // The count kernel's histogram adds in LDS.
  EXPECT_NE(compile_gfx942(kernels->count)->artifacts.assembly.find("ds_add_u32"), std::string::npos);
}

// A combine function's tuples cross lanes like the named reductions' values.
TEST(Amdgpu, ReduceFnsCrossLanes) {
  KernelBuilder k("argmax_rows");
  Value x = k.arg(ptr(f32), "x"), at = k.arg(ptr(i32), "at");
  Value c = expand_dims(k.arange(0, 64), 0);
  Value v = load(x + expand_dims(k.arange(0, 16), 1) * 64 + c);  // [16, 64] f32
  std::vector<Value> r =
      reduce({v, broadcast_to(c, {16, 64})}, 1, [](std::span<const Value> a, std::span<const Value> b) {
        Value take_b = (b[0] > a[0]) | ((b[0] == a[0]) & (b[1] < a[1]));
        return std::vector<Value>{where(take_b, b[0], a[0]), where(take_b, b[1], a[1])};
      });
  store(at + k.arange(0, 16), r[1]);
  absl::StatusOr<Compiled> c2 = compile_gfx942(*k.build());
  ASSERT_TRUE(c2.ok()) << c2.status();
  EXPECT_NE(c2->artifacts.assembly.find("ds_bpermute"), std::string::npos);
}

// A scan's tuples cross lanes in order: a linear recurrence along rows.
TEST(Amdgpu, AssociativeScansCrossLanes) {
  KernelBuilder k("recurrence_rows");
  Value a = k.arg(ptr(f32), "a"), b = k.arg(ptr(f32), "b"), h = k.arg(ptr(f32), "h");
  Value offs = expand_dims(k.arange(0, 16), 1) * 64 + expand_dims(k.arange(0, 64), 0);  // [16, 64]
  std::vector<Value> r = associative_scan(
      {load(a + offs), load(b + offs)}, 1,
      [](std::span<const Value> first, std::span<const Value> then) {
        return std::vector<Value>{first[0] * then[0], then[0] * first[1] + then[1]};
      },
      /*reverse=*/true);
  store(h + offs, r[1]);
  absl::StatusOr<Compiled> c = compile_gfx942(*k.build());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NE(c->artifacts.assembly.find("ds_bpermute"), std::string::npos);
}

TEST(Amdgpu, PublishFollowsTheMi300xOrdering) {
  absl::StatusOr<Compiled> c = compile_gfx942(*samples::allgather_producer_kernel(true));
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string& s = c->artifacts.assembly;
  // Every wavefront waits for its stores, the workgroup meets, then the
  // gate opens with a system-scope release.
  const size_t wait = s.find("s_waitcnt vmcnt(0)");
  const size_t barrier = s.find("s_barrier", wait);
  const size_t writeback = s.find("buffer_wbl2 sc0 sc1", barrier);
  ASSERT_NE(wait, std::string::npos);
  ASSERT_NE(barrier, std::string::npos);
  ASSERT_NE(writeback, std::string::npos);
  EXPECT_TRUE(std::regex_search(
      s.substr(writeback),
      std::regex(R"(^buffer_wbl2 sc0 sc1\s+(s_waitcnt vmcnt\(0\)\s+)?global_store_dwordx2 [^\n]* sc0 sc1)")));
  // The contributor count: an agent-scope acq_rel add.
  EXPECT_TRUE(std::regex_search(s, std::regex(R"(buffer_wbl2 sc1\s+(s_waitcnt vmcnt\(0\)\s+)?global_atomic_add_x2)")));
  // wait/arrived read the gate with a system-scope acquire.
  absl::StatusOr<Compiled> check = compile_gfx942(*samples::allgather_check_kernel());
  ASSERT_TRUE(check.ok()) << check.status();
  EXPECT_TRUE(std::regex_search(
      check->artifacts.assembly,
      std::regex(R"(global_load_dwordx2 [^\n]* sc0 sc1\s+s_waitcnt vmcnt\(0\)\s+buffer_inv sc0 sc1)")));
}

// An acq_rel scalar atomic: every wavefront's stores done and the
// workgroup met, an agent-scope release (L2 written back) before the add
// and an acquire (L2 invalidated) after it. A relaxed one has neither.
TEST(Amdgpu, AtomicsFenceTheWholeProgramAsTheirOrderSays) {
  KernelBuilder k("orders");
  Value c = k.arg(ptr(i32), "counter"), out = k.arg(ptr(f32), "out");
  store(out + k.arange(0, 256), k.zeros({256}, f32));
  Value last = atomic_add(c, 1);
  store(out, cast(atomic_add(c + 1, last, MemoryOrder::kRelaxed), f32));
  absl::StatusOr<Compiled> compiled = compile_gfx942(*k.build());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  const std::string& s = compiled->artifacts.assembly;
  EXPECT_TRUE(std::regex_search(
      s, std::regex(R"(s_waitcnt vmcnt\(0\)\s+s_barrier[^]*buffer_wbl2 sc1[^]*global_atomic_add v\d+, v\d+, v\d+, )"
                    R"(s\[\d+:\d+\] sc0\n[^]*buffer_inv sc1[^]*offset:4 sc0)")));
  const size_t relaxed = s.find("offset:4 sc0");
  ASSERT_NE(relaxed, std::string::npos);
  const size_t before = s.rfind("s_barrier", relaxed), after = s.find("s_barrier", relaxed);
  const std::string around = s.substr(before, after - before);
  EXPECT_THAT(around, Not(HasSubstr("buffer_wbl2")));
  EXPECT_THAT(around, Not(HasSubstr("buffer_inv")));
}

TEST(Amdgpu, AtomicsAreDeviceScoped) {
  KernelBuilder k("histogram");
  Value counts = k.arg(ptr(i32), "counts"), keys = k.arg(ptr(i32), "keys");
  Value offs = k.arange(0, 256);
  atomic_add(counts + load(keys + offs), 1);
  absl::StatusOr<Compiled> c = compile_gfx942(*k.build());
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string& s = c->artifacts.assembly;
  EXPECT_TRUE(std::regex_search(s, std::regex(R"((global|flat)_atomic_add)")));
  // Agent scope: the L2 is written back and invalidated for the device, not the system.
  EXPECT_THAT(s, HasSubstr("buffer_inv sc1"));
  EXPECT_THAT(s, Not(HasSubstr("sc0 sc1")));
}

TEST(Amdgpu, MfmaAccumulatorCoversTheTileOnce) {
  using codegen::amdgpu::mfma_accumulator_element;
  for (auto [m, n, waves] : {std::tuple{32, 32, 1}, {64, 64, 4}, {128, 64, 2}, {128, 128, 4}}) {
    const int64_t slots = m / 32 * (n / 32) / waves * 16;
    std::set<int64_t> seen;
    for (int64_t t = 0; t < 64 * waves; ++t) {
      for (int64_t s = 0; s < slots; ++s) seen.insert(mfma_accumulator_element(n, waves, t, s));
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), m * n) << m << "x" << n;
    EXPECT_EQ(*seen.rbegin(), m * n - 1);
  }
  // The 32 x 32 block: lane 33's value 5 is row 8 + 4 + 1, column 1.
  EXPECT_EQ(mfma_accumulator_element(32, 1, 33, 5), 13 * 32 + 1);
  // Two waves on a 64 x 64 tile: wave 1 takes block 1 (columns 32-63), then block 3.
  EXPECT_EQ(mfma_accumulator_element(64, 2, 64, 0), 32);
  EXPECT_EQ(mfma_accumulator_element(64, 2, 64, 16), 32 * 64 + 32);
}

TEST(Amdgpu, DotOnBf16F16I8AndFp8TilesRunsOnMfma) {
  for (DType in : {bf16, f16}) {
    for (bool b_nk : {true, false}) {
      SCOPED_TRACE(absl::StrCat(in.name(), b_nk ? " B as NxK" : " B as KxN"));
      samples::GemmConfig g = samples::kMatmulAmd;
      g.in = in;
      g.b_nk = b_nk;
      absl::StatusOr<Compiled> c = compile_gfx942(*samples::gemm_kernel(g), samples::kMatmulAmdWarps);
      ASSERT_TRUE(c.ok()) << c.status();
      const std::string& s = c->artifacts.assembly;
      // A 64 x 64 tile over four wavefronts: one 32 x 32 block each, 8 steps of k for BK 64.
      const std::string mfma = absl::StrCat("v_mfma_f32_32x32x8_", in == bf16 ? "bf16" : "f16");
      size_t count = 0;
      for (size_t at = s.find(mfma); at != std::string::npos; at = s.find(mfma, at + 1)) ++count;
      EXPECT_EQ(count, 8u);
      // K-major operands are read four k at a time.
      EXPECT_THAT(s, HasSubstr("ds_read_b64"));
      EXPECT_THAT(s, HasSubstr(".vgpr_spill_count: 0"));
      // The accumulator stays in registers: LDS holds the two operand tiles and C's.
      EXPECT_LE(c->code.shared_bytes, 3 * 64 * 64 * 2 + 1024);
    }
  }
  // i8 into i32: 16 of k an instruction, a lane's eight in one 8-byte read;
  // and block-scaled (W8A8 with 1 x 128 and 128 x 128 scales), each step's
  // i32 sum into an f32 accumulator.
  for (auto [b_nk, blocks] : {std::pair{true, false}, {false, false}, {true, true}}) {
    SCOPED_TRACE(absl::StrCat("i8, B as ", b_nk ? "NxK" : "KxN", blocks ? ", block scales" : ""));
    samples::GemmConfig g = samples::kMatmulAmd;
    g.in = i8;
    g.out = blocks ? bf16 : i32;
    g.b_nk = b_nk;
    g.block_scales = blocks;
    absl::StatusOr<Compiled> c = compile_gfx942(*samples::gemm_kernel(g), samples::kMatmulAmdWarps);
    ASSERT_TRUE(c.ok()) << c.status();
    const std::string& s = c->artifacts.assembly;
    size_t count = 0;
    for (size_t at = s.find("v_mfma_i32_32x32x16_i8"); at != std::string::npos;
         at = s.find("v_mfma_i32_32x32x16_i8", at + 1)) {
      ++count;
    }
    EXPECT_EQ(count, 4u);
    EXPECT_THAT(s, HasSubstr(".vgpr_spill_count: 0"));
  }
  // fp8 (e4m3, e5m2, mixed): 16 of k an instruction, read as gfx942's FNUZ
  // encodings: each byte of 0x80 (-0) made +0 (through masks of the low
  // seven bits), and the accumulator kept in quarters through the
  // instructions, four times that after (a product of two FNUZ bytes is
  // worth a quarter of the OCP one).
  for (auto [a, b, form] :
       {std::tuple{f8e4m3, f8e4m3, "fp8_fp8"}, {f8e4m3, f8e5m2, "fp8_bf8"}, {f8e5m2, f8e5m2, "bf8_bf8"}}) {
    SCOPED_TRACE(form);
    samples::GemmConfig g = samples::kMatmulAmd;
    g.in = a;
    g.in_b = b;
    g.scaled = g.fast_accum = true;
    absl::StatusOr<Compiled> c = compile_gfx942(*samples::gemm_kernel(g), samples::kMatmulAmdWarps);
    ASSERT_TRUE(c.ok()) << c.status();
    const std::string& s = c->artifacts.assembly;
    const std::string mfma = absl::StrCat("v_mfma_f32_32x32x16_", form);
    size_t count = 0;
    for (size_t at = s.find(mfma); at != std::string::npos; at = s.find(mfma, at + 1)) ++count;
    EXPECT_EQ(count, 4u);
    EXPECT_THAT(s, HasSubstr("0x7f7f7f7f"));
    EXPECT_THAT(s, HasSubstr("4.0"));
    EXPECT_THAT(s, HasSubstr(".vgpr_spill_count: 0"));
  }
  // Other dtypes keep the loop.
  const samples::GemmConfig f32_gemm = {.bm = 32, .bn = 32, .bk = 32, .in = f32, .stages = 1};
  absl::StatusOr<Compiled> c = compile_gfx942(*samples::gemm_kernel(f32_gemm), samples::kMatmulAmdWarps);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->artifacts.assembly, Not(HasSubstr("v_mfma")));
}

TEST(Amdgpu, BadOptionsAndOversizedKernelsAreClearErrors) {
  Kernel kernel = *samples::vector_add_kernel();
  EXPECT_THAT(compile_gfx942(kernel, 17).status().message(),
              HasSubstr("num_warps must be 1 to 16 on AMD GPUs (wavefronts of 64 threads), got 17"));
  CompileOptions other;
  other.arch = "gfx90a";
  EXPECT_THAT(compile(kernel, other).status().message(),
              HasSubstr("amdgpu target 'gfx90a': tessel compiles for gfx942"));
  // The sample's Hopper GEMM needs far more than 64 KiB of LDS.
  absl::Status big = compile_gfx942(*samples::matmul_kernel(), 8).status();
  EXPECT_EQ(big.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(big.message(), HasSubstr("bytes of LDS per program; gfx942 allows 65536"));
  // Four programs on a compute unit share its 64 KiB: the sample GEMM, a
  // little over 16 KiB, no longer fits.
  const Kernel gemm = *samples::gemm_kernel(samples::kMatmulAmd, "matmul");
  CompileOptions two;
  two.arch = "gfx942";
  two.num_warps = samples::kMatmulAmdWarps;
  absl::StatusOr<DeviceCode> alone = compile(gemm, two);
  ASSERT_TRUE(alone.ok()) << alone.status();
  ASSERT_GT(alone->shared_bytes, 16384);
  two.min_programs = 4;
  absl::Status shared = compile(gemm, two).status();
  EXPECT_EQ(shared.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(shared.message(),
              HasSubstr("bytes of LDS per program; gfx942 allows 16384 with 4 programs on a compute unit"));
  // Two fit, and LLVM is asked for registers that let each SIMD hold both
  // programs' wavefronts (the GEMM's four are one a SIMD).
  two.min_programs = 2;
  CompileArtifacts artifacts;
  ASSERT_TRUE(compile(gemm, two, &artifacts).ok());
  EXPECT_THAT(artifacts.llvm, HasSubstr("\"amdgpu-waves-per-eu\"=\"2\""));
  // Three programs of sixteen wavefronts would need twelve on each SIMD.
  two.num_warps = 16;
  two.min_programs = 3;
  absl::Status waves = compile(*samples::vector_add_kernel(), two).status();
  EXPECT_EQ(waves.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(waves.message(), HasSubstr("min_programs 3 of 16 wavefronts would need 12 wavefronts on each SIMD of a "
                                         "compute unit; gfx942 holds at most 8"));
}

}  // namespace
}  // namespace tessel
