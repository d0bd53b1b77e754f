#include "runtime/completion_batcher.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "pg/pool.hpp"
#include "runtime_support.hpp"
#include "storage/store_access.hpp"

namespace awa::testing {
namespace {

class CompletionBatcherTest : public StorageTest {
 protected:
  void SetUpSchema() override {
    StorageTest::SetUpSchema();
    conn_pid_ = conn().exec("SELECT pg_backend_pid()").get<int>(0, 0);
  }

  std::vector<ClaimedEntry> seed_and_claim(int n) {
    std::vector<NewJob> jobs(static_cast<std::size_t>(n),
                             NewJob("w", nlohmann::json::object(), on_queue("cb")));
    storage::insert_many_copy(*store_, conn(), jobs);
    QueueStorage::ClaimOptions o;
    o.max_batch = n;
    return storage::consumer(*store_).claim(conn(), "cb", o);
  }

  // Takes, in the open transaction of conn(), the lock close_attempts takes on each claim
  // batch's attempts: a flush of them waits for this session until it commits.
  void lock_every_batch() {
    conn().query(
        "SELECT pg_advisory_xact_lock(hashtext($1 || ':attempts'), k.key) "
        "FROM (SELECT DISTINCT attempt_lock_key(batch_id) AS key FROM claim_batches "
        "ORDER BY 1) k",
        quoted_schema());
  }

  // Backends waiting for a lock the session of conn() holds (pg_stat_activity's Lock
  // waits). Asked on another connection: in conn()'s open transaction pg_stat_activity
  // would stay the snapshot of its first read.
  std::int64_t waiting_for_us() {
    if (!observer_) observer_.emplace(connect_new());
    const auto r = observer_->query(
        "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))", conn_pid_);
    return r.get<std::int64_t>(0, 0);
  }

  int conn_pid_ = 0;
  std::optional<pg::Connection> observer_;
};

TEST_F(CompletionBatcherTest, ConcurrentSubmittersAreWrittenInFewFlushes) {
  // Group commit: what 4 threads submit while a flush is in flight waits for it, then
  // goes in full batches, each row exactly once. The flush in flight is pinned: it waits
  // for this session's lock on the attempts (seen in pg_stat_activity) until every row
  // is submitted.
  constexpr std::uint64_t kRows = 4000;
  constexpr std::uint64_t kMaxBatch = 512;  // CompletionBatcherOptions' default
  const auto claimed = seed_and_claim(static_cast<int>(kRows));
  ASSERT_EQ(claimed.size(), kRows);
  pg::Pool pool(test_connect_options(), 2);
  std::atomic<int> completed{0};
  conn().exec("BEGIN");
  lock_every_batch();
  {
    runtime::CompletionBatcher batcher(pool, *store_, {},
                                       [&](const Completion&, const CompletionResult& r) {
                                         if (r.state == "completed") ++completed;
                                       });
    std::atomic<int> done{0};
    std::vector<std::thread> workers;
    for (int w = 0; w < 4; ++w) {
      workers.emplace_back([&, w] {
        for (std::size_t i = static_cast<std::size_t>(w); i < claimed.size(); i += 4) {
          batcher.submit(Completion::of(claimed[i], Outcome::kCompleted));
        }
        ++done;
      });
    }
    const bool in_flight = eventually([&] { return waiting_for_us() == 1; }, seconds(30));
    const bool submitted = eventually([&] { return done.load() == 4; }, seconds(30));
    conn().exec("COMMIT");
    for (auto& t : workers) t.join();
    ASSERT_TRUE(in_flight) << "no flush waited for the lock; waiting: " << waiting_for_us();
    ASSERT_TRUE(submitted) << "submit() blocked behind the flush in flight";
    batcher.flush();
    const auto s = batcher.stats();
    EXPECT_EQ(s.submitted, kRows);
    EXPECT_EQ(s.written, kRows);
    EXPECT_EQ(s.stale, 0U);
    // The pinned flush took k rows (1 <= k <= 512); the other 4000 - k waited for it and
    // then went 512 at a time: 1 + ceil((4000 - k) / 512) flushes, 8 or 9.
    EXPECT_GE(s.flushes, (kRows + kMaxBatch - 1) / kMaxBatch);
    EXPECT_LE(s.flushes, 1 + (kRows - 1 + kMaxBatch - 1) / kMaxBatch);
  }
  EXPECT_EQ(completed.load(), 4000);
  // attempt_outcomes expands closures: planned without statistics it takes 30 s here.
  conn().exec("ANALYZE claim_batches, claim_closures");
  EXPECT_EQ(count("SELECT count(*) FROM attempt_outcomes WHERE state = 'completed'"), 4000);
}

TEST_F(CompletionBatcherTest, FlushIntervalBoundsTheWaitOfALoneCompletion) {
  // Without flush(), a lone completion is written once flush_interval has passed since it
  // was submitted: not before (it waited for company), and not much later. The slack
  // covers one single-row write on a warm connection on a loaded CI machine; a batcher
  // that only wrote full batches, or on a timer of its own, would miss it.
  constexpr auto kInterval = milliseconds(300);
  constexpr auto kSlack = milliseconds(500);
  const auto claimed = seed_and_claim(1);
  pg::Pool pool(test_connect_options(), 1);
  { auto warm = pool.acquire(); }  // the write does not wait for a connect
  std::mutex mu;
  std::condition_variable cv;
  std::optional<Clock::time_point> written_at;  // guarded by mu
  runtime::CompletionBatcherOptions o;
  o.flush_interval = kInterval;
  runtime::CompletionBatcher batcher(pool, *store_, o,
                                     [&](const Completion&, const CompletionResult&) {
                                       {
                                         std::lock_guard lock(mu);
                                         written_at = Clock::now();
                                       }
                                       cv.notify_all();
                                     });
  const auto submitted_at = Clock::now();
  batcher.submit(Completion::of(claimed[0], Outcome::kCompleted));
  std::unique_lock lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, seconds(10), [&] { return written_at.has_value(); }))
      << "not written within 10 s";
  const auto waited = std::chrono::duration_cast<milliseconds>(*written_at - submitted_at);
  EXPECT_GE(waited.count(), kInterval.count()) << "ms from submit() to written";
  EXPECT_LT(waited.count(), (kInterval + kSlack).count()) << "ms from submit() to written";
  EXPECT_EQ(batcher.stats().written, 1U);
  EXPECT_EQ(batcher.stats().flushes, 1U);
}

TEST_F(CompletionBatcherTest, ARowIsCountedBeforeItsCallbackRuns) {
  // Whoever learns of a written row from its callback (a test, the runtime's metrics)
  // must find it in stats(): counting after the callbacks left a window in which a
  // waiter woken by the callback read written = 0.
  const auto claimed = seed_and_claim(2);
  pg::Pool pool(test_connect_options(), 1);
  std::vector<std::uint64_t> seen;  // written, as each callback saw it
  runtime::CompletionBatcher* self = nullptr;
  runtime::CompletionBatcher batcher(
      pool, *store_, {},
      [&](const Completion&, const CompletionResult&) { seen.push_back(self->stats().written); });
  self = &batcher;
  batcher.submit(Completion::of(claimed[0], Outcome::kCompleted));
  batcher.submit(Completion::of(claimed[1], Outcome::kCompleted));
  batcher.flush();
  ASSERT_EQ(seen.size(), 2U);
  // However the two rows were grouped into flushes, the n-th callback finds n rows counted.
  EXPECT_GE(seen[0], 1U) << "a callback ran before its row was counted";
  EXPECT_GE(seen[1], 2U) << "a callback ran before its row was counted";
}

TEST_F(CompletionBatcherTest, ACallbackThatThrowsLeavesItsRowsWritten) {
  // The rows are in the database when the callbacks run: one that throws must not count
  // its flush as dropped, nor keep the next row's callback from running.
  const auto claimed = seed_and_claim(2);
  pg::Pool pool(test_connect_options(), 1);
  std::atomic<int> calls{0};
  runtime::CompletionBatcher batcher(pool, *store_, {},
                                     [&](const Completion&, const CompletionResult&) {
                                       if (calls++ == 0) throw std::runtime_error("callback bug");
                                     });
  batcher.submit(Completion::of(claimed[0], Outcome::kCompleted));
  batcher.submit(Completion::of(claimed[1], Outcome::kCompleted));
  batcher.flush();
  EXPECT_EQ(calls.load(), 2);
  EXPECT_EQ(batcher.stats().written, 2U);
  EXPECT_EQ(batcher.stats().dropped, 0U);
  EXPECT_EQ(count("SELECT count(*) FROM attempt_outcomes WHERE state = 'completed'"), 2);
}

TEST_F(CompletionBatcherTest, StaleCompletionsAreReportedNotApplied) {
  const auto claimed = seed_and_claim(2);
  pg::Pool pool(test_connect_options(), 1);
  std::atomic<int> stale{0};
  runtime::CompletionBatcher batcher(pool, *store_, {},
                                     [&](const Completion&, const CompletionResult& r) {
                                       if (r.stale()) ++stale;
                                     });
  batcher.submit(Completion::of(claimed[0], Outcome::kCompleted));
  batcher.flush();
  batcher.submit(Completion::of(claimed[0], Outcome::kFail, "late"));  // already closed
  batcher.submit(Completion::of(claimed[1], Outcome::kCompleted));
  batcher.flush();
  EXPECT_EQ(stale.load(), 1);
  EXPECT_EQ(batcher.stats().stale, 1U);
  EXPECT_EQ(count("SELECT count(*) FROM attempt_outcomes WHERE state = 'completed'"), 2);
  EXPECT_EQ(count("SELECT count(*) FROM attempt_outcomes WHERE state = 'failed'"), 0);
}

TEST_F(CompletionBatcherTest, DestructorWritesEverythingSubmitted) {
  const auto claimed = seed_and_claim(300);
  pg::Pool pool(test_connect_options(), 1);
  {
    runtime::CompletionBatcherOptions o;
    o.flush_interval = std::chrono::seconds(10);  // only shutdown can flush these in time
    runtime::CompletionBatcher batcher(pool, *store_, o);
    for (const auto& e : claimed) batcher.submit(Completion::of(e, Outcome::kCompleted));
  }
  EXPECT_EQ(count("SELECT count(*) FROM attempt_outcomes"), 300);
}

// Regression (issue 10, defect 1): a handler message that is not valid UTF-8 used to fail
// the whole flush with SQLSTATE 22021, dropping every row in it to rescue.
TEST_F(CompletionBatcherTest, InvalidUtf8OrNulInAnErrorMessageIsStoredReplaced) {
  const auto claimed = seed_and_claim(3);
  ASSERT_EQ(claimed.size(), 3U);
  pg::Pool pool(test_connect_options(), 1);
  runtime::CompletionBatcher batcher(pool, *store_);
  batcher.submit(Completion::of(claimed[0], Outcome::kCompleted));
  batcher.submit(Completion::of(claimed[1], Outcome::kRetry, "bad \xff\xfe bytes",
                                std::chrono::milliseconds(0)));
  batcher.submit(Completion::of(claimed[2], Outcome::kRetry, std::string("nul\0here", 8),
                                std::chrono::milliseconds(0)));
  batcher.flush();
  const auto s = batcher.stats();
  EXPECT_EQ(s.dropped, 0U);
  EXPECT_EQ(s.written, 3U);
  EXPECT_EQ(count("SELECT count(*) FROM attempt_outcomes WHERE state = 'completed'"), 1);
  EXPECT_EQ(count("SELECT count(*) FROM deferred_jobs"), 2);
  EXPECT_EQ(count("SELECT count(*) FROM deferred_jobs WHERE errors::text LIKE "
                  "'%bad \uFFFD\uFFFD bytes%' OR errors::text LIKE '%nul\uFFFDhere%'"),
            2);
}

// Regression (issue 10, defect 1): one row the server rejects used to drop the whole
// flush; now the flush is bisected and only that row is left to rescue.
TEST_F(CompletionBatcherTest, ARejectedRowCostsOnlyThatRow) {
  const auto claimed = seed_and_claim(8);
  ASSERT_EQ(claimed.size(), 8U);
  const auto poisoned = claimed[5].job_id;
  conn().exec(
      "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
      "IF NEW.job_id = " +
      std::to_string(poisoned) +
      " THEN "
      "RAISE EXCEPTION 'poisoned row' USING ERRCODE = 'P0001'; END IF; RETURN NEW; END $$");
  conn().exec(
      "CREATE TRIGGER poison BEFORE INSERT ON deferred_jobs FOR EACH ROW EXECUTE FUNCTION "
      "poison()");
  pg::Pool pool(test_connect_options(), 1);
  runtime::CompletionBatcherOptions o;
  o.flush_interval = std::chrono::seconds(10);  // one flush of all 8, from flush()
  runtime::CompletionBatcher batcher(pool, *store_, o);
  EXPECT_FALSE(batcher.stats().last_failure.has_value());
  for (const auto& e : claimed) {
    batcher.submit(Completion::of(e, Outcome::kRetry, "again", std::chrono::milliseconds(0)));
  }
  batcher.flush();
  const auto s = batcher.stats();
  EXPECT_TRUE(s.last_failure.has_value()) << "Client::readiness reads it";
  EXPECT_EQ(s.dropped, 1U);
  EXPECT_EQ(s.written, 7U);
  EXPECT_GE(s.splits, 3U);  // 8 -> 4 -> 2 -> 1
  EXPECT_EQ(count("SELECT count(*) FROM deferred_jobs"), 7);
  // The rejected attempt is still open, for rescue.
  EXPECT_EQ(
      count("SELECT count(*) FROM open_attempts() WHERE job_id = " + std::to_string(poisoned)), 1);
}

}  // namespace
}  // namespace awa::testing
