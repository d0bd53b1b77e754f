// The function set without its optional features, installed on a migrated schema (what
// the benchmarks run with AWA_BENCH_FEATURES=off): plain jobs still go through enqueue,
// claim in lane order and completion; the features themselves are gone.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "producer_support.hpp"
#include "schema/optional_features.hpp"
#include "storage/store_access.hpp"
#include "storage_support.hpp"

namespace awa::testing {
namespace {

class OptionalFeaturesOffTest : public StorageTest {
 protected:
  std::vector<JobId> enqueue(const std::string& queue, int n, int priority) {
    std::vector<NewJob> jobs;
    for (int i = 0; i < n; ++i) {
      InsertOpts o = on_queue(queue);
      o.priority = priority;
      jobs.emplace_back("work", nlohmann::json{{"i", i}}, o);
    }
    return storage::insert_many(*store_, conn(), jobs);
  }

  std::vector<ClaimedEntry> claim(const std::string& queue, int batch) {
    QueueStorage::ClaimOptions o;
    o.max_batch = batch;
    return storage::consumer(*store_).claim(conn(), queue, o);
  }
};

TEST_F(OptionalFeaturesOffTest, PlainJobsRunAndTheFeaturesAreGone) {
  // A queue whose rate limit lets one claim through and whose aging would lift the old
  // priority-4 jobs above fresh priority-1 ones.
  conn().exec(
      "INSERT INTO queue_meta (queue, max_rate, burst, priority_aging_ms) "
      "VALUES ('q', 0.001, 3, 1)");
  const auto low = enqueue("q", 6, 4);
  conn().exec("SELECT pg_sleep(0.05)");
  const auto high = enqueue("q", 3, 1);

  // The functions as shipped: three tokens, and aging puts the older priority-4 lane first.
  const auto first = claim("q", 10);
  ASSERT_EQ(first.size(), 3U);
  EXPECT_EQ(first.front().job_id, low.front());
  EXPECT_TRUE(claim("q", 10).empty()) << "the token bucket is empty";

  EXPECT_EQ(schema::install_without_optional_features(conn(), schema_), 2);

  // Without the features: no limit, and no aging: the priority-1 lane goes before the
  // older rows of the priority-4 lane. Each lane in its order.
  const auto second = claim("q", 10);
  ASSERT_EQ(second.size(), 3U);
  const auto third = claim("q", 10);
  ASSERT_EQ(third.size(), 3U);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(second[i].job_id, high[i]);
    EXPECT_EQ(second[i].effective_priority, 1);
    EXPECT_EQ(third[i].job_id, low[i + 3]);
    EXPECT_EQ(third[i].effective_priority, 4);
  }
  std::vector<Completion> done;
  for (const auto* batch : {&first, &second, &third}) {
    for (const auto& e : *batch) done.push_back(Completion::of(e, Outcome::kCompleted));
  }
  for (const auto& r : storage::consumer(*store_).complete(conn(), done)) {
    EXPECT_EQ(r.state, "completed");
  }
  EXPECT_EQ(count("SELECT count(*) FROM attempt_outcomes WHERE state = 'completed'"), 9);

  // insert_job_compat without unique keys: an equal unique job is inserted again.
  for (int i = 0; i < 2; ++i) {
    const auto r =
        conn().exec("SELECT duplicate FROM insert_job_compat('once', 'u', '{}', p_unique => '{}')");
    EXPECT_EQ(r.get<std::string>(0, 0), "f");
  }
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE kind = 'once'"), 2);

  // The function settings the migrator gives every function are back on the new ones.
  EXPECT_EQ(
      count("SELECT count(*) FROM pg_proc WHERE pronamespace = current_schema()::regnamespace "
            "AND proname IN ('claim_ready_runtime', 'insert_job_compat') "
            "AND 'search_path=pg_catalog, pg_temp' = ANY (proconfig)"),
      2);
}

}  // namespace
}  // namespace awa::testing
