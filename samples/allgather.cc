// A triggered all-gather: on every rank a persistent producer writes its
// shard tile by tile and publishes one batch per wave; copy chains armed in
// advance carry each batch to every peer (copy engines on GPUs, copy threads
// on host ranks), so no program of any kernel is spent on the transfer. Each
// rank's check kernel waits for all batches and counts wrong elements.
//
//   allgather [--device=best|host|cuda] [--ranks=N]
// best: every GPU when there are two or more, else 4 host ranks.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "allgather.h"
#include "common.h"
#include "kernels.h"

using namespace tessel;

namespace {

// cuda:0 .. cuda:N-1 (all GPUs when N is 0).
std::vector<Device> gpus(int n) {
  std::vector<Device> devices;
  for (int r = 0; n == 0 || r < n; ++r) {
    absl::StatusOr<Device> d = Device::open(absl::StrCat("cuda:", r));
    if (!d.ok()) break;
    devices.push_back(*d);
  }
  return devices;
}

}  // namespace

int main(int argc, char** argv) {
  samples::Args args = samples::parse_args(argc, argv);
  Kernel producer = samples::value_or_die(samples::allgather_producer_kernel(), "build producer");
  Kernel check = samples::value_or_die(samples::allgather_check_kernel(), "build check");
  if (samples::emit_for_target(args, {producer, check})) return 0;

  std::vector<Device> devices;
  if (args.device == "best" || args.device == "cuda") devices = gpus(args.ranks);
  if (args.device == "cuda" && devices.size() < 2) {
    std::fprintf(stderr, "allgather: --device=cuda needs at least 2 GPUs, found %zu\n", devices.size());
    return 1;
  }
  absl::StatusOr<Group> group = devices.size() >= 2 ? Group::create(devices)
                                                    : Group::host(args.ranks == 0 ? 4 : args.ranks, 2);
  Group g = samples::value_or_die(std::move(group), "group");
  int programs = g.device(0).num_compute_units();
  // A row of tiles is half a wave, so each wave's batch is two whole bands
  // of rows: one contiguous copy per batch and peer.
  int cols = samples::kAgBN * std::max(1, programs / 2);
  samples::AllGatherConfig config{.rows = 1024, .cols = cols, .programs = programs, .check_programs = programs};
  auto ag = samples::value_or_die(samples::AllGather::create(g, config), "all-gather");
  // Each end_device_epoch arms the next epoch while the transfer runs.
  samples::ok_or_die(ag->arm({.arm_ahead = true}), "all-gather plan");
  std::printf("all-gather over %d ranks (%s ...): %d x %d i32 per rank, %lld batches, %d producer programs\n",
              g.size(), g.device(0).name().c_str(), config.rows, config.cols,
              static_cast<long long>(ag->plan().schedule().num_batches()), programs);
  const int epochs = 20;
  int64_t wrong = 0;
  auto start = std::chrono::steady_clock::now();
  for (int e = 1; e <= epochs; ++e) {
    wrong += samples::value_or_die(ag->run_epoch(), "epoch");
    if (e < epochs) samples::ok_or_die(ag->plan().next_epoch(), "next epoch");
  }
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("%d epochs, %.3f ms each: %lld wrong elements\n", epochs, ms / epochs, static_cast<long long>(wrong));
  return wrong == 0 ? 0 : 1;
}
