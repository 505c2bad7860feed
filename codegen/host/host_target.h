// The host CPU target (x86-64 through ORC LLJIT).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "codegen/target_info.h"

namespace tessel::codegen {

// How host kernels copy TMA boxes.
enum class HostTma {
  kCopyEngine,  // calls into the runtime's host copy engine (base/host_abi.h)
  // TargetInfo's default, the copy targets without TMA do themselves: lets
  // tests check it against the copy engine (host/software_tma.h).
  kSoftware,
};

// `checked`: every load, store and atomic asks the runtime first
// (CompileOptions::checked).
absl::StatusOr<std::unique_ptr<TargetInfo>> make_host_target(int opt_level, HostTma tma = HostTma::kCopyEngine,
                                                             bool checked = false);

}  // namespace tessel::codegen
