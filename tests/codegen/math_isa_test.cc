// The math functions' two forms in the GPUs' code: the accurate form is
// arithmetic only (no approximation instruction, no call), the fast form is
// the hardware unit's instruction; ptxas accepts both.
#include <string>
#include <vector>

#include "codegen/compiler.h"
#include "dsl/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/codegen/ptx_test_util.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using MathFn = Value (*)(const Operand&, MathForm, Loc);

// y[i] = f(x[i]) over f32.
Kernel math_kernel(MathFn f, MathForm form) {
  KernelBuilder k("math_form");
  Value x = k.arg(ptr(f32), "x"), y = k.arg(ptr(f32), "y");
  Value offs = k.program_id() * 128 + k.arange(0, 128);
  store(y + offs, f(load(x + offs), form, Loc::current()));
  return *k.build();
}

struct Form {
  const char* name;
  MathFn fn;
  const char* sfu;  // NVIDIA's fast instruction
  const char* amd;  // AMD's, or "" where the accurate form serves
};
const Form kForms[] = {
    {"exp", exp, "ex2.approx.ftz.f32", "v_exp_f32"}, {"exp2", exp2, "ex2.approx.ftz.f32", "v_exp_f32"},
    {"log", log, "lg2.approx.ftz.f32", "v_log_f32"}, {"log2", log2, "lg2.approx.ftz.f32", "v_log_f32"},
    {"sin", sin, "sin.approx.ftz.f32", "v_sin_f32"}, {"cos", cos, "cos.approx.ftz.f32", "v_cos_f32"},
    {"tanh", tanh, "tanh.approx.f32", ""},
};

TEST(MathIsa, NvptxAccurateFormsAreArithmeticAndFastFormsUseTheSfu) {
  for (const Form& f : kForms) {
    SCOPED_TRACE(f.name);
    absl::StatusOr<DeviceCode> accurate = compile_ptx(math_kernel(f.fn, MathForm::kAccurate), {});
    absl::StatusOr<DeviceCode> fast = compile_ptx(math_kernel(f.fn, MathForm::kFast), {});
    ASSERT_TRUE(accurate.ok()) << accurate.status();
    ASSERT_TRUE(fast.ok()) << fast.status();
    EXPECT_THAT(accurate->binary, Not(HasSubstr(".approx")));
    EXPECT_THAT(accurate->binary, Not(HasSubstr("call")));
    EXPECT_THAT(accurate->binary, HasSubstr("fma.rn.f32"));
    EXPECT_THAT(fast->binary, HasSubstr(f.sfu));
    if (have_ptxas()) {
      EXPECT_EQ(ptxas(accurate->binary), 0);
      EXPECT_EQ(ptxas(fast->binary), 0);
    }
  }
}

TEST(MathIsa, AmdgpuFastFormsUseTheTranscendentalUnit) {
  for (const Form& f : kForms) {
    SCOPED_TRACE(f.name);
    CompileOptions options;
    options.arch = "gfx942";
    CompileArtifacts accurate_asm, fast_asm;
    ASSERT_TRUE(compile(math_kernel(f.fn, MathForm::kAccurate), options, &accurate_asm).ok());
    ASSERT_TRUE(compile(math_kernel(f.fn, MathForm::kFast), options, &fast_asm).ok());
    EXPECT_THAT(accurate_asm.assembly, Not(HasSubstr("s_swappc")));
    for (const char* unit : {"v_exp_f32", "v_log_f32", "v_sin_f32", "v_cos_f32"}) {
      EXPECT_THAT(accurate_asm.assembly, Not(HasSubstr(unit)));
    }
    if (*f.amd != '\0') {
      EXPECT_THAT(fast_asm.assembly, HasSubstr(f.amd));
    }
  }
}

// y[i] = x[i] / d[i] over f32 in `form`.
Kernel divide_kernel(MathForm form) {
  KernelBuilder k("divide");
  Value x = k.arg(ptr(f32), "x"), d = k.arg(ptr(f32), "d"), y = k.arg(ptr(f32), "y");
  Value offs = k.program_id() * 128 + k.arange(0, 128);
  store(y + offs, div(load(x + offs), load(d + offs), form));
  return *k.build();
}

TEST(MathIsa, FastDivisionIsTheGpusApproximateQuotient) {
  absl::StatusOr<DeviceCode> accurate = compile_ptx(divide_kernel(MathForm::kAccurate), {});
  absl::StatusOr<DeviceCode> fast = compile_ptx(divide_kernel(MathForm::kFast), {});
  ASSERT_TRUE(accurate.ok()) << accurate.status();
  ASSERT_TRUE(fast.ok()) << fast.status();
  EXPECT_THAT(accurate->binary, HasSubstr("div.rn.f32"));
  EXPECT_THAT(fast->binary, HasSubstr("div.full.f32"));
  EXPECT_THAT(fast->binary, Not(HasSubstr("div.rn.f32")));
  CompileOptions options;
  options.arch = "gfx942";
  CompileArtifacts amd_accurate, amd_fast;
  ASSERT_TRUE(compile(divide_kernel(MathForm::kAccurate), options, &amd_accurate).ok());
  ASSERT_TRUE(compile(divide_kernel(MathForm::kFast), options, &amd_fast).ok());
  EXPECT_THAT(amd_accurate.assembly, HasSubstr("v_div_fixup_f32"));
  EXPECT_THAT(amd_fast.assembly, HasSubstr("v_rcp_f32"));
  EXPECT_THAT(amd_fast.assembly, Not(HasSubstr("v_div_fixup_f32")));
  if (have_ptxas()) {
    EXPECT_EQ(ptxas(accurate->binary), 0);
  }
  expect_ptxas_accepts(fast->binary);
}

// The other functions and pow have one form; each compiles for both GPUs
// without calls.
TEST(MathIsa, EveryFunctionCompilesForBothGpus) {
  KernelBuilder k("all_math");
  Value x = k.arg(ptr(f32), "x"), y = k.arg(ptr(f32), "y");
  Value offs = k.program_id() * 128 + k.arange(0, 128);
  Value v = load(x + offs);
  Value r = sigmoid(v) + erf(v) + sinh(v) + cosh(v) + pow(v, v * 0.5f) + ceil(v) + round(v) + clamp(v, 0.0f, 1.0f);
  store(y + offs, r);
  absl::StatusOr<Kernel> kernel = k.build();
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  absl::StatusOr<DeviceCode> ptx = compile_ptx(*kernel, {});
  ASSERT_TRUE(ptx.ok()) << ptx.status();
  EXPECT_THAT(ptx->binary, Not(HasSubstr("call")));
  CompileOptions options;
  options.arch = "gfx942";
  CompileArtifacts amd;
  ASSERT_TRUE(compile(*kernel, options, &amd).ok());
  EXPECT_THAT(amd.assembly, Not(HasSubstr("s_swappc")));
  expect_ptxas_accepts(ptx->binary);
}

}  // namespace
}  // namespace tessel
