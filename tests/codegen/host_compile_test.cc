#include <random>

#include "codegen/compiler.h"
#include "dsl/ops.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;

TEST(HostCompile, EmitsVectorizedLlvmAndRuns) {
  KernelBuilder k("scale");
  Value x = k.arg(ptr(f32), "x");
  Value offs = k.program_id() * 64 + k.arange(0, 64);  // [64] i32
  store(x + offs, load(x + offs) * 3.0);
  Kernel kernel = *k.build();
  CompileArtifacts artifacts;
  absl::StatusOr<std::unique_ptr<HostCode>> code = compile_host(kernel, {}, {}, &artifacts);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_THAT(artifacts.llvm, HasSubstr("define void @tessel_scale(ptr noalias"));
  EXPECT_THAT(artifacts.llvm, HasSubstr("fmul <"));  // the element loop was vectorized

  std::mt19937 gen(std::random_device{}());
  std::vector<float> data(128), want(128);
  for (size_t i = 0; i < data.size(); ++i) want[i] = 3.0f * (data[i] = std::uniform_real_distribution<float>()(gen));
  float* base = data.data();
  void* args[] = {&base};
  for (int pid = 0; pid < 2; ++pid) {
    HostProgram p{{pid, 0, 0}, {2, 1, 1}, nullptr};
    (*code)->entry()(args, &p);
  }
  EXPECT_EQ(data, want);
}

}  // namespace
}  // namespace tessel
