// Kernel -> LLVM IR -> O3 -> ORC LLJIT -> a callable host function.
#include "absl/strings/str_cat.h"
#include "codegen/compiler.h"
#include "codegen/host/host_target.h"
#include "codegen/llvm_util.h"
#include "codegen/lower.h"
#include "base/status.h"
#include "llvm/ExecutionEngine/Orc/Core.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/ThreadSafeModule.h"

namespace tessel {
namespace {

class JitHostCode final : public HostCode {
 public:
  JitHostCode(std::unique_ptr<llvm::orc::LLJIT> jit, HostEntry entry, int64_t shared_bytes)
      : jit_(std::move(jit)), entry_(entry), shared_bytes_(shared_bytes) {}
  HostEntry entry() const override { return entry_; }
  int64_t shared_bytes() const override { return shared_bytes_; }

 private:
  std::unique_ptr<llvm::orc::LLJIT> jit_;  // owns the code entry_ points into
  HostEntry entry_;
  int64_t shared_bytes_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<HostCode>> compile_host(const Kernel& kernel, const CompileOptions& options,
                                                       const std::vector<HostSymbol>& symbols,
                                                       CompileArtifacts* artifacts) {
  TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<codegen::TargetInfo> target, codegen::make_host_target(options.opt_level));
  auto ctx = std::make_unique<llvm::LLVMContext>();
  TESSEL_ASSIGN_OR_RETURN(codegen::LoweredKernel lowered, codegen::lower(kernel.ir(), *target, *ctx, options.specialization));
  codegen::optimize(*lowered.module, target->machine(), options.opt_level);
  if (artifacts != nullptr) {
    artifacts->ir = kernel.str();
    artifacts->llvm = codegen::module_text(*lowered.module);
  }

  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) return codegen::to_status(jtmb.takeError(), "detecting the host CPU");
  jtmb->setCodeGenOptLevel(target->machine().getOptLevel());
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
  std::string entry = lowered.entry;
  int64_t shared = lowered.shared_bytes;
  TESSEL_RETURN_IF_ERROR(codegen::to_status(
      (*jit)->addIRModule(llvm::orc::ThreadSafeModule(std::move(lowered.module), std::move(ctx))),
      absl::StrCat("adding kernel '", kernel.name(), "' to the JIT")));
  auto addr = (*jit)->lookup(entry);
  if (!addr) return codegen::to_status(addr.takeError(), absl::StrCat("linking kernel '", kernel.name(), "'"));
  auto fn = addr->toPtr<HostEntry>();
  return std::unique_ptr<HostCode>(new JitHostCode(std::move(*jit), fn, shared));
}

}  // namespace tessel
