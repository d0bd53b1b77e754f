// Rings: ordering across rotations and carries, exactly-once closing, exact counts
// across prune, rotation (docs/design/rings.md).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "awa/client.hpp"
#include "cli_runner.hpp"
#include "rings_support.hpp"
#include "storage/store_access.hpp"

namespace awa::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// --- ordering across rotations and carries -----------------------------------------------

TEST_F(RingsTest, KeyedJobsAcrossRotationsAndCarriesAreClaimedInPerKeyFifoOrder) {
  // Guards per-key FIFO (docs/design/engine.md) over the claim's merge of a lane across
  // live slots: rows of one lane spread over several slots, and carried rows sitting in a
  // newer slot than later rows of their lane, are still claimed in lane_seq = enqueue
  // order.
  set_shards("fifo", 4);
  std::vector<std::string> keys;
  for (int k = 0; k < 8; ++k) keys.push_back("customer-" + std::to_string(k));
  std::map<std::string, int> next;
  std::vector<ClaimedEntry> claimed;
  std::int64_t carried = 0;
  int carries = 0;
  for (int round = 0; round < 6; ++round) {
    std::vector<NewJob> jobs;
    for (int n = 0; n < 3; ++n) {
      for (const auto& k : keys) jobs.push_back(job("fifo", {{"key", k}, {"i", next[k]++}}, k));
    }
    storage::insert_many(*store_, conn(), jobs);
    if (round % 2 == 1) {
      auto got = claim("fifo", 2);
      finish(got);
      claimed.insert(claimed.end(), got.begin(), got.end());
    }
    ASSERT_TRUE(rotate("queue").done);
    rotate("claim");
    if (round >= 1) {
      const auto p = prune("queue", true);
      ASSERT_TRUE(p.done) << p.reason;
      carried += p.rows_carried;
      carries += p.rows_carried > 0 ? 1 : 0;
      prune("claim", true);
    }
  }
  EXPECT_GE(carries, 3);
  EXPECT_GT(carried, 0);
  // The lanes now sit in several slots, carried rows ahead of later ones in slot order.
  EXPECT_GE(count("SELECT count(DISTINCT ready_slot) FROM ready_entries r JOIN "
                  "queue_claim_heads c USING (queue_id, priority, enqueue_shard) "
                  "WHERE r.lane_seq >= c.claim_seq"),
            2);
  const auto rest = drain("fifo", 3);
  claimed.insert(claimed.end(), rest.begin(), rest.end());

  ASSERT_EQ(claimed.size(), keys.size() * 3 * 6);
  std::map<std::string, std::vector<int>> order;
  std::set<JobId> ids;
  for (const auto& e : claimed) {
    const auto args = nlohmann::json::parse(e.args_json);
    order[args.at("key").get<std::string>()].push_back(args.at("i").get<int>());
    ids.insert(e.job_id);
  }
  EXPECT_EQ(ids.size(), claimed.size()) << "a job was claimed twice";
  for (const auto& k : keys) {
    std::vector<int> expected(18);
    for (int i = 0; i < 18; ++i) expected[static_cast<std::size_t>(i)] = i;
    EXPECT_EQ(order[k], expected) << "key " << k << " out of FIFO order";
  }
}

TEST_F(RingsTest, PausedBacklogIsMovedOnceAndDrainsExactlyOnceInLaneOrderAfter50Rotations) {
  // Guards "a backlog never pins the ring": a paused queue holding 10,000 jobs while
  // another queue works through 50 rotations (three laps) of every ring under the
  // leader's policy (prune what is done, rotate, carry when full). The other queue's
  // slots are reclaimed, the backlog is moved to the keep slot exactly once (not once per
  // lap), never lost or duplicated, and after resume it drains exactly once in lane order.
  set_shards("paused", 4);
  conn().exec(
      "INSERT INTO queue_meta (queue, paused) VALUES ('paused', true) "
      "ON CONFLICT (queue) DO UPDATE SET paused = true");
  std::vector<JobId> backlog;
  for (int b = 0; b < 10; ++b) {
    const auto ids = enqueue("paused", 1000, std::nullopt, b * 1000);
    backlog.insert(backlog.end(), ids.begin(), ids.end());
  }
  ASSERT_EQ(backlog.size(), 10000U);

  std::map<std::string, Tick> total;
  for (int round = 0; round < 50; ++round) {
    enqueue("busy", 5);
    const auto got = claim("busy");
    ASSERT_EQ(got.size(), 5U) << "round " << round;
    ASSERT_EQ(storage::consumer(*store_)
                  .heartbeat(conn(), std::vector{QueueStorage::Heartbeat::of(got[0])})
                  .size(),
              1U);
    for (const char* ring : kRings) {
      const auto t = maintain(ring);
      total[ring].prunes += t.prunes;
      total[ring].rotations += t.rotations;
      total[ring].carried += t.carried;
      ASSERT_EQ(t.rotations, 1) << ring << " ring did not advance in round " << round;
    }
    for (const auto& r : finish(got)) ASSERT_EQ(r.state, "completed");
    ASSERT_EQ(count("SELECT count(*) FROM ready_entries WHERE queue_id = queue_id_of('paused')"),
              10000)
        << "round " << round;
    ASSERT_LE(count("SELECT count(*) FROM ready_entries WHERE queue_id = queue_id_of('busy')"),
              16 * 5)
        << "round " << round;
    ASSERT_LE(count("SELECT count(*) FROM claim_batches"), 2) << "round " << round;
  }
  ASSERT_EQ(counts("paused").available, 10000);
  for (const char* ring : kRings) {
    const auto st = ring_status(ring);
    EXPECT_EQ(st.generation, 50) << ring;
    EXPECT_GE(total[ring].prunes, 40) << ring;
    int sealed = 0;
    for (const auto& s : st.slots) sealed += s.state == "sealed" ? 1 : 0;
    EXPECT_LE(sealed, ring == std::string("queue") ? 15 : 1) << ring;
  }
  EXPECT_EQ(total["queue"].carried, 10000) << "the backlog was not moved exactly once";
  EXPECT_EQ(total["claim"].carried, 0);
  EXPECT_EQ(count("SELECT count(*) FROM leases"), 0);
  EXPECT_EQ(counts("busy").completed, 250);

  conn().exec("UPDATE queue_meta SET paused = false WHERE queue = 'paused'");
  const auto drained = drain("paused");
  ASSERT_EQ(drained.size(), 10000U);
  std::set<JobId> seen;
  std::map<int, std::int64_t> last_seq;
  std::map<int, int> last_i;
  for (const auto& e : drained) {
    EXPECT_TRUE(seen.insert(e.job_id).second) << "job " << e.job_id << " claimed twice";
    const int i = nlohmann::json::parse(e.args_json).at("i").get<int>();
    auto [it, fresh] = last_seq.try_emplace(e.enqueue_shard, e.lane_seq);
    if (!fresh) {
      EXPECT_GT(e.lane_seq, it->second) << "shard " << e.enqueue_shard << " out of lane order";
      EXPECT_GT(i, last_i[e.enqueue_shard]) << "shard " << e.enqueue_shard;
      it->second = e.lane_seq;
    }
    last_i[e.enqueue_shard] = i;
  }
  EXPECT_EQ(seen, std::set<JobId>(backlog.begin(), backlog.end()));
  EXPECT_EQ(counts("paused").completed, 10000);
}

// --- exactly-once closing ------------------------------------------------------------------
// (Completion racing cancel in both orders: attempts_pgtest.cpp.)

TEST_F(RingsTest, CompletionRacingAnUncommittedRescueWaitsAndIsStale) {
  // Guards the per-attempt lock between completion and rescue, rescue first: the
  // completion waits for the rescue's batch lock, then finds the attempt closed and
  // changes nothing.
  const auto id = enqueue_one("rr");
  const auto e = claim("rr");
  ASSERT_EQ(e.size(), 1U);
  auto rescuer = session();
  rescuer.exec("BEGIN");
  const auto rescued = storage::consumer(*store_).rescue(rescuer, milliseconds(0));
  ASSERT_EQ(rescued.size(), 1U);
  ASSERT_EQ(rescued[0].job_id, id);

  auto completer = session();
  const int pid = completer.backend_pid();
  BackgroundCall<std::vector<CompletionResult>> call(pid, [&] {
    return storage::consumer(*store_).complete(
        completer, std::vector{Completion::of(e[0], Outcome::kCompleted)});
  });
  ASSERT_TRUE(eventually([&] { return waits_for_advisory_lock(conn(), pid); }))
      << "completion did not wait for the open rescue";
  rescuer.exec("COMMIT");
  ASSERT_TRUE(call.finishes_within(seconds(10)));
  const auto r = call.get();
  ASSERT_EQ(r.size(), 1U);
  EXPECT_TRUE(r[0].stale());
  EXPECT_EQ(count("SELECT count(*) FROM attempt_outcomes"), 1);
  EXPECT_EQ(count("SELECT count(*) FROM attempt_outcomes WHERE state = 'rescued'"), 1);
  EXPECT_EQ(count("SELECT count(*) FROM deferred_jobs WHERE reason = 'rescue'"), 1);
  EXPECT_EQ(count("SELECT sum(n_closed) FROM claim_closures"), 1);
}

TEST_F(RingsTest, RescueRacingAnUncommittedCompletionWaitsAndFindsNothing) {
  // The same race, completion first: the rescue picked the attempt as a candidate, waits
  // for the completion's batch lock, re-judges it with a fresh snapshot and leaves it.
  enqueue_one("rr");
  const auto e = claim("rr");
  ASSERT_EQ(e.size(), 1U);
  auto completer = session();
  completer.exec("BEGIN");
  ASSERT_EQ(storage::consumer(*store_)
                .complete(completer, std::vector{Completion::of(e[0], Outcome::kCompleted)})[0]
                .state,
            "completed");

  auto rescuer = session();
  const int pid = rescuer.backend_pid();
  BackgroundCall<std::vector<QueueStorage::Rescued>> call(
      pid, [&] { return storage::consumer(*store_).rescue(rescuer, milliseconds(0)); });
  ASSERT_TRUE(eventually([&] { return waits_for_advisory_lock(conn(), pid); }))
      << "rescue did not wait for the open completion";
  completer.exec("COMMIT");
  ASSERT_TRUE(call.finishes_within(seconds(10)));
  EXPECT_TRUE(call.get().empty()) << "rescue closed a completed attempt";
  EXPECT_EQ(count("SELECT count(*) FROM attempt_outcomes"), 1);
  EXPECT_EQ(count("SELECT count(*) FROM attempt_outcomes WHERE state = 'completed'"), 1);
  EXPECT_EQ(count("SELECT count(*) FROM deferred_jobs"), 0);
  EXPECT_EQ(count("SELECT sum(n_closed) FROM claim_closures"), 1);
}

TEST_F(RingsTest, RepeatedAttemptInOneFlushIsClosedOnce) {
  // Guards the de-duplication of a flush: one attempt named twice in one complete() call
  // (a retry and then a completion) is closed once, by the first occurrence; the repeat
  // is stale. One closure entry, one done row, one deferred row, no key violation. The
  // all-success fast path de-duplicates too.
  const auto ids = enqueue("dup", 3);
  const auto e = claim("dup");
  ASSERT_EQ(e.size(), 3U);
  const auto r = storage::consumer(*store_).complete(
      conn(), std::vector{Completion::of(e[0], Outcome::kRetry, "first", milliseconds(3600000)),
                          Completion::of(e[0], Outcome::kCompleted),
                          Completion::of(e[1], Outcome::kCompleted),
                          Completion::of(e[0], Outcome::kRetry, "third")});
  ASSERT_EQ(r.size(), 4U);
  EXPECT_EQ(r[0].state, "retried");
  EXPECT_TRUE(r[1].stale());
  EXPECT_EQ(r[2].state, "completed");
  EXPECT_TRUE(r[3].stale());
  EXPECT_EQ(count("SELECT count(*) FROM deferred_jobs"), 1);
  EXPECT_EQ(count("SELECT count(*) FROM deferred_jobs WHERE job_id = " + std::to_string(ids[0]) +
                  " AND errors::text LIKE '%first%' AND errors::text NOT LIKE '%third%'"),
            1);
  EXPECT_EQ(count("SELECT count(*) FROM done_entries"), 1);

  const auto fast = storage::consumer(*store_).complete(
      conn(), std::vector{Completion::of(e[2], Outcome::kCompleted),
                          Completion::of(e[2], Outcome::kCompleted)});
  EXPECT_EQ(fast[0].state, "completed");
  EXPECT_TRUE(fast[1].stale());
  // Every attempt of the batch has exactly one closure entry.
  EXPECT_EQ(count("SELECT count(*) FROM (SELECT s FROM claim_closures, unnest(lane_seqs) rg, "
                  "generate_series(lower(rg), upper(rg) - 1) s GROUP BY s HAVING count(*) > 1) d"),
            0);
  EXPECT_EQ(count("SELECT sum(n_closed) FROM claim_closures"), 3);
  const auto c = counts("dup");
  EXPECT_EQ(c.completed, 2);
  EXPECT_EQ(c.retryable, 1);
  EXPECT_EQ(c.running, 0);
}

TEST_F(RingsTest, ResentFlushAfterCommitIsAllStale) {
  // Guards a batcher that re-sends a flush whose commit happened but whose answer was
  // lost: every entry is stale the second time and nothing changes.
  conn().exec("INSERT INTO queue_meta (queue, dlq_enabled) VALUES ('rs', true)");
  enqueue("rs", 6);
  const auto e = claim("rs");
  ASSERT_EQ(e.size(), 6U);
  const std::vector<Completion> flush{
      Completion::of(e[0], Outcome::kCompleted),
      Completion::of(e[1], Outcome::kRetry, "again", milliseconds(3600000)),
      Completion::of(e[2], Outcome::kFail, "dead"),
      Completion::of(e[3], Outcome::kSnooze, "", milliseconds(3600000)),
      Completion::of(e[4], Outcome::kCancel, "stop"),
      Completion::of(e[5], Outcome::kCompleted)};
  const auto first = storage::consumer(*store_).complete(conn(), flush);
  const std::vector<std::optional<std::string>> expected{"completed", "retried",   "dlq",
                                                         "snoozed",   "cancelled", "completed"};
  for (std::size_t i = 0; i < flush.size(); ++i) EXPECT_EQ(first[i].state, expected[i]) << i;

  const auto snapshot = [&] {
    return conn()
        .exec(
            "SELECT (SELECT count(*) FROM claim_closures) || '/' || "
            "(SELECT count(*) FROM done_entries) || '/' || (SELECT count(*) FROM deferred_jobs) "
            "|| '/' || (SELECT count(*) FROM dlq_entries) || '/' || "
            "(SELECT string_agg(xmin::text, ',' ORDER BY job_id) FROM deferred_jobs)")
        .get<std::string>(0, 0);
  };
  const auto before = snapshot();
  const auto counts_before = describe(counts("rs"));
  const auto again = storage::consumer(*store_).complete(conn(), flush);
  ASSERT_EQ(again.size(), flush.size());
  for (std::size_t i = 0; i < again.size(); ++i) EXPECT_TRUE(again[i].stale()) << i;
  EXPECT_EQ(snapshot(), before);
  EXPECT_EQ(describe(counts("rs")), counts_before);
}

// --- exact counts across prune ---------------------------------------------------------------

class RingsCountsTest : public RingsTest, public ::testing::WithParamInterface<int> {};

TEST_P(RingsCountsTest, QueueCountsStayExactThroughRotateAndPrune) {
  // Guards queue_counts_exact with jobs in every state, at S = 1 and S = 8, against counts
  // derived from the inputs: before prune, after rotate + prune with carry of every ring
  // (all-time terminal totals survive through terminal_rollups), with failed jobs kept
  // inspectable inside their retention window (carried with their ready rows), and after a
  // prune with zero retention folds them into the rollups.
  const int shards = GetParam();
  set_shards("cnt", shards);
  set_shards("dq", shards);
  conn().exec("UPDATE queue_meta SET dlq_enabled = true WHERE queue = 'dq'");
  const auto key = [](int i) { return "k-" + std::to_string(i); };

  // 21 jobs to run; the last one has a single attempt.
  std::vector<NewJob> jobs;
  for (int i = 0; i < 20; ++i) jobs.push_back(job("cnt", {{"i", i}}, key(i)));
  jobs.push_back(job("cnt", {{"i", 20}}, key(20), 1));
  const auto ids = storage::insert_many(*store_, conn(), jobs);
  const JobId single = ids.back();
  std::vector<ClaimedEntry> run;
  while (run.size() < 21) {
    const auto got = claim("cnt", 4);
    ASSERT_FALSE(got.empty());
    run.insert(run.end(), got.begin(), got.end());
  }
  std::stable_partition(run.begin(), run.end(),
                        [&](const ClaimedEntry& e) { return e.job_id != single; });
  const ClaimedEntry last_try = run.back();
  run.pop_back();
  // run[0..19]: 8 completed, 3 retried (long backoff), 2 failed, 1 snoozed, 1 cancelled by
  // its handler, 1 cancelled while running, 4 left running (one heartbeated).
  std::vector<Completion> flush;
  for (std::size_t i = 0; i < 8; ++i) flush.push_back(Completion::of(run[i], Outcome::kCompleted));
  for (std::size_t i = 8; i < 11; ++i) {
    flush.push_back(Completion::of(run[i], Outcome::kRetry, "later", milliseconds(3600000)));
  }
  for (std::size_t i = 11; i < 13; ++i)
    flush.push_back(Completion::of(run[i], Outcome::kFail, "no"));
  flush.push_back(Completion::of(run[13], Outcome::kSnooze, "", milliseconds(3600000)));
  flush.push_back(Completion::of(run[14], Outcome::kCancel, "stop"));
  flush.push_back(Completion::of(last_try, Outcome::kRetry, "out of attempts"));
  for (const auto& r : storage::consumer(*store_).complete(conn(), flush)) ASSERT_FALSE(r.stale());
  ASSERT_EQ(admin().cancel_job(admin_conn(), run[15].job_id), "running");
  ASSERT_EQ(storage::consumer(*store_)
                .heartbeat(conn(), std::vector{QueueStorage::Heartbeat::of(run[16])})
                .size(),
            1U);

  // The DLQ queue: two terminal failures and one retry out of attempts.
  storage::insert_many(
      *store_, conn(),
      std::vector{job("dq", {}, key(1)), job("dq", {}, key(2)), job("dq", {}, key(3), 1)});
  std::vector<ClaimedEntry> dq;
  while (dq.size() < 3) {
    const auto got = claim("dq");
    ASSERT_FALSE(got.empty());
    dq.insert(dq.end(), got.begin(), got.end());
  }
  for (const auto& e : dq) {
    const auto r = storage::consumer(*store_).complete(
        conn(), std::vector{Completion::of(
                    e, e.max_attempts == 1 ? Outcome::kRetry : Outcome::kFail, "to the dlq")});
    ASSERT_EQ(r[0].state, "dlq");
  }

  // Not run: 6 available (2 then cancelled), 3 scheduled (1 then cancelled).
  std::vector<NewJob> waiting;
  for (int i = 0; i < 6; ++i) waiting.push_back(job("cnt", {}, key(100 + i)));
  const auto avail = storage::insert_many(*store_, conn(), waiting);
  std::vector<NewJob> later;
  for (int i = 0; i < 3; ++i) {
    auto j = job("cnt", {}, key(200 + i));
    j.opts.run_at = std::chrono::system_clock::now() + std::chrono::hours(1);
    later.push_back(j);
  }
  const auto sched = storage::insert_many(*store_, conn(), later);
  ASSERT_EQ(admin().cancel_job(admin_conn(), avail[0]), "available");
  ASSERT_EQ(admin().cancel_job(admin_conn(), avail[1]), "available");
  ASSERT_EQ(admin().cancel_job(admin_conn(), sched[0]), "scheduled");

  QueueCounts want;
  want.available = 4;
  want.running = 4;
  want.scheduled = 2 + 1;  // scheduled + snoozed
  want.retryable = 3;
  want.completed = 8;
  want.failed = 2 + 1;  // terminal failures + the retry out of attempts
  want.cancelled = 1 + 1 + 2 + 1;
  want.dlq = 0;
  QueueCounts want_dq;
  want_dq.dlq = 3;
  ASSERT_EQ(describe(counts("cnt")), describe(want));
  ASSERT_EQ(describe(counts("dq")), describe(want_dq));
  const auto failed_ids = conn().exec(
      "SELECT string_agg(job_id::text, ',' ORDER BY job_id) FROM done_entries "
      "WHERE queue_id = queue_id_of('cnt') AND state = 'failed' AND ready_slot = 0");
  const std::string failed_in_slot0 = std::string(failed_ids.text(0, 0));
  ASSERT_FALSE(failed_in_slot0.empty());

  // Rotate and prune every ring with carry until generation 0 and 1 of each are gone.
  for (int round = 0; round < 3; ++round) {
    for (const char* ring : kRings) rotate(ring);
    for (const char* ring : kRings) {
      for (int i = 0; i < 16; ++i) {
        if (!prune(ring, true).done) break;
      }
    }
    EXPECT_EQ(describe(counts("cnt")), describe(want)) << "after round " << round;
    EXPECT_EQ(describe(counts("dq")), describe(want_dq)) << "after round " << round;
  }
  // The claim and lease rings carry into their current slot, so they rotate and prune
  // every round; the queue ring's first prune moved everything that lives on into its keep
  // slot, after which its current slot stays empty and it has nothing to rotate.
  for (const char* ring : {"claim", "lease"}) {
    EXPECT_GE(count(std::string("SELECT coalesce(max(generation), -1) FROM ring_prunes WHERE "
                                "ring = '") +
                    ring + "'"),
              1)
        << ring << " ring was not pruned twice";
  }
  EXPECT_EQ(count("SELECT coalesce(max(generation), -1) FROM ring_prunes WHERE ring = 'queue'"), 0)
      << "the queue ring was not pruned once";
  // Failed jobs inside the retention window: still inspectable, moved with their ready
  // rows to the keep slot, out of the slot they started in.
  EXPECT_EQ(count("SELECT count(*) FROM done_entries WHERE queue_id = queue_id_of('cnt') AND state "
                  "= 'failed' "
                  "AND ready_slot = -1"),
            3);
  EXPECT_EQ(conn()
                .exec("SELECT string_agg(job_id::text, ',' ORDER BY job_id) FROM attempt_outcomes "
                      "WHERE queue = 'cnt' AND state = 'failed'")
                .text(0, 0),
            failed_in_slot0);
  EXPECT_EQ(count("SELECT count(*) FROM done_entries d JOIN ready_entries r USING "
                  "(ready_slot, queue_id, priority, enqueue_shard, lane_seq) "
                  "WHERE d.state = 'failed' AND d.job_id = r.job_id"),
            3);
  EXPECT_EQ(count("SELECT count(*) FROM terminal_rollups WHERE state = 'failed'"), 0);

  // Zero retention: the keep slot's sweep folds the failed rows into the rollups.
  EXPECT_GT(admin().sweep_kept(admin_conn(), seconds(0)), 0);
  EXPECT_EQ(count("SELECT count(*) FROM done_entries WHERE state = 'failed'"), 0);
  EXPECT_EQ(count("SELECT coalesce(sum(jobs), 0) FROM terminal_rollups WHERE queue_id = "
                  "queue_id_of('cnt') AND "
                  "state = 'failed'"),
            3);
  EXPECT_EQ(describe(counts("cnt")), describe(want));
  EXPECT_EQ(describe(counts("dq")), describe(want_dq));

  // The live work is intact: the four running attempts complete, the available rows run.
  std::vector<Completion> rest;
  for (std::size_t i = 16; i < 20; ++i) rest.push_back(Completion::of(run[i], Outcome::kCompleted));
  for (const auto& r : storage::consumer(*store_).complete(conn(), rest))
    EXPECT_EQ(r.state, "completed");
  EXPECT_EQ(drain("cnt").size(), 4U);
  want.running = 0;
  want.available = 0;
  want.completed += 8;
  EXPECT_EQ(describe(counts("cnt")), describe(want));
}

INSTANTIATE_TEST_SUITE_P(Rings, RingsCountsTest, ::testing::Values(1, 8),
                         [](const ::testing::TestParamInfo<int>& param_info) {
                           return "S" + std::to_string(param_info.param);
                         });

// --- rotation ---------------------------------------------------------------------------------

TEST_F(RingsTest, ConcurrentRotatorsOfOneGenerationNeverBothWin) {
  // Guards rotation as a compare-and-swap: a rotator pinned after its rotate_ring call,
  // before commit, makes a concurrent rotator of the same generation give up ("busy");
  // once it commits the generation has advanced by exactly one.
  enqueue_one("rot");
  auto first = public_conn();
  first.execute("BEGIN");
  const auto won = admin().rotate(first, "queue");
  ASSERT_TRUE(won.done) << won.reason;
  EXPECT_EQ(won.generation, 1);
  EXPECT_EQ(won.slot, 1);

  const auto lost = rotate("queue");
  EXPECT_FALSE(lost.done);
  EXPECT_THAT(lost.reason, StartsWith("busy"));
  EXPECT_EQ(lost.generation, 0);
  first.execute("COMMIT");

  const auto st = ring_status("queue");
  EXPECT_EQ(st.generation, 1);
  EXPECT_EQ(st.current_slot, 1);
  EXPECT_EQ(count("SELECT count(*) FROM ring_rotations WHERE ring = 'queue'"), 2);
  // The new current slot is empty: the next rotation is an idle skip.
  const auto idle = rotate("queue");
  EXPECT_FALSE(idle.done);
  EXPECT_THAT(idle.reason, StartsWith("idle"));
  EXPECT_EQ(idle.generation, 1);
}

TEST_F(RingsTest, IdleRingRotationIsSkippedAndWritesNothing) {
  // Guards "an idle ring writes nothing": rotating a ring whose current slot is empty is
  // skipped, appends nothing to the rotation ledger, and repeating it does not even
  // rewrite the skip-status row.
  for (const char* ring : kRings) {
    const auto r = rotate(ring);
    EXPECT_FALSE(r.done) << ring;
    EXPECT_THAT(r.reason, StartsWith("idle")) << ring;
    EXPECT_EQ(r.generation, 0) << ring;
  }
  const auto ledger = [&] {
    return conn()
        .exec(
            "SELECT (SELECT count(*) FROM ring_rotations) || '/' || "
            "(SELECT string_agg(ring || ':' || xmin::text, ',' ORDER BY ring) FROM ring_skips "
            "WHERE action = 'rotate')")
        .get<std::string>(0, 0);
  };
  const auto before = ledger();
  for (int i = 0; i < 3; ++i) {
    for (const char* ring : kRings) EXPECT_FALSE(rotate(ring).done);
  }
  EXPECT_EQ(ledger(), before);
  EXPECT_EQ(count("SELECT count(*) FROM ring_rotations"), 3);  // generation 0 of each ring
}

TEST_F(RingsTest, RotationIntoAnUnprunedSlotIsRefusedUntilItIsPruned) {
  // Guards the rotation gate: the ring advances into a slot only after the generation
  // that used it last was pruned (8 claim slots: the 8th rotation waits for generation 0).
  std::vector<ClaimedEntry> open;
  for (int g = 0; g < 8; ++g) {
    enqueue_one("gate");
    const auto e = claim("gate");
    ASSERT_EQ(e.size(), 1U);
    open.push_back(e[0]);
    const auto r = rotate("claim");
    if (g < 7) {
      ASSERT_TRUE(r.done) << g << ": " << r.reason;
      ASSERT_EQ(r.generation, g + 1);
    } else {
      EXPECT_FALSE(r.done);
      EXPECT_THAT(r.reason, HasSubstr("must be pruned first"));
      EXPECT_EQ(r.generation, 7);
    }
  }
  const auto refused = prune("claim");
  EXPECT_FALSE(refused.done);
  EXPECT_THAT(refused.reason, HasSubstr("open receipts"));
  ASSERT_EQ(storage::consumer(*store_)
                .complete(conn(), std::vector{Completion::of(open[0], Outcome::kCompleted)})[0]
                .state,
            "completed");
  const auto pruned = prune("claim");
  ASSERT_TRUE(pruned.done) << pruned.reason;
  EXPECT_EQ(pruned.generation, 0);
  const auto r = rotate("claim");
  ASSERT_TRUE(r.done) << r.reason;
  EXPECT_EQ(r.generation, 8);
  EXPECT_EQ(r.slot, 0);
  // The open attempts of the sealed slots are still there to finish.
  open.erase(open.begin());
  std::vector<Completion> rest;
  for (const auto& e : open) rest.push_back(Completion::of(e, Outcome::kCompleted));
  for (const auto& c : storage::consumer(*store_).complete(conn(), rest))
    EXPECT_EQ(c.state, "completed");
  EXPECT_EQ(counts("gate").completed, 8);
}

}  // namespace
}  // namespace awa::testing
