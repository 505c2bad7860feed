#include "runtime/autotune.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "base/parallel.h"
#include "base/status.h"
#include "runtime/compile_cached.h"
#include "runtime/disk_cache.h"

namespace tessel {
namespace {

constexpr const char* kAutotuneSpace = "autotune";

AutotuneResult cached(int index) {
  AutotuneResult r;
  r.index = index;
  r.cached = true;
  return r;
}

// Choices made in this process, by full key.
struct Memory {
  absl::Mutex mu;
  absl::flat_hash_map<std::string, std::string> labels ABSL_GUARDED_BY(mu);
};
Memory& memory() {
  static Memory* m = new Memory;
  return *m;
}

// Everything a choice depends on: the caller's key, the device, tessel's
// build and the candidates.
std::string full_key(const Device& device, const std::string& key, const std::vector<TuneCandidate>& candidates) {
  std::vector<std::string> labels;
  for (const TuneCandidate& c : candidates) labels.push_back(c.label);
  return absl::StrCat("tessel autotune 1\nkey ", key, "\ndevice ", device.description(), "\nbuild ",
                      tessel_build_id(), "\ncandidates ", absl::StrJoin(labels, "\n"));
}

int index_of(const std::vector<TuneCandidate>& candidates, const std::string& label) {
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].label == label) return static_cast<int>(i);
  }
  return -1;
}

double median(std::vector<double> seconds) {
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

// One run of `c`, timed (Device::time), after options.before_each, whose
// failure goes to `hook`.
absl::StatusOr<double> timed_run(const Device& device, const TuneCandidate& c, const AutotuneOptions& options,
                                 absl::Status& hook) {
  if (options.before_each) {
    hook = options.before_each();
    if (!hook.ok()) return hook;
  }
  return device.time(c.run, options.stream);
}

// Median seconds of `reps` timed runs, after `warmup` untimed ones.
absl::StatusOr<double> time_runs(const Device& device, const TuneCandidate& c, const AutotuneOptions& options,
                                 absl::Status& hook) {
  for (int i = 0; i < options.warmup; ++i) {
    TESSEL_RETURN_IF_ERROR(c.run());
    TESSEL_RETURN_IF_ERROR(device.synchronize());
  }
  std::vector<double> seconds;
  for (int i = 0; i < options.reps; ++i) {
    TESSEL_ASSIGN_OR_RETURN(double s, timed_run(device, c, options, hook));
    seconds.push_back(s);
  }
  return median(std::move(seconds));
}

// The candidates within `within` of the fastest time, if there are two or
// more; none otherwise.
std::vector<int> close_to_fastest(const std::vector<double>& seconds, int fastest, double within) {
  std::vector<int> close;
  for (size_t i = 0; i < seconds.size(); ++i) {
    if (seconds[i] <= seconds[fastest] * (1 + within)) close.push_back(static_cast<int>(i));
  }
  if (close.size() < 2) close.clear();
  return close;
}

// The fastest of `among` that has a time; -1 if none has.
int fastest_of(const std::vector<double>& seconds, const std::vector<int>& among) {
  int best = -1;
  for (int i : among) {
    if (std::isfinite(seconds[i]) && (best < 0 || seconds[i] < seconds[best])) best = i;
  }
  return best;
}

// Times the candidates of result.retimed again, in `reps` turns of one
// run each, and puts their medians in result.seconds (+inf for one whose
// run fails, its message in result.errors). A failure of before_each is
// returned, the candidate it was to time in `at`.
absl::Status time_in_turns(const Device& device, const std::vector<TuneCandidate>& candidates,
                           const AutotuneOptions& options, AutotuneResult& result, int& at) {
  std::vector<std::vector<double>> again(candidates.size());
  for (int rep = 0; rep < options.reps; ++rep) {
    for (int i : result.retimed) {
      if (!result.errors[i].empty()) continue;  // its run failed in an earlier turn
      absl::Status hook;
      absl::StatusOr<double> s = timed_run(device, candidates[i], options, hook);
      if (!hook.ok()) {
        at = i;
        return hook;
      }
      if (s.ok()) {
        again[i].push_back(*s);
      } else {
        result.errors[i] = std::string(s.status().message());
        result.seconds[i] = std::numeric_limits<double>::infinity();
      }
    }
  }
  for (int i : result.retimed) {
    if (result.errors[i].empty()) result.seconds[i] = median(std::move(again[i]));
  }
  return absl::OkStatus();
}

// Runs every candidate's prepare, on up to `threads` threads at once (0:
// one per core); each one's status lands in `status`. Returns the wall time.
double prepare_all(const std::vector<TuneCandidate>& candidates, int threads, std::vector<absl::Status>& status) {
  status.assign(candidates.size(), absl::OkStatus());
  std::vector<size_t> todo;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].prepare) todo.push_back(i);
  }
  if (todo.empty()) return 0;
  const auto start = std::chrono::steady_clock::now();
  parallel_for(todo.size(), threads, [&](size_t t) { status[todo[t]] = candidates[todo[t]].prepare(); });
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

absl::StatusOr<AutotuneResult> autotune(const Device& device, const std::string& key,
                                        const std::vector<TuneCandidate>& candidates,
                                        const AutotuneOptions& options) {
  const std::string where = absl::StrCat("autotune '", key, "'");
  if (candidates.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": no candidates"));
  if (options.warmup < 0 || options.reps < 1) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": warmup = ", options.warmup, " and reps = ", options.reps,
                                                   " (need warmup >= 0 and reps >= 1)"));
  }
  if (!(options.retime_within >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": retime_within = ", options.retime_within,
                                                   " (need 0 to time each candidate once, or more)"));
  }
  if (options.prepare_threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": prepare_threads = ", options.prepare_threads, " (need 0 for one per core, or more)"));
  }
  absl::flat_hash_set<std::string> labels;
  for (const TuneCandidate& c : candidates) {
    if (!labels.insert(c.label).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": two candidates are labelled '", c.label, "'"));
    }
    if (!c.run) return absl::InvalidArgumentError(absl::StrCat(where, ": candidate '", c.label, "' has nothing to run"));
  }
  const std::string full = full_key(device, key, candidates);
  Memory& mem = memory();
  if (options.memory) {
    absl::MutexLock lock(&mem.mu);
    if (auto it = mem.labels.find(full); it != mem.labels.end()) {
      return cached(index_of(candidates, it->second));
    }
  }
  std::shared_ptr<DiskCache> disk = options.disk ? DiskCache::from_env() : nullptr;
  if (disk != nullptr && disk->enabled()) {
    // An entry naming no candidate (which the key rules out) is not trusted.
    if (std::optional<std::string> label = disk->read(kAutotuneSpace, full)) {
      if (const int i = index_of(candidates, *label); i >= 0) {
        if (options.memory) {
          absl::MutexLock lock(&mem.mu);
          mem.labels[full] = *label;
        }
        return cached(i);
      }
    }
  }
  AutotuneResult result;
  result.seconds.assign(candidates.size(), std::numeric_limits<double>::infinity());
  result.errors.assign(candidates.size(), "");
  std::vector<absl::Status> prepared;
  result.prepare_seconds = prepare_all(candidates, options.prepare_threads, prepared);
  auto hook_failed = [&](int i, const absl::Status& hook) {
    return absl::Status(hook.code(), absl::StrCat(where, ": before_each failed before timing '", candidates[i].label,
                                                  "': ", hook.message()));
  };
  std::vector<int> all(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    all[i] = static_cast<int>(i);
    if (!prepared[i].ok()) {
      result.errors[i] = absl::StrCat("prepare: ", prepared[i].message());
      continue;
    }
    absl::Status hook;
    absl::StatusOr<double> s = time_runs(device, candidates[i], options, hook);
    if (!hook.ok()) return hook_failed(i, hook);
    if (!s.ok()) {
      result.errors[i] = std::string(s.status().message());
      continue;
    }
    result.seconds[i] = *s;
  }
  result.index = fastest_of(result.seconds, all);
  if (result.index >= 0 && options.retime_within > 0) {
    result.retimed = close_to_fastest(result.seconds, result.index, options.retime_within);
  }
  if (!result.retimed.empty()) {
    int at = -1;
    if (absl::Status hook = time_in_turns(device, candidates, options, result, at); !hook.ok()) {
      return hook_failed(at, hook);
    }
    // Should every close one have failed its second round, the rest compete.
    result.index = fastest_of(result.seconds, result.retimed);
    if (result.index < 0) result.index = fastest_of(result.seconds, all);
  }
  if (result.index < 0) {
    std::vector<std::string> failures;
    for (size_t i = 0; i < candidates.size(); ++i) failures.push_back(candidates[i].label + ": " + result.errors[i]);
    return absl::FailedPreconditionError(
        absl::StrCat(where, ": every candidate failed (", absl::StrJoin(failures, "; "), ")"));
  }
  const std::string& best = candidates[result.index].label;
  if (options.memory) {
    absl::MutexLock lock(&mem.mu);
    mem.labels[full] = best;
  }
  if (disk != nullptr && disk->enabled()) disk->write(kAutotuneSpace, full, best).IgnoreError();  // never fails a tune
  return result;
}

}  // namespace tessel
