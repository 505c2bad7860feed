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
  absl::StatusOr<DeviceCode> object = compile(kernel, {}, &artifacts);
  ASSERT_TRUE(object.ok()) << object.status();
  EXPECT_EQ(object->arch, "host");
  EXPECT_EQ(object->format, CodeFormat::kHostObject);
  EXPECT_EQ(object->binary.substr(0, 4), "\x7f" "ELF");
  EXPECT_THAT(artifacts.llvm, HasSubstr("define void @tessel_scale(ptr noalias"));
  EXPECT_THAT(artifacts.llvm, HasSubstr("fmul <"));  // the element loop was vectorized
  EXPECT_THAT(artifacts.assembly, HasSubstr("tessel_scale:"));
  absl::StatusOr<std::unique_ptr<HostCode>> code = load_host_code(*object, {});
  ASSERT_TRUE(code.ok()) << code.status();

  std::mt19937 gen(std::random_device{}());
  std::vector<float> data(128), want(128);
  for (size_t i = 0; i < data.size(); ++i) want[i] = 3.0f * (data[i] = std::uniform_real_distribution<float>()(gen));
  float* base = data.data();
  void* args[] = {&base};
  for (int pid = 0; pid < 2; ++pid) {
    HostProgram p{{pid, 0, 0}, {2, 1, 1}, nullptr, nullptr};
    (*code)->entry()(args, &p);
  }
  EXPECT_EQ(data, want);
}

// A float sum along a row may add in any order on the host, as the GPUs'
// trees do: the vectorizer keeps a partial sum per lane. A sum along the
// columns loops over the rows outermost and adds each row to the sums of
// all its columns at once: vector loads of the rows, not gathers down the
// columns.
TEST(HostCompile, SumsAlongEitherAxisVectorize) {
  for (int axis : {0, 1}) {
    SCOPED_TRACE(axis);
    // Long rows summed along them, long columns summed down them.
    const int rows = axis == 1 ? 64 : 1024, cols = axis == 1 ? 1024 : 64;
    KernelBuilder k("sums");
    Value x = k.arg(ptr(f32), "x"), out = k.arg(ptr(f32), "out");
    Value r = k.arange(0, rows), c = k.arange(0, cols);
    store(out + (axis == 1 ? r : c), sum(load(x + expand_dims(r, 1) * cols + expand_dims(c, 0)), axis));
    CompileArtifacts artifacts;
    absl::StatusOr<DeviceCode> object = compile(*k.build(), {}, &artifacts);
    ASSERT_TRUE(object.ok()) << object.status();
    auto has = [&](const char* text) { return artifacts.llvm.find(text) != std::string::npos; };
    EXPECT_TRUE(has("fadd reassoc <"));
    EXPECT_TRUE(has("load <"));
    EXPECT_FALSE(has("gather"));
    if (axis == 1) {
      EXPECT_TRUE(has("llvm.vector.reduce.fadd"));
    }
  }
}

// The object is plain data: loaded again (as a later process would load it
// from a cache), it runs the same.
TEST(HostCompile, ObjectLoadsTwice) {
  KernelBuilder k("add_one");
  Value x = k.arg(ptr(i32), "x");
  Value offs = k.arange(0, 16);  // [16] i32
  store(x + offs, load(x + offs) + 1);
  absl::StatusOr<DeviceCode> object = compile(*k.build(), {});
  ASSERT_TRUE(object.ok()) << object.status();
  std::vector<int32_t> data(16, 5);
  int32_t* base = data.data();
  void* args[] = {&base};
  for (int copy = 0; copy < 2; ++copy) {
    absl::StatusOr<std::unique_ptr<HostCode>> code = load_host_code(*object, {});
    ASSERT_TRUE(code.ok()) << code.status();
    HostProgram p{{0, 0, 0}, {1, 1, 1}, nullptr, nullptr};
    (*code)->entry()(args, &p);
  }
  EXPECT_EQ(data, std::vector<int32_t>(16, 7));
}

TEST(HostCompile, ArchErrorsNameWhatExists) {
  KernelBuilder k("empty");
  Kernel kernel = *k.build();
  CompileOptions options;
  options.arch = "tpu_v5";
  EXPECT_THAT(compile(kernel, options).status().message(),
              HasSubstr("arch 'tpu_v5' is unknown; tessel compiles for host, sm_90a (NVIDIA Hopper), sm_80 to "
                        "sm_89 (NVIDIA Ampere and Ada) or gfx942 (AMD Instinct MI300)"));
}

TEST(HostCompile, LoadingGpuCodeOnTheHostIsRefused) {
  KernelBuilder k("empty");
  CompileOptions options;
  options.arch = "sm_90a";
  absl::StatusOr<DeviceCode> ptx = compile(*k.build(), options);
  ASSERT_TRUE(ptx.ok()) << ptx.status();
  EXPECT_THAT(load_host_code(*ptx, {}).status().message(),
              HasSubstr("is code for sm_90a, not a host object"));
}

}  // namespace
}  // namespace tessel
