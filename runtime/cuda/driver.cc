#include "runtime/cuda/driver.h"

#include <dlfcn.h>
#include <stdlib.h>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "runtime/shared_library.h"

namespace tessel::cuda {
namespace {

absl::StatusCode code_for(CUresult result) {
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY:
      return absl::StatusCode::kResourceExhausted;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
      return absl::StatusCode::kUnavailable;
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_NOT_FOUND:
      return absl::StatusCode::kNotFound;
    case CUDA_ERROR_INVALID_VALUE:
      return absl::StatusCode::kInvalidArgument;
    case CUDA_ERROR_NOT_SUPPORTED:
      return absl::StatusCode::kUnimplemented;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
    case CUDA_ERROR_STREAM_CAPTURE_MERGE:
    case CUDA_ERROR_STREAM_CAPTURE_UNMATCHED:
    case CUDA_ERROR_STREAM_CAPTURE_UNJOINED:
    case CUDA_ERROR_STREAM_CAPTURE_ISOLATION:
    case CUDA_ERROR_STREAM_CAPTURE_IMPLICIT:
    case CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD:
      return absl::StatusCode::kFailedPrecondition;
    default:
      return absl::StatusCode::kInternal;
  }
}

// cuGetProcAddress itself: the CUDA 12 form, exported as cuGetProcAddress_v2.
using GetProcAddress = PFN_cuGetProcAddress_v12000;

constexpr const char* kNoDriver = "no NVIDIA driver (libcuda.so.1 not found)";

}  // namespace

absl::Status driver_error(const Driver& driver, const char* call, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  // Either lookup fails for a code this driver does not know.
  if (driver.get_error_name.raw(result, &name) != CUDA_SUCCESS || name == nullptr) name = nullptr;
  if (driver.get_error_string.raw(result, &text) != CUDA_SUCCESS || text == nullptr) text = nullptr;
  std::string what = name != nullptr ? std::string(name) : absl::StrCat("CUresult ", static_cast<int>(result));
  if (text != nullptr) absl::StrAppend(&what, " (", text, ")");
  return absl::Status(code_for(result), absl::StrCat(call, ": ", what));
}

absl::StatusOr<const Driver*> Driver::get() {
  // Resolved once; never destroyed, because buffers and modules released
  // during static destruction still call into the driver.
  static const absl::StatusOr<const Driver*> driver = load();
  return driver;
}

absl::StatusOr<const Driver*> Driver::load() {
  // TESSEL_CUDA_LIBRARY names another driver library (the tests' stand-in).
  TESSEL_ASSIGN_OR_RETURN(const Library library, open_library("TESSEL_CUDA_LIBRARY", {"libcuda.so.1"}, kNoDriver));
  void* const lib = library.handle;
  // Streams share the device's hardware work queues (8 by default); a
  // stream behind an armed wait holds back every stream on its queue, so
  // with plans armed on many peers a user's kernel could wait on a gate only
  // it can open. Ask for the most queues (32) unless the user chose; read
  // when the first context is made, so it fails to apply only where another
  // library made one first.
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", /*overwrite=*/0);
  auto get_proc = reinterpret_cast<GetProcAddress>(dlsym(lib, "cuGetProcAddress_v2"));
  if (get_proc == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("the NVIDIA driver is older than CUDA 12.0 (", library.path,
                     " has no cuGetProcAddress_v2); tessel needs a driver for CUDA 12.0 or newer"));
  }
  auto* d = new Driver();
  std::string missing;
  auto resolve = [&](auto& entry, const char* symbol, int cuda_version, bool required) {
    void* fn = nullptr;
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    // LEGACY_STREAM: stream 0 means the legacy default stream, as the
    // backend's synchronous copies assume.
    CUresult r = get_proc(symbol, &fn, cuda_version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found);
    entry.name_ = symbol;
    entry.driver_ = d;
    if (r == CUDA_SUCCESS && found == CU_GET_PROC_ADDRESS_SUCCESS && fn != nullptr) {
      entry.fn_ = reinterpret_cast<typename std::remove_reference_t<decltype(entry)>::Fn>(fn);
    } else if (required) {
      absl::StrAppend(&missing, missing.empty() ? "" : ", ", symbol, " (CUDA ", cuda_version / 1000, ".",
                      cuda_version % 1000 / 10, ")");
    }
  };
#define TESSEL_CUDA_RESOLVE_ENTRY(member, symbol, pfn, cuda_version, required) \
  resolve(d->member, #symbol, cuda_version, required);
  TESSEL_CUDA_DRIVER_ENTRIES(TESSEL_CUDA_RESOLVE_ENTRY)
#undef TESSEL_CUDA_RESOLVE_ENTRY
  if (!missing.empty()) {
    delete d;
    return absl::UnavailableError(
        absl::StrCat("the NVIDIA driver lacks ", missing, "; tessel needs a driver for CUDA 12.0 or newer"));
  }
  if (absl::Status s = d->init(0); !s.ok()) {
    delete d;
    return absl::UnavailableError(absl::StrCat("the NVIDIA driver did not initialise: ", s.message()));
  }
  if (absl::Status s = d->driver_get_version(&d->version_); !s.ok()) {
    delete d;
    return absl::UnavailableError(s.message());
  }
  return d;
}

}  // namespace tessel::cuda
