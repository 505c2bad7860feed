// Wave batching: the host's numbering (the schedule) and a kernel's
// (wave_place on values) must agree wave for wave, or a producer publishes
// batches the plan does not copy as it thinks.
#include "runtime/wave_batches.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "dsl/builder.h"
#include "dsl/ops.h"
#include "gtest/gtest.h"
#include "runtime/device.h"

namespace tessel {
namespace {

TEST(WaveBatches, HostPlacesWavesInBatches) {
  // 10 waves, 3 per batch between 1 single first and 2 single last:
  // 0 | 1 2 3 | 4 5 6 | 7 | 8 | 9.
  const WaveBatching b{.waves_per_batch = 3, .single_first = 1, .single_last = 2};
  std::vector<int64_t> batch;
  std::vector<bool> closes;
  for (int64_t w = 0; w < 10; ++w) {
    batch.push_back(wave_place(b, 10, w).batch);
    closes.push_back(wave_place(b, 10, w).closes);
  }
  EXPECT_EQ(batch, (std::vector<int64_t>{0, 1, 1, 1, 2, 2, 2, 3, 4, 5}));
  EXPECT_EQ(closes, (std::vector<bool>{true, false, false, true, false, false, true, true, true, true}));
  EXPECT_EQ(num_wave_batches(b, 10), 6);
  EXPECT_EQ(num_wave_batches(b, 2), 2);  // single first, then single last
  EXPECT_EQ(num_wave_batches({.waves_per_batch = 4}, 9), 3);
  EXPECT_EQ(num_wave_batches({.waves_per_batch = 4, .single_first = 20}, 9), 9);
}

TEST(WaveBatches, RejectsBadBatchingNamingTheField) {
  EXPECT_EQ(check_wave_batching({.waves_per_batch = 0}, "x").message(), "x: waves_per_batch 0 must be >= 1");
  EXPECT_EQ(check_wave_batching({.waves_per_batch = 2, .single_first = -1}, "x").message(),
            "x: single_first -1 and single_last 0 must be >= 0");
  EXPECT_TRUE(check_wave_batching({.waves_per_batch = 2, .single_last = 3}, "x").ok());
}

// Program w writes wave w's batch and whether it closes it.
Kernel places() {
  KernelBuilder k("places");
  Value out = k.arg(ptr(i32), "out");
  Value num_waves = k.arg(i32, "num_waves"), per = k.arg(i32, "per");
  Value first = k.arg(i32, "first"), last = k.arg(i32, "last");
  Value w = k.program_id();
  WavePlaceValues p = wave_place(w, num_waves, per, first, last);
  store(out + 2 * w, p.batch);
  store(out + 2 * w + 1, cast(p.closes, i32));
  return *k.build();
}

TEST(WaveBatches, KernelsPlaceWavesAsTheHostDoes) {
  Device d = *Device::open("host:2");
  Function fn = *d.compile(places());
  for (int num_waves : {1, 2, 5, 10, 17}) {
    for (int per : {1, 2, 3, 4, 7}) {
      for (int first : {0, 1, 3, 20}) {
        for (int last : {0, 2, 5}) {
          const WaveBatching b{.waves_per_batch = per, .single_first = first, .single_last = last};
          std::vector<int32_t> out(2 * num_waves, -1);
          ASSERT_TRUE(fn.launch({.grid = num_waves}, out.data(), num_waves, per, first, last).ok());
          for (int w = 0; w < num_waves; ++w) {
            const WavePlace want = wave_place(b, num_waves, w);
            SCOPED_TRACE(absl::StrCat("waves ", num_waves, ", per ", per, ", single ", first, "/", last, ", wave ", w));
            EXPECT_EQ(out[2 * w], want.batch);
            EXPECT_EQ(out[2 * w + 1], want.closes ? 1 : 0);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tessel
