// The PTX of paged decoding attention (samples/decode.h): its keys and
// values, whose rows come through the block table, take copy rings
// (cp.async, stages ahead) rather than registers; both products run on
// mma.sync, Hopper's too (16 query rows are too few for wgmma); the
// queries are staged for the products once, before the key loop, and the
// loop's steps meet at six barriers (the copies, the row maximum's two, P's
// staging's two, the step's end), none right after another; ptxas takes it
// with no spill, for Hopper and Ampere.
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "samples/decode.h"
#include "tests/codegen/ptx_test_util.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;

TEST(PtxDecode, PagedKeysAndValuesTakeCopyRingsAndMmaSync) {
  for (const std::string arch : {"sm_90a", "sm_80"}) {
    for (const samples::DecodeConfig& c :
         {samples::DecodeConfig{}, samples::DecodeConfig{.d = 64, .group = 8, .page = 64, .bn = 32}}) {
      SCOPED_TRACE(absl::StrCat(arch, ", d ", c.d, ", group ", c.group));
      absl::StatusOr<Kernel> kernel = samples::decode_kernel(c);
      ASSERT_TRUE(kernel.ok()) << kernel.status();
      CompileOptions o;
      o.arch = arch;
      o.num_warps = c.warps;
      o.specialization.multiple_of_16 = ~uint64_t{0};  // aligned caches, as a launch finds them
      absl::StatusOr<DeviceCode> code = compile_ptx(*kernel, o);
      ASSERT_TRUE(code.ok()) << code.status();
      const std::string& ptx = code->binary;
      // Every 16-byte piece of a key's and a value's row in the ring: the
      // first stages before the loop and one more each iteration.
      EXPECT_GE(count(ptx, "cp.async.cg.shared.global"), 2 * (c.bn * c.d * 2 / 16) / (32 * c.warps));
      EXPECT_THAT(ptx, HasSubstr("cp.async.wait_group"));
      EXPECT_THAT(ptx, HasSubstr("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"));
      EXPECT_EQ(ptx.find("wgmma"), std::string::npos);
      std::string keys;
      for (const std::string& loop : loop_bodies(ptx)) {
        if (loop.find("mma.sync") != std::string::npos) keys = loop;
      }
      EXPECT_LE(count(keys, "bar.sync"), 6);
      EXPECT_EQ(count_matches(ptx, R"(bar\.sync\s+0;\s*bar\.sync\s+0;)"), 0);
      expect_ptxas_clean(ptx, arch);
    }
  }
}

}  // namespace
}  // namespace tessel
