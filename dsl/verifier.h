// Checks the invariants of kernel IR that codegen relies on.
#pragma once

#include "absl/status/status.h"
#include "dsl/ir.h"

namespace tessel {

absl::Status verify(const KernelIR& ir);

}  // namespace tessel
