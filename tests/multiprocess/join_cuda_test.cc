// Groups joined across processes on NVIDIA GPUs: two forked processes, on
// two GPUs where there are two, else both on one. Each exports its chunks
// as file descriptors and maps the other's; plans' stream chains copy into
// the other process's memory. Skips without a GPU. The parent never touches
// CUDA (a forked child may not use a context its parent made).
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "gtest/gtest.h"
#include "runtime/plans/group.h"
#include "runtime/plans/plan.h"
#include "samples/allgather.h"
#include "tests/multiprocess/join_cases.h"
#include "tests/multiprocess/ranks.h"

namespace tessel {
namespace {

using multiprocess::kSkip;
using multiprocess::run_ranks;

// Rank r's GPU: cuda:r where it exists, else cuda:0.
absl::StatusOr<Group> join_gpu(std::shared_ptr<Bootstrap> boot) {
  absl::StatusOr<Device> d = Device::open(absl::StrCat("cuda:", boot->rank()));
  if (!d.ok()) d = Device::open("cuda:0");
  // Every process agrees to skip, or none does.
  const char have = d.ok() ? 1 : 0;
  std::vector<char> all(boot->size());
  TESSEL_RETURN_IF_ERROR(boot->all_gather(&have, all.data(), 1));
  for (char h : all) {
    if (h == 0) return absl::UnavailableError(absl::StrCat(kSkip, "no CUDA device in every process"));
  }
  return Group::join(*d, std::move(boot), {.reserve_bytes = int64_t{4} << 30, .chunk_bytes = int64_t{64} << 20});
}

void expect_passed_or_skipped(const std::string& failures) {
  if (absl::StartsWith(failures, kSkip)) GTEST_SKIP() << failures;
  EXPECT_EQ(failures, "");
}

TEST(JoinCuda, RunDeliversBatchesIntoTheOtherProcess) {
  expect_passed_or_skipped(run_ranks(2, [](std::shared_ptr<Bootstrap> boot) -> absl::Status {
    TESSEL_ASSIGN_OR_RETURN(Group g, join_gpu(boot));
    // 2-D waves past one 64 MiB chunk, so the memory grows while both map it.
    TESSEL_ASSIGN_OR_RETURN(Schedule s, waves({2048, 9000, 4, 0}, boot->size(), {128, 256}, 8));
    return multiprocess::deliver_epochs(g, *boot, s, 3);
  }));
}

TEST(JoinCuda, KernelsPublishAndWaitAcrossProcesses) {
  expect_passed_or_skipped(run_ranks(2, [](std::shared_ptr<Bootstrap> boot) -> absl::Status {
    TESSEL_ASSIGN_OR_RETURN(Group g, join_gpu(boot));
    TESSEL_ASSIGN_OR_RETURN(auto ag, samples::AllGather::create(g, {.rows = 512, .cols = 4096, .programs = 32}));
    TESSEL_RETURN_IF_ERROR(ag->arm());
    for (int epoch = 1; epoch <= 4; ++epoch) {
      TESSEL_ASSIGN_OR_RETURN(int64_t wrong, ag->run_epoch());
      if (wrong != 0) return absl::InternalError(absl::StrCat(wrong, " wrong elements in epoch ", epoch));
      TESSEL_RETURN_IF_ERROR(ag->plan().next_epoch());
    }
    return ag->disarm();
  }));
}

}  // namespace
}  // namespace tessel
