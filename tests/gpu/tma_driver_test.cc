// validate() against cuTensorMapEncodeTiled, the specification of what a
// tensor map may be, on the cases of tests/tma_cases.h: every case either
// gets the same verdict from both or is refused by a rule tessel keeps on
// purpose (deliberate_refusal). With TESSEL_TMA_CORPUS_OUT=DIR the run
// writes the driver's verdicts as a corpus (DIR/tma_driver_corpus.txt,
// which tests/data keeps for machines without a GPU) and every disagreement
// in detail (DIR/tma_disagreements.txt).
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/tiled_encoding.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/tma_cases.h"

namespace tessel {
namespace {

TEST(TmaDriver, ValidateAgreesWithTheDriverOnRandomSpecs) {
  TESSEL_OPEN_CUDA_OR_SKIP(device);
  absl::StatusOr<const cuda::Driver*> driver = cuda::Driver::get();
  ASSERT_TRUE(driver.ok()) << driver.status();
  int version = 0;
  ASSERT_TRUE((*driver)->driver_get_version(&version).ok());
  absl::StatusOr<Buffer> buf = device.allocate(4096);
  ASSERT_TRUE(buf.ok()) << buf.status();
  const uintptr_t base = reinterpret_cast<uintptr_t>(buf->data());
  ASSERT_EQ(base % 256, 0u);

  tma_cases::Corpus corpus;
  corpus.seed = tma_cases::kCorpusSeed;
  corpus.driver = absl::StrCat("CUDA ", version / 1000, ".", version % 1000 / 10, " on ", device.name());
  int64_t deliberate = 0, unexplained = 0;
  std::string details;
  for (int64_t i = 0; i < tma_cases::kCorpusCases; ++i) {
    const TensorMapSpec spec = tma_cases::make(corpus.seed, i, base);
    cuda::TiledEncoding e = cuda::tiled_encoding(spec);
    cuda::CUtensorMap map;
    const bool accepted = cuda::encode_tiled(**driver, e, &map).ok();
    corpus.accepted.push_back(accepted);
    absl::Status ours;
    const tma_cases::Verdict verdict = tma_cases::judge(spec, accepted, &ours);
    if (verdict == tma_cases::Verdict::kAgree) continue;
    if (verdict == tma_cases::Verdict::kDeliberate) {
      ++deliberate;
      continue;
    }
    ++unexplained;
    // The driver's verdict on the box as written, before tessel's panels.
    e.box[0] = static_cast<cuda::cuuint32_t>(spec.box.empty() ? 0 : spec.box.back());
    const bool whole = cuda::encode_tiled(**driver, e, &map).ok();
    absl::StrAppend(&details, "case ", i, ": driver ", accepted ? "accepts" : "refuses", " (",
                    whole ? "accepts" : "refuses", " the unpanelled box); tessel: ", ours.ok() ? "OK" : ours.message(),
                    "\n  ", tma_cases::describe(spec, base), "\n");
  }
  corpus.blocks = tma_cases::block_fingerprints(corpus.seed, tma_cases::kCorpusCases, base);
  if (const char* out = std::getenv("TESSEL_TMA_CORPUS_OUT"); out != nullptr) {
    std::ofstream(absl::StrCat(out, "/tma_driver_corpus.txt")) << corpus.serialize();
    std::ofstream(absl::StrCat(out, "/tma_disagreements.txt")) << details;
  }
  int64_t accepted = 0;
  for (bool a : corpus.accepted) accepted += a;
  std::printf(
      "%lld cases: the driver (%s) accepted %lld; tessel refused %lld of those on purpose; %lld disagreements\n",
      static_cast<long long>(tma_cases::kCorpusCases), corpus.driver.c_str(), static_cast<long long>(accepted),
      static_cast<long long>(deliberate), static_cast<long long>(unexplained));
  EXPECT_EQ(unexplained, 0) << details.substr(0, 4000);
}

}  // namespace
}  // namespace tessel
