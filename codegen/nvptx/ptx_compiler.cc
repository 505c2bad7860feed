// Kernel -> LLVM IR (NVPTX) -> O3 -> PTX text.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "codegen/backends.h"
#include "codegen/llvm_util.h"
#include "codegen/lower.h"
#include "codegen/nvptx/nvptx_target.h"

namespace tessel {
namespace {

// What the driver reserves of an SM's shared memory for each resident program.
constexpr int64_t kReservedPerProgram = 1024;

// Codegen reads and writes swizzled boxes through the pattern of rows that
// span the swizzle width (or whole panels of it); where a box's rows are
// narrower, the copy engine lays the tile out otherwise.
absl::Status check_swizzled_boxes(const Kernel& kernel) {
  for (const Param& p : kernel.params()) {
    if (!p.type.is_tensor_map() || p.type.swizzle() == Swizzle::kNone) continue;
    const int64_t row = p.type.shape().back() * p.type.dtype().bytes();
    if (row < swizzle_bytes(p.type.swizzle())) {
      return absl::UnimplementedError(absl::StrCat(
          "kernel '", kernel.name(), "': tensor map '", p.name, "' has ", swizzle_name(p.type.swizzle()),
          " swizzle with rows of ", row, " bytes; on NVIDIA GPUs tessel reads swizzled boxes whose innermost "
          "dimension spans at least the swizzle width (", swizzle_bytes(p.type.swizzle()), " bytes)"));
    }
  }
  return absl::OkStatus();
}

// A kernel of clusters launches as one: its entry's directives (after
// .maxntid, which LLVM emits for every kernel) name the cluster's shape,
// which LLVM 19 cannot, so that every launch of it, graphs included, runs
// clusters.
absl::Status require_cluster(const Kernel& kernel, std::string& ptx) {
  const int c = kernel.ir().cluster;
  if (c < 2) return absl::OkStatus();
  const size_t at = ptx.find(".maxntid");
  const size_t end = at == std::string::npos ? at : ptx.find('\n', at);
  if (end == std::string::npos) {
    return absl::InternalError(absl::StrCat("kernel '", kernel.name(), "': no .maxntid directive in its PTX"));
  }
  ptx.insert(end + 1, absl::StrCat(".reqnctapercluster ", c, ", 1, 1\n"));
  return absl::OkStatus();
}

}  // namespace

namespace codegen {

absl::StatusOr<DeviceCode> compile_nvptx(const Kernel& kernel, const CompileOptions& options, const std::string& arch,
                                         CompileArtifacts* artifacts) {
  TESSEL_ASSIGN_OR_RETURN(const NvptxChip chip, nvptx_chip(arch));
  if (chip.tma) TESSEL_RETURN_IF_ERROR(check_swizzled_boxes(kernel));
  TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<TargetInfo> target,
                          make_nvptx_target(arch, options.num_warps, options.opt_level, options.min_programs));
  llvm::LLVMContext ctx;
  const int n = options.min_programs;
  const int64_t limit = std::min(chip.shared_per_program, chip.shared_per_sm / n - kReservedPerProgram);
  TESSEL_ASSIGN_OR_RETURN(LoweredKernel lowered,
                          lower(kernel.ir(), *target, ctx, options.specialization, limit, options.debug));
  TESSEL_RETURN_IF_ERROR(check_shared_limit(kernel.ir(), lowered, arch, limit, "shared memory", n, "an SM"));
  optimize(*lowered.module, target->machine(), options.opt_level);

  TESSEL_ASSIGN_OR_RETURN(std::string ptx,
                          emit_file(*lowered.module, target->machine(), llvm::CodeGenFileType::AssemblyFile, "NVPTX"));
  // Before sm_90 a cluster's programs run as independent ones.
  if (chip.tma) TESSEL_RETURN_IF_ERROR(require_cluster(kernel, ptx));
  if (artifacts != nullptr) {
    artifacts->ir = kernel.str();
    artifacts->llvm = module_text(*lowered.module);
    artifacts->assembly = ptx;
  }
  DeviceCode code;
  code.arch = arch;
  code.format = CodeFormat::kPtx;
  code.binary = std::move(ptx);
  code.entry = lowered.entry;
  code.shared_bytes = lowered.shared_bytes;
  code.threads = options.num_warps * 32;
  code.error_symbol = kNvptxErrorSymbol;
  return code;
}

}  // namespace codegen
}  // namespace tessel
