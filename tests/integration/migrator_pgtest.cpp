#include <future>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "awa/error.hpp"
#include "cli_runner.hpp"
#include "schema/migrator.hpp"
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
  EXPECT_THAT(ok.output, HasSubstr("reset()"));
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
