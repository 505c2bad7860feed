// Glue between LLVM and tessel: one-time target registration, error
// conversion, the optimization pipeline.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "codegen/compiler.h"
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

// What `machine`'s code generator makes of `module` (which it changes):
// assembly text or an object file. `target` names the target in errors.
absl::StatusOr<std::string> emit_file(llvm::Module& module, llvm::TargetMachine& machine, llvm::CodeGenFileType type,
                                      absl::string_view target);

// Fills `artifacts` (where not null) with the kernel's IR, the optimized
// `module` and its assembly, made from a copy of it (emitting changes the module).
absl::Status record_artifacts(const Kernel& kernel, llvm::Module& module, llvm::TargetMachine& machine,
                              absl::string_view target, CompileArtifacts* artifacts);

}  // namespace tessel::codegen
