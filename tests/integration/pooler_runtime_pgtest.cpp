// The worker runtime through PgBouncer in transaction pool mode (issue 15, "Pooler
// mode"; docs/deployment.md), twice over: with a direct URL for LISTEN and the leader's
// lock ("Direct"), and without one ("PollOnly": claimers poll, cancels arrive with the
// heartbeat, the leader is elected by lease row). Enqueue, claim and complete over shards,
// retry, cancel, rescue, a periodic job, and leader fail-over between `awa work`
// processes.
#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "awa/admin.hpp"
#include "awa/client.hpp"
#include "awa/connection.hpp"
#include "pooler_support.hpp"
#include "storage/store_access.hpp"

namespace awa::testing {
namespace {

class PoolerRuntimeTest : public PoolerTest, public ::testing::WithParamInterface<bool> {
 protected:
  bool direct() const { return GetParam(); }
  ClientOptions pooled() const {
    ClientOptions o = pooled_options(direct());
    // Poll-only claimers find new work within this.
    o.heartbeat_interval = milliseconds(200);
    return o;
  }
  QueueConfig polled_queue(const std::string& name, int workers) const {
    QueueConfig q = queue(name, workers);
    q.poll_interval = milliseconds(100);
    return q;
  }
  // `awa work` arguments for the pooled mode of this test.
  std::vector<std::string> work_args(std::vector<std::string> args) const {
    args.insert(args.end(), {"--database-url", pooled_url_, "--pooled", "--poll-ms", "100"});
    if (direct()) args.insert(args.end(), {"--direct-url", database_url()});
    return args;
  }
  // Who leads the schema's maintenance: an advisory lock on the direct URL, or the lease.
  int leader_pid() { return direct() ? leader_os_pid() : lease_holder_os_pid(); }
};

TEST_P(PoolerRuntimeTest, ThreeThousandJobsOverThreeShardsFinishExactlyOnce) {
  set_shards("bulk", 3);
  Client client(pooled());
  std::atomic<int> handled{0};
  client.register_worker("noop", [&](JobContext&) {
    ++handled;
    return JobResult::completed();
  });
  client.add_queue(polled_queue("bulk", 8));
  const auto o = pooled();
  client.start();
  // The runtime really is a client of the pooler: claimer 0's claim connection and the
  // pool's (the self-test's) at least, and poll-only also the maintenance connection (the
  // second claimer connects once the queue is busy)...
  const int expected = direct() ? 2 : 3;
  ASSERT_TRUE(eventually(
      [&] { return pooler_clients(pooled_url_, o.application_name) >= expected; }, seconds(10)))
      << pooler_clients(pooled_url_, o.application_name);
  // ...and with a direct URL, the client's one listener LISTENs on a direct session (its
  // claimers claim through the pooler).
  if (direct()) {
    ASSERT_TRUE(eventually(
        [&] {
          return count(fmt::format("SELECT count(*) FROM pg_stat_activity WHERE "
                                   "application_name = '{}' AND query LIKE 'LISTEN %'",
                                   o.application_name)) == 1;
        },
        seconds(10)));
  }
  // Enqueued through the client: its pool, i.e. through the pooler.
  for (int batch = 0; batch < 6; ++batch) {
    std::vector<NewJob> jobs(500, NewJob("noop", nlohmann::json::object(), on_queue("bulk")));
    client.insert_many(jobs);
  }
  ASSERT_TRUE(eventually([&] { return client.stats().completed >= 3000; }, seconds(120)))
      << "completed " << client.stats().completed;
  client.stop();
  const auto s = client.stats();
  EXPECT_EQ(s.claimed, 3000U);
  EXPECT_EQ(s.completed, 3000U);
  EXPECT_EQ(s.stale_completions, 0U);
  EXPECT_EQ(handled.load(), 3000);
  EXPECT_EQ(count("SELECT count(*) FROM attempt_outcomes WHERE state = 'completed'"), 3000);
  EXPECT_EQ(count("SELECT count(DISTINCT job_id) FROM attempt_outcomes"), 3000);
  EXPECT_EQ(count("SELECT count(DISTINCT enqueue_shard) FROM attempt_outcomes"), 3);
}

TEST_P(PoolerRuntimeTest, RetryCancelAndPeriodicWork) {
  Client client(pooled());
  client.register_worker("flaky", [](JobContext& job) {
    if (job.attempt() == 1) return JobResult::retry_after(milliseconds(50), "first try fails");
    return JobResult::completed();
  });
  StopProbe probe;
  client.register_worker("wait", probe.handler());
  std::atomic<int> ticks{0};
  client.register_worker("tick", [&](JobContext&) {
    ++ticks;
    return JobResult::completed();
  });
  client.add_queue(polled_queue("work", 4));
  client.add_periodic("pooler-tick", "@every 1s", "tick", nlohmann::json::object(),
                      PeriodicOptions{.queue = "work"});
  const auto flaky = enqueue("work", 1, "flaky").at(0);
  const auto waiting = enqueue("work", 1, "wait").at(0);
  client.start();

  ASSERT_TRUE(probe.wait_started(seconds(10)));
  auto admin_conn = awa::Connection::connect(database_url());
  EXPECT_EQ(Admin(schema_).cancel_job(admin_conn, waiting), "running");
  // Direct: the awa:cancel notification; poll-only: the next heartbeat (200 ms).
  ASSERT_TRUE(eventually([&] { return probe.saw_stop(); }, seconds(10)));

  ASSERT_TRUE(eventually(
      [&] { return terminal(fmt::format("job_id = {} AND state = 'completed'", flaky)) == 1; },
      seconds(20)));
  ASSERT_TRUE(eventually([&] { return ticks.load() >= 2; }, seconds(20)));
  client.stop();
  EXPECT_EQ(count(fmt::format("SELECT count(*) FROM attempt_outcomes WHERE job_id = {} AND "
                              "state = 'retried' AND attempt = 1",
                              flaky)),
            1);
  EXPECT_EQ(terminal(fmt::format("job_id = {}", waiting)), 1);
  EXPECT_EQ(terminal(fmt::format("job_id = {} AND state = 'cancelled'", waiting)), 1);
  // Each fired occurrence is one job (a CAS on the schedule row, leader or not).
  const auto jobs = count("SELECT count(DISTINCT job_id) FROM ready_entries WHERE kind = 'tick'");
  EXPECT_GE(jobs, 2);
  EXPECT_EQ(count("SELECT count(DISTINCT metadata->>'occurrence') FROM ready_entries "
                  "WHERE kind = 'tick'"),
            jobs);
}

TEST_P(PoolerRuntimeTest, StaleAttemptIsRescuedAndRunAgain) {
  const auto orphan = enqueue("rescue", 1).at(0);
  // A claimer that went away: its attempt stays open until the leader rescues it.
  ASSERT_EQ(storage::consumer(*store_).claim(conn(), "rescue").size(), 1U);
  ClientOptions o = pooled();
  o.stale_after = milliseconds(1000);
  Client client(o);
  client.register_worker("noop", [](JobContext&) { return JobResult::completed(); });
  client.add_queue(polled_queue("rescue", 2));
  client.start();
  ASSERT_TRUE(eventually(
      [&] { return terminal(fmt::format("job_id = {} AND state = 'completed'", orphan)) == 1; },
      seconds(30)));
  client.stop();
  EXPECT_EQ(client.stats().rescued, 1U);
  EXPECT_EQ(
      count(fmt::format(
          "SELECT count(*) FROM attempt_outcomes WHERE job_id = {} AND state = 'rescued'", orphan)),
      1);
}

TEST_P(PoolerRuntimeTest, LeaderFailOverBetweenWorkerProcesses) {
  // Lease: the killed leader's lease runs out first (2 s).
  expect_leader_fail_over(
      work_args({"--queue", "failover:4", "--heartbeat-ms", "100", "--stale-ms", "1000",
                 "--maintenance-ms", "100"}),
      [&] { return leader_pid(); },
      [&](WorkerProcess& survivor) {
        const auto log = survivor.log();
        EXPECT_NE(log.find(direct() ? "notify self-test: ok" : "notify self-test: swallowed"),
                  std::string::npos)
            << log;
      });
}

INSTANTIATE_TEST_SUITE_P(Pooler, PoolerRuntimeTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? std::string("Direct") : std::string("PollOnly");
                         });

}  // namespace
}  // namespace awa::testing
