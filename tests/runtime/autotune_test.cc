// The autotuner on the host device: it picks the fastest candidate, keeps
// the choice in memory and on disk, passes over candidates that fail, and
// refuses input it cannot tune.
#include "runtime/autotune.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/runtime/temp_dir.h"

namespace tessel {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// TESSEL_CACHE_DIR pointing at a directory of the test's own, for its life.
class ScopedCacheDir {
 public:
  ScopedCacheDir() {
    if (const char* old = std::getenv("TESSEL_CACHE_DIR")) old_ = old;
    setenv("TESSEL_CACHE_DIR", dir_.str().c_str(), 1);
  }
  ~ScopedCacheDir() {
    if (old_.has_value()) {
      setenv("TESSEL_CACHE_DIR", old_->c_str(), 1);
    } else {
      unsetenv("TESSEL_CACHE_DIR");
    }
  }
  const fs::path& path() const { return dir_.path(); }

 private:
  TempDir dir_{"tessel_autotune_"};
  std::optional<std::string> old_;
};

// Candidates that take `ms` milliseconds each, counting their runs.
struct Sleepers {
  std::vector<int> runs;
  std::vector<TuneCandidate> candidates;
  explicit Sleepers(const std::vector<int>& ms) : runs(ms.size(), 0) {
    for (size_t i = 0; i < ms.size(); ++i) {
      candidates.push_back({absl::StrCat("sleep ", ms[i], " ms"), [this, i, t = ms[i]] {
                              ++runs[i];
                              std::this_thread::sleep_for(std::chrono::milliseconds(t));
                              return absl::OkStatus();
                            }});
    }
  }
  int total() const {
    int n = 0;
    for (int r : runs) n += r;
    return n;
  }
};

Device host() { return *Device::open("host"); }

std::string unique_key(const std::string& what) {
  return absl::StrCat(what, " ", getpid(), " ", std::chrono::steady_clock::now().time_since_epoch().count());
}

TEST(Autotune, PicksTheFastestAndRemembersIt) {
  ScopedCacheDir dir;
  Sleepers s({6, 1, 4});
  const std::string key = unique_key("picks");
  absl::StatusOr<AutotuneResult> r = autotune(host(), key, s.candidates, {.warmup = 1, .reps = 3});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->index, 1);
  EXPECT_FALSE(r->cached);
  EXPECT_EQ(s.runs, std::vector<int>({4, 4, 4}));
  ASSERT_EQ(r->seconds.size(), 3u);
  EXPECT_LT(r->seconds[1], r->seconds[2]);
  // In memory: nothing runs again.
  absl::StatusOr<AutotuneResult> again = autotune(host(), key, s.candidates, {.warmup = 1, .reps = 3});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->index, 1);
  EXPECT_TRUE(again->cached);
  EXPECT_EQ(s.total(), 12);
}

// before_each runs before every timed run (not the warmups), and its
// failure ends the tuning, naming the candidate it was to time.
TEST(Autotune, BeforeEachRunsBeforeEveryTimedRun) {
  ScopedCacheDir dir;
  Sleepers s({1, 2});
  int hooks = 0;
  AutotuneOptions options = {.warmup = 2, .reps = 3, .memory = false, .disk = false};
  options.before_each = [&] {
    ++hooks;
    return absl::OkStatus();
  };
  absl::StatusOr<AutotuneResult> r = autotune(host(), unique_key("hook"), s.candidates, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(hooks, 6);
  EXPECT_EQ(s.runs, std::vector<int>({5, 5}));
  options.before_each = [&] { return hooks++ < 8 ? absl::OkStatus() : absl::UnavailableError("no flush"); };
  absl::StatusOr<AutotuneResult> failed = autotune(host(), unique_key("hook"), s.candidates, options);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(failed.status().message(), HasSubstr("before_each failed before timing 'sleep 1 ms': no flush"));
}

TEST(Autotune, TheDiskKeepsTheChoiceForAnotherProcess) {
  ScopedCacheDir dir;
  Sleepers s({12, 1});  // far apart: a loaded machine wakes a 1 ms sleep late
  const std::string key = unique_key("disk");
  const AutotuneOptions no_memory = {.warmup = 0, .reps = 3, .memory = false};
  ASSERT_TRUE(autotune(host(), key, s.candidates, no_memory).ok());
  EXPECT_TRUE(fs::exists(dir.path() / "autotune"));
  // What a new process would see: the disk's answer, nothing timed.
  absl::StatusOr<AutotuneResult> r = autotune(host(), key, s.candidates, no_memory);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->cached);
  EXPECT_EQ(r->index, 1);
  EXPECT_EQ(s.total(), 6);
  // Another list of candidates is tuned again.
  Sleepers t({3, 1, 2});
  absl::StatusOr<AutotuneResult> other = autotune(host(), key, t.candidates, no_memory);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_FALSE(other->cached);
  // Without the disk, nothing is read or written there.
  Sleepers u({2, 1});
  ASSERT_TRUE(autotune(host(), unique_key("no disk"), u.candidates, {.reps = 1, .memory = false, .disk = false}).ok());
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path() / "autotune")) ++entries;
  EXPECT_EQ(entries, 2);
}

TEST(Autotune, FailingCandidatesArePassedOver) {
  ScopedCacheDir dir;
  Sleepers s({1, 3});
  s.candidates[0].run = [] { return absl::InternalError("launch failed"); };
  absl::StatusOr<AutotuneResult> r = autotune(host(), unique_key("fail"), s.candidates, {.reps = 2});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->index, 1);
  EXPECT_EQ(r->errors[0], "launch failed");
  EXPECT_TRUE(std::isinf(r->seconds[0]));
  s.candidates[1].run = [] { return absl::ResourceExhaustedError("too much shared memory"); };
  absl::Status all = autotune(host(), unique_key("all fail"), s.candidates).status();
  EXPECT_EQ(all.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(all.message(), HasSubstr("every candidate failed (sleep 1 ms: launch failed; sleep 3 ms: too much "
                                       "shared memory)"));
}

// A candidate that was fast while it was timed alone and slow later (a
// clock that dropped, a neighbour's load) meets the one close behind it
// again, the two taking turns, and the second round decides.
TEST(Autotune, CloseCandidatesAreTimedAgainInTurns) {
  struct Turns {
    std::vector<int> order;  // which candidate ran, in order
    std::vector<TuneCandidate> candidates;
    // `lucky` sleeps 10 ms for its first four runs (the warmup and the first pass), then 40 ms or fails;
    // `steady` 14 ms and `slow` 80 ms every time. The gaps are milliseconds wide, past what a loaded
    // machine's scheduler adds to a sleep.
    explicit Turns(bool lucky_fails_later) {
      auto sleeper = [this](int i, std::function<int(int)> ms) {
        return [this, i, ms, runs = 0]() mutable -> absl::Status {
          order.push_back(i);
          const int t = ms(runs++);
          if (t < 0) return absl::UnavailableError("device lost");
          std::this_thread::sleep_for(std::chrono::milliseconds(t));
          return absl::OkStatus();
        };
      };
      candidates = {{"lucky", sleeper(0, [=](int run) { return run < 4             ? 10
                                                               : lucky_fails_later ? -1
                                                                                   : 40; })},
                    {"steady", sleeper(1, [](int) { return 14; })},
                    {"slow", sleeper(2, [](int) { return 80; })}};
    }
  };
  const AutotuneOptions options = {.warmup = 1, .reps = 3, .retime_within = 1.0, .memory = false, .disk = false};
  Turns t(false);
  absl::StatusOr<AutotuneResult> r = autotune(host(), unique_key("turns"), t.candidates, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->retimed, std::vector<int>({0, 1}));  // 14 ms is within 100 % of 10 ms; 80 ms is not
  EXPECT_EQ(r->index, 1);
  EXPECT_GT(r->seconds[0], r->seconds[1]);  // the second round's medians
  EXPECT_EQ(t.order, std::vector<int>({0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 0, 1, 0, 1, 0, 1}));
  // Timed once, the lucky one wins.
  Turns once(false);
  AutotuneOptions no_second = options;
  no_second.retime_within = 0;
  absl::StatusOr<AutotuneResult> first = autotune(host(), unique_key("turns"), once.candidates, no_second);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->index, 0);
  EXPECT_TRUE(first->retimed.empty());
  EXPECT_EQ(once.order.size(), 12u);
  // A candidate whose run fails in the second round is passed over there, and runs no more.
  Turns failing(true);
  absl::StatusOr<AutotuneResult> lost = autotune(host(), unique_key("turns"), failing.candidates, options);
  ASSERT_TRUE(lost.ok()) << lost.status();
  EXPECT_EQ(lost->index, 1);
  EXPECT_EQ(lost->errors[0], "device lost");
  EXPECT_TRUE(std::isinf(lost->seconds[0]));
  EXPECT_EQ(failing.order, std::vector<int>({0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 0, 1, 1, 1}));
}

TEST(Autotune, InputItCannotTuneIsRefused) {
  Sleepers s({1, 1});
  auto message = [](const absl::StatusOr<AutotuneResult>& r) { return std::string(r.status().message()); };
  EXPECT_EQ(message(autotune(host(), "k", {})), "autotune 'k': no candidates");
  std::vector<TuneCandidate> twins = {s.candidates[0], s.candidates[0]};
  EXPECT_EQ(message(autotune(host(), "k", twins)), "autotune 'k': two candidates are labelled 'sleep 1 ms'");
  std::vector<TuneCandidate> empty = {{"nothing", nullptr}};
  EXPECT_EQ(message(autotune(host(), "k", empty)), "autotune 'k': candidate 'nothing' has nothing to run");
  EXPECT_EQ(message(autotune(host(), "k", s.candidates, {.reps = 0})),
            "autotune 'k': warmup = 1 and reps = 0 (need warmup >= 0 and reps >= 1)");
  EXPECT_EQ(message(autotune(host(), "k", s.candidates, {.retime_within = -0.5})),
            "autotune 'k': retime_within = -0.5 (need 0 to time each candidate once, or more)");
  EXPECT_EQ(message(autotune(host(), "k", s.candidates, {.prepare_threads = -1})),
            "autotune 'k': prepare_threads = -1 (need 0 for one per core, or more)");
  EXPECT_EQ(s.total(), 0);
}

// Prepares that sleep `ms` each, noting how many ran at once at most and
// whether any ran after a candidate's first run.
struct Preparers {
  std::atomic<int> now{0}, most{0}, prepared{0};
  std::atomic<bool> after_a_run{false};
  Sleepers s;
  Preparers(int candidates, int ms) : s(std::vector<int>(candidates, 1)) {
    for (size_t i = 0; i < s.candidates.size(); ++i) {
      s.candidates[i].label = absl::StrCat("candidate ", i);
      s.candidates[i].prepare = [this, ms] {
        const int in = ++now;
        for (int m = most; in > m && !most.compare_exchange_weak(m, in);) {
        }
        if (s.total() > 0) after_a_run = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        --now;
        ++prepared;
        return absl::OkStatus();
      };
    }
  }
};

TEST(Autotune, PreparesRunAllAtOnceBeforeAnyRun) {
  Preparers p(6, 40);
  AutotuneOptions options = {
      .warmup = 0, .reps = 1, .retime_within = 0, .memory = false, .disk = false, .prepare_threads = 3};
  absl::StatusOr<AutotuneResult> r = autotune(host(), unique_key("prepare"), p.s.candidates, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(p.prepared, 6);
  EXPECT_GE(p.most, 2);  // six sleeps of 40 ms on three threads overlap
  EXPECT_LE(p.most, 3);
  EXPECT_FALSE(p.after_a_run);
  EXPECT_GT(r->prepare_seconds, 0.079);  // two rounds of 40 ms at least
  EXPECT_EQ(p.s.total(), 6);
  // One thread: one after another.
  Preparers q(3, 5);
  options.prepare_threads = 1;
  ASSERT_TRUE(autotune(host(), unique_key("prepare"), q.s.candidates, options).ok());
  EXPECT_EQ(q.prepared, 3);
  EXPECT_EQ(q.most, 1);
  // Without prepares there is nothing to wait for.
  Sleepers plain({1});
  absl::StatusOr<AutotuneResult> none = autotune(host(), unique_key("prepare"), plain.candidates, options);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->prepare_seconds, 0);
}

TEST(Autotune, AFailingPrepareNeverRuns) {
  Sleepers s({1, 2});
  s.candidates[0].prepare = [] { return absl::ResourceExhaustedError("too many registers"); };
  s.candidates[1].prepare = [] { return absl::OkStatus(); };
  absl::StatusOr<AutotuneResult> r =
      autotune(host(), unique_key("prepare fails"), s.candidates, {.reps = 2, .memory = false, .disk = false});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->index, 1);
  EXPECT_EQ(r->errors[0], "prepare: too many registers");
  EXPECT_TRUE(std::isinf(r->seconds[0]));
  EXPECT_EQ(s.runs, std::vector<int>({0, 3}));
  s.candidates[1].prepare = [] { return absl::InvalidArgumentError("bad tile"); };
  absl::Status all = autotune(host(), unique_key("prepares fail"), s.candidates, {.memory = false}).status();
  EXPECT_EQ(all.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(all.message(), HasSubstr("every candidate failed (sleep 1 ms: prepare: too many registers; sleep 2 ms: "
                                       "prepare: bad tile)"));
}

}  // namespace
}  // namespace tessel
