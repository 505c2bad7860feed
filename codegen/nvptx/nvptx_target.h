// NVIDIA GPUs through LLVM's NVPTX back end (sm_90a, PTX 8.3).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "codegen/target_info.h"

namespace tessel::codegen {

// The name of the device global in which bounded waits record timeouts.
inline constexpr const char* kNvptxErrorSymbol = "tessel_error";

// `min_programs` > 1 asks ptxas to fit that many programs on one SM
// (.minnctapersm), registers included.
absl::StatusOr<std::unique_ptr<TargetInfo>> make_nvptx_target(const std::string& arch, int num_warps, int opt_level,
                                                              int min_programs = 1);

}  // namespace tessel::codegen
