// What the docs' snippets may assume (tests/docs/snippets_gen.cc): the
// public API, `using namespace tessel`, and two helpers that stand for a
// program's own error handling: must(x) is the value of an OK StatusOr (or
// ends the test naming the error), expect(ok, what) records a failure.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tessel/tessel.h"

namespace tessel::doc_snippets {

template <class T>
T must(absl::StatusOr<T> v) {
  if (!v.ok()) {
    ADD_FAILURE() << v.status();
    std::fprintf(stderr, "must: %s\n", v.status().ToString().c_str());
    std::abort();
  }
  return *std::move(v);
}
inline void must(const absl::Status& s) {
  if (!s.ok()) {
    std::fprintf(stderr, "must: %s\n", s.ToString().c_str());
    std::abort();
  }
}
inline void expect(bool ok, const std::string& what) { EXPECT_TRUE(ok) << what; }

}  // namespace tessel::doc_snippets
