// The host's checked mode (Device "host:checked"): code compiled with
// CompileOptions::checked asks host_check() before every load, store and
// atomic whether the access lies within the argument its pointer came from.
// An access outside is skipped (a load reads zeros), the first one is
// recorded, and the launch returns it as an error naming the kernel, the
// op's source line, the program and the element.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/host_abi.h"
#include "runtime/device.h"

namespace tessel {

// The memory of one argument: [base, base + bytes); bytes < 0 for
// arguments that are not pointers.
struct HostRegion {
  uintptr_t base = 0;
  int64_t bytes = -1;
};

struct HostChecks {
  std::vector<HostRegion> regions;  // one per parameter
  std::atomic<bool> failed{false};
  // The first access outside, written by the program that set `failed`.
  struct Violation {
    int op = -1;
    int param = -1;
    int32_t program[3] = {0, 0, 0};
    uintptr_t address = 0;
  } first;
};

// The function checked code calls (base/host_abi.h's kHostCheck).
bool host_check(const HostProgram* program, int32_t param, const void* address, int64_t bytes, int32_t op);

// The regions of a launch's arguments; an error for a pointer whose extent
// is unknown (a raw pointer rather than a Buffer or a span).
absl::Status host_regions(const Kernel& kernel, absl::Span<const KernelArg> args, std::vector<HostRegion>& out);

// The recorded violation as an error, on `device`.
absl::Status host_violation(const HostChecks& checks, const Kernel& kernel, absl::string_view device);

}  // namespace tessel
