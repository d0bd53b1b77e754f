// The rotor's step past lanes this store is writing (storage/busy_lanes.hpp).
#include "storage/busy_lanes.hpp"

#include <gtest/gtest.h>

namespace awa::storage {
namespace {

TEST(BusyLanesTest, AnIdleQueueGetsTheRotorsPick) {
  BusyLanes busy;
  BusyLanes::Hold hold;
  EXPECT_EQ(busy.pick("q", 2, 8, 5, hold), 5);
  EXPECT_EQ(busy.writers("q", 2, 5), 1);
}

TEST(BusyLanesTest, APickStepsPastLanesBeingWrittenAndWrapsAround) {
  BusyLanes busy;
  BusyLanes::Hold a, b, c;
  EXPECT_EQ(busy.pick("q", 2, 4, 2, a), 2);
  EXPECT_EQ(busy.pick("q", 2, 4, 2, b), 3);  // 2 is being written
  EXPECT_EQ(busy.pick("q", 2, 4, 3, c), 0);  // 3 and (wrapping) nothing before 0
  // Other priorities and queues are other lanes.
  BusyLanes::Hold d, e;
  EXPECT_EQ(busy.pick("q", 1, 4, 2, d), 2);
  EXPECT_EQ(busy.pick("r", 2, 4, 2, e), 2);
}

TEST(BusyLanesTest, WhenEveryShardIsBeingWrittenTheRotorsPickStands) {
  BusyLanes busy;
  BusyLanes::Hold a, b, c;
  EXPECT_EQ(busy.pick("q", 2, 2, 0, a), 0);
  EXPECT_EQ(busy.pick("q", 2, 2, 0, b), 1);
  EXPECT_EQ(busy.pick("q", 2, 2, 1, c), 1);
  EXPECT_EQ(busy.writers("q", 2, 1), 2);
}

TEST(BusyLanesTest, AnEndedCallFreesItsLanes) {
  BusyLanes busy;
  {
    BusyLanes::Hold a;
    EXPECT_EQ(busy.pick("q", 2, 4, 1, a), 1);
    busy.add("q", 2, 2, a);  // a keyed row's lane in the same call
    BusyLanes::Hold b;
    EXPECT_EQ(busy.pick("q", 2, 4, 1, b), 3);
  }
  EXPECT_EQ(busy.writers("q", 2, 1), 0);
  EXPECT_EQ(busy.writers("q", 2, 2), 0);
  EXPECT_EQ(busy.writers("q", 2, 3), 0);
  BusyLanes::Hold c;
  EXPECT_EQ(busy.pick("q", 2, 4, 1, c), 1);
}

TEST(BusyLanesTest, KeyedLanesAreAvoidedByUnkeyedPicks) {
  BusyLanes busy;
  BusyLanes::Hold keyed, unkeyed;
  busy.add("q", 2, 0, keyed);
  EXPECT_EQ(busy.pick("q", 2, 3, 0, unkeyed), 1);
}

TEST(BusyLanesTest, AMovedHoldReleasesOnce) {
  BusyLanes busy;
  BusyLanes::Hold a;
  busy.pick("q", 2, 4, 0, a);
  BusyLanes::Hold b(std::move(a));
  a.reset();  // moved from: owns nothing
  EXPECT_EQ(busy.writers("q", 2, 0), 1);
  BusyLanes::Hold c;
  c = std::move(b);
  EXPECT_EQ(busy.writers("q", 2, 0), 1);
  c.reset();
  EXPECT_EQ(busy.writers("q", 2, 0), 0);
}

}  // namespace
}  // namespace awa::storage
