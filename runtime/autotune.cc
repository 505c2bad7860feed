#include "runtime/autotune.h"

#include <algorithm>
#include <chrono>
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

// Median seconds of `reps` runs (Device::time), each after
// options.before_each. A failure of before_each goes to `hook`.
absl::StatusOr<double> time_runs(const Device& device, const TuneCandidate& c, const AutotuneOptions& options,
                                 absl::Status& hook) {
  for (int i = 0; i < options.warmup; ++i) {
    TESSEL_RETURN_IF_ERROR(c.run());
    TESSEL_RETURN_IF_ERROR(device.synchronize());
  }
  std::vector<double> seconds;
  for (int i = 0; i < options.reps; ++i) {
    if (options.before_each) {
      hook = options.before_each();
      if (!hook.ok()) return hook;
    }
    TESSEL_ASSIGN_OR_RETURN(double s, device.time(c.run, options.stream));
    seconds.push_back(s);
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
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
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (!prepared[i].ok()) {
      result.errors[i] = absl::StrCat("prepare: ", prepared[i].message());
      continue;
    }
    absl::Status hook;
    absl::StatusOr<double> s = time_runs(device, candidates[i], options, hook);
    if (!hook.ok()) {
      return absl::Status(hook.code(), absl::StrCat(where, ": before_each failed before timing '", candidates[i].label,
                                                    "': ", hook.message()));
    }
    if (!s.ok()) {
      result.errors[i] = std::string(s.status().message());
      continue;
    }
    result.seconds[i] = *s;
    if (result.index < 0 || *s < result.seconds[result.index]) result.index = static_cast<int>(i);
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
