// External callbacks (issue 14; docs/scheduling.md, "External callbacks"): an attempt
// parked waiting_external is ended exactly once — by its callback, a racing callback,
// its timeout, or a cancel — and every loser is stale and changes nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "admin_jobs_support.hpp"
#include "awa/error.hpp"
#include "cli_runner.hpp"

namespace awa::testing {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;

class CallbackTest : public JobAdminTest {
 protected:
  std::optional<std::string> register_cb(const ClaimedEntry& e, milliseconds timeout) {
    return storage::consumer(*store_).callback(conn(), e, timeout, false);
  }
  std::optional<std::string> park(const ClaimedEntry& e,
                                  std::optional<milliseconds> timeout = hours(1)) {
    return storage::consumer(*store_).callback(conn(), e, timeout, true);
  }
  std::int64_t leases_of(JobId id) {
    return conn()
        .query("SELECT count(*) FROM leases WHERE job_id = $1", id)
        .get<std::int64_t>(0, 0);
  }
};

TEST_F(CallbackTest, ParkedAttemptWaitsThenItsCallbackCompletesItExactlyOnce) {
  const JobId id = enqueue("q");
  const auto e = claim_one("q", id);
  EXPECT_FALSE(admin().job(ac(), id)->callback_id);
  const auto registered = register_cb(e, hours(1));
  ASSERT_TRUE(registered);
  EXPECT_EQ(state_of(id), "running");  // registered, the handler still runs
  // An operator finds the id on the job (Admin::job, `awa job show`, the dashboard).
  EXPECT_EQ(admin().job(ac(), id)->callback_id, registered);
  const auto parked = park(e, std::nullopt);
  ASSERT_TRUE(parked);
  EXPECT_EQ(*parked, *registered);  // the same id on every call
  EXPECT_EQ(state_of(id), "waiting_external");
  EXPECT_EQ(admin().queue_counts(ac(), "q").running, 1);

  const auto r = admin().complete_external(ac(), *registered);
  ASSERT_FALSE(r.stale());
  EXPECT_EQ(*r.job_id, id);
  EXPECT_EQ(r.state, "completed");
  EXPECT_EQ(state_of(id), "completed");
  EXPECT_EQ(leases_of(id), 0);
  EXPECT_FALSE(admin().job(ac(), id)->callback_id);

  // Duplicate and late callbacks: stale, nothing changes.
  EXPECT_TRUE(admin().complete_external(ac(), *registered).stale());
  EXPECT_TRUE(admin().fail_external(ac(), *registered, "late").stale());
  EXPECT_FALSE(admin().heartbeat_external(ac(), *registered, hours(2)));
  EXPECT_EQ(state_of(id), "completed");
  // So is the handler's own result after the callback ended the attempt.
  EXPECT_EQ(finish(e, Outcome::kCompleted), "stale");
  EXPECT_EQ(admin().queue_counts(ac(), "q").completed, 1);
}

TEST_F(CallbackTest, ParkingWithoutRegisteringMakesAnId) {
  const JobId id = enqueue("q");
  const auto e = claim_one("q", id);
  const auto parked = park(e, hours(1));
  ASSERT_TRUE(parked);
  EXPECT_EQ(parked->size(), 36U);
  EXPECT_EQ(state_of(id), "waiting_external");
  EXPECT_EQ(admin().complete_external(ac(), *parked).state, "completed");
}

TEST_F(CallbackTest, ACallbackBeforeTheHandlerReturnsWinsAndTheParkIsStale) {
  const JobId id = enqueue("q");
  const auto e = claim_one("q", id);
  const auto cb = register_cb(e, hours(1));
  ASSERT_TRUE(cb);
  EXPECT_EQ(admin().complete_external(ac(), *cb).state, "completed");
  EXPECT_FALSE(park(e));                   // the attempt is closed: nothing to park
  EXPECT_FALSE(register_cb(e, hours(1)));  // nor to register again
  EXPECT_EQ(state_of(id), "completed");
}

TEST_F(CallbackTest, FailExternalRetriesWhileAttemptsRemainElseFails) {
  const JobId retried = enqueue(opts("q", 2, std::nullopt, 3));
  auto e = claim_one("q", retried);
  auto cb = park(e);
  ASSERT_TRUE(cb);
  auto r = admin().fail_external(ac(), *cb, "payment provider said no");
  EXPECT_EQ(r.state, "retried");
  EXPECT_EQ(state_of(retried), "retryable");
  const auto d = admin().job(ac(), retried);
  ASSERT_TRUE(d);
  ASSERT_EQ(d->errors.size(), 1U);
  EXPECT_EQ(d->errors[0].error, "payment provider said no");
  EXPECT_EQ(d->errors[0].attempt, 1);

  const JobId failed = enqueue(opts("q", 2, std::nullopt, 3));
  e = claim_one("q", failed);
  cb = park(e);
  ASSERT_TRUE(cb);
  r = admin().fail_external(ac(), *cb, "card stolen", /*retryable=*/false);
  EXPECT_EQ(r.state, "failed");
  EXPECT_EQ(state_of(failed), "failed");
}

TEST_F(CallbackTest, ACallbackThatNeverComesIsRescuedAtItsTimeoutAsAFailedAttempt) {
  const JobId id = enqueue("q");
  const auto e = claim_one("q", id);
  const auto cb = park(e, milliseconds(2000));
  ASSERT_TRUE(cb);
  // Both halves read the server's clock, the one rescue reads, rather than sleeping.
  const auto holds = [&](const std::string& condition) {
    return conn()
        .query("SELECT " + condition + " FROM leases WHERE job_id = $1", id)
        .get<bool>(0, 0);
  };
  const auto eventually_holds = [&](const std::string& condition) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!holds(condition)) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(milliseconds(5));
    }
    return true;
  };

  // Before the timeout nothing is rescued, however stale the heartbeat is: a rescue
  // counting heartbeats older than 1 ms, in a transaction whose now() (the time rescue
  // compares with) is past that and still before the timeout.
  ASSERT_TRUE(eventually_holds("clock_timestamp() > heartbeat_at + interval '1 ms'"));
  conn().exec("BEGIN");
  const bool before_timeout = holds("now() < callback_timeout_at");
  const bool heartbeat_stale = holds("heartbeat_at < now() - interval '1 ms'");
  const auto early = storage::consumer(*store_).rescue(conn(), milliseconds(1));
  conn().exec("COMMIT");
  ASSERT_TRUE(before_timeout) << "the rescue ran after the 2 s timeout: too slow to tell";
  ASSERT_TRUE(heartbeat_stale);
  EXPECT_TRUE(early.empty()) << early.front().why;

  // Once the server's clock has passed the timeout, the next rescue ends the attempt,
  // with a heartbeat nowhere near stale by its measure.
  ASSERT_TRUE(eventually_holds("clock_timestamp() > callback_timeout_at"));
  const auto rescued = storage::consumer(*store_).rescue(conn(), hours(1));
  ASSERT_EQ(rescued.size(), 1U);
  EXPECT_EQ(rescued[0].job_id, id);
  EXPECT_EQ(rescued[0].state, "rescued");
  EXPECT_EQ(rescued[0].why, "rescued: callback timed out");
  EXPECT_EQ(state_of(id), "retryable");
  const auto d = admin().job(ac(), id);
  ASSERT_TRUE(d);
  ASSERT_EQ(d->errors.size(), 1U);  // the attempt counted
  EXPECT_EQ(d->errors[0].error, "rescued: callback timed out");
  // The callback arriving after the timeout is stale.
  EXPECT_TRUE(admin().complete_external(ac(), *cb).stale());
  EXPECT_EQ(state_of(id), "retryable");
}

TEST_F(CallbackTest, HeartbeatExternalMovesTheTimeout) {
  const JobId id = enqueue("q");
  const auto e = claim_one("q", id);
  const auto cb = park(e, milliseconds(300));
  ASSERT_TRUE(cb);
  const auto job = admin().heartbeat_external(ac(), *cb, hours(1));
  ASSERT_TRUE(job);
  EXPECT_EQ(*job, id);
  std::this_thread::sleep_for(milliseconds(500));
  EXPECT_TRUE(storage::consumer(*store_).rescue(conn(), milliseconds(1)).empty());
  EXPECT_EQ(state_of(id), "waiting_external");
  // Without a new timeout it only marks the other system alive.
  EXPECT_TRUE(admin().heartbeat_external(ac(), *cb));
  EXPECT_EQ(admin().complete_external(ac(), *cb).state, "completed");
}

TEST_F(CallbackTest, ConcurrentCallbacksFinaliseOnce) {
  constexpr int kJobs = 5;
  constexpr int kCallers = 8;
  std::vector<std::string> ids;
  for (int j = 0; j < kJobs; ++j) {
    const JobId id = enqueue("q");
    const auto cb = park(claim_one("q", id));
    ASSERT_TRUE(cb);
    ids.push_back(*cb);
  }
  std::atomic<int> winners{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kCallers; ++t) {
    threads.emplace_back([&, t] {
      try {
        auto c = Connection::connect(database_url());
        for (const auto& id : ids) {
          const auto r = t % 2 == 0 ? admin().complete_external(c, id)
                                    : admin().fail_external(c, id, "racer", false);
          if (!r.stale()) ++winners;
        }
      } catch (const std::exception& e) {
        ++errors;
        ADD_FAILURE() << e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(winners.load(), kJobs);
  const auto c = admin().queue_counts(ac(), "q");
  EXPECT_EQ(c.completed + c.failed, kJobs);
  EXPECT_EQ(c.running, 0);
}

TEST_F(CallbackTest, CancellingAWaitingJobMakesItsCallbackStale) {
  const JobId id = enqueue("q");
  const auto cb = park(claim_one("q", id));
  ASSERT_TRUE(cb);
  EXPECT_EQ(admin().cancel_job(ac(), id), "running");
  EXPECT_EQ(state_of(id), "cancelled");
  EXPECT_TRUE(admin().complete_external(ac(), *cb).stale());
  EXPECT_EQ(state_of(id), "cancelled");
}

TEST_F(CallbackTest, AWaitingLeaseCarriedByAPruneKeepsItsCallbackId) {
  const JobId id = enqueue("q");
  const auto cb = park(claim_one("q", id));
  ASSERT_TRUE(cb);
  ASSERT_TRUE(admin().rotate(ac(), "lease").done);
  const auto pruned = admin().prune(ac(), "lease", /*carry=*/true);
  ASSERT_TRUE(pruned.done) << pruned.reason;
  EXPECT_EQ(pruned.rows_carried, 1);
  EXPECT_EQ(state_of(id), "waiting_external");
  EXPECT_EQ(admin().complete_external(ac(), *cb).state, "completed");
}

TEST_F(CallbackTest, BadInputIsRefusedBeforeTheDatabase) {
  const JobId id = enqueue("q");
  const auto e = claim_one("q", id);
  EXPECT_THROW(register_cb(e, milliseconds(0)), InvalidArgument);
  EXPECT_THROW(park(e, milliseconds(-5)), InvalidArgument);
  EXPECT_THROW(admin().complete_external(ac(), "not-a-uuid"), InvalidArgument);
  EXPECT_THROW(admin().fail_external(ac(), "0000", "x"), InvalidArgument);
  EXPECT_THROW(admin().heartbeat_external(ac(), "zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz"),
               InvalidArgument);
  // A well-formed id nobody handed out: stale, not an error.
  EXPECT_TRUE(admin().complete_external(ac(), "00000000-0000-4000-8000-000000000000").stale());
  EXPECT_EQ(state_of(id), "running");
  // A completion cannot carry "wait for callback": that is QueueStorage::wait_for_callback.
  EXPECT_THROW(finish(e, Outcome::kWaitForCallback), InvalidArgument);
  EXPECT_EQ(state_of(id), "running");
}

TEST_F(CallbackTest, TheCliAnswersCallbacksAndSaysWhenOneIsStale) {
  const JobId done = enqueue("q");
  const auto cb = park(claim_one("q", done));
  ASSERT_TRUE(cb);
  // The operator's way to the id: `awa job show` (text and JSON).
  auto r = run_cli("--schema " + schema_ + " job show " + std::to_string(done));
  EXPECT_NE(r.output.find("callback_id  " + *cb), std::string::npos) << r.output;
  r = run_cli("--schema " + schema_ + " job show " + std::to_string(done) + " --json");
  EXPECT_EQ(nlohmann::json::parse(r.output)["callback_id"], *cb) << r.output;
  const std::string awa = "--schema " + schema_ + " callback ";
  r = run_cli(awa + "heartbeat " + *cb + " --timeout-s 3600 --json");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(nlohmann::json::parse(r.output)["job_id"], done);
  r = run_cli(awa + "complete " + *cb + " --json");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["state"], "completed");
  EXPECT_EQ(j["stale"], false);
  r = run_cli(awa + "complete " + *cb);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("is stale"), std::string::npos) << r.output;
  EXPECT_EQ(state_of(done), "completed");

  const JobId failed = enqueue("q");
  const auto cb2 = park(claim_one("q", failed));
  ASSERT_TRUE(cb2);
  r = run_cli(awa + "fail " + *cb2 + " --error 'declined by a human' --no-retry");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("failed"), std::string::npos) << r.output;
  EXPECT_EQ(state_of(failed), "failed");

  r = run_cli(awa + "complete not-a-uuid");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("is not a UUID"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace awa::testing
