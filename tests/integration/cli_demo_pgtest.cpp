// `awa demo` (make demo): the sample workload ends with exact outcomes in the database;
// with --serve the dashboard comes up on the same schema, shows the work, keeps new jobs
// arriving, and a SIGINT stops everything gracefully. `--jobs 0 --serve` (what make demo
// leaves running) is the trickle alone, and it must keep every kind of work moving.
#include <httplib.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include <nlohmann/json.hpp>

#include "awa/admin.hpp"
#include "cli_runner.hpp"
#include "runtime_support.hpp"

namespace awa::testing {
namespace {

using ::testing::HasSubstr;

class CliDemoTest : public RuntimeTest {};

TEST_F(CliDemoTest, WorksItsWorkloadToExactOutcomes) {
  const auto r = run_cli("--schema " + schema_ + " demo");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("summary: 2000 jobs"));
  auto conn = Connection::connect(database_url());
  const auto c = Admin(schema_).queue_counts(conn, "demo");
  // 1 job in 100 always fails and goes to the DLQ; flaky ones fail once, then complete.
  EXPECT_EQ(c.completed, 1980);
  EXPECT_EQ(c.dlq, 20);
  EXPECT_EQ(c.available + c.running + c.scheduled + c.retryable, 0);
  // The side show: the periodic job fired and ran, the callback job waited and its
  // callback completed it (once), and the demo's schedule is gone with it.
  EXPECT_THAT(r.output, HasSubstr("periodic: demo-tick (@every 1s) fired and ran"));
  EXPECT_THAT(r.output, HasSubstr("is waiting_external on callback"));
  EXPECT_THAT(r.output, HasSubstr("Admin::complete_external -> completed; the same callback "
                                  "again -> stale (no double finalise)"));
  const auto side = Admin(schema_).queue_counts(conn, "demo-side");
  EXPECT_GE(side.completed, 2);  // the callback job and at least one tick
  EXPECT_EQ(side.running, 0);
  EXPECT_EQ(count("SELECT count(*) FROM periodic_jobs"), 0);
}

TEST_F(CliDemoTest, ServeKeepsTheDashboardUpWithNewWorkUntilSigint) {
  AwaProcess demo(schema_, {"demo", "--serve", "--addr", "127.0.0.1:0"});
  const std::regex listening(R"(listening on http://127\.0\.0\.1:(\d+)/)");
  int port = 0;
  ASSERT_TRUE(eventually(
      [&] {
        std::smatch m;
        const std::string log = demo.log();
        if (!std::regex_search(log, m, listening)) return false;
        port = std::stoi(m[1]);
        return true;
      },
      std::chrono::seconds(120), std::chrono::milliseconds(50)))
      << demo.log();
  httplib::Client http("127.0.0.1", port);
  http.set_read_timeout(30);
  const auto completed = [&]() -> std::int64_t {
    const auto res = http.Get("/api/queues/demo");
    if (!res || res->status != 200) return -1;
    return nlohmann::json::parse(res->body)["completed"].get<std::int64_t>();
  };
  const std::int64_t first = completed();
  EXPECT_GE(first, 1980);
  // The trickle: more jobs complete while the dashboard is up.
  EXPECT_TRUE(eventually([&] { return completed() > first; }, std::chrono::seconds(30),
                         std::chrono::milliseconds(100)));
  const auto page = http.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_THAT(page->body, HasSubstr("<main id=\"page\""));
  EXPECT_EQ(demo.terminate(std::chrono::seconds(60), SIGINT), 0) << demo.log();
  EXPECT_THAT(demo.log(), HasSubstr("SIGINT received"));
}

// What scripts/dashboard start --demo runs: no batch, straight to the dashboard, and a
// newcomer sees successes, retries, failures, the periodic job and parked callbacks that
// are answered, all within a minute.
TEST_F(CliDemoTest, TrickleAloneKeepsEveryKindOfWorkMoving) {
  AwaProcess demo(schema_, {"demo", "--serve", "--jobs", "0", "--addr", "127.0.0.1:0"});
  const std::regex listening(R"(listening on http://127\.0\.0\.1:(\d+)/)");
  ASSERT_TRUE(eventually([&] { return std::regex_search(demo.log(), listening); },
                         std::chrono::seconds(60), std::chrono::milliseconds(50)))
      << demo.log();
  EXPECT_THAT(demo.log(), ::testing::Not(HasSubstr("summary:")));
  auto conn = Connection::connect(database_url());
  const Admin admin(schema_);
  const auto jobs = [&](const char* queue, const char* kind, const char* state) {
    JobFilter f;
    f.queue = queue;
    f.kind = kind;
    f.state = state;
    f.limit = 10000;
    return admin.list_jobs(conn, f);
  };
  const auto retried_and_completed = [&] {
    for (const auto& j : jobs("demo", "flaky", "completed")) {
      if (j.attempt == 2) return true;
    }
    return false;
  };
  // Flaky jobs retry once then complete; doomed ones go to the DLQ; the periodic job
  // runs; a callback job parks (waiting) and is answered 8 s later, completed or failed.
  EXPECT_TRUE(
      eventually(retried_and_completed, std::chrono::seconds(60), std::chrono::milliseconds(200)));
  EXPECT_TRUE(eventually([&] { return admin.queue_counts(conn, "demo").dlq > 0; },
                         std::chrono::seconds(60), std::chrono::milliseconds(200)));
  EXPECT_TRUE(eventually([&] { return !jobs("demo-side", "tick", "completed").empty(); },
                         std::chrono::seconds(60), std::chrono::milliseconds(200)));
  EXPECT_TRUE(
      eventually([&] { return !jobs("demo-side", "await_approval", "waiting_external").empty(); },
                 std::chrono::seconds(60), std::chrono::milliseconds(200)));
  EXPECT_TRUE(eventually([&] { return !jobs("demo-side", "await_approval", "completed").empty(); },
                         std::chrono::seconds(60), std::chrono::milliseconds(200)))
      << demo.log();
  EXPECT_THAT(demo.log(), HasSubstr("approved: job completed"));
  EXPECT_EQ(demo.terminate(std::chrono::seconds(60), SIGTERM), 0) << demo.log();
  EXPECT_THAT(demo.log(), HasSubstr("SIGTERM received"));
}

}  // namespace
}  // namespace awa::testing
