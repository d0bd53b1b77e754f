// The maintenance leader's purge of unique keys (docs/scheduling.md, "Unique jobs";
// purge_unique_keys in sql/functions/0025_unique.sql): keys whose job left the key's
// states are deleted, held ones never; the sweep resumes where it stopped; keys locked by
// a claim are skipped; a running Client's leader does it by itself.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "admin_jobs_support.hpp"
#include "awa/client.hpp"
#include "awa/error.hpp"
#include "producer_support.hpp"
#include "storage/enqueue_unique.hpp"

namespace awa::testing {
namespace {

class UniquePurgeTest : public JobAdminTest {
 protected:
  static NewJob unique_job(int n, UniqueOpts u = {}) {
    InsertOpts o = on_queue("p");
    o.unique = std::move(u);
    return NewJob("send_receipt", nlohmann::json{{"n", n}}, o);
  }
  InsertResult insert(const NewJob& job) { return store_->insert_result(ac(), job); }
  storage::UniquePurge purge(const std::optional<std::string>& after, int limit) {
    return storage::purge_unique_keys(conn(), quoted_schema(), after, limit);
  }
  std::int64_t keys() { return count("SELECT count(*) FROM unique_keys"); }
  void complete_only_job(const std::string& queue, JobId id) {
    EXPECT_EQ(finish(claim_one(queue, id), Outcome::kCompleted), "completed");
  }
};

TEST_F(UniquePurgeTest, ForgetsKeysWhoseJobsEndedAndKeepsHeldOnes) {
  const auto ended = insert(unique_job(1));
  complete_only_job("p", ended.id);
  UniqueOpts forever;
  forever.states = {"available", "running", "completed"};
  const auto kept = insert(unique_job(2, forever));
  complete_only_job("p", kept.id);
  const auto running = insert(unique_job(3));
  claim_one("p", running.id);
  NewJob later = unique_job(4);
  later.opts.run_at = std::chrono::system_clock::now() + std::chrono::hours(1);
  const auto scheduled = insert(later);
  ASSERT_EQ(keys(), 4);

  const auto step = purge(std::nullopt, 100);
  EXPECT_EQ(step.purged, 1);
  EXPECT_FALSE(step.next);  // the whole table in one step
  EXPECT_EQ(count(fmt::format("SELECT count(*) FROM unique_keys WHERE job_id IN ({}, {}, {})",
                              kept.id, running.id, scheduled.id)),
            3);
  // Nothing more to forget; the held keys still hold.
  EXPECT_EQ(purge(std::nullopt, 100).purged, 0);
  EXPECT_TRUE(insert(unique_job(2, forever)).duplicate);
  EXPECT_TRUE(insert(unique_job(3)).duplicate);
  EXPECT_FALSE(insert(unique_job(1)).duplicate);  // a new job, a new key row
}

TEST_F(UniquePurgeTest, SweepsInStepsResumingAfterTheLastKey) {
  for (int n = 0; n < 10; ++n) {
    const auto r = insert(unique_job(n));
    if (n < 7) complete_only_job("p", r.id);
  }
  std::optional<std::string> after;
  int purged = 0;
  int steps = 0;
  do {
    const auto step = purge(after, 2);
    purged += step.purged;
    after = step.next;
    ++steps;
    ASSERT_LE(steps, 6) << "the sweep does not end";
  } while (after);
  EXPECT_EQ(purged, 7);
  EXPECT_GE(steps, 5);  // 10 keys, 2 per step: the cursor moved
  EXPECT_EQ(keys(), 3);
}

TEST_F(UniquePurgeTest, AKeyLockedByAClaimIsSkipped) {
  const auto ended = insert(unique_job(1));
  complete_only_job("p", ended.id);
  auto other = pg::Connection::connect({database_url()});
  other.exec("BEGIN");
  other.exec(fmt::format("SELECT 1 FROM {}.unique_keys WHERE job_id = {} FOR UPDATE",
                         quoted_schema(), ended.id));
  EXPECT_EQ(purge(std::nullopt, 100).purged, 0);
  other.exec("COMMIT");
  EXPECT_EQ(purge(std::nullopt, 100).purged, 1);
  EXPECT_EQ(keys(), 0);
}

TEST_F(UniquePurgeTest, BadLimitIsRefused) {
  try {
    purge(std::nullopt, 0);
    ADD_FAILURE() << "a limit of 0 was taken";
  } catch (const DatabaseError& e) {
    EXPECT_EQ(e.sqlstate(), "22023") << e.what();
  }
}

TEST_F(UniquePurgeTest, TheLeaderForgetsEndedKeys) {
  for (int n = 0; n < 5; ++n) complete_only_job("p", insert(unique_job(n)).id);
  const auto held = insert(unique_job(99));
  ASSERT_EQ(keys(), 6);
  ClientOptions o;
  o.database_url = database_url();
  o.schema = schema_;
  o.maintenance_interval = std::chrono::milliseconds(100);
  o.ring_rotate_interval = std::chrono::milliseconds(0);
  Client client(o);
  QueueConfig q;
  q.name = "elsewhere";
  q.max_workers = 1;
  client.add_queue(q);
  client.start();
  // The first round of a new leader runs the purge.
  EXPECT_TRUE(eventually([&] { return keys() == 1; }, std::chrono::seconds(20))) << keys();
  client.stop();
  EXPECT_EQ(count(fmt::format("SELECT count(*) FROM unique_keys WHERE job_id = {}", held.id)), 1);
}

}  // namespace
}  // namespace awa::testing
