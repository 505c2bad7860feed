// Internal: tessel::compile through the disk cache (runtime/disk_cache.h),
// the one way backends compile, so that a new process loads what an earlier
// one compiled instead of running LLVM again.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "codegen/compiler.h"
#include "runtime/disk_cache.h"

namespace tessel {

// The cache space compiled kernels live in.
inline constexpr const char* kKernelCacheSpace = "kernels";

// The GNU build id of the object holding tessel (libtessel.so), in hex; it
// changes with any change to tessel's code, unlike its version number.
// Empty where the object has none (the cache is then not used).
const std::string& tessel_build_id();

// The disk cache's key for `kernel` compiled with `options` for the resolved
// `arch`: everything that changes the code. Empty where no key can be made
// (no build id).
std::string kernel_cache_key(const Kernel& kernel, const CompileOptions& options, const std::string& arch);

// tessel::compile, answered from `cache` where it holds the code and stored
// there after a compile. Dumps (`artifacts`, or options.dump_stages) need
// the stages of a real compile, so they bypass the cache. Problems with the
// cache never fail the compile.
absl::StatusOr<DeviceCode> compile_cached(const DiskCache& cache, const Kernel& kernel, const CompileOptions& options,
                                          CompileArtifacts* artifacts = nullptr);

}  // namespace tessel
