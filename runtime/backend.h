// Internal: the registry of device backends. Each backend registers itself
// from its own file (a static `register_backend` call), so adding one (HIP,
// a test double) needs no edit anywhere else in runtime/: Device::open finds
// it by the prefix of the device name, and Group::create by its devices'.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/device.h"
#include "runtime/plans/bootstrap.h"

namespace tessel {

class DeviceImpl;
class GroupBackend;

struct Backend {
  // The device names it opens: "<prefix>" and "<prefix>:<suffix>".
  std::string prefix;
  // How the names read, for errors listing what exists: "cuda:N".
  std::string usage;
  // Opens `name`; `suffix` is what follows "<prefix>:" (empty without a colon).
  std::function<absl::StatusOr<std::shared_ptr<DeviceImpl>>(absl::string_view name, absl::string_view suffix)> open;
  // Triggered-plan groups of this backend's devices; null where it has none.
  std::function<absl::StatusOr<std::unique_ptr<GroupBackend>>(const std::vector<Device>& devices)> make_group;
  // Groups joined across processes, this process holding `device` as rank
  // bootstrap->rank(); null where it has none.
  std::function<absl::StatusOr<std::unique_ptr<GroupBackend>>(const Device& device,
                                                              std::shared_ptr<Bootstrap> bootstrap)>
      make_joined_group;
};

// Adds `backend`; returns true so that a file can register with
// `static const bool registered = register_backend({...});`. A second
// backend with a prefix already taken is a bug in tessel (checked).
bool register_backend(Backend backend);

// The backend whose prefix begins `device_name` ("cuda" for "cuda:1"), or null.
const Backend* find_backend(absl::string_view device_name);

// "host, host:N, cuda:N": every registered name form, for messages.
std::string backend_usage();

// The device index in `suffix` ("3" of "cuda:3"; empty is 0, as in PyTorch),
// or InvalidArgument naming `name` and what the index counts (`noun`: "GPU index").
absl::StatusOr<int> parse_device_index(absl::string_view name, absl::string_view suffix, absl::string_view noun);

}  // namespace tessel
