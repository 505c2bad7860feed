// The kernel the debug tests of every target compile: each program prints
// its 128 or 256 loaded values with their offsets, asserts that they are not
// negative, and stores them doubled.
#pragma once

#include <cstdint>
#include <string>

#include "dsl/ops.h"

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

}  // namespace tessel::debug_cases
