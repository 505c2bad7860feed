// Compiling kernels, without LLVM in sight: the runtime's (and users') view
// of codegen. One entry point for every target; the arch string picks it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/host_abi.h"
#include "codegen/api.h"
#include "codegen/compile_options.h"
#include "dsl/builder.h"

namespace tessel {

// What DeviceCode::binary holds.
enum class CodeFormat : uint8_t {
  kPtx,         // PTX text for the CUDA driver (arch "sm_*")
  kHsaco,       // an HSA code object for HIP (arch "gfx*")
  kHostObject,  // a relocatable object file for this process (arch "host")
};

// A kernel compiled for one arch: everything a backend needs to load and
// launch it, and nothing tied to the process that compiled it, so it can be
// kept on disk and loaded by another process.
struct DeviceCode {
  std::string arch;  // "sm_90a", "gfx942", "host"
  CodeFormat format = CodeFormat::kHostObject;
  std::string binary;
  std::string entry;          // the kernel's symbol
  int64_t shared_bytes = 0;   // shared memory per program (dynamic on GPUs)
  int threads = 1;            // threads per program
  // A device global (u32, zero-initialized) in which bounded waits record
  // an error code (kDeviceTimeout) instead of hanging; empty where the target
  // has none. Read it after a sync.
  std::string error_symbol;
};
inline constexpr uint32_t kDeviceTimeout = 1;

// The compiled stages of one kernel, for dumps and inspection.
struct CompileArtifacts {
  std::string ir;        // tessel IR
  std::string llvm;      // optimized LLVM IR
  std::string assembly;  // the target's assembly (PTX for NVIDIA, AMDGCN or x86 assembly)
};

// The arch `options.arch` names, resolved: "" is the host. Errors name the
// arches tessel compiles for.
TESSEL_CODEGEN_API absl::StatusOr<std::string> resolve_arch(const std::string& arch);

// Whether code compiled for `arch` can run every kernel tessel builds (TMA,
// mbarriers, clusters, warp specialization, ...): the host and the NVIDIA
// chips from sm_80 on (before sm_90 without the hardware's TMA). Device::best()
// prefers such a GPU to the host, and the host to any other.
TESSEL_CODEGEN_API bool runs_every_kernel(const std::string& arch);

// Whether code compiled for the NVIDIA `arch` copies TMA boxes with the
// hardware's TMA, reading the driver's tensor maps (sm_90 and after), or
// with the program's threads from tessel's host form (before).
TESSEL_CODEGEN_API bool copies_boxes_with_tma(const std::string& arch);

// What decides the code compile() makes for the resolved `arch` besides the
// kernel, the options and tessel's own build: the version of the LLVM inside
// tessel and, for the host, the CPU the code is tuned for and its features
// ("LLVM 19.1.7; x86_64-pc-linux-gnu znver4 +avx2,..."). Caches of compiled
// code key on it, so a cache shared between machines never hands one a
// host object with instructions its CPU lacks.
TESSEL_CODEGEN_API std::string compiler_identity(const std::string& arch);

// Compiles `kernel` for options.arch ("host", "sm_90a", ...; empty is the host).
TESSEL_CODEGEN_API absl::StatusOr<DeviceCode> compile(const Kernel& kernel, const CompileOptions& options,
                                                     CompileArtifacts* artifacts = nullptr);

// Host code linked into this process and ready to call.
class TESSEL_CODEGEN_API HostCode {
 public:
  virtual ~HostCode() = default;
  virtual HostEntry entry() const = 0;
  // Shared memory one program needs.
  virtual int64_t shared_bytes() const = 0;
  // The address of the code's global `name`, or null where it has none.
  virtual void* global(const std::string& name) const = 0;
};

// A function the runtime lends to host kernels (see base/host_abi.h).
struct HostSymbol {
  std::string name;
  void* address;
};

// Links host object code (CodeFormat::kHostObject) into this process, with
// `symbols` and the process's own (libm) resolving what it calls.
TESSEL_CODEGEN_API absl::StatusOr<std::unique_ptr<HostCode>> load_host_code(const DeviceCode& code,
                                                                           const std::vector<HostSymbol>& symbols);

// Whether code compiled from `kernel` holds a debug buffer
// (base/debug_abi.h): it prints, or it asserts and `debug` is on.
TESSEL_CODEGEN_API bool writes_debug_buffer(const Kernel& kernel, bool debug);

// The parameters whose Specialization facts a kernel's code can use (the
// rest need never key a variant).
TESSEL_CODEGEN_API Specialization specializable(const Kernel& kernel);

}  // namespace tessel
