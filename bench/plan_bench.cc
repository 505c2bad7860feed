// Triggered plans on N NVIDIA GPUs (all present, or --ranks=N; at least 2)
// against raw baselines measured in the same run: all-gather bandwidth of
// armed copy chains against cuMemcpyPeerAsync, gate-to-arrival latency
// (kernels on cuda:0 and cuda:1 ping-ponging batches), and a producer
// overlapped with its own transfer against max(compute, transfer).
//
//   plan_bench [--json=FILE] [--part=bandwidth|latency|overlap] [--ranks=N]
//              [--programs_per_sm=K]   (the overlap's producer: K programs per SM)
//              [--defer=0|1]           (the overlap's producer defers its publishes' fences; 1 by default)
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "cuda_raw.h"
#include "report.h"
#include "samples/allgather.h"
#include "tessel/tessel.h"

using namespace tessel;
using bench::Clock;
using bench::median;
using bench::must;
using bench::ratio;
using bench::report;
using bench::seconds_since;

namespace {

constexpr int64_t kMiB = 1 << 20;

// Opens every gate of rank r: batch ids first .. first + n - 1.
Kernel open_all() {
  KernelBuilder k("open_all");
  TriggeredView view = k.triggered_view("plan");
  Value first = k.arg(i32, "first"), n = k.arg(i32, "n");
  k.for_range(0, n, 1, [&](Value i) { view.publish(first + i); });
  return must(k.build(), "build open_all");
}

// A kernel that does nothing: what raw copies queue behind in the baseline
// that starts them the way kernels open gates.
Kernel nothing() {
  KernelBuilder k("nothing");
  k.arg(i32, "unused");
  return must(k.build(), "build nothing");
}

// One open_all program and stream per rank, for plan_seconds to open an
// epoch's gates from the GPUs.
struct Opener {
  std::vector<Function> open, idle;  // per rank
  std::vector<Stream> streams;
  bench::CudaRaw* cu = nullptr;
  std::vector<CUcontext> ctx;
  uint64_t* start = nullptr;  // host memory queued kernels wait on
  CUdeviceptr start_on_device = 0;
  uint64_t round = 0;
};

Opener kernel_opener(const Group& g, bench::CudaRaw& cu) {
  Opener o;
  o.cu = &cu;
  Kernel k = open_all(), none = nothing();
  for (int r = 0; r < g.size(); ++r) {
    o.open.push_back(must(g.device(r).compile(k), "compile open_all"));
    o.idle.push_back(must(g.device(r).compile(none), "compile nothing"));
    must(o.idle.back().prepare(int32_t{0}), "load nothing");
    o.streams.push_back(must(g.device(r).create_stream(), "stream"));
    o.ctx.push_back(cu.retain(r));
  }
  o.start = cu.host_word(&o.start_on_device);
  return o;
}

// How plan_seconds opens gates: from the host (no `kernels`), or by the
// opener's kernels, launched in the timed span or `queued` beforehand behind
// a wait on a word of host memory whose store starts the clock (a running
// producer's launch is not the plan's cost). With `settle`, the chains
// finish before end_device_epoch is called and only that call is timed.
struct Opening {
  Opener* kernels = nullptr;
  bool queued = false;
  bool settle = false;
  bool run = false;  // the whole epoch by run(), timed from the call
  double* per_publish = nullptr;  // host-opened: the median host time of one publish() call
};

// Queues on each rank's opener stream a wait for the next round's start
// word; returns that round.
uint64_t queue_start(Opener& o, int world) {
  const uint64_t round = ++o.round;
  bench::CudaRaw& cu = *o.cu;
  for (int r = 0; r < world; ++r) {
    cu.check(cu.cuCtxSetCurrent(o.ctx[r]), "cuCtxSetCurrent");
    cu.check(cu.cuStreamWaitValue64(static_cast<CUstream>(o.streams[r].native()), o.start_on_device, round,
                                    CU_STREAM_WAIT_VALUE_GEQ),
             "cuStreamWaitValue64");
  }
  return round;
}

// Seconds per epoch of `plan`, from opening its gates to end_device_epoch
// returning; begin and the next epoch's arming are outside the timed part.
// The host publishes in run()'s order (batch i of every rank before batch
// i + 1, as raw copies queue).
double plan_seconds(TriggeredPlan& plan, int world, int reps, Opening how = {}) {
  std::vector<double> t, publishing;
  size_t most = 0, publishes = 0;
  for (int r = 0; r < world; ++r) {
    most = std::max(most, plan.schedule().batches(r).size());
    publishes += plan.schedule().batches(r).size();
  }
  for (int rep = 0; rep < reps + 3; ++rep) {
    if (how.run) {
      auto t0 = Clock::now();
      must(plan.run(), "run");
      if (rep >= 3) t.push_back(seconds_since(t0));
      must(plan.next_epoch(), "next epoch");
      continue;
    }
    std::vector<ViewHeader*> views = must(plan.begin_device_epoch(), "begin");
    auto t0 = Clock::now();
    if (Opener* opener = how.kernels) {
      const uint64_t round = how.queued ? queue_start(*opener, world) : 0;
      for (int r = 0; r < world; ++r) {
        int32_t n = static_cast<int32_t>(plan.schedule().batches(r).size());
        int32_t first = n == 0 ? 0 : static_cast<int32_t>(must(plan.batch_id(r, 0), "batch id"));
        must(opener->open[r].launch({.grid = 1, .stream = &opener->streams[r]}, views[r], first, n), "open_all");
      }
      if (how.queued) {
        t0 = Clock::now();
        std::atomic_ref<uint64_t>(*opener->start).store(round, std::memory_order_release);
      }
    } else {
      for (size_t i = 0; i < most; ++i) {
        for (int r = 0; r < world; ++r) {
          if (i < plan.schedule().batches(r).size()) must(plan.publish(r, static_cast<int>(i)), "publish");
        }
      }
      if (rep >= 3) publishing.push_back(seconds_since(t0) / static_cast<double>(std::max<size_t>(publishes, 1)));
    }
    if (how.settle) {
      // Spins rather than sleeps: a core woken from sleep runs the first
      // microseconds slowly, which would be charged to the call.
      while (seconds_since(t0) < 5e-3) {
      }
      t0 = Clock::now();
    }
    must(plan.end_device_epoch(), "end");
    if (rep >= 3) t.push_back(seconds_since(t0));
    if (how.kernels != nullptr) {
      for (Stream& s : how.kernels->streams) must(s.synchronize(), "sync");
    }
    must(plan.next_epoch(), "next epoch");
  }
  if (how.per_publish != nullptr && !publishing.empty()) *how.per_publish = median(publishing);
  return median(t);
}

// Calls each of `timers` in turn, `rounds` times over; per timer, the
// median of what its calls returned.
std::vector<double> interleaved(const std::vector<std::function<double()>>& timers, int rounds) {
  std::vector<std::vector<double>> t(timers.size());
  for (int round = 0; round < rounds; ++round) {
    for (size_t i = 0; i < timers.size(); ++i) t[i].push_back(timers[i]());
  }
  std::vector<double> medians;
  for (std::vector<double>& each : t) medians.push_back(median(each));
  return medians;
}

// Every GPU sends `bytes` to every other with cuMemcpyPeerAsync at once, one
// stream per (source, destination) pair as the plans use: an all-gather.
struct RawPeer {
  bench::CudaRaw& cu;
  int world;
  std::vector<CUcontext> ctx;
  std::vector<CUdeviceptr> buf;
  std::vector<std::vector<CUstream>> stream;  // [source][destination]
  std::vector<CUevent> ran;                   // per rank: the kernel copies queue behind has run

  // Each rank's `world * bytes` buffer: allocated with cuMemAlloc, or `given`.
  RawPeer(bench::CudaRaw& c, int n, int64_t bytes, std::vector<CUdeviceptr> given = {})
      : cu(c), world(n), ctx(n), buf(n), stream(n, std::vector<CUstream>(n)), ran(n) {
    for (int r = 0; r < world; ++r) ctx[r] = cu.retain(r);
    for (int r = 0; r < world; ++r) {
      cu.check(cu.cuCtxSetCurrent(ctx[r]), "cuCtxSetCurrent");
      for (int p = 0; p < world; ++p) {
        if (p == r) continue;
        cu.enable_peer_access(ctx[p]);
        cu.check(cu.cuStreamCreate(&stream[r][p], CU_STREAM_NON_BLOCKING), "cuStreamCreate");
      }
      cu.check(cu.cuEventCreate(&ran[r], CU_EVENT_DISABLE_TIMING), "cuEventCreate");
      if (given.empty()) {
        cu.check(cu.cuMemAlloc(&buf[r], world * bytes), "cuMemAlloc");
      } else {
        buf[r] = given[r];
      }
    }
  }
  // `bytes` from every rank to every peer in copies of `piece` bytes queued back to back.
  double seconds(int64_t bytes, int reps, int64_t piece = 0) {
    if (piece == 0) piece = bytes;
    std::vector<double> t;
    for (int rep = 0; rep < reps + 3; ++rep) {
      auto t0 = Clock::now();
      enqueue(bytes, piece);
      synchronize();
      if (rep >= 3) t.push_back(seconds_since(t0));
    }
    return median(t);
  }
  // The same copies started as a program without plans starts them after
  // its producer: in stream order behind a kernel (the opener's `nothing`,
  // queued behind its start word as plan_seconds queues the opening kernels),
  // timed from the store that starts it.
  double behind_kernel_seconds(Opener& o, int64_t bytes, int reps, int64_t piece) {
    std::vector<double> t;
    for (int rep = 0; rep < reps + 3; ++rep) {
      const uint64_t round = queue_start(o, world);
      for (int r = 0; r < world; ++r) {
        must(o.idle[r].launch({.grid = 1, .stream = &o.streams[r]}, int32_t{0}), "nothing");
        cu.check(cu.cuCtxSetCurrent(ctx[r]), "cuCtxSetCurrent");
        cu.check(cu.cuEventRecord(ran[r], static_cast<CUstream>(o.streams[r].native())), "cuEventRecord");
        for (int p = 0; p < world; ++p) {
          if (p != r) cu.check(cu.cuStreamWaitEvent(stream[r][p], ran[r], 0), "cuStreamWaitEvent");
        }
      }
      enqueue(bytes, piece);
      auto t0 = Clock::now();
      std::atomic_ref<uint64_t>(*o.start).store(round, std::memory_order_release);
      synchronize();
      if (rep >= 3) t.push_back(seconds_since(t0));
      for (Stream& s : o.streams) must(s.synchronize(), "sync");
    }
    return median(t);
  }

 private:
  // Queues the copies of `bytes` from every rank to every peer, `piece` at a time.
  void enqueue(int64_t bytes, int64_t piece) {
    for (int64_t at = 0; at < bytes; at += piece) {
      for (int r = 0; r < world; ++r) {
        for (int p = 0; p < world; ++p) {
          if (p == r) continue;
          CUdeviceptr off = r * bytes + at;
          cu.check(cu.cuMemcpyPeerAsync(buf[p] + off, ctx[p], buf[r] + off, ctx[r], piece, stream[r][p]),
                   "cuMemcpyPeerAsync");
        }
      }
    }
  }
  void synchronize() {
    for (int r = 0; r < world; ++r) {
      for (int p = 0; p < world; ++p) {
        if (p != r) cu.check(cu.cuStreamSynchronize(stream[r][p]), "cuStreamSynchronize");
      }
    }
  }
};

// For AllGather::run_epoch: polls the producers' streams (rank r's on
// contexts[r]) after their launch, and stores in `seconds` when all have
// finished, counted from the launch.
samples::AllGather::LaunchHook producers_done(bench::CudaRaw& cu, const std::vector<CUcontext>& contexts,
                                              const samples::AllGather& ag, double* seconds) {
  return [&cu, &contexts, &ag, seconds](Clock::time_point start) {
    for (size_t r = 0; r < ag.streams().size(); ++r) {
      cu.check(cu.cuCtxSetCurrent(contexts[r]), "cuCtxSetCurrent");
      CUresult done;
      while ((done = cu.cuStreamQuery(static_cast<CUstream>(ag.streams()[r].native()))) == CUDA_ERROR_NOT_READY) {
      }
      cu.check(done, "cuStreamQuery");
    }
    *seconds = seconds_since(start);
  };
}

// Rank 0 publishes its i-th batch and waits for rank 1's i-th; rank 1 waits
// for rank 0's, then publishes its own: 2 * n one-way gate-to-arrival hops.
Kernel ping_pong() {
  KernelBuilder k("ping_pong");
  TriggeredView view = k.triggered_view("plan");
  Value own = k.arg(i32, "own"), peer = k.arg(i32, "peer"), n = k.arg(i32, "n"), leader = k.arg(i32, "leader");
  k.for_range(0, n, 1, [&](Value i) {
    k.if_(
        leader == 1,
        [&] {
          view.publish(own + i);
          view.wait(peer + i);
        },
        [&] {
          view.wait(peer + i);
          view.publish(own + i);
        });
  });
  return must(k.build(), "build ping_pong");
}

}  // namespace

struct Flags {
  std::string json, part;  // part: bandwidth, latency or overlap; empty for all
  int ranks = 0;           // 0: every GPU present
  int programs_per_sm = 1;
  bool defer = true;
};

absl::StatusOr<Flags> parse_flags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    absl::string_view a = argv[i];
    if (absl::ConsumePrefix(&a, "--json=")) {
      f.json = std::string(a);
    } else if (absl::ConsumePrefix(&a, "--part=")) {
      f.part = std::string(a);
      if (f.part != "bandwidth" && f.part != "latency" && f.part != "overlap") {
        return absl::InvalidArgumentError(absl::StrCat("--part=", a, ": not a part (bandwidth, latency or overlap)"));
      }
    } else if (absl::ConsumePrefix(&a, "--ranks=")) {
      if (!absl::SimpleAtoi(a, &f.ranks) || f.ranks < 2) {
        return absl::InvalidArgumentError("--ranks must be a number >= 2");
      }
    } else if (absl::ConsumePrefix(&a, "--programs_per_sm=")) {
      if (!absl::SimpleAtoi(a, &f.programs_per_sm) || f.programs_per_sm < 1 || f.programs_per_sm > 16) {
        return absl::InvalidArgumentError("--programs_per_sm must be a number from 1 to 16");
      }
    } else if (absl::ConsumePrefix(&a, "--defer=")) {
      if (a != "0" && a != "1") return absl::InvalidArgumentError("--defer must be 0 or 1");
      f.defer = a == "1";
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown argument '", argv[i], "'"));
    }
  }
  return f;
}

int main(int argc, char** argv) {
  absl::StatusOr<Flags> flags = parse_flags(argc, argv);
  if (!flags.ok()) {
    std::fprintf(stderr, "plan_bench: %s\n", std::string(flags.status().message()).c_str());
    return 2;
  }
  const std::string &json = flags->json, &part = flags->part;
  const int ranks = flags->ranks, programs_per_sm = flags->programs_per_sm;
  const bool defer = flags->defer;
  bench::CudaRaw cu;
  std::vector<Device> devices;
  for (int r = 0; ranks == 0 || r < ranks; ++r) {
    absl::StatusOr<Device> d = Device::open(absl::StrCat("cuda:", r));
    if (!d.ok()) break;
    devices.push_back(*d);
  }
  const int world = static_cast<int>(devices.size());
  if (world < 2 || (ranks != 0 && world != ranks) || !cu.open()) {
    std::printf("plan_bench: needs %d CUDA GPUs, found %d; nothing to measure\n", ranks == 0 ? 2 : ranks, world);
    return 0;
  }
  Group g = must(Group::create(devices), "group");
  std::printf("plan_bench on %d x %s\n", world, devices[0].description().c_str());
  std::vector<std::string> lines;
  auto record = [&](const std::string& what, double value, const std::string& unit, const std::string& note = "") {
    report(what, value, unit, note);
    lines.push_back(absl::StrCat("{\"what\": \"", what, "\", \"value\": ", value, ", \"unit\": \"", unit, "\"}"));
  };

  auto wanted = [&](const char* name) { return part.empty() || part == name; };
  // 1. Bandwidth: every rank's shard to every other (an all-gather), in
  // batches of 8 and 32 MiB, gates opened by a kernel on each rank (as
  // producers do; queued before the clock starts, and launched in the timed
  // span) and by the host; GB/s received per rank. A small all-gather shows
  // the fixed cost of an epoch.
  Opener opener = kernel_opener(g, cu);
  if (wanted("bandwidth")) {
    RawPeer raw(cu, world, 4096);
    Schedule s = must(chunks(ScheduleView::linear(4096), world, 1), "schedule");
    SymmetricBuffer buf = must(g.allocate(s.bytes()), "allocate");
    TriggeredPlan plan = must(TriggeredPlan::create(g, buf, std::vector<Schedule>(world, s)), "plan");
    record("cuMemcpyPeerAsync all-gather, 4 KiB per rank", raw.seconds(4096, 50) * 1e6, "us");
    record("plan all-gather, 4 KiB per rank, host-opened", plan_seconds(plan, world, 50) * 1e6, "us");
    record("plan all-gather, 4 KiB per rank, run()", plan_seconds(plan, world, 50, {.run = true}) * 1e6, "us");
    record("  of which end_device_epoch after the chains finished",
           plan_seconds(plan, world, 50, {.settle = true}) * 1e6, "us");
    must(plan.destroy(), "destroy");
  }
  // Seconds per epoch by batch size, then way of moving, then shard size:
  // for splitting each epoch into a per-byte rate and a fixed cost.
  std::map<int64_t, std::vector<std::vector<double>>> epoch_s;
  const std::vector<std::string> ways = {"raw copies",    "raw copies behind a kernel",
                                         "kernel-opened", "kernel-opened, launched in the timed span",
                                         "host-opened",   "run()"};
  const int64_t shards[] = {64 * kMiB, 256 * kMiB};
  for (int64_t shard : shards) {
    if (!wanted("bandwidth")) break;
    const double received = static_cast<double>(shard) * (world - 1);
    RawPeer raw(cu, world, shard);
    double raw_s = raw.seconds(shard, 10);
    record(absl::StrCat("cuMemcpyPeerAsync all-gather, ", shard / kMiB, " MiB per rank"), received / raw_s / 1e9,
           "GB/s");
    for (int64_t batch : {8 * kMiB, 32 * kMiB}) {
      std::string what = absl::StrCat(shard / kMiB, " MiB in ", batch / kMiB, " MiB");
      Schedule s = must(chunks(ScheduleView::linear(shard), world, shard / batch), "schedule");
      SymmetricBuffer buf = must(g.allocate(s.bytes()), "allocate");
      std::vector<CUdeviceptr> on_buf;
      for (int r = 0; r < world; ++r) on_buf.push_back(reinterpret_cast<CUdeviceptr>(buf.data(r)));
      double sym_s = RawPeer(cu, world, shard, on_buf).seconds(shard, 10, batch);
      TriggeredPlan plan = must(TriggeredPlan::create(g, buf, std::vector<Schedule>(world, s)), "plan");
      // The raw copies and the plan's three ways of opening gates take turns,
      // so that a drift in the machine's speed during the run hits them all.
      const Opening queued{.kernels = &opener, .queued = true}, launched{.kernels = &opener};
      std::vector<double> t = interleaved(
          {[&] { return raw.seconds(shard, 4, batch); }, [&] { return plan_seconds(plan, world, 4, queued); },
           [&] { return plan_seconds(plan, world, 4, launched); }, [&] { return plan_seconds(plan, world, 4); },
           [&] { return raw.behind_kernel_seconds(opener, shard, 4, batch); },
           [&] { return plan_seconds(plan, world, 4, {.run = true}); }},
          6);
      const double pieces_s = t[0], behind_s = t[4];
      record(absl::StrCat("cuMemcpyPeerAsync all-gather, ", what, " copies"), received / pieces_s / 1e9, "GB/s");
      record(absl::StrCat("cuMemcpyPeerAsync all-gather, ", what, " copies, in symmetric memory"),
             received / sym_s / 1e9, "GB/s");
      record(absl::StrCat("cuMemcpyPeerAsync all-gather, ", what, " copies, queued behind a kernel"),
             received / behind_s / 1e9, "GB/s");
      // The ways of moving after the raw two, as `ways` names them.
      const double plan_s[] = {t[1], t[2], t[3], t[5]};
      std::vector<std::vector<double>>& by_way = epoch_s[batch];
      by_way.resize(ways.size());
      by_way[0].push_back(pieces_s);
      by_way[1].push_back(behind_s);
      for (size_t i = 0; i < std::size(plan_s); ++i) {
        const double s = plan_s[i];
        by_way[i + 2].push_back(s);
        record(absl::StrCat("plan all-gather, ", what, " batches, ", ways[i + 2]), received / s / 1e9, "GB/s",
               ratio(pieces_s / s, ">= 0.95 vs the same copies") +
                   absl::StrCat(", ", absl::StrFormat("%.3f", raw_s / s), " vs one copy") +
                   (i == 0 ? absl::StrFormat(", %.3f vs the same copies behind a kernel", behind_s / s) : ""));
      }
      must(plan.destroy(), "destroy");
    }
  }

  // An epoch of b bytes per direction takes fixed + b / rate: the rate
  // through both shard sizes is what the copies sustain, the fixed part
  // what starting and finishing an epoch costs.
  for (const auto& [batch, by_way] : epoch_s) {
    if (by_way[0].size() != std::size(shards)) continue;
    const double extra = static_cast<double>(shards[1] - shards[0]) * (world - 1);
    auto rate = [&](const std::vector<double>& t) { return extra / (t[1] - t[0]); };
    auto fixed = [&](const std::vector<double>& t) {
      return t[0] - static_cast<double>(shards[0]) * (world - 1) / rate(t);
    };
    const double raw_rate = rate(by_way[0]);
    for (size_t i = 0; i < ways.size(); ++i) {
      const std::string what = absl::StrCat(ways[i], ", ", batch / kMiB, " MiB pieces, 64 -> 256 MiB");
      record(absl::StrCat("rate past the first 64 MiB: ", what), rate(by_way[i]) / 1e9, "GB/s",
             i == 0 ? "" : absl::StrFormat("%.3f of the raw copies' rate", rate(by_way[i]) / raw_rate));
      record(absl::StrCat("fixed cost of an epoch: ", what), fixed(by_way[i]) * 1e6, "us",
             i == 0 ? "" : absl::StrFormat("%+.1f us vs the raw copies", (fixed(by_way[i]) - fixed(by_way[0])) * 1e6));
    }
  }

  // 2. Latency: 4 KiB batches ping-ponged by one program per GPU.
  if (wanted("latency")) {
    constexpr int kHops = 256;
    Group pair = must(Group::create({devices[0], devices[1]}), "group of cuda:0 and cuda:1");
    Schedule s = must(chunks(ScheduleView::linear(kHops * 4096), 2, kHops), "schedule");
    SymmetricBuffer buf = must(pair.allocate(s.bytes()), "allocate");
    Kernel k = ping_pong();
    Function f0 = must(pair.device(0).compile(k), "compile"), f1 = must(pair.device(1).compile(k), "compile");
    Stream s0 = must(pair.device(0).create_stream(), "stream"), s1 = must(pair.device(1).create_stream(), "stream");
    RawPeer raw(cu, 2, 4096);
    TriggeredPlan plan = must(TriggeredPlan::create(pair, buf, {s, s}, {.name = "ping_pong"}), "plan");
    int32_t own0 = static_cast<int32_t>(*plan.batch_id(0, 0)), own1 = static_cast<int32_t>(*plan.batch_id(1, 0));
    std::vector<double> t;
    for (int rep = 0; rep < 8; ++rep) {
      std::vector<ViewHeader*> views = must(plan.begin_device_epoch(), "begin");
      auto t0 = Clock::now();
      must(f1.launch({.grid = 1, .stream = &s1}, views[1], own1, own0, kHops, 0), "launch");
      must(f0.launch({.grid = 1, .stream = &s0}, views[0], own0, own1, kHops, 1), "launch");
      must(plan.end_device_epoch(), "end");
      if (rep >= 2) t.push_back(seconds_since(t0));
      must(s0.synchronize(), "sync");
      must(s1.synchronize(), "sync");
      must(plan.next_epoch(), "next");
    }
    double hop_us = median(t) / (2 * kHops) * 1e6;
    double raw_us = raw.seconds(4096, 50) * 1e6;
    record("raw 4 KiB cuMemcpyPeerAsync + sync, host-timed", raw_us, "us");
    record("gate -> 4 KiB delivered -> seen by peer kernel, per hop", hop_us, "us", "target <= 15");
  }

  // 3. Overlap: producer + its transfer against max(producer alone, transfer
  // alone). Everything is allocated and loaded before either plan arms.
  if (wanted("overlap")) {
    const int sms = g.device(0).num_compute_units(), programs = sms * programs_per_sm;
    // 2K bands of tiles per wave of K programs per SM: one contiguous copy
    // per batch and peer, 128 / K waves at any number of ranks (a pipelined
    // batch takes one place on each of its owner's streams, which hold about
    // a thousand). (On H200s, K = 2 or 4 did not hide the publishes' system
    // fences behind other programs' work: docs/triggered.md.)
    samples::AllGatherConfig config{.rows = 8192,
                                    .cols = samples::kAgBN * sms / 2,
                                    .programs = programs,
                                    .check_programs = programs,
                                    .defer = defer,
                                    .check = false};
    Group solo = must(Group::create({devices[0]}), "one-rank group");
    // Batches of one wave (K MiB) and of 4 MiB: fewer publishes and copies,
    // a later start.
    std::vector<int> batch_waves = {1};
    if (4 / programs_per_sm > 1) batch_waves.push_back(4 / programs_per_sm);
    std::vector<std::unique_ptr<samples::AllGather>> boths, alones;
    for (int per : batch_waves) {
      config.waves_per_batch = per;
      boths.push_back(must(samples::AllGather::create(g, config), "all-gather"));
      alones.push_back(must(samples::AllGather::create(solo, config), "one-rank all-gather"));
    }
    const int64_t mib = int64_t{config.rows} * config.cols * 4 / kMiB;
    // The same producer with no publish, on cuda:0 alone: its work without
    // handing anything off. Loaded before any plan below arms.
    Function bare = must(g.device(0).compile(must(samples::allgather_producer_kernel(false), "build")), "compile");
    Stream bare_stream = must(g.device(0).create_stream(), "stream");
    auto bare_seconds = [&](const samples::AllGather& ag, int passes, int rounds, int waves_per_batch) {
      ViewHeader* no_view = nullptr;
      int32_t* data = ag.buffer().as<int32_t>(0);
      auto run = [&] {
        return bare.launch({.grid = programs, .stream = &bare_stream}, no_view, data, int32_t{0}, config.rows,
                           config.cols, int32_t{1}, int32_t{0}, passes, rounds, waves_per_batch, defer);
      };
      std::vector<double> t;
      for (int rep = 0; rep < 13; ++rep) {
        auto t0 = Clock::now();
        must(run(), "producer without publishes");
        must(bare_stream.synchronize(), "sync");
        if (rep >= 3) t.push_back(seconds_since(t0));
      }
      return median(t);
    };
    {
      // One variant serves every launch below: none of the integers it
      // varies (passes, rounds, waves per batch) shapes an access.
      ViewHeader* no_view = nullptr;
      must(bare.prepare(no_view, alones[0]->buffer().as<int32_t>(0), int32_t{0}, config.rows, config.cols, int32_t{1},
                        int32_t{0}, int32_t{1}, int32_t{0}, batch_waves[0], defer),
           "load the producer without publishes");
    }
    for (size_t i = 0; i < batch_waves.size(); ++i) {
      samples::AllGather &both = *boths[i], &alone = *alones[i];
      const std::string batches =
          absl::StrCat(both.schedule().batches(0).size(), " batches",
                       programs_per_sm == 1 ? "" : absl::StrCat(", ", programs_per_sm, " programs per SM"),
                       defer ? "" : ", no deferred fences");
      // The transfer alone, at its fastest: the same chains with one
      // contributor per batch, every gate opened at once by a kernel.
      double transfer = 0;
      {
        Schedule s = both.schedule();
        for (std::vector<Batch>& rank_batches : s.mutable_per_rank()) {
          for (Batch& b : rank_batches) b.contributors = 1;
        }
        TriggeredPlan plan = must(TriggeredPlan::create(g, both.buffer(), std::vector<Schedule>(world, s)), "plan");
        transfer = plan_seconds(plan, world, 10, {.kernels = &opener});
        must(plan.destroy(), "destroy");
      }
      must(both.arm(), "arm");
      must(alone.arm(), "arm");
      record(absl::StrCat("transfer alone (plan, kernel-opened), ", mib, " MiB per rank in ", batches), transfer * 1e6,
             "us");
      // And the plan's own chains, opened by host publishes (bounded by the
      // host's rate).
      double per_publish = 0;
      const double host_opened = plan_seconds(both.plan(), world, 10, {.per_publish = &per_publish});
      record(absl::StrCat("transfer alone (plan, host-opened), ", mib, " MiB per rank in ", batches), host_opened * 1e6,
             "us", absl::StrFormat("host time per publish() %.2f us", per_publish * 1e6));
      record(absl::StrCat("transfer alone (plan, run()), ", mib, " MiB per rank in ", batches),
             plan_seconds(both.plan(), world, 10, {.run = true}) * 1e6, "us");
      // Producers of two kinds: writing each tile 1, 8 or 32 times (bound by
      // the GPU's memory, which the transfer's reads and the peers' writes
      // share), and 128, 256 or 512 rounds of arithmetic per element, in
      // registers, before one write (bound by work on the chip).
      struct Producer {
        int passes, rounds;
      };
      for (Producer p : {Producer{1, 0}, {8, 0}, {32, 0}, {1, 128}, {1, 256}, {1, 512}}) {
        const std::string what = absl::StrCat(
            p.rounds == 0 ? absl::StrCat(p.passes, " passes") : absl::StrCat(p.rounds, " rounds of arithmetic"), ", ",
            batches);
        for (samples::AllGather* ag : {&both, &alone}) {
          ag->set_passes(p.passes);
          ag->set_rounds(p.rounds);
        }
        // Epochs timed from the kernels' launch until end_device_epoch
        // returned, as plan_seconds times the transfer; and until the
        // producers finished (their streams polled), beside the transfer or not.
        std::vector<double> tb, tc, ta, produced_beside, produced_alone;
        for (int rep = 0; rep < 13; ++rep) {
          double epoch = 0, produced = 0;
          const bool kept = rep >= 3;  // the first three warm up
          must(both.run_epoch(&epoch, producers_done(cu, opener.ctx, both, &produced)).status(), "epoch");
          if (kept) {
            tb.push_back(epoch);
            produced_beside.push_back(produced);
          }
          auto t0 = Clock::now();
          must(both.plan().next_epoch(), "next");
          if (kept) ta.push_back(seconds_since(t0));
          must(alone.run_epoch(&epoch, producers_done(cu, opener.ctx, alone, &produced)).status(), "epoch alone");
          if (kept) {
            tc.push_back(epoch);
            produced_alone.push_back(produced);
          }
          must(alone.plan().next_epoch(), "next");
        }
        double compute = median(tc), overlapped = median(tb);
        const double work = bare_seconds(alone, p.passes, p.rounds, batch_waves[i]);
        record(absl::StrCat("producer alone, ", mib, " MiB per rank, ", what), compute * 1e6, "us");
        record(absl::StrCat("producer + transfer overlapped, ", what), overlapped * 1e6, "us",
               ratio(overlapped / std::max(compute, transfer), "<= 1.05 of max(compute, transfer)"));
        record("  producer kernels finished, alone / beside the transfer", median(produced_alone) * 1e6, "us",
               absl::StrFormat("%.1f us beside it", median(produced_beside) * 1e6));
        // Against the producer's work with no publish at all: what
        // publishing costs it, per batch and program, and the overlap
        // against max(that work, transfer).
        const double batches_per_program = static_cast<double>(both.schedule().batches(0).size());
        record("  the same producer without publishes, cuda:0", work * 1e6, "us",
               absl::StrFormat("publishing costs it %.2f us per batch; overlapped / max(this, transfer) %.3f",
                               (median(produced_alone) - work) / batches_per_program * 1e6,
                               overlapped / std::max(work, transfer)));
        if (p.passes == 1 && p.rounds == 0) {
          record(absl::StrCat("next_epoch (arming ", batches, " per rank)"), median(ta) * 1e6, "us",
                 "host time between epochs");
        }
      }
      must(both.disarm(), "disarm");
      must(alone.disarm(), "disarm");
    }
    samples::AllGather& both = *boths[0];
    // An epoch loop as a program runs it, run_epoch then next_epoch: the
    // arming costs the host more than the epoch here, unless end_device_epoch
    // arms the next epoch while the transfer runs (arm_ahead).
    both.set_passes(1);
    both.set_rounds(0);
    double plain_loop = 0;
    for (bool ahead : {false, true}) {
      must(both.arm({.arm_ahead = ahead}), "arm");
      std::vector<double> t;
      for (int rep = 0; rep < 13; ++rep) {
        auto t0 = Clock::now();
        must(both.run_epoch().status(), "epoch");
        must(both.plan().next_epoch(), "next");
        if (rep >= 3) t.push_back(seconds_since(t0));
      }
      double loop = median(t);
      if (!ahead) plain_loop = loop;
      record(absl::StrCat("epoch loop (run_epoch + next_epoch), 1 pass", ahead ? ", armed ahead" : ""), loop * 1e6,
             "us", ahead ? absl::StrFormat("%.3f of the loop armed by next_epoch", loop / plain_loop) : "");
    }
  }

  if (!json.empty()) {
    std::ofstream out(json);
    out << "[\n";
    for (size_t i = 0; i < lines.size(); ++i) out << "  " << lines[i] << (i + 1 < lines.size() ? ",\n" : "\n");
    out << "]\n";
  }
  return 0;
}
