// The hip suites' fake libamdhip64 (fake_hip.cc): where it is, and the test
// environment that points tessel at it before any HIP device opens.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace tessel::fake_hip {

// Where the build left it, or beside the installed tests (lib/).
inline std::string path() {
  if (std::filesystem::exists(TESSEL_FAKE_HIP)) return TESSEL_FAKE_HIP;
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "../lib/libfake_amdhip64.so").string();
}

class Environment : public ::testing::Environment {
 public:
  void SetUp() override { setenv("TESSEL_HIP_LIBRARY", path().c_str(), 1); }
};

}  // namespace tessel::fake_hip
