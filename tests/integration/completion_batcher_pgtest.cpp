#include "runtime/completion_batcher.hpp"

#include <atomic>
#include <thread>

#include <gtest/gtest.h>

#include "pg/pool.hpp"
#include "storage_support.hpp"

namespace awa::testing {
namespace {

class CompletionBatcherTest : public StorageTest {
 protected:
  std::vector<ClaimedEntry> seed_and_claim(int n) {
    std::vector<NewJob> jobs(static_cast<std::size_t>(n),
                             NewJob("w", nlohmann::json::object(), on_queue("cb")));
    store_->insert_many_copy(conn(), jobs);
    QueueStorage::ClaimOptions o;
    o.max_batch = n;
    return store_->claim(conn(), "cb", o);
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

}  // namespace
}  // namespace awa::testing
