// What a stand-in GPU library (tests/hip/fake_hip.cc,
// tests/cuda/fake_cuda.cc) recorded, read through the copy of it tessel
// loaded: the calls it saw, and the bytes of the last launch's arguments.
#pragma once

#include <dlfcn.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tessel::fake {

// Where the build left `built`, or beside the installed tests (lib/`name`).
inline std::string library(const char* built, const char* name) {
  if (std::filesystem::exists(built)) return built;
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "../lib" / name).string();
}

// The stand-in at `path` exports `<prefix>log`, `<prefix>reset` and
// functions returning the bytes of what it kept; tessel must have loaded it.
class Record {
 public:
  Record(const std::string& path, std::string prefix)
      : lib_(dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD)), prefix_(std::move(prefix)) {}
  ~Record() {
    if (lib_ != nullptr) dlclose(lib_);
  }
  Record(const Record&) = delete;
  Record& operator=(const Record&) = delete;

  // Whether tessel has the stand-in loaded.
  bool loaded() const { return lib_ != nullptr; }
  template <class F>
  F fn(const std::string& name) const {
    return reinterpret_cast<F>(dlsym(lib_, (prefix_ + name).c_str()));
  }
  // One line a call, in the order made.
  std::string log() const { return fn<const char* (*)()>("log")(); }
  // The bytes `<prefix><what>(size_t*)` returns.
  std::vector<uint8_t> bytes(const char* what) const {
    size_t size = 0;
    const uint8_t* data = fn<const uint8_t* (*)(size_t*)>(what)(&size);
    return std::vector<uint8_t>(data, data + size);
  }
  void reset() const { fn<void (*)()>("reset")(); }

 private:
  void* lib_;
  std::string prefix_;
};

}  // namespace tessel::fake
