// A backend registered from this file alone: Device::open finds it by its
// prefix, error messages list it, and groups know it offers none. Its
// devices keep buffers in host memory and compile nothing, which is all a
// backend must do to be opened.
#include "runtime/backend.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/device_impl.h"
#include "runtime/plans/group.h"
#include "runtime/plans/plan.h"

namespace tessel {
namespace {

using ::testing::HasSubstr;

class FakeDevice final : public DeviceImpl {
 public:
  explicit FakeDevice(int index) : index_(index) {}
  std::string name() const override { return absl::StrCat("fake:", index_); }
  DeviceKind kind() const override { return DeviceKind::kHost; }
  std::string arch() const override { return "fake"; }
  int num_compute_units() const override { return 7; }
  TensorMapEncoding tensor_map_encoding() const override { return TensorMapEncoding::kHost; }
  absl::StatusOr<std::shared_ptr<void>> raw_allocate(size_t bytes) override {
    return std::shared_ptr<void>(std::malloc(bytes), &std::free);
  }
  absl::Status copy_to_device(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status copy_to_host(void* dst, const void* src, size_t bytes) override {
    std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
  absl::Status synchronize() override { return absl::OkStatus(); }
  absl::StatusOr<TensorMap> encode_tensor_map(const TensorMapSpec& spec) override {
    return TensorMap::encode_host(spec);
  }
  absl::StatusOr<std::shared_ptr<FunctionImpl>> compile_uncached(const Kernel& kernel, const CompileOptions&) override {
    return absl::UnimplementedError(absl::StrCat(name(), " compiles nothing ('", kernel.name(), "')"));
  }

 private:
  int index_;
};

absl::StatusOr<std::shared_ptr<DeviceImpl>> open_fake(absl::string_view name, absl::string_view suffix) {
  TESSEL_ASSIGN_OR_RETURN(int index, parse_device_index(name, suffix, "fake index"));
  return std::make_shared<FakeDevice>(index);
}

[[maybe_unused]] const bool registered =
    register_backend({.prefix = "fake", .usage = "fake:N", .open = &open_fake, .make_group = nullptr,
                      .make_joined_group = nullptr});

// A job of one process: the gathers copy, the barrier returns.
class SoloBootstrap final : public Bootstrap {
 public:
  explicit SoloBootstrap(int rank = 0, int size = 1) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  absl::Status all_gather(const void* in, void* out, size_t bytes) override {
    std::memcpy(out, in, bytes);
    return absl::OkStatus();
  }
  absl::Status barrier() override { return absl::OkStatus(); }

 private:
  int rank_, size_;
};

TEST(Backend, ARegisteredBackendOpensByItsPrefix) {
  absl::StatusOr<Device> d = Device::open("fake:3");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->name(), "fake:3");
  EXPECT_EQ(d->arch(), "fake");
  EXPECT_EQ(d->num_compute_units(), 7);
  absl::StatusOr<Buffer> b = d->allocate(64);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(Device::open("fake")->name(), "fake:0");
}

TEST(Backend, ItsErrorsAndItsNameReachUsers) {
  EXPECT_THAT(Device::open("fake:x").status().message(),
              HasSubstr("Device::open('fake:x'): the fake index must be a number >= 0"));
  // An unknown name lists every registered backend, this one included.
  absl::Status unknown = Device::open("tpu:0").status();
  EXPECT_THAT(unknown.message(), HasSubstr("unknown device; use "));
  EXPECT_THAT(unknown.message(), HasSubstr("fake:N"));
  EXPECT_THAT(unknown.message(), HasSubstr("host, host:N"));
  // A prefix must match whole: "fakex" is not "fake".
  EXPECT_THAT(Device::open("fakex:0").status().message(), HasSubstr("unknown device"));
  KernelBuilder k("nothing");
  EXPECT_THAT(Device::open("fake:1")->compile(*k.build()).status().message(),
              HasSubstr("fake:1 compiles nothing ('nothing')"));
}

TEST(Backend, GroupsNeedABackendThatOffersThem) {
  absl::Status s = Group::create({*Device::open("fake:0"), *Device::open("fake:1")}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("fake:0 has no triggered-plan groups"));
  // Ranks of two backends are refused, naming both.
  s = Group::create({*Device::open("host:1"), *Device::open("fake:0")}).status();
  EXPECT_THAT(s.message(), HasSubstr("rank 1 is fake:0 but rank 0 is host:1"));
  // Groups across processes, too.
  s = Group::join(*Device::open("fake:0"), std::make_shared<SoloBootstrap>()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(s.message(), HasSubstr("fake:0 cannot join a group across processes"));
}

TEST(Backend, JoinRefusesABootstrapWithoutThisRank) {
  for (auto [rank, size] : {std::pair{1, 1}, {-1, 2}, {0, 0}, {0, 65}}) {
    absl::Status s = Group::join(*Device::open("host:1"), std::make_shared<SoloBootstrap>(rank, size)).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("the bootstrap says rank ", rank, " of ", size)));
  }
  EXPECT_THAT(Group::join(*Device::open("host:1"), nullptr).status().message(), HasSubstr("no bootstrap"));
}

// One process is a joined group of one rank: it allocates and runs plans.
TEST(Backend, AJoinedGroupOfOneRankRunsAPlan) {
  absl::StatusOr<Group> g = Group::join(*Device::open("host:1"), std::make_shared<SoloBootstrap>());
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->rank(), 0);
  EXPECT_TRUE(g->is_local(0));
  EXPECT_FALSE(g->is_local(1));
  SymmetricBuffer buf = *g->allocate(4096);
  TriggeredPlan plan = *TriggeredPlan::create(*g, buf, {*chunks({8, 32, 4, 0}, 1, 2)});
  EXPECT_TRUE(plan.run().ok());
  EXPECT_TRUE(plan.next_epoch().ok());
  EXPECT_TRUE(plan.destroy().ok());
}

TEST(Backend, TheHostIsRegistered) {
  ASSERT_NE(find_backend("host:2"), nullptr);
  EXPECT_EQ(find_backend("host:2")->prefix, "host");
  EXPECT_EQ(find_backend("nothing"), nullptr);
}

}  // namespace
}  // namespace tessel
