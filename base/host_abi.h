// The calling convention of host kernels, shared by codegen and runtime.
// A compiled host kernel is `void entry(void** args, const HostProgram* p)`:
// args[i] points to the value of parameter i (a tensor map's 128 bytes, a
// pointer's value, a scalar), like cuLaunchKernel's kernelParams.
#pragma once

#include <cstdint>

namespace tessel {

struct HostChecks;  // runtime/host/host_checks.h

struct HostProgram {
  int32_t program_id[3];
  int32_t num_programs[3];
  void* shared;         // this program's shared-memory arena
  HostChecks* checks;   // the launch's bounds, for checked code (host:checked); else null
};

using HostEntry = void (*)(void** args, const HostProgram* program);

// Names of the functions the runtime supplies to host kernels.
inline constexpr const char* kHostTmaLoad = "tessel_host_tma_load";    // (map, const i32* coords, smem)
inline constexpr const char* kHostTmaStore = "tessel_host_tma_store";  // (map, const i32* coords, smem)
// Checked code asks before each access whether it lies within the argument
// its pointer came from (`param`, or -1 where that is not known):
// bool (const HostProgram*, i32 param, const void* address, i64 bytes, i32 op index).
inline constexpr const char* kHostCheck = "tessel_host_check";

}  // namespace tessel
