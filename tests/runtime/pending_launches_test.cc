// Which synchronize may read a module's device buffers (runtime/pending_launches.h).
#include "runtime/pending_launches.h"

#include "gtest/gtest.h"

namespace tessel {
namespace {

const char handles[2] = {};  // two streams' handles
const void* const s = &handles[0];
const void* const t = &handles[1];

TEST(PendingLaunches, AStreamTakesTheModuleOnlyWhenNoOtherStreamHasALaunchPending) {
  PendingLaunches p;
  EXPECT_FALSE(p.take());
  EXPECT_FALSE(p.take(s));

  p.add(s);
  p.add(s);
  EXPECT_FALSE(p.take(t));  // nothing launched there
  EXPECT_TRUE(p.take(s));
  EXPECT_FALSE(p.take(s));  // read once

  // Launched on both: the first stream's synchronize leaves it to the second's.
  p.add(s);
  p.add(t);
  EXPECT_FALSE(p.take(s));
  EXPECT_TRUE(p.take(t));

  // The default stream's launches wait for the device's synchronize.
  p.add(nullptr);
  p.add(t);
  EXPECT_FALSE(p.take(t));
  EXPECT_FALSE(p.take(s));
  EXPECT_TRUE(p.take());
  EXPECT_FALSE(p.take());
}

}  // namespace
}  // namespace tessel
