// Triggered plans on a group of HIP devices, armed with stream memory
// operations, against the fake libamdhip64 (two GPUs whose streams run
// their copies, waits and writes in order): symmetric memory through the
// virtual memory API, 1-D and 2-D batches delivered over epochs, and the
// calls that armed them.
#include <dlfcn.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/plans/plan.h"
#include "tessel/tessel.h"
#include "tests/hip/fake_hip_env.h"
#include "tests/plan_test_util.h"

namespace tessel {
namespace {

using plan_test::expect_delivered;
using plan_test::fill;
using ::testing::HasSubstr;

const auto* const kFake = ::testing::AddGlobalTestEnvironment(new fake_hip::Environment);

std::string fake_log() {
  void* lib = dlopen(fake_hip::path().c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) return "";
  std::string log = reinterpret_cast<const char* (*)()>(dlsym(lib, "fake_hip_log"))();
  dlclose(lib);
  return log;
}

absl::StatusOr<Group> hip_group() {
  std::vector<Device> devices;
  for (const char* name : {"hip:0", "hip:1"}) {
    absl::StatusOr<Device> d = Device::open(name);
    if (!d.ok()) return d.status();
    devices.push_back(*d);
  }
  return Group::create(devices, {.reserve_bytes = int64_t{1} << 26, .chunk_bytes = int64_t{1} << 20});
}

std::vector<Schedule> same(const Schedule& s) { return std::vector<Schedule>(2, s); }

TEST(HipGroup, DeliversOneDimensionalBatchesOverEpochs) {
  absl::StatusOr<Group> g = hip_group();
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<Batch> batches = {{{{0, 100}, {500, 250}}, 1}, {{{100, 200}, {400, 100}, {750, 250}}, 1}};
  Schedule s(1000, std::vector<std::vector<Batch>>(2, batches));
  absl::StatusOr<SymmetricBuffer> buf = g->allocate(s.bytes());
  ASSERT_TRUE(buf.ok()) << buf.status();
  absl::StatusOr<TriggeredPlan> plan = TriggeredPlan::create(*g, *buf, same(s));
  ASSERT_TRUE(plan.ok()) << plan.status();
  for (uint64_t epoch = 1; epoch <= 3; ++epoch) {
    fill(*buf, s, 2, epoch);
    absl::Status ran = plan->run();
    ASSERT_TRUE(ran.ok()) << ran;
    expect_delivered(*buf, s, 2, epoch);
    if (epoch < 3) {
      ASSERT_TRUE(plan->next_epoch().ok());
    }
  }
  const std::string log = fake_log();
  for (const char* call :
       {"hipMemAddressReserve", "hipMemCreate", "hipMemMap", "hipMemSetAccess", "hipStreamCreateWithFlags",
        "hipStreamWaitValue64", "hipMemcpyAsync", "hipStreamWriteValue64"}) {
    EXPECT_THAT(log, HasSubstr(call));
  }
}

TEST(HipGroup, DeliversWavesOfTwoDimensionalTiles) {
  absl::StatusOr<Group> g = hip_group();
  ASSERT_TRUE(g.ok()) << g.status();
  // Two tiles of a 48-column band per wave: 2-D copies of 32 columns.
  Schedule s = *waves({45, 48, 4, 0}, 2, {8, 16}, 2);
  absl::StatusOr<SymmetricBuffer> buf = g->allocate(s.bytes());
  ASSERT_TRUE(buf.ok()) << buf.status();
  absl::StatusOr<TriggeredPlan> plan = TriggeredPlan::create(*g, *buf, same(s));
  ASSERT_TRUE(plan.ok()) << plan.status();
  fill(*buf, s, 2, 1);
  absl::Status ran = plan->run();
  ASSERT_TRUE(ran.ok()) << ran;
  expect_delivered(*buf, s, 2, 1);
  EXPECT_THAT(fake_log(), HasSubstr("hipMemcpy2DAsync"));
}

TEST(HipGroup, NoPeerAccessAndFailedMappingsAreNamed) {
  setenv("FAKE_HIP_NO_PEER", "1", 1);
  absl::Status no_peer = hip_group().status();
  unsetenv("FAKE_HIP_NO_PEER");
  EXPECT_EQ(no_peer.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(no_peer.message(), HasSubstr("hip:0 cannot access the memory of hip:1 (no peer access)"));
  absl::StatusOr<Group> g = hip_group();
  ASSERT_TRUE(g.ok()) << g.status();
  setenv("FAKE_HIP_FAIL", "hipMemCreate", 1);
  absl::Status mapped = g->allocate(4096).status();
  unsetenv("FAKE_HIP_FAIL");
  EXPECT_EQ(mapped.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(mapped.message(), HasSubstr("hip:0: mapping 1048576 bytes of symmetric memory: hipMemCreate: "
                                          "hipErrorOutOfMemory"));
}

}  // namespace
}  // namespace tessel
