#include "codegen/llvm_util.h"

#include <mutex>

#include "absl/strings/str_cat.h"
#include "llvm/Analysis/CGSCCPassManager.h"
#include "llvm/Analysis/LoopAnalysisManager.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/Transforms/Utils/Cloning.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

extern "C" {
void LLVMInitializeNVPTXTargetInfo();
void LLVMInitializeNVPTXTarget();
void LLVMInitializeNVPTXTargetMC();
void LLVMInitializeNVPTXAsmPrinter();
}

namespace tessel::codegen {

void init_llvm_targets() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
    LLVMInitializeAMDGPUTargetInfo();
    LLVMInitializeAMDGPUTarget();
    LLVMInitializeAMDGPUTargetMC();
    LLVMInitializeAMDGPUAsmPrinter();
  });
}

absl::Status to_status(llvm::Error err, absl::string_view context) {
  if (!err) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(context, ": ", llvm::toString(std::move(err))));
}

void optimize(llvm::Module& module, llvm::TargetMachine& tm, int opt_level) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = opt_level >= 2;
  tuning.SLPVectorization = opt_level >= 2;
  llvm::PassBuilder pb(&tm, tuning);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::OptimizationLevel level = opt_level <= 0   ? llvm::OptimizationLevel::O0
                                  : opt_level == 1 ? llvm::OptimizationLevel::O1
                                  : opt_level == 2 ? llvm::OptimizationLevel::O2
                                                   : llvm::OptimizationLevel::O3;
  llvm::ModulePassManager mpm = level == llvm::OptimizationLevel::O0 ? pb.buildO0DefaultPipeline(level)
                                                                      : pb.buildPerModuleDefaultPipeline(level);
  mpm.run(module, mam);
}

std::string module_text(const llvm::Module& module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  module.print(os, nullptr);
  return text;
}

absl::StatusOr<std::string> emit_file(llvm::Module& module, llvm::TargetMachine& machine, llvm::CodeGenFileType type,
                                      absl::string_view target) {
  llvm::SmallString<0> out;
  llvm::raw_svector_ostream os(out);
  llvm::legacy::PassManager pm;
  if (machine.addPassesToEmitFile(pm, os, nullptr, type)) {
    return absl::InternalError(absl::StrCat(target, ": the target machine cannot emit ",
                                            type == llvm::CodeGenFileType::ObjectFile ? "object files" : "assembly"));
  }
  pm.run(module);
  return std::string(out.str());
}

absl::Status record_artifacts(const Kernel& kernel, llvm::Module& module, llvm::TargetMachine& machine,
                              absl::string_view target, CompileArtifacts* artifacts) {
  if (artifacts == nullptr) return absl::OkStatus();
  artifacts->ir = kernel.str();
  artifacts->llvm = module_text(module);
  std::unique_ptr<llvm::Module> copy = llvm::CloneModule(module);
  absl::StatusOr<std::string> assembly = emit_file(*copy, machine, llvm::CodeGenFileType::AssemblyFile, target);
  if (!assembly.ok()) return assembly.status();
  artifacts->assembly = *std::move(assembly);
  return absl::OkStatus();
}

}  // namespace tessel::codegen
