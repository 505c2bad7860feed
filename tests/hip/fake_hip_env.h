// The hip suites' fakes, libamdhip64 (fake_hip.cc) and libhsakmt
// (fake_hsakmt.cc): where they are, the test environment that points
// tessel at them before any HIP device opens, and the fake HIP's record.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/fake_record.h"

namespace tessel::fake_hip {

inline std::string path() { return fake::library(TESSEL_FAKE_HIP, "libfake_amdhip64.so"); }
inline std::string thunk_path() { return fake::library(TESSEL_FAKE_HSAKMT, "libfake_hsakmt.so"); }

class Environment : public ::testing::Environment {
 public:
  void SetUp() override {
    setenv("TESSEL_HIP_LIBRARY", path().c_str(), 1);
    setenv("TESSEL_HSAKMT_LIBRARY", thunk_path().c_str(), 1);
  }
};

// The fake's record, through the copy of it tessel loaded (a HIP device
// must have been opened first).
struct Record : fake::Record {
  Record() : fake::Record(path(), "fake_hip_") {}
  std::vector<uint8_t> kernarg() const { return bytes("kernarg"); }
  // The memory of the global the fake's hipModuleGetGlobal last handed out.
  void* last_global() const { return fn<void* (*)()>("last_global")(); }
};

}  // namespace tessel::fake_hip
