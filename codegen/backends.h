// Internal: each target's compile path, behind codegen/compiler.h's one
// entry point. A target turns a kernel into DeviceCode for the arch it was
// handed (already resolved: "host", "sm_90a", ...).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "codegen/compiler.h"
#include "codegen/host/host_target.h"

namespace tessel::codegen {

// `tma`: the host copy engine in the runtime, or TargetInfo's software TMA
// (codegen/host/software_tma.h).
absl::StatusOr<DeviceCode> compile_host(const Kernel& kernel, const CompileOptions& options,
                                        CompileArtifacts* artifacts, HostTma tma = HostTma::kCopyEngine);
absl::StatusOr<DeviceCode> compile_nvptx(const Kernel& kernel, const CompileOptions& options, const std::string& arch,
                                         CompileArtifacts* artifacts);
absl::StatusOr<DeviceCode> compile_amdgpu(const Kernel& kernel, const CompileOptions& options, const std::string& arch,
                                          CompileArtifacts* artifacts);

}  // namespace tessel::codegen
