// Autotuning: pick the fastest of several configurations of a kernel (tile
// sizes, stages, warps) for a key such as a shape, by timing each on the
// device, and remember the choice, in this process and on disk, so that a
// later call for the same key answers without timing anything.
//
//   std::vector<TuneCandidate> candidates;
//   for (const GemmConfig& g : configs) {
//     candidates.push_back({label(g), [&, g] { return run_gemm(g); }});
//   }
//   TESSEL_ASSIGN_OR_RETURN(AutotuneResult best, autotune(device, "gemm 3000x5000x712 bf16", candidates));
//   run_gemm(configs[best.index]);
//
// The choice is kept under the key, the device's description, tessel's
// build and the candidates' labels (a new candidate list is tuned again),
// in the disk cache's directory ($TESSEL_CACHE_DIR, runtime/disk_cache.h:
// space "autotune", written atomically).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/device.h"

namespace tessel {

// One configuration to try: a label naming it (unique among the
// candidates; it is what the cache keeps) and what runs it once on the
// device (compile on first use, launch, no synchronization needed).
// `prepare`, where given, readies what `run` launches (compiles its
// kernels: Device::compile, then Function::prepare with the launch's
// arguments), so that the tuner can compile every candidate at once on
// several threads before it times any; it must be safe to call from any
// thread and alongside the other candidates' prepares.
struct TuneCandidate {
  std::string label;
  std::function<absl::Status()> run = nullptr;
  std::function<absl::Status()> prepare = nullptr;
};

struct AutotuneOptions {
  int warmup = 1;       // untimed runs of each candidate before timing it
  int reps = 10;        // timed runs of each; the median counts
  // Candidates whose median is within this fraction of the fastest's are
  // timed again, `reps` runs each, taking turns (one run of each, then the
  // next round), and their second medians decide: a drift of the device's
  // clocks or a neighbour's load then falls on all of them alike, where in
  // the first pass it falls on whichever was being timed. 0 times every
  // candidate once.
  double retime_within = 0.05;
  bool memory = true;   // consult and keep the choice in this process
  bool disk = true;     // consult and keep the choice in the disk cache
  // Runs before each timed run, untimed (Device::time starts at the end of
  // the work it queues on the default stream): flushing the GPU's L2, as
  // Triton's do_bench does, times every candidate from cold caches, as a
  // kernel between others runs, and on a CUDA device keeps the host's
  // launch costs out of the time. An error from it ends the tuning with
  // that error.
  std::function<absl::Status()> before_each = nullptr;
  // The stream the candidates and before_each queue their work on (the
  // default stream where null): where the runs are timed.
  const Stream* stream = nullptr;
  // Threads the candidates' prepares run on at once: 0 for one per core
  // (never more than there are candidates), 1 for one after another.
  int prepare_threads = 0;
};

struct AutotuneResult {
  int index = -1;        // the chosen candidate
  bool cached = false;   // found in memory or on disk: nothing was timed
  // When timed: each candidate's median seconds per run (the second
  // round's for those timed again), +inf for one whose run failed; the
  // failures' messages in `errors`, by candidate.
  std::vector<double> seconds;
  std::vector<std::string> errors;
  // The candidates timed again (AutotuneOptions::retime_within), in order;
  // empty where no other came close to the fastest.
  std::vector<int> retimed;
  // When timed: the wall time of the candidates' prepares, all of them
  // (0 where none has one).
  double prepare_seconds = 0;
};

// The fastest of `candidates` for `key` on `device`. Their prepares run
// first, all at once (AutotuneOptions::prepare_threads); then each
// candidate is run `warmup` times and timed `reps` times (Device::time of
// one run), and those close to the fastest are timed again in turns. A
// candidate whose prepare or run fails is passed over; an error if every
// one fails (naming each failure), if there are none, if two share a
// label, if warmup < 0, reps < 1, retime_within < 0 or prepare_threads < 0.
absl::StatusOr<AutotuneResult> autotune(const Device& device, const std::string& key,
                                        const std::vector<TuneCandidate>& candidates,
                                        const AutotuneOptions& options = {});

}  // namespace tessel
