// A test's random generator, seeded at random, with the seed in the
// messages of the test's failures (so that a failing case can be run
// again).
#pragma once

#include <random>

#include "gtest/gtest.h"

#define TESSEL_SEEDED_GEN(gen)                                 \
  const unsigned gen##_seed = std::random_device{}();          \
  SCOPED_TRACE(::testing::Message() << "seed " << gen##_seed); \
  std::mt19937 gen(gen##_seed)
