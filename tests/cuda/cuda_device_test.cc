// The CUDA device against the fake libcuda (fake_cuda.cc): what tessel asks
// of the driver, and what it says when the driver fails in ways a GPU cannot
// be made to (a refused allocation, a JIT error log, serialized wgmma in the
// linker's compile, a function that fits fewer threads). The GPU suites run
// the same code on a real driver.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/device_impl.h"
#include "runtime/disk_cache.h"
#include "samples/row_kernels.h"
#include "tessel/tessel.h"
#include "tests/cuda/fake_cuda_env.h"
#include "tests/runtime/temp_dir.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const auto* const kFake = ::testing::AddGlobalTestEnvironment(new fake_cuda::Environment);

// Sets an environment variable of the fake's for one scope.
class Setting {
 public:
  Setting(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~Setting() { unsetenv(name_); }
  Setting(const Setting&) = delete;
  Setting& operator=(const Setting&) = delete;

 private:
  const char* name_;
};

Device open_cuda() {
  absl::StatusOr<Device> d = Device::open("cuda:0");
  EXPECT_TRUE(d.ok()) << d.status();
  return *std::move(d);
}

Kernel vector_add(const std::string& name) { return *samples::vector_add_kernel(name); }

TEST(FakeCuda, OpensTheGpusTheDriverHasAndDescribesThem) {
  Device d = open_cuda();
  EXPECT_EQ(d.name(), "cuda:0");
  EXPECT_EQ(d.num_compute_units(), 132);
  EXPECT_EQ(d.impl().arch(), "sm_90a");
  EXPECT_EQ(d.impl().details(), "NVIDIA H100 80GB HBM3 (fake), sm_90, 132 SMs, 227 KiB shared memory per program");
  absl::StatusOr<Device> third = Device::open("cuda:2");
  EXPECT_EQ(third.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(third.status().message(), HasSubstr("cuda:2: no such GPU: this machine has 2 NVIDIA GPUs (cuda:0 to "
                                                  "cuda:1)"));
}

TEST(FakeCuda, CopiesGoThroughTheDriverAndWaitForTheDma) {
  Device d = open_cuda();
  fake_cuda::Record record;
  record.reset();
  absl::StatusOr<Buffer> b = d.allocate(1024);
  ASSERT_TRUE(b.ok()) << b.status();
  std::vector<uint8_t> in(1024), out(1024);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 7);
  ASSERT_TRUE(d.impl().copy_to_device(b->data(), in.data(), in.size()).ok());
  ASSERT_TRUE(d.impl().copy_to_host(out.data(), b->data(), out.size()).ok());
  EXPECT_EQ(in, out);
  // A copy from pageable memory may return before it lands: the device waits.
  EXPECT_THAT(record.log(), HasSubstr("cuMemAlloc\ncuMemcpyHtoD\ncuStreamSynchronize\ncuMemcpyDtoH\n"));
}

TEST(FakeCuda, AFailedDriverCallIsNamedWithItsError) {
  Device d = open_cuda();
  Setting fail("FAKE_CUDA_FAIL", "cuMemAlloc");
  absl::StatusOr<Buffer> b = d.allocate(4096);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(b.status().message(),
              HasSubstr("cuda:0: allocating 4096 bytes: cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (reported by the fake "
                        "CUDA driver)"));
}

// The linker's cubin is cached with the driver's version in its key; a later
// compile of the same PTX loads it without linking.
TEST(FakeCuda, KernelsLinkOnceAndLoadTheCachedCubinAfter) {
  Device d = open_cuda();
  fake_cuda::Record record;
  TempDir dir("tessel_fake_cubins_");
  d.impl().set_disk_cache(std::make_shared<DiskCache>(DiskCacheConfig{.dir = dir.str()}));
  record.reset();
  ASSERT_TRUE(d.impl().compile_uncached(vector_add("linked_add"), {}).ok());
  const std::string first = record.log();
  EXPECT_THAT(first, HasSubstr("cuLinkCreate\ncuLinkAddData linked_add\ncuLinkComplete\ncuLinkDestroy\n"
                               "cuModuleLoadDataEx cubin\ncuModuleGetFunction linked_add\ncuFuncLoad linked_add\n"));
  EXPECT_THAT(first, HasSubstr("cuModuleGetGlobal tessel_error"));
  record.reset();
  ASSERT_TRUE(d.impl().compile_uncached(vector_add("linked_add"), {}).ok());
  EXPECT_THAT(record.log(), Not(HasSubstr("cuLink")));
  EXPECT_THAT(record.log(), HasSubstr("cuModuleLoadDataEx cubin"));
  d.impl().set_disk_cache(nullptr);
}

// Where ptxas says it serialized wgmma in the linker's relocatable code, the
// kernel loads as a whole program, and the cache remembers that it does.
TEST(FakeCuda, SerializedWgmmaInTheLinkLoadsAWholeProgram) {
  Device d = open_cuda();
  fake_cuda::Record record;
  TempDir dir("tessel_fake_cubins_");
  d.impl().set_disk_cache(std::make_shared<DiskCache>(DiskCacheConfig{.dir = dir.str()}));
  {
    Setting serialized("FAKE_CUDA_SERIALIZED", "1");
    record.reset();
    ASSERT_TRUE(d.impl().compile_uncached(vector_add("serialized_add"), {}).ok());
    EXPECT_THAT(record.log(), HasSubstr("cuLinkComplete\ncuLinkDestroy\ncuModuleLoadDataEx ptx\n"));
  }
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "whole-programs"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "cubins"));
  record.reset();
  ASSERT_TRUE(d.impl().compile_uncached(vector_add("serialized_add"), {}).ok());
  EXPECT_THAT(record.log(), Not(HasSubstr("cuLink")));
  EXPECT_THAT(record.log(), HasSubstr("cuModuleLoadDataEx ptx"));
  d.impl().set_disk_cache(nullptr);
}

TEST(FakeCuda, APtxTheDriverRefusesCarriesItsLog) {
  Device d = open_cuda();
  Setting error("FAKE_CUDA_JIT_ERROR", "ptxas application ptx input, line 12; error   : Unknown symbol 'x'");
  absl::StatusOr<Function> fn = d.compile(vector_add("refused_add"));
  EXPECT_EQ(fn.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(fn.status().message(),
              HasSubstr("cuda:0: compile 'refused_add' for sm_90a: cuLinkAddData: CUDA_ERROR_INVALID_PTX (reported "
                        "by the fake CUDA driver): ptxas application ptx input, line 12; error   : Unknown symbol "
                        "'x'"));
}

TEST(FakeCuda, AFunctionThatFitsFewerThreadsIsRefusedAtCompile) {
  Device d = open_cuda();
  Setting fewer("FAKE_CUDA_MAX_THREADS", "64");
  absl::StatusOr<Function> fn = d.compile(vector_add("register_hungry_add"));
  EXPECT_EQ(fn.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(fn.status().message(), HasSubstr("compile 'register_hungry_add' for sm_90a: the kernel uses too many "
                                               "registers for 128 threads per program (at most 64 fit)"));
}

// Arguments reach cuLaunchKernel as the kernel's parameters declare them:
// a pointer, a scalar, and a tensor map's 128 bytes by value.
TEST(FakeCuda, LaunchesPassTheArgumentsAndTensorMapsByValue) {
  Device d = open_cuda();
  fake_cuda::Record record;
  KernelBuilder k("by_value");
  Value src = k.tensor_map(bf16, {64, 64}, "src");
  Value dst = k.tensor_map(bf16, {64, 64}, "dst");
  Value x = k.arg(ptr(f32), "x");
  Value n = k.arg(i32, "n");
  tma_store(dst, {0, 0}, tma_load(src, {0, 0}));
  Value offs = k.arange(0, 64);
  store(x + offs, load(x + offs) + 1.0f, offs < n);
  absl::StatusOr<Kernel> kernel = k.build();
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  absl::StatusOr<Function> fn = d.compile(*kernel);
  ASSERT_TRUE(fn.ok()) << fn.status();
  absl::StatusOr<Buffer> a = d.allocate(256 * 256 * 2), b = d.allocate(256 * 256 * 2), c = d.allocate(64 * 4);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  absl::StatusOr<TensorMap> from = d.tensor_map(bf16, *a, {256, 256}, {64, 64});
  absl::StatusOr<TensorMap> to = d.tensor_map(bf16, *b, {128, 256}, {64, 64});
  ASSERT_TRUE(from.ok() && to.ok());
  EXPECT_THAT(record.log(), HasSubstr("cuTensorMapEncodeTiled dtype 9 rank 2 dims 256,256 box 64,64 swizzle 0"));
  EXPECT_THAT(record.log(), HasSubstr("cuTensorMapEncodeTiled dtype 9 rank 2 dims 256,128 box 64,64 swizzle 0"));
  record.reset();
  ASSERT_TRUE(fn->launch({.grid = 3, .num_warps = 4}, *from, *to, *c, int32_t{40}).ok());
  EXPECT_THAT(record.log(), HasSubstr("cuLaunchKernel by_value grid 3,1,1 block 128,1,1"));
  std::vector<uint8_t> params = record.params();
  ASSERT_EQ(params.size(), 128u + 128 + 8 + 4);
  EXPECT_EQ(std::memcmp(params.data(), from->bytes().data(), 128), 0);
  EXPECT_EQ(std::memcmp(params.data() + 128, to->bytes().data(), 128), 0);
  void* pointer = c->data();
  EXPECT_EQ(std::memcmp(params.data() + 256, &pointer, 8), 0);
  int32_t passed = 0;
  std::memcpy(&passed, params.data() + 264, 4);
  EXPECT_EQ(passed, 40);
}

TEST(FakeCuda, AMapTheDriverRefusesAfterTesselsChecksIsNamed) {
  Device d = open_cuda();
  absl::StatusOr<Buffer> a = d.allocate(256 * 256 * 2);
  ASSERT_TRUE(a.ok());
  Setting fail("FAKE_CUDA_FAIL", "cuTensorMapEncodeTiled");
  absl::StatusOr<TensorMap> map = d.tensor_map(bf16, *a, {256, 256}, {64, 32});
  EXPECT_EQ(map.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(map.status().message()),
              HasSubstr("cuda:0: tensor map of bf16 [256,256] with box [64,32] passed tessel's checks but the driver "
                        "refused it: cuTensorMapEncodeTiled: CUDA_ERROR_INVALID_VALUE"));
}

// A launch on a capturing stream does not run; the graph runs it each time
// it is launched.
TEST(FakeCuda, CapturedLaunchesRunWhenTheGraphRuns) {
  Device d = open_cuda();
  fake_cuda::Record record;
  absl::StatusOr<Function> fn = d.compile(vector_add("captured_add"));
  ASSERT_TRUE(fn.ok()) << fn.status();
  absl::StatusOr<Buffer> x = d.allocate(512 * 4), y = d.allocate(512 * 4), z = d.allocate(512 * 4);
  absl::StatusOr<Stream> stream = d.create_stream();
  ASSERT_TRUE(x.ok() && y.ok() && z.ok() && stream.ok());
  record.reset();
  ASSERT_TRUE(stream->begin_capture().ok());
  ASSERT_TRUE(fn->launch({.grid = 4, .num_warps = 4, .stream = &*stream}, *x, *y, *z, int32_t{512}).ok());
  absl::StatusOr<Graph> graph = stream->end_capture();
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_TRUE(stream->synchronize().ok());
  EXPECT_THAT(record.log(), HasSubstr("cuStreamEndCapture 1 ops"));
  EXPECT_THAT(record.log(), Not(HasSubstr("ran captured_add")));
  ASSERT_TRUE(graph->launch(&*stream).ok());
  ASSERT_TRUE(graph->launch(&*stream).ok());
  ASSERT_TRUE(stream->synchronize().ok());
  const std::string log = record.log();
  size_t runs = 0;
  for (size_t at = log.find("ran captured_add"); at != std::string::npos; at = log.find("ran captured_add", at + 1)) {
    ++runs;
  }
  EXPECT_EQ(runs, 2u);
}

// Before sm_90 the program's threads copy TMA boxes: the device makes
// tessel's host form of a map without the driver, and its kernels take it.
TEST(FakeCuda, AnAmpereGpuTakesMapsInTesselsHostForm) {
  absl::StatusOr<Device> d;
  {
    Setting ampere("FAKE_CUDA_CC", "80");
    d = Device::open("cuda:1");
  }
  ASSERT_TRUE(d.ok()) << d.status();
  fake_cuda::Record record;
  EXPECT_EQ(d->impl().arch(), "sm_80");
  EXPECT_THAT(d->impl().details(), HasSubstr("sm_80, 132 SMs, 163 KiB shared memory per program"));
  absl::StatusOr<Buffer> a = d->allocate(128 * 256 * 2), b = d->allocate(128 * 256 * 2);
  ASSERT_TRUE(a.ok() && b.ok());
  record.reset();
  absl::StatusOr<TensorMap> from = d->tensor_map(bf16, *a, {128, 256}, {samples::kCopyBM, samples::kCopyBN});
  absl::StatusOr<TensorMap> to = d->tensor_map(bf16, *b, {128, 256}, {samples::kCopyBM, samples::kCopyBN});
  ASSERT_TRUE(from.ok() && to.ok());
  EXPECT_EQ(from->encoding(), TensorMapEncoding::kHost);
  EXPECT_THAT(record.log(), Not(HasSubstr("cuTensorMapEncodeTiled")));
  absl::StatusOr<TensorMap> too_big = d->tensor_map(bf16, *a, {128, 256}, {64, 512});
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_big.status().message()), HasSubstr("cuda:1: tensor map"));
  EXPECT_THAT(std::string(too_big.status().message()), HasSubstr("box[1] = 512"));
  absl::StatusOr<Function> copy =
      d->compile(*samples::tile_copy_kernel(samples::kCopyBM, samples::kCopyBN, "ampere_copy"));
  ASSERT_TRUE(copy.ok()) << copy.status();
  ASSERT_TRUE(copy->launch({.grid = 4}, *from, *to, 128, 256).ok());
  std::vector<uint8_t> params = record.params();
  ASSERT_GE(params.size(), 256u);
  EXPECT_EQ(std::memcmp(params.data(), from->bytes().data(), 128), 0);

  // Code compiled for sm_80 on a Hopper GPU takes the host form too, and
  // says so of the driver's.
  Device hopper = open_cuda();
  absl::StatusOr<Buffer> c = hopper.allocate(128 * 256 * 2);
  ASSERT_TRUE(c.ok());
  CompileOptions sm80;
  sm80.arch = "sm_80";
  absl::StatusOr<Function> older =
      hopper.compile(*samples::tile_copy_kernel(samples::kCopyBM, samples::kCopyBN, "older_copy"), sm80);
  ASSERT_TRUE(older.ok()) << older.status();
  absl::StatusOr<TensorMap> driver = hopper.tensor_map(bf16, *c, {128, 256}, {samples::kCopyBM, samples::kCopyBN});
  ASSERT_TRUE(driver.ok());
  absl::Status refused = older->launch({.grid = 4}, *driver, *driver, 128, 256);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("the tensor map was encoded for another kind of device"));
  absl::StatusOr<TensorMap> host = TensorMap::tiled(bf16, c->data(), {128, 256}, {samples::kCopyBM, samples::kCopyBN});
  ASSERT_TRUE(host.ok());
  EXPECT_TRUE(older->launch({.grid = 4}, *host, *host, 128, 256).ok());
}

TEST(FakeCuda, TimeIsBetweenEventsAroundTheWork) {
  Device d = open_cuda();
  fake_cuda::Record record;
  record.reset();
  absl::StatusOr<double> seconds = d.impl().time([] { return absl::OkStatus(); }, nullptr);
  ASSERT_TRUE(seconds.ok()) << seconds.status();
  EXPECT_GE(*seconds, 0.0);
  EXPECT_THAT(record.log(), HasSubstr("cuEventRecord\ncuEventRecord\ncuEventSynchronize\ncuEventElapsedTime\n"));
}

}  // namespace
}  // namespace tessel
