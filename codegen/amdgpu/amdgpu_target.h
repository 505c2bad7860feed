// AMD Instinct GPUs through LLVM's AMDGPU back end (amdgcn-amd-amdhsa,
// gfx942, wave64, code object v5).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "codegen/target_info.h"

namespace tessel::codegen {

// LDS (shared memory) one workgroup may use on gfx942.
inline constexpr int64_t kGfx942LdsLimit = 65536;
// Threads in a wavefront (AMD's warp) on gfx9 Instinct chips.
inline constexpr int kWave = 64;

// `num_warps` wavefronts of 64 threads per program.
// `min_programs` > 1 asks LLVM to fit that many programs on one compute
// unit (amdgpu-waves-per-eu), registers included.
absl::StatusOr<std::unique_ptr<TargetInfo>> make_amdgpu_target(const std::string& arch, int num_warps, int opt_level,
                                                               int min_programs = 1);

}  // namespace tessel::codegen
