// Internal, for tests of TargetInfo's default TMA: host code whose tma_load
// and tma_store are the copy that targets without a tensor memory
// accelerator do in software, rather than calls into the runtime's host
// copy engine, so that the two can be run side by side on host memory.
// Load the code with load_host_code (codegen/compiler.h); it calls no
// runtime symbol.
#pragma once

#include "absl/status/statusor.h"
#include "codegen/api.h"
#include "codegen/compiler.h"

namespace tessel::codegen {

// compile(kernel, options) for the host, through make_host_target(...,
// HostTma::kSoftware). Defined in host_compiler.cc beside compile_host.
TESSEL_CODEGEN_API absl::StatusOr<DeviceCode> compile_host_software_tma(const Kernel& kernel,
                                                                        const CompileOptions& options);

}  // namespace tessel::codegen
