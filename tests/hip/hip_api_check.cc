// tessel's declarations of the HIP runtime (runtime/hip/hip_api.h, the
// entries of runtime/hip/hip_runtime.h) against HIP's hip_runtime_api.h
// (libamdhip64-dev): every entry's arity and the size, signedness and
// pointer-ness of its result and each parameter, the constants tessel
// passes and compares, and where the older device-properties struct keeps
// the architecture name. Debian 12 has HIP 5.2's headers; the entries hold
// the ABI from 5.2 on (hip_api.h), except hipGetDevicePropertiesR0600,
// which 5.2 lacks, and hipMemAllocationProp, laid out as ROCm 6 has it.
// Static asserts, but the launch parameters' values, which HIP's header
// defines as pointer macros, are compared when it runs; built where the
// header is found (tests/CMakeLists.txt).

// clang-format off
#include "runtime/hip/hip_runtime.h"
namespace {
// Before HIP's header, whose macros of the same names would replace them.
void* const kBufferPointer = tessel::hip::HIP_LAUNCH_PARAM_BUFFER_POINTER;
void* const kBufferSize = tessel::hip::HIP_LAUNCH_PARAM_BUFFER_SIZE;
void* const kEnd = tessel::hip::HIP_LAUNCH_PARAM_END;
constexpr unsigned kEventDisableTiming = tessel::hip::hipEventDisableTiming;
constexpr unsigned kStreamNonBlocking = tessel::hip::hipStreamNonBlocking;
constexpr unsigned kHostMallocPortable = tessel::hip::hipHostMallocPortable;
constexpr unsigned kHostMallocMapped = tessel::hip::hipHostMallocMapped;
constexpr unsigned kStreamWaitValueGte = tessel::hip::hipStreamWaitValueGte;
}  // namespace
#define __HIP_PLATFORM_AMD__
#include <hip/hip_runtime_api.h>
// clang-format on

#include <cstddef>
#include <cstdio>
#include <type_traits>

namespace {

namespace t = ::tessel::hip;

// Passed alike: both pointers, or integers or floats of one size and
// signedness (an enum as an integer of its size).
template <class T, class U>
constexpr bool same_abi_value() {
  if constexpr (std::is_pointer_v<T> || std::is_pointer_v<U>) {
    return std::is_pointer_v<T> && std::is_pointer_v<U>;
  } else if constexpr (std::is_enum_v<U>) {
    return std::is_integral_v<T> && sizeof(T) == sizeof(U);
  } else {
    return sizeof(T) == sizeof(U) && std::is_integral_v<T> == std::is_integral_v<U> &&
           std::is_signed_v<T> == std::is_signed_v<U>;
  }
}
template <class RA, class... A, class RB, class... B>
constexpr bool same_abi(RA (*)(A...), RB (*)(B...)) {
  if constexpr (sizeof...(A) != sizeof...(B)) {
    return false;
  } else {
    return same_abi_value<RA, RB>() && (same_abi_value<A, B>() && ...);
  }
}

// HIP's C++ header adds template overloads of these two; the casts pick
// the C functions.
constexpr auto hip_malloc = static_cast<hipError_t (*)(void**, size_t)>(&::hipMalloc);
constexpr auto hip_host_malloc = static_cast<hipError_t (*)(void**, size_t, unsigned)>(&::hipHostMalloc);

#define TESSEL_CHECK_ENTRY(member, symbol, required) \
  static_assert(same_abi(static_cast<t::PFN_##symbol>(nullptr), symbol), #symbol);
#define hipGetDevicePropertiesR0600 hipGetDeviceProperties  // 5.2's form of the same call
#define hipMalloc hip_malloc
#define hipHostMalloc hip_host_malloc
TESSEL_HIP_ENTRIES(TESSEL_CHECK_ENTRY)
#undef hipMalloc
#undef hipHostMalloc
#undef hipGetDevicePropertiesR0600
static_assert(same_abi(static_cast<t::PFN_hipGetErrorName>(nullptr), &::hipGetErrorName));
static_assert(same_abi(static_cast<t::PFN_hipGetErrorString>(nullptr), &::hipGetErrorString));

static_assert(t::hipSuccess == ::hipSuccess && t::hipErrorInvalidValue == ::hipErrorInvalidValue);
static_assert(t::hipErrorOutOfMemory == ::hipErrorOutOfMemory);
static_assert(t::hipErrorNotInitialized == ::hipErrorNotInitialized && t::hipErrorNoDevice == ::hipErrorNoDevice);
static_assert(t::hipErrorInvalidDevice == ::hipErrorInvalidDevice && t::hipErrorInvalidImage == ::hipErrorInvalidImage);
static_assert(t::hipErrorNoBinaryForGpu == ::hipErrorNoBinaryForGpu && t::hipErrorNotFound == ::hipErrorNotFound);
static_assert(t::hipErrorNotSupported == ::hipErrorNotSupported && t::hipErrorNotReady == ::hipErrorNotReady);
static_assert(t::hipStreamCaptureModeThreadLocal == ::hipStreamCaptureModeThreadLocal);
static_assert(t::hipDeviceAttributeMultiprocessorCount == ::hipDeviceAttributeMultiprocessorCount);
static_assert(t::hipMemcpyHostToDevice == ::hipMemcpyHostToDevice &&
              t::hipMemcpyDeviceToHost == ::hipMemcpyDeviceToHost);
static_assert(t::hipMemcpyDeviceToDevice == ::hipMemcpyDeviceToDevice);
static_assert(kEventDisableTiming == hipEventDisableTiming && kStreamNonBlocking == hipStreamNonBlocking);
static_assert(kHostMallocPortable == hipHostMallocPortable && kHostMallocMapped == hipHostMallocMapped);
static_assert(kStreamWaitValueGte == hipStreamWaitValueGte);
static_assert(t::hipMemLocationTypeDevice == ::hipMemLocationTypeDevice);
static_assert(t::hipMemAllocationTypePinned == ::hipMemAllocationTypePinned);
static_assert(t::hipMemAccessFlagsProtReadWrite == ::hipMemAccessFlagsProtReadWrite);
static_assert(t::hipMemAllocationGranularityRecommended == ::hipMemAllocationGranularityRecommended);
static_assert(sizeof(t::hipMemAccessDesc) == sizeof(::hipMemAccessDesc));
static_assert(offsetof(hipDeviceProp_t, gcnArchName) == t::kArchNameOffsetR0000);
static_assert(sizeof(hipDeviceProp_t) <= t::kDevicePropertiesBytes);

}  // namespace

int main() {
  const bool ok = kBufferPointer == HIP_LAUNCH_PARAM_BUFFER_POINTER && kBufferSize == HIP_LAUNCH_PARAM_BUFFER_SIZE &&
                  kEnd == HIP_LAUNCH_PARAM_END;
  if (!ok) std::fprintf(stderr, "mismatch: the HIP_LAUNCH_PARAM_* values\n");
  return ok ? 0 : 1;
}
