// Triggered plans on a group of two CUDA devices against the fake libcuda,
// whose streams run their copies, 64-bit waits and writes in order:
// symmetric memory through the virtual memory API, 1-D and 2-D batches
// delivered over epochs by the copy chains armed on streams, and the calls
// that armed them. The GPU suites run the same plans on GPUs.
#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/plans/plan.h"
#include "tessel/tessel.h"
#include "tests/cuda/fake_cuda_env.h"
#include "tests/plan_test_util.h"

namespace tessel {
namespace {

using plan_test::expect_epochs_delivered;
using ::testing::HasSubstr;

const auto* const kFake = ::testing::AddGlobalTestEnvironment(new fake_cuda::Environment);

absl::StatusOr<Group> cuda_group() {
  std::vector<Device> devices;
  for (const char* name : {"cuda:0", "cuda:1"}) {
    absl::StatusOr<Device> d = Device::open(name);
    if (!d.ok()) return d.status();
    devices.push_back(*d);
  }
  return Group::create(devices, {.reserve_bytes = int64_t{1} << 26, .chunk_bytes = int64_t{1} << 21});
}

// The calls after the group reserved its address space: symmetric memory
// mapped on both GPUs, and chains of waits, copies and batched gate writes
// on streams.
void expect_armed_on_streams(const std::string& log) {
  for (const char* c :
       {"cuMemCreate", "cuMemMap", "cuMemSetAccess", "cuStreamCreate", "cuStreamWaitValue64", "cuStreamBatchMemOp"}) {
    EXPECT_THAT(log, HasSubstr(c));
  }
}

TEST(FakeCudaPlans, DeliversOneDimensionalBatchesOverEpochs) {
  absl::StatusOr<Group> g = cuda_group();
  ASSERT_TRUE(g.ok()) << g.status();
  fake_cuda::Record record;
  record.reset();
  std::vector<Batch> batches = {{{{0, 100}, {500, 250}}, 1}, {{{100, 200}, {400, 100}, {750, 250}}, 1}};
  expect_epochs_delivered(*g, Schedule(1000, std::vector<std::vector<Batch>>(2, batches)), 3);
  expect_armed_on_streams(record.log());
}

TEST(FakeCudaPlans, DeliversWavesOfTwoDimensionalTiles) {
  absl::StatusOr<Group> g = cuda_group();
  ASSERT_TRUE(g.ok()) << g.status();
  fake_cuda::Record record;
  record.reset();
  // Two tiles of a 48-column band per wave: 2-D copies of 32 columns.
  expect_epochs_delivered(*g, *waves({45, 48, 4, 0}, 2, {8, 16}, 2), 1);
  expect_armed_on_streams(record.log());
  EXPECT_THAT(record.log(), HasSubstr("cuMemcpy2DAsync"));
}

TEST(FakeCudaPlans, AGroupWhoseMemoryCannotBeMappedSaysWhich) {
  absl::StatusOr<Group> g = cuda_group();
  ASSERT_TRUE(g.ok()) << g.status();
  fake_cuda::Record record;
  setenv("FAKE_CUDA_FAIL", "cuMemCreate", 1);
  absl::StatusOr<SymmetricBuffer> buf = g->allocate(4096);
  unsetenv("FAKE_CUDA_FAIL");
  EXPECT_EQ(buf.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(buf.status().message()), HasSubstr("cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY"));
}

}  // namespace
}  // namespace tessel
