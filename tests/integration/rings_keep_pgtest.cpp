// The queue ring's keep slot (docs/design/rings.md, "carry, once, into the keep slot"):
// work that outlives its slot is moved there once, however many laps it stays; readers of
// live work see it only while it may hold some; the sweep deletes each row once it is dead
// and keeps the counts exact.
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "rings_support.hpp"
#include "storage/store_access.hpp"

namespace awa::testing {
namespace {

using std::chrono::seconds;

class RingsKeepTest : public RingsTest {
 protected:
  // One round of a service: a few jobs through "busy", one of them heartbeating, so every
  // ring has rows to rotate over; the leader's step on every ring while they run; then
  // they complete. Returns what the queue ring's step did.
  Tick round() {
    enqueue("busy", 3);
    const auto got = claim("busy");
    EXPECT_EQ(got.size(), 3U);
    // A heartbeat writes a lease, so the lease ring has rows to rotate over too.
    EXPECT_EQ(storage::consumer(*store_)
                  .heartbeat(conn(), std::vector{QueueStorage::Heartbeat::of(got.at(0))})
                  .size(),
              1U);
    Tick queue;
    for (const char* ring : kRings) {
      const auto t = maintain(ring);
      EXPECT_EQ(t.rotations, 1) << ring << " ring did not advance";
      if (std::string(ring) == "queue") queue = t;
    }
    for (const auto& r : finish(got)) EXPECT_EQ(r.state, "completed");
    return queue;
  }
  std::int64_t kept_rows() { return ring_status("queue").kept_rows; }
  bool keep_slot_is_live() {
    return count("SELECT (-1 = ANY (ring_live_slots('queue')))::int") == 1;
  }
  JobId fail_one(const std::string& queue) {
    const auto id = enqueue_one(queue, std::nullopt, 1);
    const auto got = claim(queue);
    EXPECT_EQ(got.size(), 1U);
    std::vector<Completion> cs{Completion::of(got.at(0), Outcome::kFail, "broken on purpose")};
    EXPECT_EQ(storage::consumer(*store_).complete(conn(), cs).at(0).state, "failed");
    return id;
  }
};

TEST_F(RingsKeepTest, RetainedFailedJobsAreWrittenOnceNotAtEveryPrune) {
  // Guards the write amplification of failed retention: a failed job used to be copied,
  // done row and ready row, at every prune that reached it (each few seconds, for 72 h).
  // Now the first prune moves it to the keep slot and no later prune touches it.
  std::vector<JobId> failed;
  for (int i = 0; i < 3; ++i) failed.push_back(fail_one("f"));
  std::int64_t carried = 0;
  for (int r = 0; r < 40; ++r) carried += round().carried;  // 2.5 laps of the queue ring
  EXPECT_EQ(carried, 6) << "3 failed jobs x (done row + ready row) should move exactly once";
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE queue_id = queue_id_of('f') AND "
                  "ready_slot = -1"),
            3);
  EXPECT_EQ(count("SELECT count(*) FROM done_entries WHERE queue_id = queue_id_of('f') AND "
                  "ready_slot = -1"),
            3);
  EXPECT_EQ(kept_rows(), 6);
  EXPECT_FALSE(keep_slot_is_live()) << "failed jobs are not live work";
  EXPECT_EQ(counts("f").failed, 3);

  // Still inspectable and retryable from there.
  const auto detail = admin().job(admin_conn(), failed[0]);
  ASSERT_TRUE(detail.has_value());
  EXPECT_EQ(detail->summary.state, "failed");
  EXPECT_EQ(admin().retry_job(admin_conn(), failed[0]).outcome, "retried");
  const auto again = claim("f");
  ASSERT_EQ(again.size(), 1U);
  EXPECT_EQ(again[0].job_id, failed[0]);
  EXPECT_EQ(finish(again).at(0).state, "completed");
}

TEST_F(RingsKeepTest, SweepFoldsExpiredFailuresAndKeepsTheCountsExact) {
  // Guards the sweep's fold: failed jobs past their retention leave the keep slot, and
  // the all-time counts stay what they were (terminal_rollups takes them over).
  for (int i = 0; i < 3; ++i) fail_one("f");
  for (int r = 0; r < 3; ++r) round();
  ASSERT_EQ(kept_rows(), 6);
  const auto before = counts("f");
  ASSERT_EQ(before.failed, 3);

  EXPECT_EQ(admin().sweep_kept(admin_conn(), std::chrono::hours(72)), 0)
      << "failed jobs inside their retention were swept";
  EXPECT_EQ(kept_rows(), 6);
  EXPECT_EQ(admin().sweep_kept(admin_conn(), seconds(0)), 6);
  EXPECT_EQ(kept_rows(), 0);
  EXPECT_EQ(describe(counts("f")), describe(before));
  EXPECT_EQ(count("SELECT coalesce(sum(jobs), 0) FROM terminal_rollups "
                  "WHERE queue_id = queue_id_of('f') AND state = 'failed'"),
            3);
}

TEST_F(RingsKeepTest, APausedBacklogIsMovedOnceClaimedFromTheKeepSlotAndSweptAfter) {
  // Guards the backlog path end to end: a paused queue's rows are moved to the keep slot
  // once over several laps, the keep slot is read by the claim while it holds them (lane
  // order across it and the ring slots), and once drained the sweep empties it and the
  // claim stops reading it.
  set_shards("paused", 2);
  conn().exec(
      "INSERT INTO queue_meta (queue, paused) VALUES ('paused', true) "
      "ON CONFLICT (queue) DO UPDATE SET paused = true");
  const auto early = enqueue("paused", 200);
  std::int64_t carried = 0;
  for (int r = 0; r < 40; ++r) carried += round().carried;
  EXPECT_EQ(carried, 200) << "the backlog was copied more than once";
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE queue_id = queue_id_of('paused') AND "
                  "ready_slot = -1"),
            200);
  EXPECT_TRUE(keep_slot_is_live());
  const auto late = enqueue("paused", 50, std::nullopt, 200);  // in the ring, after the kept
  EXPECT_EQ(counts("paused").available, 250);

  conn().exec("UPDATE queue_meta SET paused = false WHERE queue = 'paused'");
  const auto drained = drain("paused", 64);
  ASSERT_EQ(drained.size(), 250U);
  std::map<int, int> last_i;
  std::set<JobId> seen;
  for (const auto& e : drained) {
    EXPECT_TRUE(seen.insert(e.job_id).second) << "job " << e.job_id << " claimed twice";
    const int i = nlohmann::json::parse(e.args_json).at("i").get<int>();
    auto [it, fresh] = last_i.try_emplace(e.enqueue_shard, i);
    if (!fresh) {
      EXPECT_GT(i, it->second) << "shard " << e.enqueue_shard << " out of lane order";
      it->second = i;
    }
  }
  std::set<JobId> all(early.begin(), early.end());
  all.insert(late.begin(), late.end());
  EXPECT_EQ(seen, all);

  round();  // a rotation: the sweep runs after it
  EXPECT_EQ(kept_rows(), 0);
  EXPECT_FALSE(keep_slot_is_live()) << "an empty keep slot is still read by every claim";
  EXPECT_EQ(counts("paused").completed, 250);
  EXPECT_EQ(counts("paused").available, 0);
}

TEST_F(RingsKeepTest, AnAttemptWhoseRowMovedToTheKeepSlotIsNotSweptAndCompletes) {
  // Guards the sweep against open attempts: the ready row of a long attempt is moved to
  // the keep slot by a carrying prune; the sweep leaves it while the attempt is open, the
  // completion finds it there, and the next sweep deletes it.
  enqueue_one("long");
  const auto running = claim("long");
  ASSERT_EQ(running.size(), 1U);
  for (int r = 0; r < 20; ++r) round();
  ASSERT_EQ(count("SELECT count(*) FROM ready_entries WHERE queue_id = queue_id_of('long') AND "
                  "ready_slot = -1"),
            1);
  EXPECT_TRUE(keep_slot_is_live());
  EXPECT_EQ(admin().sweep_kept(admin_conn(), seconds(0)), 0) << "an open attempt's row was swept";
  EXPECT_EQ(counts("long").running, 1);

  EXPECT_EQ(finish(running).at(0).state, "completed");
  round();
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE queue_id = queue_id_of('long')"), 0);
  EXPECT_FALSE(keep_slot_is_live());
  EXPECT_EQ(counts("long").completed, 1);
}

TEST_F(RingsKeepTest, ACancelledRowInTheKeepSlotIsSkippedAndSwept) {
  // Guards cancel against the keep slot: a pending row there is tombstoned where it is,
  // the claim passes it, and the sweep removes row, tombstone and done row together.
  conn().exec(
      "INSERT INTO queue_meta (queue, paused) VALUES ('c', true) "
      "ON CONFLICT (queue) DO UPDATE SET paused = true");
  const auto ids = enqueue("c", 3);
  for (int r = 0; r < 20; ++r) round();
  ASSERT_EQ(count("SELECT count(*) FROM ready_entries WHERE queue_id = queue_id_of('c') AND "
                  "ready_slot = -1"),
            3);
  EXPECT_EQ(admin().cancel_job(admin_conn(), ids[1]), "available");
  EXPECT_EQ(count("SELECT count(*) FROM ready_tombstones WHERE ready_slot = -1"), 1);

  conn().exec("UPDATE queue_meta SET paused = false WHERE queue = 'c'");
  const auto drained = drain("c");
  ASSERT_EQ(drained.size(), 2U);
  EXPECT_EQ(drained[0].job_id, ids[0]);
  EXPECT_EQ(drained[1].job_id, ids[2]);
  round();
  EXPECT_EQ(kept_rows(), 0);
  const auto c = counts("c");
  EXPECT_EQ(c.completed, 2);
  EXPECT_EQ(c.cancelled, 1);
}

}  // namespace
}  // namespace awa::testing
