// How the processes of one job find each other: a group joined across
// processes (Group::join) exchanges addresses and file descriptors through
// the launcher that started them. tessel starts no processes of its own;
// runtime/plans/mpi_bootstrap.h adapts an MPI communicator, and any launcher
// with an all-gather and a barrier can implement the interface.
#pragma once

#include <cstddef>

#include "absl/status/status.h"

namespace tessel {

// Every call is collective: each process of the job makes it, in the same
// order. A process that never does leaves the others waiting, as in any
// collective of the launcher's.
class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  // This process's rank, in [0, size()).
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Gathers `bytes` bytes from every process into `out` (size() * bytes:
  // rank r's at r * bytes).
  virtual absl::Status all_gather(const void* in, void* out, size_t bytes) = 0;
  // Returns once every process has called it.
  virtual absl::Status barrier() = 0;
};

}  // namespace tessel
