// Periodic jobs from code and from the command line (issue 14, docs/scheduling.md): a
// Client's add_periodic upserted at start() and fired by its maintenance leader into its
// own handler; re-declaration keeping the paused state and stale detection; and
// `awa cron add|list|pause|resume|trigger|remove` end to end with its exit codes.
#include <atomic>
#include <mutex>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "awa/client.hpp"
#include "awa/error.hpp"
#include "awa/metrics.hpp"
#include "cli_runner.hpp"
#include "periodic_support.hpp"

namespace awa::testing {
namespace {

TEST_F(PeriodicTest, ClientFiresAnEveryOneSecondScheduleIntoItsHandler) {
  Client client(options());
  std::mutex mu;
  std::set<std::string> occurrences;
  std::atomic<int> handled{0};
  client.register_worker("tick", [&](JobContext& job) {
    std::lock_guard lock(mu);
    if (job.metadata().value("periodic", "") == "ticker") {
      occurrences.insert(job.metadata().value("occurrence", ""));
      ++handled;
    }
    return JobResult::completed();
  });
  client.add_queue(queue("cron", 2));
  client.add_periodic("ticker", "@every 1s", "tick", {{"n", 1}}, {.queue = "cron"});
  EXPECT_THROW(client.add_periodic("ticker", "@every 2s", "tick"), InvalidArgument);
  EXPECT_THROW(client.add_periodic("broken", "61 * * * * *", "tick"), InvalidArgument);
  client.start();
  ASSERT_TRUE(eventually([&] { return handled.load() >= 3; }, seconds(30)))
      << "handled " << handled.load();
  client.stop();
  const auto s = client.stats();
  EXPECT_GE(s.periodic_fired, 3u);
  EXPECT_EQ(s.periodic_failed, 0u);
  // The metric counts this schedule's jobs (the registry is process-wide: the name is
  // unique to this test).
  EXPECT_GE(metrics::engine().periodic_fires.with({"ticker", "enqueued"}).value(), 3u);
  std::lock_guard lock(mu);
  EXPECT_EQ(occurrences.size(), static_cast<std::size_t>(handled.load()));  // no repeats
  EXPECT_EQ(duplicate_occurrences(), 0);
  const auto listed = admin_->list(*pub_);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].source, "code");
  EXPECT_EQ(listed[0].args_json, R"({"n": 1})");
  EXPECT_TRUE(listed[0].last_declared_at.has_value());
  EXPECT_FALSE(listed[0].stale);
}

TEST_F(PeriodicTest, ClientStartRefusesAnUnknownZone) {
  ClientOptions o = options();
  o.maintenance = false;
  Client client(o);
  PeriodicOptions p;
  p.timezone = "Nowhere/Special";
  client.add_periodic("zoned", "@daily", "noop", nlohmann::json::object(), p);
  EXPECT_THROW(client.start(), InvalidArgument);
  EXPECT_EQ(count("SELECT count(*) FROM periodic_jobs"), 0);
}

// Stale: declared by code, but not by the latest start-up that declared schedules.
TEST_F(PeriodicTest, RedeclaringKeepsPauseRecomputesOnChangeAndFindsStale) {
  const std::vector<PeriodicJob> first{job("a", "0 3 * * *"), job("b", "@hourly")};
  auto r = admin_->declare(*pub_, first);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_TRUE(r[0].created);
  ASSERT_TRUE(admin_->pause(*pub_, "a"));
  due_at("b", "'2100-01-01'::timestamptz");  // marks b's next_fire_at

  // A later start-up declares a (changed) and no longer b.
  std::vector<PeriodicJob> second{job("a", "0 4 * * *")};
  r = admin_->declare(*pub_, second);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_FALSE(r[0].created);
  const auto all = admin_->list(*pub_);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_TRUE(all[0].paused);  // kept
  EXPECT_EQ(all[0].schedule, "0 4 * * *");
  ASSERT_TRUE(all[0].next_fire_at.has_value());
  EXPECT_NE(all[0].next_fire_at->find("T04:00:00.000Z"), std::string::npos) << *all[0].next_fire_at;
  EXPECT_FALSE(all[0].stale);
  EXPECT_TRUE(all[1].stale);
  EXPECT_EQ(all[1].next_fire_at, "2100-01-01T00:00:00.000Z");
  const auto stale = admin_->list(*pub_, true);
  ASSERT_EQ(stale.size(), 1u);
  EXPECT_EQ(stale[0].name, "b");

  // Unchanged expression: next_fire_at stays as it was.
  std::vector<PeriodicJob> third{job("a", "0 4 * * *"), job("b", "@hourly")};
  admin_->declare(*pub_, third);
  EXPECT_TRUE(admin_->list(*pub_, true).empty());
  EXPECT_EQ(admin_->list(*pub_)[1].next_fire_at, "2100-01-01T00:00:00.000Z");
  // A cli schedule is never stale.
  add(job("c", "@daily"));
  std::vector<PeriodicJob> fourth{job("a", "0 4 * * *")};
  admin_->declare(*pub_, fourth);
  const auto now_stale = admin_->list(*pub_, true);
  ASSERT_EQ(now_stale.size(), 1u);
  EXPECT_EQ(now_stale[0].name, "b");
}

class CliCronTest : public PeriodicTest {
 protected:
  CliResult cli(const std::string& args) const {
    return run_cli("--schema " + schema_ + " " + args);
  }

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
};

TEST_F(CliCronTest, AddListPauseResumeTriggerRemove) {
  const auto added = cli_json(
      "cron add nightly --schedule '30 2 * * *' --kind report --args '{\"scope\":\"all\"}' "
      "--queue reports --tz America/New_York --priority 3 --max-attempts 5 --catch-up --json");
  EXPECT_EQ(added["name"], "nightly");
  EXPECT_EQ(added["created"], true);
  ASSERT_TRUE(added["next_fire_at"].is_string());

  auto list = cli_json("cron list --json");
  ASSERT_TRUE(list.is_array());
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["name"], "nightly");
  EXPECT_EQ(list[0]["schedule"], "30 2 * * *");
  EXPECT_EQ(list[0]["timezone"], "America/New_York");
  EXPECT_EQ(list[0]["kind"], "report");
  EXPECT_EQ(list[0]["queue"], "reports");
  EXPECT_EQ(list[0]["args"], nlohmann::json({{"scope", "all"}}));
  EXPECT_EQ(list[0]["priority"], 3);
  EXPECT_EQ(list[0]["max_attempts"], 5);
  EXPECT_EQ(list[0]["catch_up"], true);
  EXPECT_EQ(list[0]["paused"], false);
  EXPECT_EQ(list[0]["source"], "cli");
  EXPECT_EQ(list[0]["stale"], false);
  EXPECT_EQ(list[0]["next_fire_at"], added["next_fire_at"]);
  EXPECT_TRUE(list[0]["last_fired_at"].is_null());

  auto r = cli("cron pause nightly");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(cli_json("cron list --json")[0]["paused"], true);
  r = cli("cron list");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("paused"), std::string::npos) << r.output;
  EXPECT_EQ(cli_json("cron resume nightly --json"),
            nlohmann::json({{"name", "nightly"}, {"paused", false}}));
  EXPECT_EQ(cli_json("cron list --json")[0]["paused"], false);
  EXPECT_EQ(cli_json("cron pause nightly --json"),
            nlohmann::json({{"name", "nightly"}, {"paused", true}}));
  EXPECT_EQ(cli_json("cron list --json")[0]["paused"], true);
  r = cli("cron resume nightly");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(cli_json("cron list --json")[0]["paused"], false);

  const auto triggered = cli_json("cron trigger nightly --json");
  ASSERT_TRUE(triggered["job_id"].is_number_integer()) << triggered.dump();
  EXPECT_EQ(count("SELECT count(*) FROM ready_entries WHERE job_id = " +
                  std::to_string(triggered["job_id"].get<std::int64_t>()) +
                  " AND queue_id = queue_id_of('reports') AND kind = 'report' AND priority = 3 "
                  "AND max_attempts = 5 AND args = '{\"scope\":\"all\"}'::jsonb"),
            1);
  EXPECT_EQ(cli_json("cron list --json --stale").size(), 0u);

  EXPECT_EQ(cli_json("cron remove nightly --json"),
            nlohmann::json({{"name", "nightly"}, {"removed", true}}));
  EXPECT_EQ(cli_json("cron list --json").size(), 0u);
  EXPECT_EQ(jobs_of("nightly"), 1);  // the triggered job stays
}

TEST_F(CliCronTest, BadInputExitsOneWithAClearMessage) {
  auto r = cli("cron add x --schedule '0 25 * * *' --kind k");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("hour field \"25\": 25 is outside 0-23"), std::string::npos) << r.output;
  r = cli("cron add x --schedule '@every 1m' --kind k --tz Mars/Base");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("awa: error: periodic job x: unknown time zone \"Mars/Base\""),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("SQLSTATE 22023"), std::string::npos) << r.output;
  r = cli("cron add x --schedule '@daily' --kind k --args '{nope'");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("--args is not valid JSON"), std::string::npos) << r.output;
  r = cli("cron add x --schedule '@daily' --kind k --priority 9");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("priority 9 is outside 1..4"), std::string::npos) << r.output;
  r = cli("cron add 'bad name' --schedule '@daily' --kind k");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("invalid periodic job name"), std::string::npos) << r.output;
  for (const char* verb : {"pause", "resume", "trigger", "remove"}) {
    r = cli(std::string("cron ") + verb + " missing");
    EXPECT_EQ(r.exit_code, 1) << verb << ": " << r.output;
    EXPECT_NE(r.output.find("no periodic job named \"missing\""), std::string::npos) << r.output;
  }
  EXPECT_EQ(count("SELECT count(*) FROM periodic_jobs"), 0);
}

TEST_F(CliCronTest, BadUsageExitsTwo) {
  EXPECT_EQ(cli("cron add x --kind k").exit_code, 2);                  // no --schedule
  EXPECT_EQ(cli("cron add x --schedule @daily").exit_code, 2);         // no --kind
  EXPECT_EQ(cli("cron add --schedule @daily --kind k").exit_code, 2);  // no name
  EXPECT_EQ(cli("cron add x --schedule @daily --kind k --priority high").exit_code, 2);
  EXPECT_EQ(cli("cron list --bogus").exit_code, 2);
  EXPECT_EQ(cli("cron").exit_code, 2);
  EXPECT_EQ(cli("cron pause").exit_code, 2);
}

}  // namespace
}  // namespace awa::testing
