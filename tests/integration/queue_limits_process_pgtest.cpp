// Issue 14's acceptance tests for the limits, across real worker processes
// (tests/workers/interval_worker.cpp: the runtime through the public API, each handler
// recording its interval by the database server's clock, one clock for all processes):
//   - 4 processes of 10 workers each, global_max_workers 5: never more than 5 handlers
//     at once, the limit reached (so it is the binding constraint), every job once;
//   - 2 processes, max_rate 20/s and burst 5: starts within the bucket's bound over every
//     window, and the drain as long as the rate makes it.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "awa/admin.hpp"
#include "awa/connection.hpp"
#include "runtime_support.hpp"

namespace awa::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class QueueLimitsProcessTest : public RuntimeTest {
 protected:
  void SetUpSchema() override {
    RuntimeTest::SetUpSchema();
    conn().exec(
        "CREATE TABLE limit_intervals (job_id bigint NOT NULL, attempt integer NOT NULL, "
        "pid integer NOT NULL, started_at timestamptz NOT NULL, ended_at timestamptz, "
        "PRIMARY KEY (job_id, attempt))");
  }

  void configure(const std::string& queue, const QueueConfigChange& c) {
    auto pub = Connection::connect(database_url());
    Admin(schema_).configure_queue(pub, queue, c);
  }

  std::vector<std::unique_ptr<AwaProcess>> start_workers(int n, const std::string& queue,
                                                         int max_workers) {
    std::vector<std::unique_ptr<AwaProcess>> out;
    for (int i = 0; i < n; ++i) {
      out.push_back(std::make_unique<AwaProcess>(
          AWA_INTERVAL_WORKER_PATH,
          std::vector<std::string>{schema_, queue, std::to_string(max_workers)}, schema_));
    }
    return out;
  }

  // Waits (bounded) until `jobs` intervals have ended and as many jobs completed.
  bool drained(int jobs, milliseconds timeout) {
    return eventually(
        [&] {
          return count("SELECT count(*) FROM limit_intervals WHERE ended_at IS NOT NULL") >= jobs &&
                 terminal("state = 'completed'") >= jobs;
        },
        timeout);
  }

  static void stop(std::vector<std::unique_ptr<AwaProcess>>& workers) {
    for (auto& w : workers) EXPECT_EQ(w->terminate(seconds(20)), 0) << w->log();
  }
};

TEST_F(QueueLimitsProcessTest, FourProcessesNeverRunMoreThanTheGlobalLimit) {
  constexpr int kJobs = 100;
  QueueConfigChange c;
  c.global_max_workers = 5;
  configure("gq", c);
  enqueue("gq", kJobs, "interval", {{"ms", 40}});

  auto workers = start_workers(4, "gq", 10);
  ASSERT_TRUE(drained(kJobs, seconds(60)))
      << count("SELECT count(*) FROM limit_intervals WHERE ended_at IS NOT NULL") << " of " << kJobs
      << " ran";
  stop(workers);

  EXPECT_EQ(count("SELECT count(*) FROM limit_intervals"), kJobs) << "each job ran once";
  EXPECT_EQ(count("SELECT count(DISTINCT job_id) FROM limit_intervals"), kJobs);
  EXPECT_EQ(terminal("state = 'completed'"), kJobs);
  EXPECT_EQ(terminal(), kJobs);
  // Handlers running at each start (itself included), by the server's clock.
  const auto most = count(
      "SELECT max(n) FROM (SELECT (SELECT count(*) FROM limit_intervals o "
      "WHERE o.started_at <= s.started_at AND o.ended_at > s.started_at) AS n "
      "FROM limit_intervals s) AS x");
  EXPECT_LE(most, 5) << "more handlers at once than global_max_workers";
  EXPECT_EQ(most, 5) << "the limit never bound: 40 workers could have run them all";
  EXPECT_GE(count("SELECT count(DISTINCT pid) FROM limit_intervals"), 2)
      << "the test is about several processes sharing one limit";
}

TEST_F(QueueLimitsProcessTest, TwoProcessesShareOneRate) {
  constexpr int kJobs = 40;
  constexpr double kRate = 20;
  constexpr int kBurst = 5;
  QueueConfigChange c;
  c.max_rate = kRate;
  c.burst = kBurst;
  configure("rq", c);
  enqueue("rq", kJobs, "interval", {{"ms", 0}});

  auto workers = start_workers(2, "rq", 10);
  ASSERT_TRUE(drained(kJobs, seconds(60)));
  stop(workers);
  EXPECT_EQ(count("SELECT count(*) FROM limit_intervals"), kJobs);

  // Over every window [start i, start j] of the sorted starts: j - i + 1 starts, at most
  // the burst plus what the rate refills in the window widened by kSlack. The rate binds
  // claims; a handler starts some time after its claim (a free worker thread, its first
  // connection), which can bunch starts together or delay the first ones. Without the
  // limit all 40 start within a few hundred milliseconds and both checks fail.
  constexpr double kSlack = 0.5;
  const auto over = count(
      "WITH s AS (SELECT started_at AS t, row_number() OVER (ORDER BY started_at) AS k "
      "FROM limit_intervals) "
      "SELECT count(*) FROM s a JOIN s b ON b.k > a.k "
      "WHERE b.k - a.k + 1 > " +
      std::to_string(kBurst) + " + " + std::to_string(kRate) +
      " * (extract(epoch FROM b.t - a.t) + " + std::to_string(kSlack) + ")");
  EXPECT_EQ(over, 0) << "windows with more starts than burst + rate x (window + slack)";
  // The drain: (jobs - burst) / rate = 1.75 s at least, less the same slack.
  const auto span_ms = count(
      "SELECT (extract(epoch FROM max(started_at) - min(started_at)) * 1000)::bigint "
      "FROM limit_intervals");
  EXPECT_GE(span_ms, static_cast<std::int64_t>(((kJobs - kBurst) / kRate - kSlack) * 1000));
  EXPECT_EQ(count("SELECT count(DISTINCT pid) FROM limit_intervals"), 2)
      << "both processes claimed: one bucket for both";
}

}  // namespace
}  // namespace awa::testing
