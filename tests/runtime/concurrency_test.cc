// Threads sharing a device: compiling and launching the same kernel and
// different ones, asking the tensor-map cache for the same and different
// maps, and running triggered plans, all at once. The results must be
// right; scripts/tsan.sh runs these under ThreadSanitizer.
#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/autotune.h"
#include "runtime/plans/plan.h"
#include "samples/kernels.h"
#include "tessel/tessel.h"
#include "tests/plan_test_util.h"

namespace tessel {
namespace {

constexpr int kThreads = 8;

TEST(Concurrency, ThreadsCompileLaunchAndCacheMapsOnOneDevice) {
  Device d = *Device::open("host:2");
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto fail = [&](const absl::Status& s) {
        if (!s.ok()) ++failures;
      };
      // The same kernel in every thread, and one of its own.
      for (const std::string& name : {std::string("shared_add"), absl::StrCat("add_", t)}) {
        absl::StatusOr<Kernel> k = samples::vector_add_kernel(name);
        absl::StatusOr<Function> fn = k.ok() ? d.compile(*k) : absl::StatusOr<Function>(k.status());
        if (!fn.ok()) return fail(fn.status());
        const int n = 1024 * (t + 1);
        std::vector<float> x(n, static_cast<float>(t)), y(n, 1.0f), z(n);
        fail(fn->launch({.grid = (n + samples::kAddBlock - 1) / samples::kAddBlock}, x.data(), y.data(), z.data(), n));
        for (float v : z) failures += v != static_cast<float>(t) + 1.0f;
      }
      // Maps of a shared buffer (one key for all threads) and of its own.
      static const absl::StatusOr<Buffer> shared = d.allocate(256 * 256 * 2);
      absl::StatusOr<Buffer> own = d.allocate(256 * 256 * 2);
      if (!shared.ok() || !own.ok()) return fail(absl::InternalError("allocation"));
      for (int i = 0; i < 50; ++i) {
        absl::StatusOr<const TensorMap*> a = d.cached_tensor_map(bf16, *shared, {256, 256}, {64, 128});
        absl::StatusOr<const TensorMap*> b = d.cached_tensor_map(bf16, *own, {256, 256}, {64, 64 + 64 * (i % 2)});
        fail(a.status());
        fail(b.status());
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

// The autotuner's prepares compile their candidates' kernels on several
// threads at once; each candidate then runs the function it compiled.
TEST(Concurrency, AutotuneCompilesItsCandidatesOnSeveralThreads) {
  Device d = *Device::open("host:2");
  constexpr int kCandidates = 6, n = 4096;
  std::vector<float> x(n, 2.0f), y(n, 1.0f);
  std::vector<std::vector<float>> z(kCandidates, std::vector<float>(n, 0.0f));
  std::vector<std::optional<Function>> fns(kCandidates);
  const LaunchConfig config = {.grid = (n + samples::kAddBlock - 1) / samples::kAddBlock};
  std::vector<TuneCandidate> candidates;
  for (int i = 0; i < kCandidates; ++i) {
    candidates.push_back(
        {absl::StrCat("add ", i),
         [&, i] { return fns[i]->launch(config, x.data(), y.data(), z[i].data(), n); },
         [&, i]() -> absl::Status {
           absl::StatusOr<Kernel> k = samples::vector_add_kernel(absl::StrCat("tuned_add_", i));
           if (!k.ok()) return k.status();
           absl::StatusOr<Function> fn = d.compile(*k);
           if (!fn.ok()) return fn.status();
           fns[i] = *fn;
           return fns[i]->prepare(x.data(), y.data(), z[i].data(), n);
         }});
  }
  absl::StatusOr<AutotuneResult> r =
      autotune(d, "concurrent prepares", candidates,
               {.warmup = 0, .reps = 1, .memory = false, .disk = false, .prepare_threads = 3});
  ASSERT_TRUE(r.ok()) << r.status();
  for (int i = 0; i < kCandidates; ++i) {
    EXPECT_EQ(r->errors[i], "") << i;
    EXPECT_EQ(z[i], std::vector<float>(n, 3.0f)) << i;
  }
}

TEST(Concurrency, PlansRunFromSeveralThreads) {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      absl::StatusOr<Group> g = Group::host(2, 1, {.reserve_bytes = int64_t{1} << 26, .chunk_bytes = 1 << 20});
      if (!g.ok()) return void(++failures);
      absl::StatusOr<Schedule> s = chunks(ScheduleView::linear(1 << 14), 2, 4);
      absl::StatusOr<SymmetricBuffer> buf = s.ok() ? g->allocate(s->bytes()) : s.status();
      if (!buf.ok()) return void(++failures);
      absl::StatusOr<TriggeredPlan> plan = TriggeredPlan::create(*g, *buf, std::vector<Schedule>(2, *s));
      if (!plan.ok()) return void(++failures);
      for (uint64_t epoch = 1; epoch <= 20; ++epoch) {
        plan_test::fill(*buf, *s, 2, epoch);
        if (!plan->run().ok()) ++failures;
        plan_test::expect_delivered(*buf, *s, 2, epoch);
        if (epoch < 20 && !plan->next_epoch().ok()) ++failures;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace tessel
