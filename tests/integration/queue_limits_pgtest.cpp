// Rate limits and the global concurrency limit per queue (issue 14), at the claim:
// claim_ready_runtime caps a claim by the queue's open attempts (global_max_workers) and
// by its token bucket (max_rate, burst), for every claimer of the database; the admin API
// configures, shows and clears them. The cross-process tests are in
// queue_limits_process_pgtest.cpp.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "awa/admin.hpp"
#include "awa/connection.hpp"
#include "awa/error.hpp"
#include "cli_runner.hpp"
#include "runtime_support.hpp"
#include "storage/store_access.hpp"

namespace awa::testing {
namespace {

using std::chrono::milliseconds;

class QueueLimitsTest : public RuntimeTest {
 protected:
  void SetUpSchema() override {
    RuntimeTest::SetUpSchema();
    pub_ = std::make_unique<Connection>(Connection::connect(database_url()));
    admin_ = std::make_unique<Admin>(schema_);
  }

  QueueSettings configure(const std::string& queue, const QueueConfigChange& c) {
    return admin_->configure_queue(*pub_, queue, c);
  }

  std::vector<ClaimedEntry> claim(pg::Connection& c, const std::string& queue, int max_batch) {
    QueueStorage::ClaimOptions o;
    o.max_batch = max_batch;
    return storage::consumer(*store_).claim(c, queue, o);
  }

  void complete(pg::Connection& c, const std::vector<ClaimedEntry>& entries) {
    std::vector<Completion> done;
    for (const auto& e : entries) done.push_back(Completion::of(e, Outcome::kCompleted));
    storage::consumer(*store_).complete(c, done);
  }

  std::unique_ptr<Connection> pub_;
  std::unique_ptr<Admin> admin_;
};

TEST_F(QueueLimitsTest, GlobalLimitCapsClaimsUntilAnAttemptCloses) {
  enqueue("gl", 10);
  QueueConfigChange c;
  c.global_max_workers = 3;
  EXPECT_EQ(configure("gl", c).global_max_workers, 3);

  const auto first = claim(conn(), "gl", 10);
  EXPECT_EQ(first.size(), 3U);
  EXPECT_TRUE(claim(conn(), "gl", 10).empty()) << "3 attempts open: the limit is reached";

  complete(conn(), {first[0]});
  const auto second = claim(conn(), "gl", 10);
  EXPECT_EQ(second.size(), 1U) << "one completion frees one slot";
  EXPECT_TRUE(claim(conn(), "gl", 10).empty());

  // A release (a worker handing back unstarted jobs) closes the attempt too; the job is
  // available again at once.
  EXPECT_EQ(storage::consumer(*store_).release(conn(), std::vector<ClaimedEntry>{first[1]}, "t"),
            1);
  EXPECT_EQ(claim(conn(), "gl", 10).size(), 1U);

  // Clearing the limit: the old path again.
  c.global_max_workers = 0;
  EXPECT_FALSE(configure("gl", c).global_max_workers.has_value());
  EXPECT_EQ(claim(conn(), "gl", 10).size(), 6U);
}

TEST_F(QueueLimitsTest, ConcurrentClaimersNeverHoldMoreThanTheLimit) {
  // Each thread claims on its own connection and holds what it claimed for a moment
  // before completing it. An attempt counts as held from after its claim committed until
  // before its completion is sent, inside its open interval in the database, so more than
  // 3 held at once would prove more than 3 open at once.
  constexpr int kJobs = 60;
  constexpr int kLimit = 3;
  enqueue("cc", kJobs);
  QueueConfigChange c;
  c.global_max_workers = kLimit;
  configure("cc", c);

  std::mutex mu;
  int held = 0;
  int most = 0;
  std::atomic<int> done{0};
  std::atomic<bool> failed{false};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  const auto run = [&] {
    try {
      auto c2 = connect_new();
      while (done.load() < kJobs && std::chrono::steady_clock::now() < deadline) {
        const auto got = claim(c2, "cc", kLimit);
        const int n = static_cast<int>(got.size());
        if (n == 0) {
          std::this_thread::sleep_for(milliseconds(1));
          continue;
        }
        {
          std::lock_guard lock(mu);
          held += n;
          most = std::max(most, held);
        }
        std::this_thread::sleep_for(milliseconds(3));
        {
          std::lock_guard lock(mu);
          held -= n;
        }
        complete(c2, got);
        done += n;
      }
    } catch (const std::exception& e) {
      failed = true;
      ADD_FAILURE() << e.what();
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back(run);
  for (auto& t : threads) t.join();
  ASSERT_FALSE(failed.load());
  EXPECT_EQ(done.load(), kJobs);
  EXPECT_LE(most, kLimit);
  EXPECT_EQ(most, kLimit) << "the limit never bound: the test proves nothing";
  EXPECT_EQ(terminal("queue = 'cc' AND state = 'completed'"), kJobs);
}

TEST_F(QueueLimitsTest, TokenBucketAllowsABurstThenRefillsAtTheRate) {
  // Bounds, not timings: every refill happens inside the client-side interval measured
  // around the claims, so tokens refilled <= rate x that interval, however slow the
  // machine.
  constexpr double kRate = 4;  // a token every 250 ms
  enqueue("rt", 40);
  QueueConfigChange c;
  c.max_rate = kRate;
  c.burst = 5;
  const auto s = configure("rt", c);
  EXPECT_EQ(s.max_rate, kRate);
  EXPECT_EQ(s.burst, 5);

  const auto seconds_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(claim(conn(), "rt", 10).size(), 5U) << "a full bucket: the burst";
  const auto second = static_cast<double>(claim(conn(), "rt", 10).size());
  EXPECT_LE(second, std::floor(kRate * seconds_since(t0)))
      << "the bucket was empty: only what the rate refilled since";
  std::this_thread::sleep_for(milliseconds(300));
  const auto third = static_cast<double>(claim(conn(), "rt", 10).size());
  const double elapsed = seconds_since(t0);
  EXPECT_GE(second + third, 1) << "300 ms at 4/s refill a token";
  EXPECT_LE(third, 5) << "never more than the burst";
  EXPECT_LE(5 + second + third, 5 + std::floor(kRate * elapsed))
      << "claims over the test exceed burst + rate x time";
}

TEST_F(QueueLimitsTest, EmptyClaimCostsNoTokensAndDefaultBurstIsTheRateRoundedUp) {
  QueueConfigChange c;
  c.max_rate = 2.5;  // default burst 3; refills a token in 400 ms
  EXPECT_FALSE(configure("ec", c).burst.has_value());
  EXPECT_TRUE(claim(conn(), "ec", 10).empty());
  EXPECT_TRUE(claim(conn(), "ec", 10).empty());
  enqueue("ec", 10);
  EXPECT_EQ(claim(conn(), "ec", 10).size(), 3U) << "empty claims took no token";
  EXPECT_TRUE(claim(conn(), "ec", 10).empty());
}

TEST_F(QueueLimitsTest, UnlimitedQueueTouchesNoBucket) {
  enqueue("free", 5);
  EXPECT_EQ(claim(conn(), "free", 10).size(), 5U);
  EXPECT_EQ(count("SELECT count(*) FROM queue_rate_buckets"), 0);
}

TEST_F(QueueLimitsTest, GlobalLimitRefusesASnapshotOlderThanItsLock) {
  // Regression guard: under REPEATABLE READ the count would read the transaction's first
  // snapshot and miss claims committed while it waited for the lock.
  enqueue("rr", 2);
  QueueConfigChange c;
  c.global_max_workers = 1;
  configure("rr", c);
  conn().exec("BEGIN ISOLATION LEVEL REPEATABLE READ");
  try {
    claim(conn(), "rr", 1);
    ADD_FAILURE() << "claimed under REPEATABLE READ";
  } catch (const Error& e) {
    EXPECT_EQ(e.sqlstate(), "0A000") << e.what();
  }
  conn().exec("ROLLBACK");
  EXPECT_EQ(claim(conn(), "rr", 5).size(), 1U);
}

TEST_F(QueueLimitsTest, ConfigureValidatesNamingTheFieldAndTheTableChecksToo) {
  const auto refused = [&](QueueConfigChange ch, const std::string& field) {
    try {
      configure("v", ch);
      ADD_FAILURE() << field << ": accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  QueueConfigChange rate;
  rate.dlq_enabled = true;  // valid, must not be applied either
  rate.max_rate = -1;
  refused(rate, "max_rate");
  QueueConfigChange burst;
  burst.burst = 1000001;
  refused(burst, "burst");
  QueueConfigChange global;
  global.global_max_workers = -3;
  refused(global, "global_max_workers");
  EXPECT_EQ(count("SELECT count(*) FROM queue_meta"), 0) << "nothing written";

  // The database's own guard, for writers that bypass the API.
  for (const char* sql : {"INSERT INTO queue_meta (queue, max_rate) VALUES ('v', 0)",
                          "INSERT INTO queue_meta (queue, burst) VALUES ('v', 0)",
                          "INSERT INTO queue_meta (queue, global_max_workers) VALUES ('v', 0)"}) {
    try {
      conn().exec(sql);
      ADD_FAILURE() << sql << ": accepted";
    } catch (const ConstraintViolation& e) {
      EXPECT_EQ(e.sqlstate(), "23514") << sql;
    }
  }

  QueueConfigChange all;
  all.max_rate = 0.5;
  all.burst = 2;
  all.global_max_workers = 7;
  configure("v", all);
  const auto listed = admin_->queue_summary(*pub_, "v").settings;
  EXPECT_EQ(listed.max_rate, 0.5);
  EXPECT_EQ(listed.burst, 2);
  EXPECT_EQ(listed.global_max_workers, 7);
  QueueConfigChange clear;
  clear.max_rate = 0;
  clear.burst = 0;
  clear.global_max_workers = 0;
  const auto cleared = configure("v", clear);
  EXPECT_FALSE(cleared.max_rate || cleared.burst || cleared.global_max_workers);
}

TEST_F(QueueLimitsTest, CliConfiguresShowsAndClearsLimits) {
  const auto cli = [&](const std::string& args) {
    return run_cli("--schema " + schema_ + " " + args);
  };
  const auto set =
      cli("queue configure lq --max-rate 12.5 --burst 4 --global-max-workers 6 --json");
  ASSERT_EQ(set.exit_code, 0) << set.output;
  const auto j = nlohmann::json::parse(set.output);
  EXPECT_EQ(j["max_rate"], 12.5);
  EXPECT_EQ(j["burst"], 4);
  EXPECT_EQ(j["global_max_workers"], 6);

  const auto stats = cli("queue stats lq");
  EXPECT_EQ(stats.exit_code, 0) << stats.output;
  EXPECT_NE(stats.output.find("max_rate 12.5/s, burst 4, global_max_workers 6"), std::string::npos)
      << stats.output;
  const auto list = cli("queue list --json");
  ASSERT_EQ(list.exit_code, 0) << list.output;
  EXPECT_EQ(nlohmann::json::parse(list.output)[0]["global_max_workers"], 6) << list.output;

  const auto bad = cli("queue configure lq --dlq on --global-max-workers -1");
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_NE(bad.output.find("--global-max-workers must be between 1 and 100000"), std::string::npos)
      << bad.output;
  EXPECT_NE(bad.output.find("queue lq unchanged"), std::string::npos) << bad.output;
  const auto bad_rate = cli("queue configure lq --max-rate -2");
  EXPECT_EQ(bad_rate.exit_code, 1) << bad_rate.output;
  EXPECT_NE(bad_rate.output.find("--max-rate must be"), std::string::npos) << bad_rate.output;
  EXPECT_EQ(count("SELECT count(*) FROM queue_meta WHERE queue = 'lq' AND NOT dlq_enabled "
                  "AND max_rate = 12.5 AND burst = 4 AND global_max_workers = 6"),
            1)
      << "refused changes wrote nothing";

  const auto cleared = cli("queue configure lq --max-rate 0 --burst 0 --global-max-workers 0");
  EXPECT_EQ(cleared.exit_code, 0) << cleared.output;
  EXPECT_NE(cleared.output.find("limits:   none"), std::string::npos) << cleared.output;
}

}  // namespace
}  // namespace awa::testing
