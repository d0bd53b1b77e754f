// The function catalogue rules of the migrator (src/schema/function_catalogue.hpp,
// docs/upgrading.md): a build never reinstalls its functions over a newer catalogue,
// refuses a schema whose functions no longer support it, and leaves no stale overload of
// a function whose signature changed.
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "awa/error.hpp"
#include "schema/function_catalogue.hpp"
#include "schema/migrator.hpp"
#include "support.hpp"

namespace awa::testing {
namespace {

using ::testing::HasSubstr;

class UpgradeCatalogueTest : public PgTest {
 protected:
  void SetUpSchema() override { schema::Migrator(schema_).migrate(conn()); }

  std::string prosrc(const std::string& fn) {
    return conn()
        .query("SELECT prosrc FROM pg_proc WHERE pronamespace = $1::regnamespace AND proname = $2",
               quoted_schema(), fn)
        .get<std::string>(0, 0);
  }
  std::int64_t count(const std::string& sql) { return conn().exec(sql).get<std::int64_t>(0, 0); }
  std::int64_t overloads(const std::string& fn) {
    return conn()
        .query(
            "SELECT count(*) FROM pg_proc WHERE pronamespace = $1::regnamespace AND proname = $2",
            quoted_schema(), fn)
        .get<std::int64_t>(0, 0);
  }
  // What an older build leaves behind: its own body of notify_channel and its checksum.
  void install_other_notify_channel(const std::string& marker) {
    conn().exec("CREATE OR REPLACE FUNCTION " + quoted_schema() +
                ".notify_channel(p_queue text) RETURNS text LANGUAGE sql IMMUTABLE AS "
                "$$ SELECT '" +
                marker + "' || p_queue $$");
    conn().exec(
        "UPDATE schema_functions SET checksum = 'other-build' WHERE name = '0010_routing.sql'");
  }
};

TEST_F(UpgradeCatalogueTest, RecordsThisBuildsCatalogue) {
  const auto row = conn().exec("SELECT catalogue, oldest_compatible FROM schema_catalogue");
  ASSERT_EQ(row.rows(), 1);
  EXPECT_EQ(row.get<int>(0, 0), schema::kFunctionCatalogue);
  EXPECT_EQ(row.get<int>(0, 1), schema::kOldestCompatibleCatalogue);
  EXPECT_EQ(schema::Migrator(schema_).migrate(conn()).function_catalogue,
            schema::kFunctionCatalogue);
}

TEST_F(UpgradeCatalogueTest, NewerBuildReplacesAnOlderFunctionSet) {
  // Guards the upgrade path: functions of an older catalogue are replaced by this build's.
  const std::string ours = prosrc("notify_channel");
  install_other_notify_channel("older:");
  // The previous catalogue; before catalogue 2 that is a schema without the row.
  if (schema::kFunctionCatalogue > 1) {
    conn().exec("UPDATE schema_catalogue SET catalogue = " +
                std::to_string(schema::kFunctionCatalogue - 1) + ", oldest_compatible = 0");
  } else {
    conn().exec("DELETE FROM schema_catalogue");
  }
  const auto report = schema::Migrator(schema_).migrate(conn());
  EXPECT_EQ(report.functions_updated, std::vector<std::string>{"0010_routing.sql"});
  EXPECT_FALSE(report.newer_functions_kept);
  EXPECT_EQ(prosrc("notify_channel"), ours);
  EXPECT_EQ(count("SELECT catalogue FROM schema_catalogue"), schema::kFunctionCatalogue);
}

TEST_F(UpgradeCatalogueTest, OlderBuildLeavesANewerFunctionSetAsItIs) {
  // Guards rollbacks and rolling deploys: a build must not reinstall its older functions
  // over those of a newer catalogue (it runs against them instead).
  install_other_notify_channel("newer:");
  const std::string newer = prosrc("notify_channel");
  conn().exec(
      "UPDATE schema_catalogue SET catalogue = " + std::to_string(schema::kFunctionCatalogue + 1) +
      ", oldest_compatible = " + std::to_string(schema::kFunctionCatalogue));
  const auto report = schema::Migrator(schema_).migrate(conn());
  EXPECT_TRUE(report.functions_updated.empty());
  EXPECT_TRUE(report.newer_functions_kept);
  EXPECT_EQ(report.function_catalogue, schema::kFunctionCatalogue + 1);
  EXPECT_EQ(prosrc("notify_channel"), newer);
  EXPECT_EQ(count("SELECT count(*) FROM schema_functions WHERE checksum = 'other-build'"), 1);
  EXPECT_EQ(count("SELECT catalogue FROM schema_catalogue"), schema::kFunctionCatalogue + 1);
}

TEST_F(UpgradeCatalogueTest, RefusesASchemaWhoseFunctionsNoLongerSupportThisBuild) {
  // Guards the other half of the rule: when the newer functions dropped what this build
  // calls, it must refuse to start rather than run against them.
  install_other_notify_channel("newer:");
  const std::string newer = prosrc("notify_channel");
  const int theirs = schema::kFunctionCatalogue + 2;
  const int oldest = schema::kFunctionCatalogue + 1;
  conn().exec("UPDATE schema_catalogue SET catalogue = " + std::to_string(theirs) +
              ", oldest_compatible = " + std::to_string(oldest));
  try {
    schema::Migrator(schema_).migrate(conn());
    FAIL() << "migrate() ran against functions that no longer support this build";
  } catch (const MigrationError& e) {
    EXPECT_THAT(e.what(), HasSubstr("catalogue " + std::to_string(theirs)));
    EXPECT_THAT(e.what(), HasSubstr(std::to_string(oldest) + " or newer"));
    EXPECT_THAT(e.what(), HasSubstr("this build's catalogue is " +
                                    std::to_string(schema::kFunctionCatalogue)));
  }
  EXPECT_FALSE(conn().in_transaction());
  EXPECT_EQ(prosrc("notify_channel"), newer);
}

TEST_F(UpgradeCatalogueTest, DropsAStaleOverloadLeftByAnOlderSignature) {
  // Guards completions: an older close_attempts signature left next to the current one
  // makes the completion call ambiguous (42725), so every completion failed.
  const std::string q = quoted_schema();
  conn().exec("CREATE FUNCTION " + q +
              ".close_attempts(p_batches bigint[], p_lane_seqs bigint[], p_outcomes text[], "
              "p_errors text[] DEFAULT NULL, p_delays_s double precision[] DEFAULT NULL, "
              "p_legacy boolean DEFAULT false) RETURNS TABLE (ord bigint, state text) "
              "LANGUAGE sql AS $$ SELECT 1::bigint, 'legacy'::text $$");
  ASSERT_EQ(overloads("close_attempts"), 2);
  try {
    conn().exec("SELECT * FROM " + q + ".close_attempts('{}', '{}', '{}')");
    FAIL() << "the test's overload did not make the call ambiguous";
  } catch (const Error& e) {
    ASSERT_EQ(e.sqlstate(), "42725") << e.what();
  }
  conn().exec(
      "UPDATE schema_functions SET checksum = 'other-build' WHERE name = "
      "'0065_close_attempts.sql'");
  const auto report = schema::Migrator(schema_).migrate(conn());
  EXPECT_EQ(report.functions_updated, std::vector<std::string>{"0065_close_attempts.sql"});
  EXPECT_EQ(overloads("close_attempts"), 1);
  EXPECT_EQ(count("SELECT count(*) FROM " + q + ".close_attempts('{}', '{}', '{}')"), 0);
  // The surviving one is the current signature, with the attributes of function_settings.
  EXPECT_EQ(count("SELECT count(*) FROM pg_proc WHERE oid = '" + q +
                  ".close_attempts'::regproc AND pronargs = 7 AND 'search_path=pg_catalog, "
                  "pg_temp' = ANY (proconfig)"),
            1);
}

TEST_F(UpgradeCatalogueTest, KeepsOverloadsThatAreNotStale) {
  // Only overloads of the names a re-applied file creates go: the schema's other functions
  // (a user's own among them) stay.
  const std::string q = quoted_schema();
  conn().exec("CREATE FUNCTION " + q +
              ".user_helper(p integer) RETURNS integer LANGUAGE sql AS $$ SELECT p $$");
  conn().exec(
      "UPDATE schema_functions SET checksum = 'other-build' WHERE name = "
      "'0065_close_attempts.sql'");
  const auto before =
      count("SELECT count(*) FROM pg_proc WHERE pronamespace = '" + q + "'::regnamespace");
  schema::Migrator(schema_).migrate(conn());
  EXPECT_EQ(count("SELECT count(*) FROM pg_proc WHERE pronamespace = '" + q + "'::regnamespace"),
            before);
  EXPECT_EQ(overloads("user_helper"), 1);
}

TEST_F(UpgradeCatalogueTest, AStaleOverloadSomethingDependsOnFailsTheMigrationClearly) {
  // Dropping with CASCADE would silently take a user's view with it; refuse instead.
  const std::string q = quoted_schema();
  conn().exec("CREATE FUNCTION " + q +
              ".notify_channel(p_queue text, p_suffix text) RETURNS text LANGUAGE sql "
              "IMMUTABLE AS $$ SELECT p_queue || p_suffix $$");
  conn().exec("CREATE VIEW " + q + ".uses_old AS SELECT " + q + ".notify_channel('a', 'b') AS c");
  conn().exec(
      "UPDATE schema_functions SET checksum = 'other-build' WHERE name = '0010_routing.sql'");
  try {
    schema::Migrator(schema_).migrate(conn());
    FAIL() << "migrate() left or cascaded a stale overload with a dependent view";
  } catch (const MigrationError& e) {
    EXPECT_THAT(e.what(), HasSubstr("notify_channel(text, text)"));
    EXPECT_THAT(e.what(), HasSubstr("0010_routing.sql"));
    EXPECT_EQ(e.sqlstate(), "2BP01");
  }
  EXPECT_FALSE(conn().in_transaction());
  EXPECT_EQ(overloads("notify_channel"), 2);
  EXPECT_EQ(count("SELECT count(*) FROM uses_old"), 1);
}

}  // namespace
}  // namespace awa::testing
