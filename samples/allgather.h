// A triggered all-gather driven epoch by epoch: every rank's producer writes
// its shard tile by tile and publishes one batch per wave; copy chains armed
// by the plan carry each batch to every peer; every rank's check kernel waits
// for all batches and counts wrong elements. Shared by the allgather sample,
// the plan tests and the benchmark.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "runtime/device.h"
#include "runtime/plans/group.h"
#include "runtime/plans/plan.h"
#include "samples/kernels.h"

namespace samples {

struct AllGatherConfig {
  int rows = 256;        // of each rank's shard
  int cols = 1000;       // elements (i32) per row
  int programs = 8;      // producer programs (persistent); the schedule's waves follow them
  int check_programs = 8;
  int passes = 1;      // times the producer writes each tile (benchmarks slow it down)
  int rounds = 0;      // multiply-adds per element, and as many undoing them, before its stores
  int waves_per_batch = 1;  // waves of `programs` tiles in a batch
  bool defer = true;        // producers defer all but their last publish's fence (publish(b, defer))
  bool check = true;   // false: producers only (benchmarks time the transfer alone)
};

class AllGather {
 public:
  // Allocates the buffer and compiles and loads the kernels; arm() makes the plan.
  static absl::StatusOr<std::unique_ptr<AllGather>> create(const tessel::Group& group, const AllGatherConfig& config) {
    using namespace tessel;  // NOLINT
    auto ag = std::unique_ptr<AllGather>(new AllGather(group, config));
    int world = group.size();
    ScheduleView view{config.rows, config.cols, 4, 0};
    absl::StatusOr<Schedule> schedule =
        waves(view, world, {kAgBM, kAgBN}, config.programs, TileOrder::kRowMajor, config.waves_per_batch);
    if (!schedule.ok()) return schedule.status();
    absl::StatusOr<SymmetricBuffer> buf = group.allocate(schedule->bytes());
    if (!buf.ok()) return buf.status();
    ag->buffer_ = *buf;
    absl::StatusOr<Kernel> producer = allgather_producer_kernel(), check = allgather_check_kernel();
    if (!producer.ok()) return producer.status();
    if (!check.ok()) return check.status();
    for (int r = 0; r < world; ++r) {
      if (!group.is_local(r)) continue;  // its own process runs it
      const Device& d = group.device(r);
      absl::StatusOr<Function> p = d.compile(*producer), c = d.compile(*check);
      if (!p.ok()) return p.status();
      if (!c.ok()) return c.status();
      absl::StatusOr<Buffer> errors = d.allocate(sizeof(int32_t));
      if (!errors.ok()) return errors.status();
      absl::StatusOr<Stream> stream = d.create_stream();
      if (!stream.ok()) return stream.status();
      // The variants the epochs will launch are loaded before the plan arms
      // its chains: no code may be loaded on the device while they are armed.
      ViewHeader* no_view = nullptr;  // the variants do not depend on the view
      int32_t first = static_cast<int32_t>(*batch_id(*schedule, r, 0));
      int32_t total = world * config.rows * config.cols, batches = static_cast<int32_t>(schedule->num_batches());
      int32_t* data = ag->buffer_.as<int32_t>(r);
      absl::Status prepared = p->prepare(no_view, data, r, config.rows, config.cols, 1, first, config.passes,
                                           config.rounds, config.waves_per_batch, config.defer);
      if (prepared.ok()) prepared = c->prepare(no_view, data, total, batches, 1, *errors);
      if (!prepared.ok()) return prepared;
      ag->producers_.push_back(*p);
      ag->checks_.push_back(*c);
      ag->errors_.push_back(*errors);
      ag->streams_.push_back(*stream);
      ag->ranks_.push_back(r);
    }
    ag->schedule_ = *std::move(schedule);
    return ag;
  }

  // Creates the plan, which arms its first epoch, in place of any made
  // before. Separate from create(), so that a program can allocate and
  // compile everything it needs first: while chains are armed on a device,
  // no code loads there.
  absl::Status arm(tessel::PlanOptions options = {}) {
    // A plan made before holds the copy queues: it goes first.
    absl::Status disarmed = disarm();
    if (!disarmed.ok()) return disarmed;
    absl::StatusOr<tessel::TriggeredPlan> plan = tessel::TriggeredPlan::create(
        group_, buffer_, std::vector<tessel::Schedule>(group_.size(), schedule_), std::move(options));
    if (!plan.ok()) return plan.status();
    plan_ = std::make_unique<tessel::TriggeredPlan>(*plan);
    return absl::OkStatus();
  }

  // Destroys the plan, if any, leaving the copy queues to plans armed later.
  absl::Status disarm() {
    if (plan_ == nullptr) return absl::OkStatus();
    absl::Status destroyed = plan_->destroy();
    plan_.reset();
    return destroyed;
  }

  // How many times the producer writes each tile, and how many rounds of
  // arithmetic each element takes first (its variants depend on neither).
  void set_passes(int passes) { config_.passes = passes; }
  void set_rounds(int rounds) { config_.rounds = rounds; }

  // Runs the armed epoch on every rank of this process (in a group joined
  // across processes, every process calls it); returns the wrong elements
  // summed over those ranks. Leaves the plan complete (call next()) or failed. With
  // `seconds`, stores the time from the kernels' launch until
  // end_device_epoch returned; `launched` runs between the two, given the
  // time of the launch.
  using LaunchHook = std::function<void(std::chrono::steady_clock::time_point)>;
  absl::StatusOr<int64_t> run_epoch(double* seconds = nullptr, const LaunchHook& launched = {}) {
    using namespace tessel;  // NOLINT
    if (plan_ == nullptr) return absl::FailedPreconditionError("AllGather::run_epoch: call arm() first");
    int world = group_.size(), local = static_cast<int>(ranks_.size());
    const int32_t zero = 0;
    for (int k = 0; k < local; ++k) {
      absl::Status s = group_.device(ranks_[k]).copy_to_device(errors_[k], &zero, sizeof(zero));
      if (!s.ok()) return s;
    }
    absl::StatusOr<std::vector<ViewHeader*>> views = plan_->begin_device_epoch();
    if (!views.ok()) return views.status();
    int32_t epoch = static_cast<int32_t>(plan_->epoch());
    int32_t batches = static_cast<int32_t>(plan_->schedule().num_batches());
    int32_t total = world * config_.rows * config_.cols;
    std::vector<absl::Status> statuses(local);
    auto launch = [&](int k) {
      const int r = ranks_[k];
      int32_t first = static_cast<int32_t>(*plan_->batch_id(r, 0));
      auto* data = buffer_.as<int32_t>(r);
      statuses[k] = producers_[k].launch({.grid = config_.programs, .stream = &streams_[k]}, (*views)[r], data, r,
                                         config_.rows, config_.cols, epoch, first, config_.passes, config_.rounds,
                                         config_.waves_per_batch, config_.defer);
      if (statuses[k].ok() && config_.check) {
        statuses[k] = checks_[k].launch({.grid = config_.check_programs, .stream = &streams_[k]}, (*views)[r], data,
                                        total, batches, epoch, errors_[k]);
      }
    };
    const auto launched_at = std::chrono::steady_clock::now();
    if (group_.device(ranks_[0]).kind() == DeviceKind::kHost) {
      // Host launches run to completion: one thread per rank, as on GPUs
      // every rank's kernels run at once.
      std::vector<std::thread> threads;
      for (int k = 0; k < local; ++k) threads.emplace_back(launch, k);
      for (std::thread& t : threads) t.join();
    } else {
      for (int k = 0; k < local; ++k) launch(k);
    }
    for (const absl::Status& s : statuses) {
      if (!s.ok()) return s;
    }
    if (launched) launched(launched_at);
    absl::Status ended = plan_->end_device_epoch();
    if (seconds != nullptr) {
      *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - launched_at).count();
    }
    int64_t wrong = 0;
    for (int k = 0; k < local; ++k) {
      absl::Status s = streams_[k].synchronize();
      if (!s.ok()) return s;
      int32_t e = 0;
      s = group_.device(ranks_[k]).copy_to_host(&e, errors_[k], sizeof(e));
      if (!s.ok()) return s;
      wrong += e;
    }
    if (!ended.ok()) return ended;
    return wrong;
  }

  tessel::TriggeredPlan& plan() { return *plan_; }
  const tessel::Schedule& schedule() const { return schedule_; }
  const tessel::SymmetricBuffer& buffer() const { return buffer_; }
  // Per rank of this process (every rank, where all are here), in rank order.
  const std::vector<tessel::Stream>& streams() const { return streams_; }
  const std::vector<tessel::Function>& producers() const { return producers_; }

 private:
  AllGather(tessel::Group group, AllGatherConfig config) : group_(std::move(group)), config_(config) {}

  tessel::Group group_;
  AllGatherConfig config_;
  tessel::SymmetricBuffer buffer_;
  tessel::Schedule schedule_;
  std::unique_ptr<tessel::TriggeredPlan> plan_;
  std::vector<int> ranks_;  // this process's, in order; the vectors below follow them
  std::vector<tessel::Function> producers_, checks_;
  std::vector<tessel::Buffer> errors_;
  std::vector<tessel::Stream> streams_;
};

}  // namespace samples
