// The HIP device against a fake libamdhip64 (fake_hip.cc) that records the
// calls it receives: opening, memory, the load / get function / launch
// sequence, and the packed kernarg bytes against the code object's
// metadata. No AMD GPU is needed; what a real one computes is not checked here.
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/compiler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/hip/kernarg.h"
#include "samples/kernels.h"
#include "tessel/tessel.h"
#include "tests/hip/fake_hip_env.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;

const auto* const kFake = ::testing::AddGlobalTestEnvironment(new fake_hip::Environment);

using fake_hip::Record;

TEST(HipDevice, OpensTheFakeGpuAndDescribesIt) {
  absl::StatusOr<Device> d = Device::open("hip:0");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->kind(), DeviceKind::kHip);
  EXPECT_EQ(d->arch(), "gfx942");
  EXPECT_EQ(d->num_compute_units(), 304);
  EXPECT_THAT(d->description(), HasSubstr("AMD Instinct MI300X (fake), gfx942, 304 CUs"));
  absl::Status missing = Device::open("hip:2").status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("Device::open('hip:2'): 2 AMD GPUs present"));
}

TEST(HipDevice, CopiesThroughHipMemcpy) {
  absl::StatusOr<Device> d = Device::open("hip:0");
  ASSERT_TRUE(d.ok()) << d.status();
  std::vector<int32_t> in = {1, 2, 3, 4}, out(4);
  absl::StatusOr<Buffer> b = d->allocate(16);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE(d->copy_to_device(*b, in.data(), 16).ok());
  ASSERT_TRUE(d->copy_to_host(out.data(), *b, 16).ok());
  EXPECT_EQ(out, in);
}

TEST(HipDevice, LoadsGetsTheFunctionAndLaunchesWithThePackedKernarg) {
  absl::StatusOr<Device> d = Device::open("hip:0");  // loads the fake
  ASSERT_TRUE(d.ok()) << d.status();
  Record record;
  ASSERT_TRUE(record.loaded());
  Kernel kernel = *samples::tile_copy_kernel();
  CompileOptions options;
  options.num_warps = 4;
  record.reset();
  absl::StatusOr<Function> fn = d->compile(kernel, options);
  ASSERT_TRUE(fn.ok()) << fn.status();
  const int64_t m = 100, n = 296;  // rows of 16-byte multiples
  absl::StatusOr<Buffer> src = d->allocate(m * n * 2), dst = d->allocate(m * n * 2);
  ASSERT_TRUE(src.ok() && dst.ok());
  absl::StatusOr<TensorMap> sm = d->tensor_map(bf16, *src, {m, n}, {samples::kCopyBM, samples::kCopyBN});
  absl::StatusOr<TensorMap> dm = d->tensor_map(bf16, *dst, {m, n}, {samples::kCopyBM, samples::kCopyBN});
  ASSERT_TRUE(sm.ok()) << sm.status();
  ASSERT_TRUE(dm.ok()) << dm.status();
  absl::Status launched =
      fn->launch({.grid = 6, .num_warps = 4}, *sm, *dm, static_cast<int32_t>(m), static_cast<int32_t>(n));
  ASSERT_TRUE(launched.ok()) << launched;
  const std::string log = record.log();
  const size_t load = log.find("hipModuleLoadData"), get = log.find("hipModuleGetFunction tile_copy"),
               launch = log.find("hipModuleLaunchKernel tile_copy grid 6,1,1 block 256,1,1 lds ");
  ASSERT_NE(load, std::string::npos) << log;
  ASSERT_NE(get, std::string::npos) << log;
  ASSERT_NE(launch, std::string::npos) << log;
  EXPECT_LT(load, get);
  EXPECT_LT(get, launch);
  EXPECT_THAT(log, Not(HasSubstr(" params")));  // the arguments travel in `extra`

  // The explicit arguments where the code object's metadata says they are.
  CompileOptions gfx = options;
  gfx.arch = "gfx942";
  CompileArtifacts artifacts;
  ASSERT_TRUE(compile(kernel, gfx, &artifacts).ok());
  auto offset = [&](const std::string& name) {
    std::smatch m;
    std::regex re(".name:\\s+(!str )?" + name + "\\s+.offset:\\s+(\\d+)");
    EXPECT_TRUE(std::regex_search(artifacts.assembly, m, re)) << name;
    return std::stoul(m[2]);
  };
  const std::vector<uint8_t> args = record.kernarg();
  ASSERT_EQ(args.size(), 264u);
  EXPECT_EQ(std::memcmp(args.data() + offset("src"), sm->bytes().data(), 128), 0);
  EXPECT_EQ(std::memcmp(args.data() + offset("dst"), dm->bytes().data(), 128), 0);
  int32_t mv = 0, nv = 0;
  std::memcpy(&mv, args.data() + offset("m"), 4);
  std::memcpy(&nv, args.data() + offset("n"), 4);
  EXPECT_EQ(mv, m);
  EXPECT_EQ(nv, n);
}

TEST(HipDevice, GraphsCaptureLaunchesAndReplayThem) {
  absl::StatusOr<Device> d = Device::open("hip:0");
  ASSERT_TRUE(d.ok()) << d.status();
  Record record;
  absl::StatusOr<Function> fn = d->compile(*samples::vector_add_kernel(), {});
  ASSERT_TRUE(fn.ok()) << fn.status();
  absl::StatusOr<Stream> stream = d->create_stream();
  ASSERT_TRUE(stream.ok()) << stream.status();
  absl::StatusOr<Buffer> b = d->allocate(64);
  ASSERT_TRUE(b.ok());
  EXPECT_THAT(stream->end_capture().status().message(), HasSubstr("the stream is not capturing"));
  record.reset();
  ASSERT_TRUE(stream->begin_capture().ok());
  EXPECT_THAT(stream->begin_capture().message(), HasSubstr("the stream is already capturing"));
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(fn->launch({.grid = 1, .num_warps = 4, .stream = &*stream}, *b, *b, *b, 16).ok());
  }
  absl::StatusOr<Graph> graph = stream->end_capture();
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_TRUE(graph->launch(&*stream).ok());
  const std::string log = record.log();
  const size_t begin = log.find("hipStreamBeginCapture mode 1"), launch = log.find("hipModuleLaunchKernel vector_add"),
               end = log.find("hipStreamEndCapture"), instantiate = log.find("hipGraphInstantiate"),
               replay = log.find("hipGraphLaunch");
  ASSERT_NE(replay, std::string::npos) << log;
  EXPECT_LT(begin, launch);
  EXPECT_LT(launch, end);
  EXPECT_LT(end, instantiate);
  EXPECT_LT(instantiate, replay);
}

// The runtime loads once per process: each case runs in a fresh one.
TEST(HipRuntimeDeathTest, LoadFailuresNameWhatIsMissing) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto open_says = [](const std::string& library, const char* fail, const std::string& want) {
    setenv("TESSEL_HIP_LIBRARY", library.c_str(), 1);
    if (fail != nullptr) setenv("FAKE_HIP_FAIL", fail, 1);
    const absl::Status s = Device::open("hip:0").status();
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    std::exit(s.code() == absl::StatusCode::kUnavailable && s.message().find(want) != std::string::npos ? 0 : 1);
  };
  EXPECT_EXIT(open_says("/nonexistent/libamdhip64.so", nullptr,
                        "Device::open('hip:0'): TESSEL_HIP_LIBRARY names /nonexistent/libamdhip64.so, which does "
                        "not load"),
              ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(open_says("libm.so.6", nullptr, "the HIP runtime libm.so.6 lacks hipInit, hipGetDeviceCount"),
              ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(open_says(fake_hip::path(), "hipInit", "did not initialise: hipInit: hipErrorNoDevice"),
              ::testing::ExitedWithCode(0), "");
}

TEST(HipDevice, CodeForAnotherArchAndStreamsOfAnotherDeviceAreRefused) {
  absl::StatusOr<Device> d = Device::open("hip:0");
  ASSERT_TRUE(d.ok()) << d.status();
  CompileOptions other;
  other.arch = "gfx90a";
  EXPECT_THAT(d->compile(*samples::vector_add_kernel(), other).status().message(),
              HasSubstr("hip:0: compile 'vector_add' for gfx90a: hip:0 runs only code compiled for gfx942"));
  absl::StatusOr<Function> fn = d->compile(*samples::vector_add_kernel(), {});
  ASSERT_TRUE(fn.ok()) << fn.status();
  absl::StatusOr<Device> host = Device::open("host");
  ASSERT_TRUE(host.ok());
  absl::StatusOr<Stream> host_stream = host->create_stream();
  ASSERT_TRUE(host_stream.ok());
  absl::StatusOr<Buffer> b = d->allocate(16);
  ASSERT_TRUE(b.ok());
  EXPECT_THAT(fn->launch({.grid = 1, .num_warps = 4, .stream = &*host_stream}, *b, *b, *b, 4).message(),
              HasSubstr("launch 'vector_add' on hip:0: the stream belongs to another kind of device"));
}

TEST(HipDevice, KernargLayoutFollowsNaturalAlignment) {
  KernelBuilder k("mixed");
  k.arg(i1, "flag");
  k.arg(ptr(f32), "x");
  k.arg(i16, "h");
  k.tensor_map(bf16, {8, 8}, "map");
  k.arg(f64, "d");
  absl::StatusOr<Kernel> kernel = k.build();
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const hip::KernargLayout layout = hip::kernarg_layout(*kernel);
  ASSERT_EQ(layout.slots.size(), 5u);
  EXPECT_EQ(layout.slots[0].offset, 0);
  EXPECT_EQ(layout.slots[0].size, 1);
  EXPECT_EQ(layout.slots[1].offset, 8);
  EXPECT_EQ(layout.slots[2].offset, 16);
  EXPECT_EQ(layout.slots[3].offset, 64);
  EXPECT_EQ(layout.slots[3].size, 128);
  EXPECT_EQ(layout.slots[4].offset, 192);
  EXPECT_EQ(layout.size, 200);
  EXPECT_EQ(layout.align, 64);
}

TEST(HipDevice, FailingCallsAreNamed) {
  absl::StatusOr<Device> d = Device::open("hip:0");
  ASSERT_TRUE(d.ok()) << d.status();
  setenv("FAKE_HIP_FAIL", "hipModuleLoadData", 1);
  KernelBuilder k("distinct_for_load_failure");
  absl::Status load = d->compile(*k.build(), {}).status();
  setenv("FAKE_HIP_FAIL", "hipMalloc", 1);
  absl::Status alloc = d->allocate(64).status();
  unsetenv("FAKE_HIP_FAIL");
  EXPECT_THAT(load.ToString(), HasSubstr("hipModuleLoadData: hipErrorInvalidImage"));
  EXPECT_EQ(alloc.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(alloc.message(), HasSubstr("hip:0: allocating 64 bytes: hipMalloc: hipErrorOutOfMemory"));
  // The wrong number of wavefronts for the compiled kernel.
  absl::StatusOr<Function> fn = d->compile(*samples::vector_add_kernel(), {});
  ASSERT_TRUE(fn.ok()) << fn.status();
  absl::StatusOr<Buffer> b = d->allocate(16);
  ASSERT_TRUE(b.ok());
  absl::Status wrong = fn->launch({.grid = 1, .num_warps = 8}, *b, *b, *b, 4);
  EXPECT_THAT(wrong.message(), HasSubstr("the launch asks for 8 wavefronts (512 threads) but the kernel was compiled "
                                         "for 4 (256 threads)"));
}

// Compute units times the driver's occupancy; a failing or empty answer is
// an error naming the kernel.
TEST(HipDevice, PersistentGridIsComputeUnitsTimesOccupancy) {
  absl::StatusOr<Device> d = Device::open("hip:0");
  ASSERT_TRUE(d.ok()) << d.status();
  absl::StatusOr<Function> add = d->compile(*samples::vector_add_kernel("persistent_add"), {});
  ASSERT_TRUE(add.ok()) << add.status();
  Record record;
  record.reset();
  absl::StatusOr<int> grid = add->persistent_grid();
  ASSERT_TRUE(grid.ok()) << grid.status();
  EXPECT_EQ(*grid, 304 * 8);  // 4 wavefronts a program: 8 programs fill a CU's 32
  EXPECT_THAT(record.log(), HasSubstr("hipModuleOccupancyMaxActiveBlocksPerMultiprocessor persistent_add block 256"));
  setenv("FAKE_HIP_FAIL", "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor", 1);
  absl::Status failed = add->persistent_grid().status();
  unsetenv("FAKE_HIP_FAIL");
  EXPECT_THAT(failed.message(), HasSubstr("occupancy of 'persistent_add' on hip:0: "
                                          "hipModuleOccupancyMaxActiveBlocksPerMultiprocessor: hipErrorInvalidValue"));
  setenv("FAKE_HIP_NO_ROOM", "1", 1);
  absl::Status none = add->persistent_grid().status();
  unsetenv("FAKE_HIP_NO_ROOM");
  EXPECT_EQ(none.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(none.message(), HasSubstr("persistent_grid of 'persistent_add' on hip:0: no program fits on a compute unit"));
}

}  // namespace
}  // namespace tessel
