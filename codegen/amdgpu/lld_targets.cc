// lld's ELF driver initialises every target LLVM was built with, and its LTO
// back end registers Polly's passes, so that it can link bitcode. tessel
// hands lld only AMDGPU object files (hsaco_compiler.cc) and links into
// libtessel only the targets it compiles for (x86, NVPTX, AMDGPU): the other
// targets' initialisers are empty here, and Polly registers nothing. These
// symbols stay inside libtessel (cmake/libtessel.map exports tessel's API
// only).
#include "llvm/Config/llvm-config.h"
#include "llvm/Passes/PassPlugin.h"

#define TESSEL_NO_TARGET(name)                          \
  extern "C" void LLVMInitialize##name##Target() {}     \
  extern "C" void LLVMInitialize##name##TargetInfo() {} \
  extern "C" void LLVMInitialize##name##TargetMC() {}   \
  extern "C" void LLVMInitialize##name##AsmPrinter() {} \
  extern "C" void LLVMInitialize##name##AsmParser() {}

TESSEL_NO_TARGET(AArch64)
TESSEL_NO_TARGET(ARM)
TESSEL_NO_TARGET(AVR)
TESSEL_NO_TARGET(BPF)
TESSEL_NO_TARGET(Hexagon)
TESSEL_NO_TARGET(Lanai)
TESSEL_NO_TARGET(LoongArch)
TESSEL_NO_TARGET(M68k)
TESSEL_NO_TARGET(MSP430)
TESSEL_NO_TARGET(Mips)
TESSEL_NO_TARGET(PowerPC)
TESSEL_NO_TARGET(RISCV)
TESSEL_NO_TARGET(Sparc)
TESSEL_NO_TARGET(SystemZ)
TESSEL_NO_TARGET(VE)
TESSEL_NO_TARGET(WebAssembly)
TESSEL_NO_TARGET(XCore)
TESSEL_NO_TARGET(Xtensa)

llvm::PassPluginLibraryInfo getPollyPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "Polly", LLVM_VERSION_STRING, [](llvm::PassBuilder&) {}};
}
