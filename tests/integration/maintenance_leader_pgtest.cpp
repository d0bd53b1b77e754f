// The maintenance leader's steps are independent: a step that fails is
// logged and counted, and the others still run every round. Before, the first step to
// throw ended the round: while rescue failed, no scheduled job was ever promoted.
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "runtime/maintenance_leader.hpp"
#include "runtime_support.hpp"
#include "storage/store_access.hpp"

namespace awa::testing {
namespace {

class MaintenanceLeaderTest : public RuntimeTest {
 protected:
  runtime::MaintenanceOptions leader_options() const {
    runtime::MaintenanceOptions o;
    o.connect = test_connect_options();
    o.schema = schema_;
    o.interval = milliseconds(50);
    o.stale_after = milliseconds(0);
    o.rotate_interval = milliseconds(0);
    o.gauges_interval = milliseconds(0);
    return o;
  }
};

TEST_F(MaintenanceLeaderTest, PromotionStillRunsWhileRescueFails) {
  // Rescue fails while the table rescue_broken holds a row: the schema's function is
  // renamed and replaced by one that raises then, and calls the real one otherwise.
  conn().exec("CREATE TABLE rescue_broken (why text)");
  conn().exec("INSERT INTO rescue_broken VALUES ('broken by the test')");
  conn().exec("ALTER FUNCTION rescue_stale_attempts(interval, integer) RENAME TO rescue_real");
  // The leader's connection has no search_path into the schema: names are qualified.
  conn().exec(fmt::format(R"(
    CREATE FUNCTION rescue_stale_attempts(p_stale interval, p_limit integer DEFAULT 1000)
    RETURNS TABLE (job_id bigint, state text, why text)
    LANGUAGE plpgsql AS $$
    BEGIN
        IF EXISTS (SELECT 1 FROM {0}.rescue_broken) THEN
            RAISE EXCEPTION 'rescue_stale_attempts: %', (SELECT min(b.why) FROM {0}.rescue_broken b);
        END IF;
        RETURN QUERY SELECT * FROM {0}.rescue_real(p_stale, p_limit);
    END
    $$)",
                          quoted_schema()));
  // A scheduled job that is due, and an attempt nobody will finish.
  InsertOpts later = on_queue("due");
  later.run_at = std::chrono::system_clock::now() + std::chrono::hours(1);
  const auto scheduled =
      storage::insert_many(*store_, conn(),
                           std::vector<NewJob>{NewJob("noop", nlohmann::json::object(), later)})
          .at(0);
  conn().exec("UPDATE deferred_jobs SET run_at = now() - interval '1 second'");
  const auto orphan = enqueue("orphan", 1).at(0);
  ASSERT_EQ(storage::consumer(*store_).claim(conn(), "orphan").size(), 1U);

  runtime::MaintenanceLeader leader(leader_options(), *store_);
  leader.start();
  const bool promoted = eventually(
      [&] {
        return count("SELECT count(*) FROM deferred_jobs WHERE job_id = " +
                     std::to_string(scheduled)) == 0;
      },
      seconds(10));
  ASSERT_TRUE(promoted) << "the due job was not promoted while rescue failed";
  // The counter moves once promote_due has returned, a moment after its commit shows.
  EXPECT_TRUE(eventually([&] { return leader.promoted() == 1U; }, seconds(5))) << leader.promoted();
  EXPECT_TRUE(leader.leader()) << "a failing statement must not cost the leadership";
  EXPECT_EQ(leader.rescued(), 0U);
  EXPECT_GE(leader.step_failures(), 1U) << "the failed rescues are counted";
  EXPECT_EQ(count("SELECT count(*) FROM queue_shard_lag('due') WHERE available = 1"), 1)
      << "promoted to ready";

  // Repaired, the same leader rescues again.
  conn().exec("DELETE FROM rescue_broken");
  ASSERT_TRUE(eventually(
      [&] {
        return count("SELECT count(*) FROM attempt_outcomes WHERE state = 'rescued' AND job_id = " +
                     std::to_string(orphan)) == 1;
      },
      seconds(10)));
  leader.stop();
  EXPECT_GE(leader.rescued(), 1U);
}

// awa_maintenance_leader counts the leaders among the process's maintenance threads of a
// schema (the alert on a schema without a leader sums it over processes), and
// awa_jobs_rescued_total what rescue did.
TEST_F(MaintenanceLeaderTest, TheLeaderGaugeCountsLeadersAndRescuesAreCountedByOutcome) {
  const auto orphan = enqueue("orphan", 1).at(0);
  ASSERT_EQ(storage::consumer(*store_).claim(conn(), "orphan").size(), 1U);
  auto& registry = storage::metrics_registry(*store_);
  const auto leaders = [&] {
    return registry.gauge("awa_maintenance_leader", "", {"schema"}).with({schema_}).value();
  };
  const auto rescued = [&] {
    return registry.counter("awa_jobs_rescued_total", "", {"schema", "state"})
        .with({schema_, "rescued"})
        .value();
  };
  {
    runtime::MaintenanceLeader first(leader_options(), *store_);
    runtime::MaintenanceLeader second(leader_options(), *store_);
    EXPECT_EQ(leaders(), 0.0) << "the series exists before any leadership";
    first.start();
    ASSERT_TRUE(eventually([&] { return first.leader(); }, seconds(10)));
    second.start();
    ASSERT_TRUE(eventually([&] { return rescued() == 1U; }, seconds(10)))
        << "job " << orphan << " rescued, counted once";
    // The second one tries the lock every round and never gets it: one leader.
    std::this_thread::sleep_for(milliseconds(300));
    EXPECT_FALSE(second.leader());
    EXPECT_EQ(leaders(), 1.0);
    first.stop();
    EXPECT_TRUE(eventually([&] { return second.leader() && leaders() == 1.0; }, seconds(10)))
        << "the other one takes over: " << leaders();
    second.stop();
  }
  EXPECT_EQ(leaders(), 0.0) << "stopped leaders leave the gauge at 0";
  const auto text = registry.expose();
  EXPECT_NE(text.find(fmt::format("awa_jobs_rescued_total{{schema=\"{}\",state=\"rescued\"}} 1",
                                  schema_)),
            std::string::npos)
      << text.substr(0, 2000);
}

}  // namespace
}  // namespace awa::testing
