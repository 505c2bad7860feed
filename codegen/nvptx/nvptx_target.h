// NVIDIA GPUs through LLVM's NVPTX back end (sm_80 to sm_90a, PTX 8.3; 8.4
// for sm_89, whose fp8 mma.sync needs it).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "codegen/target_info.h"

namespace tessel::codegen {

// The name of the device global in which bounded waits record timeouts.
inline constexpr const char* kNvptxErrorSymbol = "tessel_error";

// What a chip has of what tessel uses: TMA, mbarrier transactions, clusters
// and the async proxy (sm_90); wgmma and setmaxnreg (sm_90a); fp8
// conversions (sm_89 on) and mma.sync on fp8 (sm_89, with PTX 8.4); and
// its shared memory. Chips before sm_90 copy TMA
// boxes with the program's threads from maps in tessel's host form, as AMD
// GPUs do, run clusters as independent programs, and dot without tensor
// cores.
struct NvptxChip {
  bool tma = false;
  bool wgmma = false;
  bool fp8 = false;
  bool fp8_mma = false;
  // Shared memory a program may opt in to, and what one SM has, of which
  // the driver reserves 1 KiB for each resident program.
  int64_t shared_per_program = 0;
  int64_t shared_per_sm = 0;
};
// sm_80 to sm_89, sm_90 and sm_90a; an error naming them otherwise.
absl::StatusOr<NvptxChip> nvptx_chip(const std::string& arch);

// `min_programs` > 1 asks ptxas to fit that many programs on one SM
// (.minnctapersm), registers included.
absl::StatusOr<std::unique_ptr<TargetInfo>> make_nvptx_target(const std::string& arch, int num_warps, int opt_level,
                                                              int min_programs = 1);

}  // namespace tessel::codegen
