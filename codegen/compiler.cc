#include "codegen/compiler.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "codegen/affine.h"
#include "codegen/backends.h"

namespace tessel {
namespace {

constexpr const char* kKnownArches = "host, or sm_90a (NVIDIA Hopper)";

}  // namespace

absl::StatusOr<std::string> resolve_arch(const std::string& arch) {
  if (arch.empty() || arch == "host") return std::string("host");
  if (absl::StartsWith(arch, "sm_")) return arch;  // the NVPTX target checks which it supports
  if (absl::StartsWith(arch, "gfx")) {
    return absl::UnimplementedError(
        absl::StrCat("arch '", arch, "': the AMDGPU target is not part of tessel yet; tessel compiles for ",
                     kKnownArches));
  }
  return absl::InvalidArgumentError(absl::StrCat("arch '", arch, "' is unknown; tessel compiles for ", kKnownArches));
}

bool runs_every_kernel(const std::string& arch) { return arch == "host" || arch == "sm_90a"; }

absl::StatusOr<DeviceCode> compile(const Kernel& kernel, const CompileOptions& options, CompileArtifacts* artifacts) {
  TESSEL_ASSIGN_OR_RETURN(std::string arch, resolve_arch(options.arch));
  if (arch == "host") return codegen::compile_host(kernel, options, artifacts);
  return codegen::compile_nvptx(kernel, options, arch, artifacts);
}

Specialization specializable(const Kernel& kernel) { return codegen::specializable(kernel.ir()); }

}  // namespace tessel
