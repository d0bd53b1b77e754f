// Rescue decides which attempts are stale before it limits its work (issue 31, defect 4).
// rescue_stale_attempts used to take the 1,000 oldest open claim batches first and judge
// them afterwards, so 1,000 healthy long-lived attempts (parked callbacks, long jobs that
// heartbeat) hid a crashed worker's newer attempts for good. Here:
//   - storage level: one call with the default limit finds a crashed worker's attempts
//     behind 1,500 older healthy ones; more stale attempts than the limit are all rescued
//     by successive calls, oldest first, each once; a parked callback is never
//     heartbeat-stale, while its callback timeout and its deadline still rescue it;
//   - process level: an `awa work` process killed with SIGKILL while 1,500 parked
//     callbacks exist has its attempts rescued within stale_after + 3 s.
#include <chrono>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "runtime_support.hpp"

namespace awa::testing {
namespace {

using std::chrono::hours;
using std::chrono::minutes;

class RescueTest : public RuntimeTest {
 protected:
  // `n` new jobs of `queue`, claimed `per_batch` to a claim batch, oldest claim first.
  std::vector<ClaimedEntry> claim_new(const std::string& queue, int n, int per_batch = 1) {
    enqueue(queue, n);
    QueueStorage::ClaimOptions o;
    o.max_batch = per_batch;
    std::vector<ClaimedEntry> out;
    while (static_cast<int>(out.size()) < n) {
      const auto got = storage::consumer(*store_).claim(conn(), queue, o);
      if (got.empty()) throw std::runtime_error("nothing left to claim on " + queue);
      out.insert(out.end(), got.begin(), got.end());
    }
    return out;
  }
  // `n` attempts of `queue`, one claim batch each (a worker claiming one job at a time:
  // the old rescue limited batches), parked waiting for a callback for an hour.
  std::vector<ClaimedEntry> park_new(const std::string& queue, int n) {
    auto out = claim_new(queue, n);
    for (const auto& e : out) park(e);
    return out;
  }
  void park(const ClaimedEntry& e) {
    if (!storage::consumer(*store_).callback(conn(), e, hours(1), true))
      throw std::runtime_error("could not park job " + std::to_string(e.job_id));
  }
  void heartbeat(const std::vector<ClaimedEntry>& entries) {
    std::vector<QueueStorage::Heartbeat> beats;
    for (const auto& e : entries) beats.push_back(QueueStorage::Heartbeat::of(e));
    storage::consumer(*store_).heartbeat(conn(), beats);
  }
  // An hour passes for everything claimed so far: claims, heartbeats, parks (their order
  // kept). No sleep: the test sets the clocks the rescue reads.
  void an_hour_passes() {
    conn().exec("UPDATE claim_batches SET claimed_at = claimed_at - interval '1 hour'");
    conn().exec("UPDATE leases SET heartbeat_at = heartbeat_at - interval '1 hour'");
  }
  std::vector<QueueStorage::Rescued> rescue(std::chrono::milliseconds stale, int limit = 1000) {
    return storage::consumer(*store_).rescue(conn(), stale, limit);
  }
  static std::vector<JobId> ids(const std::vector<ClaimedEntry>& entries) {
    std::vector<JobId> out;
    for (const auto& e : entries) out.push_back(e.job_id);
    return out;
  }
  static std::set<JobId> id_set(const std::vector<ClaimedEntry>& entries) {
    const auto v = ids(entries);
    return {v.begin(), v.end()};
  }
  static std::set<JobId> id_set(const std::vector<QueueStorage::Rescued>& rescued) {
    std::set<JobId> out;
    for (const auto& r : rescued) out.insert(r.job_id);
    return out;
  }
};

TEST_F(RescueTest, CrashedWorkersAttemptsBehind1500HealthyOnesAreRescuedByOneCall) {
  // Regression (issue 31, defect 4): the 1,500 healthy attempts claimed first — 1,000
  // parked callbacks, 500 long jobs whose worker still heartbeats — filled the old
  // rescue's 1,000-batch window every time, and the crashed worker's attempts were never
  // looked at.
  const auto parked = park_new("parked", 1000);
  const auto running = claim_new("long", 500);
  heartbeat(running);
  // The crashed worker claimed last, two to a batch; it had heartbeated one batch
  // (leases) but not the others (receipt-only).
  const auto crashed = claim_new("crashed", 6, 2);
  heartbeat({crashed[0], crashed[1]});
  an_hour_passes();
  heartbeat(running);  // alive: its heartbeats go on

  const auto rescued = rescue(minutes(1));
  EXPECT_EQ(id_set(rescued), id_set(crashed));
  EXPECT_EQ(rescued.size(), crashed.size()) << "an attempt rescued twice";
  for (const auto& r : rescued) {
    EXPECT_EQ(r.state, "rescued");
    EXPECT_EQ(r.why, "rescued: heartbeat stale");
  }
  // The healthy ones are untouched, and nothing is left to rescue.
  EXPECT_EQ(count("SELECT count(*) FROM leases WHERE state = 'waiting_external'"), 1000);
  EXPECT_EQ(count("SELECT count(*) FROM leases WHERE state = 'running'"), 500);
  EXPECT_EQ(count("SELECT count(*) FROM done_entries"), 6);
  EXPECT_TRUE(rescue(minutes(1)).empty());
}

TEST_F(RescueTest, MoreStaleAttemptsThanTheLimitAreRescuedOldestFirstInSuccessiveCalls) {
  // The limit bounds the work of one call, never which candidates it looks at: 40 parked
  // callbacks older than 25 stale attempts, a limit of 7. The old rescue took the 7
  // oldest batches (parked) and rescued nothing, call after call.
  park_new("parked", 40);
  const auto crashed = claim_new("crashed", 25, 5);
  an_hour_passes();

  std::vector<std::size_t> sizes;
  std::vector<JobId> order;
  for (int call = 0; call < 10; ++call) {
    const auto rescued = rescue(minutes(1), 7);
    sizes.push_back(rescued.size());
    for (const auto& r : rescued) order.push_back(r.job_id);
    if (rescued.empty()) break;
  }
  EXPECT_EQ(sizes, (std::vector<std::size_t>{7, 7, 7, 4, 0}));
  EXPECT_EQ(order, ids(crashed)) << "each stale attempt once, the oldest claims first";
  EXPECT_EQ(count("SELECT count(*) FROM leases WHERE state = 'waiting_external'"), 40);
}

TEST_F(RescueTest, ParkedCallbackIsNeverHeartbeatStaleButItsTimeoutAndDeadlineRescueIt) {
  const auto parked = park_new("parked", 2);
  conn().exec("UPDATE claim_batches SET claimed_at = claimed_at - interval '1 day'");
  conn().exec("UPDATE leases SET heartbeat_at = heartbeat_at - interval '1 day'");
  // Even with nothing allowed to be old: a parked attempt waits for its callback.
  EXPECT_TRUE(rescue(std::chrono::milliseconds(0)).empty());
  EXPECT_TRUE(rescue(std::chrono::milliseconds(0)).empty()) << "the second look differs";

  conn().query(
      "UPDATE leases SET callback_timeout_at = now() - interval '1 second' "
      "WHERE job_id = $1",
      parked[0].job_id);
  auto rescued = rescue(std::chrono::milliseconds(0));
  ASSERT_EQ(rescued.size(), 1U);
  EXPECT_EQ(rescued[0].job_id, parked[0].job_id);
  EXPECT_EQ(rescued[0].why, "rescued: callback timed out");

  conn().query(
      "UPDATE claim_batches SET deadline_at = now() - interval '1 second' "
      "WHERE batch_id = $1",
      parked[1].claim_batch);
  rescued = rescue(std::chrono::milliseconds(0));
  ASSERT_EQ(rescued.size(), 1U);
  EXPECT_EQ(rescued[0].job_id, parked[1].job_id);
  EXPECT_EQ(rescued[0].why, "rescued: deadline exceeded");
  EXPECT_EQ(count("SELECT count(*) FROM leases"), 0);
}

TEST_F(RescueTest, OneBatchMixingEndsOnlyLosesItsStaleAttempts) {
  // One claim of five: completed, parked, receipt-only, heartbeating and then abandoned,
  // heartbeating and alive. Only the receipt-only and the abandoned one are stale.
  const auto e = claim_new("mixed", 5, 5);
  ASSERT_EQ(e[0].claim_batch, e[4].claim_batch);
  storage::consumer(*store_).complete(conn(),
                                      std::vector{Completion::of(e[0], Outcome::kCompleted)});
  park(e[1]);
  heartbeat({e[3], e[4]});
  an_hour_passes();
  heartbeat({e[4]});

  const auto rescued = rescue(minutes(1));
  EXPECT_EQ(id_set(rescued), (std::set<JobId>{e[2].job_id, e[3].job_id}));
  EXPECT_TRUE(rescue(minutes(1)).empty());
  // Once the alive one stops heartbeating it goes too; the parked one never does.
  conn().exec("UPDATE leases SET heartbeat_at = heartbeat_at - interval '1 hour'");
  const auto later = rescue(minutes(1));
  ASSERT_EQ(later.size(), 1U);
  EXPECT_EQ(later[0].job_id, e[4].job_id);
  EXPECT_TRUE(rescue(minutes(1)).empty());
  EXPECT_EQ(count("SELECT count(*) FROM leases WHERE state = 'waiting_external'"), 1);
}

TEST_F(RescueTest, KilledWorkerBehind1500ParkedCallbacksIsRescuedWithinStaleAfter) {
  // Issue 31's scenario with real processes: 1,500 parked callbacks, then a worker that
  // runs four long jobs is killed with SIGKILL; the leader (another `awa work`) must
  // rescue its four attempts within stale_after plus a few rounds.
  constexpr auto kStale = milliseconds(2000);
  constexpr auto kSlack = seconds(3);
  park_new("parked", 1500);
  const auto victims = enqueue("victim", 4, "sleep", nlohmann::json{{"ms", 60000}});

  WorkerProcess leader(schema_, {"--queue", "idle:1", "--heartbeat-ms", "100", "--stale-ms",
                                 std::to_string(kStale.count()), "--maintenance-ms", "100"});
  ASSERT_TRUE(eventually([&] { return leader_os_pid() == leader.pid(); }, seconds(20)))
      << leader.log();
  WorkerProcess victim(schema_, {"--queue", "victim:4", "--heartbeat-ms", "100", "--stale-ms",
                                 std::to_string(kStale.count()), "--no-maintenance"});
  // All four running, each with a lease its worker's heartbeats keep fresh.
  ASSERT_TRUE(eventually(
      [&] {
        return count(
                   "SELECT count(*) FROM leases WHERE queue_id = queue_id_of('victim') AND state = "
                   "'running'") == 4;
      },
      seconds(20)))
      << victim.log();
  victim.kill9();
  const auto killed_at = Clock::now();

  const auto rescued_sql = fmt::format(
      "SELECT count(DISTINCT job_id) FROM attempt_outcomes WHERE state = 'rescued' "
      "AND job_id IN ({})",
      fmt::join(victims, ","));
  const bool rescued = eventually([&] { return count(rescued_sql) == 4; }, kStale + kSlack);
  const auto took = std::chrono::duration_cast<milliseconds>(Clock::now() - killed_at);
  ASSERT_TRUE(rescued) << count(rescued_sql) << " of 4 attempts rescued " << took.count()
                       << " ms after the kill (stale_after " << kStale.count() << " ms)\n"
                       << leader.log();
  EXPECT_LE(took, kStale + kSlack);
  EXPECT_EQ(count("SELECT count(*) FROM leases WHERE state = 'waiting_external'"), 1500)
      << "a parked callback was rescued";
  EXPECT_EQ(leader.terminate(seconds(20)), 0) << leader.log();
}

}  // namespace
}  // namespace awa::testing
