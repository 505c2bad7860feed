// The host CPU target (x86-64 through ORC LLJIT).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "codegen/target_info.h"

namespace tessel::codegen {

absl::StatusOr<std::unique_ptr<TargetInfo>> make_host_target(int opt_level);

}  // namespace tessel::codegen
