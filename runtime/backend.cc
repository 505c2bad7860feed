#include "runtime/backend.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "base/status.h"

namespace tessel {
namespace {

struct Registry {
  absl::Mutex mu;
  // Held by pointer: find_backend hands out addresses that later
  // registrations must not move.
  std::vector<std::unique_ptr<Backend>> backends ABSL_GUARDED_BY(mu);
};

// Built on first use, so registrations from any file's static initializers
// find it ready whatever the order; never destroyed, since devices can be
// opened during static destruction.
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

}  // namespace

bool register_backend(Backend backend) {
  Registry& r = registry();
  absl::MutexLock lock(&r.mu);
  for (const auto& b : r.backends) TESSEL_CHECK(b->prefix != backend.prefix, "two device backends share a prefix");
  r.backends.push_back(std::make_unique<Backend>(std::move(backend)));
  return true;
}

const Backend* find_backend(absl::string_view device_name) {
  absl::string_view prefix = device_name.substr(0, device_name.find(':'));
  Registry& r = registry();
  absl::MutexLock lock(&r.mu);
  for (const auto& b : r.backends) {
    if (b->prefix == prefix) return b.get();
  }
  return nullptr;
}

std::string backend_usage() {
  Registry& r = registry();
  absl::MutexLock lock(&r.mu);
  std::vector<std::string> forms;
  for (const auto& b : r.backends) forms.push_back(b->usage);
  std::sort(forms.begin(), forms.end());
  return absl::StrJoin(forms, ", ");
}

absl::StatusOr<int> parse_device_index(absl::string_view name, absl::string_view suffix, absl::string_view noun) {
  int index = 0;
  if (!suffix.empty() && (!absl::SimpleAtoi(suffix, &index) || index < 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Device::open('", name, "'): the ", noun, " must be a number >= 0"));
  }
  return index;
}

}  // namespace tessel
