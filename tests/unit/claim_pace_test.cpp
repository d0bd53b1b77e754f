// The prefetch goal (runtime/claim_pace.hpp): what the workers start during one claim.
#include "runtime/claim_pace.hpp"

#include <gtest/gtest.h>

namespace awa::runtime {
namespace {

using std::chrono::milliseconds;
using Clock = ClaimPace::Clock;

TEST(ClaimPaceTest, NoMeasurementNoPrefetch) {
  ClaimPace p;
  EXPECT_EQ(p.goal(512), 0);
  p.observe(0, Clock::time_point{});
  EXPECT_EQ(p.goal(512), 0);
}

TEST(ClaimPaceTest, GoalIsTwiceTheStartsDuringOneClaim) {
  ClaimPace p;
  const Clock::time_point t0{};
  p.observe(0, t0);
  // 100 starts in 10 ms: 10/ms (smoothed from 0: 5/ms); claims of 4 ms.
  p.claimed(milliseconds(4), 100, t0 + milliseconds(10));
  EXPECT_DOUBLE_EQ(p.starts_per_ms(), 5.0);
  EXPECT_DOUBLE_EQ(p.claim_ms(), 4.0);
  EXPECT_EQ(p.goal(512), 40);  // 2 x 5/ms x 4 ms
  p.claimed(milliseconds(4), 200, t0 + milliseconds(20));
  EXPECT_DOUBLE_EQ(p.starts_per_ms(), 7.5);
  EXPECT_EQ(p.goal(512), 60);
  EXPECT_EQ(p.goal(50), 50);  // capped by max_prefetch
  EXPECT_EQ(p.goal(0), 0);    // prefetch off
}

TEST(ClaimPaceTest, SlowHandlersGetNoPrefetch) {
  ClaimPace p;
  const Clock::time_point t0{};
  p.observe(0, t0);
  // 8 handlers of 1 s: 8 starts a second; claims of 2 ms.
  for (int i = 1; i <= 10; ++i)
    p.claimed(milliseconds(2), 8U * static_cast<unsigned>(i), t0 + milliseconds(1000 * i));
  EXPECT_EQ(p.goal(512), 0);  // floor(2 x 0.008/ms x 2 ms)
}

TEST(ClaimPaceTest, TheGoalShrinksWhenStartsStop) {
  ClaimPace p;
  const Clock::time_point t0{};
  p.observe(0, t0);
  p.claimed(milliseconds(5), 1000, t0 + milliseconds(10));  // 50/ms (smoothed)
  ASSERT_EQ(p.goal(512), 500);
  // The workers block: no starts for a while; each observation halves the rate.
  for (int i = 1; i <= 12; ++i) p.observe(1000, t0 + milliseconds(10 + 100 * i));
  EXPECT_EQ(p.goal(512), 0);
}

TEST(ClaimPaceTest, ShortWindowsAreIgnored) {
  ClaimPace p;
  const Clock::time_point t0{};
  p.observe(0, t0);
  p.observe(1000, t0 + std::chrono::microseconds(500));  // under kMinWindow: no sample
  EXPECT_DOUBLE_EQ(p.starts_per_ms(), 0.0);
  p.observe(1000, t0 + milliseconds(10));
  EXPECT_DOUBLE_EQ(p.starts_per_ms(), 50.0);  // 1000 / 10 ms, smoothed from 0
}

}  // namespace
}  // namespace awa::runtime
