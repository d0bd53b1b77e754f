#include "runtime/completion_batcher.hpp"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "pg/pool.hpp"
#include "storage/store_access.hpp"
#include "storage_support.hpp"

namespace awa::testing {
namespace {

class CompletionBatcherTest : public StorageTest {
 protected:
  std::vector<ClaimedEntry> seed_and_claim(int n) {
    std::vector<NewJob> jobs(static_cast<std::size_t>(n),
                             NewJob("w", nlohmann::json::object(), on_queue("cb")));
    storage::insert_many_copy(*store_, conn(), jobs);
    QueueStorage::ClaimOptions o;
    o.max_batch = n;
    return storage::consumer(*store_).claim(conn(), "cb", o);
  }
};

TEST_F(CompletionBatcherTest, ConcurrentSubmittersAreWrittenInFewFlushes) {
  // Group commit: 4,000 completions from 4 threads land exactly once, in batches.
  const auto claimed = seed_and_claim(4000);
  ASSERT_EQ(claimed.size(), 4000U);
  pg::Pool pool(test_connect_options(), 2);
  std::atomic<int> completed{0};
  {
    runtime::CompletionBatcher batcher(pool, *store_, {},
                                       [&](const Completion&, const CompletionResult& r) {
                                         if (r.state == "completed") ++completed;
                                       });
    std::vector<std::thread> workers;
    for (int w = 0; w < 4; ++w) {
      workers.emplace_back([&, w] {
        for (std::size_t i = static_cast<std::size_t>(w); i < claimed.size(); i += 4) {
          batcher.submit(Completion::of(claimed[i], Outcome::kCompleted));
        }
      });
    }
    for (auto& t : workers) t.join();
    batcher.flush();
    const auto s = batcher.stats();
    EXPECT_EQ(s.submitted, 4000U);
    EXPECT_EQ(s.written, 4000U);
    EXPECT_EQ(s.stale, 0U);
    EXPECT_GE(s.flushes, 8U);  // at most 512 rows per flush
    EXPECT_LT(s.flushes, 4000U);
  }
  EXPECT_EQ(completed.load(), 4000);
  EXPECT_EQ(count("SELECT count(*) FROM attempt_outcomes WHERE state = 'completed'"), 4000);
}

TEST_F(CompletionBatcherTest, FlushIntervalBoundsTheWaitOfALoneCompletion) {
  const auto claimed = seed_and_claim(1);
  pg::Pool pool(test_connect_options(), 1);
  runtime::CompletionBatcherOptions o;
  o.flush_interval = std::chrono::milliseconds(20);
  runtime::CompletionBatcher batcher(pool, *store_, o);
  batcher.submit(Completion::of(claimed[0], Outcome::kCompleted));
  // Without flush(), the row must be written once the interval passes (bounded poll).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (batcher.stats().written == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(batcher.stats().written, 1U);
  EXPECT_EQ(batcher.stats().flushes, 1U);
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
  for (const auto& e : claimed) {
    batcher.submit(Completion::of(e, Outcome::kRetry, "again", std::chrono::milliseconds(0)));
  }
  batcher.flush();
  const auto s = batcher.stats();
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
