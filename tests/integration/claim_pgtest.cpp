// Claim, receipts, completion and terminal storage across shards.
#include <atomic>
#include <barrier>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "awa/error.hpp"
#include "producer_support.hpp"
#include "storage/store_access.hpp"
#include "storage_support.hpp"

namespace awa::testing {
namespace {

using std::chrono::milliseconds;

class ClaimTest : public StorageTest {
 protected:
  std::vector<JobId> enqueue(const std::string& queue, int n, int priority = 2,
                             std::optional<std::string> key = std::nullopt) {
    std::vector<NewJob> jobs;
    for (int i = 0; i < n; ++i) {
      InsertOpts o;
      o.queue = queue;
      o.priority = priority;
      o.ordering_key = key;
      jobs.emplace_back("work", nlohmann::json{{"i", i}}, o);
    }
    return storage::insert_many(*store_, conn(), jobs);
  }

  // Claims and completes until the queue yields nothing; returns the jobs completed.
  std::int64_t drain(pg::Connection& c, const std::string& queue, int batch = 64) {
    std::int64_t done = 0;
    for (int round = 0; round < 100000; ++round) {
      QueueStorage::ClaimOptions o;
      o.max_batch = batch;
      const auto claimed = storage::consumer(*store_).claim(c, queue, o);
      if (claimed.empty()) break;
      std::vector<Completion> cs;
      for (const auto& e : claimed) cs.push_back(Completion::of(e, Outcome::kCompleted));
      for (const auto& r : storage::consumer(*store_).complete(c, cs)) {
        EXPECT_EQ(r.state, "completed");
        ++done;
      }
    }
    return done;
  }

  std::int64_t done_count(const std::string& where = "true") {
    return count("SELECT count(*) FROM attempt_outcomes WHERE " + where);
  }
};

TEST_F(ClaimTest, MultiShardRoundTripThroughCompletion) {
  // AWA's ADR-025 test_queue_storage_multi_shard_round_trip_through_completion: the shard is
  // load-bearing in the terminal key, and completion carries it from the claim.
  set_shards("rt", 4);
  std::vector<std::thread> producers;
  for (int p = 0; p < 4; ++p) {
    producers.emplace_back([&] {
      auto c = connect_new();
      for (int b = 0; b < 4; ++b) {
        std::vector<NewJob> jobs(25, NewJob("work", nlohmann::json::object(), on_queue("rt")));
        storage::insert_many(*store_, c, jobs);
      }
    });
  }
  for (auto& t : producers) t.join();
  ASSERT_EQ(count("SELECT count(DISTINCT enqueue_shard) FROM ready_entries"), 4);

  std::atomic<std::int64_t> completed{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&] {
      auto c = connect_new();
      completed += drain(c, "rt", 16);
    });
  }
  for (auto& t : workers) t.join();
  // A worker that found every lane locked may stop early; finish what is left.
  completed += drain(conn(), "rt");

  EXPECT_EQ(completed.load(), 400);
  EXPECT_EQ(done_count("state = 'completed'"), 400);
  EXPECT_EQ(count("SELECT count(DISTINCT enqueue_shard) FROM attempt_outcomes"), 4);
  // Every done row sits on its ready row's own key.
  EXPECT_EQ(
      count("SELECT count(*) FROM attempt_outcomes d JOIN ready_entries r USING "
            "(ready_slot, queue_id, priority, enqueue_shard, lane_seq) WHERE d.job_id = r.job_id"),
      400);
  // At least one (ready_slot, queue, priority, lane_seq) exists on two shards.
  EXPECT_GE(
      count("SELECT count(*) FROM (SELECT 1 FROM attempt_outcomes GROUP BY ready_slot, queue_id, "
            "priority, lane_seq HAVING count(DISTINCT enqueue_shard) > 1) t"),
      1);
}

TEST_F(ClaimTest, MultiShardClaimPathDoesNotStarveShards) {
  // AWA's ADR-025 test_queue_storage_multi_shard_claim_path_does_not_starve_shards.
  set_shards("fair", 4);
  for (int b = 0; b < 8; ++b) enqueue("fair", 50);  // the rotor gives each shard 2 batches
  const auto per_shard =
      conn().exec("SELECT enqueue_shard, count(*) FROM ready_entries GROUP BY 1 ORDER BY 1");
  ASSERT_EQ(per_shard.rows(), 4);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(per_shard.get<std::int64_t>(r, 1), 100);

  EXPECT_EQ(drain(conn(), "fair", 32), 400);
  const auto lag = conn().exec(
      "SELECT enqueue_shard, enqueue_cursor, claim_cursor FROM "
      "queue_shard_lag('fair') ORDER BY 1");
  ASSERT_EQ(lag.rows(), 4);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(lag.get<std::int64_t>(r, 1), lag.get<std::int64_t>(r, 2))
        << "shard " << lag.get<int>(r, 0) << " was starved";
    EXPECT_EQ(lag.get<std::int64_t>(r, 2), 101);
  }
}

class ConcurrentClaimTest : public ClaimTest, public ::testing::WithParamInterface<int> {};

TEST_P(ConcurrentClaimTest, EightClaimersNeverDuplicateSkipOrReorder) {
  // Concurrent claimers on one queue: every job is claimed exactly once, and within a
  // shard each claim batch is a contiguous run of lane_seq (the cursor never skips).
  const int shards = GetParam();
  set_shards("cc", shards);
  for (int b = 0; b < 40; ++b) enqueue("cc", 50);
  const auto total = count("SELECT count(*) FROM ready_entries");
  ASSERT_EQ(total, 2000);

  std::mutex mu;
  std::vector<std::vector<ClaimedEntry>> batches;
  std::barrier start(8);
  std::vector<std::thread> claimers;
  for (int w = 0; w < 8; ++w) {
    claimers.emplace_back([&] {
      auto c = connect_new();
      start.arrive_and_wait();
      int empty_in_a_row = 0;
      for (int round = 0; round < 10000 && empty_in_a_row < 20; ++round) {
        QueueStorage::ClaimOptions o;
        o.max_batch = 7;
        auto got = storage::consumer(*store_).claim(c, "cc", o);
        if (got.empty()) {
          ++empty_in_a_row;
          std::this_thread::yield();
          continue;
        }
        empty_in_a_row = 0;
        std::lock_guard lock(mu);
        batches.push_back(std::move(got));
      }
    });
  }
  for (auto& t : claimers) t.join();
  // Whatever contention left behind, one more claimer takes.
  for (auto got = storage::consumer(*store_).claim(conn(), "cc"); !got.empty();
       got = storage::consumer(*store_).claim(conn(), "cc")) {
    batches.push_back(std::move(got));
  }

  std::set<JobId> seen;
  std::map<int, std::vector<std::int64_t>> lane_seqs;  // shard -> every claimed lane_seq
  for (const auto& b : batches) {
    for (const auto& e : b) {
      EXPECT_TRUE(seen.insert(e.job_id).second) << "job " << e.job_id << " claimed twice";
      EXPECT_EQ(e.run_lease, 1);
      EXPECT_EQ(e.attempt, 1);
      lane_seqs[e.enqueue_shard].push_back(e.lane_seq);
    }
  }
  EXPECT_EQ(static_cast<std::int64_t>(seen.size()), total);
  EXPECT_EQ(static_cast<int>(lane_seqs.size()), shards);
  for (auto& [shard, seqs] : lane_seqs) {
    std::sort(seqs.begin(), seqs.end());
    for (std::size_t i = 0; i < seqs.size(); ++i) {
      EXPECT_EQ(seqs[i], static_cast<std::int64_t>(i) + 1) << "shard " << shard;
    }
  }
  for (const auto& b : batches) {
    for (std::size_t i = 1; i < b.size(); ++i) {
      EXPECT_EQ(b[i].enqueue_shard, b[0].enqueue_shard) << "a batch spans shards";
      EXPECT_EQ(b[i].lane_seq, b[i - 1].lane_seq + 1) << "a batch skipped or reordered";
    }
  }
  EXPECT_EQ(count("SELECT coalesce(sum(n_items), 0) FROM claim_batches"), total);
}

INSTANTIATE_TEST_SUITE_P(Shards, ConcurrentClaimTest, ::testing::Values(1, 4));

TEST_F(ClaimTest, ClaimGapDoesNotSkipUncommittedEnqueue) {
  // An open producer transaction at the lane head must stop the claim on that lane; its
  // rollback leaves a gap the claim then passes.
  enqueue("gap", 2);
  ASSERT_EQ(storage::consumer(*store_).claim(conn(), "gap").size(), 2U);

  auto producer = connect_new();
  producer.exec("BEGIN");
  producer.exec("SET CONSTRAINTS place_staged_jobs IMMEDIATE");  // placed now: holds the lane
  std::vector<NewJob> pending(3, NewJob("work", nlohmann::json::object(), on_queue("gap")));
  storage::insert_many(*store_, producer, pending);  // lane_seq 3..5, uncommitted, lane lock held
  EXPECT_TRUE(storage::consumer(*store_).claim(conn(), "gap").empty());
  producer.exec("ROLLBACK");

  enqueue("gap", 2);  // lane_seq 6..7
  const auto got = storage::consumer(*store_).claim(conn(), "gap");
  ASSERT_EQ(got.size(), 2U);
  EXPECT_EQ(got[0].lane_seq, 6);
  EXPECT_EQ(got[1].lane_seq, 7);
  EXPECT_EQ(count("SELECT claim_cursor FROM queue_shard_lag('gap')"), 8);
}

TEST_F(ClaimTest, UncommittedHeadBlocksOnlyItsOwnLane) {
  // An uncommitted reservation on one shard must not stop claims on another.
  set_shards("two", 2);
  const std::string k0 = "k0", k1 = "k1";
  ASSERT_NE(shard_for_ordering_key(k0, 2), shard_for_ordering_key(k1, 2));
  // The queue exists already: a transaction that gives a new queue its id holds it until
  // it commits (docs/design/storage.md, "Queue ids").
  enqueue("two", 1, 2, k1);
  ASSERT_EQ(storage::consumer(*store_).claim(conn(), "two").size(), 1U);
  auto producer = connect_new();
  producer.exec("BEGIN");
  producer.exec("SET CONSTRAINTS place_staged_jobs IMMEDIATE");  // placed now: holds the lane
  InsertOpts o = on_queue("two");
  o.ordering_key = k0;
  storage::insert_many(*store_, producer,
                       std::vector<NewJob>{NewJob("w", nlohmann::json::object(), o)});
  enqueue("two", 3, 2, k1);
  const auto got = storage::consumer(*store_).claim(conn(), "two");
  ASSERT_EQ(got.size(), 3U);
  EXPECT_EQ(got[0].enqueue_shard, shard_for_ordering_key(k1, 2));
  producer.exec("COMMIT");
  const auto rest = storage::consumer(*store_).claim(conn(), "two");
  ASSERT_EQ(rest.size(), 1U);
  EXPECT_EQ(rest[0].enqueue_shard, shard_for_ordering_key(k0, 2));
}

TEST_F(ClaimTest, RolledBackClaimHandsTheSameRowsOutAgain) {
  enqueue("rb", 5);
  conn().exec("BEGIN");
  const auto first = storage::consumer(*store_).claim(conn(), "rb");
  ASSERT_EQ(first.size(), 5U);
  conn().exec("ROLLBACK");
  const auto again = storage::consumer(*store_).claim(conn(), "rb");
  ASSERT_EQ(again.size(), 5U);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(again[i].job_id, first[i].job_id);
    EXPECT_EQ(again[i].run_lease, 1);
  }
  EXPECT_EQ(count("SELECT coalesce(sum(n_items), 0) FROM claim_batches"), 5);
}

TEST_F(ClaimTest, CrashBeforeCommitLosesNothingAndCrashAfterCommitDuplicatesNothing) {
  // The claim's cursor and receipts commit together: a process that dies before commit
  // leaves the rows claimable; one that dies after commit leaves them claimed (with open
  // receipts for rescue), never claimable twice.
  enqueue("crash", 6);
  {
    auto victim = connect_new();
    victim.exec("BEGIN");
    QueueStorage::ClaimOptions o;
    o.max_batch = 3;
    ASSERT_EQ(storage::consumer(*store_).claim(victim, "crash", o).size(), 3U);
    conn().query("SELECT pg_terminate_backend($1)", victim.backend_pid());
  }
  {
    auto victim = connect_new();
    QueueStorage::ClaimOptions o;
    o.max_batch = 3;
    const auto got = storage::consumer(*store_).claim(victim, "crash", o);  // commits
    ASSERT_EQ(got.size(), 3U);
    EXPECT_EQ(got[0].lane_seq, 1);  // the first claim's rows came back
    conn().query("SELECT pg_terminate_backend($1)", victim.backend_pid());
  }
  const auto rest = storage::consumer(*store_).claim(conn(), "crash");
  ASSERT_EQ(rest.size(), 3U);
  EXPECT_EQ(rest[0].lane_seq, 4);
  EXPECT_EQ(count("SELECT coalesce(sum(n_items), 0) FROM claim_batches"), 6);
  EXPECT_EQ(count("SELECT count(DISTINCT job_id) FROM open_attempts()"), 6);
}

TEST_F(ClaimTest, ClaimMergesOneLaneAcrossLiveReadySlotsInLaneOrder) {
  // Rows of one lane sit in several live slots once the queue ring rotates under a
  // backlog; the claim merges them in lane_seq order (it used to refuse with 0A000).
  enqueue("ring", 3);
  ASSERT_TRUE(conn().exec("SELECT rotated FROM rotate_ring('queue')").get<bool>(0, 0));
  enqueue("ring", 3);
  ASSERT_TRUE(conn().exec("SELECT rotated FROM rotate_ring('queue')").get<bool>(0, 0));
  enqueue("ring", 2);
  QueueStorage::ClaimOptions o;
  o.max_batch = 5;
  const auto first = storage::consumer(*store_).claim(conn(), "ring", o);
  const auto rest = storage::consumer(*store_).claim(conn(), "ring", o);
  ASSERT_EQ(first.size(), 5U);
  ASSERT_EQ(rest.size(), 3U);
  std::vector<std::pair<std::int64_t, int>> got;
  for (const auto* part : {&first, &rest}) {
    for (const auto& e : *part) got.emplace_back(e.lane_seq, e.ready_slot);
  }
  EXPECT_EQ(got, (std::vector<std::pair<std::int64_t, int>>{
                     {1, 0}, {2, 0}, {3, 0}, {4, 1}, {5, 1}, {6, 1}, {7, 2}, {8, 2}}));
  EXPECT_EQ(count("SELECT n_items FROM claim_batches ORDER BY batch_id LIMIT 1"), 5);
}

TEST_F(ClaimTest, PausedQueueReturnsNothing) {
  enqueue("p", 2);
  conn().exec("INSERT INTO queue_meta (queue, paused) VALUES ('p', true)");
  EXPECT_TRUE(storage::consumer(*store_).claim(conn(), "p").empty());
  conn().exec("UPDATE queue_meta SET paused = false WHERE queue = 'p'");
  EXPECT_EQ(storage::consumer(*store_).claim(conn(), "p").size(), 2U);
}

TEST_F(ClaimTest, ClaimedEntryCarriesEveryField) {
  set_shards("f", 8);
  InsertOpts o = on_queue("f");
  o.priority = 3;
  o.max_attempts = 7;
  o.ordering_key = std::string("customer-42");
  o.metadata = {{"trace", "abc"}};
  o.tags = {"a", "b c", "d\"e"};
  const auto id = storage::insert_many(*store_, conn(),
                                       std::vector<NewJob>{NewJob("email", {{"to", "x@y"}}, o)})
                      .front();
  QueueStorage::ClaimOptions co;
  co.deadline = milliseconds(60000);
  const auto got = storage::consumer(*store_).claim(conn(), "f", co);
  ASSERT_EQ(got.size(), 1U);
  const auto& e = got[0];
  EXPECT_EQ(e.job_id, id);
  EXPECT_EQ(e.run_lease, 1);
  EXPECT_EQ(e.attempt, 1);
  EXPECT_EQ(e.max_attempts, 7);
  EXPECT_EQ(e.enqueue_shard, 4);  // the published vector: "customer-42" is shard 4 of 8
  EXPECT_EQ(e.ready_slot, 0);
  EXPECT_EQ(e.lane_seq, 1);
  EXPECT_EQ(e.claim_slot, 0);
  EXPECT_EQ(e.queue, "f");
  EXPECT_EQ(e.priority, 3);
  EXPECT_EQ(e.effective_priority, 3);
  EXPECT_EQ(e.kind, "email");
  EXPECT_EQ(nlohmann::json::parse(e.args_json), (nlohmann::json{{"to", "x@y"}}));
  EXPECT_EQ(e.metadata, (nlohmann::json{{"trace", "abc"}}));
  EXPECT_EQ(e.tags, (std::vector<std::string>{"a", "b c", "d\"e"}));
  EXPECT_EQ(e.ordering_key, std::optional<std::string>("customer-42"));
  ASSERT_TRUE(e.deadline_at.has_value());
  EXPECT_NEAR(std::chrono::duration<double>(*e.deadline_at - e.claimed_at).count(), 60.0, 0.01);
  EXPECT_EQ(count("SELECT enqueue_shard FROM claim_batches"), 4);
}

TEST_F(ClaimTest, TheSameAttemptTwiceInOneCallIsClosedOnce) {
  // Regression (issue 10, defect 4): a repeat of an attempt with a retry, snooze or DLQ
  // outcome in one complete() call used to violate the deferred_jobs / dlq_entries
  // primary key and fail the whole call.
  conn().exec("INSERT INTO queue_meta (queue, dlq_enabled) VALUES ('dup', true)");
  enqueue("dup", 3);
  QueueStorage::ClaimOptions o;
  o.max_batch = 3;
  const auto c = storage::consumer(*store_).claim(conn(), "dup", o);
  ASSERT_EQ(c.size(), 3U);
  const auto retry = Completion::of(c[0], Outcome::kRetry, "again");
  const auto snooze = Completion::of(c[1], Outcome::kSnooze, "", std::chrono::milliseconds(0));
  const auto dead = Completion::of(c[2], Outcome::kFail, "dead");
  const auto res = storage::consumer(*store_).complete(
      conn(), std::vector<Completion>{retry, snooze, dead, retry, snooze, dead});
  ASSERT_EQ(res.size(), 6U);
  EXPECT_EQ(res[0].state, "retried");
  EXPECT_EQ(res[1].state, "snoozed");
  EXPECT_EQ(res[2].state, "dlq");
  for (std::size_t k = 3; k < 6; ++k) EXPECT_TRUE(res[k].stale()) << k;
  EXPECT_EQ(count("SELECT count(*) FROM deferred_jobs"), 2);
  EXPECT_EQ(count("SELECT count(*) FROM dlq_entries"), 1);
}

TEST_F(ClaimTest, ClosersOfTheSameBatchesInOppositeOrdersNeverDeadlock) {
  // Regression (issue 10, defect 3): closers lock the claim batches of their attempts; a
  // closer that locked them in input order could hold batch B while waiting for A, held
  // by one (a rescue, in claimed_at order) that then wants B: 40P01. They are locked in
  // batch order, so a waiting closer holds none of them.
  enqueue("two", 4);
  QueueStorage::ClaimOptions o;
  o.max_batch = 2;
  const auto a = storage::consumer(*store_).claim(conn(), "two", o);  // batch A
  const auto b = storage::consumer(*store_).claim(conn(), "two", o);  // batch B
  ASSERT_EQ(a.size(), 2U);
  ASSERT_EQ(b.size(), 2U);
  ASSERT_LT(a[0].claim_batch, b[0].claim_batch);

  pg::Connection holder = connect_new();
  pg::Connection other = connect_new();
  pg::Transaction tx(holder);
  storage::consumer(*store_).complete(
      holder, std::vector<Completion>{Completion::of(a[0], Outcome::kCompleted)});
  // `other` closes B's and A's attempts, B first in its input: it must wait for A.
  const int other_pid = other.backend_pid();
  BackgroundCall<std::vector<CompletionResult>> late(other_pid, [&] {
    return storage::consumer(*store_).complete(
        other, std::vector<Completion>{Completion::of(b[0], Outcome::kCompleted),
                                       Completion::of(a[1], Outcome::kCompleted)});
  });
  ASSERT_TRUE(eventually([&] { return waits_for_advisory_lock(conn(), other_pid); }));
  // The holder now wants B too: with input-order locking `other` would hold it.
  try {
    storage::consumer(*store_).complete(
        holder, std::vector<Completion>{Completion::of(b[1], Outcome::kCompleted)});
    tx.commit();
  } catch (const Error& e) {
    ADD_FAILURE() << "holder: " << e.what() << " [" << e.sqlstate() << "]";
  }
  ASSERT_TRUE(late.finishes_within(std::chrono::seconds(10)));
  std::vector<CompletionResult> res;
  try {
    res = late.get();
  } catch (const Error& e) {
    FAIL() << "other: " << e.what() << " [" << e.sqlstate() << "]";
  }
  ASSERT_EQ(res.size(), 2U);
  EXPECT_EQ(res[0].state, "completed");
  EXPECT_EQ(res[1].state, "completed");
  EXPECT_EQ(count("SELECT count(*) FROM attempt_outcomes WHERE state = 'completed'"), 4);
}

TEST_F(ClaimTest, StaleCompletionChangesNothing) {
  enqueue("st", 1);
  auto claimed = storage::consumer(*store_).claim(conn(), "st");
  ASSERT_EQ(claimed.size(), 1U);
  const auto ok = Completion::of(claimed[0], Outcome::kCompleted);
  // An attempt is named by its claim batch and lane position: a completion naming a
  // receipt that does not exist, or a position outside its batch, matches nothing.
  auto no_such_batch = ok;
  no_such_batch.claim_batch += 1000;
  auto outside = ok;
  outside.lane_seq += 1;
  auto res =
      storage::consumer(*store_).complete(conn(), std::vector<Completion>{no_such_batch, outside});
  EXPECT_TRUE(res[0].stale());
  EXPECT_TRUE(res[1].stale());
  res = storage::consumer(*store_).complete(conn(), std::vector<Completion>{ok, ok});
  EXPECT_EQ(res[0].state, "completed");
  EXPECT_TRUE(res[1].stale()) << "the same attempt finalised twice in one batch";
  res = storage::consumer(*store_).complete(
      conn(), std::vector<Completion>{Completion::of(claimed[0], Outcome::kFail, "late")});
  EXPECT_TRUE(res[0].stale());
  EXPECT_EQ(done_count(), 1);
  EXPECT_EQ(count("SELECT count(*) FROM attempt_outcomes WHERE state = 'completed'"), 1);
}

TEST_F(ClaimTest, CompletionOfARetriedAttemptAfterReclaimIsStale) {
  enqueue("rc", 1);
  const auto first = storage::consumer(*store_).claim(conn(), "rc");
  ASSERT_EQ(first.size(), 1U);
  auto r = storage::consumer(*store_).complete(
      conn(),
      std::vector<Completion>{Completion::of(first[0], Outcome::kRetry, "boom", milliseconds(0))});
  EXPECT_EQ(r[0].state, "retried");
  EXPECT_EQ(storage::consumer(*store_).promote_due(conn()), 1);
  const auto second = storage::consumer(*store_).claim(conn(), "rc");
  ASSERT_EQ(second.size(), 1U);
  EXPECT_EQ(second[0].job_id, first[0].job_id);
  EXPECT_EQ(second[0].run_lease, 2);
  EXPECT_EQ(second[0].attempt, 2);
  EXPECT_EQ(second[0].errors.size(), 1U);
  EXPECT_EQ(second[0].errors[0]["error"], "boom");
  // The old attempt reports late: stale. The new one completes.
  r = storage::consumer(*store_).complete(
      conn(), std::vector<Completion>{Completion::of(first[0], Outcome::kCompleted),
                                      Completion::of(second[0], Outcome::kCompleted)});
  EXPECT_TRUE(r[0].stale());
  EXPECT_EQ(r[1].state, "completed");
}

TEST_F(ClaimTest, RetriesReachMaxAttemptsThenFail) {
  InsertOpts o = on_queue("mx");
  o.max_attempts = 3;
  const auto id =
      storage::insert_many(*store_, conn(), std::vector<NewJob>{NewJob("w", {}, o)}).front();
  std::vector<std::string> states;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    const auto got = storage::consumer(*store_).claim(conn(), "mx");
    ASSERT_EQ(got.size(), 1U) << "attempt " << attempt;
    EXPECT_EQ(got[0].attempt, attempt);
    const auto r = storage::consumer(*store_).complete(
        conn(), std::vector<Completion>{Completion::of(
                    got[0], Outcome::kRetry, "err " + std::to_string(attempt), milliseconds(0))});
    states.push_back(*r[0].state);
    storage::consumer(*store_).promote_due(conn());
  }
  EXPECT_EQ(states, (std::vector<std::string>{"retried", "retried", "failed"}));
  EXPECT_TRUE(storage::consumer(*store_).claim(conn(), "mx").empty());
  EXPECT_EQ(count("SELECT count(*) FROM deferred_jobs"), 0);
  // The error of every attempt is kept: two on the last ready row, the last on the done row.
  const auto last = conn().exec(
      "SELECT r.errors::text, d.error, d.attempt FROM attempt_outcomes d JOIN ready_entries r "
      "USING "
      "(ready_slot, queue_id, priority, enqueue_shard, lane_seq) WHERE d.state = 'failed' AND "
      "d.job_id = " +
      std::to_string(id));
  ASSERT_EQ(last.rows(), 1);
  EXPECT_THAT(std::string(last.text(0, 0)), ::testing::HasSubstr("err 1"));
  EXPECT_THAT(std::string(last.text(0, 0)), ::testing::HasSubstr("err 2"));
  EXPECT_EQ(last.get<std::string>(0, 1), "err 3");
  EXPECT_EQ(last.get<int>(0, 2), 3);
}

TEST_F(ClaimTest, ExhaustedRetriesGoToTheDlqWhenTheQueueEnablesIt) {
  conn().exec("INSERT INTO queue_meta (queue, dlq_enabled) VALUES ('dq', true)");
  InsertOpts o = on_queue("dq");
  o.max_attempts = 2;
  const auto id =
      storage::insert_many(*store_, conn(), std::vector<NewJob>{NewJob("w", {{"x", 1}}, o)})
          .front();
  for (int attempt = 1; attempt <= 2; ++attempt) {
    const auto got = storage::consumer(*store_).claim(conn(), "dq");
    ASSERT_EQ(got.size(), 1U);
    storage::consumer(*store_).complete(
        conn(),
        std::vector<Completion>{Completion::of(got[0], Outcome::kRetry, "bad", milliseconds(0))});
    storage::consumer(*store_).promote_due(conn());
  }
  const auto dlq = conn().exec(
      "SELECT job_id, attempt, reason, jsonb_array_length(errors), args::text "
      "FROM dlq_entries");
  ASSERT_EQ(dlq.rows(), 1);
  EXPECT_EQ(dlq.get<std::int64_t>(0, 0), id);
  EXPECT_EQ(dlq.get<int>(0, 1), 2);
  EXPECT_EQ(dlq.get<std::string>(0, 2), "bad");
  EXPECT_EQ(dlq.get<int>(0, 3), 2);
  EXPECT_EQ(dlq.get<std::string>(0, 4), "{\"x\": 1}");
  EXPECT_EQ(done_count("state = 'dlq'"), 1);
  // A terminal failure skips the remaining attempts.
  const auto id2 =
      storage::insert_many(*store_, conn(), std::vector<NewJob>{NewJob("w", {}, o)}).front();
  const auto got = storage::consumer(*store_).claim(conn(), "dq");
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(storage::consumer(*store_)
                .complete(conn(), std::vector<Completion>{Completion::of(got[0], Outcome::kFail,
                                                                         "fatal")})[0]
                .state,
            "dlq");
  EXPECT_EQ(count("SELECT attempt FROM dlq_entries WHERE job_id = " + std::to_string(id2)), 1);
}

TEST_F(ClaimTest, SnoozeKeepsTheAttemptCount) {
  enqueue("sz", 1);
  const auto first = storage::consumer(*store_).claim(conn(), "sz");
  ASSERT_EQ(first.size(), 1U);
  EXPECT_EQ(storage::consumer(*store_)
                .complete(conn(), std::vector<Completion>{Completion::of(first[0], Outcome::kSnooze,
                                                                         {}, milliseconds(0))})[0]
                .state,
            "snoozed");
  EXPECT_EQ(count("SELECT attempt FROM deferred_jobs"), 0);
  EXPECT_EQ(count("SELECT count(*) FROM deferred_jobs WHERE reason = 'snooze'"), 1);
  storage::consumer(*store_).promote_due(conn());
  const auto second = storage::consumer(*store_).claim(conn(), "sz");
  ASSERT_EQ(second.size(), 1U);
  EXPECT_EQ(second[0].attempt, 1);  // not consumed
  EXPECT_EQ(second[0].run_lease, 2);
}

TEST_F(ClaimTest, RetryBackoffDefersUntilDue) {
  enqueue("bo", 1);
  const auto got = storage::consumer(*store_).claim(conn(), "bo");
  ASSERT_EQ(got.size(), 1U);
  storage::consumer(*store_).complete(
      conn(), std::vector<Completion>{Completion::of(got[0], Outcome::kRetry, "x")});
  // Default backoff for attempt 1 is 0.5..1 s: not due yet.
  EXPECT_EQ(storage::consumer(*store_).promote_due(conn()), 0);
  const auto wait_s =
      conn().exec("SELECT extract(epoch FROM run_at - now()) FROM deferred_jobs").get<double>(0, 0);
  EXPECT_GT(wait_s, 0.4);
  EXPECT_LT(wait_s, 1.1);
}

TEST_F(ClaimTest, CancelOutcomeIsTerminal) {
  enqueue("cx", 1);
  const auto got = storage::consumer(*store_).claim(conn(), "cx");
  ASSERT_EQ(got.size(), 1U);
  EXPECT_EQ(
      storage::consumer(*store_)
          .complete(conn(), std::vector<Completion>{Completion::of(got[0], Outcome::kCancel)})[0]
          .state,
      "cancelled");
  EXPECT_EQ(storage::consumer(*store_).promote_due(conn()), 0);
  EXPECT_TRUE(storage::consumer(*store_).claim(conn(), "cx").empty());
}

TEST_F(ClaimTest, AgedLowerPriorityLaneWinsOverAFreshHigherOne) {
  // Priority aging: a priority-4 row that has waited 40 minutes with a 10-minute aging
  // interval is effectively priority 1 and older than the fresh priority-1 row.
  InsertOpts old = on_queue("ag");
  old.priority = 4;
  old.run_at = std::chrono::system_clock::now() - std::chrono::minutes(40);
  storage::insert_many(*store_, conn(), std::vector<NewJob>{NewJob("old", {}, old)});
  InsertOpts fresh = on_queue("ag");
  fresh.priority = 1;
  storage::insert_many(*store_, conn(), std::vector<NewJob>{NewJob("fresh", {}, fresh)});

  QueueStorage::ClaimOptions o;
  o.max_batch = 1;
  // Without aging, priority decides.
  conn().exec("BEGIN");
  EXPECT_EQ(storage::consumer(*store_).claim(conn(), "ag", o).at(0).kind, "fresh");
  conn().exec("ROLLBACK");

  o.aging = std::chrono::minutes(10);
  const auto first = storage::consumer(*store_).claim(conn(), "ag", o);
  ASSERT_EQ(first.size(), 1U);
  EXPECT_EQ(first[0].kind, "old");
  EXPECT_EQ(first[0].priority, 4);            // lane priority stays in the key
  EXPECT_EQ(first[0].effective_priority, 1);  // aged
  EXPECT_EQ(storage::consumer(*store_).claim(conn(), "ag", o).at(0).kind, "fresh");
}

TEST_F(ClaimTest, LoweringEnqueueShardsDrainsExistingRows) {
  // AWA's ADR-025 test_queue_storage_lowering_enqueue_shards_drains_existing_rows: rows on
  // shards >= the new count keep draining; promoted and new rows use [0, newS).
  set_shards("low", 4);
  for (int b = 0; b < 8; ++b) enqueue("low", 10);
  InsertOpts later = on_queue("low");
  later.run_at = std::chrono::system_clock::now() + std::chrono::milliseconds(300);
  storage::insert_many(*store_, conn(), std::vector<NewJob>(5, NewJob("later", {}, later)));
  ASSERT_EQ(count("SELECT count(DISTINCT enqueue_shard) FROM ready_entries"), 4);

  set_shards("low", 2);
  store_->reset();
  for (int b = 0; b < 4; ++b) enqueue("low", 5);
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE enqueue_shard >= 2 AND kind = 'work' "
                  "AND job_id > (SELECT max(job_id) - 20 FROM ready_entries)"),
            0);
  // Wait (bounded) for the scheduled rows to fall due, then promote them.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int promoted = 0;
  while (promoted < 5 && std::chrono::steady_clock::now() < deadline) {
    promoted += storage::consumer(*store_).promote_due(conn());
  }
  ASSERT_EQ(promoted, 5);
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE kind = 'later' AND enqueue_shard >= 2"),
            0);

  EXPECT_EQ(drain(conn(), "low"), 105);
  EXPECT_EQ(done_count("state = 'completed'"), 105);
  EXPECT_EQ(count("SELECT count(*) FROM queue_shard_lag('low') WHERE lag <> 0"), 0);
}

}  // namespace
}  // namespace awa::testing
