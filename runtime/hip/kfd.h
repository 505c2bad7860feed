// User-mode SDMA queues on AMD GPUs, made through the KFD thunk
// (libhsakmt), loaded at run time like the HIP runtime. A HIP group arms
// its triggered plans' packet chains on them (runtime/sdma/armer.h), so the
// copy engines deliver batches without HIP streams in between.
//
// A queue's ring is host memory the thunk allocates (non-paged, uncached,
// executable, mapped to the GPUs); the thunk returns where the engine writes
// back its read position, where the write position goes, and the mapped
// doorbell (ROCm's protocol: amd.md section 2). The thunk's declarations are
// tessel's own (kfd_api.h), for the layouts ROCm 5.2 through 7 share.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/hip/hip_runtime.h"
#include "runtime/hip/kfd_api.h"
#include "runtime/sdma/engine.h"

namespace tessel::hip {

// "hsaKmtCreateQueue: HSAKMT_STATUS_OUT_OF_RESOURCES", with a status code
// for the kind of failure.
absl::Status thunk_error(const char* call, HSAKMT_STATUS status);

// The thunk's entries tessel calls.
struct Thunk {
  // The process's thunk, or kUnavailable: no libhsakmt (TESSEL_HSAKMT_LIBRARY
  // names another file to load), or one without a call tessel needs. The
  // outcome of the first call is kept for the life of the process.
  static absl::StatusOr<const Thunk*> get();

  std::string library;
#define TESSEL_KFD_DECLARE_ENTRY(member, symbol) PFN_##symbol member = nullptr;
  TESSEL_KFD_ENTRIES(TESSEL_KFD_DECLARE_ENTRY)
#undef TESSEL_KFD_DECLARE_ENTRY
};

// The KFD opened for the GPUs of one group.
class Kfd {
 public:
  // kUnavailable naming what is missing: the thunk, /dev/kfd (hsaKmtOpenKFD's
  // error), or a GPU the KFD topology does not list. `devices` are HIP
  // device indices.
  static absl::StatusOr<std::unique_ptr<Kfd>> open(const Runtime& hip, const std::vector<int>& devices);
  ~Kfd();
  Kfd(const Kfd&) = delete;
  Kfd& operator=(const Kfd&) = delete;

  // An SDMA queue of `ring_bytes` on the GPU of `rank`, for copies to the
  // GPU of `peer` (its own for completions): an xGMI engine's queue where
  // the GPU has them and the copy goes to a peer.
  absl::StatusOr<std::unique_ptr<sdma::Queue>> queue(int rank, int peer, int64_t ring_bytes, std::string name) const;

  // The KFD node of each rank's GPU.
  const std::vector<uint32_t>& nodes() const { return nodes_; }

 private:
  explicit Kfd(const Thunk& thunk) : thunk_(thunk) {}

  const Thunk& thunk_;
  std::vector<uint32_t> nodes_;
  std::vector<bool> xgmi_;  // per rank: the GPU has xGMI SDMA engines
};

}  // namespace tessel::hip
