// Regression test: a second SIGTERM (or SIGINT) while `awa work` is in its graceful stop,
// waiting for a slow handler, ends the process promptly with 128 + the signal, instead
// of being ignored until the handler finishes or the grace period runs out. The job's
// attempt stays open for rescue: nothing is finalised by the forced exit.
#include <signal.h>

#include <chrono>
#include <string>

#include <gtest/gtest.h>

#include "runtime_support.hpp"

namespace awa::testing {
namespace {

class CliSignalsTest : public RuntimeTest {
 protected:
  // Starts `awa work` on one slow job and returns once the job has been claimed and the
  // process has begun its graceful stop after a first `first` signal.
  void start_and_begin_stop(WorkerProcess& w, int first) {
    ASSERT_TRUE(eventually(
        [&] { return count("SELECT coalesce(sum(n_items), 0) FROM claim_batches") >= 1; },
        seconds(30)))
        << w.log();
    ASSERT_EQ(::kill(w.pid(), first), 0);
    const std::string stopping = first == SIGINT ? "SIGINT received" : "SIGTERM received";
    ASSERT_TRUE(
        eventually([&] { return w.log().find(stopping) != std::string::npos; }, seconds(10)))
        << w.log();
    int status = 0;
    ASSERT_EQ(::waitpid(w.pid(), &status, WNOHANG), 0)
        << "exited after one signal; the handler was meant to hold the stop: " << w.log();
  }

  std::vector<std::string> args() const {
    // The grace period far exceeds the test's patience: only a forced exit ends in time.
    return {"--queue", "slow:1",          "--max-prefetch", "0", "--shutdown-timeout-ms",
            "60000",   "--no-maintenance"};
  }
};

TEST_F(CliSignalsTest, SecondSigtermDuringAGracefulStopEndsTheProcess) {
  enqueue("slow", 1, "sleep", nlohmann::json{{"ms", 120000}});
  WorkerProcess w(schema_, args());
  start_and_begin_stop(w, SIGTERM);
  if (HasFatalFailure()) return;
  const auto sent = Clock::now();
  EXPECT_EQ(w.terminate(seconds(5), SIGTERM), 128 + SIGTERM) << w.log();
  EXPECT_LT(Clock::now() - sent, seconds(5));
  EXPECT_NE(w.log().find("forced"), std::string::npos) << w.log();
  EXPECT_EQ(count("SELECT count(*) FROM open_attempts()"), 1) << "left open for rescue";
  // Nothing finished. A claim that had not reached its handler when the stop began is
  // handed back (an outcome 'snoozed') and may be claimed again by a claim already in
  // flight: on a loaded machine that happens, and is what the graceful stop should do.
  EXPECT_EQ(count("SELECT count(*) FROM attempt_outcomes WHERE state <> 'snoozed'"), 0);
}

TEST_F(CliSignalsTest, SigintThenSigintEndsTheProcessWith130) {
  enqueue("slow", 1, "sleep", nlohmann::json{{"ms", 120000}});
  WorkerProcess w(schema_, args());
  start_and_begin_stop(w, SIGINT);
  if (HasFatalFailure()) return;
  EXPECT_EQ(w.terminate(seconds(5), SIGINT), 128 + SIGINT) << w.log();
}

}  // namespace
}  // namespace awa::testing
