#include <future>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "awa/error.hpp"
#include "cli_runner.hpp"
#include "schema/migrator.hpp"
#include "schema/sql_catalog.hpp"
#include "support.hpp"

namespace awa::testing {
namespace {

using ::testing::HasSubstr;

class MigratorTest : public PgTest {
 protected:
  std::int64_t scalar(const std::string& sql) { return conn().exec(sql).get<std::int64_t>(0, 0); }
};

TEST_F(MigratorTest, AppliesEveryMigrationOnceAndIsIdempotent) {
  const schema::Migrator migrator(schema_);
  const auto first = migrator.migrate(conn());
  EXPECT_EQ(first.applied.size(), schema::embedded_migrations().size());
  EXPECT_FALSE(first.functions_updated.empty());
  EXPECT_EQ(scalar("SELECT count(*) FROM schema_migrations"),
            static_cast<std::int64_t>(schema::embedded_migrations().size()));
  EXPECT_EQ(scalar("SELECT count(*) FROM information_schema.tables WHERE table_schema = '" +
                   schema_ + "' AND table_name = 'ready_entries'"),
            1);

  const auto second = migrator.migrate(conn());
  EXPECT_TRUE(second.applied.empty());
  EXPECT_TRUE(second.functions_updated.empty());
  EXPECT_EQ(second.version, first.version);
}

TEST_F(MigratorTest, RefusesWhenAnAppliedMigrationChanged) {
  // Guards the append-only rule: an edited migration must never be silently skipped.
  schema::Migrator(schema_).migrate(conn());
  conn().exec("UPDATE schema_migrations SET checksum = 'deadbeefdeadbeef' WHERE version = 1");
  try {
    schema::Migrator(schema_).migrate(conn());
    FAIL() << "migrate() accepted a changed migration";
  } catch (const MigrationError& e) {
    EXPECT_THAT(e.what(), HasSubstr("0001_queue_storage.sql"));
    EXPECT_THAT(e.what(), HasSubstr("changed after it was applied"));
  }
  EXPECT_FALSE(conn().in_transaction());
}

TEST_F(MigratorTest, RefusesASchemaNewerThanTheBinary) {
  schema::Migrator(schema_).migrate(conn());
  conn().exec(
      "INSERT INTO schema_migrations (version, name, checksum) VALUES (9999, "
      "'9999_future.sql', 'x')");
  EXPECT_THROW(schema::Migrator(schema_).migrate(conn()), MigrationError);
}

TEST_F(MigratorTest, ReappliesAFunctionFileWhoseChecksumChanged) {
  schema::Migrator(schema_).migrate(conn());
  conn().exec("UPDATE schema_functions SET checksum = 'old' WHERE name = '0010_routing.sql'");
  const auto report = schema::Migrator(schema_).migrate(conn());
  EXPECT_EQ(report.functions_updated, std::vector<std::string>{"0010_routing.sql"});
}

// A function file renamed in a later build leaves no stale record behind: the record
// lists exactly the files of this build.
TEST_F(MigratorTest, ForgetsTheRecordOfAFunctionFileThisBuildNoLongerHas) {
  schema::Migrator(schema_).migrate(conn());
  conn().exec("INSERT INTO schema_functions (name, checksum) VALUES ('0050_admin.sql', 'x')");
  schema::Migrator(schema_).migrate(conn());
  EXPECT_EQ(scalar("SELECT count(*) FROM schema_functions WHERE name = '0050_admin.sql'"), 0);
  std::int64_t files = 0;
  for (const auto& f : sql::all_files()) files += f.name.rfind("functions/", 0) == 0 ? 1 : 0;
  EXPECT_EQ(scalar("SELECT count(*) FROM schema_functions"), files);
}

// A schema as a build from before the storage rings left it: migration 0001 only.
void install_version_1(pg::Connection& c) {
  const auto first = schema::embedded_migrations().front();
  ASSERT_EQ(first.version, 1);
  c.exec(
      "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, "
      "checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())");
  c.exec(sql::render(first.text, sql::quote_schema(c.exec("SELECT current_schema()").text(0, 0))));
  c.query("INSERT INTO schema_migrations (version, name, checksum) VALUES (1, $1, $2)", first.name,
          first.checksum);
}

TEST_F(MigratorTest, AStorageMigrationIsRefusedWhileAWorkerOfTheSchemaLooksAlive) {
  // Guards rolling upgrades across a storage change older builds cannot run against
  // (0002_rings): with an older worker's session alive on the schema, migrate refuses,
  // names it and changes nothing; once it is gone, or when told to, migrate applies.
  install_version_1(conn());
  auto worker = connect_new();
  const int worker_pid = worker.backend_pid();
  worker.exec("SELECT count(*) FROM " + quoted_schema() + ".ready_entries");

  try {
    schema::Migrator(schema_).migrate(conn());
    FAIL() << "migrate applied 0002_rings while a worker of the schema was alive";
  } catch (const MigrationError& e) {
    EXPECT_EQ(e.sqlstate(), "55006");
    EXPECT_THAT(e.what(), HasSubstr("0002_rings.sql"));
    EXPECT_THAT(e.what(), HasSubstr("session pid " + std::to_string(worker_pid)));
    EXPECT_THAT(e.hint(), HasSubstr("stop the workers"));
  }
  EXPECT_FALSE(conn().in_transaction());
  EXPECT_EQ(scalar("SELECT count(*) FROM schema_migrations"), 1) << "something was applied";

  // The same refusal through the CLI, as one readable line with the SQLSTATE.
  const auto cli = run_cli("--database-url '" + database_url() + "' migrate --schema " + schema_);
  EXPECT_NE(cli.exit_code, 0);
  EXPECT_THAT(cli.output, HasSubstr("55006"));
  EXPECT_EQ(scalar("SELECT count(*) FROM schema_migrations"), 1);

  worker = connect_new();  // the worker goes (its backend exits), a new idle session comes
  ASSERT_TRUE(eventually([&] {
    return scalar("SELECT count(*) FROM pg_stat_activity WHERE pid = " +
                  std::to_string(worker_pid)) == 0;
  }));
  const auto report = schema::Migrator(schema_).migrate(conn());
  EXPECT_EQ(report.applied.size(), schema::embedded_migrations().size() - 1);
}

TEST_F(MigratorTest, AllowRunningWorkersAppliesAStorageMigrationAnyway) {
  install_version_1(conn());
  auto worker = connect_new();
  worker.exec("SELECT count(*) FROM " + quoted_schema() + ".ready_entries");
  MigrateOptions options;
  options.allow_running_workers = true;
  const auto report = schema::Migrator(schema_, options).migrate(conn());
  EXPECT_EQ(report.applied.front(), "0002_rings.sql");
}

TEST_F(MigratorTest, FourProcessesMigratingConcurrentlyApplyExactlyOneSet) {
  // Four separate processes race on the same fresh schema; the advisory lock must let one
  // apply and the others find the work done.
  const std::string target = unique_schema_name("race");
  std::vector<std::future<CliResult>> runs;
  for (int i = 0; i < 4; ++i) {
    runs.push_back(std::async(std::launch::async, [&] {
      return run_cli("--database-url '" + database_url() + "' migrate --schema " + target);
    }));
  }
  int applied_by = 0;
  for (auto& r : runs) {
    const auto res = r.get();
    EXPECT_EQ(res.exit_code, 0) << res.output;
    if (res.output.find("applied migration") != std::string::npos) ++applied_by;
  }
  EXPECT_EQ(applied_by, 1);
  EXPECT_EQ(scalar("SELECT count(*) FROM \"" + target + "\".schema_migrations"),
            static_cast<std::int64_t>(schema::embedded_migrations().size()));
  EXPECT_EQ(scalar("SELECT count(DISTINCT version) FROM \"" + target + "\".schema_migrations"),
            static_cast<std::int64_t>(schema::embedded_migrations().size()));
  conn().exec("DROP SCHEMA \"" + target + "\" CASCADE");
}

TEST_F(MigratorTest, CliReportsConnectFailureAsOneReadableLine) {
  const auto res = run_cli("--database-url 'postgresql://nobody@127.0.0.1:1/none' migrate");
  EXPECT_EQ(res.exit_code, 1);
  EXPECT_THAT(res.output, HasSubstr("awa: error: cannot connect"));
  EXPECT_THAT(res.output, HasSubstr("127.0.0.1:1"));
}

TEST_F(MigratorTest, CliWithoutDatabaseSaysHowToProvideOne) {
  const auto res = run_cli("migrate --database-url ''");
  EXPECT_EQ(res.exit_code, 1);
  EXPECT_THAT(res.output, HasSubstr("DATABASE_URL"));
}

TEST_F(MigratorTest, CliSetShardsOutsideRangeNamesTheRangeAndSqlstate) {
  schema::Migrator(schema_).migrate(conn());
  const std::string base = "--database-url '" + database_url() + "' --schema " + schema_;
  for (const char* bad : {"0", "65"}) {
    const auto res = run_cli(base + " queue set-shards hot " + bad);
    EXPECT_EQ(res.exit_code, 1) << res.output;
    EXPECT_THAT(res.output, HasSubstr("between 1 and 64"));
    EXPECT_THAT(res.output, HasSubstr("SQLSTATE 23514"));
  }
  EXPECT_EQ(scalar("SELECT count(*) FROM queue_meta"), 0);
  const auto ok = run_cli(base + " queue set-shards hot 8");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_THAT(ok.output, HasSubstr("unkeyed ones within 2 s"));
  EXPECT_EQ(scalar("SELECT enqueue_shards FROM queue_meta WHERE queue = 'hot'"), 8);
}

TEST_F(MigratorTest, CliEnqueueAndShardsReportExactCursors) {
  schema::Migrator(schema_).migrate(conn());
  const std::string base = "--database-url '" + database_url() + "' --schema " + schema_;
  ASSERT_EQ(run_cli(base + " queue set-shards hot 2").exit_code, 0);
  const auto enq = run_cli(base + " enqueue mail --args '{\"to\":\"a@b\"}' --queue hot --count 3");
  ASSERT_EQ(enq.exit_code, 0) << enq.output;
  EXPECT_EQ(std::count(enq.output.begin(), enq.output.end(), '\n'), 3);
  const auto shards = run_cli(base + " queue shards hot --json");
  ASSERT_EQ(shards.exit_code, 0) << shards.output;
  // One batch without keys: one lane, cursors exact.
  EXPECT_THAT(shards.output, HasSubstr("\"enqueue_cursor\":4"));
  EXPECT_THAT(shards.output, HasSubstr("\"claim_cursor\":1"));
  EXPECT_THAT(shards.output, HasSubstr("\"lag\":3"));
  const auto bad = run_cli(base + " enqueue mail --args '{oops'");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.output, HasSubstr("not valid JSON"));
}

}  // namespace
}  // namespace awa::testing
