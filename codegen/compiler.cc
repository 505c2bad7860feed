#include "codegen/compiler.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "codegen/affine.h"
#include "codegen/backends.h"
#include "codegen/nvptx/nvptx_target.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"

namespace tessel {
namespace {

constexpr const char* kKnownArches =
    "host, sm_90a (NVIDIA Hopper), sm_80 to sm_89 (NVIDIA Ampere and Ada) or gfx942 (AMD Instinct MI300)";

}  // namespace

absl::StatusOr<std::string> resolve_arch(const std::string& arch) {
  if (arch.empty() || arch == "host") return std::string("host");
  // The NVPTX and AMDGPU targets check which chips they support.
  if (absl::StartsWith(arch, "sm_") || absl::StartsWith(arch, "gfx")) return arch;
  return absl::InvalidArgumentError(absl::StrCat("arch '", arch, "' is unknown; tessel compiles for ", kKnownArches));
}

bool runs_every_kernel(const std::string& arch) { return arch == "host" || codegen::nvptx_chip(arch).ok(); }

bool copies_boxes_with_tma(const std::string& arch) {
  absl::StatusOr<codegen::NvptxChip> chip = codegen::nvptx_chip(arch);
  return chip.ok() && chip->tma;
}

std::string compiler_identity(const std::string& arch) {
  std::string id = absl::StrCat("LLVM ", LLVM_VERSION_STRING);
  if (arch != "host") return id;
  // The same detection the host target compiles for (codegen/host/host_target.cc).
  static const std::string host = [] {
    auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!jtmb) {
      llvm::consumeError(jtmb.takeError());
      return std::string("unknown host");
    }
    return absl::StrCat(jtmb->getTargetTriple().str(), " ", jtmb->getCPU(), " ", jtmb->getFeatures().getString());
  }();
  return absl::StrCat(id, "; ", host);
}

absl::StatusOr<DeviceCode> compile(const Kernel& kernel, const CompileOptions& options, CompileArtifacts* artifacts) {
  TESSEL_ASSIGN_OR_RETURN(std::string arch, resolve_arch(options.arch));
  if (options.min_programs < 1 || options.min_programs > 32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "min_programs (programs to run at once on one compute unit) must be 1 to 32, got ", options.min_programs));
  }
  if (arch == "host") return codegen::compile_host(kernel, options, artifacts);
  if (absl::StartsWith(arch, "gfx")) return codegen::compile_amdgpu(kernel, options, arch, artifacts);
  return codegen::compile_nvptx(kernel, options, arch, artifacts);
}

bool writes_debug_buffer(const Kernel& kernel, bool debug) {
  const std::vector<Op>& ops = kernel.ir().ops;
  return std::any_of(ops.begin(), ops.end(),
                     [&](const Op& o) { return o.op == OpCode::kPrint || (debug && o.op == OpCode::kAssert); });
}

Specialization specializable(const Kernel& kernel) { return codegen::specializable(kernel.ir()); }

}  // namespace tessel
