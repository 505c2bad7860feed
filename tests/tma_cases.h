// Random tensor-map specs for checking validate() against the CUDA driver's
// verdicts: a seeded generator (its own PRNG, so every build makes the same
// cases), the rules where tessel is deliberately stricter than the driver,
// and the corpus file that keeps the driver's verdicts so that a machine
// without a GPU checks the validator against them
// (tests/data/tma_driver_corpus.txt, recorded by tests/gpu/tma_driver_test.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/tensor_map.h"

namespace tessel::tma_cases {

// The largest rank a case may have: past the driver's 5, to probe its refusal.
inline constexpr int kMaxCaseRank = 6;

// The cases the corpus records.
inline constexpr uint64_t kCorpusSeed = 20261201;
inline constexpr int64_t kCorpusCases = 400000;

// Case `index` of the cases seeded by `seed`: every dtype but i1, ranks 0 to
// 6, interleave, swizzle and fill, addresses `base` plus an offset (some
// misaligned, a few null), dims, strides (dense, padded, overlapping, odd,
// huge), boxes and element strides near and past every limit. Strides and
// element strides are always explicit. `base` must be 256-byte aligned.
TensorMapSpec make(uint64_t seed, uint64_t index, uintptr_t base);

// A hash of everything in `spec` but the base address (only its offset
// from `base`), to tell whether the generator still makes the recorded cases.
uint64_t fingerprint(const TensorMapSpec& spec, uintptr_t base);

// Why tessel refuses a spec the driver accepts, where that is deliberate;
// nullopt where it is not.
std::optional<std::string> deliberate_refusal(const TensorMapSpec& spec);

// How validate() on a Hopper GPU (compute capability 90) stands to the
// driver's verdict on `spec`; `ours` gets validate()'s answer.
enum class Verdict { kAgree, kDeliberate, kDisagree };
Verdict judge(const TensorMapSpec& spec, bool driver_accepted, absl::Status* ours);

// The driver's verdicts on cases [0, count) of `seed`.
struct Corpus {
  uint64_t seed = 0;
  std::string driver;  // the driver that gave them ("580.159, CUDA 13.0")
  std::vector<bool> accepted;
  // fingerprint() of each block of kBlock cases, xor-folded.
  std::vector<uint64_t> blocks;
  static constexpr int64_t kBlock = 4096;

  std::string serialize() const;
  static absl::StatusOr<Corpus> parse(const std::string& text);
};

// The fingerprints of cases [0, count) of `seed`, folded per block.
std::vector<uint64_t> block_fingerprints(uint64_t seed, int64_t count, uintptr_t base);

// "f32 rank 3 dims {..} strides {..} box {..} element_strides {..} swizzle 64B
// interleave 16B fill nan address base+16": a case for messages.
std::string describe(const TensorMapSpec& spec, uintptr_t base);

}  // namespace tessel::tma_cases
