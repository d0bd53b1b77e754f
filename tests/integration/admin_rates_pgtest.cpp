// Per-minute rates for the dashboard (issue 13): Admin::throughput and Admin::shard_claims.
// Jobs go through the engine's own claim and completion paths; their end and claim times
// are then moved to known minutes, in the same transaction as the Admin call, so both see
// one now() and every bucket is exact whatever the clock does meanwhile.
#include <chrono>
#include <map>
#include <numeric>
#include <ostream>
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
  const std::string s = "queue_id = queue_id_of('s')";
  move(s + " AND priority = 1 AND enqueue_shard = 3", minute(-14));  // first bucket
  move(s + " AND priority = 2 AND enqueue_shard = 0", minute(-3, 30));
  move(s + " AND priority = 2 AND enqueue_shard = 1", minute(-3));
  move("batch_id = " + std::to_string(late_claim.claim_batch), minute(0, 1));
  move(s + " AND priority = 2 AND enqueue_shard = 2", minute(-14) + " - interval '1 microsecond'");
  move("queue_id = queue_id_of('other')", minute(-3));

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
    // Read from the catalogs directly: pg_indexes calls pg_get_indexdef(), which fails
    // ("could not open relation") on another test's index dropped while it scans.
    EXPECT_EQ(count("SELECT count(*) FROM pg_class c JOIN pg_am a ON a.oid = c.relam "
                    "WHERE c.relnamespace = current_schema()::regnamespace AND c.relname = '" +
                    std::string(index) + "' AND a.amname = 'brin'"),
              1)
        << index;
  }
  conn().exec("SET enable_seqscan = off");
  const auto plan = [&](const std::string& file, const pg::Params& params) {
    const auto res =
        conn().exec("EXPLAIN " + sql::render(sql::file_named(file), quoted_schema()), params);
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

// --- exact across prunes -----------------------------------------------------------------

// Rates keyed by absolute minute (minutes since the epoch), non-zero minutes only, so two
// reads compare equal whatever minute boundary passed between them.
using ByMinute = std::map<std::int64_t, std::int64_t>;
struct Rates {
  std::map<std::string, ByMinute> completed;  // by queue
  std::map<std::string, ByMinute> failed;     // by queue
  std::map<std::string, ByMinute> claims;     // by "queue priority/shard"
  bool operator==(const Rates&) const = default;
};
void PrintTo(const Rates& r, std::ostream* os) {
  const auto print = [os](const char* what, const std::map<std::string, ByMinute>& m) {
    *os << what << " {";
    for (const auto& [key, by] : m) {
      *os << " " << key << ":";
      for (const auto& [minute, n] : by) *os << " " << minute << "=" << n;
      *os << ";";
    }
    *os << " } ";
  };
  print("completed", r.completed);
  print("failed", r.failed);
  print("claims", r.claims);
}

class AdminRatesPruneTest : public AdminRatesTest {
 protected:
  void SetUpSchema() override {
    AdminRatesTest::SetUpSchema();
    anchor_ = conn().exec("SELECT date_trunc('minute', now())::text").get<std::string>(0, 0);
    anchor_minute_ = epoch_minute(anchor_);
  }

  std::int64_t epoch_minute(const std::string& at) {
    return count("SELECT (extract(epoch FROM '" + at + "'::timestamptz) / 60)::bigint");
  }
  // `offset` minutes from the anchor (the minute the test began) plus `seconds`, as SQL.
  std::string at(int offset, int seconds = 0) const {
    return "'" + anchor_ + "'::timestamptz + make_interval(mins => " + std::to_string(offset) +
           ", secs => " + std::to_string(seconds) + ")";
  }
  std::int64_t m(int offset) const { return anchor_minute_ + offset; }

  // Committed moves of end and claim times (prune runs in its own transactions, as the
  // leader's does).
  void set_ended(JobId job, const std::string& when) {
    const auto r = conn().exec("UPDATE done_entries SET finished_at = " + when +
                               " WHERE job_id = " + std::to_string(job));
    ASSERT_EQ(r.affected_rows(), 1) << "job " << job;
  }
  void set_completed(std::int64_t batch, const std::string& when) {
    const auto r =
        conn().exec("UPDATE claim_closures SET closed_at = " + when +
                    " WHERE outcome = 'completed' AND batch_id = " + std::to_string(batch));
    ASSERT_EQ(r.affected_rows(), 1) << "batch " << batch;
  }
  void set_claimed(std::int64_t batch, const std::string& when) {
    const auto r = conn().exec("UPDATE claim_batches SET claimed_at = " + when +
                               " WHERE batch_id = " + std::to_string(batch));
    ASSERT_EQ(r.affected_rows(), 1) << "batch " << batch;
  }

  // Completes `entries` in one flush: one closure row per batch.
  void complete_all(const std::vector<ClaimedEntry>& entries) {
    std::vector<Completion> flush;
    for (const auto& e : entries) flush.push_back(Completion::of(e, Outcome::kCompleted));
    for (const auto& r : storage::consumer(*store_).complete(conn(), flush)) {
      ASSERT_EQ(r.state.value_or("stale"), "completed");
    }
  }

  // Both rates over the last hour, as the Admin API answers them on its own connection.
  Rates rates(std::initializer_list<const char*> claim_queues) {
    Rates out;
    const Throughput t = admin().throughput(ac(), minutes(60));
    const std::int64_t first = epoch_minute(t.start);
    for (const auto& q : t.queues) {
      for (std::size_t i = 0; i < q.completed.size(); ++i) {
        const auto minute = first + static_cast<std::int64_t>(i);
        if (q.completed[i] != 0) out.completed[q.queue][minute] = q.completed[i];
        if (q.failed[i] != 0) out.failed[q.queue][minute] = q.failed[i];
      }
    }
    for (const char* queue : claim_queues) {
      const ShardClaims c = admin().shard_claims(ac(), queue, minutes(60));
      const std::int64_t start = epoch_minute(c.start);
      for (const auto& lane : c.lanes) {
        const auto key = std::string(queue) + " " + std::to_string(lane.priority) + "/" +
                         std::to_string(lane.enqueue_shard);
        for (std::size_t i = 0; i < lane.claims.size(); ++i) {
          if (lane.claims[i] != 0) {
            out.claims[key][start + static_cast<std::int64_t>(i)] = lane.claims[i];
          }
        }
      }
    }
    return out;
  }

  RingAction rotate(const std::string& ring) { return admin().rotate(ac(), ring); }
  RingAction prune(const std::string& ring, bool carry, std::chrono::seconds retention) {
    return admin().prune(ac(), ring, carry, retention);
  }

  std::string anchor_;
  std::int64_t anchor_minute_ = 0;
};

TEST_F(AdminRatesPruneTest, RatesAreUnchangedByRotateAndPruneOfTheRings) {
  // Guards the minute_rollups fold of prune_carry_queue / prune_carry_claims and its use
  // by throughput.sql and shard_claims.sql: job ends and claims per lane and minute read
  // the same, exactly, before any prune, after a prune that carries live work and failed
  // jobs in their retention, and after the prune that finally removes them (carried rows
  // counted once), when every count comes from the rollups alone.
  admin().set_enqueue_shards(ac(), "s", 2);
  const auto c1 = run("a", Outcome::kCompleted, "completed");
  const auto c2 = run("a", Outcome::kCompleted, "completed");
  const auto f1 = run("a", Outcome::kFail, "failed");
  const auto fc = run("a", Outcome::kRetry, "failed", 1);
  set_dlq("a", true);
  const auto d1 = run("a", Outcome::kFail, "dlq");
  set_dlq("a", false);
  const auto retried = run("a", Outcome::kRetry, "retried");  // not a job end
  // Three jobs of "a" in one claim batch, completed in one flush.
  for (int i = 0; i < 3; ++i) enqueue("a");
  const auto three = claim("a", 3);
  ASSERT_EQ(three.size(), 3U);
  ASSERT_EQ(three[0].claim_batch, three[2].claim_batch);
  complete_all(three);
  // Queue "s": lane (2, 0) two jobs in one batch; lane (2, 1) one job left running, so
  // the first prunes must carry its ready row and its claim batch.
  for (int i = 0; i < 2; ++i) enqueue(opts("s", 2, key_on_shard(2, 0)));
  const auto s0 = claim("s", 2);
  ASSERT_EQ(s0.size(), 2U);
  ASSERT_EQ(s0[0].claim_batch, s0[1].claim_batch);
  complete_all(s0);
  const JobId running_id = enqueue(opts("s", 2, key_on_shard(2, 1)));
  const auto running = claim_one("s", running_id);

  for (const auto* e : {&c1, &c2, &f1, &fc, &d1, &retried}) set_claimed(e->claim_batch, at(-8));
  set_completed(c1.claim_batch, at(-5, 10));
  set_completed(c2.claim_batch, at(-5, 50));
  set_ended(f1.job_id, at(-7, 20));
  set_ended(d1.job_id, at(-7));
  set_ended(fc.job_id, at(-4, 59));
  set_ended(retried.job_id, at(-4));
  set_claimed(three[0].claim_batch, at(-3));
  set_completed(three[0].claim_batch, at(-3, 30));
  set_claimed(s0[0].claim_batch, at(-6));
  set_completed(s0[0].claim_batch, at(-6, 1));
  set_claimed(running.claim_batch, at(-9));

  Rates want;
  want.completed["a"] = {{m(-5), 2}, {m(-3), 3}};
  want.completed["s"] = {{m(-6), 2}};
  want.failed["a"] = {{m(-7), 2}, {m(-4), 1}};
  want.claims["a 2/0"] = {{m(-8), 6}, {m(-3), 3}};
  want.claims["s 2/0"] = {{m(-6), 2}};
  want.claims["s 2/1"] = {{m(-9), 1}};
  ASSERT_EQ(rates({"a", "s"}), want) << "before any prune";
  EXPECT_EQ(count("SELECT count(*) FROM minute_rollups"), 0);

  // Round 1: the running attempt pins both rings (carried), the failed jobs are inside
  // their retention (carried with their ready rows); everything else leaves for good.
  for (const char* ring : {"queue", "claim"}) ASSERT_TRUE(rotate(ring).done) << ring;
  const auto q1 = prune("queue", true, std::chrono::hours(72));
  ASSERT_TRUE(q1.done) << q1.reason;
  EXPECT_GT(q1.rows_carried, 0);
  EXPECT_GT(q1.rows_removed, 0);
  const auto k1 = prune("claim", true, std::chrono::hours(72));
  ASSERT_TRUE(k1.done) << k1.reason;
  EXPECT_EQ(k1.rows_carried, 1);  // the running job's batch, no closure yet
  EXPECT_EQ(count("SELECT count(*) FROM done_entries WHERE state = 'failed'"), 2);
  EXPECT_GT(count("SELECT count(*) FROM minute_rollups"), 0);
  EXPECT_EQ(rates({"a", "s"}), want) << "after the carrying prune";

  // The carried attempt completes in a later minute; its batch is still in the ring.
  ASSERT_EQ(finish(running, Outcome::kCompleted), "completed");
  set_completed(running.claim_batch, at(-2));
  want.completed["s"][m(-2)] = 1;
  EXPECT_EQ(rates({"a", "s"}), want) << "after the carried attempt completed";

  // Round 2: nothing is live and failed retention is zero, so the carried rows leave now:
  // the queue ring's from its keep slot (the sweep), the claim ring's by the next prune.
  EXPECT_GT(admin().sweep_kept(ac(), std::chrono::seconds(0)), 0);
  ASSERT_TRUE(rotate("claim").done);
  const auto k2 = prune("claim", false, std::chrono::seconds(0));
  ASSERT_TRUE(k2.done) << k2.reason;
  for (const char* table : {"done_entries", "claim_batches", "claim_closures"}) {
    EXPECT_EQ(count(std::string("SELECT count(*) FROM ") + table), 0) << table;
  }
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE ready_slot = -1"), 0);
  EXPECT_EQ(rates({"a", "s"}), want) << "from the rollups alone";
  EXPECT_EQ(count("SELECT sum(completed) FROM minute_rollups"), 8);
  EXPECT_EQ(count("SELECT sum(failed) FROM minute_rollups"), 3);
  EXPECT_EQ(count("SELECT sum(claims) FROM minute_rollups"), 12);
}

TEST_F(AdminRatesPruneTest, PruneDeletesRollupsOlderThanTwoDaysAndAddsNoneThatOld) {
  // Guards minute_rollups_trim and the horizon of the fold: a rollup row from before the
  // two-day horizon is deleted by the next prune of either ring, one inside it stays, and
  // an end older than the horizon (a failed job carried for a 72-hour retention) leaves
  // without a rollup row.
  conn().exec(
      "INSERT INTO minute_rollups (queue_id, priority, enqueue_shard, minute, completed, claims) "
      "VALUES (ensure_queue_id('old'), 2, 0, date_trunc('minute', now()) - "
      "interval '2 days 1 minute', 5, 5), "
      "(ensure_queue_id('old'), 2, 1, date_trunc('minute', now()) - interval '2 days 2 minutes', "
      "0, 1), "
      "(ensure_queue_id('kept'), 2, 0, date_trunc('minute', now()) - interval '2 days' + "
      "interval '30 minutes', 7, 7)");
  const auto f = run("x", Outcome::kFail, "failed");
  conn().exec(
      "UPDATE done_entries SET finished_at = now() - interval '2 days 1 hour' "
      "WHERE job_id = " +
      std::to_string(f.job_id));

  ASSERT_TRUE(rotate("queue").done);
  const auto q = prune("queue", false, std::chrono::seconds(0));
  ASSERT_TRUE(q.done) << q.reason;
  EXPECT_EQ(count("SELECT count(*) FROM done_entries"), 0);
  EXPECT_EQ(count("SELECT count(*) FROM minute_rollups WHERE queue_id = queue_id_of('old')"), 0);
  EXPECT_EQ(count("SELECT count(*) FROM minute_rollups WHERE queue_id = queue_id_of('x')"), 0);
  EXPECT_EQ(count("SELECT count(*) FROM minute_rollups WHERE queue_id = queue_id_of('kept') AND "
                  "completed = 7"),
            1);

  // The claim ring's prune trims too.
  conn().exec(
      "INSERT INTO minute_rollups (queue_id, priority, enqueue_shard, minute, claims) "
      "VALUES (queue_id_of('old'), 2, 0, date_trunc('minute', now()) - interval '3 days', 1)");
  ASSERT_TRUE(rotate("claim").done);
  const auto c = prune("claim", false, std::chrono::seconds(0));
  ASSERT_TRUE(c.done) << c.reason;
  EXPECT_EQ(count("SELECT count(*) FROM minute_rollups WHERE queue_id = queue_id_of('old')"), 0);
  EXPECT_EQ(count("SELECT count(*) FROM minute_rollups WHERE queue_id = queue_id_of('kept')"), 1);
  // The job's claim (a minute ago at most) is inside the horizon: folded.
  EXPECT_EQ(
      count(
          "SELECT coalesce(sum(claims), 0) FROM minute_rollups WHERE queue_id = queue_id_of('x')"),
      1);
}

}  // namespace
}  // namespace awa::testing
