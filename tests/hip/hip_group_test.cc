// Triggered plans on a group of HIP devices against the fake libamdhip64
// (two GPUs whose streams run their copies, waits and writes in order) and
// the fake libhsakmt (whose SDMA queues run on tessel's software engine):
// symmetric memory through the virtual memory API; 1-D and 2-D batches
// delivered over epochs, armed on SDMA queues and with stream memory
// operations; the choice between them; and the calls that armed them.

#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/plans/plan.h"
#include "tessel/tessel.h"
#include "tests/hip/fake_hip_env.h"
#include "tests/plan_test_util.h"

namespace tessel {
namespace {

using plan_test::expect_epochs_delivered;
using ::testing::HasSubstr;
using ::testing::Not;

const auto* const kFake = ::testing::AddGlobalTestEnvironment(new fake_hip::Environment);

// What the fakes recorded since reset_logs() (nothing where tessel has not
// loaded them).
std::string log_of(const std::string& path, const char* prefix) {
  fake::Record record(path, prefix);
  return record.loaded() ? record.log() : "";
}
std::string fake_log() { return log_of(fake_hip::path(), "fake_hip_"); }
std::string thunk_log() { return log_of(fake_hip::thunk_path(), "fake_hsakmt_"); }
void reset_logs() {
  for (const auto& [path, prefix] :
       {std::pair{fake_hip::path(), "fake_hip_"}, std::pair{fake_hip::thunk_path(), "fake_hsakmt_"}}) {
    fake::Record record(path, prefix);
    if (record.loaded()) record.reset();
  }
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

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

// Runs each plan test with TESSEL_HIP_PLANS set to the parameter.
class HipPlans : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override { reset_logs(); }
  bool sdma() const { return std::string(GetParam()) == "sdma"; }
  // The calls that armed the plan were the engine's own.
  void expect_armed_by_the_engine() const {
    const std::string hip = fake_log(), thunk = thunk_log();
    for (const char* c : {"hipMemAddressReserve", "hipMemCreate", "hipMemMap", "hipMemSetAccess"}) {
      EXPECT_THAT(hip, HasSubstr(c));
    }
    if (sdma()) {
      // A ring of 1 MiB in host memory (non-paged, uncached, host access,
      // executable, no NUMA binding), an xGMI queue to the peer and a
      // PCIe-optimized one for the owner's completions; no stream waits.
      EXPECT_THAT(thunk, HasSubstr("hsaKmtOpenKFD"));
      EXPECT_THAT(thunk, HasSubstr("hsaKmtAllocMemory node 0 bytes 1048576 flags 11043"));
      EXPECT_THAT(thunk, HasSubstr("hsaKmtMapMemoryToGPU"));
      for (const char* q : {"node 1 type 5", "node 2 type 5", "node 1 type 2", "node 2 type 2"}) {
        EXPECT_THAT(thunk, HasSubstr(absl::StrCat("hsaKmtCreateQueue ", q, " bytes 1048576")));
      }
      EXPECT_THAT(hip, Not(HasSubstr("hipStreamWaitValue64")));
      EXPECT_THAT(hip, Not(HasSubstr("hipMemcpyAsync")));
    } else {
      for (const char* c : {"hipStreamCreateWithFlags", "hipStreamWaitValue64", "hipStreamWriteValue64"}) {
        EXPECT_THAT(hip, HasSubstr(c));
      }
      EXPECT_THAT(thunk, Not(HasSubstr("hsaKmtOpenKFD")));
    }
  }
  ScopedEnv plans_{"TESSEL_HIP_PLANS", GetParam()};
};

TEST_P(HipPlans, DeliversOneDimensionalBatchesOverEpochs) {
  {
    absl::StatusOr<Group> g = hip_group();
    ASSERT_TRUE(g.ok()) << g.status();
    std::vector<Batch> batches = {{{{0, 100}, {500, 250}}, 1}, {{{100, 200}, {400, 100}, {750, 250}}, 1}};
    expect_epochs_delivered(*g, Schedule(1000, std::vector<std::vector<Batch>>(2, batches)), 3);
    expect_armed_by_the_engine();
    if (!sdma()) {
      EXPECT_THAT(fake_log(), HasSubstr("hipMemcpyAsync"));
    }
  }
  if (sdma()) {
    // The group's end destroys its queues, frees their rings and closes the KFD.
    const std::string thunk = thunk_log();
    for (const char* c : {"hsaKmtDestroyQueue", "hsaKmtUnmapMemoryToGPU", "hsaKmtFreeMemory", "hsaKmtCloseKFD"}) {
      EXPECT_THAT(thunk, HasSubstr(c));
    }
  }
}

TEST_P(HipPlans, DeliversWavesOfTwoDimensionalTiles) {
  absl::StatusOr<Group> g = hip_group();
  ASSERT_TRUE(g.ok()) << g.status();
  // Two tiles of a 48-column band per wave: 2-D copies of 32 columns.
  expect_epochs_delivered(*g, *waves({45, 48, 4, 0}, 2, {8, 16}, 2), 1);
  expect_armed_by_the_engine();
  if (!sdma()) {
    EXPECT_THAT(fake_log(), HasSubstr("hipMemcpy2DAsync"));
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, HipPlans, ::testing::Values("sdma", "streams"));

// A one-batch plan on a fresh group: its run's outcome.
absl::Status run_one_plan() {
  absl::StatusOr<Group> g = hip_group();
  if (!g.ok()) return g.status();
  Schedule s(512, std::vector<std::vector<Batch>>(2, {{{{0, 512}}, 1}}));
  absl::StatusOr<SymmetricBuffer> buf = g->allocate(s.bytes());
  if (!buf.ok()) return buf.status();
  absl::StatusOr<TriggeredPlan> plan = TriggeredPlan::create(*g, *buf, same(s));
  if (!plan.ok()) return plan.status();
  return plan->run();
}

TEST(HipGroup, WithoutUserQueuesPlansArmOnStreams) {
  ScopedEnv no_kfd("FAKE_HSAKMT_FAIL", "hsaKmtOpenKFD");
  reset_logs();
  absl::Status ran = run_one_plan();
  EXPECT_TRUE(ran.ok()) << ran;
  EXPECT_THAT(fake_log(), HasSubstr("hipStreamWaitValue64"));
  // Asked for by name, their absence is an error that says why.
  ScopedEnv sdma("TESSEL_HIP_PLANS", "sdma");
  absl::Status refused = hip_group().status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.message(), HasSubstr("TESSEL_HIP_PLANS=sdma, but user-mode SDMA queues are unavailable: the "
                                           "KFD did not open ("));
  EXPECT_THAT(refused.message(), HasSubstr("hsaKmtOpenKFD: HSAKMT_STATUS_KERNEL_IO_CHANNEL_NOT_OPENED"));
}

// The thunk is loaded once per process: each failure runs in a child.
TEST(HipGroupDeathTest, ThunkLoadFailuresNameWhatIsMissing) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto group_says = [](const char* library, const std::string& want) {
    setenv("TESSEL_HSAKMT_LIBRARY", library, 1);
    setenv("TESSEL_HIP_PLANS", "sdma", 1);
    const absl::Status s = hip_group().status();
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    std::exit(s.code() == absl::StatusCode::kFailedPrecondition && s.message().find(want) != std::string::npos ? 0
                                                                                                               : 1);
  };
  EXPECT_EXIT(group_says("/nonexistent/libhsakmt.so.1",
                         "user-mode SDMA queues are unavailable: TESSEL_HSAKMT_LIBRARY names "
                         "/nonexistent/libhsakmt.so.1, which does not load"),
              ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(group_says("libm.so.6", "the KFD thunk libm.so.6 lacks hsaKmtOpenKFD, hsaKmtCloseKFD"),
              ::testing::ExitedWithCode(0), "");
}

TEST(HipGroup, GpusTheKfdDoesNotListAreNamed) {
  ScopedEnv sdma("TESSEL_HIP_PLANS", "sdma");
  ScopedEnv moved("FAKE_HSAKMT_MOVED", "1");
  absl::Status s = hip_group().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("user-mode SDMA queues are unavailable: hip:0 (PCI 0000:03:00.0) is not "
                                     "among the 2 GPUs of the KFD topology"));
  ScopedEnv garbled("FAKE_HIP_BUS_ID", "pci-bus-3");
  s = hip_group().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("hipDeviceGetPCIBusId: hip:0 is at \"pci-bus-3\", which is not a PCI address"));
}

TEST(HipGroup, UnknownPlanEnginesAreRefused) {
  ScopedEnv bogus("TESSEL_HIP_PLANS", "dma");
  absl::Status s = hip_group().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("TESSEL_HIP_PLANS is \"dma\": it takes sdma, streams or auto (the default)"));
}

TEST(HipGroup, GpusWithoutXgmiEnginesGetPcieQueues) {
  ScopedEnv sdma("TESSEL_HIP_PLANS", "sdma");
  ScopedEnv no_xgmi("FAKE_HSAKMT_NO_XGMI", "1");
  reset_logs();
  absl::Status ran = run_one_plan();
  EXPECT_TRUE(ran.ok()) << ran;
  EXPECT_THAT(thunk_log(), HasSubstr("hsaKmtCreateQueue node 1 type 2"));
  EXPECT_THAT(thunk_log(), Not(HasSubstr("type 5")));
}

TEST(HipGroup, ThunkFailuresNameTheQueueAndTheCall) {
  ScopedEnv sdma("TESSEL_HIP_PLANS", "sdma");
  for (auto [fail, code, what] :
       {std::tuple{"hsaKmtCreateQueue", absl::StatusCode::kResourceExhausted,
                   "hsaKmtCreateQueue: HSAKMT_STATUS_OUT_OF_RESOURCES"},
        std::tuple{"hsaKmtAllocMemory", absl::StatusCode::kResourceExhausted,
                   "hsaKmtAllocMemory: HSAKMT_STATUS_NO_MEMORY"},
        std::tuple{"hsaKmtMapMemoryToGPU", absl::StatusCode::kResourceExhausted,
                   "hsaKmtMapMemoryToGPU: HSAKMT_STATUS_NO_MEMORY"}}) {
    ScopedEnv failing("FAKE_HSAKMT_FAIL", fail);
    absl::Status s = run_one_plan();
    EXPECT_EQ(s.code(), code) << fail;
    EXPECT_THAT(s.message(), HasSubstr("SDMA queue hip:0 -> hip:0 on KFD node 1: ")) << fail;
    EXPECT_THAT(s.message(), HasSubstr(what));
  }
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
