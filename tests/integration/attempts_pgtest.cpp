// Open attempts: heartbeats with lease materialisation, rescue, cancel.
#include <thread>

#include <gtest/gtest.h>

#include "awa/admin.hpp"
#include "pg/native.hpp"
#include "producer_support.hpp"
#include "storage/store_access.hpp"
#include "storage_support.hpp"

namespace awa::testing {
namespace {

using std::chrono::milliseconds;

class AttemptsTest : public StorageTest {
 protected:
  ClaimedEntry claim_one(const std::string& queue, QueueStorage::ClaimOptions o = {}) {
    o.max_batch = 1;
    auto got = storage::consumer(*store_).claim(conn(), queue, o);
    if (got.size() != 1) throw std::runtime_error("expected one claimed job on " + queue);
    return got[0];
  }
  static QueueStorage::Heartbeat beat(const ClaimedEntry& e,
                                      std::optional<std::string> progress = std::nullopt) {
    return QueueStorage::Heartbeat::of(e, std::move(progress));
  }
  JobId enqueue(const std::string& queue, int max_attempts = 25,
                std::optional<std::string> key = std::nullopt) {
    InsertOpts o = on_queue(queue);
    o.max_attempts = max_attempts;
    o.ordering_key = std::move(key);
    return storage::insert_many(*store_, conn(), std::vector<NewJob>{NewJob("w", {}, o)}).front();
  }
  Connection public_conn() {
    auto c = Connection::connect(database_url());
    return c;
  }
};

TEST_F(AttemptsTest, FirstHeartbeatMaterialisesALeaseOnTheReceiptsShard) {
  set_shards("hb", 8);
  enqueue("hb", 25, "customer-42");  // shard 4 of 8
  const auto e = claim_one("hb");
  ASSERT_EQ(e.enqueue_shard, 4);
  EXPECT_EQ(count("SELECT count(*) FROM leases"), 0) << "short attempts stay receipt-only";

  auto open =
      storage::consumer(*store_).heartbeat(conn(), std::vector{beat(e, R"({"percent": 10})")});
  ASSERT_EQ(open.size(), 1U);
  EXPECT_EQ(open[0].first, e.job_id);
  EXPECT_EQ(count("SELECT count(*) FROM leases WHERE enqueue_shard = 4 AND lane_seq = " +
                  std::to_string(e.lane_seq) + " AND run_lease = 1 AND state = 'running'"),
            1);
  open = storage::consumer(*store_).heartbeat(conn(), std::vector{beat(e, R"({"percent": 50})")});
  ASSERT_EQ(open.size(), 1U);
  EXPECT_EQ(count("SELECT count(*) FROM leases"), 1);
  EXPECT_EQ(count("SELECT (progress->>'percent')::bigint FROM leases"), 50);

  // Completion ends the lease with the attempt.
  storage::consumer(*store_).complete(conn(), std::vector{Completion::of(e, Outcome::kCompleted)});
  EXPECT_EQ(count("SELECT count(*) FROM leases"), 0);
  EXPECT_TRUE(storage::consumer(*store_).heartbeat(conn(), std::vector{beat(e)}).empty())
      << "a closed attempt must not report as open";
}

TEST_F(AttemptsTest, StaleReceiptIsRescuedRetriedAndItsLateCompletionIsStale) {
  enqueue("rs");
  const auto e = claim_one("rs");
  // Nothing is stale within a minute.
  EXPECT_TRUE(storage::consumer(*store_).rescue(conn(), std::chrono::minutes(1)).empty());
  const auto rescued = storage::consumer(*store_).rescue(conn(), milliseconds(0));
  ASSERT_EQ(rescued.size(), 1U);
  EXPECT_EQ(rescued[0].job_id, e.job_id);
  EXPECT_EQ(rescued[0].state, "rescued");
  EXPECT_EQ(rescued[0].why, "rescued: heartbeat stale");
  EXPECT_TRUE(storage::consumer(*store_).rescue(conn(), milliseconds(0)).empty())
      << "rescued twice";

  EXPECT_EQ(storage::consumer(*store_).promote_due(conn()), 1);
  const auto again = claim_one("rs");
  EXPECT_EQ(again.job_id, e.job_id);
  EXPECT_EQ(again.attempt, 2) << "a rescue counts against max_attempts";
  EXPECT_EQ(again.run_lease, 2);
  const auto late = storage::consumer(*store_).complete(
      conn(), std::vector{Completion::of(e, Outcome::kCompleted)});
  EXPECT_TRUE(late[0].stale());
  const auto now = storage::consumer(*store_).complete(
      conn(), std::vector{Completion::of(again, Outcome::kCompleted)});
  EXPECT_EQ(now[0].state, "completed");
}

TEST_F(AttemptsTest, RescueRespectsMaxAttempts) {
  enqueue("rm", 1);
  claim_one("rm");
  const auto rescued = storage::consumer(*store_).rescue(conn(), milliseconds(0));
  ASSERT_EQ(rescued.size(), 1U);
  EXPECT_EQ(rescued[0].state, "failed");
  EXPECT_EQ(storage::consumer(*store_).promote_due(conn()), 0);
  EXPECT_EQ(count("SELECT count(*) FROM attempt_outcomes WHERE state = 'failed'"), 1);
}

TEST_F(AttemptsTest, HeartbeatKeepsAnAttemptAliveAndDeadlineRescuesIt) {
  enqueue("dl");
  QueueStorage::ClaimOptions o;
  o.deadline = std::chrono::hours(1);
  const auto e = claim_one("dl", o);
  storage::consumer(*store_).heartbeat(conn(), std::vector{beat(e)});
  EXPECT_TRUE(storage::consumer(*store_).rescue(conn(), std::chrono::minutes(1)).empty());
  // Let the hard deadline pass without waiting for it (a sleep would race a slow build).
  conn().exec("UPDATE claim_batches SET deadline_at = now() - interval '1 second'");
  const auto rescued = storage::consumer(*store_).rescue(conn(), std::chrono::minutes(1));
  ASSERT_EQ(rescued.size(), 1U);
  EXPECT_EQ(rescued[0].why, "rescued: deadline exceeded");
  EXPECT_EQ(count("SELECT count(*) FROM leases"), 0);
}

TEST_F(AttemptsTest, PromotionWithNothingDueCreatesNoTempTable) {
  // Regression (issue 10, defect 6): the leader promotes every round, and each call
  // created (and at commit dropped) a temp table even when nothing was due: catalog
  // writes and bloat once a second per schema.
  InsertOpts later = on_queue("later");
  later.run_at = std::chrono::system_clock::now() + std::chrono::hours(1);
  storage::insert_many(*store_, conn(),
                       std::vector<NewJob>{NewJob("x", nlohmann::json::object(), later)});
  pg::Transaction tx(conn());
  EXPECT_EQ(storage::consumer(*store_).promote_due(conn()), 0);
  EXPECT_EQ(count("SELECT count(*) FROM pg_class WHERE relname = 'awa_promote_batch' "
                  "AND relnamespace = pg_my_temp_schema()"),
            0);
  tx.rollback();
  // With a due job it still promotes.
  conn().exec("UPDATE deferred_jobs SET run_at = now() - interval '1 s'");
  EXPECT_EQ(storage::consumer(*store_).promote_due(conn()), 1);
}

TEST_F(AttemptsTest, CancelScheduledJob) {
  InsertOpts o = on_queue("cs");
  o.run_at = std::chrono::system_clock::now() + std::chrono::hours(1);
  const auto id =
      storage::insert_many(*store_, conn(), std::vector<NewJob>{NewJob("w", {}, o)}).front();
  auto pc = public_conn();
  Admin admin(schema_);
  EXPECT_EQ(admin.cancel_job(pc, id), "scheduled");
  EXPECT_EQ(count("SELECT count(*) FROM deferred_jobs"), 0);
  EXPECT_EQ(count("SELECT lane_seq FROM attempt_outcomes WHERE state = 'cancelled'"), -id);
  // Cancelled is finished, not unknown.
  EXPECT_EQ(admin.cancel_job(pc, id), "finished");
  EXPECT_EQ(admin.cancel_job(pc, id + 1000), "missing");
}

TEST_F(AttemptsTest, CancelAvailableJobTombstonesItAndTheClaimPassesIt) {
  const auto a = enqueue("ca");
  const auto b = enqueue("ca");
  auto pc = public_conn();
  Admin admin(schema_);
  EXPECT_EQ(admin.cancel_job(pc, a), "available");
  const auto e = claim_one("ca");
  EXPECT_EQ(e.job_id, b);
  EXPECT_EQ(count("SELECT claim_cursor FROM queue_shard_lag('ca')"), 3);
  EXPECT_EQ(count("SELECT available FROM queue_shard_lag('ca')"), 0);
  EXPECT_EQ(admin.cancel_job(pc, a), "finished");
}

TEST_F(AttemptsTest, CancelRunningJobLandsOnItsShardAndMakesTheCompletionStale) {
  // The synthesised done row must use the receipt's shard (AWA's ADR-025 "cancel-from-receipt").
  set_shards("cr", 8);
  const auto id = enqueue("cr", 25, "customer-42");
  const auto e = claim_one("cr");
  ASSERT_EQ(e.enqueue_shard, 4);
  storage::consumer(*store_).heartbeat(conn(), std::vector{beat(e)});

  auto listener = connect_new();
  listener.listen("awa:cancel");
  auto pc = public_conn();
  EXPECT_EQ(Admin(schema_).cancel_job(pc, id), "running");
  const auto note = listener.wait_notification(std::chrono::seconds(5));
  ASSERT_TRUE(note.has_value());
  EXPECT_EQ(note->payload, std::to_string(id));

  EXPECT_EQ(count("SELECT enqueue_shard FROM attempt_outcomes WHERE state = 'cancelled'"), 4);
  EXPECT_EQ(count("SELECT count(*) FROM leases"), 0);
  EXPECT_TRUE(storage::consumer(*store_).heartbeat(conn(), std::vector{beat(e)}).empty());
  const auto r = storage::consumer(*store_).complete(
      conn(), std::vector{Completion::of(e, Outcome::kCompleted)});
  EXPECT_TRUE(r[0].stale());
  EXPECT_TRUE(storage::consumer(*store_).rescue(conn(), milliseconds(0)).empty());
}

TEST_F(AttemptsTest, CancelRacingAnUncommittedCompletionWaitsAndFindsItFinished) {
  // Guards the per-attempt lock: completion and cancel of one attempt serialise on the
  // claim batch's advisory lock, and the second closer changes nothing.
  set_shards("race", 8);
  const auto id = enqueue("race", 25, "customer-42");
  const auto e = claim_one("race");
  auto completer = connect_new();
  completer.exec("BEGIN");
  ASSERT_EQ(storage::consumer(*store_)
                .complete(completer, std::vector{Completion::of(e, Outcome::kCompleted)})[0]
                .state,
            "completed");

  auto canceller = public_conn();
  const int pid = pg::native(canceller).backend_pid();
  const Admin admin(schema_);
  BackgroundCall<std::string> cancel(pid, [&] { return admin.cancel_job(canceller, id); });
  ASSERT_TRUE(eventually([&] { return waits_for_advisory_lock(conn(), pid); }))
      << "cancel did not wait for the open completion";
  completer.exec("COMMIT");
  ASSERT_TRUE(cancel.finishes_within(std::chrono::seconds(10)));
  EXPECT_EQ(cancel.get(), "finished");
  EXPECT_EQ(count("SELECT count(*) FROM attempt_outcomes"), 1);
  EXPECT_EQ(
      count(
          "SELECT count(*) FROM attempt_outcomes WHERE state = 'completed' AND enqueue_shard = 4"),
      1);
}

TEST_F(AttemptsTest, CompletionRacingAnUncommittedCancelWaitsAndIsStale) {
  set_shards("race", 8);
  const auto id = enqueue("race", 25, "customer-42");
  const auto e = claim_one("race");
  auto canceller = public_conn();
  canceller.execute("BEGIN");
  ASSERT_EQ(Admin(schema_).cancel_job(canceller, id), "running");

  auto completer = connect_new();
  const int pid = completer.backend_pid();
  BackgroundCall<std::vector<CompletionResult>> complete(pid, [&] {
    return storage::consumer(*store_).complete(completer,
                                               std::vector{Completion::of(e, Outcome::kCompleted)});
  });
  ASSERT_TRUE(eventually([&] { return waits_for_advisory_lock(conn(), pid); }))
      << "completion did not wait for the open cancel";
  canceller.execute("COMMIT");
  ASSERT_TRUE(complete.finishes_within(std::chrono::seconds(10)));
  const auto results = complete.get();
  ASSERT_EQ(results.size(), 1U);
  EXPECT_TRUE(results[0].stale());
  EXPECT_EQ(count("SELECT count(*) FROM attempt_outcomes"), 1);
  EXPECT_EQ(
      count(
          "SELECT count(*) FROM attempt_outcomes WHERE state = 'cancelled' AND enqueue_shard = 4"),
      1);
}

}  // namespace
}  // namespace awa::testing
