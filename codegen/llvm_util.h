// Glue between LLVM and tessel: one-time target registration, error
// conversion, the optimization pipeline.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/Error.h"
#include "llvm/Target/TargetMachine.h"

namespace tessel::codegen {

// Registers the X86, NVPTX and AMDGPU targets once per process.
void init_llvm_targets();

// Converts (and consumes) an llvm::Error.
absl::Status to_status(llvm::Error err, absl::string_view context);

// Runs LLVM's default pipeline at `opt_level` (0..3) for `tm`.
void optimize(llvm::Module& module, llvm::TargetMachine& tm, int opt_level);

// The module's textual LLVM IR.
std::string module_text(const llvm::Module& module);

}  // namespace tessel::codegen
