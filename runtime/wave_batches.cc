#include "runtime/wave_batches.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "dsl/ops.h"

namespace tessel {

absl::Status check_wave_batching(const WaveBatching& batching, const char* who) {
  if (batching.waves_per_batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(who, ": waves_per_batch ", batching.waves_per_batch, " must be >= 1"));
  }
  if (batching.single_first < 0 || batching.single_last < 0) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": single_first ", batching.single_first, " and single_last ",
                                                   batching.single_last, " must be >= 0"));
  }
  return absl::OkStatus();
}

namespace {

// The waves in single batches at either end, and those between.
struct Regions {
  int64_t first, middle, middle_batches;
};

Regions regions(const WaveBatching& batching, int64_t num_waves) {
  const int64_t first = std::min<int64_t>(batching.single_first, num_waves);
  const int64_t last = std::min<int64_t>(batching.single_last, num_waves - first);
  const int64_t middle = num_waves - first - last;
  return {first, middle, (middle + batching.waves_per_batch - 1) / batching.waves_per_batch};
}

}  // namespace

WavePlace wave_place(const WaveBatching& batching, int64_t num_waves, int64_t wave) {
  const Regions r = regions(batching, num_waves);
  const int64_t w = batching.waves_per_batch;
  if (wave < r.first) return {wave, true};
  if (wave < r.first + r.middle) {
    const int64_t in = wave - r.first;
    return {r.first + in / w, in % w == w - 1 || wave == r.first + r.middle - 1};
  }
  return {r.first + r.middle_batches + (wave - r.first - r.middle), true};
}

int64_t num_wave_batches(const WaveBatching& batching, int64_t num_waves) {
  const Regions r = regions(batching, num_waves);
  return num_waves - r.middle + r.middle_batches;
}

WavePlaceValues wave_place(const Value& wave, const Value& num_waves, const Value& waves_per_batch,
                           const Value& single_first, const Value& single_last) {
  Value first = minimum(single_first, num_waves);
  Value last = minimum(single_last, num_waves - first);
  Value middle = num_waves - first - last;
  Value in = wave - first;  // negative in the first region, where it is not used
  Value in_middle = (wave >= first) & (wave < first + middle);
  Value batch =
      select(wave < first, wave,
             select(in_middle, first + in / waves_per_batch, first + cdiv(middle, waves_per_batch) + in - middle));
  Value closes = (!in_middle) | (in % waves_per_batch == waves_per_batch - 1) | (wave == first + middle - 1);
  return {batch, closes};
}

}  // namespace tessel
