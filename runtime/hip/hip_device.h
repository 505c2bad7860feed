// Internal: what other parts of the HIP backend need of a HIP device.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/device.h"
#include "runtime/hip/hip_runtime.h"

namespace tessel {
class GroupBackend;
}

namespace tessel::hip {

// The runtime and device index behind a "hip:N" device.
struct Rank {
  const Runtime* runtime = nullptr;
  int index = 0;
};
absl::StatusOr<Rank> rank_of(const Device& device);

// Triggered-plan groups of HIP devices (hip_group.cc).
absl::StatusOr<std::unique_ptr<GroupBackend>> make_group_backend(const std::vector<Device>& devices);

}  // namespace tessel::hip
