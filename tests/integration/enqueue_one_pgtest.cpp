// The one-job path of a self-committing insert (storage/enqueue_one.hpp,
// sql/queries/enqueue/insert_one.sql) against a real PostgreSQL: what it writes, the lane
// lock it holds to commit, how it follows the queue ring, and when the general path runs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "awa/job.hpp"
#include "awa/queue_storage.hpp"
#include "pg/connection.hpp"
#include "pg/native.hpp"
#include "producer_support.hpp"
#include "storage/store_access.hpp"
#include "storage_support.hpp"

namespace awa::testing {
namespace {

using namespace std::chrono_literals;

class EnqueueOneTest : public StorageTest {
 protected:
  JobId insert(pg::Connection& c, const NewJob& job) {
    return storage::insert_many(*store_, c, std::span<const NewJob>(&job, 1)).at(0);
  }
  JobId insert(const NewJob& job) { return insert(conn(), job); }
  JobId insert_copy(const NewJob& job) {
    return storage::insert_many_copy(*store_, conn(), std::span<const NewJob>(&job, 1)).at(0);
  }
  std::uint64_t one_job_writes() const { return store_->stats().one_job_writes; }
  std::int64_t current_slot() { return count("SELECT ring_current_slot('queue')"); }
};

TEST_F(EnqueueOneTest, ASecondJobToALaneIsWrittenByOneStatementWithEveryColumn) {
  // The first job creates the lane (general path); the second, to the same lane, takes
  // the one-job path and must store exactly what the general path would.
  const JobId first = insert(NewJob("first", {{"n", 1}}, on_queue("one")));
  EXPECT_EQ(one_job_writes(), 0u) << "an unseen lane goes through reserve_lane_range";
  const auto before = store_->stats();

  InsertOpts o = on_queue("one");
  o.priority = 3;
  o.max_attempts = 7;
  o.run_at = std::chrono::system_clock::time_point(std::chrono::seconds(1700000000));
  o.metadata = {{"trace", "t-1"}};
  o.tags = {"a", "b c"};
  insert(NewJob("first", {}, on_queue("one")));  // the priority-2 lane: one-job path
  insert(NewJob("prio3", {}, o));                // creates the priority-3 lane
  const auto created = store_->stats();
  EXPECT_EQ(created.one_job_writes, before.one_job_writes + 1);
  const JobId id = insert(NewJob("second", {{"k", "v"}, {"n", 2}}, o));
  const auto after = store_->stats();
  EXPECT_EQ(after.one_job_writes, created.one_job_writes + 1);
  EXPECT_EQ(after.lane_reservations, created.lane_reservations + 1);
  EXPECT_EQ(after.lane_creations, created.lane_creations);

  const auto r = conn().query(
      "SELECT ready_slot, queue, priority, enqueue_shard, lane_seq, kind, args::text, attempt,"
      " run_lease, max_attempts, run_at, ordering_key IS NULL, metadata::text, tags,"
      " ready_entries.created_at <= now(), errors IS NULL"
      " FROM ready_entries JOIN queue_ids USING (queue_id)"
      " WHERE job_id = $1",
      id);
  ASSERT_EQ(r.rows(), 1);
  EXPECT_EQ(r.get<std::int64_t>(0, 0), current_slot());
  EXPECT_EQ(r.get<std::string>(0, 1), "one");
  EXPECT_EQ(r.get<int>(0, 2), 3);
  EXPECT_EQ(r.get<int>(0, 3), 0);
  EXPECT_EQ(r.get<std::int64_t>(0, 4), 2) << "the lane's next value";
  EXPECT_EQ(r.get<std::string>(0, 5), "second");
  EXPECT_EQ(r.get<std::string>(0, 6), R"({"k": "v", "n": 2})");
  EXPECT_EQ(r.get<int>(0, 7), 0);
  EXPECT_EQ(r.get<std::int64_t>(0, 8), 0);
  EXPECT_EQ(r.get<int>(0, 9), 7);
  EXPECT_EQ(r.get<std::chrono::system_clock::time_point>(0, 10), *o.run_at);
  EXPECT_TRUE(r.get<bool>(0, 11));
  EXPECT_EQ(r.get<std::string>(0, 12), R"({"trace": "t-1"})");
  EXPECT_EQ(r.get<std::string>(0, 13), R"({a,"b c"})");
  EXPECT_TRUE(r.get<bool>(0, 14));
  EXPECT_TRUE(r.get<bool>(0, 15));
  EXPECT_GT(id, first);
}

TEST_F(EnqueueOneTest, AnOrderingKeyAndNoRunAtAreStoredLikeTheGeneralPath) {
  set_shards("keyed", 8);
  InsertOpts o = on_queue("keyed");
  o.ordering_key = std::string("cust\0omer", 9);
  const JobId a = insert(NewJob("k", {}, o));
  const JobId b = insert_copy(NewJob("k", {}, o));  // one row: COPY takes the same path
  EXPECT_EQ(one_job_writes(), 1u);
  const auto r = conn().query(
      "SELECT job_id, enqueue_shard, lane_seq, ordering_key = $1::bytea,"
      " abs(extract(epoch FROM run_at - created_at)) < 1"
      " FROM ready_entries WHERE queue_id = queue_id_of('keyed') ORDER BY lane_seq",
      pg::Bytea{*o.ordering_key});
  ASSERT_EQ(r.rows(), 2);
  EXPECT_EQ(r.get<std::int64_t>(0, 0), a);
  EXPECT_EQ(r.get<std::int64_t>(1, 0), b);
  EXPECT_EQ(r.get<int>(0, 1), shard_for_ordering_key(*o.ordering_key, 8));
  EXPECT_EQ(r.get<int>(1, 1), r.get<int>(0, 1)) << "a key keeps its shard";
  EXPECT_EQ(r.get<std::int64_t>(1, 2), r.get<std::int64_t>(0, 2) + 1);
  EXPECT_TRUE(r.get<bool>(0, 3));
  EXPECT_TRUE(r.get<bool>(1, 3));
  EXPECT_TRUE(r.get<bool>(1, 4)) << "no run_at: due at the transaction's time";
}

TEST_F(EnqueueOneTest, HoldsTheLaneLockToCommitLikeAReservation) {
  // The visibility argument (docs/design/engine.md) needs the lane lock before the lane's
  // next value and until commit: a one-job insert behind an open transaction on its lane
  // must wait for it (seen waiting on the advisory lock in pg_locks) and come after it.
  insert(NewJob("seed", {}, on_queue("lock")));
  pg::Connection holder = connect_new();
  pg::Transaction tx(holder);
  // The holder's job is placed at the end of its statement instead of at its commit, so it
  // holds the lane from its call to its commit.
  holder.exec("SET CONSTRAINTS place_staged_jobs IMMEDIATE");
  const JobId held = insert(holder, NewJob("held", {}, on_queue("lock")));

  pg::Connection producer = connect_new();
  const int pid = producer.backend_pid();
  BackgroundCall<JobId> call(
      pid, [&] { return insert(producer, NewJob("waiter", {}, on_queue("lock"))); });
  ASSERT_TRUE(eventually([&] { return waits_for_advisory_lock(conn(), pid); }))
      << "the one-job insert did not wait for the lane lock";
  EXPECT_FALSE(call.finishes_within(0ms)) << "the one-job insert finished while the lane was held";
  tx.commit();
  ASSERT_TRUE(call.finishes_within(10s)) << "the one-job insert still waits after the commit";
  const JobId waiter = call.get();
  EXPECT_EQ(one_job_writes(), 1u) << "the waiter took the one-job path";
  const auto r = conn().query(
      "SELECT (SELECT lane_seq FROM ready_entries WHERE job_id = $1),"
      " (SELECT lane_seq FROM ready_entries WHERE job_id = $2)",
      held, waiter);
  EXPECT_EQ(r.get<std::int64_t>(0, 0), 2);
  EXPECT_EQ(r.get<std::int64_t>(0, 1), 3);
}

TEST_F(EnqueueOneTest, FollowsTheQueueRingAfterARotation) {
  const JobId a = insert(NewJob("a", {}, on_queue("ring")));
  const JobId b = insert(NewJob("b", {}, on_queue("ring")));
  const auto slot_before = current_slot();
  ASSERT_TRUE(conn().exec("SELECT rotated FROM rotate_ring('queue')").get<bool>(0, 0));
  ASSERT_NE(current_slot(), slot_before);
  // The cached slot is stale: the first try writes nothing and the retry lands on the
  // new current slot.
  const JobId c = insert(NewJob("c", {}, on_queue("ring")));
  EXPECT_EQ(one_job_writes(), 2u);
  const auto r = conn().query(
      "SELECT job_id, ready_slot, lane_seq FROM ready_entries WHERE queue_id = queue_id_of('ring')"
      " ORDER BY lane_seq");
  ASSERT_EQ(r.rows(), 3) << "the missed try wrote nothing";
  EXPECT_EQ(r.get<std::int64_t>(0, 0), a);
  EXPECT_EQ(r.get<std::int64_t>(1, 0), b);
  EXPECT_EQ(r.get<std::int64_t>(2, 0), c);
  EXPECT_EQ(r.get<std::int64_t>(1, 1), slot_before);
  EXPECT_EQ(r.get<std::int64_t>(2, 1), current_slot());
  EXPECT_EQ(r.get<std::int64_t>(2, 2), 3);
}

TEST_F(EnqueueOneTest, ALaneMissingFromTheDatabaseFallsBackToTheRepairingPath) {
  // The lane is created and cached, then removed by hand (calls inside a caller's
  // transaction cache no lane, so a rollback can no longer leave one cached).
  insert(NewJob("gone", {}, on_queue("vanish")));
  conn().exec("DELETE FROM ready_entries WHERE queue_id = queue_id_of('vanish')");
  conn().exec("DELETE FROM queue_claim_heads WHERE queue_id = queue_id_of('vanish')");
  conn().exec("DELETE FROM queue_enqueue_heads WHERE queue_id = queue_id_of('vanish')");
  const auto before = store_->stats();
  const JobId id = insert(NewJob("again", {}, on_queue("vanish")));
  const auto after = store_->stats();
  EXPECT_EQ(after.one_job_writes, before.one_job_writes) << "the one-job try wrote nothing";
  EXPECT_EQ(after.lane_repairs, before.lane_repairs + 1);
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE queue_id = queue_id_of('vanish')"), 1);
  EXPECT_EQ(count("SELECT lane_seq FROM ready_entries WHERE job_id = " + std::to_string(id)), 1);
}

TEST_F(EnqueueOneTest, CallerTransactionsAndScheduledJobsKeepTheGeneralPath) {
  insert(NewJob("seed", {}, on_queue("general")));
  {
    pg::Transaction tx(conn());
    insert(NewJob("in-tx", {}, on_queue("general")));
    tx.commit();
  }
  InsertOpts later = on_queue("general");
  later.run_at = std::chrono::system_clock::now() + 1h;
  insert(NewJob("later", {}, later));
  std::vector<NewJob> two{NewJob("x", {}, on_queue("general")),
                          NewJob("y", {}, on_queue("general"))};
  storage::insert_many(*store_, conn(), two);
  EXPECT_EQ(one_job_writes(), 0u);
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE queue_id = queue_id_of('general')"), 4);
  EXPECT_EQ(count("SELECT count(*) FROM deferred_jobs WHERE queue = 'general'"), 1);
}

TEST_F(EnqueueOneTest, ConcurrentOneJobProducersLoseNothingAndKeepLaneSeqsUnique) {
  set_shards("many", 4);
  for (int s = 0; s < 4; ++s) insert(NewJob("seed", {}, on_queue("many")));  // every lane
  constexpr int kThreads = 6;
  constexpr int kPerThread = 150;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        pg::Connection c = connect_new();
        for (int i = 0; i < kPerThread; ++i)
          insert(c, NewJob("w", {{"t", t}, {"i", i}}, on_queue("many")));
      } catch (const std::exception& e) {
        ++failures;
        ADD_FAILURE() << e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(one_job_writes(), static_cast<std::uint64_t>(kThreads * kPerThread));
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE queue_id = queue_id_of('many')"),
            4 + kThreads * kPerThread);
  EXPECT_EQ(count("SELECT count(DISTINCT (enqueue_shard, lane_seq)) FROM ready_entries "
                  "WHERE queue_id = queue_id_of('many')"),
            4 + kThreads * kPerThread);
  EXPECT_EQ(
      count(
          "SELECT count(DISTINCT job_id) FROM ready_entries WHERE queue_id = queue_id_of('many')"),
      4 + kThreads * kPerThread);
  // Nothing rolled back, so each lane is gap-free: 1..n.
  EXPECT_EQ(count("SELECT count(*) FROM (SELECT enqueue_shard FROM ready_entries WHERE queue_id = "
                  "queue_id_of('many')"
                  " GROUP BY enqueue_shard HAVING max(lane_seq) <> count(*)) g"),
            0);
}

}  // namespace
}  // namespace awa::testing
