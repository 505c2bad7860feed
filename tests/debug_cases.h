// The kernel the debug tests of every target compile: each program prints
// its 128 or 256 loaded values with their offsets, asserts that they are not
// negative, and stores them doubled. For the stand-in drivers, which run no
// kernels, what one of its programs would write into the debug buffer.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "base/debug_abi.h"
#include "dsl/ops.h"
#include "gtest/gtest.h"

namespace tessel::debug_cases {

inline Kernel printing_and_asserting(const std::string& name = "debugged", int64_t block = 128) {
  KernelBuilder k(name);
  Value x = k.arg(ptr(f32), "x");
  Value offs = k.program_id() * block + k.arange(0, block);
  Value v = load(x + offs);
  device_print("v", {v, offs});
  device_assert(v >= 0.0f, "v is not negative");
  store(x + offs, v * 2.0f);
  return *k.build();
}

// What program (1, 0, 0) prints of element 3 (v = 1.5, offs = 131).
inline constexpr const char* kPrinted = "pid (1, 0, 0) idx (3) v 1.5, 131\n";

// Writes that print, and with `fail` the program's failed assert, into the
// debug buffer at `debug` as the kernel would (base/debug_abi.h).
inline void write_records(void* debug, bool fail) {
  auto* words = static_cast<uint64_t*>(debug);
  const double v = 1.5;
  uint64_t record[kDebugRecordFixedWords + 2] = {0, 1, 0, 0, 3, 0, 131};  // text 0: the print
  std::memcpy(&record[kDebugRecordFixedWords], &v, 8);
  std::memcpy(words + kDebugHeaderBytes / 8, record, sizeof(record));
  words[kDebugCursor] = sizeof(record);
  if (fail) {
    words[kDebugAssert] = 2;  // 1 + text 1: the assert
    words[kDebugProgram] = 1;
    words[kDebugElement] = 3;
  }
}

// A synchronize's status and what it printed.
struct Synchronized {
  absl::Status status;
  std::string out;
};
inline Synchronized synchronize(const std::function<absl::Status()>& sync) {
  ::testing::internal::CaptureStdout();
  absl::Status s = sync();
  return {s, ::testing::internal::GetCapturedStdout()};
}

}  // namespace tessel::debug_cases
