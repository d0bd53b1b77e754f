// Exactly-once effects across real worker processes (tests/workers/credit_worker.cpp): a
// handler credits an account and completes its job in one transaction
// (JobContext::complete_in). Under SIGKILL of workers mid-transaction, deadline rescues
// that overtake running handlers, and a replay of every completion afterwards, each job's
// credit is applied exactly once and every job completes.
#include <chrono>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "awa/connection.hpp"
#include "awa/error.hpp"
#include "runtime_support.hpp"

namespace awa::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kJobs = 300;
constexpr int kAccounts = 10;
constexpr int kDeadlineMs = 700;

class ExactlyOnceProcessTest : public RuntimeTest {
 protected:
  void SetUpSchema() override {
    RuntimeTest::SetUpSchema();
    conn().exec(fmt::format(
        "CREATE TABLE accounts (id integer PRIMARY KEY, balance bigint NOT NULL); "
        "INSERT INTO accounts SELECT g, 0 FROM generate_series(0, {}) g; "
        "CREATE TABLE credits (job_id bigint NOT NULL, attempt integer NOT NULL, pid integer "
        "NOT NULL, claim_batch bigint NOT NULL, lane_seq bigint NOT NULL)",
        kAccounts - 1));
  }

  std::unique_ptr<AwaProcess> start_worker() {
    return std::make_unique<AwaProcess>(
        AWA_CREDIT_WORKER_PATH,
        std::vector<std::string>{schema_, "credit", "8", std::to_string(kDeadlineMs)}, schema_);
  }
};

TEST_F(ExactlyOnceProcessTest, EachCreditAppliesOnceUnderKillsRescuesAndReplays) {
  // One job in twelve is slow on its first attempt: past the deadline, so the rescue
  // closes the attempt while its handler still holds the transaction open.
  std::vector<NewJob> jobs;
  for (int i = 0; i < kJobs; ++i) {
    nlohmann::json args{{"account", i % kAccounts}, {"amount", 1 + i % 3}};
    if (i % 12 == 0) args["slow_ms"] = 4 * kDeadlineMs;
    jobs.emplace_back("credit", args, on_queue("credit"));
  }
  storage::insert_many(*store_, conn(), jobs);
  const std::int64_t expected_total =
      count("SELECT sum((args->>'amount')::bigint) FROM ready_entries WHERE kind = 'credit'");

  // Two workers killed with SIGKILL while they work, at random moments; a third finishes.
  std::mt19937 rng(std::random_device{}());
  int killed_mid_work = 0;
  for (int round = 0; round < 2; ++round) {
    auto w = start_worker();
    ASSERT_TRUE(eventually([&] { return count("SELECT count(*) FROM credits") > 0; }, seconds(30)))
        << w->log();
    std::this_thread::sleep_for(milliseconds(150 + rng() % 400));
    const auto before = terminal("state = 'completed'");
    w->kill9();
    if (before < kJobs) ++killed_mid_work;
  }
  EXPECT_EQ(killed_mid_work, 2) << "a kill came after the work was done: the test is too slow";
  auto last = start_worker();
  ASSERT_TRUE(eventually([&] { return terminal("state = 'completed'") == kJobs; }, seconds(120)))
      << terminal("state = 'completed'") << " of " << kJobs << " completed\n"
      << last->log();
  EXPECT_EQ(last->terminate(seconds(20)), 0) << last->log();

  // Exactly once: one credit per job, and the balances add up.
  EXPECT_EQ(count("SELECT count(*) FROM credits"), kJobs);
  EXPECT_EQ(count("SELECT count(*) FROM (SELECT job_id FROM credits GROUP BY job_id "
                  "HAVING count(*) > 1) d"),
            0);
  EXPECT_EQ(count("SELECT sum(balance) FROM accounts"), expected_total);
  // The faults happened: rescues of attempts whose handlers were still running (deadline)
  // or whose worker was killed (heartbeat), and slow first attempts that never credited.
  const auto rescued = count("SELECT count(*) FROM attempt_outcomes WHERE state = 'rescued'");
  EXPECT_GE(rescued, kJobs / 12) << "fewer rescues than slow jobs";
  EXPECT_EQ(count("SELECT count(*) FROM credits c JOIN ready_entries r USING (job_id) "
                  "WHERE c.attempt = 1 AND (r.args ? 'slow_ms')"),
            0)
      << "a slow first attempt credited although its attempt was rescued";
  EXPECT_EQ(count("SELECT count(*) FROM done_entries WHERE state = 'completed' AND result ? "
                  "'credited'"),
            kJobs);

  // A restarted worker replays every completion it had made (it lost their answers): each
  // is refused with 55000 and the replay's credit rolls back with it.
  auto c = Connection::connect(database_url());
  const auto made = conn().exec("SELECT job_id, claim_batch, lane_seq FROM credits");
  int refused = 0;
  for (int r = 0; r < made.rows(); ++r) {
    ClaimedEntry e;
    e.job_id = made.get<std::int64_t>(r, 0);
    e.claim_batch = made.get<std::int64_t>(r, 1);
    e.lane_seq = made.get<std::int64_t>(r, 2);
    Transaction tx(c);
    c.execute(fmt::format("UPDATE {}.accounts SET balance = balance + 1000 WHERE id = 0", schema_));
    try {
      store_->finalize_in(c, e);
      tx.commit();
    } catch (const Error& err) {
      if (err.sqlstate() == "55000") ++refused;
    }
  }
  EXPECT_EQ(refused, kJobs);
  EXPECT_EQ(count("SELECT sum(balance) FROM accounts"), expected_total);
  std::cout << fmt::format("exactly-once: {} jobs, {} rescued attempts, {} replays refused\n",
                           kJobs, rescued, refused);
}

}  // namespace
}  // namespace awa::testing
