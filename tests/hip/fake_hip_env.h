// The hip suites' fakes, libamdhip64 (fake_hip.cc) and libhsakmt
// (fake_hsakmt.cc): where they are, and the test environment that points
// tessel at them before any HIP device opens.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace tessel::fake_hip {

// Where the build left `built`, or beside the installed tests (lib/`name`).
inline std::string library(const char* built, const char* name) {
  if (std::filesystem::exists(built)) return built;
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "../lib" / name).string();
}
inline std::string path() { return library(TESSEL_FAKE_HIP, "libfake_amdhip64.so"); }
inline std::string thunk_path() { return library(TESSEL_FAKE_HSAKMT, "libfake_hsakmt.so"); }

class Environment : public ::testing::Environment {
 public:
  void SetUp() override {
    setenv("TESSEL_HIP_LIBRARY", path().c_str(), 1);
    setenv("TESSEL_HSAKMT_LIBRARY", thunk_path().c_str(), 1);
  }
};

}  // namespace tessel::fake_hip
