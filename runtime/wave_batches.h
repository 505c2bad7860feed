// How the waves() schedule builder groups a persistent kernel's waves into
// batches, in one place for both sides: on the host, to build the schedule,
// and in a kernel, to publish the batch a tile closes.
//
// A persistent kernel of P programs over T tiles runs N = ceil(T / P) waves
// (wave w: tiles [w * P, (w + 1) * P)). Large batches cost fewer publishes
// and copies, but the transfer starts only when the first batch is done and
// ends a whole batch's copy after the producer. So the first `single_first`
// and the last `single_last` waves may be batches of one wave each, with the
// waves between them in batches of `waves_per_batch` (the last of those
// shorter when they do not divide evenly). Where N is too small for all of
// that, the single batches come first: the first min(single_first, N), then
// the last min(single_last, N - those).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "dsl/value.h"

namespace tessel {

struct WaveBatching {
  int waves_per_batch = 1;  // waves in each batch between the single ones
  int single_first = 0;     // first waves that are batches of one wave each
  int single_last = 0;      // last waves that are batches of one wave each
};

// InvalidArgument naming `who` and the field unless waves_per_batch >= 1
// and the single counts are >= 0.
absl::Status check_wave_batching(const WaveBatching& batching, const char* who);

// Where wave `wave` (0 <= wave < num_waves) of a kernel of `num_waves` waves
// lies: its batch, and whether it is the batch's last wave.
struct WavePlace {
  int64_t batch = 0;
  bool closes = false;
};
WavePlace wave_place(const WaveBatching& batching, int64_t num_waves, int64_t wave);

// How many batches the waves of a kernel of `num_waves` waves make.
int64_t num_wave_batches(const WaveBatching& batching, int64_t num_waves);

// The same in a kernel, from i32 scalars (the WaveBatching fields are
// usually kernel arguments): `batch` the wave's batch, `closes` (i1) whether
// the wave is its batch's last.
struct WavePlaceValues {
  Value batch;
  Value closes;
};
WavePlaceValues wave_place(const Value& wave, const Value& num_waves, const Value& waves_per_batch,
                           const Value& single_first, const Value& single_last);

}  // namespace tessel
