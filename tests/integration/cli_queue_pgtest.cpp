// `awa queue list|stats|pause|resume|configure` end to end (issue 12): exit codes (0 ok,
// 1 reported error, 2 bad usage), --json parsed, operator-friendly refusals, and a pause
// that outlives an `awa work` process.
#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "awa/admin.hpp"
#include "awa/connection.hpp"
#include "awa/queue_storage.hpp"
#include "cli_runner.hpp"
#include "metrics_scrape.hpp"
#include "runtime_support.hpp"

namespace awa::testing {
namespace {

class CliQueueTest : public RuntimeTest {
 protected:
  void SetUpSchema() override {
    RuntimeTest::SetUpSchema();
    pub_ = std::make_unique<Connection>(Connection::connect(database_url()));
  }

  CliResult cli(const std::string& args) const {
    return run_cli("--schema " + schema_ + " " + args);
  }

  // Runs a command that must succeed and print one JSON document.
  nlohmann::json cli_json(const std::string& args) const {
    const auto r = cli(args);
    EXPECT_EQ(r.exit_code, 0) << args << ":\n" << r.output;
    try {
      return nlohmann::json::parse(r.output);
    } catch (const nlohmann::json::exception& e) {
      ADD_FAILURE() << args << ": not JSON (" << e.what() << "):\n" << r.output;
      return nullptr;
    }
  }

  void insert(const std::string& queue, const std::string& kind = "noop",
              std::optional<std::chrono::system_clock::time_point> run_at = std::nullopt) {
    InsertOpts o = on_queue(queue);
    o.run_at = run_at;
    QueueStorage(StorageOptions{schema_}).insert(*pub_, NewJob(kind, {}, o));
  }

  std::unique_ptr<Connection> pub_;
};

TEST_F(CliQueueTest, ListAndStatsPrintExactCountsAsJson) {
  for (int i = 0; i < 3; ++i) insert("alpha");
  insert("alpha", "noop", std::chrono::system_clock::now() + std::chrono::hours(1));
  ASSERT_EQ(cli("queue set-shards beta 2").exit_code, 0);

  const auto list = cli_json("queue list --json");
  ASSERT_TRUE(list.is_array()) << list.dump();
  ASSERT_EQ(list.size(), 2U);
  EXPECT_EQ(list[0]["queue"], "alpha");
  EXPECT_EQ(list[0]["counts"]["available"], 3);
  EXPECT_EQ(list[0]["counts"]["scheduled"], 1);
  EXPECT_EQ(list[0]["counts"]["running"], 0);
  EXPECT_EQ(list[0]["counts"]["dlq"], 0);
  EXPECT_EQ(list[0]["configured"], false);
  EXPECT_TRUE(list[0]["oldest_available_age_s"].is_number());
  EXPECT_EQ(list[1]["queue"], "beta");
  EXPECT_EQ(list[1]["enqueue_shards"], 2);
  EXPECT_EQ(list[1]["paused"], false);
  EXPECT_TRUE(list[1]["deadline_ms"].is_null());
  EXPECT_TRUE(list[1]["oldest_available_age_s"].is_null());

  const auto alpha = cli_json("queue stats alpha --json");
  ASSERT_TRUE(alpha.is_object()) << alpha.dump();
  EXPECT_EQ(alpha["queue"], "alpha");
  EXPECT_EQ(alpha["counts"]["available"], 3);
  EXPECT_FALSE(alpha.contains("shards"));

  const auto with_lanes = cli_json("queue stats alpha --shards --json");
  ASSERT_TRUE(with_lanes["shards"].is_array()) << with_lanes.dump();
  std::int64_t lane_total = 0;
  for (const auto& lane : with_lanes["shards"]) lane_total += lane["available"].get<std::int64_t>();
  EXPECT_EQ(lane_total, 3);

  const auto every = cli_json("queue stats --json");
  ASSERT_TRUE(every.is_array());
  EXPECT_EQ(every.size(), 2U);

  // The text forms and the older commands keep working.
  const auto text = cli("queue list");
  EXPECT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("alpha"), std::string::npos) << text.output;
  const auto stats_text = cli("queue stats alpha --shards");
  EXPECT_EQ(stats_text.exit_code, 0) << stats_text.output;
  EXPECT_NE(stats_text.output.find("available 3"), std::string::npos) << stats_text.output;
  EXPECT_NE(stats_text.output.find("enqueue_shard"), std::string::npos) << stats_text.output;
  const auto lanes = cli_json("queue shards alpha --json");
  ASSERT_TRUE(lanes.is_array());
  EXPECT_EQ(lanes.size(), 1U);
}

TEST_F(CliQueueTest, UnknownAndBadQueueNamesAreReportedErrors) {
  const auto unknown = cli("queue stats nosuch");
  EXPECT_EQ(unknown.exit_code, 1) << unknown.output;
  EXPECT_NE(unknown.output.find("queue nosuch not found"), std::string::npos) << unknown.output;
  const auto unknown_json = cli("queue stats nosuch --json");
  EXPECT_EQ(unknown_json.exit_code, 1) << unknown_json.output;

  for (const char* cmd : {"queue stats 'bad name'", "queue pause 'a/b'", "queue resume ''",
                          "queue configure 'x y' --dlq on"}) {
    const auto r = cli(cmd);
    EXPECT_EQ(r.exit_code, 1) << cmd << ":\n" << r.output;
    EXPECT_NE(r.output.find("invalid queue name"), std::string::npos) << cmd << ":\n" << r.output;
  }
  EXPECT_EQ(count("SELECT count(*) FROM queue_meta"), 0);

  const auto shards = cli("queue set-shards q 65");
  EXPECT_EQ(shards.exit_code, 1) << shards.output;
  EXPECT_NE(shards.output.find("between 1 and 64"), std::string::npos) << shards.output;
}

TEST_F(CliQueueTest, BadUsageExitsWithTwo) {
  for (const char* cmd : {"queue", "queue pause", "queue stats a b", "queue configure q",
                          "queue configure q --dlq maybe", "queue configure q --deadline-ms soon",
                          "queue list --bogus"}) {
    const auto r = cli(cmd);
    EXPECT_EQ(r.exit_code, 2) << cmd << ":\n" << r.output;
  }
  EXPECT_EQ(count("SELECT count(*) FROM queue_meta"), 0) << "bad usage must change nothing";
}

TEST_F(CliQueueTest, ConfigureRoundTripsAndRefusesOutOfRangeValues) {
  const auto set = cli_json(
      "queue configure cq --dlq on --priority-aging-ms 250 --deadline-ms 9000 "
      "--max-workers-hint 4 --json");
  EXPECT_EQ(set["queue"], "cq");
  EXPECT_EQ(set["dlq_enabled"], true);
  EXPECT_EQ(set["priority_aging_ms"], 250);
  EXPECT_EQ(set["deadline_ms"], 9000);
  EXPECT_EQ(set["max_workers_hint"], 4);
  EXPECT_EQ(set["enqueue_shards"], 1);

  const auto text = cli("queue configure cq --priority-aging-ms 0");
  EXPECT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("priority_aging_ms -"), std::string::npos) << text.output;

  const auto refused = cli("queue configure cq --dlq off --deadline-ms -1");
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("--deadline-ms must be a positive number of milliseconds"),
            std::string::npos)
      << refused.output;
  EXPECT_NE(refused.output.find("queue cq unchanged"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("23514"), std::string::npos) << refused.output;
  const auto hint = cli("queue configure cq --max-workers-hint 100001");
  EXPECT_EQ(hint.exit_code, 1) << hint.output;
  EXPECT_NE(hint.output.find("--max-workers-hint must be between 1 and 100000"), std::string::npos)
      << hint.output;
  const auto aging = cli("queue configure cq --priority-aging-ms -3");
  EXPECT_EQ(aging.exit_code, 1) << aging.output;
  EXPECT_NE(aging.output.find("--priority-aging-ms must be a positive"), std::string::npos)
      << aging.output;

  const auto stats = cli_json("queue stats cq --json");
  EXPECT_EQ(stats["dlq_enabled"], true) << "the refused change must not apply --dlq off";
  EXPECT_TRUE(stats["priority_aging_ms"].is_null());
  EXPECT_EQ(stats["deadline_ms"], 9000);
  EXPECT_EQ(stats["max_workers_hint"], 4);
  EXPECT_EQ(stats["configured"], true);
}

TEST_F(CliQueueTest, AgePrioritiesMovesWaitingJobsUp) {
  for (int i = 0; i < 3; ++i) {
    InsertOpts o = on_queue("aq");
    o.priority = 4;
    QueueStorage(StorageOptions{schema_}).insert(*pub_, NewJob("noop", {}, o));
  }
  insert("aq");  // priority 2, also waiting: it moves up too
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  // 1 ms per level over at least 50 ms of waiting: every row reaches priority 1.
  const auto moved = cli_json("queue age-priorities aq --aging-ms 1 --json");
  EXPECT_EQ(moved.value("moved", -1), 4) << moved.dump();
  const auto jobs = cli_json("job list --queue aq --json");
  ASSERT_EQ(jobs.size(), 4U) << jobs.dump();
  for (const auto& j : jobs) EXPECT_EQ(j.value("priority", 0), 1) << j.dump();
  EXPECT_EQ(cli_json("queue age-priorities aq --aging-ms 1 --json").value("moved", -1), 0);
  EXPECT_EQ(cli("queue age-priorities aq --aging-ms 0").exit_code, 2);
  EXPECT_EQ(cli("queue age-priorities 'bad queue' --aging-ms 5").exit_code, 1);
}

TEST_F(CliQueueTest, PauseSurvivesAWorkProcessRestart) {
  // `awa queue pause` is stored in queue_meta: an `awa work` process started after it
  // claims nothing from the queue (while it works a control queue), until `resume`.
  const std::vector<std::string> args{"--queue", "pw", "--queue", "ctl", "--poll-ms", "50"};
  const Admin admin(schema_);
  {
    WorkerProcess worker(schema_, args);
    insert("pw");
    ASSERT_TRUE(
        eventually([&] { return admin.queue_counts(*pub_, "pw").completed == 1; }, seconds(20)));
    const auto paused = cli("queue pause pw");
    ASSERT_EQ(paused.exit_code, 0) << paused.output;
    EXPECT_NE(paused.output.find("queue pw paused"), std::string::npos) << paused.output;
    EXPECT_EQ(worker.terminate(seconds(20)), 0);
  }
  // Its /metrics shows its claim calls: awa_claim_duration_seconds counts each one, empty
  // ones included.
  auto with_metrics = args;
  with_metrics.insert(with_metrics.end(), {"--metrics-addr", "127.0.0.1:0"});
  WorkerProcess worker(schema_, with_metrics);
  for (int i = 0; i < 3; ++i) insert("pw");
  insert("ctl");
  ASSERT_TRUE(
      eventually([&] { return admin.queue_counts(*pub_, "ctl").completed == 1; }, seconds(20)));
  // The paused queue's dispatcher completes claims that began after its jobs were there:
  // the second one after `before` was read began after any claim in flight then.
  const int port = logged_metrics_port(worker.log());
  ASSERT_GT(port, 0) << worker.log();
  const auto claims = [&] {
    return scrape(port, R"(awa_claim_duration_seconds_count{queue="pw"})").value_or(-1);
  };
  const double before = claims();
  ASSERT_GE(before, 0) << worker.log();
  ASSERT_TRUE(eventually([&] { return claims() >= before + 3; }, seconds(20)))
      << "claims of pw: " << claims() - before;
  const auto held = cli_json("queue stats pw --json");
  EXPECT_EQ(held["paused"], true);
  EXPECT_EQ(held["counts"]["available"], 3);
  EXPECT_EQ(held["counts"]["completed"], 1);

  const auto resumed = cli("queue resume pw");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_TRUE(
      eventually([&] { return admin.queue_counts(*pub_, "pw").completed == 4; }, seconds(20)));
  EXPECT_EQ(cli_json("queue stats pw --json")["paused"], false);
}

}  // namespace
}  // namespace awa::testing
