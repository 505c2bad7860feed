// A group joined across two forked processes on the fake libcuda's two
// GPUs: each process exports its chunks as file descriptors (the fake's
// memfds), receives the other's over a Unix socket and maps them, and its
// plan's stream chains copy into the other process's memory. The joined
// CUDA group's whole path, in CI; tests/multiprocess/join_cuda_test.cc runs
// it on GPUs.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "gtest/gtest.h"
#include "runtime/plans/group.h"
#include "tessel/tessel.h"
#include "tests/cuda/fake_cuda_env.h"
#include "tests/multiprocess/join_cases.h"
#include "tests/multiprocess/ranks.h"

namespace tessel {
namespace {

const auto* const kFake = ::testing::AddGlobalTestEnvironment(new fake_cuda::Environment);

TEST(FakeCudaJoin, RunDeliversBatchesIntoTheOtherProcess) {
  std::string failures = multiprocess::run_ranks(2, [](std::shared_ptr<Bootstrap> boot) -> absl::Status {
    TESSEL_ASSIGN_OR_RETURN(Device d, Device::open(absl::StrCat("cuda:", boot->rank())));
    TESSEL_ASSIGN_OR_RETURN(Group g,
                            Group::join(d, boot, {.reserve_bytes = int64_t{1} << 30, .chunk_bytes = int64_t{2} << 20}));
    // 2-D waves past one 2 MiB chunk, so the memory grows while both map it.
    TESSEL_ASSIGN_OR_RETURN(Schedule s, waves({512, 1500, 4, 0}, boot->size(), {64, 128}, 4));
    TESSEL_RETURN_IF_ERROR(multiprocess::deliver_epochs(g, *boot, s, 3));
    fake_cuda::Record record;
    if (record.log().find("cuMemImportFromShareableHandle") == std::string::npos) {
      return absl::InternalError("no chunk of the other process's was imported");
    }
    return absl::OkStatus();
  });
  EXPECT_EQ(failures, "");
}

}  // namespace
}  // namespace tessel
