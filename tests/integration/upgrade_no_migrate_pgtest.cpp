// A client that does not migrate (ClientOptions::migrate = false, `awa work --no-migrate`)
// checks at start() that it can run against the schema (docs/upgrading.md): every
// migration of its build applied, functions of its catalogue or of a newer one that still
// supports it. Before, it started against anything and failed call by call.
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "awa/client.hpp"
#include "awa/error.hpp"
#include "cli_runner.hpp"
#include "schema/function_catalogue.hpp"
#include "schema/migrator.hpp"
#include "support.hpp"

namespace awa::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class NoMigrateTest : public PgTest {
 protected:
  void migrate() { schema::Migrator(schema_).migrate(conn()); }
  void check() { schema::Migrator(schema_).check_compatible(conn()); }
  std::string refusal() {
    try {
      check();
    } catch (const MigrationError& e) {
      return e.what();
    }
    return "";
  }
  void set_catalogue(int catalogue, int oldest) {
    conn().query("UPDATE schema_catalogue SET catalogue = $1, oldest_compatible = $2", catalogue,
                 oldest);
  }
};

TEST_F(NoMigrateTest, AMigratedSchemaIsAccepted) {
  migrate();
  EXPECT_NO_THROW(check());
}

TEST_F(NoMigrateTest, AnUnmigratedSchemaIsRefusedByClientStart) {
  ClientOptions o;
  o.database_url = database_url();
  o.schema = schema_;
  o.migrate = false;
  Client client(o);
  client.add_queue(QueueConfig{});
  try {
    client.start();
    client.stop();
    FAIL() << "a client with migrate off started on an unmigrated schema";
  } catch (const MigrationError& e) {
    EXPECT_THAT(e.what(), HasSubstr("is not migrated"));
    EXPECT_THAT(e.what(), HasSubstr("awa migrate --schema " + schema_));
  }
}

TEST_F(NoMigrateTest, AMissingMigrationIsRefusedByName) {
  migrate();
  const auto last = schema::embedded_migrations().back();
  conn().query("DELETE FROM schema_migrations WHERE version = $1", last.version);
  const auto why = refusal();
  EXPECT_THAT(why, HasSubstr("lacks migration " + last.name));
}

TEST_F(NoMigrateTest, OlderFunctionsAreRefused) {
  migrate();
  conn().exec("DELETE FROM schema_catalogue");  // functions from before catalogues: 0
  EXPECT_THAT(refusal(), HasSubstr("older than this build's"));
}

TEST_F(NoMigrateTest, NewerFunctionsAreAcceptedWhileTheyStillSupportThisBuild) {
  migrate();
  set_catalogue(schema::kFunctionCatalogue + 1, schema::kFunctionCatalogue);
  EXPECT_NO_THROW(check());
  set_catalogue(schema::kFunctionCatalogue + 2, schema::kFunctionCatalogue + 1);
  EXPECT_THAT(refusal(), HasSubstr("support builds of catalogue"));
}

TEST_F(NoMigrateTest, ANewerSchemaWithAMigrationThisBuildLacksIsAccepted) {
  // The previous release after a rollback, with the schema left at the newer release.
  migrate();
  conn().exec(
      "INSERT INTO schema_migrations (version, name, checksum) VALUES (9999, "
      "'9999_future.sql', 'x')");
  EXPECT_NO_THROW(check());
}

TEST_F(NoMigrateTest, MigrateSaysWhenItLeavesNewerFunctionsAsTheyAre) {
  migrate();
  const std::string args =
      "--database-url '" + database_url() + "' --schema " + schema_ + " migrate";
  EXPECT_THAT(run_cli(args).output, HasSubstr("is up to date"));
  set_catalogue(schema::kFunctionCatalogue + 1, schema::kFunctionCatalogue);
  const auto res = run_cli(args);
  EXPECT_EQ(res.exit_code, 0) << res.output;
  EXPECT_THAT(res.output, HasSubstr("newer than this build's, and were left as they are"));
  EXPECT_THAT(res.output, Not(HasSubstr("up to date")));
}

}  // namespace
}  // namespace awa::testing
