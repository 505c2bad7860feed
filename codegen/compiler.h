// Compiling kernels, without LLVM in sight: the runtime's view of codegen.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codegen/api.h"
#include "codegen/compile_options.h"
#include "base/host_abi.h"
#include "dsl/builder.h"

namespace tessel {

// Machine code for the host, loaded and ready to call.
class TESSEL_CODEGEN_API HostCode {
 public:
  virtual ~HostCode() = default;
  virtual HostEntry entry() const = 0;
  // Shared memory one program needs.
  virtual int64_t shared_bytes() const = 0;
};

// A function the runtime lends to host kernels (see codegen/host/abi.h).
struct HostSymbol {
  std::string name;
  void* address;
};

// The compiled stages of one kernel, for dumps and inspection.
struct CompileArtifacts {
  std::string ir;    // tessel IR
  std::string llvm;  // optimized LLVM IR
  std::string ptx;   // NVIDIA targets
};

// PTX for NVIDIA GPUs (options.arch, default "sm_90a"), ready for the driver.
struct PtxCode {
  std::string ptx;
  std::string entry;          // the kernel's symbol
  int64_t shared_bytes = 0;   // dynamic shared memory per program
  int threads = 0;            // threads per program: options.num_warps * 32
  // A device global (u32, zero-initialized) in which bounded waits record
  // an error code (kDeviceTimeout) instead of hanging; read it after a sync.
  std::string error_symbol;
};
inline constexpr uint32_t kDeviceTimeout = 1;

TESSEL_CODEGEN_API absl::StatusOr<PtxCode> compile_ptx(const Kernel& kernel, const CompileOptions& options,
                                                      CompileArtifacts* artifacts = nullptr);

TESSEL_CODEGEN_API absl::StatusOr<std::unique_ptr<HostCode>> compile_host(const Kernel& kernel, const CompileOptions& options,
                                                       const std::vector<HostSymbol>& symbols,
                                                       CompileArtifacts* artifacts = nullptr);

}  // namespace tessel
