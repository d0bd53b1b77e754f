// The worker runtime (awa::Client, `awa work`) end to end: dispatch over shards, handler
// outcomes, cancellation, graceful shutdown, crash rescue, leader fail-over and pickup
// latency (docs/runtime.md).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "awa/admin.hpp"
#include "awa/client.hpp"
#include "awa/connection.hpp"
#include "runtime_support.hpp"
#include "storage/store_access.hpp"

namespace awa::testing {
namespace {

TEST_F(RuntimeTest, TenThousandJobsOverFourShardsFinishExactlyOnce) {
  set_shards("bulk", 4);
  enqueue("bulk", 5000);
  ClientOptions o = options();
  o.max_workers = 16;
  Client client(o);
  std::atomic<int> handled{0};
  client.register_worker("noop", [&](JobContext&) {
    ++handled;
    return JobResult::completed();
  });
  client.add_queue(queue("bulk", 16));
  client.start();
  enqueue("bulk", 5000);  // the second half arrives while the runtime runs (notifications)
  ASSERT_TRUE(eventually([&] { return client.stats().completed >= 10000; }, seconds(120)))
      << "completed " << client.stats().completed;
  client.stop();
  const auto s = client.stats();
  EXPECT_EQ(s.claimed, 10000U);
  EXPECT_EQ(s.completed, 10000U);
  EXPECT_EQ(s.stale_completions, 0U);
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(handled.load(), 10000);
  EXPECT_EQ(count("SELECT count(*) FROM attempt_outcomes WHERE state = 'completed'"), 10000);
  EXPECT_EQ(count("SELECT count(DISTINCT job_id) FROM attempt_outcomes"), 10000);
  EXPECT_EQ(count("SELECT count(*) FROM attempt_outcomes"), 10000);
  EXPECT_EQ(count("SELECT count(DISTINCT enqueue_shard) FROM attempt_outcomes"), 4);
}

TEST_F(RuntimeTest, HandlerOutcomesAreRecorded) {
  Client client(options());
  client.register_worker("throws", [](JobContext&) -> JobResult {
    throw std::runtime_error("kaboom from the handler");
  });
  client.register_worker("terminal",
                         [](JobContext&) { return JobResult::failed("nope, never", false); });
  client.register_worker("snooze",
                         [](JobContext&) { return JobResult::snooze(std::chrono::hours(1)); });
  client.add_queue(queue("outcomes", 4));
  const auto thrown = enqueue("outcomes", 1, "throws").at(0);
  const auto failed = enqueue("outcomes", 1, "terminal").at(0);
  const auto snoozed = enqueue("outcomes", 1, "snooze").at(0);
  const auto unknown = enqueue("outcomes", 1, "no_such_kind").at(0);
  client.start();
  ASSERT_TRUE(eventually(
      [&] {
        const auto s = client.stats();
        return s.retried >= 1 && s.failed >= 1 && s.snoozed >= 2;
      },
      seconds(20)));
  client.stop();

  // The throw is a retryable failure: back to deferred_jobs with the message kept (and,
  // once its backoff of at most a second has passed, promoted to a new ready row that
  // still carries it).
  EXPECT_EQ(count(fmt::format("SELECT count(*) FROM attempt_outcomes WHERE job_id = {} AND state = "
                              "'retried' AND error = 'kaboom from the handler' AND attempt = 1",
                              thrown)),
            1);
  EXPECT_EQ(
      count(fmt::format("SELECT count(*) FROM (SELECT errors FROM deferred_jobs WHERE job_id = "
                        "{0} UNION ALL SELECT errors FROM ready_entries WHERE job_id = {0} "
                        "AND run_lease = 1) j WHERE errors::text LIKE '%kaboom from the handler%'",
                        thrown)),
      1);
  EXPECT_EQ(count(fmt::format("SELECT count(*) FROM attempt_outcomes WHERE job_id = {} AND state = "
                              "'failed' AND error = 'nope, never'",
                              failed)),
            1);
  EXPECT_EQ(count(fmt::format(
                "SELECT count(*) FROM attempt_outcomes WHERE job_id = {} AND state = 'snoozed'",
                snoozed)),
            1);
  EXPECT_EQ(count(fmt::format("SELECT count(*) FROM deferred_jobs WHERE job_id = {}", snoozed)), 1);
  // A kind this worker does not know goes back to the queue, its attempt not consumed.
  EXPECT_EQ(count(fmt::format("SELECT count(*) FROM attempt_outcomes WHERE job_id = {} AND state = "
                              "'snoozed' AND error = 'no worker registered for kind no_such_kind "
                              "in awa_tests_runtime'",
                              unknown)),
            1);
  EXPECT_EQ(count(fmt::format("SELECT count(*) FROM attempt_outcomes WHERE job_id = {} AND state "
                              "IN ('failed', 'dlq')",
                              unknown)),
            0);
}

TEST_F(RuntimeTest, UnknownKindWaitsForAWorkerThatKnowsIt) {
  // Regression (issue 10, defect 7): during a rolling deploy an old worker used to fail
  // every job of a kind it did not know, terminally. Now the job goes back to the queue
  // with a delay and the new worker runs it; no attempt is consumed.
  const auto id = enqueue("deploy", 1, "new_kind", nlohmann::json::object(), 1).at(0);
  {
    Client old_worker(options());
    old_worker.register_worker("old_kind", [](JobContext&) { return JobResult::completed(); });
    old_worker.add_queue(queue("deploy", 2));
    old_worker.start();
    ASSERT_TRUE(eventually([&] { return old_worker.stats().snoozed >= 1; }, seconds(20)));
    old_worker.stop();
    EXPECT_EQ(old_worker.stats().failed, 0U);
  }
  EXPECT_EQ(count(fmt::format("SELECT count(*) FROM deferred_jobs WHERE job_id = {} AND "
                              "reason = 'snooze' AND attempt = 0",
                              id)),
            1);
  Client new_worker(options());
  std::atomic<int> ran{0};
  new_worker.register_worker("new_kind", [&](JobContext& job) {
    EXPECT_EQ(job.entry().attempt, 1);  // the snooze gave its attempt back
    ++ran;
    return JobResult::completed();
  });
  new_worker.add_queue(queue("deploy", 2));
  new_worker.start();
  ASSERT_TRUE(eventually([&] { return new_worker.stats().completed >= 1; }, seconds(20)));
  new_worker.stop();
  EXPECT_EQ(ran.load(), 1);
  EXPECT_EQ(terminal(fmt::format("job_id = {} AND state = 'completed'", id)), 1);
}

TEST_F(RuntimeTest, CancelFiresTheRunningHandlersStopToken) {
  Client client(options());
  StopProbe probe;
  client.register_worker("wait", probe.handler());
  client.add_queue(queue("cancel", 2));
  const auto id = enqueue("cancel", 1, "wait").at(0);
  client.start();
  ASSERT_TRUE(probe.wait_started(seconds(10)));
  auto admin_conn = awa::Connection::connect(database_url());
  EXPECT_EQ(Admin(schema_).cancel_job(admin_conn, id), "running");
  ASSERT_TRUE(eventually([&] { return probe.saw_stop(); }, seconds(5)));
  ASSERT_TRUE(eventually([&] { return client.stats().stale_completions >= 1; }, seconds(5)));
  client.stop();
  EXPECT_EQ(terminal(fmt::format("job_id = {}", id)), 1);
  EXPECT_EQ(count(fmt::format("SELECT count(*) FROM attempt_outcomes WHERE job_id = {}", id)), 1);
  EXPECT_EQ(
      count(fmt::format(
          "SELECT count(*) FROM attempt_outcomes WHERE job_id = {} AND state = 'cancelled'", id)),
      1);
}

TEST_F(RuntimeTest, SetProgressMaterialisesALeaseWithTheProgress) {
  Client client(options());
  std::mutex mu;
  std::condition_variable cv;
  bool reported = false;
  bool release = false;
  client.register_worker("progress", [&](JobContext& job) {
    job.set_progress(50, "half way");
    std::unique_lock lock(mu);
    reported = true;
    cv.notify_all();
    cv.wait_for(lock, seconds(20), [&] { return release; });  // bounded
    return JobResult::completed();
  });
  client.add_queue(queue("progress", 1));
  const auto id = enqueue("progress", 1, "progress").at(0);
  client.start();
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, seconds(10), [&] { return reported; }));
  }
  EXPECT_EQ(
      count(fmt::format("SELECT count(*) FROM leases WHERE job_id = {} AND "
                        "progress = '{{\"percent\": 50.0, \"message\": \"half way\"}}'::jsonb",
                        id)),
      1);
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  ASSERT_TRUE(eventually([&] { return client.stats().completed == 1; }, seconds(10)));
  client.stop();
  EXPECT_EQ(terminal(fmt::format("job_id = {} AND state = 'completed'", id)), 1);
}

// Sleeps `ms`, returning early (retryable) when the stop token fires.
JobResult sleep_handler(JobContext& job, milliseconds ms) {
  std::mutex m;
  std::condition_variable_any w;
  std::unique_lock lock(m);
  if (w.wait_for(lock, job.stop_token(), ms, [] { return false; }) ||
      job.stop_token().stop_requested())
    return JobResult::failed("interrupted", true);
  return JobResult::completed();
}

TEST_F(RuntimeTest, GracefulShutdownUnderLoadLosesNothing) {
  constexpr int kJobs = 2000;
  const auto ids = enqueue("graceful", kJobs, "sleep");
  ClientOptions o = options();
  o.stale_after = milliseconds(500);
  o.heartbeat_interval = milliseconds(100);
  o.maintenance_interval = milliseconds(100);
  {
    Client first(o);
    first.register_worker("sleep", [](JobContext& j) { return sleep_handler(j, milliseconds(5)); });
    first.add_queue(queue("graceful", 16));
    first.start();
    ASSERT_TRUE(eventually([&] { return first.stats().completed >= 300; }, seconds(60)));
    first.stop();  // mid-run: in-flight handlers finish, completions flush
    const auto s = first.stats();
    EXPECT_LT(s.completed, static_cast<std::uint64_t>(kJobs));
    EXPECT_EQ(s.running, 0);
    EXPECT_EQ(s.prefetched, 0);
    // Every handler that ran reported, every report reached the database, and every
    // claimed job that never started was handed back.
    EXPECT_EQ(s.claimed, s.completed + s.retried + s.stale_completions + s.released);
  }
  {
    Client second(o);
    second.register_worker("sleep",
                           [](JobContext& j) { return sleep_handler(j, milliseconds(5)); });
    second.add_queue(queue("graceful", 16));
    second.start();
    ASSERT_TRUE(eventually([&] { return terminal() >= kJobs; }, seconds(90)))
        << "terminal " << terminal();
    second.stop();
  }
  EXPECT_EQ(terminal(), kJobs);
  EXPECT_EQ(count("SELECT count(DISTINCT job_id) FROM attempt_outcomes WHERE state IN "
                  "('completed','failed','cancelled','dlq')"),
            kJobs);
  EXPECT_EQ(count("SELECT count(*) FROM attempt_outcomes WHERE state = 'completed'"), kJobs);
  EXPECT_EQ(count("SELECT count(*) FROM deferred_jobs"), 0);
  EXPECT_EQ(static_cast<std::int64_t>(ids.size()), kJobs);
}

TEST_F(RuntimeTest, KilledWorkerProcessJobsAreRescuedAndCompletedOnce) {
  constexpr int kJobs = 40;
  enqueue("killed", kJobs, "sleep", nlohmann::json{{"ms", 300}});
  {
    WorkerProcess victim(schema_, {"--queue", "killed:8", "--heartbeat-ms", "100", "--stale-ms",
                                   "1000", "--maintenance-ms", "100", "--no-maintenance"});
    ASSERT_TRUE(eventually(
        [&] { return count("SELECT coalesce(sum(n_items), 0) FROM claim_batches") >= 8; },
        seconds(30)))
        << victim.log();
    const auto app = fmt::format("awa-work-{}", victim.pid());
    victim.kill9();
    // A statement the victim sent just before dying (a claim) may still commit: count
    // the open attempts once its backends are gone.
    ASSERT_TRUE(eventually(
        [&] {
          return count("SELECT count(*) FROM pg_stat_activity WHERE application_name = '" + app +
                       "'") == 0;
        },
        seconds(30)));
  }
  const auto open_at_kill = count("SELECT count(*) FROM open_attempts()");
  EXPECT_GT(open_at_kill, 0);

  ClientOptions o = options();
  o.stale_after = milliseconds(1000);
  o.heartbeat_interval = milliseconds(100);
  Client rescuer(o);
  rescuer.register_worker("sleep", [](JobContext& j) {
    return sleep_handler(j, milliseconds(j.args().value("ms", 0)));
  });
  rescuer.add_queue(queue("killed", 16));
  rescuer.start();
  ASSERT_TRUE(eventually([&] { return terminal() >= kJobs; }, seconds(60)))
      << "terminal " << terminal();
  rescuer.stop();
  EXPECT_EQ(count("SELECT count(*) FROM attempt_outcomes WHERE state = 'completed'"), kJobs);
  EXPECT_EQ(count("SELECT count(DISTINCT job_id) FROM attempt_outcomes WHERE state = 'completed'"),
            kJobs);
  EXPECT_EQ(count("SELECT count(*) FROM attempt_outcomes WHERE state = 'rescued'"), open_at_kill);
  EXPECT_EQ(rescuer.stats().rescued, static_cast<std::uint64_t>(open_at_kill));
}

TEST_F(RuntimeTest, LeaderFailOverPromotesAndRescues) {
  expect_leader_fail_over(
      {"--queue", "failover:4", "--heartbeat-ms", "100", "--stale-ms", "1000", "--maintenance-ms",
       "100"},
      [&] { return leader_os_pid(); }, [](WorkerProcess&) {});
}

TEST_F(RuntimeTest, IdleWorkerPicksUpNewJobsQuickly) {
  constexpr int kJobs = 200;
  std::mutex mu;
  std::map<JobId, Clock::time_point> started;  // guarded by mu
  Client client(options());
  client.register_worker("noop", [&](JobContext& job) {
    const auto now = Clock::now();
    std::lock_guard lock(mu);
    started.emplace(job.job_id(), now);
    return JobResult::completed();
  });
  client.add_queue(queue("pickup", 8));  // poll interval 1 s: only notifications are fast
  client.start();
  std::map<JobId, Clock::time_point> committed;
  for (int i = 0; i < kJobs; ++i) {
    const auto id = storage::insert_many(
        *store_, conn(),
        std::vector<NewJob>{NewJob("noop", nlohmann::json::object(), on_queue("pickup"))});
    committed.emplace(id.at(0), Clock::now());
    // Paces the producer like an interactive one (5..10 ms apart); not for correctness.
    std::this_thread::sleep_for(milliseconds(5 + i % 6));
  }
  ASSERT_TRUE(eventually(
      [&] {
        std::lock_guard lock(mu);
        return started.size() >= static_cast<std::size_t>(kJobs);
      },
      seconds(30)));
  client.stop();
  std::vector<double> lat_ms;
  {
    std::lock_guard lock(mu);
    for (const auto& [id, t] : committed) {
      // The handler may start before the producer sees its commit acknowledged.
      lat_ms.push_back(
          std::max(0.0, std::chrono::duration<double, std::milli>(started.at(id) - t).count()));
    }
  }
  std::sort(lat_ms.begin(), lat_ms.end());
  const auto pct = [&](double p) {
    return lat_ms[std::min(lat_ms.size() - 1,
                           static_cast<std::size_t>(p * static_cast<double>(lat_ms.size())))];
  };
  std::printf(
      "idle pickup latency over %d jobs: p50 %.2f ms, p95 %.2f ms, p99 %.2f ms, max %.2f ms\n",
      kJobs, pct(0.50), pct(0.95), pct(0.99), lat_ms.back());
  // What this checks is that notifications, not the 1 s poll, start the jobs: polling
  // would spread pickups over 0..1000 ms (p95 near 950 ms). The bound leaves room for a
  // loaded 2-core CI machine (p95 50-65 ms seen there); the latency itself is measured
  // by `scripts/bench e2e` (docs/benchmarks.md), not asserted here.
  EXPECT_LT(pct(0.95), 250.0);
}

}  // namespace
}  // namespace awa::testing
