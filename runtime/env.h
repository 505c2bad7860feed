// The one place where tessel reads environment variables:
//   TESSEL_DUMP=ir,llvm,ptx   stages of every compilation to write
//   TESSEL_DUMP_DIR=DIR       where to write them (default: the working directory)
//   TESSEL_DEBUG=1            compile device_asserts in (CompileOptions::debug)
//   TESSEL_CACHE_DIR=DIR      the disk cache of compiled kernels (runtime/disk_cache.h);
//                             default $XDG_CACHE_HOME/tessel, else ~/.cache/tessel;
//                             set but empty turns the cache off
//   TESSEL_CACHE_MAX_BYTES=N  the most it keeps (bytes, or with K, M or G; default 1G)
#pragma once

#include "codegen/compile_options.h"
#include "runtime/disk_cache.h"

namespace tessel {

// `options` with what the environment asks for filled in where unset.
CompileOptions options_from_env(CompileOptions options);

// The disk cache the environment asks for. A TESSEL_CACHE_MAX_BYTES that is
// not a size is warned about on stderr and the default kept.
DiskCacheConfig disk_cache_config_from_env();

}  // namespace tessel
