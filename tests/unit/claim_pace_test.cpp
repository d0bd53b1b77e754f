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

TEST(ClaimSizeTest, IdleQueueClaimsForOneFreeWorker) {
  // 32 workers, one free, no prefetch: one row, at once.
  EXPECT_EQ(claim_size(1, 0, 0, 0, 512, 2), 1);
  EXPECT_EQ(claim_size(0, 0, 0, 0, 512, 2), 0);  // no room: wait
}

TEST(ClaimSizeTest, BusyQueueWaitsForAQuarterOfItsTargetWithTwoClaimers) {
  // Target 32 + 200 = 232; a claimer claims once 232 / 4 = 58 rows are missing.
  EXPECT_EQ(claim_size(32, 200, 175, 0, 512, 2), 0);  // 57 missing
  EXPECT_EQ(claim_size(32, 200, 174, 0, 512, 2), 58);
  EXPECT_EQ(claim_size(32, 200, 0, 100, 512, 2), 132);  // less what is being claimed
  EXPECT_EQ(claim_size(32, 200, 0, 0, 100, 2), 100);    // at most a claim batch
}

TEST(ClaimSizeTest, TargetBeyondTwoBatchesPerClaimerStillClaimsFullBatches) {
  // Target 32 + 2048 = 2080; a quarter of it (520) is more than one claim may bring (512).
  // The threshold is the batch then, or the queue would never claim while the goal holds.
  EXPECT_EQ(claim_size(32, 2048, 0, 0, 512, 2), 512);
  EXPECT_EQ(claim_size(32, 2048, 1000, 512, 512, 2), 512);
  EXPECT_EQ(claim_size(32, 2048, 1200, 512, 512, 2), 0);  // 368 missing: wait for 512
}

}  // namespace
}  // namespace awa::runtime
