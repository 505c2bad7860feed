// A group joined across MPI processes, one host rank each: the all-gather
// sample's producers publish wave by wave, the plan's chains carry each
// batch into every other process, and every rank's check kernel counts
// wrong elements. Run under mpirun; exits non-zero on any error.
#include <mpi.h>

#include <cstdio>
#include <memory>

#include "runtime/plans/group.h"
#include "runtime/plans/mpi_bootstrap.h"
#include "samples/allgather.h"

namespace {

absl::Status run() {
  auto boot = std::make_shared<tessel::MpiBootstrap>(MPI_COMM_WORLD);
  const int rank = boot->rank();
  absl::StatusOr<tessel::Device> device = tessel::Device::open("host:2");
  if (!device.ok()) return device.status();
  absl::StatusOr<tessel::Group> group =
      tessel::Group::join(*device, boot, {.reserve_bytes = int64_t{1} << 30, .chunk_bytes = int64_t{1} << 20});
  if (!group.ok()) return group.status();
  auto ag = samples::AllGather::create(*group, {.rows = 96, .cols = 200, .programs = 4, .check_programs = 2});
  if (!ag.ok()) return ag.status();
  if (absl::Status s = (*ag)->arm(); !s.ok()) return s;
  constexpr int kEpochs = 5;
  for (int epoch = 1; epoch <= kEpochs; ++epoch) {
    absl::StatusOr<int64_t> wrong = (*ag)->run_epoch();
    if (!wrong.ok()) return wrong.status();
    if (*wrong != 0) return absl::InternalError(absl::StrCat(*wrong, " wrong elements in epoch ", epoch));
    if (absl::Status s = (*ag)->plan().next_epoch(); !s.ok()) return s;
  }
  std::printf("rank %d of %d: %d epochs gathered, no wrong elements\n", rank, group->size(), kEpochs);
  return (*ag)->disarm();
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  absl::Status s = run();
  if (!s.ok()) std::fprintf(stderr, "mpi_allgather: %s\n", s.ToString().c_str());
  MPI_Finalize();
  return s.ok() ? 0 : 1;
}
