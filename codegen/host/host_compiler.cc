// Kernel -> LLVM IR -> O3 -> a relocatable object file; ORC LLJIT links the
// object into the process. Keeping the two apart makes host code a plain
// DeviceCode like every other target's, so it can be kept and loaded again.
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "codegen/backends.h"
#include "codegen/host/host_target.h"
#include "codegen/host/software_tma.h"
#include "codegen/llvm_util.h"
#include "codegen/lower.h"
#include "llvm/ExecutionEngine/Orc/Core.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Transforms/Utils/Cloning.h"

namespace tessel {
namespace {

class JitHostCode final : public HostCode {
 public:
  JitHostCode(std::unique_ptr<llvm::orc::LLJIT> jit, HostEntry entry, int64_t shared_bytes)
      : jit_(std::move(jit)), entry_(entry), shared_bytes_(shared_bytes) {}
  HostEntry entry() const override { return entry_; }
  int64_t shared_bytes() const override { return shared_bytes_; }
  void* global(const std::string& name) const override {
    auto addr = jit_->lookup(name);
    if (!addr) {
      llvm::consumeError(addr.takeError());
      return nullptr;
    }
    return addr->toPtr<void*>();
  }

 private:
  std::unique_ptr<llvm::orc::LLJIT> jit_;  // owns the code entry_ points into
  HostEntry entry_;
  int64_t shared_bytes_;
};


}  // namespace

namespace codegen {

absl::StatusOr<DeviceCode> compile_host(const Kernel& kernel, const CompileOptions& options,
                                        CompileArtifacts* artifacts, HostTma tma) {
  TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<TargetInfo> target,
                          make_host_target(options.opt_level, tma, options.checked));
  llvm::LLVMContext ctx;
  TESSEL_ASSIGN_OR_RETURN(LoweredKernel lowered,
                          lower(kernel.ir(), *target, ctx, options.specialization, 0, options.debug));
  optimize(*lowered.module, target->machine(), options.opt_level);
  TESSEL_RETURN_IF_ERROR(record_artifacts(kernel, *lowered.module, target->machine(), "host", artifacts));
  DeviceCode code;
  code.arch = "host";
  code.format = CodeFormat::kHostObject;
  TESSEL_ASSIGN_OR_RETURN(code.binary,
                          emit_file(*lowered.module, target->machine(), llvm::CodeGenFileType::ObjectFile, "host"));
  code.entry = lowered.entry;
  code.shared_bytes = lowered.shared_bytes;
  code.threads = 1;
  return code;
}

TESSEL_CODEGEN_API absl::StatusOr<DeviceCode> compile_host_software_tma(const Kernel& kernel,
                                                                        const CompileOptions& options) {
  return compile_host(kernel, options, nullptr, HostTma::kSoftware);
}

}  // namespace codegen

absl::StatusOr<std::unique_ptr<HostCode>> load_host_code(const DeviceCode& code,
                                                         const std::vector<HostSymbol>& symbols) {
  if (code.format != CodeFormat::kHostObject) {
    return absl::InvalidArgumentError(
        absl::StrCat("load_host_code: '", code.entry, "' is code for ", code.arch, ", not a host object"));
  }
  codegen::init_llvm_targets();
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) return codegen::to_status(jtmb.takeError(), "detecting the host CPU");
  auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(*jtmb)).create();
  if (!jit) return codegen::to_status(jit.takeError(), "creating the host JIT");
  llvm::orc::JITDylib& lib = (*jit)->getMainJITDylib();
  // Math functions (expf, ...) come from the process; the runtime's support
  // functions are given by address.
  auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      (*jit)->getDataLayout().getGlobalPrefix());
  if (!process) return codegen::to_status(process.takeError(), "resolving process symbols");
  lib.addGenerator(std::move(*process));
  llvm::orc::SymbolMap map;
  for (const HostSymbol& s : symbols) {
    map[(*jit)->mangleAndIntern(s.name)] = {llvm::orc::ExecutorAddr::fromPtr(s.address),
                                            llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable};
  }
  if (!map.empty()) {
    TESSEL_RETURN_IF_ERROR(codegen::to_status(lib.define(llvm::orc::absoluteSymbols(std::move(map))),
                                              "defining runtime symbols"));
  }
  TESSEL_RETURN_IF_ERROR(codegen::to_status(
      (*jit)->addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(code.binary, code.entry)),
      absl::StrCat("adding kernel '", code.entry, "' to the JIT")));
  auto addr = (*jit)->lookup(code.entry);
  if (!addr) return codegen::to_status(addr.takeError(), absl::StrCat("linking kernel '", code.entry, "'"));
  return std::unique_ptr<HostCode>(new JitHostCode(std::move(*jit), addr->toPtr<HostEntry>(), code.shared_bytes));
}

}  // namespace tessel
