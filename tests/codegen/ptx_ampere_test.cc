// NVIDIA chips before Hopper (sm_80 to sm_89): PTX with none of Hopper's
// instructions, which ptxas assembles for the chip. TMA boxes are copied by
// the program's threads from maps in tessel's host form, `dot` runs on
// mma.sync (mma_sync_test.cc), a cluster's programs run as independent ones, a
// warp-specialized loop as written, and fp8 conversions take the hardware's
// instruction from sm_89 on. Chips tessel does not compile for are named.
#include <string>

#include "codegen/compiler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "samples/gemm.h"
#include "samples/row_kernels.h"
#include "tests/codegen/ptx_test_util.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;

constexpr const char* kHopperOnly[] = {"cp.async.bulk",      "wgmma",    "mbarrier", "fence.proxy.async", "setmaxnreg",
                                       ".reqnctapercluster", "stmatrix", "mapa",     "barrier.cluster"};

absl::StatusOr<DeviceCode> compile_for(const absl::StatusOr<Kernel>& kernel, const std::string& arch, int warps = 4) {
  if (!kernel.ok()) return kernel.status();
  CompileOptions options;
  options.arch = arch;
  options.num_warps = warps;
  return compile(*kernel, options);
}

// `kernel`'s PTX for `arch` has no instruction of Hopper's, and ptxas
// assembles it for `arch`.
void expect_runs_on(const absl::StatusOr<Kernel>& kernel, const std::string& arch, int warps = 4) {
  absl::StatusOr<DeviceCode> code = compile_for(kernel, arch, warps);
  ASSERT_TRUE(code.ok()) << code.status();
  for (const char* hopper : kHopperOnly) EXPECT_EQ(code->binary.find(hopper), std::string::npos) << hopper;
  expect_ptxas_accepts(code->binary, arch);
}

TEST(PtxAmpere, TmaKernelsCopyBoxesWithTheProgramsThreads) {
  for (const char* arch : {"sm_80", "sm_86", "sm_89"}) expect_runs_on(samples::tile_copy_kernel(), arch);
  EXPECT_FALSE(copies_boxes_with_tma("sm_80"));
  EXPECT_FALSE(copies_boxes_with_tma("sm_89"));
  EXPECT_TRUE(copies_boxes_with_tma("sm_90a"));
  EXPECT_TRUE(runs_every_kernel("sm_80"));
}

TEST(PtxAmpere, RowKernelsAndReductionsAssemble) {
  expect_runs_on(samples::softmax_kernel(), "sm_80");
  expect_runs_on(samples::layer_norm_kernel({}, bf16), "sm_80");
  expect_runs_on(samples::row_softmax_kernel(), "sm_86");
}

// The GEMM's pipelined TMA loads become the threads' copies and its wgmma
// mma.sync (mma_sync_test.cc); the Hopper GEMM's tiles fit sm_80's shared
// memory (its copies are not pipelined there), K tiles of 256 do not.
TEST(PtxAmpere, GemmsRunWithoutHoppersInstructions) {
  samples::GemmConfig g = samples::kMatmulAmd;
  expect_runs_on(samples::gemm_kernel(g), "sm_80", samples::kMatmulAmdWarps);
  g.stages = 2;
  expect_runs_on(samples::gemm_kernel(g), "sm_80", samples::kMatmulAmdWarps);
  expect_runs_on(samples::gemm_kernel(samples::kMatmul), "sm_80", samples::kMatmulWarps);
  samples::GemmConfig deep = samples::kMatmul;
  deep.bk = 256;
  absl::StatusOr<DeviceCode> hopper = compile_for(samples::gemm_kernel(deep), "sm_80", samples::kMatmulWarps);
  EXPECT_EQ(hopper.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(hopper.status().message(), HasSubstr("sm_80 allows 166912"));
  absl::StatusOr<DeviceCode> ada = compile_for(samples::gemm_kernel(g), "sm_89", samples::kMatmulAmdWarps);
  ASSERT_TRUE(ada.ok()) << ada.status();
}

TEST(PtxAmpere, ClustersRunAsIndependentPrograms) {
  samples::GemmConfig g = samples::kMatmulAmd;
  g.cluster_m = 2;
  expect_runs_on(samples::gemm_kernel(g), "sm_80", samples::kMatmulAmdWarps);
}

TEST(PtxAmpere, Fp8ConvertsInHardwareFromSm89) {
  const absl::StatusOr<Kernel> quantize = samples::quantize_groups_kernel({}, f32, f8e4m3);
  absl::StatusOr<DeviceCode> ada = compile_for(quantize, "sm_89");
  ASSERT_TRUE(ada.ok()) << ada.status();
  EXPECT_THAT(ada->binary, HasSubstr("cvt.rn.satfinite.e4m3x2.f32"));
  absl::StatusOr<DeviceCode> ampere = compile_for(quantize, "sm_80");
  ASSERT_TRUE(ampere.ok()) << ampere.status();
  EXPECT_EQ(ampere->binary.find("e4m3x2"), std::string::npos);
  expect_runs_on(quantize, "sm_80");
  expect_runs_on(quantize, "sm_89");
}

// Without asynchronous TMA a warp-specialized loop runs as written, on
// every thread of the program.
TEST(PtxAmpere, WarpSpecializedLoopsRunAsWritten) {
  samples::GemmConfig g = {.bm = 64, .bn = 64, .bk = 64, .out = bf16, .stages = 2, .warp_specialize = true};
  expect_runs_on(samples::gemm_kernel(g), "sm_80", 12);
}

TEST(PtxAmpere, ChipsTesselDoesNotCompileForAreNamed) {
  for (const char* arch : {"sm_75", "sm_89a", "sm_100", "sm_x"}) {
    absl::StatusOr<DeviceCode> code = compile_for(samples::tile_copy_kernel(), arch);
    EXPECT_EQ(code.status().code(), absl::StatusCode::kInvalidArgument) << arch;
    EXPECT_THAT(code.status().message(),
                HasSubstr(std::string("nvptx target '") + arch +
                          "': tessel compiles for sm_80 to sm_89 (Ampere and Ada) and sm_90a (Hopper)"));
  }
}

}  // namespace
}  // namespace tessel
