// The producers' wake-up rule (storage/wake_coalescer.hpp): which NOTIFYs are sent.
#include "storage/wake_coalescer.hpp"

#include <gtest/gtest.h>

namespace awa::storage {
namespace {

using Clock = WakeCoalescer::Clock;
using std::chrono::microseconds;
using V = std::vector<std::string>;

const Clock::time_point t0 = Clock::time_point{} + std::chrono::hours(1);

TEST(WakeCoalescerTest, TheFirstCallOfAQueueCarriesItsNotify) {
  WakeCoalescer w;
  EXPECT_EQ(w.carry({"a", "b"}, t0), (V{"a", "b"}));
}

TEST(WakeCoalescerTest, CallsWithinTheWindowCarryNoneAndAreCoveredAfterCommit) {
  WakeCoalescer w;
  ASSERT_EQ(w.carry({"a"}, t0), V{"a"});
  const auto inside = t0 + WakeCoalescer::kWindow - microseconds(1);
  EXPECT_TRUE(w.carry({"a"}, inside).empty());
  // Acknowledged within the window of the NOTIFY sent at t0: covered.
  EXPECT_TRUE(w.after_commit({"a"}, t0 + WakeCoalescer::kWindow).empty());
  // Acknowledged later: this call must send its own, and that one covers the next.
  const auto late = t0 + WakeCoalescer::kWindow + microseconds(1);
  EXPECT_EQ(w.after_commit({"a"}, late), V{"a"});
  EXPECT_TRUE(w.carry({"a"}, late + microseconds(10)).empty());
  EXPECT_TRUE(w.after_commit({"a"}, late + WakeCoalescer::kWindow).empty());
}

TEST(WakeCoalescerTest, AfterTheWindowACallCarriesItsNotifyAgain) {
  WakeCoalescer w;
  ASSERT_EQ(w.carry({"a"}, t0), V{"a"});
  EXPECT_EQ(w.carry({"a"}, t0 + WakeCoalescer::kWindow), V{"a"});
}

TEST(WakeCoalescerTest, QueuesAreCoalescedApart) {
  WakeCoalescer w;
  ASSERT_EQ(w.carry({"a"}, t0), V{"a"});
  EXPECT_EQ(w.carry({"a", "b"}, t0 + microseconds(5)), V{"b"});
}

TEST(WakeCoalescerTest, AForgottenNotifyCoversNothing) {
  WakeCoalescer w;
  ASSERT_EQ(w.carry({"a"}, t0), V{"a"});
  w.forget({"a"});  // it failed
  EXPECT_EQ(w.carry({"a"}, t0 + microseconds(5)), V{"a"});
  w.forget({"a"});
  EXPECT_EQ(w.after_commit({"a"}, t0 + microseconds(6)), V{"a"});
}

}  // namespace
}  // namespace awa::storage
