// Ring prune: its gates, its locks, and its races with producers, claims and closers
// (docs/design/rings.md).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "awa/client.hpp"
#include "cli_runner.hpp"
#include "pg/native.hpp"
#include "rings_support.hpp"
#include "storage/store_access.hpp"

namespace awa::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// --- prune gates ----------------------------------------------------------------------

TEST_F(RingsTest, PrunePendingReadyMatchIsScopedByEnqueueShard) {
  // Guards the pending check of prune: a ready row is live when it is at or after the
  // claim cursor of its OWN lane (queue, priority, enqueue_shard). Both shards have a
  // lane_seq 1; shard 0's cursor has passed 1, shard 1's has not, and prune must see that
  // (AWA's ADR-025 sharded-prune test; models/sharded_prune.pml).
  set_shards("sp", 2);
  const auto id0 = enqueue_one("sp", key_for_shard(2, 0));
  const auto id1 = enqueue_one("sp", key_for_shard(2, 1));  // a later transaction: later run_at
  ASSERT_EQ(count("SELECT count(*) FROM ready_entries WHERE lane_seq = 1 AND ready_slot = 0"), 2);

  const auto first = claim("sp", 1);
  ASSERT_EQ(first.size(), 1U);
  ASSERT_EQ(first[0].job_id, id0);
  ASSERT_EQ(first[0].enqueue_shard, 0);
  ASSERT_EQ(first[0].lane_seq, 1);
  ASSERT_EQ(finish(first)[0].state, "completed");

  ASSERT_TRUE(rotate("queue").done);
  const auto pruned = prune("queue");
  EXPECT_FALSE(pruned.done) << "prune truncated shard 1's unclaimed lane_seq 1";
  EXPECT_THAT(pruned.reason, HasSubstr("pending"));
  EXPECT_THAT(pruned.reason, HasSubstr("shard 1"));

  const auto second = claim("sp", 1);
  ASSERT_EQ(second.size(), 1U) << "shard 1's job is gone";
  EXPECT_EQ(second[0].job_id, id1);
  EXPECT_EQ(second[0].enqueue_shard, 1);
  EXPECT_EQ(second[0].lane_seq, 1);
}

TEST_F(RingsTest, PruneRefusesLiveWorkInEveryRingUntilItIsDone) {
  // Guards the live checks of all three rings: a pending ready row, an open attempt
  // (queue ring), an open receipt (claim ring), an active lease (lease ring) each keep
  // their slot; once the work is done the same prunes succeed and the slots are empty.
  enqueue_one("open");
  enqueue_one("pend");
  const auto running = claim("open");
  ASSERT_EQ(running.size(), 1U);
  ASSERT_EQ(storage::consumer(*store_)
                .heartbeat(conn(), std::vector{QueueStorage::Heartbeat::of(running[0])})
                .size(),
            1U);
  ASSERT_EQ(count("SELECT count(*) FROM leases"), 1);
  for (const char* ring : kRings) ASSERT_TRUE(rotate(ring).done) << ring;

  auto q = prune("queue");
  EXPECT_FALSE(q.done);
  EXPECT_THAT(q.reason, HasSubstr("pending ready rows"));
  auto c = prune("claim");
  EXPECT_FALSE(c.done);
  EXPECT_THAT(c.reason, HasSubstr("open receipts"));
  auto l = prune("lease");
  EXPECT_FALSE(l.done);
  EXPECT_THAT(l.reason, HasSubstr("active leases"));

  // The pending job runs (its batch goes to the new claim slot); the heartbeated one is
  // still open.
  ASSERT_EQ(finish(claim("pend")).at(0).state, "completed");
  q = prune("queue");
  EXPECT_FALSE(q.done);
  EXPECT_THAT(q.reason, HasSubstr("1 open attempts"));
  EXPECT_FALSE(prune("claim").done);
  EXPECT_FALSE(prune("lease").done);

  ASSERT_EQ(finish(running).at(0).state, "completed");
  q = prune("queue");
  EXPECT_TRUE(q.done) << q.reason;
  EXPECT_EQ(q.rows_removed, 2);  // the two ready rows
  EXPECT_EQ(q.rows_carried, 0);
  c = prune("claim");
  EXPECT_TRUE(c.done) << c.reason;
  EXPECT_EQ(c.rows_removed, 2);  // the open job's batch and its closure
  l = prune("lease");
  EXPECT_TRUE(l.done) << l.reason;
  for (const auto& r : admin().storage_status(admin_conn())) {
    ASSERT_GE(r.slots.size(), 1U);
    EXPECT_EQ(r.slots[0].state, "pruned") << r.ring;
    EXPECT_EQ(r.slots[0].rows, 0) << r.ring;
    EXPECT_EQ(r.current_slot, 1) << r.ring;
  }
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE ready_slot = 0"), 0);
  EXPECT_EQ(count("SELECT count(*) FROM claim_batches WHERE claim_slot = 0"), 0);
  EXPECT_EQ(counts("open").completed, 1);
  EXPECT_EQ(counts("pend").completed, 1);
}

TEST_F(RingsTest, PruneOfASlotWithAnUncommittedEnqueueIsLockedAndTheReCheckCatchesItsCommit) {
  // Guards prune's two-phase check: (a) a slot a producer is still writing (RowExclusive,
  // uncommitted row) is skipped as "locked", without waiting; (b) a row that commits after
  // prune's first look but before its locks is found by the re-check under the locks, not
  // truncated. (b) is pinned with a TableGate: the first check blocks on
  // queue_claim_heads after its snapshot was taken, the producer commits, then it goes on.
  enqueue_one("rc");
  ASSERT_EQ(drain("rc").size(), 1U);  // slot 0: one finished job, nothing live

  auto producer = session();
  producer.exec("BEGIN");
  producer.exec("SET CONSTRAINTS place_staged_jobs IMMEDIATE");  // placed now: holds the lane
  const auto late =
      storage::insert_many(*store_, producer, std::vector{job("rc", {{"late", true}})}).front();
  ASSERT_TRUE(rotate("queue").done);  // the producer's row is in slot 0, now sealed
  ASSERT_EQ(ready_slot_of(late), -1) << "uncommitted rows are invisible";

  // (a)
  const auto locked = prune("queue");
  EXPECT_FALSE(locked.done);
  EXPECT_THAT(locked.reason, StartsWith("locked"));

  // (b)
  auto holder = session();
  TableGate gate(holder, conn(), qualified("queue_claim_heads"));
  ASSERT_TRUE(gate.armed());
  auto pruner = public_conn();
  const int pid = pg::native(pruner).backend_pid();
  const Admin a = admin();
  BackgroundCall<RingAction> call(pid, [&] { return a.prune(pruner, "queue"); });
  ASSERT_TRUE(eventually([&] { return waits_for_lock(conn(), pid, "relation"); }))
      << "prune's first check did not reach queue_claim_heads";
  producer.exec("COMMIT");
  ASSERT_TRUE(gate.release());
  ASSERT_TRUE(call.finishes_within(seconds(10)));
  const auto rechecked = call.get();
  EXPECT_FALSE(rechecked.done) << "prune truncated a row committed while it took its locks";
  EXPECT_THAT(rechecked.reason, HasSubstr("pending ready rows"));
  EXPECT_THAT(rechecked.reason, HasSubstr("re-check"));

  const auto got = claim("rc");
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(got[0].job_id, late);
  EXPECT_EQ(got[0].ready_slot, 0);
}

TEST_F(RingsTest, PruneNeverQueuesBehindAProducerHoldingALaneLock) {
  // Guards "prune never waits" (the PRUNE_WAITS variant of models/lock_order.pml): a
  // producer holds its lane lock and RowExclusive on the sealed slot, a second producer
  // queues for the lane; prune comes back at once with "locked", never waiting in
  // pg_locks, and the producers are not held up by it.
  enqueue_one("pl");
  ASSERT_EQ(drain("pl").size(), 1U);

  auto first = public_conn();
  first.execute("BEGIN");
  // Placed now, not at commit: it holds the lane.
  first.execute("SET CONSTRAINTS " + quoted_schema() + ".place_staged_jobs IMMEDIATE");
  const auto a = store_->insert(first, job("pl", {{"p", 1}}));
  auto second = session();
  const int second_pid = second.backend_pid();
  BackgroundCall<std::vector<JobId>> queued(second_pid, [&] {
    return storage::insert_many(*store_, second, std::vector{job("pl", {{"p", 2}})});
  });
  ASSERT_TRUE(eventually([&] { return waits_for_advisory_lock(conn(), second_pid); }));
  ASSERT_TRUE(rotate("queue").done);

  auto pruner = public_conn();
  const int pid = pg::native(pruner).backend_pid();
  const Admin adm = admin();
  const auto started = SteadyClock::now();
  BackgroundCall<RingAction> call(pid, [&] { return adm.prune(pruner, "queue"); });
  bool waited = false;
  int samples = 0;
  while (!call.finishes_within(milliseconds(1)) && SteadyClock::now() - started < seconds(10)) {
    waited = waited || waits_for_any_lock(conn(), pid);
    ++samples;
  }
  // It came back while the producer still holds its locks: it cannot have queued
  // behind them (they are released only below).
  ASSERT_TRUE(call.finishes_within(seconds(10))) << "prune is waiting for the producer";
  const auto r = call.get();
  EXPECT_FALSE(waited) << "pg_locks showed prune waiting (" << samples << " samples)";
  EXPECT_FALSE(r.done);
  EXPECT_THAT(r.reason, StartsWith("locked"));
  EXPECT_FALSE(queued.finishes_within(milliseconds(0))) << "the second producer ran early";

  first.execute("COMMIT");
  ASSERT_TRUE(queued.finishes_within(seconds(10)));
  const auto b = queued.get().at(0);
  const auto pending = prune("queue");
  EXPECT_FALSE(pending.done);
  EXPECT_THAT(pending.reason, HasSubstr("pending"));
  std::set<JobId> got;
  for (const auto& e : drain("pl")) got.insert(e.job_id);
  EXPECT_EQ(got, (std::set<JobId>{a, b}));
  const auto done = prune("queue");
  EXPECT_TRUE(done.done) << done.reason;
}

TEST_F(RingsTest, OpenAttemptScanIsNotJitCompiled) {
  // Guards the cost of the live-attempt scan behind every queue-ring prune
  // (ring_slot_live), cancel_job and the carry: open_attempts() sums the closures of each
  // batch over every claim_batches partition. Partitions that are new or were just
  // truncated by a prune have no statistics (TRUNCATE resets them), the planner assumes a
  // few hundred rows in each, and the estimate crosses jit_above_cost: with the server's
  // default jit = on, every call is JIT-compiled (over a second of CPU) although the ring
  // holds one batch. rescue_stale_attempts' candidate scan, run every maintenance round,
  // has the same shape.
  conn().exec("RESET jit");
  if (conn().exec("SELECT current_setting('jit')::bool AND pg_jit_available()").get<bool>(0, 0) ==
      false) {
    GTEST_SKIP() << "the server does not JIT-compile (jit = off or no LLVM)";
  }
  enqueue_one("jit");
  ASSERT_EQ(claim("jit").size(), 1U);
  const auto plan = nlohmann::json::parse(
      conn().exec("EXPLAIN (ANALYZE, FORMAT JSON) SELECT * FROM open_attempts()").text(0, 0))[0];
  const bool jit = plan.contains("JIT");
  EXPECT_FALSE(jit) << "open_attempts() over one open batch: estimated cost "
                    << plan["Plan"]["Total Cost"] << " (jit_above_cost "
                    << conn().exec("SELECT current_setting('jit_above_cost')").text(0, 0)
                    << "), JIT " << (jit ? plan["JIT"]["Timing"]["Total"].dump() : "-")
                    << " ms of an execution of " << plan["Execution Time"] << " ms";
}

// --- rings racing the producers, the claim and the closers ------------------------------

TEST_F(RingsTest, ProducerWaitingForALaneLockNeverWritesIntoAPrunedSlot) {
  // Guards "no lost work" across rotation: a committed job is always in a live slot.
  // Producers read the current ready slot in their statement's snapshot, taken before they
  // wait for the lane lock; rows written after a rotation and a prune of that slot would
  // land in a truncated slot that no claim reads. Pinned with lane locks only:
  //   W holds lane 0 (uncommitted row in slot 0);
  //   Y (COPY path, rows on lanes 0 and 1) reads slot 0, waits for lane 0;
  //   P (INSERT path, lane 0) reads slot 0, queues behind Y;
  //   the ring rotates; Z holds lane 1 with a row in the new slot; W rolls back;
  //   Y now holds lane 0 with nothing written yet and waits for lane 1: slot 0 holds
  //   nothing live and nobody has it locked, so prune may truncate it (refusing is fine
  //   too: the contract is only that every committed job can be claimed);
  //   Z commits, Y copies its rows, P inserts its row.
  set_shards("lw", 2);
  const auto k0 = key_for_shard(2, 0);
  const auto k1 = key_for_shard(2, 1);
  enqueue_one("lw", k0);
  enqueue_one("lw", k1);
  ASSERT_EQ(drain("lw").size(), 2U);  // both lanes exist; slot 0 holds finished work only

  auto w = session();
  w.exec("BEGIN");
  w.exec("SET CONSTRAINTS place_staged_jobs IMMEDIATE");  // placed now: holds the lane
  storage::insert_many(*store_, w, std::vector{job("lw", {{"who", "w"}}, k0)});

  auto y = session();
  const int y_pid = y.backend_pid();
  BackgroundCall<std::vector<JobId>> y_call(y_pid, [&] {
    return storage::insert_many_copy(
        *store_, y, std::vector{job("lw", {{"who", "y0"}}, k0), job("lw", {{"who", "y1"}}, k1)});
  });
  ASSERT_TRUE(eventually([&] { return waits_for_advisory_lock(conn(), y_pid); }));
  auto p = session();
  const int p_pid = p.backend_pid();
  BackgroundCall<std::vector<JobId>> p_call(p_pid, [&] {
    return storage::insert_many(*store_, p, std::vector{job("lw", {{"who", "p0"}}, k0)});
  });
  ASSERT_TRUE(eventually([&] { return waits_for_advisory_lock(conn(), p_pid); }));

  ASSERT_TRUE(rotate("queue").done);
  auto z = session();
  z.exec("BEGIN");
  z.exec("SET CONSTRAINTS place_staged_jobs IMMEDIATE");  // placed now: holds the lane
  const auto z1 =
      storage::insert_many(*store_, z, std::vector{job("lw", {{"who", "z1"}}, k1)}).front();
  w.exec("ROLLBACK");
  ASSERT_TRUE(eventually([&] { return holds_one_lane_and_waits_for_another(conn(), y_pid); }))
      << "Y did not move on to lane 1";

  const auto pruned = prune("queue");

  z.exec("COMMIT");
  ASSERT_TRUE(y_call.finishes_within(seconds(10)));
  const auto y_ids = y_call.get();
  ASSERT_TRUE(p_call.finishes_within(seconds(10)));
  const auto p0 = p_call.get().at(0);

  std::set<JobId> claimed;
  for (const auto& e : drain("lw")) claimed.insert(e.job_id);
  const std::vector<std::pair<std::string, JobId>> committed{
      {"y0 (COPY path)", y_ids.at(0)}, {"y1", y_ids.at(1)}, {"p0 (INSERT path)", p0}, {"z1", z1}};
  for (const auto& [who, id] : committed) {
    EXPECT_EQ(claimed.count(id), 1U)
        << "job " << who << " was committed but is never claimed: its row is in ready slot "
        << ready_slot_of(id)
        << "; prune of generation 0 (slot 0): " << (pruned.done ? "done" : pruned.reason)
        << "; the claim reads slots "
        << conn().exec("SELECT ring_live_slots('queue')::text").text(0, 0);
  }
}

TEST_F(RingsTest, ClaimRacingACarryPruneNeverSkipsTheCarriedRows) {
  // Guards per-lane FIFO and no lost work when prune carries a lane's head forward while
  // a claim is under way: a rotation and a carry-prune that commit after the claim listed
  // the live slots, before it read the oldest one, move the lane's first rows into a slot
  // missing from its list. Pinned with a TableGate on queue_claim_heads: the claim parks
  // right after listing the slots, the gate's holder rotates and prunes with carry, then
  // the claim goes on. (At f3c8e01 the claim handed out 4..6 and its cursor passed 1..3
  // for good; e4932f1's ring-position guard makes it look again.)
  const auto head = enqueue("cc", 3);  // lane_seq 1..3, slot 0
  ASSERT_TRUE(rotate("queue").done);
  const auto tail = enqueue("cc", 3, std::nullopt, 3);  // lane_seq 4..6, slot 1

  auto holder = public_conn();
  TableGate gate(pg::native(holder), conn(), qualified("queue_claim_heads"));
  ASSERT_TRUE(gate.armed());
  auto claimer = session();
  const int pid = claimer.backend_pid();
  BackgroundCall<std::vector<ClaimedEntry>> call(pid, [&] { return claim(claimer, "cc", 10); });
  ASSERT_TRUE(eventually([&] { return waits_for_lock(conn(), pid, "relation"); }));

  const Admin a = admin();
  ASSERT_TRUE(a.rotate(holder, "queue").done);
  const auto carried = a.prune(holder, "queue", true);
  ASSERT_TRUE(carried.done) << carried.reason;
  ASSERT_EQ(carried.rows_carried, 3);
  ASSERT_TRUE(gate.release());
  ASSERT_TRUE(call.finishes_within(seconds(10)));
  const auto first = call.get();

  ASSERT_FALSE(first.empty());
  EXPECT_EQ(first.front().lane_seq, 1)
      << "the claim handed out lane_seq " << first.front().lane_seq
      << " while lane_seq 1..3 (carried into slot " << ready_slot_of(head[0])
      << ") were unclaimed; claim cursor now "
      << count("SELECT claim_seq FROM queue_claim_heads WHERE queue_id = queue_id_of('cc')");
  std::set<JobId> claimed;
  for (const auto& e : first) claimed.insert(e.job_id);
  finish(first);
  for (const auto& e : drain("cc")) claimed.insert(e.job_id);
  for (const auto id : head) {
    EXPECT_EQ(claimed.count(id), 1U) << "job " << id << " (carried) is never claimed";
  }
  for (const auto id : tail) EXPECT_EQ(claimed.count(id), 1U);
}

TEST_F(RingsTest, FailureClosedWhileACarryPruneMovesItsReadyRowIsNotReportedStale) {
  // Guards "a stale report is true" (I7): a closer whose attempt is open must close it,
  // also when a carry-prune moves the attempt's ready row to a new slot between the
  // closer's batch lock and its reading statement. Pinned with a TableGate on the
  // claim_batches parent: the closer parks at its reading statement, the holder rotates
  // and carries, then the closer goes on. (At f3c8e01 close_attempts listed the live
  // slots before that statement, missed the row, and reported the failure stale; fixed in
  // e4932f1.)
  enqueue_one("cf");
  const auto e = claim("cf");
  ASSERT_EQ(e.size(), 1U);

  auto holder = public_conn();
  TableGate gate(pg::native(holder), conn(), "ONLY " + qualified("claim_batches"));
  ASSERT_TRUE(gate.armed());
  auto closer = session();
  const int pid = closer.backend_pid();
  BackgroundCall<std::vector<CompletionResult>> call(pid, [&] {
    return storage::consumer(*store_).complete(
        closer, std::vector{Completion::of(e[0], Outcome::kFail, "boom")});
  });
  ASSERT_TRUE(eventually([&] { return waits_for_lock(conn(), pid, "relation"); }));

  const Admin a = admin();
  ASSERT_TRUE(a.rotate(holder, "queue").done);
  const auto carried = a.prune(holder, "queue", true);
  ASSERT_TRUE(carried.done) << carried.reason;
  ASSERT_EQ(carried.rows_carried, 1);  // the open attempt's ready row
  ASSERT_TRUE(gate.release());
  ASSERT_TRUE(call.finishes_within(seconds(10)));
  const auto r = call.get();

  ASSERT_EQ(r.size(), 1U);
  EXPECT_EQ(r[0].state, "failed")
      << "the open attempt's failure was reported stale and dropped; open attempts now: "
      << count("SELECT count(*) FROM open_attempts()");
  const auto c = counts("cf");
  EXPECT_EQ(c.failed, 1);
  EXPECT_EQ(c.running, 0);
}

// --- readers racing a prune's commit --------------------------------------------------

class RingsReaderTest : public RingsTest {
 protected:
  // Prunes `ring` in an open transaction of its own, starts `read` on another session,
  // waits until that session queues behind the prune's locks, then commits the prune and
  // returns what `read` got. TRUNCATE is not MVCC-safe: a reader whose snapshot predates
  // the commit but who reaches the slot after it sees the slot empty, and not the rollups
  // or carried rows the prune wrote (lock_rings_shared, sql/functions/0050_queue_counts.sql).
  template <typename T>
  T read_across_prune_commit(const std::string& ring, bool carry,
                             const std::function<T(Connection&)>& read) {
    auto pruner = public_conn();
    pruner.execute("BEGIN");
    const auto pruned = admin().prune(pruner, ring, carry);
    EXPECT_TRUE(pruned.done) << pruned.reason;
    auto reader = public_conn();
    const int pid = pg::native(reader).backend_pid();
    BackgroundCall<T> call(pid, [&] { return read(reader); });
    EXPECT_TRUE(eventually([&] { return waits_for_lock(conn(), pid, "relation"); }))
        << "the reader did not queue behind the prune's locks";
    pruner.execute("COMMIT");
    EXPECT_TRUE(call.finishes_within(seconds(10)));
    return call.get();
  }
};

TEST_F(RingsReaderTest, CountsReadWhileAPruneCommitsKeepThePrunedSlotsJobs) {
  // Guards queue_counts_exact while a claim-ring prune commits: the pruned closures move
  // to terminal_rollups in the prune's transaction, and a count that queued behind its
  // locks must see them there (before lock_rings_shared it read completed 0, not 8).
  enqueue("pc", 8);
  ASSERT_EQ(drain("pc").size(), 8U);
  ASSERT_TRUE(rotate("claim").done);
  const auto before = counts("pc");
  ASSERT_EQ(before.completed, 8);

  const Admin a = admin();
  const auto during = read_across_prune_commit<QueueCounts>(
      "claim", false, [&](Connection& c) { return a.queue_counts(c, "pc"); });
  EXPECT_EQ(describe(during), describe(before));
  EXPECT_EQ(describe(counts("pc")), describe(before));
}

TEST_F(RingsReaderTest, QueueListReadWhileACarryPruneCommitsKeepsTheCarriedJobs) {
  // Guards queue_overview (awa queue list, the dashboard) while a carry-prune of the
  // queue ring commits: the available rows are copied into the current slot and the old
  // slot truncated in one transaction; a listing that queued behind its locks must count
  // the copies (before lock_rings_shared it read available 0, not 5).
  enqueue("po", 5);
  ASSERT_TRUE(rotate("queue").done);
  const auto before = admin().queue_summary(admin_conn(), "po").counts;
  ASSERT_EQ(before.available, 5);

  const Admin a = admin();
  const auto during = read_across_prune_commit<QueueSummary>(
      "queue", true, [&](Connection& c) { return a.queue_summary(c, "po"); });
  EXPECT_EQ(describe(during.counts), describe(before));
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE ready_slot = 0"), 0);
}

TEST_F(RingsReaderTest, ShardLagReadWhileACarryPruneCommitsCountsTheCarriedRows) {
  // Guards queue_shard_lag (awa queue shards) the same way: a lane's available rows that a
  // carry-prune moves while the read queues behind it are still counted (as a STABLE SQL
  // function it read available 0 of 4). Its reading statement names the ready tables
  // itself, so here the new statement alone waits for the prune; the lock keeps that true
  // if the body ever reads through a function.
  enqueue("pl", 4);
  ASSERT_TRUE(rotate("queue").done);
  const Admin a = admin();
  const auto lanes = read_across_prune_commit<std::vector<ShardLag>>(
      "queue", true, [&](Connection& c) { return a.queue_shards(c, "pl"); });
  ASSERT_EQ(lanes.size(), 1U);
  EXPECT_EQ(lanes[0].available, 4);
}

TEST_F(RingsReaderTest, JobListReadWhileACarryPruneCommitsListsTheCarriedJobs) {
  // Guards job_list (awa job list) the same way: a listing that queued behind a
  // carry-prune's locks must list the carried jobs, available, not lose them for that read
  // (before the lock it listed none of 3).
  enqueue("pj", 3);
  ASSERT_TRUE(rotate("queue").done);
  const Admin a = admin();
  JobFilter f;
  f.queue = "pj";
  const auto listed = read_across_prune_commit<std::vector<JobSummary>>(
      "queue", true, [&](Connection& c) { return a.list_jobs(c, f); });
  ASSERT_EQ(listed.size(), 3U) << "the listing lost the carried jobs";
  for (const auto& j : listed) EXPECT_EQ(j.state, "available") << j.id;
}

TEST_F(RingsReaderTest, JobShownWhileAClaimCarryPruneCommitsIsStillRunning) {
  // Guards job_view (awa job show) while a carry-prune of the claim ring moves a running
  // job's open batch: a lookup that queued behind the prune's locks must still find the
  // open attempt. (Before the lock it found no batch and showed the job completed.)
  const auto id = enqueue_one("pr");
  ASSERT_EQ(claim("pr").size(), 1U);
  ASSERT_TRUE(rotate("claim").done);
  const Admin a = admin();
  const auto shown = read_across_prune_commit<std::optional<JobDetail>>(
      "claim", true, [&](Connection& c) { return a.job(c, id); });
  ASSERT_TRUE(shown.has_value());
  EXPECT_EQ(shown->summary.state, "running");
}

}  // namespace
}  // namespace awa::testing
