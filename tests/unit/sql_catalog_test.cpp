#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "awa/error.hpp"
#include "schema/function_catalogue.hpp"
#include "schema/migrator.hpp"
#include "schema/sql_catalog.hpp"

namespace awa {
namespace {

TEST(SqlCatalogTest, MigrationsAreEmbeddedInStrictVersionOrder) {
  const auto migrations = schema::embedded_migrations();
  ASSERT_FALSE(migrations.empty());
  EXPECT_EQ(migrations.front().version, 1);
  EXPECT_EQ(migrations.front().name, "0001_queue_storage.sql");
  for (std::size_t i = 1; i < migrations.size(); ++i) {
    EXPECT_LT(migrations[i - 1].version, migrations[i].version);
  }
}

TEST(SqlCatalogTest, ChecksumChangesWithAnyByte) {
  EXPECT_EQ(schema::checksum("CREATE TABLE t ()"), schema::checksum("CREATE TABLE t ()"));
  EXPECT_NE(schema::checksum("CREATE TABLE t ()"), schema::checksum("CREATE TABLE t ( )"));
  EXPECT_EQ(schema::checksum("").size(), 16U);
}

TEST(SqlCatalogTest, RenderReplacesEverySchemaToken) {
  EXPECT_EQ(sql::render("SELECT * FROM {schema}.a JOIN {schema}.b", "\"s1\""),
            "SELECT * FROM \"s1\".a JOIN \"s1\".b");
  EXPECT_EQ(sql::render("no token", "\"s\""), "no token");
}

TEST(SqlCatalogTest, UnknownFileIsAnError) {
  EXPECT_THROW(sql::file_named("queries/does_not_exist.sql"), Error);
  EXPECT_FALSE(sql::file("queries/enqueue/insert_lane.sql").empty());
}

TEST(SqlCatalogTest, SchemaNamesAreValidatedAndQuoted) {
  EXPECT_EQ(sql::quote_schema("awa"), "\"awa\"");
  EXPECT_EQ(sql::quote_schema("Tenant_7"), "\"Tenant_7\"");
  for (const char* bad : {"", "7abc", "a-b", "a b", "a\"b", "a;drop", "x.y"}) {
    EXPECT_THROW(sql::quote_schema(bad), InvalidArgument) << bad;
  }
  EXPECT_THROW(sql::quote_schema(std::string(64, 'a')), InvalidArgument);
  EXPECT_NO_THROW(sql::quote_schema(std::string(63, 'a')));
}

TEST(SqlCatalogTest, FunctionSetIsPinnedToItsCatalogue) {
  // Guards the upgrade rules (docs/upgrading.md): a function file changed without a new
  // catalogue number would let an older build of the same number reinstall its functions
  // over the new ones. Pinned: the hash of every function file at this catalogue.
  constexpr int kPinnedCatalogue = 8;
  constexpr const char* kPinnedHash = "165f8bd5471bc43c";
  const std::string hash = schema::function_set_hash();
  EXPECT_TRUE(schema::kFunctionCatalogue == kPinnedCatalogue && hash == kPinnedHash)
      << "sql/functions/ or sql/security/function_settings.sql changed (hash " << hash
      << "), or kFunctionCatalogue did (" << schema::kFunctionCatalogue << "). If a function "
      << "file changed: set kFunctionCatalogue in src/schema/function_catalogue.hpp to "
      << kPinnedCatalogue + 1
      << " and pin it here:\n  constexpr int kPinnedCatalogue = " << kPinnedCatalogue + 1
      << ";\n  constexpr const char* kPinnedHash = \"" << hash << "\";\n"
      << "Keep the previous catalogue's callers working, or raise kOldestCompatibleCatalogue. "
      << "(Before catalogue " << kPinnedCatalogue << " is released, refresh the hash only.)";
}

TEST(SqlCatalogTest, FunctionSetHashCoversEveryFunctionFileAndTheSettings) {
  EXPECT_EQ(schema::function_set_hash(), schema::function_set_hash());
  EXPECT_EQ(schema::function_set_hash().size(), 16U);
  EXPECT_FALSE(sql::file("security/function_settings.sql").empty());
}

TEST(SqlCatalogTest, ReadsTheNamesAFunctionFileCreates) {
  const auto names = schema::created_function_names(
      "-- CREATE OR REPLACE FUNCTION {schema}.in_a_comment(\n"
      "DROP FUNCTION IF EXISTS {schema}.old(bigint[]);\n"
      "CREATE OR REPLACE FUNCTION {schema}.close_attempts(\n"
      "    p_batches bigint[])\n"
      "create function {schema}.Claim_Ready (p text)\n"
      "  CREATE   OR  REPLACE   FUNCTION {schema}.close_attempts(p integer)\n"
      "CREATE OR REPLACE VIEW {schema}.not_a_function AS SELECT 1;\n"
      "CREATE FUNCTIONS {schema}.typo(\n"
      "CREATE OR REPLACE FUNCTION other.elsewhere(\n");
  EXPECT_EQ(names, (std::vector<std::string>{"close_attempts", "claim_ready"}));
}

TEST(SqlCatalogTest, ReadsEveryFunctionTheFunctionFilesCreate) {
  // The stale-overload sweep only knows the names it reads: cross-checked here with a
  // regular expression over every line that is not a comment.
  const std::regex create(R"(^\s*CREATE\s+(OR\s+REPLACE\s+)?FUNCTION\s+\{schema\}\.(\w+)\s*\()",
                          std::regex::icase);
  std::size_t total = 0;
  for (const auto& f : sql::all_files()) {
    if (f.name.substr(0, 10) != "functions/") continue;
    std::vector<std::string> expected;
    std::istringstream lines{std::string(f.text)};
    for (std::string line; std::getline(lines, line);) {
      std::smatch m;
      if (!std::regex_search(line, m, create)) continue;
      std::string name = m[2];
      std::transform(name.begin(), name.end(), name.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (std::find(expected.begin(), expected.end(), name) == expected.end()) {
        expected.push_back(name);
      }
    }
    EXPECT_EQ(schema::created_function_names(f.text), expected) << f.name;
    total += expected.size();
  }
  EXPECT_GT(total, 50U);
  const auto claim =
      schema::created_function_names(sql::file("functions/0040_claim_ready_runtime.sql"));
  EXPECT_NE(std::find(claim.begin(), claim.end(), "claim_ready_runtime"), claim.end());
}

}  // namespace
}  // namespace awa
