// The GPU suite: runs on a machine with an NVIDIA driver, skips elsewhere.
#include <dlfcn.h>

#include "gtest/gtest.h"

namespace {

using CuInit = int (*)(unsigned);
using CuDeviceGetCount = int (*)(int*);
using CuDeviceGet = int (*)(int*, int);
using CuDeviceGetAttribute = int (*)(int*, int, int);

constexpr int kComputeCapabilityMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR

void* open_driver() { return dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL); }

TEST(GpuDriver, LoadsAtRunTimeAndSeesAHopperGpu) {
  void* lib = open_driver();
  if (lib == nullptr) GTEST_SKIP() << "no NVIDIA driver (libcuda.so.1) on this machine";
  auto init = reinterpret_cast<CuInit>(dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<CuDeviceGetCount>(dlsym(lib, "cuDeviceGetCount"));
  auto get = reinterpret_cast<CuDeviceGet>(dlsym(lib, "cuDeviceGet"));
  auto attr = reinterpret_cast<CuDeviceGetAttribute>(dlsym(lib, "cuDeviceGetAttribute"));
  ASSERT_TRUE(init && count && get && attr);
  ASSERT_EQ(init(0), 0);
  int n = 0;
  ASSERT_EQ(count(&n), 0);
  ASSERT_GE(n, 1);
  for (int i = 0; i < n; ++i) {
    int dev = -1, major = 0;
    ASSERT_EQ(get(&dev, i), 0);
    ASSERT_EQ(attr(&major, kComputeCapabilityMajor, dev), 0);
    EXPECT_GE(major, 9) << "device " << i << " is older than Hopper";
  }
}

}  // namespace
