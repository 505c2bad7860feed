// The hip suites' fakes, libamdhip64 (fake_hip.cc) and libhsakmt
// (fake_hsakmt.cc): where they are, the test environment that points
// tessel at them before any HIP device opens, and the fake HIP's record.
#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

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

// The fake's record, through the copy of it tessel loaded (a HIP device
// must have been opened first).
struct Record {
  Record() : lib(dlopen(path().c_str(), RTLD_NOW | RTLD_NOLOAD)) {}
  ~Record() {
    if (lib != nullptr) dlclose(lib);
  }
  Record(const Record&) = delete;
  Record& operator=(const Record&) = delete;
  template <class F>
  F fn(const char* name) const {
    return reinterpret_cast<F>(dlsym(lib, name));
  }
  std::string log() const { return fn<const char* (*)()>("fake_hip_log")(); }
  std::vector<uint8_t> kernarg() const {
    size_t size = 0;
    const uint8_t* bytes = fn<const uint8_t* (*)(size_t*)>("fake_hip_kernarg")(&size);
    return std::vector<uint8_t>(bytes, bytes + size);
  }
  // The memory of the global the fake's hipModuleGetGlobal last handed out.
  void* last_global() const { return fn<void* (*)()>("fake_hip_last_global")(); }
  void reset() const { fn<void (*)()>("fake_hip_reset")(); }
  void* lib;
};

}  // namespace tessel::fake_hip
