// A Bootstrap over an MPI communicator, for programs built with MPI
// (mpicxx): libtessel.so does not link MPI, so this header is compiled into
// the program that includes it.
//
//   MPI_Init(&argc, &argv);
//   auto boot = std::make_shared<tessel::MpiBootstrap>(MPI_COMM_WORLD);
//   auto group = tessel::Group::join(device, boot);
#pragma once

#include <mpi.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/plans/bootstrap.h"

namespace tessel {

class MpiBootstrap final : public Bootstrap {
 public:
  // Collective over `comm`, which it duplicates: tessel's exchanges never
  // match the program's own messages.
  explicit MpiBootstrap(MPI_Comm comm) {
    MPI_Comm_dup(comm, &comm_);
    // Errors come back as statuses rather than ending the job.
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiBootstrap() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Comm_free(&comm_);
  }
  MpiBootstrap(const MpiBootstrap&) = delete;
  MpiBootstrap& operator=(const MpiBootstrap&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  absl::Status all_gather(const void* in, void* out, size_t bytes) override {
    if (bytes > static_cast<size_t>(INT32_MAX)) {
      return absl::InvalidArgumentError(
          absl::StrCat("MpiBootstrap::all_gather: ", bytes, " bytes is past MPI's count"));
    }
    int n = static_cast<int>(bytes);
    return checked("MPI_Allgather", MPI_Allgather(in, n, MPI_BYTE, out, n, MPI_BYTE, comm_));
  }
  absl::Status barrier() override { return checked("MPI_Barrier", MPI_Barrier(comm_)); }

 private:
  static absl::Status checked(const char* call, int code) {
    if (code == MPI_SUCCESS) return absl::OkStatus();
    char text[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, text, &length);
    return absl::UnavailableError(absl::StrCat("MpiBootstrap: ", call, " failed: ", std::string(text, length)));
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace tessel
