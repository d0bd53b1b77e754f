// Admin::health and `awa health` (issue 12): schema version, the runtime_instances
// registry the Client keeps (registration, leader ticks, removal at stop, expiry), the
// age of each queue's oldest available job, and the command's exit codes for a probe.
#include <unistd.h>

#include <algorithm>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "awa/admin.hpp"
#include "awa/connection.hpp"
#include "awa/error.hpp"
#include "cli_runner.hpp"
#include "runtime/instance_registry.hpp"
#include "runtime_support.hpp"
#include "schema/migrator.hpp"

namespace awa::testing {
namespace {

int newest_migration() { return schema::embedded_migrations().back().version; }
// Versions need not be contiguous (branches number their migrations apart).
int previous_migration() {
  const auto all = schema::embedded_migrations();
  return all.at(all.size() - 2).version;
}

class HealthTest : public RuntimeTest {
 protected:
  Health health(std::chrono::seconds recent = seconds(30)) {
    if (!admin_conn_) admin_conn_.emplace(Connection::connect(database_url()));
    return Admin(schema_).health(*admin_conn_, recent);
  }

  static bool mentions(const Health& h, const std::string& text) {
    return std::any_of(h.problems.begin(), h.problems.end(),
                       [&](const std::string& p) { return p.find(text) != std::string::npos; });
  }

  std::string cli(const std::string& args) { return fmt::format("--schema {} {}", schema_, args); }

  std::optional<Connection> admin_conn_;
};

TEST_F(HealthTest, MigratedSchemaWithoutWorkersHasNoLeader) {
  const Health h = health();
  EXPECT_FALSE(h.healthy);
  EXPECT_EQ(h.schema_version, newest_migration());
  EXPECT_EQ(h.expected_schema_version, newest_migration());
  EXPECT_EQ(count("SELECT max(version) FROM schema_migrations"), h.schema_version);
  EXPECT_FALSE(h.leader_present);
  EXPECT_FALSE(h.leader_tick_age_s.has_value());
  EXPECT_TRUE(h.workers.empty());
  EXPECT_TRUE(h.queues.empty());
  ASSERT_EQ(h.problems.size(), 1u);
  EXPECT_TRUE(mentions(h, "no maintenance leader")) << h.problems[0];
}

TEST_F(HealthTest, OlderOrNewerSchemaVersionIsAProblem) {
  conn().exec(fmt::format("DELETE FROM schema_migrations WHERE version = {}", newest_migration()));
  Health h = health();
  EXPECT_EQ(h.schema_version, previous_migration());
  EXPECT_FALSE(h.healthy);
  EXPECT_TRUE(mentions(h, fmt::format("this build expects {}", newest_migration())));

  conn().exec("INSERT INTO schema_migrations (version, name, checksum) VALUES (9999, 'x', 'y')");
  h = health();
  EXPECT_EQ(h.schema_version, 9999);
  EXPECT_TRUE(mentions(h, "newer than this build"));
}

TEST_F(HealthTest, RejectsANonPositiveWindow) { EXPECT_THROW(health(seconds(0)), InvalidArgument); }

TEST_F(HealthTest, RunningClientRegistersLeadsAndLeavesOnStop) {
  auto o = options();
  Client client(o);
  client.register_worker("noop", [](JobContext&) { return JobResult::completed(); });
  client.add_queue(queue("hq", 2));
  client.add_queue(queue("hq:2", 1));
  client.start();
  // A second process-like client without maintenance: a worker, never the leader.
  auto o2 = options();
  o2.maintenance = false;
  Client follower(o2);
  follower.add_queue(queue("other", 1));
  follower.start();

  // Registration is synchronous in start(); the leader's first tick follows its first
  // round (maintenance_interval 100 ms).
  ASSERT_TRUE(eventually([&] { return health().healthy; }, seconds(10)));
  const Health h = health();
  EXPECT_TRUE(h.problems.empty());
  EXPECT_TRUE(h.leader_present);
  ASSERT_TRUE(h.leader_tick_age_s.has_value());
  EXPECT_LT(*h.leader_tick_age_s, 30.0);
  ASSERT_EQ(h.workers.size(), 2u);
  const auto& lead = h.workers[0].is_leader ? h.workers[0] : h.workers[1];
  const auto& other = h.workers[0].is_leader ? h.workers[1] : h.workers[0];
  EXPECT_TRUE(lead.is_leader);
  EXPECT_FALSE(other.is_leader);
  EXPECT_EQ(lead.pid, static_cast<int>(::getpid()));
  EXPECT_EQ(lead.queues, (std::vector<std::string>{"hq", "hq:2"}));
  EXPECT_EQ(other.queues, (std::vector<std::string>{"other"}));
  EXPECT_EQ(lead.instance_id.size(), 36u);
  EXPECT_NE(lead.instance_id, other.instance_id);
  EXPECT_EQ(lead.started_at.size(), 24u);  // 2024-01-02T03:04:05.678Z
  EXPECT_EQ(lead.last_seen_at.back(), 'Z');
  EXPECT_EQ(count("SELECT count(*) FROM runtime_instances WHERE is_leader"), 1);

  // A clean stop removes the row: the follower's first, then the leader's.
  follower.stop();
  EXPECT_EQ(count("SELECT count(*) FROM runtime_instances"), 1);
  EXPECT_EQ(health().workers.size(), 1u);
  client.stop();
  EXPECT_EQ(count("SELECT count(*) FROM runtime_instances"), 0);
  const Health after = health();
  EXPECT_FALSE(after.healthy);
  EXPECT_FALSE(after.leader_present);
  EXPECT_TRUE(mentions(after, "no maintenance leader"));
}

TEST_F(HealthTest, ALeaderThatStoppedTickingIsReported) {
  // A leader killed outright leaves its row flagged; health names it and how long ago it
  // last ran maintenance, and no longer counts it as a live worker.
  conn().exec(
      "INSERT INTO runtime_instances (instance_id, hostname, pid, queues, started_at, "
      "last_seen_at, is_leader, leader_tick_at) VALUES ('00000000-0000-4000-8000-000000000001', "
      "'deadhost', 4242, '{q}', now() - interval '1 hour', now() - interval '2 minutes', true, "
      "now() - interval '2 minutes')");
  const Health h = health(seconds(30));
  EXPECT_FALSE(h.healthy);
  EXPECT_TRUE(h.leader_present);
  ASSERT_TRUE(h.leader_tick_age_s.has_value());
  EXPECT_GE(*h.leader_tick_age_s, 120.0);
  EXPECT_LT(*h.leader_tick_age_s, 180.0);
  EXPECT_TRUE(h.workers.empty());
  ASSERT_EQ(h.problems.size(), 1u);
  EXPECT_TRUE(mentions(h, "deadhost pid 4242")) << h.problems[0];
  EXPECT_TRUE(mentions(h, "last finished a round 12")) << h.problems[0];
  // With a window wider than its silence it counts again.
  const Health wide = health(seconds(600));
  EXPECT_TRUE(wide.healthy) << (wide.problems.empty() ? "" : wide.problems[0]);
  EXPECT_EQ(wide.workers.size(), 1u);
}

TEST_F(HealthTest, ANewLeaderClearsItsPredecessorsFlag) {
  const runtime::InstanceRegistry a(schema_, {"x"});
  const runtime::InstanceRegistry b(schema_, {"y"});
  EXPECT_NE(a.id(), b.id());
  a.beat(conn());
  b.beat(conn());
  a.leader_tick(conn());
  EXPECT_EQ(conn()
                .query("SELECT count(*) FROM runtime_instances WHERE is_leader AND "
                       "instance_id = $1::uuid",
                       a.id())
                .get<std::int64_t>(0, 0),
            1);
  b.leader_tick(conn());
  const auto r = conn().exec("SELECT instance_id::text FROM runtime_instances WHERE is_leader");
  ASSERT_EQ(r.rows(), 1);
  EXPECT_EQ(r.get<std::string>(0, 0), b.id());
  // beat() of a removed row registers it again (expired during a partition).
  a.remove(conn());
  EXPECT_EQ(count("SELECT count(*) FROM runtime_instances"), 1);
  a.beat(conn());
  EXPECT_EQ(count("SELECT count(*) FROM runtime_instances"), 2);
}

TEST_F(HealthTest, TheLeaderForgetsInstancesUnseenForAnHour) {
  conn().exec(
      "INSERT INTO runtime_instances (instance_id, hostname, pid, queues, last_seen_at) VALUES "
      "('00000000-0000-4000-8000-000000000002', 'gone', 1, '{}', now() - interval '61 minutes'),"
      "('00000000-0000-4000-8000-000000000003', 'quiet', 2, '{}', now() - interval '59 minutes')");
  Client client(options());
  client.add_queue(queue("hx", 1));
  client.start();
  // The first round purges (DLQ, then instances) at once.
  ASSERT_TRUE(eventually(
      [&] { return count("SELECT count(*) FROM runtime_instances WHERE hostname = 'gone'") == 0; },
      seconds(10)));
  EXPECT_EQ(count("SELECT count(*) FROM runtime_instances WHERE hostname = 'quiet'"), 1);
  client.stop();
}

TEST_F(HealthTest, OldestAvailableJobPerQueue) {
  conn().exec(
      "SELECT insert_job_compat('k', p_queue => 'old', p_run_at => now() - interval '1 hour')");
  conn().exec("SELECT insert_job_compat('k', p_queue => 'old')");
  conn().exec("SELECT insert_job_compat('k', p_queue => 'drained')");
  // Drain 'drained': claim it, so its lane has no available row.
  ASSERT_EQ(storage::consumer(*store_).claim(conn(), "drained").size(), 1u);
  // A scheduled job is not available and makes no lane.
  conn().exec(
      "SELECT insert_job_compat('k', p_queue => 'later', p_run_at => now() + interval '1 hour')");
  const Health h = health();
  ASSERT_EQ(h.queues.size(), 2u);
  EXPECT_EQ(h.queues[0].queue, "drained");
  EXPECT_FALSE(h.queues[0].oldest_available_age_s.has_value());
  EXPECT_EQ(h.queues[1].queue, "old");
  ASSERT_TRUE(h.queues[1].oldest_available_age_s.has_value());
  EXPECT_GE(*h.queues[1].oldest_available_age_s, 3600.0);
  EXPECT_LT(*h.queues[1].oldest_available_age_s, 3660.0);
}

TEST_F(HealthTest, UnmigratedSchemaIsReportedNotThrown) {
  const std::string bare = unique_schema_name("bare");
  conn().exec(fmt::format("CREATE SCHEMA \"{}\"", bare));
  auto c = Connection::connect(database_url());
  Health h;
  EXPECT_NO_THROW(h = Admin(bare).health(c));
  conn().exec(fmt::format("DROP SCHEMA \"{}\"", bare));
  EXPECT_FALSE(h.healthy);
  EXPECT_EQ(h.schema_version, 0);
  EXPECT_FALSE(h.leader_present);
  EXPECT_TRUE(h.queues.empty());
  ASSERT_EQ(h.problems.size(), 1u);
  EXPECT_TRUE(mentions(h, "is not migrated")) << h.problems[0];
  // A schema that does not exist at all: the same answer.
  const Health none = Admin(unique_schema_name("none")).health(c);
  EXPECT_FALSE(none.healthy);
  EXPECT_EQ(none.schema_version, 0);
}

TEST_F(HealthTest, CliExitCodesFitAProbe) {
  // No leader: exit 1, the problem printed; JSON parses.
  auto r = run_cli(cli("health"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("UNHEALTHY"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("problem: no maintenance leader"), std::string::npos) << r.output;
  r = run_cli(cli("health --json"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["healthy"], false);
  EXPECT_EQ(j["can_connect"], true);
  EXPECT_EQ(j["schema_version"], newest_migration());
  EXPECT_EQ(j["problems"].size(), 1u);

  Client client(options());
  client.add_queue(queue("cq", 1));
  client.start();
  ASSERT_TRUE(eventually([&] { return health().healthy; }, seconds(10)));
  r = run_cli(cli("health --json --recent 60"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["healthy"], true);
  EXPECT_EQ(j["leader_present"], true);
  EXPECT_EQ(j["recent_s"], 60);
  ASSERT_EQ(j["workers"].size(), 1u);
  EXPECT_EQ(j["workers"][0]["pid"], static_cast<int>(::getpid()));
  EXPECT_EQ(j["workers"][0]["queues"], nlohmann::json::array({"cq"}));
  EXPECT_EQ(j["problems"].size(), 0u);
  r = run_cli(cli("health"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("healthy\n", 0), 0u) << r.output;
  client.stop();

  // Unreachable database: exit 1 with a clear message; JSON says so too.
  r = run_cli(cli("--database-url postgresql://127.0.0.1:1/none health"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("cannot connect to PostgreSQL at 127.0.0.1:1"), std::string::npos)
      << r.output;
  r = run_cli(cli("--database-url postgresql://127.0.0.1:1/none health --json"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["healthy"], false);
  EXPECT_EQ(j["can_connect"], false);
  EXPECT_NE(j["problems"][0].get<std::string>().find("cannot connect"), std::string::npos);
  // Bad usage: CLI11's usage error status (neither 0 nor 1), with the option named.
  for (const char* bad : {"health --recent 0", "health --recent x"}) {
    r = run_cli(cli(bad));
    EXPECT_GE(r.exit_code, 2) << bad << ": " << r.output;
    EXPECT_NE(r.output.find("--recent"), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace awa::testing
