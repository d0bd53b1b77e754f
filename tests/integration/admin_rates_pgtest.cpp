// Per-minute rates for the dashboard (issue 13): Admin::throughput and Admin::shard_claims.
// Jobs go through the engine's own claim and completion paths; their end and claim times
// are then moved to known minutes, in the same transaction as the Admin call, so both see
// one now() and every bucket is exact whatever the clock does meanwhile.
#include <chrono>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "admin_jobs_support.hpp"
#include "awa/error.hpp"
#include "pg/native.hpp"
#include "schema/sql_catalog.hpp"

namespace awa::testing {
namespace {

using std::chrono::minutes;
using Series = std::vector<std::int64_t>;

// `n` zeros with the given buckets set.
Series dense(int n, std::initializer_list<std::pair<int, std::int64_t>> set) {
  Series s(static_cast<std::size_t>(n), 0);
  for (const auto& [i, v] : set) s.at(static_cast<std::size_t>(i)) = v;
  return s;
}

class AdminRatesTest : public JobAdminTest {
 protected:
  void TearDown() override {
    tx_.reset();  // rolls back on the Admin's connection, before the fixture closes it
    JobAdminTest::TearDown();
  }

  // Statements on the Admin's connection, inside the test's transaction.
  pg::Connection& tx_conn() { return pg::native(ac()); }
  void begin() {
    tx_.emplace(ac());
    tx_conn().exec("SET LOCAL search_path TO " + quoted_schema());
  }
  // The minute `offset` minutes from the current one (now() of the open transaction) plus
  // `seconds`, as SQL.
  static std::string minute(int offset, int seconds = 0) {
    return "date_trunc('minute', now()) + make_interval(mins => " + std::to_string(offset) +
           ", secs => " + std::to_string(seconds) + ")";
  }
  // Moves the end of `job`'s latest attempt (its done row) to `at`.
  void ended_at(JobId job, const std::string& at) {
    const auto r = tx_conn().exec("UPDATE done_entries SET finished_at = " + at +
                                  " WHERE job_id = " + std::to_string(job));
    ASSERT_EQ(r.affected_rows(), 1) << "job " << job;
  }
  // Moves the success closing `e` (its claim batch's completed closure) to `at`.
  void completed_at(const ClaimedEntry& e, const std::string& at) {
    const auto r = tx_conn().exec(
        "UPDATE claim_closures SET closed_at = " + at +
        " WHERE outcome = 'completed' AND batch_id = " + std::to_string(e.claim_batch));
    ASSERT_EQ(r.affected_rows(), 1) << "batch " << e.claim_batch;
  }
  std::string start_of_window(int window) {
    return tx_conn()
        .exec("SELECT to_char((" + minute(1 - window) +
              ") AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')")
        .get<std::string>(0, 0);
  }

  // Enqueues one job of `queue`, claims it alone and ends it with `outcome`.
  ClaimedEntry run(const std::string& queue, Outcome outcome, const std::string& expected_state,
                   int max_attempts = 25) {
    const JobId id = enqueue(opts(queue, 2, std::nullopt, max_attempts));
    const ClaimedEntry e = claim_one(queue, id);
    EXPECT_EQ(finish(e, outcome, "x", std::chrono::hours(1)), expected_state);
    return e;
  }

  std::optional<Transaction> tx_;
};

TEST_F(AdminRatesTest, ThroughputCountsJobEndsPerQueueAndMinute) {
  // Guards throughput.sql: successes from their claim closures, failures and dead letters
  // from their done rows, each in the minute it happened; attempts that did not end the
  // job are not counted; a minute just outside the window (either side) is not counted.
  const auto c1 = run("a", Outcome::kCompleted, "completed");
  const auto c2 = run("a", Outcome::kCompleted, "completed");
  const auto c3 = run("a", Outcome::kCompleted, "completed");
  const auto f1 = run("a", Outcome::kFail, "failed");
  const auto f_old = run("a", Outcome::kFail, "failed");
  const auto f_future = run("a", Outcome::kRetry, "failed", 1);
  set_dlq("a", true);
  const auto d1 = run("a", Outcome::kFail, "dlq");
  set_dlq("a", false);
  const auto retried = run("a", Outcome::kRetry, "retried");
  const auto snoozed = run("a", Outcome::kSnooze, "snoozed");
  const auto cancelled = run("a", Outcome::kCancel, "cancelled");
  const auto b1 = run("b", Outcome::kCompleted, "completed");

  begin();
  completed_at(c1, minute(-5, 10));
  completed_at(c2, minute(-5, 50));
  completed_at(c3, minute(0));  // the current minute: the last bucket
  ended_at(f1.job_id, minute(-5, 20));
  ended_at(d1.job_id, minute(-59));  // the window's first instant
  tx_conn().exec("UPDATE done_entries SET finished_at = " + minute(-59) +
                 " - interval '1 microsecond' WHERE job_id = " + std::to_string(f_old.job_id));
  ended_at(f_future.job_id, minute(1));  // after now(): a lagging reader's future
  for (const auto& e : {retried, snoozed, cancelled}) ended_at(e.job_id, minute(-5));
  completed_at(b1, minute(-10, 59));

  const Throughput t = admin().throughput(ac(), minutes(60));
  EXPECT_EQ(t.minutes, 60);
  EXPECT_EQ(t.start, start_of_window(60));
  ASSERT_EQ(t.queues.size(), 2U);
  EXPECT_EQ(t.queues[0].queue, "a");
  EXPECT_EQ(t.queues[0].completed, dense(60, {{54, 2}, {59, 1}}));
  EXPECT_EQ(t.queues[0].failed, dense(60, {{0, 1}, {54, 1}}));
  EXPECT_EQ(t.queues[1].queue, "b");
  EXPECT_EQ(t.queues[1].completed, dense(60, {{49, 1}}));
  EXPECT_EQ(t.queues[1].failed, dense(60, {}));

  // One queue only; a valid name never used has no series.
  const Throughput only_b = admin().throughput(ac(), minutes(60), "b");
  ASSERT_EQ(only_b.queues.size(), 1U);
  EXPECT_EQ(only_b.queues[0].queue, "b");
  EXPECT_EQ(only_b.queues[0].completed, t.queues[1].completed);
  const Throughput none = admin().throughput(ac(), minutes(60), "nosuch");
  EXPECT_TRUE(none.queues.empty());
  EXPECT_EQ(none.start, t.start);

  // window = 1: the current minute alone; b ended nothing in it.
  const Throughput one = admin().throughput(ac(), minutes(1));
  EXPECT_EQ(one.start, start_of_window(1));
  ASSERT_EQ(one.queues.size(), 1U);
  EXPECT_EQ(one.queues[0].queue, "a");
  EXPECT_EQ(one.queues[0].completed, Series{1});
  EXPECT_EQ(one.queues[0].failed, Series{0});

  // The whole day: the same ends at the end of a longer series, and the failure a
  // microsecond before the hour's window in the minute before it.
  const Throughput day = admin().throughput(ac(), minutes(1440));
  ASSERT_EQ(day.queues.size(), 2U);
  EXPECT_EQ(day.queues[0].completed, dense(1440, {{1434, 2}, {1439, 1}}));
  EXPECT_EQ(day.queues[0].failed, dense(1440, {{1379, 1}, {1380, 1}, {1434, 1}}));
}

TEST_F(AdminRatesTest, RefusesBadWindowsAndQueueNames) {
  for (const int bad : {0, -1, 1441}) {
    EXPECT_THROW(admin().throughput(ac(), minutes(bad)), InvalidArgument) << bad;
    EXPECT_THROW(admin().shard_claims(ac(), "a", minutes(bad)), InvalidArgument) << bad;
  }
  EXPECT_THROW(admin().throughput(ac(), minutes(60), std::string("bad name")), InvalidArgument);
  EXPECT_THROW(admin().shard_claims(ac(), "bad name", minutes(60)), InvalidArgument);
  EXPECT_THROW(admin().shard_claims(ac(), "", minutes(60)), InvalidArgument);
  // Refused before any statement: the connection is usable and outside a transaction.
  EXPECT_FALSE(ac().in_transaction());
  EXPECT_TRUE(admin().throughput(ac(), minutes(1440)).queues.empty());
}

TEST_F(AdminRatesTest, ShardClaimsCountsClaimedJobsPerLaneAndMinute) {
  // Guards shard_claims.sql on a 4-shard queue: a lane's claims are the jobs its claim
  // batches took (n_items, however the claims batched them), in the minute of the claim;
  // a claim before the window, and another queue's claims, are not counted.
  admin().set_enqueue_shards(ac(), "s", 4);
  const auto on = [](int priority, int shard) {
    return opts("s", priority, key_on_shard(4, shard));
  };
  for (int i = 0; i < 3; ++i) enqueue(on(1, 3));
  for (int i = 0; i < 2; ++i) enqueue(on(2, 0));
  enqueue(on(2, 1));
  enqueue(on(2, 2));
  enqueue(opts("other"));
  std::size_t claimed = 0;
  for (int i = 0; i < 20 && claimed < 7; ++i) claimed += claim("s", 10).size();
  ASSERT_EQ(claimed, 7U);
  ASSERT_EQ(claim("other", 10).size(), 1U);
  // A second claim of lane (2, 1), in a later minute.
  const JobId late = enqueue(on(2, 1));
  const auto late_claim = claim_one("s", late);

  begin();
  const auto move = [&](const std::string& where, const std::string& at) {
    const auto r =
        tx_conn().exec("UPDATE claim_batches SET claimed_at = " + at + " WHERE " + where);
    EXPECT_GE(r.affected_rows(), 1) << where;
  };
  move("queue = 's' AND priority = 1 AND enqueue_shard = 3", minute(-14));  // first bucket
  move("queue = 's' AND priority = 2 AND enqueue_shard = 0", minute(-3, 30));
  move("queue = 's' AND priority = 2 AND enqueue_shard = 1", minute(-3));
  move("batch_id = " + std::to_string(late_claim.claim_batch), minute(0, 1));
  move("queue = 's' AND priority = 2 AND enqueue_shard = 2",
       minute(-14) + " - interval '1 microsecond'");
  move("queue = 'other'", minute(-3));

  const ShardClaims c = admin().shard_claims(ac(), "s", minutes(15));
  EXPECT_EQ(c.minutes, 15);
  EXPECT_EQ(c.start, start_of_window(15));
  ASSERT_EQ(c.lanes.size(), 3U);
  EXPECT_EQ(c.lanes[0].priority, 1);
  EXPECT_EQ(c.lanes[0].enqueue_shard, 3);
  EXPECT_EQ(c.lanes[0].claims, dense(15, {{0, 3}}));
  EXPECT_EQ(c.lanes[1].priority, 2);
  EXPECT_EQ(c.lanes[1].enqueue_shard, 0);
  EXPECT_EQ(c.lanes[1].claims, dense(15, {{11, 2}}));
  EXPECT_EQ(c.lanes[2].priority, 2);
  EXPECT_EQ(c.lanes[2].enqueue_shard, 1);
  EXPECT_EQ(c.lanes[2].claims, dense(15, {{11, 1}, {14, 1}}));

  // A wider window reaches the claim of lane (2, 2).
  const ShardClaims wide = admin().shard_claims(ac(), "s", minutes(16));
  ASSERT_EQ(wide.lanes.size(), 4U);
  EXPECT_EQ(wide.lanes[3].enqueue_shard, 2);
  EXPECT_EQ(wide.lanes[3].claims, dense(16, {{0, 1}}));
  EXPECT_EQ(wide.lanes[0].claims, dense(16, {{1, 3}}));

  const ShardClaims none = admin().shard_claims(ac(), "nosuch", minutes(15));
  EXPECT_TRUE(none.lanes.empty());
  EXPECT_EQ(none.start, c.start);
}

TEST_F(AdminRatesTest, WindowScansCanUseTheTimeIndexes) {
  // Guards migration 0005 and the shape of the rate queries: the time bounds are
  // index conditions (BRIN on done_entries.finished_at and claim_closures.closed_at,
  // claim_batches_claimed_at), so a window never needs whole partitions read. With
  // sequential scans priced out, each table must be reached through its index.
  for (const char* index : {"done_entries_finished_at", "claim_closures_closed_at"}) {
    EXPECT_EQ(count("SELECT count(*) FROM pg_indexes WHERE schemaname = current_schema() AND "
                    "indexname = '" +
                    std::string(index) + "' AND indexdef LIKE '%USING brin%'"),
              1)
        << index;
  }
  conn().exec("SET enable_seqscan = off");
  const auto plan = [&](const std::string& file, const pg::Params& params) {
    const auto res =
        conn().exec("EXPLAIN " + sql::render(sql::file(file), quoted_schema()), params);
    std::string text;
    for (int r = 0; r < res.rows(); ++r) text += res.get<std::string>(r, 0) + "\n";
    return text;
  };
  const auto t = plan("queries/admin/throughput.sql", pg::make_params(60, std::nullopt));
  EXPECT_NE(t.find("done_entries_0_finished_at_idx"), std::string::npos) << t;
  EXPECT_NE(t.find("claim_closures_0_closed_at_idx"), std::string::npos) << t;
  EXPECT_EQ(t.find("Seq Scan"), std::string::npos) << t;
  const auto s = plan("queries/admin/shard_claims.sql", pg::make_params("s", 15));
  EXPECT_NE(s.find("claimed_at_idx"), std::string::npos) << s;
  EXPECT_EQ(s.find("Seq Scan"), std::string::npos) << s;
}

}  // namespace
}  // namespace awa::testing
