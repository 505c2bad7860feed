// Kernel -> LLVM IR (AMDGPU) -> O3 -> ELF relocatable -> HSA code object, the
// last step linked in this process by lld (`ld.lld -shared`).
#include <cstdio>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "codegen/amdgpu/amdgpu_target.h"
#include "codegen/backends.h"
#include "codegen/llvm_util.h"
#include "codegen/lower.h"
#include "lld/Common/Driver.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

LLD_HAS_DRIVER(elf)

namespace tessel::codegen {
namespace {

// A file in the temporary directory, removed when this goes.
class TempFile {
 public:
  explicit TempFile(const char* suffix) {
    int fd = -1;
    llvm::SmallString<128> path;
    if (llvm::sys::fs::createTemporaryFile("tessel-amdgpu", suffix, fd, path)) return;
    llvm::sys::Process::SafelyCloseFileDescriptor(fd);
    path_ = std::string(path.str());
  }
  ~TempFile() {
    if (!path_.empty()) llvm::sys::fs::remove(path_);
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  bool ok() const { return !path_.empty(); }
  const char* path() const { return path_.c_str(); }

 private:
  std::string path_;
};

// The shared object lld makes of `object`. lld keeps global state: one link
// at a time in this process.
absl::StatusOr<std::string> link_code_object(const std::string& object, const std::string& kernel) {
  static std::mutex lock;
  std::lock_guard<std::mutex> hold(lock);
  TempFile in(".o"), out(".hsaco");
  if (!in.ok() || !out.ok()) return absl::InternalError("AMDGPU: cannot make temporary files to link a code object");
  {
    std::error_code ec;
    llvm::raw_fd_ostream f(in.path(), ec);
    if (ec) return absl::InternalError(absl::StrCat("AMDGPU: cannot write ", in.path(), ": ", ec.message()));
    f << object;
  }
  std::string log;
  llvm::raw_string_ostream diagnostics(log);
  const char* args[] = {"ld.lld", "-shared", "--threads=1", "--no-undefined", in.path(), "-o", out.path()};
  lld::Result r = lld::lldMain(args, diagnostics, diagnostics, {{lld::Gnu, &lld::elf::link}});
  if (r.retCode != 0) {
    return absl::InternalError(absl::StrCat("AMDGPU: linking the code object of kernel '", kernel, "' failed: ", log));
  }
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> linked = llvm::MemoryBuffer::getFile(out.path());
  if (!linked) return absl::InternalError(absl::StrCat("AMDGPU: cannot read ", out.path()));
  return std::string((*linked)->getBuffer());
}

}  // namespace

absl::StatusOr<DeviceCode> compile_amdgpu(const Kernel& kernel, const CompileOptions& options, const std::string& arch,
                                          CompileArtifacts* artifacts) {
  TESSEL_ASSIGN_OR_RETURN(std::unique_ptr<TargetInfo> target,
                          make_amdgpu_target(arch, options.num_warps, options.opt_level, options.min_programs));
  llvm::LLVMContext ctx;
  // A compute unit's LDS is one program's limit; min_programs share it.
  const int n = options.min_programs;
  const int64_t limit = kGfx942LdsLimit / n;
  TESSEL_ASSIGN_OR_RETURN(LoweredKernel lowered,
                          lower(kernel.ir(), *target, ctx, options.specialization, limit, options.debug));
  TESSEL_RETURN_IF_ERROR(check_shared_limit(kernel.ir(), lowered, arch, limit, "LDS", n, "a compute unit"));
  optimize(*lowered.module, target->machine(), options.opt_level);
  TESSEL_RETURN_IF_ERROR(record_artifacts(kernel, *lowered.module, target->machine(), "AMDGPU", artifacts));
  TESSEL_ASSIGN_OR_RETURN(std::string object,
                          emit_file(*lowered.module, target->machine(), llvm::CodeGenFileType::ObjectFile, "AMDGPU"));
  DeviceCode code;
  code.arch = arch;
  code.format = CodeFormat::kHsaco;
  TESSEL_ASSIGN_OR_RETURN(code.binary, link_code_object(object, kernel.name()));
  code.entry = lowered.entry;
  code.shared_bytes = lowered.shared_bytes;
  code.threads = options.num_warps * kWave;
  return code;
}

}  // namespace tessel::codegen
