// Internal: what the processes of a joined group agree on and hand each
// other through their Bootstrap. Each helper is collective, and a process
// whose own step failed still takes part, so that every process returns an
// error instead of leaving the others waiting.
#pragma once

#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/status.h"
#include "runtime/plans/bootstrap.h"

namespace tessel {

// Every process's `mine`, in rank order; errors are prefixed with `what`.
template <class T>
absl::StatusOr<std::vector<T>> gather(Bootstrap& boot, const T& mine, absl::string_view what) {
  static_assert(std::is_trivially_copyable_v<T>, "gathered as bytes");
  std::vector<T> all(boot.size());
  TESSEL_RETURN_IF_ERROR(prefixed(what, boot.all_gather(&mine, all.data(), sizeof(T))));
  return all;
}

// `local` where it is an error; otherwise OK unless another process's step
// failed, then FailedPrecondition naming the first such rank (whose own
// error says why). `what` names the step.
absl::Status agree_ok(Bootstrap& boot, const absl::Status& local, absl::string_view what);

// Every process passes a file descriptor (or -1 where it has none to give:
// then every process fails) and gets one per rank: its own at rank(), the
// others received over Unix sockets (SCM_RIGHTS), so that each process can
// map what a peer's descriptor names. The caller owns them all.
absl::StatusOr<std::vector<int>> exchange_fds(Bootstrap& boot, int fd, absl::string_view what);

}  // namespace tessel
