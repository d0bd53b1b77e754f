// Regression test: a completion flush failing with a server-wide SQLSTATE (a read-only
// server after a fail-over, a dropped database, a missing or ambiguous function, a feature
// the server refuses) is not the fault of any row. The batcher must neither bisect it nor
// drop the rows one by one: it keeps them, retries, and writes them all once the cause is
// gone — no attempt is finalised or abandoned meanwhile.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "awa/metrics.hpp"
#include "pg/pool.hpp"
#include "runtime/completion_batcher.hpp"
#include "runtime_support.hpp"
#include "storage/store_access.hpp"
#include "storage_support.hpp"

namespace awa::testing {
namespace {

// The value of awa_completion_flush_server_errors_total{sqlstate="<state>"}, 0 if absent.
std::uint64_t server_errors_counted(const std::string& state) {
  const auto text = metrics::default_registry().expose();
  const auto key =
      fmt::format("awa_completion_flush_server_errors_total{{sqlstate=\"{}\"}} ", state);
  const auto at = text.find(key);
  if (at == std::string::npos) return 0;
  return std::stoull(text.substr(at + key.size(), text.find('\n', at) - at - key.size()));
}

class ServerWideErrorTest : public StorageTest, public ::testing::WithParamInterface<const char*> {
 protected:
  std::vector<ClaimedEntry> seed_and_claim(int n) {
    std::vector<NewJob> jobs(static_cast<std::size_t>(n),
                             NewJob("w", nlohmann::json::object(), on_queue("sw")));
    storage::insert_many_copy(*store_, conn(), jobs);
    QueueStorage::ClaimOptions o;
    o.max_batch = n;
    return storage::consumer(*store_).claim(conn(), "sw", o);
  }

  // Moves the test schema's close_attempts aside. For 42883 that is the whole fault (the
  // function the completion statement names no longer exists); for the other states a
  // stand-in of the same signature raises the state, as the server would.
  void break_close_attempts(const std::string& state) {
    const auto r = conn().query(
        "SELECT p.oid::regprocedure::text, pg_get_function_identity_arguments(p.oid), "
        "pg_get_function_result(p.oid), pg_get_function_arguments(p.oid) FROM pg_proc p "
        "WHERE p.proname = 'close_attempts' AND p.pronamespace = $1::regnamespace",
        quoted_schema());
    ASSERT_EQ(r.rows(), 1);
    conn().exec(
        fmt::format("ALTER FUNCTION {} RENAME TO close_attempts_held", r.get<std::string>(0, 0)));
    held_args_ = r.get<std::string>(0, 1);
    if (state == "42883") return;
    // With the real one's defaults (pg_get_function_arguments), so that the batcher's call,
    // which leaves the defaulted parameters out, resolves to the stand-in.
    conn().exec(fmt::format(
        "CREATE FUNCTION close_attempts({}) RETURNS {} LANGUAGE plpgsql AS $f$ BEGIN "
        "RAISE EXCEPTION 'stand-in for a server-wide failure' USING ERRCODE = '{}'; END $f$",
        r.get<std::string>(0, 3), r.get<std::string>(0, 2), state));
  }

  void restore_close_attempts(const std::string& state) {
    if (state != "42883") conn().exec(fmt::format("DROP FUNCTION close_attempts({})", held_args_));
    conn().exec(
        fmt::format("ALTER FUNCTION close_attempts_held({}) RENAME TO close_attempts", held_args_));
  }

  std::string held_args_;
};

TEST_P(ServerWideErrorTest, CompletionsAreKeptAndWrittenOnceTheCauseIsGone) {
  const std::string state = GetParam();
  constexpr int kJobs = 8;
  const auto claimed = seed_and_claim(kJobs);
  ASSERT_EQ(claimed.size(), static_cast<std::size_t>(kJobs));
  const auto counted_before = server_errors_counted(state);
  break_close_attempts(state);

  pg::Pool pool(test_connect_options(), 2);
  runtime::CompletionBatcherOptions o;
  o.flush_interval = milliseconds(1);
  // Short, so a batcher that treated the state as transient would give up (drop) within
  // the test: server-wide states must not be bounded by it while the batcher runs.
  o.retry_for = milliseconds(1500);
  std::atomic<int> completed{0};
  runtime::CompletionBatcher batcher(pool, *store_, o,
                                     [&](const Completion&, const CompletionResult& r) {
                                       if (r.state == "completed") ++completed;
                                     });
  for (const auto& c : claimed) batcher.submit(Completion::of(c, Outcome::kCompleted));

  // Several failed flushes past retry_for, or (the bug) rows dropped.
  ASSERT_TRUE(eventually(
      [&] {
        const auto s = batcher.stats();
        return s.dropped > 0 ||
               (s.retries >= 4 && server_errors_counted(state) >= counted_before + 4);
      },
      seconds(15)))
      << "retries " << batcher.stats().retries << ", counted "
      << server_errors_counted(state) - counted_before;
  {
    const auto s = batcher.stats();
    EXPECT_EQ(s.dropped, 0U) << "rows dropped for a server-wide " << state;
    EXPECT_EQ(s.failed_flushes, 0U);
    EXPECT_EQ(s.splits, 0U) << "a server-wide " << state << " says nothing about a row";
    EXPECT_EQ(s.written, 0U);
    EXPECT_TRUE(s.last_failure.has_value()) << "held flushes make Client::readiness unready";
  }
  EXPECT_EQ(count("SELECT count(*) FROM open_attempts()"), kJobs) << "attempts closed meanwhile";
  EXPECT_EQ(count("SELECT count(*) FROM attempt_outcomes"), 0);

  restore_close_attempts(state);
  ASSERT_TRUE(eventually(
      [&] {
        return count("SELECT count(*) FROM attempt_outcomes WHERE state = 'completed'") == kJobs;
      },
      seconds(15)))
      << count("SELECT count(*) FROM attempt_outcomes WHERE state = 'completed'") << " of " << kJobs
      << " completed after the cause was removed";
  batcher.flush();
  const auto s = batcher.stats();
  EXPECT_EQ(s.written, static_cast<std::uint64_t>(kJobs));
  EXPECT_EQ(s.stale, 0U);
  EXPECT_EQ(s.dropped, 0U);
  EXPECT_EQ(completed.load(), kJobs);
  EXPECT_EQ(count("SELECT count(*) FROM open_attempts()"), 0);
}

INSTANTIATE_TEST_SUITE_P(States, ServerWideErrorTest,
                         ::testing::Values("25006", "57P04", "42725", "42883", "0A000"),
                         [](const auto& param) { return std::string("sqlstate_") + param.param; });

}  // namespace
}  // namespace awa::testing
