// The cuda suite's stand-in driver (fake_cuda.cc): where it is, the test
// environment that points tessel at it before the driver loads, and its
// record.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/fake_record.h"

namespace tessel::fake_cuda {

inline std::string path() { return fake::library(TESSEL_FAKE_CUDA, "libfake_cuda.so"); }

// Points tessel at the fake, and its kernel cache at a directory of the
// process's own: the fake's "cubins" must not meet a GPU's.
class Environment : public ::testing::Environment {
 public:
  void SetUp() override {
    setenv("TESSEL_CUDA_LIBRARY", path().c_str(), 1);
    std::string dir = (std::filesystem::temp_directory_path() / "tessel_fake_cuda_XXXXXX").string();
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
    cache_ = dir;
    setenv("TESSEL_CACHE_DIR", cache_.c_str(), 1);
  }
  void TearDown() override { std::filesystem::remove_all(cache_); }

 private:
  std::string cache_;
};

// The fake's record, through the copy of it tessel loaded (a CUDA device
// must have been opened first).
struct Record : fake::Record {
  Record() : fake::Record(path(), "fake_cuda_") {}
  // The bytes of the last launch's parameters, one after another.
  std::vector<uint8_t> params() const { return bytes("params"); }
  // The memory cuModuleGetGlobal last handed out for `name`.
  void* global(const char* name) const { return fn<void* (*)(const char*)>("global")(name); }
};

}  // namespace tessel::fake_cuda
