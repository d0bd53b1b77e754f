// Admin: move_queue (docs/design/engine.md, "Cross-queue administration"), set_job_priority and
// age_waiting_priorities (sql/functions/0056_job_moves.sql).
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "admin_jobs_support.hpp"
#include "awa/error.hpp"
#include "pg/native.hpp"
#include "producer_support.hpp"

namespace awa::testing {
namespace {

using std::chrono::minutes;

class JobMoveTest : public JobAdminTest {
 protected:
  JobDetail detail(JobId id) {
    auto d = admin().job(ac(), id);
    if (!d) throw std::runtime_error("job " + std::to_string(id) + " not found");
    return *d;
  }
  JobAction move(JobId id, const std::string& dest) { return admin().move_job(ac(), id, dest); }
};

TEST_F(JobMoveTest, KeyedReadyJobsLandOnSourceShardModuloDestinationWidth) {
  set_shards("src", 8);
  set_shards("wide", 16);
  set_shards("narrow", 3);
  set_shards("one", 1);
  for (const auto& [dest, width] :
       std::vector<std::pair<std::string, int>>{{"wide", 16}, {"narrow", 3}, {"one", 1}}) {
    SCOPED_TRACE(dest);
    for (int shard = 0; shard < 8; ++shard) {
      const auto id = enqueue(opts("src", 2, key_on_shard(8, shard)));
      ASSERT_EQ(detail(id).summary.enqueue_shard, shard);
      const auto a = move(id, dest);
      EXPECT_EQ(a.state, "available");
      EXPECT_EQ(a.outcome, "moved");
      const auto d = detail(id);
      EXPECT_EQ(d.summary.queue, dest);
      EXPECT_EQ(d.summary.state, "available");
      EXPECT_EQ(d.summary.enqueue_shard, shard % width);
      EXPECT_EQ(d.timeline.back().event, "moved");
    }
  }
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE queue_id = queue_id_of('narrow') AND "
                  "enqueue_shard >= 3"),
            0);
  EXPECT_EQ(admin().queue_counts(ac(), "src").available, 0);
  EXPECT_EQ(admin().queue_counts(ac(), "wide").available, 8);
  EXPECT_EQ(admin().queue_counts(ac(), "narrow").available, 8);
  EXPECT_EQ(admin().queue_counts(ac(), "one").available, 8);
  for (const char* q : {"src", "wide", "narrow", "one"}) expect_counts_match_listing(q);
}

TEST_F(JobMoveTest, UnkeyedJobsTakeTheDestinationsOrdinaryRule) {
  set_shards("src", 8);
  set_shards("d4", 4);
  std::set<int> shards;
  for (int i = 0; i < 8; ++i) {
    const auto id = enqueue("src");
    ASSERT_EQ(move(id, "d4").outcome, "moved");
    const auto d = detail(id);
    ASSERT_TRUE(d.summary.enqueue_shard);
    EXPECT_LT(*d.summary.enqueue_shard, 4);
    shards.insert(*d.summary.enqueue_shard);
  }
  // One rotor pick per move: consecutive picks cover the destination's shards.
  EXPECT_EQ(shards.size(), 4U);
  // Into a queue of width 1 (no queue_meta row at all): shard 0.
  const auto id = enqueue("src");
  const auto source_shard = detail(id).summary.enqueue_shard;
  ASSERT_EQ(move(id, "fresh").outcome, "moved");
  EXPECT_EQ(detail(id).summary.enqueue_shard, 0) << "from shard " << *source_shard;
  // The new lane is claimable: the job runs in its new queue.
  const auto got = claim("fresh");
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].job_id, id);
  EXPECT_EQ(got[0].queue, "fresh");
  EXPECT_EQ(got[0].attempt, 1);
  EXPECT_TRUE(claim("src", 100).empty());  // nothing left behind in the source
}

TEST_F(JobMoveTest, PerKeyOrderIsKeptWhenKeyedJobsMoveInOrder) {
  set_shards("src", 8);
  set_shards("dst", 3);
  const auto key_a = key_on_shard(8, 5, "a-");
  const auto key_b = key_on_shard(8, 2, "b-");
  std::vector<JobId> a;
  std::vector<JobId> b;
  for (int i = 0; i < 5; ++i) {
    a.push_back(enqueue(opts("src", 2, key_a), "a", {{"i", i}}));
    b.push_back(enqueue(opts("src", 2, key_b), "b", {{"i", i}}));
  }
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(move(a[static_cast<std::size_t>(i)], "dst").outcome, "moved");
    ASSERT_EQ(move(b[static_cast<std::size_t>(i)], "dst").outcome, "moved");
  }
  std::vector<JobId> got_a;
  std::vector<JobId> got_b;
  for (int round = 0; round < 20; ++round) {
    const auto got = claim("dst", 1);
    if (got.empty()) break;
    EXPECT_EQ(got[0].enqueue_shard, got[0].kind == "a" ? 5 % 3 : 2 % 3);
    (got[0].kind == "a" ? got_a : got_b).push_back(got[0].job_id);
  }
  EXPECT_EQ(got_a, a);
  EXPECT_EQ(got_b, b);
}

TEST_F(JobMoveTest, ScheduledJobsMoveInPlaceAndPromoteIntoTheDestinationWidth) {
  set_shards("src", 8);
  set_shards("d2", 2);
  const auto key = key_on_shard(8, 7);
  InsertOpts o = opts("src", 2, key);
  o.run_at = std::chrono::system_clock::now() + std::chrono::hours(1);
  const auto keyed = enqueue(o);
  const auto plain = schedule("src");
  EXPECT_EQ(move(keyed, "d2").outcome, "moved");
  EXPECT_EQ(move(plain, "d2").state, "scheduled");
  EXPECT_EQ(move(plain, "d2").outcome, "unchanged");
  EXPECT_EQ(detail(keyed).summary.queue, "d2");
  EXPECT_EQ(detail(keyed).summary.state, "scheduled");
  EXPECT_EQ(admin().queue_counts(ac(), "d2").scheduled, 2);
  EXPECT_EQ(admin().queue_counts(ac(), "src").scheduled, 0);

  conn().exec("UPDATE deferred_jobs SET run_at = now() - interval '1 second'");
  EXPECT_EQ(storage::consumer(*store_).promote_due(conn()), 2);
  // Promotion routes with the destination's width and the ordinary keyed rule.
  EXPECT_EQ(detail(keyed).summary.enqueue_shard, shard_for_ordering_key(key, 2));
  ASSERT_TRUE(detail(plain).summary.enqueue_shard);
  EXPECT_LT(*detail(plain).summary.enqueue_shard, 2);
  EXPECT_EQ(admin().queue_counts(ac(), "d2").available, 2);
}

TEST_F(JobMoveTest, RunningAndFinishedJobsAreNotMovable) {
  const auto ids = every_state("mv");
  for (const char* which :
       {"running", "waiting_external", "completed", "failed", "cancelled", "dlq"}) {
    const auto a = move(ids.at(which), "elsewhere");
    EXPECT_EQ(a.outcome, "not_movable") << which;
    EXPECT_EQ(a.state, which);
    EXPECT_EQ(detail(ids.at(which)).summary.queue, "mv") << which;
  }
  EXPECT_EQ(move(ids.at("retryable"), "elsewhere").outcome, "moved");
  EXPECT_EQ(move(ids.at("available"), "mv").outcome, "unchanged");
  EXPECT_EQ(move(424242, "elsewhere").outcome, "not_found");
  EXPECT_THROW(move(ids.at("available"), "a b"), InvalidArgument);
  EXPECT_THROW(move(ids.at("available"), ""), InvalidArgument);
  EXPECT_THROW(conn().exec("SELECT * FROM move_queue(1, 'bad name')"), DatabaseError);
  EXPECT_EQ(admin().queue_counts(ac(), "elsewhere").available, 0);
  EXPECT_EQ(admin().queue_counts(ac(), "elsewhere").retryable, 1);
  expect_counts_match_listing("mv");
}

TEST_F(JobMoveTest, AMovedJobCanBeCancelledAndRetried) {
  // Regression: cancel_job looked the job up by id among rows at or after the cursor
  // and could find the moved job's tombstoned row, answering "finished".
  const auto id = enqueue("from");
  ASSERT_EQ(move(id, "to").outcome, "moved");
  EXPECT_EQ(admin().cancel_job(ac(), id), "available");
  EXPECT_EQ(detail(id).summary.state, "cancelled");
  EXPECT_EQ(admin().queue_counts(ac(), "to").cancelled, 1);
  EXPECT_EQ(admin().retry_job(ac(), id).outcome, "retried");
  EXPECT_EQ(detail(id).summary.queue, "to");
  EXPECT_EQ(claim_one("to", id).attempt, 1);
}

TEST_F(JobMoveTest, AClaimThatWinsTheHeadLockMakesTheMoveRefuse) {
  const auto id = enqueue("cq");
  auto claimer = connect_new();
  claimer.exec("BEGIN");
  QueueStorage::ClaimOptions o;
  o.max_batch = 1;
  ASSERT_EQ(storage::consumer(*store_).claim(claimer, "cq", o).size(), 1U);  // head locked
  auto mover = Connection::connect(database_url());
  const int pid = pg::native(mover).backend_pid();
  BackgroundCall<JobAction> call(pid, [&] { return admin().move_job(mover, id, "other"); });
  auto observer = connect_new();
  ASSERT_TRUE(eventually([&] {
    return observer.query("SELECT count(*) FROM pg_locks WHERE pid = $1 AND NOT granted", pid)
               .get<std::int64_t>(0, 0) > 0;
  }));
  claimer.exec("COMMIT");
  ASSERT_TRUE(call.finishes_within(std::chrono::seconds(10)));
  const auto a = call.get();
  EXPECT_EQ(a.outcome, "not_movable");
  EXPECT_EQ(a.state, "running");
  EXPECT_EQ(count("SELECT count(*) FROM ready_tombstones"), 0);
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE queue_id = queue_id_of('other')"), 0);
}

TEST_F(JobMoveTest, SetPriorityOfScheduledAndAvailableJobs) {
  set_shards("pr", 8);
  const auto sched = schedule("pr");
  EXPECT_EQ(admin().set_job_priority(ac(), sched, 4).outcome, "reprioritised");
  EXPECT_EQ(detail(sched).summary.priority, 4);
  EXPECT_EQ(detail(sched).summary.state, "scheduled");

  const auto key = key_on_shard(8, 6);
  const auto keyed = enqueue(opts("pr", 3, key));
  const auto a = admin().set_job_priority(ac(), keyed, 1);
  EXPECT_EQ(a.state, "available");
  EXPECT_EQ(a.outcome, "reprioritised");
  auto d = detail(keyed);
  EXPECT_EQ(d.summary.priority, 1);
  EXPECT_EQ(d.summary.enqueue_shard, 6);  // 6 % 8: the key's lane at the new priority
  EXPECT_EQ(admin().set_job_priority(ac(), keyed, 1).outcome, "unchanged");

  const auto plain = enqueue(opts("pr", 2));
  EXPECT_EQ(admin().set_job_priority(ac(), plain, 3).outcome, "reprioritised");
  EXPECT_EQ(detail(plain).summary.priority, 3);
  // The claim sees the new priorities: priority 1 first.
  const auto got = claim("pr", 1);
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].job_id, keyed);
  EXPECT_EQ(got[0].priority, 1);
  EXPECT_EQ(admin().set_job_priority(ac(), keyed, 2).outcome, "not_movable");

  EXPECT_THROW(admin().set_job_priority(ac(), plain, 0), InvalidArgument);
  EXPECT_THROW(admin().set_job_priority(ac(), plain, 5), InvalidArgument);
  EXPECT_EQ(admin().set_job_priority(ac(), 777777, 1).outcome, "not_found");
  expect_counts_match_listing("pr");
}

TEST_F(JobMoveTest, AgeWaitingPrioritiesMovesOldRowsUp) {
  const auto ago = [](minutes m) { return std::chrono::system_clock::now() - m; };
  InsertOpts o4 = opts("ag", 4);
  o4.run_at = ago(minutes(10));
  const auto old4 = enqueue(o4);
  InsertOpts o3 = opts("ag", 3);
  o3.run_at = ago(minutes(4));
  const auto mid3 = enqueue(o3);
  const auto new4 = enqueue(opts("ag", 4));
  InsertOpts o1 = opts("ag", 1);
  o1.run_at = ago(minutes(60));
  const auto top = enqueue(o1);

  const auto run_at = detail(old4).summary.run_at;
  EXPECT_THROW(admin().age_waiting_priorities(ac(), "ag", std::chrono::milliseconds(0)),
               InvalidArgument);
  // One level per 3 minutes: 10 min -> 3 levels (4 -> 1), 4 min -> 1 level (3 -> 2).
  EXPECT_EQ(admin().age_waiting_priorities(ac(), "ag", minutes(3)), 2);
  EXPECT_EQ(detail(old4).summary.priority, 1);
  EXPECT_EQ(detail(mid3).summary.priority, 2);
  EXPECT_EQ(detail(new4).summary.priority, 4);
  EXPECT_EQ(detail(top).summary.priority, 1);
  // The wait spent on the three levels moves run_at on: aging never counts it twice.
  EXPECT_NE(detail(old4).summary.run_at, run_at);
  EXPECT_EQ(conn()
                .query("SELECT extract(epoch FROM max(run_at) - min(run_at))::bigint FROM "
                       "ready_entries WHERE job_id = $1",
                       old4)
                .get<std::int64_t>(0, 0),
            9 * 60);
  EXPECT_EQ(admin().queue_counts(ac(), "ag").available, 4);
  expect_counts_match_listing("ag");
  // Nothing more to age.
  EXPECT_EQ(admin().age_waiting_priorities(ac(), "ag", minutes(3)), 0);
}

}  // namespace
}  // namespace awa::testing
