// device_print and device_assert in PTX: the kernel's debug buffer is a
// device global the runtime finds by name, records are reserved with one
// atomic add each, and an assert compiled in claims the header's record
// with a compare-and-swap.
#include "base/debug_abi.h"
#include "codegen/compiler.h"
#include "dsl/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/codegen/ptx_test_util.h"
#include "tests/debug_cases.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using debug_cases::printing_and_asserting;

TEST(PtxDebug, RecordsGoToTheDebugGlobalAndAssertsClaimItsHeader) {
  CompileOptions options;
  options.debug = true;
  absl::StatusOr<DeviceCode> code = compile_ptx(printing_and_asserting(), options);
  ASSERT_TRUE(code.ok()) << code.status();
  const std::string& ptx = code->binary;
  EXPECT_THAT(ptx, HasSubstr(absl::StrCat(".visible .global .align 16 .b8 ", kDebugSymbol, "[", kDebugBytes, "]")));
  EXPECT_GE(count(ptx, "atom.add.u64") + count(ptx, "atom.global.add.u64"), 1);
  EXPECT_GE(count(ptx, "atom.cas.b64") + count(ptx, "atom.global.cas.b64"), 1);
  EXPECT_TRUE(ptxas_accepts_if_present(ptx));
}

TEST(PtxDebug, WithoutDebugTheAssertIsGoneAndWithoutPrintsSoIsTheBuffer) {
  KernelBuilder k("asserts_only");
  Value x = k.arg(ptr(f32), "x");
  Value offs = k.arange(0, 128);
  device_assert(load(x + offs) >= 0.0f, "never checked");
  store(x + offs, 1.0f);
  Kernel kernel = *k.build();
  absl::StatusOr<DeviceCode> code = compile_ptx(kernel, {});
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_THAT(code->binary, Not(HasSubstr(kDebugSymbol)));
  EXPECT_FALSE(writes_debug_buffer(kernel, false));
  EXPECT_TRUE(writes_debug_buffer(kernel, true));
  EXPECT_TRUE(writes_debug_buffer(printing_and_asserting(), false));
}

}  // namespace
}  // namespace tessel
