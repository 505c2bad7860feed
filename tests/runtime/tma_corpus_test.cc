// validate() against the CUDA driver's recorded verdicts
// (tests/data/tma_driver_corpus.txt, written by tests/gpu/tma_driver_test.cc
// on an H200): every case the driver refused, tessel refuses, and every case
// it accepted, tessel accepts or refuses by a deliberate rule.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tma_cases.h"

namespace tessel {
namespace {

// Any 256-byte-aligned base: only the offsets from it matter.
constexpr uintptr_t kBase = uintptr_t{0x7f0000000000};

TEST(TmaCorpus, ValidateAgreesWithTheDriversRecordedVerdicts) {
  std::ifstream in(absl::StrCat(TESSEL_SOURCE_DIR, "/tests/data/tma_driver_corpus.txt"));
  ASSERT_TRUE(in) << "tests/data/tma_driver_corpus.txt is missing";
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<tma_cases::Corpus> corpus = tma_cases::Corpus::parse(text.str());
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  const int64_t count = static_cast<int64_t>(corpus->accepted.size());
  ASSERT_GE(count, 100000);
  // The generator still makes the cases the driver judged.
  ASSERT_EQ(tma_cases::block_fingerprints(corpus->seed, count, kBase), corpus->blocks)
      << "tests/tma_cases.cc no longer makes the recorded cases: record the corpus again on a GPU";
  int64_t deliberate = 0, accepted = 0;
  std::string unexplained;
  int shown = 0;
  for (int64_t i = 0; i < count; ++i) {
    const TensorMapSpec spec = tma_cases::make(corpus->seed, i, kBase);
    const bool driver = corpus->accepted[i];
    accepted += driver;
    absl::Status ours;
    const tma_cases::Verdict verdict = tma_cases::judge(spec, driver, &ours);
    if (verdict == tma_cases::Verdict::kAgree) continue;
    if (verdict == tma_cases::Verdict::kDeliberate) {
      ++deliberate;
      continue;
    }
    if (shown++ < 10) {
      absl::StrAppend(&unexplained, "case ", i, ": the driver ", driver ? "accepted" : "refused",
                      " it; tessel: ", ours.ok() ? "OK" : ours.message(), "\n  ", tma_cases::describe(spec, kBase),
                      "\n");
    }
  }
  EXPECT_EQ(shown, 0) << shown << " unexplained disagreements with " << corpus->driver << ":\n" << unexplained;
  // Both verdicts are well represented.
  EXPECT_GT(accepted, count / 5);
  EXPECT_GT(count - accepted, count / 5);
  std::printf("%lld cases (%s): the driver accepted %lld, of which tessel refuses %lld on purpose\n",
              static_cast<long long>(count), corpus->driver.c_str(), static_cast<long long>(accepted),
              static_cast<long long>(deliberate));
}

TEST(TmaCorpus, ParseRefusesMalformedFiles) {
  EXPECT_THAT(tma_cases::Corpus::parse("seed 1\ncount 8\nverdicts ff\n").status().message(),
              ::testing::HasSubstr("0 block fingerprints for 8 cases"));
  EXPECT_THAT(tma_cases::Corpus::parse("seed 1\ncount 9\nblock 0\nverdicts ff\n").status().message(),
              ::testing::HasSubstr("8 verdicts for a count of 9"));
  EXPECT_THAT(tma_cases::Corpus::parse("seed x\n").status().message(), ::testing::HasSubstr("bad line: seed x"));
  tma_cases::Corpus c;
  c.seed = 7;
  c.driver = "test";
  c.accepted = {true, false, true, true, false};
  c.blocks = {42};
  absl::StatusOr<tma_cases::Corpus> back = tma_cases::Corpus::parse(c.serialize());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->accepted, c.accepted);
  EXPECT_EQ(back->blocks, c.blocks);
  EXPECT_EQ(back->driver, "test");
}

}  // namespace
}  // namespace tessel
