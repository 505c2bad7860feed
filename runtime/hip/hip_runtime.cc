#include "runtime/hip/hip_runtime.h"

#include <dlfcn.h>
#include <stdlib.h>

#include "absl/strings/str_cat.h"
#include "base/status.h"

namespace tessel::hip {
namespace {

absl::StatusCode code_for(hipError_t error) {
  switch (error) {
    case hipErrorOutOfMemory:
      return absl::StatusCode::kResourceExhausted;
    case hipErrorNoDevice:
    case hipErrorNotInitialized:
      return absl::StatusCode::kUnavailable;
    case hipErrorInvalidDevice:
    case hipErrorNotFound:
      return absl::StatusCode::kNotFound;
    case hipErrorInvalidValue:
    case hipErrorInvalidImage:
    case hipErrorNoBinaryForGpu:
      return absl::StatusCode::kInvalidArgument;
    case hipErrorNotSupported:
      return absl::StatusCode::kUnimplemented;
    default:
      return absl::StatusCode::kInternal;
  }
}

}  // namespace

absl::Status runtime_error(const Runtime& runtime, const char* call, hipError_t error) {
  const char* name = runtime.get_error_name != nullptr ? runtime.get_error_name(error) : nullptr;
  const char* text = runtime.get_error_string != nullptr ? runtime.get_error_string(error) : nullptr;
  std::string what = name != nullptr ? std::string(name) : absl::StrCat("hipError_t ", error);
  if (text != nullptr) absl::StrAppend(&what, " (", text, ")");
  return absl::Status(code_for(error), absl::StrCat(call, ": ", what));
}

absl::StatusOr<const Runtime*> Runtime::get() {
  // Resolved once and never destroyed: buffers released during static
  // destruction still call into the runtime.
  static const absl::StatusOr<const Runtime*> runtime = load();
  return runtime;
}

absl::StatusOr<const Runtime*> Runtime::load() {
  // The sonames of ROCm 7, 6 and 5, then the unversioned name.
  TESSEL_ASSIGN_OR_RETURN(const Library library,
                          open_library("TESSEL_HIP_LIBRARY", {"libamdhip64.so.7", "libamdhip64.so.6",
                                                              "libamdhip64.so.5", "libamdhip64.so"},
                                       "no AMD HIP runtime (libamdhip64.so not found)"));
  void* const lib = library.handle;
  const std::string& path = library.path;
  auto* r = new Runtime();
  r->library_ = path;
  std::string missing;
  auto resolve = [&](auto& entry, const char* symbol, bool required) {
    entry.name_ = symbol;
    entry.runtime_ = r;
    entry.fn_ = reinterpret_cast<typename std::remove_reference_t<decltype(entry)>::Fn>(dlsym(lib, symbol));
    if (entry.fn_ == nullptr && required) absl::StrAppend(&missing, missing.empty() ? "" : ", ", symbol);
  };
#define TESSEL_HIP_RESOLVE_ENTRY(member, symbol, required) resolve(r->member, #symbol, required);
  TESSEL_HIP_ENTRIES(TESSEL_HIP_RESOLVE_ENTRY)
#undef TESSEL_HIP_RESOLVE_ENTRY
  r->get_error_name = reinterpret_cast<PFN_hipGetErrorName>(dlsym(lib, "hipGetErrorName"));
  r->get_error_string = reinterpret_cast<PFN_hipGetErrorString>(dlsym(lib, "hipGetErrorString"));
  if (!missing.empty()) {
    delete r;
    return absl::UnavailableError(absl::StrCat("the HIP runtime ", path, " lacks ", missing));
  }
  if (absl::Status s = r->init(0); !s.ok()) {
    delete r;
    return absl::UnavailableError(absl::StrCat("the HIP runtime ", path, " did not initialise: ", s.message()));
  }
  return r;
}

}  // namespace tessel::hip
