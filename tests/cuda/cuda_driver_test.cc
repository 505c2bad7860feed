// Loading the driver: which library, and what tessel says where it lacks an
// entry, fails to initialise or is not a CUDA 12 driver. The driver loads
// once a process, so each case loads it in a process of its own (a death
// test's child, started afresh).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tessel/tessel.h"
#include "tests/cuda/fake_cuda_env.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;

const auto* const kFake = ::testing::AddGlobalTestEnvironment(new fake_cuda::Environment);

// Opens cuda:0 in a fresh process with `name`=`value` set and expects the
// open to fail with a message holding `message`.
void expect_open_fails(const char* name, const char* value, const std::string& message) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv(name, value, 1);
        absl::StatusOr<Device> d = Device::open("cuda:0");
        std::fprintf(stderr, "%s\n", d.status().ToString().c_str());
        std::_Exit(!d.ok() && d.status().code() == absl::StatusCode::kUnavailable ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), HasSubstr(message));
}

TEST(CudaDriver, ADriverWithoutARequiredEntryIsNamedForIt) {
  expect_open_fails("FAKE_CUDA_MISSING", "cuStreamBatchMemOp",
                    "cuda:0: the NVIDIA driver lacks cuStreamBatchMemOp (CUDA 12.0); tessel needs a driver for "
                    "CUDA 12.0 or newer");
}

TEST(CudaDriver, ADriverThatDoesNotInitialiseSaysWhy) {
  expect_open_fails("FAKE_CUDA_FAIL", "cuInit",
                    "cuda:0: the NVIDIA driver did not initialise: cuInit: CUDA_ERROR_NO_DEVICE");
}

TEST(CudaDriver, ALibraryWithoutCuGetProcAddressIsNotACuda12Driver) {
  expect_open_fails("TESSEL_CUDA_LIBRARY", "libm.so.6",
                    "the NVIDIA driver is older than CUDA 12.0 (libm.so.6 has no cuGetProcAddress_v2)");
}

TEST(CudaDriver, ALibraryTheEnvironmentNamesMustLoad) {
  expect_open_fails("TESSEL_CUDA_LIBRARY", "/nonexistent/libcuda.so.1",
                    "cuda:0: TESSEL_CUDA_LIBRARY names /nonexistent/libcuda.so.1, which does not load");
}

// cuFuncLoad (CUDA 12.4) is optional: without it a function loads at its
// first attribute query.
TEST(CudaDriver, ADriverBeforeCuda12_4LoadsFunctionsWithoutCuFuncLoad) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("FAKE_CUDA_MISSING", "cuFuncLoad", 1);
        absl::StatusOr<Device> d = Device::open("cuda:0");
        if (!d.ok()) std::_Exit(2);
        fake_cuda::Record record;
        record.reset();
        KernelBuilder k("loaded_late");
        Value x = k.arg(ptr(f32), "x");
        Value offs = k.arange(0, 128);
        store(x + offs, load(x + offs) + 1.0f);
        absl::StatusOr<Function> fn = d->compile(*k.build());
        if (!fn.ok()) std::_Exit(3);
        const std::string log = record.log();
        std::fprintf(stderr, "%s", log.c_str());
        std::_Exit(
            log.find("cuFuncLoad") == std::string::npos && log.find("cuFuncGetAttribute") != std::string::npos ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), HasSubstr("cuModuleGetFunction loaded_late"));
}

}  // namespace
}  // namespace tessel
